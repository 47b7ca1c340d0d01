"""SIGTERM and SIGINT end the real node (a subprocess) within 2 s in every state, exit status 0.

The reported race: after one ~/solve_ik, on a loaded machine, SIGTERM now and then left the node
spinning for good (rclpy's signal thread wakes the executor before it shuts the context down;
shutdown.py). It is timing-dependent, so the case runs several
times with CPU-burning processes beside the node. The other states: the model compiling (an
uninterruptible JAX compilation on a worker thread), a plan and a batch running on the worker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

from node_helpers import start_node
from pyroki_ros.msg import IKObjective
from pyroki_ros.srv import ComputeFK, PlanTrajectory, SolveIK, SolveIKBatch
from sensor_msgs.msg import JointState

from pyroki_ros.robots import urdf_path

EXIT_WITHIN_S = 2.0
URDF_FILE = f"urdf_file:={urdf_path('panda')}"
ARM = [f"panda_joint{i}" for i in range(1, 8)]
START = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.5]
GOAL = [1.0, 0.2, 0.3, -1.5, 0.2, 1.8, 0.0]


@contextlib.contextmanager
def cpu_load():
    """One busy-looping process per core (at most 4), stopped on exit."""
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(min(os.cpu_count() or 1, 4))
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait()


def stop_with(env, sig: signal.Signals, state: str) -> float:
    """Sends ``sig`` to the node; asserts a clean exit (status 0, our handler's log line)
    within EXIT_WITHIN_S; returns the seconds it took."""
    proc = env.node.proc
    start = time.monotonic()
    proc.send_signal(sig)
    try:
        proc.wait(timeout=EXIT_WITHIN_S + 5.0)
    except subprocess.TimeoutExpired:
        pytest.fail(
            f"{sig.name} {state}: still running {EXIT_WITHIN_S + 5:.0f} s later\n"
            + env.node.log()[-3000:]
        )
    seconds = time.monotonic() - start
    log = env.node.log()
    assert seconds < EXIT_WITHIN_S, f"{sig.name} {state}: exit after {seconds:.2f} s\n{log[-3000:]}"
    assert proc.returncode == 0, f"{sig.name} {state}: status {proc.returncode}\n{log[-3000:]}"
    assert f"{sig.name}: shutting down" in log, log[-3000:]
    assert "shutdown watchdog" not in log, log[-3000:]  # the last resort was not needed
    print(f"{sig.name} {state}: exit after {seconds:.2f} s")  # shown with pytest -s
    return seconds


def solve_ik(env, pose) -> None:
    request = SolveIK.Request(
        objectives=[IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose)],
        seed=JointState(name=ARM, position=[v + 0.1 for v in START]),
    )
    response = env.call(SolveIK, "solve_ik", request)
    assert response.success, response.message


def ready_pose(env):
    """Waits until the model serves; the hand's pose at START."""
    env.wait_ready("panda_hand", joint="panda_joint1")
    response = env.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(
            link_names=["panda_hand"], robot_state=JointState(name=ARM, position=START)
        ),
    )
    return response.poses[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "run"),
    [(signal.SIGTERM, 1), (signal.SIGTERM, 2), (signal.SIGTERM, 3), (signal.SIGINT, 1)],
    ids=["SIGTERM-1", "SIGTERM-2", "SIGTERM-3", "SIGINT"],
)
def test_exit_right_after_solve_ik_under_cpu_load(tmp_path_factory, sig, run):
    # A race: several runs (the report: 1 of 3 hung under load, 0 of 4 on an idle machine).
    env = start_node(tmp_path_factory, "test_node_shutdown_ik", params=(URDF_FILE,))
    try:
        pose = ready_pose(env)
        with cpu_load():
            solve_ik(env, pose)
            stop_with(env, sig, "right after a solve_ik, CPU loaded")
    finally:
        env.close()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_exit_while_the_model_compiles(tmp_path_factory, sig):
    # An empty compilation cache of its own: the warm-up compiles for seconds.
    cache = tmp_path_factory.mktemp("empty_jax_cache")
    env = start_node(
        tmp_path_factory,
        "test_node_shutdown_load",
        params=(URDF_FILE, f"compilation_cache_dir:={cache}"),
    )
    try:
        deadline = time.monotonic() + 60.0
        while "compiling for robot" not in env.node.log():
            assert env.node.alive() and time.monotonic() < deadline, env.node.log()[-3000:]
            time.sleep(0.02)
        time.sleep(0.2)  # well inside the compilation
        assert "ready: robot" not in env.node.log()
        with cpu_load() if sig == signal.SIGTERM else contextlib.nullcontext():
            stop_with(env, sig, "while the model compiles")
    finally:
        env.close()


def _in_flight(env, srv_type, service: str, request) -> threading.Event:
    """Sends a request without waiting; the event is set when its answer arrives."""
    done = threading.Event()
    client = env.client(srv_type, service)
    client.call_async(request).add_done_callback(lambda _: done.set())
    return done


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_exit_while_a_plan_and_a_batch_run(tmp_path_factory, sig):
    env = start_node(tmp_path_factory, "test_node_shutdown_work", params=(URDF_FILE,))
    try:
        ready_pose(env)
        # A plan with a step count no other test (nor the other signal's run) uses: its
        # first solve compiles (seconds; with the program in the disk cache it took 1.3 s
        # here, too close to the wait on a fast machine) ...
        plan = _in_flight(
            env,
            PlanTrajectory,
            "plan_trajectory",
            PlanTrajectory.Request(
                start_state=JointState(name=ARM, position=START),
                goal_state=JointState(name=ARM, position=GOAL),
                num_steps={signal.SIGTERM: 997, signal.SIGINT: 991}[sig],
            ),
        )
        # ... beside a batch of 20,000 full-pose targets 2 m out, beyond the arm's reach: every
        # target spends its whole restart budget (~16 s on a 2-core VM with warm caches). Easy
        # targets ended within 1 s on a fast CI machine once the first run had filled the disk
        # cache.
        rows = np.tile([2.0, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0], (20_000, 1))
        rows[:, :3] += np.random.default_rng(0).uniform(-0.1, 0.1, (20_000, 3))
        request = SolveIKBatch.Request(link="panda_hand")
        request.packed_poses = rows.ravel().tolist()
        batch = _in_flight(env, SolveIKBatch, "solve_ik_batch", request)
        time.sleep(0.5)  # both requests delivered
        assert not plan.is_set() and not batch.is_set(), "the work ended before the signal"
        stop_with(env, sig, "while a plan and a batch run")
    finally:
        env.close()
