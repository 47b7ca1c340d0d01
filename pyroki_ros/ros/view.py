"""``pyroki-ros view``: a running node, seen in the browser (viser, pyroki_ros/viz/viewer.py).

A ROS client: it subscribes the node's ``~/markers`` (goals, objectives, planned path,
obstacles, collision spheres), ``/robot_description`` (the robot to draw; or ``--urdf``),
``/joint_states`` (the robot's configuration) and the node's trajectory topic (a trajectory of
two or more points becomes a plan to play with the slider; one-point teleop commands move the
robot), and shows them on a viser page. Nothing is sent to the node.

:class:`DemoView` shows the steps of ``pyroki-ros demo --view`` on such a page.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from pyroki_ros.viz import display

NODE = "/pyroki_ros_node"
JOINT_STATES = "/joint_states"
TRAJECTORY_TOPIC = "/joint_trajectory_controller/joint_trajectory"
ROBOT_DESCRIPTION = "/robot_description"
# /joint_states redraws at most this often (a driver may publish at 1 kHz).
MAX_STATE_RATE_HZ = 30.0


class ViewClient:
    """The subscriptions of ``pyroki-ros view`` and the viewer they feed.

    Args:
        host, port: where the viewer serves.
        node: the pyroki_ros node's full name (its ``~/markers``).
        joint_states, trajectory_topic, robot_description: topic names.
        urdf: a URDF file or bundled robot name, instead of waiting for robot_description.
        domain_id: ROS domain (default: ROS_DOMAIN_ID).
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        node: str = NODE,
        joint_states: str = JOINT_STATES,
        trajectory_topic: str = TRAJECTORY_TOPIC,
        robot_description: str = ROBOT_DESCRIPTION,
        urdf: str | None = None,
        domain_id: int | None = None,
    ):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from rclpy.signals import SignalHandlerOptions
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from trajectory_msgs.msg import JointTrajectory
        from visualization_msgs.msg import MarkerArray

        from pyroki_ros.ros import markers

        self._host, self._port = host, port
        self.viewer = None  # made when the robot is known
        self.ready = threading.Event()
        self._lock = threading.Lock()
        # namespace -> id -> (frame_id, shape), as RViz would keep them
        self._namespaces: dict[str, dict[int, tuple[str, display.Shape]]] = {}
        self._q: np.ndarray | None = None
        self._last_state = 0.0
        self.messages = {"markers": 0, "joint_states": 0, "trajectories": 0}

        self.context = rclpy.Context()
        rclpy.init(
            context=self.context,
            domain_id=domain_id,
            signal_handler_options=SignalHandlerOptions.NO,
        )
        self.node = rclpy.create_node("pyroki_ros_view", context=self.context)
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        if urdf:
            self._set_robot(_read_urdf(urdf), urdf_file=_urdf_file(urdf))
        else:
            self.node.create_subscription(
                String, robot_description, lambda m: self._set_robot(m.data), latched
            )
        self.node.create_subscription(
            MarkerArray, f"{node.rstrip('/')}/markers", self._on_markers, markers.QOS
        )
        self.node.create_subscription(JointState, joint_states, self._on_joint_state, 10)
        self.node.create_subscription(JointTrajectory, trajectory_topic, self._on_trajectory, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="pyroki_view_ros", daemon=True)
        self._thread.start()

    @property
    def configuration(self) -> np.ndarray | None:
        """The configuration (n,) last shown from /joint_states, None before the first."""
        return self._q

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # noqa: BLE001, S110 -- the context was shut down while spinning
            pass

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=2.0)
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)
        # Joined before exit: a callback still drawing (FK in XLA) in a daemon thread at
        # interpreter exit aborts the process.
        self._thread.join(timeout=5.0)
        if self.viewer is not None:
            self.viewer.close()

    # --- the robot --------------------------------------------------------------------------------

    def _set_robot(self, urdf: str, urdf_file: Path | None = None) -> None:
        from pyroki_ros import Robot
        from pyroki_ros.collision import RobotSpheres
        from pyroki_ros.robots import AVAILABLE
        from pyroki_ros.viz.viewer import Viewer

        if self.viewer is not None:  # one robot per viewer: a new description is ignored
            return
        try:
            robot = Robot.from_urdf(urdf)
        except ValueError as e:
            self.node.get_logger().error(f"robot description not usable: {e}")
            return
        spheres = None
        if robot.name in AVAILABLE:
            try:
                spheres = RobotSpheres.embedded(robot.name, robot)
            except ValueError:
                spheres = None
        if spheres is None:
            spheres = RobotSpheres.from_urdf(robot, urdf)
        self.viewer = Viewer(
            robot, spheres, urdf=urdf_file, host=self._host, port=self._port, label=robot.name
        )
        self.ready.set()
        self._redraw_markers()

    # --- callbacks ----------------------------------------------------------------------------------

    def _names_to_q(self, names, positions) -> np.ndarray | None:
        viewer = self.viewer
        if viewer is None:
            return None
        q = np.array(viewer.robot.center() if self._q is None else self._q, np.float64)
        index = {n: i for i, n in enumerate(viewer.robot.joint_names)}
        for name, value in zip(names, positions):
            if name in index:
                q[index[name]] = value
        return q

    def _on_joint_state(self, msg) -> None:
        self.messages["joint_states"] += 1
        now = time.monotonic()
        if now - self._last_state < 1.0 / MAX_STATE_RATE_HZ:
            return
        q = self._names_to_q(msg.name, msg.position)
        if q is None:
            return
        self._last_state = now
        self._q = q
        if not self.viewer.playing:  # a plan being played keeps the robot
            self.viewer.show_configuration(q)

    def _on_trajectory(self, msg) -> None:
        self.messages["trajectories"] += 1
        if self.viewer is None or not msg.points:
            return
        rows = [self._names_to_q(msg.joint_names, p.positions) for p in msg.points]
        if len(rows) == 1:  # a teleop command: where the robot goes next
            if not self.viewer.playing:
                self.viewer.show_configuration(rows[0])
            return
        times = np.array(
            [p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in msg.points]
        )
        tip = None
        if self._namespaces.get("path"):
            label = next(iter(self._namespaces["path"].values()))[1].label
            tip = label.removeprefix("path ") if label.startswith("path ") else None
        if tip not in self.viewer.robot.link_names:
            tip = None
        self.viewer.show_plan(np.stack(rows), times, tip=tip)

    def _on_markers(self, msg) -> None:
        from pyroki_ros.ros.markers import marker_shape

        self.messages["markers"] += 1
        with self._lock:
            for marker in msg.markers:
                if marker.action == marker.DELETEALL:
                    if marker.ns:
                        self._namespaces[marker.ns] = {}
                    else:
                        self._namespaces.clear()
                    continue
                space = self._namespaces.setdefault(marker.ns, {})
                if marker.action == marker.DELETE:
                    space.pop(marker.id, None)
                    continue
                shape = marker_shape(marker)
                if shape is not None:
                    space[marker.id] = (marker.header.frame_id, shape)
        self._redraw_markers()

    # --- drawing ------------------------------------------------------------------------------------

    def _root_shapes(self, entries) -> list[display.Shape]:
        """Marker shapes into the robot's root frame: a link's frame placed at the current
        configuration (the node's markers are in its base frame, usually the root link); any
        other frame (e.g. a world frame the robot stands in) taken as the root."""
        viewer = self.viewer
        links = viewer.robot.link_names
        poses = viewer.link_poses(viewer.robot.center() if self._q is None else self._q)
        out = []
        for frame, shape in entries:
            name = frame.lstrip("/")
            out.append(shape.in_frame(poses[links.index(name)]) if name in links else shape)
        return out

    def _redraw_markers(self) -> None:
        if self.viewer is None:
            return
        with self._lock:
            spaces = {ns: [v for _, v in sorted(s.items())] for ns, s in self._namespaces.items()}
        for ns, entries in spaces.items():
            self.viewer.show_shapes(f"markers/{ns or 'default'}", self._root_shapes(entries))


class DemoView:
    """``pyroki-ros demo --view``: each step's result in the web viewer (pyroki_ros/viz/viewer.py),
    in the Panda's root frame (panda_link0, the demo's base frame)."""

    def __init__(self, viewer, rest: dict[str, float]):
        self.viewer = viewer
        self.rest = rest  # joint values where a message names none

    @classmethod
    def start(cls, host: str, port: int, say, rest: dict[str, float]) -> DemoView:
        from pyroki_ros import Robot
        from pyroki_ros.collision import RobotSpheres
        from pyroki_ros.robots import urdf_path
        from pyroki_ros.viz.viewer import Viewer

        robot = Robot.from_urdf(urdf_path("panda"))
        spheres = RobotSpheres.embedded("panda", robot)
        viewer = Viewer(robot, spheres, urdf=urdf_path("panda"), host=host, port=port)
        say(f"viewer: {viewer.url}  (open it in a browser: every step shows there)")
        return cls(viewer, rest)

    @staticmethod
    def finish(shown: DemoView | None, seconds: float, say, code: int) -> int:
        """Keeps the viewer up after the demo: ``seconds`` (< 0: until Ctrl+C)."""
        if shown is None:
            return code
        url = shown.viewer.url
        if seconds < 0:
            say(f"viewer: {url} shows the results; Ctrl+C to quit")
        try:
            deadline = float("inf") if seconds < 0 else time.monotonic() + seconds
            while time.monotonic() < deadline:
                time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            shown.viewer.close()
        return code

    def _q(self, names, positions) -> np.ndarray:
        robot = self.viewer.robot
        q = np.array([self.rest.get(n, 0.0) for n in robot.joint_names])
        for name, value in zip(names, positions):
            if name in robot.joint_names:
                q[robot.joint_names.index(name)] = value
        return q

    def state(self, values: dict) -> None:
        self.viewer.show_configuration(self._q(list(values), list(values.values())))

    def goal(self, label: str, pose, solution) -> None:
        self.viewer.show_goal(label, _wxyz_xyz(pose))
        self.viewer.show_configuration(self._q(solution.name, solution.position))

    def hinge_plane(self, tcp, axis, elbow, solution) -> None:
        from pyroki_ros import objectives as O

        q = self._q(solution.name, solution.position)
        point, height = [tcp.x, tcp.y, tcp.z], [elbow.x, elbow.y, elbow.z]
        self.viewer.show_objectives(
            [
                O.hinge("panda_hand_tcp", [0, 0, 0], [0, 0, 1], point, axis),
                O.plane("panda_link4", [0, 0, 0], height, [0, 0, 1]),
            ],
            q,
        )
        self.viewer.show_configuration(q)

    def teleop(self, received) -> None:
        """The teleop outputs as a plan (times of arrival): the slider replays the circle."""
        t0 = received[0][0]
        path = [self._q(m.joint_names, m.points[0].positions) for _, m in received]
        self.viewer.show_plan(np.stack(path), np.array([t - t0 for t, _ in received]), "panda_hand")

    def plan(self, box, box_pose, goal_pose, trajectory) -> None:
        from pyroki_ros.collision import World

        half = np.asarray(box.dimensions, np.float64) / 2
        world = World.create(
            box_poses=[_wxyz_xyz(box_pose)], box_half_extents=[half], names=["box"]
        )
        self.viewer.show_world(world)
        self.viewer.show_shapes("objectives", [])
        self.viewer.show_goal("plan goal", _wxyz_xyz(goal_pose))
        names = trajectory.joint_names
        path = np.stack([self._q(names, p.positions) for p in trajectory.points])
        times = [
            p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec for p in trajectory.points
        ]
        self.viewer.show_plan(path, np.array(times), "panda_hand")
        self.viewer.play()


def _wxyz_xyz(pose) -> np.ndarray:
    from pyroki_ros.ros.conversions import pose_to_wxyz_xyz

    return pose_to_wxyz_xyz(pose)


def _read_urdf(urdf: str) -> str:
    path = _urdf_file(urdf)
    if path is None:
        raise SystemExit(f"error: --urdf '{urdf}' is neither a file nor a bundled robot")
    return path.read_text()


def _urdf_file(urdf: str) -> Path | None:
    from pyroki_ros.robots import AVAILABLE, urdf_path

    if Path(urdf).is_file():
        return Path(urdf)
    return urdf_path(urdf) if urdf in AVAILABLE else None


def run(args) -> int:
    """``pyroki-ros view``: until Ctrl+C (or ``args.seconds``)."""
    client = ViewClient(
        host=args.host,
        port=args.port,
        node=args.node,
        joint_states=args.joint_states,
        trajectory_topic=args.trajectory_topic,
        robot_description=args.robot_description,
        urdf=args.urdf,
    )
    try:
        if not client.ready.is_set():
            print(f"waiting for the robot on {args.robot_description} (or give --urdf) ...")
        while not client.ready.wait(0.5):
            pass
        print(f"pyroki-ros view: {client.viewer.url}  (Ctrl+C to stop)", flush=True)
        deadline = None if args.seconds <= 0 else time.monotonic() + args.seconds
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
    return 0
