"""Iteration counts of the IK solver for damping / restart settings (load-independent).

Iterations, not seconds: the numbers do not depend on what else the machine is doing, so
this is how the defaults in pyroki_ros/ik/lm.py were chosen.

    python bench/tune_ik.py [--robot panda --tip panda_hand] [--targets 1000]
    python bench/tune_ik.py --orientation-weights   # the pose objective's default weight
    python bench/tune_ik.py --orientation-weights --robot test/data/robots/kinova.urdf \
        --tip j2s6s200_end_effector
"""

import argparse
import dataclasses
import itertools

import numpy as np

from pyroki_ros import Robot, ik
from pyroki_ros import objectives as O
from pyroki_ros.ik import lm
from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.robots import urdf_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--robot", default="panda")
    parser.add_argument("--tip", default="panda_hand")
    parser.add_argument("--targets", type=int, default=1000)
    parser.add_argument(
        "--orientation-weights",
        action="store_true",
        help="sweep the pose orientation weight (m/rad) at the default damping instead",
    )
    args = parser.parse_args()

    source = args.robot if args.robot.endswith(".urdf") else urdf_path(args.robot)
    robot = Robot.from_urdf(source)
    arm = [j for j in robot.joint_names if "finger" not in j]
    lo, hi = np.asarray(robot.lower), np.asarray(robot.upper)
    qs = lo + np.random.default_rng(0).uniform(size=(args.targets, robot.n_joints)) * (hi - lo)
    targets = np.asarray(forward_kinematics(robot, qs).wxyz_xyz[:, robot.link_index(args.tip)])

    if args.orientation_weights:
        sweep_orientation_weight(robot, args.tip, arm, targets)
        return
    print(
        "| damping start | down | up | iterations/restart | success | first try | median | mean | p95 | p99 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for start, (down, up), per_restart in itertools.product(
        (0.01, 0.1, 0.3, 1.0), ((0.25, 4.0), (0.35, 3.0), (0.5, 2.0)), (10, 15, 20)
    ):
        # the IK damping schedule (pyroki_ros/solver/damping.py), read when tracing
        lm._DAMPING = dataclasses.replace(lm._DAMPING, initial=start, decrease=down, increase=up)
        solver = ik.IKSolver(robot)  # new programs: the constants are read when tracing
        r = solver.solve(
            O.pose(args.tip, targets), active_joints=arm, iterations_per_restart=per_restart
        )
        it = r.iterations
        print(
            f"| {start} | {down} | {up} | {per_restart} | {r.success.mean():.4f} | "
            f"{(it <= per_restart).mean():.3f} | {np.median(it):.0f} | {it.mean():.1f} | "
            f"{np.percentile(it, 95):.0f} | {np.percentile(it, 99):.0f} |",
            flush=True,
        )


def sweep_orientation_weight(robot, tip: str, arm: list[str], targets: np.ndarray) -> None:
    print("| orientation weight (m/rad) | success | first try | median | mean | p95 |")
    print("|---|---|---|---|---|---|")
    solver = ik.IKSolver(robot)  # the weight is a traced value: one program for all
    for weight in (0.05, 0.1, 0.15, 0.2, 0.3, 0.5):
        r = solver.solve(O.pose(tip, targets, orientation_weight=weight), active_joints=arm)
        it = r.iterations
        print(
            f"| {weight} | {r.success.mean():.4f} | {(it <= ik.DEFAULT_ITERATIONS_PER_RESTART).mean():.3f} | "
            f"{np.median(it):.0f} | {it.mean():.1f} | {np.percentile(it, 95):.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
