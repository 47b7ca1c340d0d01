"""Interleaved A/B of LM damping schedules on the random-scene benchmark's problems, in one
process.

    .venv/bin/python bench/schedule_ab.py '{}' '{"increase": 4.0}'

Each argument is a variant: fields of :data:`pyroki_ros.solver.damping.CHAIN` changed (JSON;
``{}`` is the default schedule). A planner per variant (``TrajectoryOptimizer(schedule=)``,
default spheres), warmed up alike; the pairs of ``bench/trajopt_benchmark.py --only single``
(Panda, seed 0, 10 random obstacles, 20 feasible start/goal pairs, T = 64, a pose goal)
planned once per variant and round, back to back, the order reversed every other pair. Two
processes one after the other (``bench/ab_trajopt.py``) put this VM's drift between the
sides; here it falls on both. Reported per variant: successes, median and p95 plan time
(``solve_seconds``), mean LM iterations, and the per-plan time ratio to the first variant
(median and geometric mean).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Sequence

from common import geometric_ratio, interleaved, loadavg, measured_lines, run_meta, write_report

import numpy as np
import scenes

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.collision import RobotSpheres
from pyroki_ros.planning.trajopt import TrajectoryOptimizer
from pyroki_ros.robots import urdf_path
from pyroki_ros.solver import damping

LINK = "panda_hand"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="+", help="CHAIN fields per variant, JSON objects")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--obstacles", type=int, default=10)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    if len(args.variants) < 2:
        parser.error("give at least two variants")
    load_start = loadavg()
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    world, cases, warm = scenes.benchmark_scene(
        robot, spheres, args.seed, args.obstacles, args.pairs, LINK
    )
    planners = []
    for text in args.variants:
        schedule = dataclasses.replace(damping.CHAIN, **json.loads(text))
        planner = TrajectoryOptimizer(robot, spheres, schedule=schedule)
        planner.warm_up(warm.start, [O.pose(LINK, warm.goal_pose)], world=world, num_steps=64)
        planners.append(planner)
    count = len(planners)
    seconds = [[] for _ in planners]
    iterations = [[] for _ in planners]
    ok = [0] * count
    for r in range(args.rounds):
        for k, case in enumerate(cases):
            for i in interleaved(count, k + r):
                goal = [O.pose(LINK, case.goal_pose)]
                plan = planners[i].plan(case.start, goal, world=world, num_steps=64)
                seconds[i].append(plan.solve_seconds)
                iterations[i].append(plan.iterations)
                ok[i] += plan.success
    meta = run_meta("schedule_ab.py", argv, load_start)
    out = [
        "# Random scenes: interleaved A/B of LM damping schedules",
        "",
        *measured_lines(meta),
        "",
        __doc__.split("\n\n", 2)[2].strip(),
        "",
        f"Seed {args.seed}, {args.obstacles} obstacles, {args.pairs} pairs, {args.rounds} rounds.",
        "",
        "| variant | success | median | p95 | mean LM iterations | median ratio | geometric ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    base = np.asarray(seconds[0])
    for text, s, it, n in zip(args.variants, seconds, iterations, ok):
        s = np.asarray(s)
        out.append(
            f"| `{text}` | {n}/{len(s)} | {np.median(s) * 1e3:.1f} ms "
            f"| {np.percentile(s, 95) * 1e3:.0f} ms | {np.mean(it):.2f} "
            f"| {np.median(s / base):.3f} | {geometric_ratio(s, base):.3f} |"
        )
    write_report("\n".join(out) + "\n", args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
