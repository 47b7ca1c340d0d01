"""Batched IK throughput and compile time for several lane counts (Panda, 1000 targets).

python bench/ik_lanes.py 8 16 32 64
"""

import sys
import time

from common import time_calls

import jax
import numpy as np

jax.config.update("jax_cpu_enable_async_dispatch", False)
import pyroki_ros.ik as ikm
from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.robots import urdf_path

robot = Robot.from_urdf(urdf_path("panda"))
arm = [j for j in robot.joint_names if "finger" not in j]
rng = np.random.default_rng(0)
lo, hi = np.asarray(robot.lower), np.asarray(robot.upper)
qs = lo + rng.uniform(size=(1000, robot.n_joints)) * (hi - lo)
T = np.asarray(forward_kinematics(robot, qs).wxyz_xyz[:, robot.link_index("panda_hand")])
for lanes in [int(x) for x in sys.argv[1:]] or (8, 16, 32, 64, 128):
    solver = ikm.IKSolver(robot, lanes=lanes)
    c = time.process_time()
    solver.solve(O.pose("panda_hand", T), active_joints=arm)
    comp = time.process_time() - c
    calls = time_calls(
        lambda solver=solver: solver.solve(O.pose("panda_hand", T), active_joints=arm),
        min_repeats=7,
        max_repeats=7,
    )
    ts, r = calls.wall, calls.result
    print(
        f"lanes={lanes}: compile+1st cpu {comp:.2f}s, best {1000 / min(ts):.0f} median {1000 / np.median(ts):.0f} targets/s, success {r.success.mean():.4f}",
        flush=True,
    )
