"""Batched IK and batched planning split their batch over every local device (devices.py).

Two fresh interpreters solve the same problems: one with 4 host CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=4``), one with the usual single device.
The answers must agree (float tolerance: the devices run the same per-problem arithmetic in
differently sized programs), and the 4-device run's outputs must be spread over 4 devices.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import json, sys
    import jax
    import numpy as np

    from pyroki_ros import Robot, devices, forward_kinematics
    from pyroki_ros import objectives as O
    from pyroki_ros.collision import RobotSpheres, World
    from pyroki_ros.ik import IKSolver
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    # Record over how many devices every sharded program's output lies.
    spread = []
    original = devices.over_devices

    def recording(*args, **kwargs):
        program = original(*args, **kwargs)

        def call(*inputs):
            out = program(*inputs)
            spread.append(len(jax.tree.leaves(out)[0].sharding.device_set))
            return out

        return call

    devices.over_devices = recording

    robot = Robot.from_urdf(urdf_path("panda"))
    arm = [j for j in robot.joint_names if "finger" not in j]
    rng = np.random.default_rng(0)
    lower, upper = np.array(robot.limits.bounds).reshape(-1, 2).T
    q = rng.uniform(lower, upper, (37, robot.n_joints))  # not a multiple of 4: padding
    hand = robot.link_index("panda_hand")
    targets = np.asarray(forward_kinematics(robot, q).wxyz_xyz[:, hand], np.float64)
    ik = IKSolver(robot).solve(O.pose("panda_hand", targets), active_joints=arm)

    spheres = RobotSpheres.embedded("panda", robot)
    planner = TrajectoryOptimizer(robot, spheres)
    world = World.create(sphere_centers=[[0.5, 0.0, 0.8]], sphere_radii=[0.05])
    starts = np.array([[0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02]] * 3)
    starts[:, 0] = [-0.4, 0.0, 0.4]
    goals = np.array([[1.0, 0.0, 0.0, 0.0, 0.45, y, 0.45] for y in (-0.2, 0.0, 0.2)])
    plans = planner.plan_batch(
        starts, goals, tip="panda_hand", world=world, num_steps=8, batched=True,
        replan_failures=False,
    )
    np.savez(
        sys.argv[1],
        ik_q=ik.q, ik_success=ik.success,
        paths=np.stack([p.path for p in plans]), plan_success=[p.success for p in plans],
    )
    mesh = devices.batch_mesh("cpu")
    print("SHARDING " + json.dumps({
        "device_count": devices.device_count(),
        "mesh": None if mesh is None else mesh.size,
        "spread": spread,
    }))
    """
)


def _start(out: Path, device_count: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if device_count > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={device_count}"
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(out)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen) -> dict:
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stderr[-4000:]
    line = next(x for x in stdout.splitlines() if x.startswith("SHARDING "))
    return json.loads(line.removeprefix("SHARDING "))


def test_batches_split_over_four_devices_give_the_same_answers(tmp_path):
    # Both at once: independent, and most of their time is compiling.
    one, four = _start(tmp_path / "one.npz", 1), _start(tmp_path / "four.npz", 4)
    info_one, info_four = _finish(one), _finish(four)

    assert info_one == {"device_count": 1, "mesh": None, "spread": []}
    assert info_four["device_count"] == 4 and info_four["mesh"] == 4
    # Batched IK (the first IK solve of the goal configurations inside plan_batch too) and
    # the batched planning solve all ran split over the 4 devices.
    assert len(info_four["spread"]) >= 3 and set(info_four["spread"]) == {4}, info_four

    a, b = np.load(tmp_path / "one.npz"), np.load(tmp_path / "four.npz")
    assert a["ik_success"].all() and (a["ik_success"] == b["ik_success"]).all()
    np.testing.assert_allclose(b["ik_q"], a["ik_q"], atol=1e-2)
    assert (a["plan_success"] == b["plan_success"]).all()
    np.testing.assert_allclose(b["paths"], a["paths"], atol=1e-2)
