"""``pyroki-ros demo``: the node end to end on the bundled Panda, in about half a minute.

Starts ``pyroki_ros_node`` as a subprocess in a private DDS domain, plays robot_state_publisher
(the URDF on /robot_description, transient local) and a robot driver (/joint_states), calls
every service, streams teleop goals along a circle and prints what comes back, with timings.
"""

from __future__ import annotations

import copy
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

NODE = "/pyroki_ros_node"
# s: the demo's first plan waits for the node's planner warm-up (config/panda.yaml: the fine
# set and its exact model). The node logs how long it took ("planning programs compiled in
# the background"); in test_demo_runs_end_to_end on this project's 2-core VM (2026-12-02)
# it had not finished 150 s after the plan was asked, the budget before.
FIRST_PLAN_BUDGET_S = 400.0
# A comfortable Panda configuration ("ready" pose), actuated joint order of panda.urdf.
READY = {
    "panda_joint1": 0.0,
    "panda_joint2": -0.785,
    "panda_joint3": 0.0,
    "panda_joint4": -2.356,
    "panda_joint5": 0.0,
    "panda_joint6": 1.571,
    "panda_joint7": 0.785,
    "panda_finger_joint1": 0.02,
    "panda_finger_joint2": 0.02,
}
DOWN_XYZW = (1.0, 0.0, 0.0, 0.0)  # 180 deg about x: the hand's z axis points down


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def _q(values) -> str:
    return "[" + ", ".join(f"{v:+.3f}" for v in values) + "]"


def _pose(pose) -> str:
    p, o = pose.position, pose.orientation
    return (
        f"xyz ({p.x:+.3f}, {p.y:+.3f}, {p.z:+.3f}) m, "
        f"xyzw ({o.x:+.3f}, {o.y:+.3f}, {o.z:+.3f}, {o.w:+.3f})"
    )


class _Out:
    def __init__(self):
        self.start = time.perf_counter()

    def section(self, title: str) -> None:
        print(
            f"\n== {title} " + "=" * max(0, 70 - len(title)) + f" [t = {self.elapsed():.1f} s]",
            flush=True,
        )

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def line(self, text: str = "") -> None:
        print(text, flush=True)


def run(
    timeout: float = 150.0,
    view: bool = False,
    host: str = "127.0.0.1",
    port: int = 8080,
    view_seconds: float = -1.0,
) -> int:
    """Runs the demo; returns 0 on success, 1 if any step failed. With ``view``, each step's
    result is also shown in the web viewer at ``host``:``port``, which stays up afterwards
    for ``view_seconds`` (< 0: until Ctrl+C)."""
    out = _Out()
    from pyroki_ros.ros.process import (
        NodeProcess,
        RosSession,
        repo_config,
        reserve_domain_id,
        ros_environment,
    )
    from pyroki_ros.ros.view import DemoView

    reservation = None
    if os.environ.get("ROS_DOMAIN_ID"):
        domain_id = int(os.environ["ROS_DOMAIN_ID"])
    else:
        reservation = reserve_domain_id("demo")
        domain_id = reservation.domain_id
    discovery = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    log_dir = Path(tempfile.mkdtemp(prefix="pyroki_ros_demo_"))
    env = ros_environment(domain_id, log_dir, discovery)
    os.environ.update(env)  # this process's rclpy too

    from pyroki_ros.robots import urdf_path

    urdf = urdf_path("panda").read_text()
    config = repo_config("panda")
    ros_args = ["--params-file", str(config)] if config else []
    # The demo's batch has 1000 targets (bucket 1024): skip compiling the other buckets.
    ros_args += ["-p", "warmup_batch_sizes:=[1024]"]
    ros_args += ["-p", "allow_execute:=true"]  # the demo publishes its plan
    if not config:
        ros_args += ["-p", "base_frame:=panda_link0", "-p", "tip_link:=panda_hand"]

    out.section("pyroki_ros demo: bundled Franka Panda")
    out.line(
        f"ROS_DOMAIN_ID={domain_id}  ROS_AUTOMATIC_DISCOVERY_RANGE={discovery}  logs: {log_dir}"
    )
    shown = DemoView.start(host, port, out.line, READY) if view else None
    node = NodeProcess(ros_args, env, log_dir / "node.log")
    out.line(f"node: {' '.join(node.command)}  (pid {node.pid})")
    failures: list[str] = []
    session = None
    try:
        session = RosSession("pyroki_ros_demo", domain_id)
        _Demo(session, node, urdf, out, failures, timeout, shown).run()
    except Exception as e:  # noqa: BLE001 -- report, clean up, non-zero exit
        failures.append(f"{type(e).__name__}: {e}")
    finally:
        if session is not None:
            session.close()
        code = node.stop()
        if reservation is not None:
            reservation.release()
    out.section("end")
    out.line(f"node stopped (exit code {code}); node log: {node.log_path}")
    if failures:
        out.line("FAILED:\n  " + "\n  ".join(failures))
        tail = node.log().splitlines()[-15:]
        out.line("last node log lines:\n  " + "\n  ".join(tail))
        return DemoView.finish(shown, view_seconds, out.line, 1)
    out.line(f"demo finished in {out.elapsed():.1f} s")
    return DemoView.finish(shown, view_seconds, out.line, 0)


class _Demo:
    def __init__(self, session, node, urdf, out, failures, timeout, view=None):
        self.s, self.node, self.urdf, self.out = session, node, urdf, out
        self.failures, self.timeout = failures, timeout
        self.view = view

    def show(self, what: str, *args) -> None:
        """``DemoView.<what>(*args)`` with --view; a drawing error is reported, not raised."""
        if self.view is None:
            return
        try:
            getattr(self.view, what)(*args)
        except Exception as e:  # noqa: BLE001
            self.failures.append(f"viewer ({what}): {e!r}")

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)
            self.out.line(f"  !! {what}")

    def run(self) -> None:
        from geometry_msgs.msg import PoseStamped
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String
        from trajectory_msgs.msg import JointTrajectory

        from pyroki_ros.srv import ComputeFK, SolveIK, SolveIKBatch

        s, out = self.s, self.out
        node = s.node
        latched = QoSProfile(
            depth=1,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.TRANSIENT_LOCAL,
        )
        description = node.create_publisher(String, "/robot_description", latched)
        description.publish(String(data=self.urdf))
        joint_states = node.create_publisher(JointState, "/joint_states", 10)
        self.state = dict(READY)

        def publish_state():
            msg = JointState(name=list(self.state), position=list(self.state.values()))
            msg.header.stamp = node.get_clock().now().to_msg()
            joint_states.publish(msg)

        node.create_timer(0.05, publish_state)
        self.trajectories: list[tuple[float, JointTrajectory]] = []
        lock = threading.Lock()

        def on_trajectory(msg):
            with lock:
                self.trajectories.append((time.perf_counter(), msg))

        node.create_subscription(
            JointTrajectory, "/joint_trajectory_controller/joint_trajectory", on_trajectory, 100
        )
        self.goal_pub = node.create_publisher(PoseStamped, f"{NODE}/goal_pose", 10)
        out.line(
            "published the URDF on /robot_description (transient local) and /joint_states "
            "at 20 Hz (the 'ready' pose)"
        )

        self.fk = s.client(ComputeFK, f"{NODE}/compute_fk", wait=self.timeout, node=self.node)
        self.ik = s.client(SolveIK, f"{NODE}/solve_ik", wait=self.timeout, node=self.node)
        self.batch = s.client(
            SolveIKBatch, f"{NODE}/solve_ik_batch", wait=self.timeout, node=self.node
        )
        out.line(
            f"services up after {out.elapsed():.1f} s; waiting for the model (compilation; "
            "cached for the next run) ..."
        )
        self.wait_for_model()
        self.compute_fk()
        self.solve_pose()
        self.solve_hinge()
        self.solve_batch()
        self.teleop()
        self.plan_around_obstacle()
        self.latency()

    # --- steps ----------------------------------------------------------------------------------

    def call(self, client, request, timeout=60.0):
        start = time.perf_counter()
        response = self.s.call(client, request, timeout=timeout)
        return response, time.perf_counter() - start

    def wait_for_model(self) -> None:
        from pyroki_ros.msg import ErrorCode
        from pyroki_ros.srv import ComputeFK

        response = self.s.poll(
            self.fk,
            ComputeFK.Request(link_names=["panda_hand"]),
            lambda r: r.error_code.val == ErrorCode.SUCCESS,
            self.timeout,
            node=self.node,
        )
        if response.error_code.val != ErrorCode.SUCCESS:
            raise TimeoutError(f"no model after {self.timeout:.0f} s: {response.message}")
        ready = [line for line in self.node.log().splitlines() if "ready:" in line]
        self.out.line(f"model ready at t = {self.out.elapsed():.1f} s")
        if ready:
            self.out.line("  node: " + ready[-1].split("]: ", 1)[-1])

    def compute_fk(self) -> None:
        from pyroki_ros.srv import ComputeFK

        self.out.section("~/compute_fk: where is the hand now?")
        response, rtt = self.call(
            self.fk, ComputeFK.Request(link_names=["panda_hand", "panda_hand_tcp", "panda_link4"])
        )
        self.check(response.error_code.val == 1, f"compute_fk failed: {response.message}")
        for name, pose in zip(response.link_names, response.poses):
            self.out.line(f"  {name:15s} in {pose.header.frame_id}: {_pose(pose.pose)}")
        self.out.line(f"  round trip {_ms(rtt)}")
        self.hand = response.poses[0].pose
        self.show("state", READY)

    def solve_pose(self) -> None:
        from pyroki_ros.msg import IKObjective
        from pyroki_ros.srv import SolveIK

        self.out.section("~/solve_ik: hand 10 cm forward, 15 cm to the left, 10 cm down")
        objective = IKObjective(type=IKObjective.POSE, link="panda_hand")
        objective.target.header.frame_id = "panda_link0"
        objective.target.pose.position.x = self.hand.position.x + 0.10
        objective.target.pose.position.y = self.hand.position.y + 0.15
        objective.target.pose.position.z = self.hand.position.z - 0.10
        objective.target.pose.orientation = self.hand.orientation
        self.out.line(f"  target panda_hand: {_pose(objective.target.pose)}")
        response, rtt = self.call(self.ik, SolveIK.Request(objectives=[objective]))
        self.report_ik(response, rtt)
        self.check(response.success, f"solve_ik (pose) failed: {response.message}")
        self.show("goal", "solve_ik target", objective.target.pose, response.solution)

    def solve_hinge(self) -> None:
        from builtin_interfaces.msg import Duration
        from sensor_msgs.msg import JointState

        from pyroki_ros.msg import IKObjective
        from pyroki_ros.srv import ComputeFK, SolveIK

        self.out.section("~/solve_ik: two objectives (HINGE + PLANE)")
        # Targets taken from another configuration, so both are reachable together.
        other = dict(READY, panda_joint1=0.5, panda_joint2=-0.3, panda_joint4=-2.0)
        response, _ = self.call(
            self.fk,
            ComputeFK.Request(
                robot_state=JointState(name=list(other), position=list(other.values())),
                link_names=["panda_hand_tcp", "panda_link4"],
            ),
        )
        tcp, elbow = (p.pose for p in response.poses)
        hinge = IKObjective(type=IKObjective.HINGE, link="panda_hand_tcp")
        hinge.target.pose.position = tcp.position
        axis = _z_axis(tcp.orientation)
        hinge.axis.x, hinge.axis.y, hinge.axis.z = axis
        hinge.local_axis.z = 1.0
        plane = IKObjective(type=IKObjective.PLANE, link="panda_link4", position_weight=0.5)
        plane.target.pose.position = elbow.position
        plane.axis.z = 1.0
        self.out.line(
            f"  HINGE panda_hand_tcp: point ({tcp.position.x:+.3f}, "
            f"{tcp.position.y:+.3f}, {tcp.position.z:+.3f}), tool z axis along "
            f"({axis[0]:+.3f}, {axis[1]:+.3f}, {axis[2]:+.3f}), free spin about it"
        )
        self.out.line(f"  PLANE panda_link4 (elbow): stays at height z = {elbow.position.z:+.3f}")
        # A new objective combination compiles (~1-2 s, counted in the budget): allow for it.
        request = SolveIK.Request(objectives=[hinge, plane], timeout=Duration(sec=60))
        response, rtt = self.call(self.ik, request)
        self.report_ik(response, rtt)
        self.check(response.success, f"solve_ik (hinge + plane) failed: {response.message}")
        self.show("hinge_plane", tcp.position, axis, elbow.position, response.solution)
        self.out.line(
            "  (a new objective structure: the first request compiles it, unless the "
            "compilation cache has it from an earlier run)"
        )
        again, rtt = self.call(self.ik, request)
        self.out.line(
            f"  same request again: success {again.success}, solve "
            f"{_ms(again.solve_time)}, round trip {_ms(rtt)}"
        )

    def report_ik(self, response, rtt: float) -> None:
        self.out.line(
            f"  success {response.success} (error_code {response.error_code.val})"
            + (f": {response.message}" if response.message else "")
        )
        self.out.line(f"  solution {_q(response.solution.position)}")
        self.out.line(f"           ({', '.join(response.solution.name)})")
        errors = ", ".join(
            f"{p * 1e3:.3f} mm / {math.degrees(o):.3f} deg"
            for p, o in zip(response.position_errors, response.orientation_errors)
        )
        self.out.line(f"  errors per objective: {errors}")
        self.out.line(
            f"  {response.iterations} iterations, solve {_ms(response.solve_time)}, "
            f"round trip {_ms(rtt)}"
        )

    def solve_batch(self) -> None:
        from geometry_msgs.msg import PoseStamped

        from pyroki_ros.srv import SolveIKBatch

        self.out.section("~/solve_ik_batch: reachability of 1000 hand poses (pointing down)")
        xs, ys = np.linspace(0.25, 0.7, 10), np.linspace(-0.4, 0.4, 10)
        zs = np.linspace(0.1, 0.8, 10)
        request = SolveIKBatch.Request(link="panda_hand")
        for z in zs:
            for y in ys:
                for x in xs:
                    target = PoseStamped()
                    target.header.frame_id = "panda_link0"
                    target.pose.position.x, target.pose.position.y = float(x), float(y)
                    target.pose.position.z = float(z)
                    o = target.pose.orientation
                    o.x, o.y, o.z, o.w = DOWN_XYZW
                    request.targets.append(target)
        self.out.line("  grid x 0.25..0.70, y -0.40..0.40, z 0.10..0.80 m (10 x 10 x 10)")
        response, rtt = self.call(self.batch, request, timeout=self.timeout)
        self.check(response.error_code.val == 1, f"batch failed: {response.message}")
        success = np.array(response.success, bool)
        self.out.line(
            f"  {success.sum()}/{len(success)} reachable within tolerance; "
            f"solve {_ms(response.solve_time)}, round trip {_ms(rtt)}"
        )
        if rtt > response.solve_time + 1.0:
            self.out.line(
                "  (the round trip includes waiting for the node to finish compiling "
                "the 1024-target program, which it started when the model loaded)"
            )
            response, rtt = self.call(self.batch, request, timeout=self.timeout)
            self.out.line(
                f"  same batch again: solve {_ms(response.solve_time)}, round trip "
                f"{_ms(rtt)} ({rtt / len(success) * 1e6:.0f} us per target)"
            )
        layers = success.reshape(10, 100).sum(axis=1)
        self.out.line(
            "  reachable per height: " + ", ".join(f"z={z:.2f}: {n}" for z, n in zip(zs, layers))
        )
        self.check(success.sum() > 300, "fewer than 300 of 1000 grid poses reachable")

    def teleop(self) -> None:
        from geometry_msgs.msg import PoseStamped

        self.out.section("teleop: ~/goal_pose along a circle -> JointTrajectory")
        rate, seconds, radius = 30.0, 4.0, 0.10
        center = np.array([0.45, 0.0, 0.45])
        with_limits = _panda_velocity_limits(self.urdf)
        self.out.line(
            f"  streaming {int(rate * seconds)} goals at {rate:.0f} Hz: circle r = "
            f"{radius:.2f} m around {center.tolist()} in the y-z plane, hand down"
        )
        first_index = len(self.trajectories)
        start = time.perf_counter()
        for k in range(int(rate * seconds) + 1):
            angle = 2 * math.pi * k / (rate * seconds)
            goal = PoseStamped()
            goal.header.frame_id = "panda_link0"
            goal.pose.position.x = float(center[0])
            goal.pose.position.y = float(center[1] + radius * math.cos(angle))
            goal.pose.position.z = float(center[2] + radius * math.sin(angle))
            o = goal.pose.orientation
            o.x, o.y, o.z, o.w = DOWN_XYZW
            self.goal_pub.publish(goal)
            time.sleep(max(0.0, start + (k + 1) / rate - time.perf_counter()))
        time.sleep(1.0)  # let the node catch up with the last goal
        received = self.trajectories[first_index:]
        self.check(len(received) > 10, f"only {len(received)} trajectory messages received")
        self.show("teleop", received)
        if not received:
            return
        t0, first = received[0]
        point = first.points[0]
        self.out.line(
            f"  {len(received)} JointTrajectory messages on "
            "/joint_trajectory_controller/joint_trajectory; the first one:"
        )
        self.out.line(f"    joint_names: {list(first.joint_names)}")
        self.out.line(f"    points[0].positions: {_q(point.positions)}")
        dt = point.time_from_start.sec + 1e-9 * point.time_from_start.nanosec
        self.out.line(f"    points[0].time_from_start: {dt:.3f} s")
        self.out.line("  every 15th message (t since first, positions):")
        for t, msg in received[::15]:
            self.out.line(f"    {t - t0:5.2f} s  {_q(msg.points[0].positions)}")
        positions = np.array([m.points[0].positions for _, m in received])
        names = list(first.joint_names)
        limits = np.array([with_limits.get(n, np.inf) for n in names]) * 0.5  # velocity_scaling
        if len(positions) > 1:
            speed = np.max(np.abs(np.diff(positions, axis=0)) / dt, axis=0)
            ratio = float(np.max(speed / limits))
            self.out.line(f"  fastest joint step: {ratio:.2f} x (velocity_scaling x URDF limit)")
            self.check(ratio <= 1.0 + 1e-3, "teleop step above the velocity limit")

    def plan_around_obstacle(self) -> None:
        from builtin_interfaces.msg import Duration
        from geometry_msgs.msg import PoseStamped
        from shape_msgs.msg import SolidPrimitive

        from pyroki_ros.msg import ErrorCode, IKObjective
        from pyroki_ros.srv import ComputeFK, PlanTrajectory

        out = self.out
        out.section("~/plan_trajectory: move the hand 0.5 m sideways, over a box in the way")
        client = self.s.client(
            PlanTrajectory, f"{NODE}/plan_trajectory", wait=self.timeout, node=self.node
        )
        hand, _ = self.call(
            self.fk,
            ComputeFK.Request(link_names=["panda_hand"], robot_state=_joint_state(READY)),
        )
        p = copy.deepcopy(hand.poses[0].pose.position)  # the goal below edits the pose
        box = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.16, 0.08, 0.24])
        box_pose = PoseStamped()
        box_pose.header.frame_id = "panda_link0"
        box_pose.pose.position.x, box_pose.pose.position.y = p.x, p.y - 0.26
        box_pose.pose.position.z = p.z - 0.05
        box_pose.pose.orientation.w = 1.0
        goal = IKObjective(type=IKObjective.POSE, link="panda_hand")
        goal.target.header.frame_id = "panda_link0"
        goal.target.pose = copy.deepcopy(hand.poses[0].pose)
        goal.target.pose.position.y = p.y - 0.5
        out.line(
            f"  hand at {_pose(hand.poses[0].pose)}; box 16 x 8 x 24 cm centred at "
            f"({p.x:.3f}, {p.y - 0.26:.3f}, {p.z - 0.05:.3f}); goal: the same pose at "
            f"y = {p.y - 0.5:.3f}"
        )
        request = PlanTrajectory.Request(
            start_state=_joint_state(READY),
            goal_objectives=[goal],
            obstacles=[box],
            obstacle_poses=[box_pose],
            execute=True,
            # Right after the model loads, the node's warm-up holds the planner (minutes on a
            # 2-core machine with the fine set: the node logs it) and a plan waits for it at
            # most its budget.
            timeout=Duration(sec=int(max(self.timeout, FIRST_PLAN_BUDGET_S))),
        )
        out.line(
            "  planning (the first plan waits for the node's warm-up of the planner, or "
            "compiles; cached for the next run) ..."
        )
        before = len(self.trajectories)
        response, rtt = self.call(
            client, request, timeout=max(self.timeout, FIRST_PLAN_BUDGET_S) + 60.0
        )
        self.check(
            response.success and response.error_code.val == ErrorCode.SUCCESS,
            f"plan_trajectory failed: {response.message}",
        )
        points = response.trajectory.points
        if not points:
            return
        duration = points[-1].time_from_start.sec + points[-1].time_from_start.nanosec * 1e-9
        out.line(
            f"  {'ok' if response.success else 'FAILED'}: {len(points)} points over "
            f"{duration:.2f} s, clearance {response.min_obstacle_distance * 100:.1f} cm, goal "
            f"error {response.goal_position_errors[0] * 1e3:.2f} mm / "
            f"{math.degrees(response.goal_orientation_errors[0]):.2f} deg, planned in "
            f"{_ms(response.solve_time)} (round trip {_ms(rtt)})"
        )
        # Show the hand's path: where it is at a few points of the trajectory.
        names = list(response.trajectory.joint_names)
        out.line(
            f"  hand along the trajectory (x, y, z in m; box top at z = {p.z - 0.05 + 0.12:.3f}):"
        )
        for i in np.linspace(0, len(points) - 1, 7).astype(int):
            state = dict(zip(names, points[i].positions))
            fk, _ = self.call(
                self.fk,
                ComputeFK.Request(link_names=["panda_hand"], robot_state=_joint_state(state)),
            )
            q = fk.poses[0].pose.position
            t = points[i].time_from_start.sec + points[i].time_from_start.nanosec * 1e-9
            out.line(f"    t = {t:5.2f} s   ({q.x:+.3f}, {q.y:+.3f}, {q.z:+.3f})")
        deadline = time.monotonic() + 5.0
        while len(self.trajectories) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        published = len(self.trajectories) > before
        self.check(published, "the planned trajectory was not published")
        self.show("plan", box, box_pose.pose, goal.target.pose, response.trajectory)
        if published:
            out.line(
                "  executed: published on /joint_trajectory_controller/joint_trajectory "
                f"({len(self.trajectories[-1][1].points)} points)"
            )

    def latency(self) -> None:
        from pyroki_ros.msg import IKObjective
        from pyroki_ros.srv import SolveIK

        self.out.section("round-trip latency: 30 x ~/solve_ik (pose), sequential")
        rtts, solves, ok = [], [], 0
        rng = np.random.default_rng(0)
        for _ in range(30):
            objective = IKObjective(type=IKObjective.POSE, link="panda_hand")
            p = objective.target.pose.position
            p.x, p.y, p.z = (float(v) for v in rng.uniform([0.35, -0.25, 0.25], [0.6, 0.25, 0.6]))
            o = objective.target.pose.orientation
            o.x, o.y, o.z, o.w = DOWN_XYZW
            response, rtt = self.call(self.ik, SolveIK.Request(objectives=[objective]))
            rtts.append(rtt)
            solves.append(response.solve_time)
            ok += bool(response.success)
        rtts_ms, solves_ms = np.array(rtts) * 1e3, np.array(solves) * 1e3
        self.out.line(
            f"  {ok}/30 solved; round trip median {statistics.median(rtts_ms):.1f} ms, "
            f"p90 {np.percentile(rtts_ms, 90):.1f} ms, max {rtts_ms.max():.1f} ms; "
            f"solver median {statistics.median(solves_ms):.1f} ms"
        )
        self.out.line("  (this machine's load affects these numbers)")


def _z_axis(q) -> list[float]:
    """The z axis of a frame whose orientation is the ROS quaternion ``q``."""
    from pyroki_ros.ros import frames
    from pyroki_ros.ros.conversions import xyzw_to_wxyz

    return frames.rotate(xyzw_to_wxyz([q.x, q.y, q.z, q.w]), [0.0, 0.0, 1.0]).tolist()


def _joint_state(values: dict):
    from sensor_msgs.msg import JointState

    return JointState(name=list(values), position=[float(v) for v in values.values()])


def _panda_velocity_limits(urdf: str) -> dict[str, float]:
    import xml.etree.ElementTree as ET

    limits = {}
    for joint in ET.fromstring(urdf).iter("joint"):
        limit = joint.find("limit")
        if limit is not None and limit.get("velocity"):
            limits[joint.get("name")] = float(limit.get("velocity"))
    return limits


def main(argv: list[str] | None = None) -> int:
    """``python -m pyroki_ros.ros.demo [options]``: the same as ``pyroki-ros demo``."""
    from pyroki_ros.cli import main as cli_main

    return cli_main(["demo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
