#!/usr/bin/env python3
"""What the global step's batched checks cost per call size: the justification of
``pyroki_ros.planning.rrt.CHUNKS``.

1. Plans every problem of a MotionBenchMaker set (``--problems``, default the evaluation
   set) as ``bench/mbm_benchmark.py --fine-spheres --start-collision escape`` does, without
   a budget (so that the calls do not depend on this machine's speed), and records the size
   of every call of the global step's check (``rrt.Checker.clearance``: its tree rounds and
   shortcuts).
2. Times the compiled check per padded size (median of repeated calls after a compiling
   one) on one scene of the set (``--scene``).
3. Prints what the recorded calls cost when each is padded to the smallest of a set of
   sizes (a call over the largest is split into calls of the largest first).

Usage (repository root)::

    .venv/bin/python bench/rrt_check_sizes.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import machine_line, time_calls, utc_now

import numpy as np

SIZES = (64, 128, 256, 512)
POLICIES = ((512,), (64, 512), (128, 512), (256, 512), (64, 256, 512), (64, 128, 256, 512))


def padded_cost(count: int, sizes: tuple[int, ...], seconds: dict[int, float]) -> float:
    """Seconds of checking ``count`` configurations in calls padded to ``sizes``."""
    total = 0.0
    while count > 0:
        part = min(count, sizes[-1])
        total += seconds[next(s for s in sizes if s >= part)]
        count -= part
    return total


def main() -> int:
    import mbm_benchmark as mb
    import mbm_problems as mp

    from pyroki_ros import collision as col
    from pyroki_ros.planning import rrt

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=Path, default=mp.GENERATED_SET)
    parser.add_argument("--scene", default="table_under_pick/0")
    args = parser.parse_args()

    planner = mb.make_planner(fine=True, start_collision="escape")
    problems = mp.load_problems(args.problems)
    counts: list[int] = []
    record = rrt.Checker.clearance

    def recorded(self, q):
        counts.append(len(q))
        return record(self, q)

    rrt.Checker.clearance = recorded
    for problem in problems:
        mb.run_problem(planner, problem)
    rrt.Checker.clearance = record

    scene = next(p for p in problems if p.name == args.scene)
    clearance = planner.optimizer.clearance_function(
        mb.to_world(scene),
        col.DEFAULT_CONTACTS,
        planner.robot.active_mask(planner.arm),
        bounding=True,  # as rrt.Checker
    )
    rng = np.random.default_rng(0)
    limits = planner.robot.limits
    seconds = {}
    for size in SIZES:
        q = rng.uniform(limits.lower, limits.upper, (size, planner.robot.n_joints))
        clearance(q, size)  # compiles
        calls = time_calls(
            lambda q=q, size=size: clearance(q, size), min_repeats=20, min_seconds=0.5
        )
        seconds[size] = float(np.median(calls.wall))

    print(f"{utc_now()}  {machine_line()}")
    print(f"set {args.problems.name}: {len(problems)} problems, {len(counts)} check calls "
          f"({sum(counts)} configurations; sizes p25/p50/p75 "
          f"{'/'.join(f'{np.percentile(counts, q):.0f}' for q in (25, 50, 75))})")  # fmt: skip
    print(f"one call on {args.scene}, per padded size: "
          + ", ".join(f"{s}: {seconds[s] * 1e3:.2f} ms" for s in SIZES))  # fmt: skip
    print("| sizes | the recorded calls' checks |")
    print("|---|---|")
    for sizes in POLICIES:
        total = sum(padded_cost(c, sizes, seconds) for c in counts)
        print(f"| {', '.join(map(str, sizes))} | {total:.2f} s |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
