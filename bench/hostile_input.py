#!/usr/bin/env python3
"""The hostile-client report's cases at FULL size against the real ``pyroki_ros_node``
(config/panda.yaml, default request limits), one after another, each while a separate
client process sends a good ``~/compute_fk`` every ~20 ms (checked against the independent reference
FK, test/reference_fk.py) and the node's RSS is sampled every 50 ms.

Records per case: the answer's error code and message, its wall time (from the call; building
the request is not counted), the compute_fk latencies meanwhile and the node's peak RSS; then
SIGTERM exit times. The small-size regression tests of the same cases are
test/test_node_hostile.py.

Usage (repository root)::

    .venv/bin/python bench/hostile_input.py                # full size, writes the doc
    .venv/bin/python bench/hostile_input.py --quick --out /tmp/hostile.md
    .venv/bin/python bench/hostile_input.py --cases raw --repeats 0   # raw CDR only, printed
"""

from __future__ import annotations

import argparse
import datetime
import functools
import math
import os
import re
import shlex
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import REPO, git_rev, host, loadavg

import numpy as np
from node_benchmark import log
from raw_cdr import collision_object_cdr, goal_cdr, joint_state_cdr, string_cdr

GOAL_ANSWER_S = 2.0
GOAL_FK_MS = 50.0
GOAL_RSS_MIB = 2048.0
GOAL_EXIT_S = 2.0
# Case 2g's last call waits at most this long for the node to log its compile as done.
RETARGET_COMPILE_WAIT_S = 300.0
# The code recorded when the client cannot even serialise a request past an interface bound.
INTERFACE_BOUND = "interface bound (client side)"
# A raw topic message (no answer): the node logged its refusal, or nothing within the wait.
RAW_REFUSED = "refused (node log)"
RAW_NOT_SEEN = "not seen (no log line)"


class Sampler:
    """The node's VmRSS every 50 ms (and VmHWM), and that of its child processes (the topic
    process, pyroki_ros/ros/inputs.py), in a thread."""

    def __init__(self, pid: int):
        self.pid = pid
        self.samples: list[tuple[float, int]] = []
        self.child_samples: list[tuple[float, int]] = []  # the children's RSS, summed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def read(self, key: str = "VmRSS:", pid: int | None = None) -> int:
        try:
            for line in Path(f"/proc/{pid or self.pid}/status").read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1])
        except OSError:
            pass
        return 0

    def children(self) -> list[int]:
        try:
            return [
                int(c)
                for task in Path(f"/proc/{self.pid}/task").iterdir()
                for c in (task / "children").read_text().split()
            ]
        except OSError:
            return []

    def _run(self):
        while not self._stop.is_set():
            kib = self.read()
            if kib:
                now = time.monotonic()
                self.samples.append((now, kib))
                self.child_samples.append((now, sum(self.read(pid=c) for c in self.children())))
            time.sleep(0.05)

    def peak_mib(self, t0: float, t1: float, children: bool = False) -> float:
        samples = self.child_samples if children else self.samples
        values = [k for t, k in samples if t0 <= t <= t1]
        return max(values) / 1024 if values else float("nan")

    def stop(self):
        self._stop.set()
        self._thread.join()


class Prober:
    """A good compute_fk every ~20 ms from a separate client process (so that the benchmark
    building and serialising a huge request in this process cannot delay a probe), each
    checked against the reference FK; records go to a file as ``start seconds ok`` lines
    (time.monotonic is system-wide, so they compare with this process's times)."""

    def __init__(self, env, q):
        import subprocess

        self.path = Path(tempfile.mkstemp(prefix="pyroki_probe_", suffix=".txt")[1])
        command = [sys.executable, __file__, "--probe", str(self.path), *map(str, q)]
        self.process = subprocess.Popen(command, env={**os.environ, **env.env})

    def _records(self) -> list[tuple[float, float, bool]]:
        out = []
        for line in self.path.read_text().splitlines():
            start, seconds, ok = line.split()
            out.append((float(start), float(seconds), ok == "1"))
        return out

    def between(self, t0: float, t1: float, catch_up: float = 60.0):
        """(seconds, ok) of every probe call whose time overlaps [t0, t1]: one that started
        before t0 and was held through it counts too. A call is recorded when it ends, so
        first waits (up to ``catch_up`` s) for a call that started after t1: every call that
        overlaps has ended by then."""
        deadline = time.monotonic() + catch_up
        while time.monotonic() < deadline and not any(s > t1 for s, _, _ in self._records()):
            time.sleep(0.05)
        return [(d, ok) for s, d, ok in self._records() if s <= t1 and s + d >= t0]

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=30)


def probe_main(out: Path, q: list[float]) -> None:
    """The probe process (``--probe OUT q...``): runs until terminated."""
    import reference_fk as ref
    from harness import NODE  # test/harness.py
    from pyroki_ros.msg import ErrorCode
    from pyroki_ros.srv import ComputeFK
    from sensor_msgs.msg import JointState

    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.process import RosSession

    model = ref.parse_urdf(urdf_path("panda").read_text())
    joints = ref.actuated_joint_names(model)
    expected = ref.reference_fk(model, np.asarray(q, np.float64), joints)["panda_hand"]
    request = ComputeFK.Request(
        robot_state=JointState(name=list(joints), position=list(q)), link_names=["panda_hand"]
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    session = RosSession("hostile_probe", int(os.environ["ROS_DOMAIN_ID"]), threads=2)
    client = session.client(ComputeFK, f"{NODE}/compute_fk")
    with out.open("a", buffering=1) as records:
        while not stop.is_set():
            start = time.monotonic()
            try:
                response = session.call(client, request, timeout=30.0)
                seconds = time.monotonic() - start
                ok = response.error_code.val == ErrorCode.SUCCESS
                if ok:
                    o, p = response.poses[0].pose.orientation, response.poses[0].pose.position
                    got = ref.make_transform(
                        ref.quat_wxyz_to_matrix([o.w, o.x, o.y, o.z]), [p.x, p.y, p.z]
                    )
                    p_err, r_err = ref.pose_errors(expected, got)
                    ok = p_err < 1e-5 and r_err < 1e-5
            except Exception:  # noqa: BLE001 -- no answer (node gone, timeout)
                seconds, ok = time.monotonic() - start, False
            records.write(f"{start:.6f} {seconds:.6f} {int(ok)}\n")
            time.sleep(max(0.0, 0.02 - (time.monotonic() - start)))
    session.close()


CACHE_NOTE = ["(not set)"]  # what the header says about the compilation cache


def duration(seconds: float):
    from builtin_interfaces.msg import Duration

    return Duration(sec=int(seconds), nanosec=round((seconds % 1) * 1e9))


class Bench:
    def __init__(self, args):
        import reference_fk as ref

        from pyroki_ros.robots import urdf_path

        self.args = args
        self.ref = ref
        self.urdf = urdf_path("panda").read_text()
        self.model = ref.parse_urdf(self.urdf)
        self.joints = ref.actuated_joint_names(self.model)
        self.lower, self.upper = ref.actuated_joint_limits(self.model)
        self.state = np.array([0.1, -0.6, 0.2, -2.2, 0.1, 1.7, 0.6, 0.02])
        self.arm = np.array([1, 1, 1, 1, 1, 1, 1, 0.0])
        self.rows: list[dict] = []
        self.exits: list[tuple[str, float]] = []
        self.work = Path(tempfile.mkdtemp(prefix="pyroki_ros_hostile_"))
        self.scale = 0.1 if args.quick else 1.0

    # --- helpers ---------------------------------------------------------------------------

    def n(self, full: int) -> int:
        return max(1, int(full * self.scale))

    def fk(self, q):
        return self.ref.reference_fk(self.model, np.asarray(q, np.float64), self.joints)

    def joint_state(self, q, names=None):
        from sensor_msgs.msg import JointState

        return JointState(name=list(names or self.joints), position=[float(v) for v in q])

    def objective(self, q=None, kind=None, link="panda_hand"):
        from node_helpers import pose_stamped
        from pyroki_ros.msg import IKObjective

        q = self.state if q is None else q
        kind = IKObjective.POSE if kind is None else kind
        return IKObjective(type=kind, link=link, target=pose_stamped(self.fk(q)[link]))

    def start(self, name: str):
        from harness import IsolatedNode  # test/harness.py
        from node_helpers import CONFIG, publish_robot

        extra = [arg for param in self.args.node_param for arg in ("-p", param)]
        env = IsolatedNode(name, self.work / name, ["--params-file", str(CONFIG), *extra])
        publish_robot(
            env.session.node, self.urdf, [*self.joints, "panda_finger_joint2"], [*self.state, 0.02]
        )
        env.wait_ready("panda_hand")
        return env

    def wait_warm(self) -> None:
        """Waits for the node's background warm-up (warmup_plan), which holds the planner and
        a CPU: the cases meet the node as it serves after it. Records the warm-up's seconds
        as the node logged them (the report's header)."""
        from harness import wait_until

        t = time.monotonic()
        wait_until(lambda: "planning programs compiled" in self.env.node.log(), 600.0, interval=0.5)
        found = re.search(
            r"planning programs compiled in the background \(([\d.]+) s\)", self.env.node.log()
        )
        self.warm_up_s = float(found.group(1)) if found else math.nan
        log(f"warm-up done after {time.monotonic() - t:.1f} s more ({self.warm_up_s:.1f} s)")

    def case(self, name: str, fn, expect: tuple[str, ...]):
        """Runs ``fn() -> (response or None, seconds, note)`` with probes and RSS sampling."""
        from pyroki_ros.msg import ErrorCode

        codes = {v: k for k, v in vars(ErrorCode).items() if k.isupper() and isinstance(v, int)}
        log(f"-- {name}")
        t0 = time.monotonic()
        try:
            response, seconds, note = fn()
        except Exception as e:  # noqa: BLE001 -- recorded, the run goes on
            response, seconds, note = None, time.monotonic() - t0, f"client: {e}"[:100]
        time.sleep(0.3)  # a few probes after the answer too
        t1 = time.monotonic()
        # Past a bound of the interface (msg/, srv/) rclpy refuses to serialise the request.
        # rclpy's serialiser refuses it ("Failed to serialize"); a client call reports that as
        # "cannot publish data".
        refused = ("Failed to serialize", "cannot publish data")
        code = INTERFACE_BOUND if any(text in note for text in refused) else "-"
        if note.startswith("delivered, refused"):  # a raw topic message (raw_cases)
            code = RAW_REFUSED
        elif note.startswith("no '"):
            code = RAW_NOT_SEEN
        message = note
        if response is not None:
            code = codes.get(response.error_code.val, str(response.error_code.val))
            message = "; ".join(x for x in (response.message[:100], note) if x)
        probes = self.prober.between(t0, t1)
        lat = np.array([s for s, _ in probes]) * 1e3
        row = {
            "case": name,
            "code": code,
            "message": message,
            "seconds": seconds,
            "n": len(lat),
            "bad": sum(not ok for _, ok in probes),
            "p50": float(np.median(lat)) if len(lat) else float("nan"),
            "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan"),
            "max": float(lat.max()) if len(lat) else float("nan"),
            "rss": self.sampler.peak_mib(t0, t1),
            "child_rss": self.sampler.peak_mib(t0, t1, children=True),
            # a topic message dropped unread has no answer to time
            "answer_ok": code in expect and (seconds <= GOAL_ANSWER_S or code == RAW_NOT_SEEN),
        }
        self.rows.append(row)
        log(
            f"   {code} {seconds:.3f} s  fk n={row['n']} p50={row['p50']:.1f} "
            f"p99={row['p99']:.1f} max={row['max']:.1f} ms bad={row['bad']}  "
            f"rss={row['rss']:.0f}+{row['child_rss']:.0f} MiB  {message}"
        )

    def timed(self, srv_type, service, request, timeout=120.0):
        client = self.env.client(srv_type, service)
        start = time.monotonic()
        response = self.env.session.call(client, request, timeout=timeout, node=self.env.node)
        return response, time.monotonic() - start

    def packed(self, count: int, rng) -> np.ndarray:
        from node_helpers import matrix_to_xyzw

        margin = 0.1 * (self.upper - self.lower)
        qs = rng.uniform(self.lower + margin, self.upper - margin, (200, len(self.joints)))
        rows = []
        for q in qs:
            t = self.fk(q)["panda_hand"]
            rows.append([*t[:3, 3], *matrix_to_xyzw(t[:3, :3])])
        return np.tile(np.asarray(rows), (count // 200 + 1, 1))[:count].ravel()

    # --- the cases -------------------------------------------------------------------------

    def run(self) -> None:
        from pyroki_ros.srv import SolveIK

        log("starting the node (config/panda.yaml, default limits)")
        t = time.monotonic()
        self.env = self.start("hostile_bench")
        log(f"ready in {time.monotonic() - t:.1f} s")
        self.wait_warm()
        self.sampler = Sampler(self.env.node.pid)
        self.prober = Prober(self.env, (self.state + 0.05 * self.arm).tolist())
        deadline = time.monotonic() + 60
        while len(self.prober.between(0.0, math.inf, 0.0)) < 10 and time.monotonic() < deadline:
            time.sleep(0.2)  # the probe process is up and answered
        self.case("idle (reference)", lambda: (None, 0.0, "no request"), ("-",))

        if "report" in self.args.cases:
            self.report_cases()
        if "retarget" in self.args.cases:
            self.long_retarget()
        if "raw" in self.args.cases:
            self.raw_cases()

        self.prober.stop()
        self.hwm_mib = self.sampler.read("VmHWM:") / 1024
        self.sampler.stop()
        self.exits.append(("after all cases", self.sigterm(self.env)))
        for i in range(self.args.repeats):
            env = self.start(f"hostile_exit{i}")
            response = env.call(SolveIK, "solve_ik", SolveIK.Request(objectives=[self.objective()]))
            log(f"   fresh node {i}: solve_ik success={response.success}")
            self.exits.append((f"fresh node + 1 solve_ik ({i + 1})", self.sigterm(env)))

    def report_cases(self) -> None:
        """The hostile-client report's cases (issue 17), at full size."""
        from geometry_msgs.msg import Point, PoseStamped
        from pyroki_ros.msg import IKObjective, Keypoints
        from pyroki_ros.srv import (
            ComputeFK,
            PlanTrajectory,
            RetargetMotion,
            SolveIK,
            SolveIKBatch,
        )
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import JointState
        from shape_msgs.msg import SolidPrimitive

        rng = np.random.default_rng(0)
        names = [f"j{i % self.n(50_000)}" for i in range(self.n(60_000))]
        big = JointState(name=names, position=[0.0] * len(names))

        def joint_states():
            pub = self.env.session.node.create_publisher(JointState, "/joint_states", 10)
            time.sleep(0.5)
            start = time.monotonic()
            pub.publish(big)
            seconds = time.monotonic() - start
            time.sleep(1.5)
            warned = "max_names" in self.env.node.log()
            self.env.session.node.destroy_publisher(pub)
            return None, seconds, f"topic, no answer; node log names max_names: {warned}"

        self.case(f"1a /joint_states, {len(names):,} names", joint_states, ("-",))
        req = SolveIK.Request(objectives=[self.objective()], seed=big)
        self.case(
            f"1b solve_ik seed with {len(names):,} names",
            lambda: (*self.timed(SolveIK, "solve_ik", req), ""),
            ("REQUEST_TOO_LARGE",),
        )

        for n_obj in (self.n(2000), 64):
            req_obj = SolveIK.Request(objectives=[self.objective()] * n_obj)
            self.case(
                f"2a solve_ik, {n_obj:,} objectives",
                lambda req_obj=req_obj: (*self.timed(SolveIK, "solve_ik", req_obj), ""),
                (INTERFACE_BOUND,) if n_obj > 64 else ("REQUEST_TOO_LARGE",),
            )

        n_over = self.n(200_000)
        over = SolveIKBatch.Request(link="panda_hand")
        over.packed_poses = self.packed(n_over, rng).tolist()
        self.case(
            f"2b solve_ik_batch, {n_over:,} packed targets",
            lambda: (*self.timed(SolveIKBatch, "solve_ik_batch", over), ""),
            ("REQUEST_TOO_LARGE",) if n_over > 100_000 else ("SUCCESS", "TIMEOUT"),
        )

        n_batch = self.n(100_000)
        batch = SolveIKBatch.Request(link="panda_hand", timeout=duration(1.0))
        batch.packed_poses = self.packed(n_batch, rng).tolist()

        def run_batch():
            response, seconds = self.timed(SolveIKBatch, "solve_ik_batch", batch)
            ok = np.asarray(response.success, bool)
            return response, seconds, f"{ok.sum():,}/{len(ok):,} solved"

        self.case(f"2c solve_ik_batch, {n_batch:,} targets, 1 s", run_batch, ("SUCCESS", "TIMEOUT"))

        for n_obs in (self.n(100_000), 4096):
            log(f"   building {n_obs:,} SolidPrimitive messages (not timed)")
            plan = PlanTrajectory.Request(
                goal_state=self.joint_state(self.state + 0.1 * self.arm),
                start_state=self.joint_state(self.state),
            )
            sphere = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.01])
            far = PoseStamped()
            far.pose.position.x = 5.0
            plan.obstacles = [sphere] * n_obs
            plan.obstacle_poses = [far] * n_obs
            self.case(
                f"2d plan_trajectory, {n_obs:,} spheres",
                lambda plan=plan: (*self.timed(PlanTrajectory, "plan_trajectory", plan), ""),
                (INTERFACE_BOUND,) if n_obs > 4096 else ("REQUEST_TOO_LARGE",),
            )

        for n_steps in (self.n(100_000), 16_384):
            step = Keypoints(points=[Point(x=0.4, y=0.0, z=0.5)])
            retarget = RetargetMotion.Request(
                link_names=["panda_hand"], steps=[step] * n_steps, dt=0.01
            )
            self.case(
                f"2e retarget_motion, {n_steps:,} steps",
                lambda r=retarget: (*self.timed(RetargetMotion, "retarget_motion", r), ""),
                (INTERFACE_BOUND,) if n_steps > 16_384 else ("REQUEST_TOO_LARGE",),
            )

        objectives = [
            self.objective(kind=IKObjective.ORIENTATION, link="panda_link4"),
            self.objective(kind=IKObjective.POSITION, link="panda_link6"),
        ]
        new = SolveIK.Request(
            objectives=objectives, seed=self.joint_state(self.state + 0.05 * self.arm)
        )

        self.case(
            "2f solve_ik, new objective combination, 0.1 s",
            lambda: self.until_compiled(SolveIK, "solve_ik", new, 120.0, 0.25),
            ("TIMEOUT", "SUCCESS"),
        )

        # A plan among more cylinders than the warm-up's buckets (16): its programs compile.
        cylinder = SolidPrimitive(type=SolidPrimitive.CYLINDER, dimensions=[0.2, 0.03])
        behind = []
        for y in np.linspace(-0.8, 0.8, 20):
            pose = PoseStamped()
            pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = -0.7, y, 0.1
            behind.append(pose)
        new_scene = PlanTrajectory.Request(
            goal_state=self.joint_state(self.state + 0.1 * self.arm),
            start_state=self.joint_state(self.state),
            obstacles=[cylinder] * len(behind),
            obstacle_poses=behind,
            timeout=duration(1.0),
        )

        self.case(
            "2h plan_trajectory among 20 cylinders (compiles), 1 s",
            lambda: self.until_compiled(PlanTrajectory, "plan_trajectory", new_scene, 180.0, 1.0),
            ("TIMEOUT", "SUCCESS"),
        )

        q5 = self.state.copy()
        q5[0] = 5.0
        fk_req = ComputeFK.Request(robot_state=self.joint_state(q5), link_names=["panda_hand"])

        def fk_outside():
            response, seconds = self.timed(ComputeFK, "compute_fk", fk_req)
            o, p = response.poses[0].pose.orientation, response.poses[0].pose.position
            got = self.ref.make_transform(
                self.ref.quat_wxyz_to_matrix([o.w, o.x, o.y, o.z]), [p.x, p.y, p.z]
            )
            p_err, _ = self.ref.pose_errors(self.fk(q5)["panda_hand"], got)
            return (
                response,
                seconds,
                f"within_limits={response.within_limits}, FK error {p_err:.1e} m",
            )

        self.case("3 compute_fk, panda_joint1 = 5 rad", fk_outside, ("SUCCESS",))

        def burst():
            client = self.env.session.node.create_client(
                SolveIK, "/pyroki_ros_node/solve_ik", qos_profile=QoSProfile(depth=1000)
            )
            client.wait_for_service(timeout_sec=30)
            margin = 0.1 * (self.upper - self.lower)
            qs = rng.uniform(self.lower + margin, self.upper - margin, (200, len(self.joints)))
            qs[:, -1] = self.state[-1]
            requests = [
                SolveIK.Request(objectives=[self.objective(q)], seed=self.joint_state(self.state))
                for q in qs
            ]
            start = time.monotonic()
            futures = [client.call_async(r) for r in requests]
            deadline = start + 60
            while not all(f.done() for f in futures) and time.monotonic() < deadline:
                time.sleep(0.01)
            seconds = time.monotonic() - start
            done = [f for f in futures if f.done()]
            solved = sum(f.result().success for f in done)
            self.env.session.node.destroy_client(client)
            last = done[-1].result() if done else None
            return last, seconds, f"{len(done)}/200 answered, {solved} solved (all 200 in the time)"

        self.case("4 200 solve_ik at once (depth 1000)", burst, ("SUCCESS",))

        huge = self.objective()
        huge.target.pose.position.x = 1e300
        req_huge = SolveIK.Request(objectives=[huge])
        self.case(
            "5 solve_ik, position x = 1e300",
            lambda: (*self.timed(SolveIK, "solve_ik", req_huge), ""),
            ("INVALID_POSE", "INVALID_REQUEST"),
        )

    def until_compiled(self, kind, service: str, request, wait_s: float, interval: float):
        """A request that starts a background compile: its answer and seconds, then the same
        request again every ``interval`` s until it is no longer TIMEOUT (the compile is
        done) or ``wait_s`` passed; the note says how it ended."""
        response, seconds = self.timed(kind, service, request)
        start = time.monotonic()
        while True:
            again, _ = self.timed(kind, service, request)
            if (
                again.error_code.val != again.error_code.TIMEOUT
                or time.monotonic() > start + wait_s
            ):
                break
            time.sleep(interval)
        return (
            response,
            seconds,
            f"then answered ok={again.success} after {time.monotonic() - start:.1f} s",
        )

    def long_retarget(self) -> None:
        """Case 2g: the longest retargeting allowed: its first call (which starts the compile),
        two more while it compiles, and one after the node logged the compile as done (its
        seconds, as logged, in that row's message)."""
        from geometry_msgs.msg import Point
        from harness import wait_until
        from pyroki_ros.msg import Keypoints
        from pyroki_ros.srv import RetargetMotion

        n_r = self.n(4096)  # the default max_retarget_steps: the longest one allowed
        step = Keypoints(points=[Point(x=0.4, y=0.0, z=0.5)])
        retarget = RetargetMotion.Request(link_names=["panda_hand"], steps=[step] * n_r, dt=0.01)

        pattern = rf"retarget_motion: compiled for {n_r} steps in ([\d.]+) s"
        for attempt in ("first, compiles", "again", "once more", "compiled"):
            note = ""
            if attempt == "compiled":
                log_has = lambda: re.search(pattern, self.env.node.log())
                wait_until(log_has, RETARGET_COMPILE_WAIT_S, interval=0.5)
                note = f"after the node logged the compile done in {log_has().group(1)} s"
            self.case(
                f"2g retarget_motion, {n_r:,} steps x 1 link ({attempt})",
                lambda note=note: (
                    *self.timed(RetargetMotion, "retarget_motion", retarget, timeout=60),
                    note,
                ),
                ("SUCCESS", "PLANNING_FAILED", "TIMEOUT"),
            )

    def serves(self) -> str:
        """A good solve_ik whose answer the reference FK checks: a note for the case's row."""
        from pyroki_ros.srv import SolveIK

        request = SolveIK.Request(
            objectives=[self.objective()], seed=self.joint_state(self.state + 0.1 * self.arm)
        )
        response, _ = self.timed(SolveIK, "solve_ik", request, timeout=60)
        if not response.success:
            return f"then solve_ik FAILED: {response.message[:60]}"
        got = self.fk(np.asarray(response.solution.position))["panda_hand"]
        p_err, _ = self.ref.pose_errors(self.fk(self.state)["panda_hand"], got)
        return f"then solve_ik ok ({p_err * 1e3:.2f} mm by the reference FK)"

    def publish_raw(self, msg_type, topic: str, raw: bytes, qos, refusal: str, wait: float):
        """Publishes ``raw`` (serialised CDR) on ``topic`` and waits up to ``wait`` s for the
        node's log to gain a line containing ``refusal``; returns ``(None, seconds, note)``:
        the seconds from the publish call to that log line (or to giving up)."""
        pub = self.env.session.node.create_publisher(msg_type, topic, qos)
        deadline = time.monotonic() + 30
        while pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = len(self.env.node.log())
        start = time.monotonic()
        pub.publish(raw)
        published = time.monotonic() - start
        line = None
        while line is None and time.monotonic() < start + wait:
            new = self.env.node.log()[seen:]
            line = next((x for x in new.splitlines() if refusal in x), None)
            if line is None:
                time.sleep(0.01)
        seconds = time.monotonic() - start
        self.env.session.node.destroy_publisher(pub)
        alive = self.env.node.alive()
        if line is not None:
            text = line.split("]: ", 1)[-1][:110]
            note = f"delivered, refused by the node: {text}"
        else:
            note = (
                f"no '{refusal}' in the node log after {wait:.0f} s: not taken (over the "
                "topic process's memory limit, inputs.py)"
            )
        note += f"; {len(raw) / 1e6:.1f} MB, publish() {published:.3f} s"
        note += "; " + (self.serves() if alive else "NODE GONE")
        return None, seconds, note

    def raw_cases(self) -> None:
        """Messages past the interfaces' bounds, or huge, sent as raw CDR bytes (what a client
        that bypasses rclpy can send): does the typesupport drop them, and if it delivers them,
        does deserialising stall ~/compute_fk or grow the node's memory?"""
        from node_helpers import LATCHED
        from pyroki_ros.msg import CollisionObject, MultiLinkGoal
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import String

        mb = self.args.raw_mb
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        objective = self.objective()
        cases = [
            (
                "6a ~/goal raw CDR, 65 objectives (bound 64)",
                MultiLinkGoal, "~/goal", goal_cdr(objective, 65), "max_objectives",
            ),
            (
                "6b ~/collision_objects raw CDR, sphere with 4 dimensions (bound 3)",
                CollisionObject, "~/collision_objects", collision_object_cdr([0.1] * 4),
                "collision object refused",
            ),
        ]  # fmt: skip
        n_goal = int(mb * 1e6 / 192)  # bytes per objective after the first
        n_names = int(mb * 1e6 / 16)
        n_positions = int(mb * 1e6 / 8)
        cases += [
            (
                f"6c ~/goal raw CDR, {n_goal:,} objectives ({mb:g} MB)",
                MultiLinkGoal, "~/goal", None, "max_objectives",
            ),
            (
                f"6d /joint_states raw CDR, {n_names:,} names ({mb:g} MB)",
                JointState, "/joint_states", None, "max_names",
            ),
            (
                f"6e /joint_states raw CDR, {n_positions:,} positions ({mb:g} MB)",
                JointState, "/joint_states", None, "max_names",
            ),
        ]  # fmt: skip
        n_urdf = int(mb * 1e6)
        cases.append(
            (
                f"6f robot_description raw CDR, a {mb:g} MB string",
                String, "/robot_description", None, "max_urdf_bytes",
            )
        )  # fmt: skip
        builders = {
            "6f": lambda: string_cdr(b"<robot name='huge'>", n_urdf, b"</robot>"),
            "6c": lambda: goal_cdr(objective, n_goal),
            "6d": lambda: joint_state_cdr(names=n_names),
            "6e": lambda: joint_state_cdr(positions=n_positions),
        }
        from pyroki_ros.ros.bounded import largest_budget
        from pyroki_ros.ros.inputs import largest_message
        from pyroki_ros.ros.params import RequestLimits

        # config/panda.yaml's limits are the defaults (a --node-param changing them is not followed)
        holdable = largest_message(largest_budget(RequestLimits()))
        chosen = [c for prefix in self.args.raw for c in cases if c[0].startswith(prefix)]
        for name, msg_type, topic, raw, refusal in chosen:  # in the order --raw names them
            if topic == "/joint_states":
                time.sleep(5.5)  # the node's warning about a refused one is throttled to 5 s
            if raw is None:
                log(f"   building {name.split(' ', 1)[0]} (not timed)")
                raw = builders[name[:2]]()
            node_topic = topic if topic.startswith("/") else f"/pyroki_ros_node/{topic[2:]}"
            qos = LATCHED if msg_type is String else reliable
            # A message larger than the topic process can hold is dropped by Fast DDS unread,
            # without a log line (pyroki_ros/ros/inputs.py).
            huge = len(raw) > holdable
            self.case(
                name,
                functools.partial(self.publish_raw, msg_type, node_topic, raw, qos, refusal, 10.0),
                (RAW_REFUSED, RAW_NOT_SEEN) if huge else (RAW_REFUSED,),
            )
            raw = None  # a huge one is not kept while the next is built

    def sigterm(self, env) -> float:
        start = time.monotonic()
        env.node.proc.send_signal(signal.SIGTERM)
        try:
            env.node.proc.wait(timeout=30)
            seconds = time.monotonic() - start
        except Exception:  # noqa: BLE001
            seconds = float("inf")
        env.close()
        log(f"   SIGTERM -> exit in {seconds:.2f} s (rc {env.node.proc.returncode})")
        return seconds


def markdown(bench: Bench, command: str, date: str, loads: tuple[str, str], elapsed: float) -> str:
    rows = bench.rows
    out = [
        "# Hostile input: the node under the hostile-client report's cases, full size",
        "",
        "`bench/hostile_input.py` starts the real `pyroki_ros_node` (config/panda.yaml, default",
        (
            "request limits), waits for its background warm-up (warmup_plan) and runs each "
            "case of the hostile-client report one after another, while a"
        ),
        "separate client process sends a good `~/compute_fk` every ~20 ms (each checked against the",
        "independent reference FK, test/reference_fk.py). The goals:",
        "",
        (
            f"* every case gets a clear error or a correct answer within {GOAL_ANSWER_S:.0f} s, and "
            "sizes over a limit are refused at once (`REQUEST_TOO_LARGE` naming the parameter);"
        ),
        f"* a good `compute_fk` during any case is answered within {GOAL_FK_MS:.0f} ms;",
        f"* the node's memory stays under {GOAL_RSS_MIB / 1024:.0f} GB;",
        f"* SIGTERM ends the node within {GOAL_EXIT_S:.0f} s.",
        "",
        "The small-size regression tests of the same cases are test/test_node_hostile.py.",
        "",
        f"* Command: `{command}`",
        (
            f"* Date: {date}; git commit {git_rev()}; run time {elapsed:.0f} s; the node's "
            f"background warm-up before the cases: {getattr(bench, 'warm_up_s', math.nan):.1f} s "
            "(as the node logged it)"
        ),
        f"* Machine: {host()} (shared: other jobs may run)",
        f"* JAX compilation cache: {CACHE_NOTE[0]}",
        (
            f"* 1-minute load average: {loads[0].split()[0]} at the start, "
            f"{loads[1].split()[0]} at the end"
        ),
        "",
        "Answer: wall time from the call (building the request not counted). FK: the probe",
        "calls that overlap the case, from its start to 0.3 s after its answer, one held since",
        "before it included (count, median, p99, max in ms; *bad* = wrong or no",
        "answer). RSS: the node's peak VmRSS over the case, sampled every 50 ms, and apart that",
        "of its topic process (pyroki_ros/ros/inputs.py), where raw topic messages land. The probe",
        "client is a process of its own (its latency is the node's, not the hostile",
        "client's); the answer time includes the hostile client's serialisation of its",
        "request and the node's deserialisation of it. Past a bound of the interfaces",
        f"(msg/, srv/) the client cannot serialise the request at all: code *{INTERFACE_BOUND}*.",
        "",
        (
            "| case | code | message | answer s | FK n | FK p50 ms | FK p99 ms | FK max ms | "
            "FK bad | peak RSS MiB | topic process peak RSS MiB |"
        ),
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        msg = r["message"].replace("|", "\\|").replace("\n", " ")
        out.append(
            f"| {r['case']} | {r['code']} | {msg} | {r['seconds']:.3f} | {r['n']} | "
            f"{r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | {r['bad']} | {r['rss']:.0f} | "
            f"{r['child_rss']:.0f} |"
        )
    out += ["", "| SIGTERM | seconds to exit |", "|---|---:|"]
    out += [f"| {name} | {s:.2f} |" for name, s in bench.exits]
    cases = [r for r in rows if not r["case"].startswith("idle")]
    slow = [r["case"] for r in cases if not r["answer_ok"]]
    fk_slow = [r["case"] for r in rows if not (r["max"] <= GOAL_FK_MS) or r["bad"]]
    peak = max(r["rss"] for r in rows)
    child_peak = max(r["child_rss"] for r in rows)
    exit_max = max((s for _, s in bench.exits), default=float("nan"))

    def line(ok: bool, text: str) -> str:
        return f"* **{'met' if ok else 'NOT met'}**: {text}"

    out += [
        "",
        "## Goals in this run",
        "",
        line(
            not slow,
            f"clear error or correct answer within {GOAL_ANSWER_S:.0f} s (a raw topic message: "
            "the node's refusal in its log, or, larger than its topic process can hold, "
            "dropped by Fast DDS unread)" + (f" (not: {'; '.join(slow)})" if slow else ""),
        ),
        line(
            not fk_slow,
            f"every good compute_fk within {GOAL_FK_MS:.0f} ms and correct"
            + (f" (not during: {'; '.join(fk_slow)})" if fk_slow else ""),
        ),
        line(
            peak + child_peak < GOAL_RSS_MIB,
            f"node memory under 2 GB, its topic process's included: peak RSS {peak:.0f} MiB "
            f"(VmHWM {bench.hwm_mib:.0f} MiB) + {child_peak:.0f} MiB",
        ),
        line(exit_max <= GOAL_EXIT_S, f"SIGTERM exit within 2 s: slowest {exit_max:.2f} s"),
        "",
    ]
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--probe"]:
        probe_main(Path(argv[1]), [float(v) for v in argv[2:]])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes (a check)")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="where the markdown goes (default: docs/benchmarks/hostile_input.md for a run of "
        "every case; with --cases or --raw selecting fewer, printed only)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh-node SIGTERM repetitions")
    parser.add_argument(
        "--cases",
        default="report,retarget,raw",
        help="comma-separated groups: report (the hostile-client report's cases), retarget "
        "(case 2g: the longest retargeting allowed, max_retarget_steps), raw (raw CDR messages "
        "past the interface bounds, or huge)",
    )
    parser.add_argument(
        "--raw",
        default="6a,6b,6c,6d,6e,6f",
        help="which raw cases, in this order (their name prefixes, comma-separated)",
    )
    parser.add_argument(
        "--raw-mb", type=float, default=96.0, help="size of the huge raw messages (MB)"
    )
    parser.add_argument(
        "--node-param",
        action="append",
        default=[],
        metavar="NAME:=VALUE",
        help="a node parameter beside config/panda.yaml (repeatable)",
    )
    parser.add_argument(
        "--reuse-cache",
        action="store_true",
        help="let the node use its persistent compilation cache (default: a fresh, empty one, "
        "so that every compile is the cold one of a first start)",
    )
    args = parser.parse_args(argv)
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        CACHE_NOTE[0] = f"JAX_COMPILATION_CACHE_DIR={os.environ['JAX_COMPILATION_CACHE_DIR']}"
    elif args.reuse_cache:
        CACHE_NOTE[0] = "the node's own (compile times are those of loading, where cached)"
    else:  # the node and its compiles inherit it
        os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="pyroki_hostile_xla_")
        CACHE_NOTE[0] = "a fresh, empty folder: every compile is cold, as on a first start"
    everything = (args.cases, args.raw) == (parser.get_default("cases"), parser.get_default("raw"))
    args.cases = args.cases.split(",")
    args.raw = args.raw.split(",")
    if args.out is None and everything:
        args.out = REPO / "docs/benchmarks/hostile_input.md"
    command = shlex.join(["python", "bench/hostile_input.py", *(argv or sys.argv[1:])])
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    load_start = loadavg()
    t0 = time.monotonic()
    bench = Bench(args)
    try:
        bench.run()
    finally:
        for env in (getattr(bench, "env", None),):
            if env is not None and env.node.alive():
                env.close()
    text = markdown(bench, command, date, (load_start, loadavg()), time.monotonic() - t0)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
