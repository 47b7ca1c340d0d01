"""RViz markers of what the node did: goals, objectives, planned paths, obstacles, spheres.

The node publishes a ``visualization_msgs/MarkerArray`` on ``~/markers`` (transient local,
depth 1: a late RViz gets the last picture) after each ``~/solve_ik``, ``~/plan_trajectory``
and teleop step. Every message is the whole picture, in the node's base frame, one namespace
per kind (:data:`NAMESPACES`), each opened by a DELETEALL of that namespace so that a new set
replaces the old; ids count from 0 in a fixed order within a namespace.

* ``goal``: the current teleop goal's objectives; ``objectives``: the last ``~/solve_ik``'s;
  ``plan_goal``: the last plan's goal objectives and waypoints. Klampt-style (display.py):
  pose = axes triad (LINE_LIST), position = SPHERE, aim = SPHERE + LINE_STRIP from the link's
  point, hinge / axis = ARROW, plane = thin CUBE, line = LINE_STRIP.
* ``path``: LINE_STRIP through the plan's end-effector positions (forward kinematics of every
  trajectory point; the first goal objective's link, else the tip link).
* ``obstacles``: the last plan request's obstacles (SolidPrimitive SPHERE / BOX / CYLINDER as
  SPHERE / CUBE / CYLINDER markers, half-spaces as large thin CUBEs on the solid side);
  ``scene``: the planning scene's collision objects that plan avoided (or as last handed
  over by :meth:`NodeMarkers.scene_changed`), the same way.
* ``collision_spheres``: the robot's collision spheres at the last answer (IK solution, plan
  end or teleop output), SPHERE_LISTs grouped by radius (rounded up to 5 mm), and its
  collision boxes (the fine Panda set's fingers and hand) as CUBEs.

Nothing is built on the request path: the node hands over references (:class:`NodeMarkers`
methods take microseconds), and a thread of this module builds and publishes at most
:data:`MAX_RATE_HZ` times a second, :data:`SETTLE_SECONDS` after a hand-over at the
earliest, so that the answer is on its way first. A Marker's ``text`` carries its shape's
label (what it shows), also for types RViz draws without text.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
from geometry_msgs.msg import Point
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from shape_msgs.msg import SolidPrimitive
from std_msgs.msg import ColorRGBA, Header
from visualization_msgs.msg import Marker, MarkerArray

from pyroki_ros.ros.conversions import fill_pose, pose_numbers, wxyz_xyz
from pyroki_ros.viz import display
from pyroki_ros.viz.display import Shape

TOPIC = "~/markers"
NAMESPACES = ("goal", "objectives", "plan_goal", "path", "obstacles", "scene", "collision_spheres")
QOS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
MAX_RATE_HZ = 10.0
SETTLE_SECONDS = 0.005
# A plan may carry up to max_obstacles (1,024 by default, settable far higher): RViz and the
# message stay usable with this many drawn.
MAX_OBSTACLE_MARKERS = 1024
# Path points drawn (the trajectory's, evenly subsampled, the last one always kept); also the
# batch size of the one compiled forward-kinematics program that places them.
MAX_PATH_POINTS = 256
# How often the idle builder thread looks whether the node is shutting down.
IDLE_POLL_SECONDS = 0.1

MARKER_TYPES = {
    "axes": Marker.LINE_LIST,
    "sphere": Marker.SPHERE,
    "box": Marker.CUBE,
    "cylinder": Marker.CYLINDER,
    "arrow": Marker.ARROW,
    "line_strip": Marker.LINE_STRIP,
    "line_list": Marker.LINE_LIST,
    "sphere_list": Marker.SPHERE_LIST,
}
SHAPE_KINDS = {
    Marker.SPHERE: "sphere",
    Marker.CUBE: "box",
    Marker.CYLINDER: "cylinder",
    Marker.ARROW: "arrow",
    Marker.LINE_STRIP: "line_strip",
    Marker.LINE_LIST: "line_list",
    Marker.SPHERE_LIST: "sphere_list",
    Marker.POINTS: "sphere_list",
}


# --- shapes <-> markers ---------------------------------------------------------------------------


def _color_msg(rgba: Sequence[float]) -> ColorRGBA:
    r, g, b, a = (float(v) for v in rgba)
    return ColorRGBA(r=r, g=g, b=b, a=a)


def shape_marker(shape: Shape, ns: str, marker_id: int, header: Header) -> Marker:
    """One Marker (ADD) for a shape given in ``header.frame_id``."""
    marker = Marker(header=header, ns=ns, id=marker_id, type=MARKER_TYPES[shape.kind])
    fill_marker(marker, shape)
    return marker


def fill_marker(marker: Marker, shape: Shape) -> None:
    """Sets a Marker's geometry, colour and text from a shape (its type must match), in place:
    building a Marker costs ~0.1 ms (many nested fields), so the builder reuses them."""
    marker.action = Marker.ADD
    fill_pose(marker.pose, shape.pose)
    sx, sy, sz = shape.scale.tolist()
    if shape.kind == "axes":  # a LINE_LIST: its width is scale.x
        sx, sy, sz = sy, 0.0, 0.0
    marker.scale.x, marker.scale.y, marker.scale.z = sx, sy, sz
    c = marker.color
    c.r, c.g, c.b, c.a = (float(v) for v in shape.color)
    marker.points = [Point(x=x, y=y, z=z) for x, y, z in shape.points.tolist()]
    marker.colors = [] if shape.colors is None else [_color_msg(k) for k in shape.colors.tolist()]
    marker.text = shape.label


def delete_all(ns: str, header: Header) -> Marker:
    """DELETEALL of one namespace (Marker.msg: "deletes all objects (or those with the given
    ns if any)")."""
    return Marker(header=header, ns=ns, action=Marker.DELETEALL)


def marker_shape(marker: Marker) -> Shape | None:
    """The shape a Marker draws (pose in ``marker.header.frame_id``), for viewers of this
    topic; None for DELETE / DELETEALL and for types without a shape here (TEXT, MESH,
    TRIANGLE_LIST, CUBE_LIST, ARROW_STRIP)."""
    kind = SHAPE_KINDS.get(marker.type)
    if marker.action != Marker.ADD or kind is None:
        return None
    numbers = pose_numbers(marker.pose)
    if not any(numbers[3:]):  # an unset orientation means no rotation in RViz
        numbers = (*numbers[:3], 0.0, 0.0, 0.0, 1.0)
    pose = wxyz_xyz(numbers)
    scale = np.array([marker.scale.x, marker.scale.y, marker.scale.z], np.float64)
    points = np.array([(q.x, q.y, q.z) for q in marker.points], np.float64).reshape(-1, 3)
    c = marker.color
    colors = None
    if len(marker.colors) == len(points) and len(points):
        colors = np.array([(k.r, k.g, k.b, k.a) for k in marker.colors], np.float64)
    if kind == "arrow" and len(points) < 2:  # pose + length along x: as tail and tip
        points = np.array([[0.0, 0.0, 0.0], [scale[0], 0.0, 0.0]])
        scale = np.array([scale[1], 2 * scale[2], 0.2 * scale[0]])
    if marker.type == Marker.POINTS:  # square points drawn as small spheres
        scale = np.full(3, scale[0])
    return Shape(kind, pose, scale, (c.r, c.g, c.b, c.a), points, colors, marker.text)


def markers_message(groups: dict[str, list[Shape]], frame_id: str) -> MarkerArray:
    """The whole picture: for each namespace of :data:`NAMESPACES` (and any other key of
    ``groups``), its DELETEALL and then its shapes with ids 0, 1, ... Stamp zero: RViz places
    them with the latest transform of ``frame_id``."""
    header = Header(frame_id=frame_id)
    out = MarkerArray()
    for ns in (*NAMESPACES, *(k for k in groups if k not in NAMESPACES)):
        out.markers.append(delete_all(ns, header))
        out.markers.extend(shape_marker(s, ns, i, header) for i, s in enumerate(groups.get(ns, ())))
    return out


# --- what the node knows -> shapes (root frame) ---------------------------------------------------


def primitive_shapes(
    model, objects, frames: np.ndarray, color=display.OBSTACLE_COLOR, limit=MAX_OBSTACLE_MARKERS
) -> list[Shape]:
    """``(label, SolidPrimitive, PoseStamped)`` entries as shapes in the root frame, their
    poses placed with ``frames`` (model.fk at the state the node placed them at). SPHERE,
    BOX and CYLINDER; at most ``limit``; an entry the node would refuse is left out."""
    from pyroki_ros.ros.requests import RequestError, frame, pose

    shapes: list[Shape] = []
    for label, shape, stamped in objects:
        if len(shapes) >= limit:
            break
        try:
            placed = pose(stamped.pose, label)
            row = frame(model, stamped.header.frame_id, label)
        except RequestError:
            continue
        placed = display.compose(frames[row], placed)
        dims = np.asarray(shape.dimensions, np.float64)
        if shape.type == SolidPrimitive.SPHERE and dims.size >= 1:
            shapes.append(display.sphere(placed[4:], 2 * dims[0], color, label))
        elif shape.type == SolidPrimitive.BOX and dims.size >= 3:
            shapes.append(display.box(placed, dims[:3], color, label))
        elif shape.type == SolidPrimitive.CYLINDER and dims.size >= 2:
            radius = dims[SolidPrimitive.CYLINDER_RADIUS]
            height = dims[SolidPrimitive.CYLINDER_HEIGHT]
            shapes.append(display.cylinder(placed, radius, height, color, label))
    return shapes


def request_obstacles(model, request, frames: np.ndarray, base_pose: np.ndarray) -> list[Shape]:
    """Obstacles of a PlanTrajectory request as shapes in the root frame: solids placed with
    ``frames`` (model.fk at the start state), half-spaces (given in the base frame) with
    ``base_pose``; at most :data:`MAX_OBSTACLE_MARKERS`."""
    names = list(request.obstacle_names)
    solids = [
        (names[i] if i < len(names) else f"obstacles[{i}]", shape, stamped)
        for i, (shape, stamped) in enumerate(zip(request.obstacles, request.obstacle_poses))
    ]
    shapes = primitive_shapes(model, solids, frames)
    first = len(request.obstacles)
    for i, plane in enumerate(request.half_spaces):
        if len(shapes) >= MAX_OBSTACLE_MARKERS:
            break
        coef = np.asarray(plane.coef, np.float64)
        if not np.all(np.isfinite(coef)) or np.linalg.norm(coef[:3]) < 1e-9:
            continue
        label = names[first + i] if first + i < len(names) else f"half_spaces[{i}]"
        shapes.append(
            display.halfspace(coef[:3], coef[3], display.OBSTACLE_COLOR, label).in_frame(base_pose)
        )
    return shapes


class _Scene:
    """The shapes of each namespace (root frame), their markers (base frame, rebuilt only for
    namespaces that changed), and the root -> base transform and frame name they use."""

    def __init__(self) -> None:
        self.groups: dict[str, list[Shape]] = {}
        self.markers: dict[str, list[Marker]] = {}
        self._deletes: dict[tuple[str, str], Marker] = {}
        self.frame_id = ""
        self.base_pose = display.IDENTITY.copy()  # base frame in the root frame

    def message(self, changed: set[str]) -> MarkerArray:
        header = Header(frame_id=self.frame_id)
        if any(m.header.frame_id != self.frame_id for ms in self.markers.values() for m in ms[:1]):
            changed = set(self.groups)  # another base frame: every namespace again
        moved = not np.allclose(self.base_pose, display.IDENTITY)
        to_base = display.inverse(self.base_pose)
        for ns in changed:
            shapes = self.groups.get(ns, [])
            if moved:  # the base frame is not the root link
                shapes = [s.in_frame(to_base) for s in shapes]
            old = self.markers.get(ns, [])
            markers = []
            for i, shape in enumerate(shapes):  # reuse the Marker of the same id and type
                if i < len(old) and old[i].type == MARKER_TYPES[shape.kind]:
                    fill_marker(old[i], shape)
                    old[i].header = header
                    markers.append(old[i])
                else:
                    markers.append(shape_marker(shape, ns, i, header))
            self.markers[ns] = markers
        out = MarkerArray()
        for ns in (*NAMESPACES, *(k for k in self.markers if k not in NAMESPACES)):
            key = (ns, self.frame_id)
            if key not in self._deletes:
                self._deletes[key] = delete_all(ns, header)
            out.markers.append(self._deletes[key])
            out.markers.extend(self.markers.get(ns, ()))
        return out


class NodeMarkers:
    """``~/markers`` of a node: hand-overs from the request path, a builder thread.

    Args:
        node: the rclpy node (the publisher is its ``~/markers``; logging).
        spheres_source: the node's ``collision_spheres`` parameter (planning.load_spheres).
        closing: set when the node shuts down: the builder thread ends.
    """

    def __init__(self, node, spheres_source: str, closing: threading.Event):
        self.publisher = node.create_publisher(MarkerArray, TOPIC, QOS)
        self._logger = node.get_logger()
        self._spheres_source = spheres_source
        self._closing = closing
        self._spheres: tuple[object, object] | None = None  # (model, RobotSpheres | None)
        self._path_fk: tuple[object, object] | None = None  # (robot, jitted batched FK)
        self._scene = _Scene()
        self._pending: dict[str, tuple] = {}  # what came in since the last build, by kind
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="pyroki_markers", daemon=True)
        self._thread.start()
        self.published = 0  # messages sent (tests, logs)

    # --- hand-overs (request path: store references, wake the builder) ----------------------

    def ik_solved(self, model, objectives, q: np.ndarray) -> None:
        """A ~/solve_ik answer: its core objectives (root frame) and solution q (n,)."""
        self._hand_over("objectives", (model, tuple(objectives), q))

    def planned(self, model, request, start, positions, scene_objects=()) -> None:
        """A ~/plan_trajectory answer: the request, start (n,), trajectory points (T, n) and
        the planning scene's objects it avoided ((id, SolidPrimitive, PoseStamped) list)."""
        self._hand_over("plan", (model, request, start, positions))
        self._hand_over("scene", (model, list(scene_objects), start))

    def scene_changed(self, model, objects, q) -> None:
        """The planning scene now ((id, SolidPrimitive, PoseStamped) list), frames placed at
        q (n,), e.g. the latest /joint_states."""
        self._hand_over("scene", (model, list(objects), q))

    def teleop_step(self, model, objectives, q: np.ndarray) -> None:
        """A teleop output: the goal's core objectives and the configuration sent (n,)."""
        self._hand_over("goal", (model, tuple(objectives), q))

    def _hand_over(self, kind: str, data: tuple) -> None:
        with self._wake:
            self._pending[kind] = data
            self._wake.notify()

    def close(self) -> None:
        self._closing.set()
        with self._wake:
            self._wake.notify()

    # --- builder thread ------------------------------------------------------------------------

    def _run(self) -> None:
        next_time = 0.0
        while not self._closing.is_set():
            with self._wake:
                if not self._pending:
                    self._wake.wait(IDLE_POLL_SECONDS)
                    continue
            # Throttle, and let the answer that came with this hand-over go out first.
            time.sleep(max(SETTLE_SECONDS, next_time - time.monotonic()))
            with self._wake:
                pending, self._pending = self._pending, {}
            next_time = time.monotonic() + 1.0 / MAX_RATE_HZ
            try:
                message = self._build(pending)
                if self._closing.is_set():
                    return
                self.publisher.publish(message)
                self.published += 1
            except Exception as e:  # noqa: BLE001 -- markers never take the node down
                if self._closing.is_set():
                    return
                self._logger.warning(f"markers not published: {e!r}", throttle_duration_sec=10.0)

    def _build(self, pending: dict[str, tuple]) -> MarkerArray:
        scene = self._scene
        changed: set[str] = set()
        last = None  # (model, q, link poses at q) of the newest answer
        if "scene" in pending:
            model, objects, q = pending["scene"]
            scene.groups["scene"] = primitive_shapes(model, objects, model.fk(q))
            changed.add("scene")
        for kind in ("plan", "objectives", "goal"):  # the teleop output is the newest state
            if kind not in pending:
                continue
            model = pending[kind][0]
            if kind == "plan":
                _, request, start, positions = pending[kind]
                q = np.asarray(positions[-1], np.float64)
                frames = model.fk(q)
                self._draw_plan(model, request, start, positions, frames)
                changed |= {"plan_goal", "path", "obstacles"}
            else:
                _, objectives, q = pending[kind]
                frames = model.fk(q)
                color = display.OBJECTIVE_COLOR if kind == "objectives" else display.GOAL_COLOR
                scene.groups[kind] = display.objective_shapes(
                    objectives, model.link_names, frames[: len(model.link_names)], color, kind
                )
                changed.add(kind)
            last = (model, q, frames)
        if last is not None:
            model, q, frames = last
            links = len(model.link_names)
            scene.frame_id = model.base_frame
            base_pose = frames[model.link_index[model.base_frame]]
            if not np.allclose(base_pose, scene.base_pose):
                changed |= set(scene.groups)
            scene.base_pose = base_pose
            spheres = self._robot_spheres(model)
            scene.groups["collision_spheres"] = (
                []
                if spheres is None
                else display.sphere_lists(
                    display.sphere_centers(spheres, frames[:links]),
                    display.sphere_radii(spheres),
                    display.ROBOT_COLOR,
                )
                + display.robot_boxes(spheres, frames[:links], display.ROBOT_COLOR)
            )
            changed.add("collision_spheres")
        return scene.message(changed)

    def _draw_plan(self, model, request, start, positions, end_frames: np.ndarray) -> None:
        """The plan's namespaces from a request, its start (n,) and trajectory points (T, n);
        ``end_frames``: model.fk at the last point."""
        from pyroki_ros.ros.requests import objective

        scene = self._scene
        frames = model.fk(start)  # where the request's frames were placed by the planner
        links = len(model.link_names)
        base_pose = frames[model.link_index[model.base_frame]]
        objectives = []
        for i, o in enumerate(request.goal_objectives):
            objectives.append(objective(model, o, f"goal_objectives[{i}]", frames))
        for w, group in enumerate(request.waypoints):
            for i, o in enumerate(group.objectives):
                what = f"waypoints[{w}].objectives[{i}]"
                objectives.append(objective(model, o, what, frames, group.header.frame_id))
        scene.groups["plan_goal"] = display.objective_shapes(
            objectives, model.link_names, end_frames[:links], display.PLAN_GOAL_COLOR, "plan_goal"
        )
        tip = objectives[0].link if objectives else model.tip_link
        scene.groups["path"] = [
            display.line_strip(
                self._tip_path(model, tip, positions), display.PATH_COLOR, f"path {tip}"
            )
        ]
        scene.groups["obstacles"] = request_obstacles(model, request, frames, base_pose)

    def _tip_path(self, model, tip: str, positions: np.ndarray) -> np.ndarray:
        """Root-frame positions (k, 3) of ``tip`` along the trajectory (T, n), at most
        :data:`MAX_PATH_POINTS` of them, the last point included; one batched FK call."""
        import jax

        from pyroki_ros import forward_kinematics

        positions = np.asarray(positions, np.float64)
        rows = np.unique(np.linspace(0, len(positions) - 1, MAX_PATH_POINTS).round().astype(int))
        batch = np.zeros((MAX_PATH_POINTS, positions.shape[1]), np.dtype(model.robot.dtype))
        batch[: len(rows)] = positions[rows]
        batch[len(rows) :] = positions[-1]
        if self._path_fk is None or self._path_fk[0] is not model.robot:
            self._path_fk = (model.robot, jax.jit(forward_kinematics))
        poses = np.asarray(self._path_fk[1](model.robot, batch).wxyz_xyz, np.float64)
        return poses[: len(rows), model.link_index[tip], 4:]

    def _robot_spheres(self, model):
        if self._spheres is None or self._spheres[0] is not model:
            from pyroki_ros.ros.planning import load_spheres

            try:
                spheres, _ = load_spheres(model, self._spheres_source)
            except (ValueError, OSError) as e:
                self._logger.warning(f"markers: no collision spheres to draw: {e}")
                spheres = None
            self._spheres = (model, spheres)
        return self._spheres[1]


class _Off:
    """``publish_markers: false``: the hand-overs do nothing."""

    def ik_solved(self, *args) -> None:
        pass

    def planned(self, *args) -> None:
        pass

    def teleop_step(self, *args) -> None:
        pass

    def scene_changed(self, *args) -> None:
        pass

    def close(self) -> None:
        pass


OFF = _Off()
