#!/usr/bin/env python3
"""Single-target latency of seeding the IK solver from a learned sampler.

Times, one target per call (the node's case), ``best_samples`` (draw K samples, rank them by
FK error, return the best) and ``seeded_solve(strategy="best")`` (the same, then the solver
from that seed), next to the solver's own strategy. Every call is timed on its own; the
figures are the minimum and the median over ``--calls`` calls spread over ``--targets``
targets (timeit-style: the minimum is the cost without interference from other jobs, the
median what a caller sees on this shared machine). Targets: tip positions or poses of uniform
random chain configurations (fixed seed), as in bench/sampler_benchmark.py.

Example (repository root)::

    nice -n 10 .venv/bin/python bench/sampler_latency.py --model /tmp/panda_position.npz
    # only targets that need the solver's restarts (its first attempt fails):
    nice -n 10 .venv/bin/python bench/sampler_latency.py --model /tmp/panda_pose.npz --hard
"""

from __future__ import annotations

import argparse
import itertools
import json

from common import machine_line, stats_ms, time_calls

import numpy as np
from sampler_benchmark import targets_for  # same targets as the benchmark (bench/ on sys.path)

from pyroki_ros import Robot
from pyroki_ros.ik import DEFAULT_ITERATIONS_PER_RESTART, IKSolver
from pyroki_ros.robots import urdf_path
from pyroki_ros.sampler import IKSampler
from pyroki_ros.sampler.seeding import best_samples, objective_for, seeded_solve


def timings(run, targets, calls: int) -> dict:
    for t in targets[:3]:
        run(t)  # compile and warm
    cycle = itertools.cycle(targets)
    seconds = time_calls(lambda: run(next(cycle)), min_repeats=calls, max_repeats=calls).wall
    stats = stats_ms(seconds)
    return {"min_ms": 1e3 * float(seconds.min()), "median_ms": stats["p50"], "p95_ms": stats["p95"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="sampler checkpoint (.npz)")
    parser.add_argument("--urdf", default="panda")
    parser.add_argument("-k", type=int, default=16)
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument(
        "--hard",
        action="store_true",
        help="only targets whose first solver attempt fails (they need the solver's restarts)",
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    urdf = str(urdf_path(args.urdf)) if args.urdf in ("panda", "ur5") else args.urdf
    robot = Robot.from_urdf(urdf)
    sampler = IKSampler.load(args.model, robot)
    solver = IKSolver(robot)
    active = [robot.joint_names[i] for i in sampler.spec.chain]
    if args.hard:
        # From a larger pool, the targets the solver's first attempt (from its default seed)
        # leaves unsolved: more iterations than one attempt has.
        pool = targets_for(sampler, 40 * args.targets, seed=2024)
        per_attempt = DEFAULT_ITERATIONS_PER_RESTART
        iterations = solver.solve(objective_for(sampler, pool), active_joints=active).iterations
        targets = pool[iterations > per_attempt][: args.targets]
        print(
            f"hard targets: {len(targets)} of a pool of {len(pool)} ({np.mean(iterations > per_attempt):.1%} hard)"
        )
    else:
        targets = targets_for(sampler, args.targets, seed=2024)
    k = args.k
    runs = {
        f"best_samples k={k}": lambda t: best_samples(sampler, t, k),
        "solver restarts": lambda t: solver.solve(objective_for(sampler, t), active_joints=active),
        f"seeded_solve best of {k}": lambda t: seeded_solve(
            solver, sampler, t, k=k, strategy="best", active_joints=active
        ),
    }
    results = {
        "machine": machine_line(),
        "args": vars(args),
        "mode": sampler.spec.mode,
    }
    results["targets"] = len(targets)
    for name, run in runs.items():
        results[name] = timings(run, targets, args.calls)
        row = results[name]
        if name != f"best_samples k={k}":  # success over the targets, one call each
            row["success"] = float(np.mean([bool(run(t).success) for t in targets]))
        print(
            f"{name:28s} min {row['min_ms']:.3f} ms  median {row['median_ms']:.3f} ms  "
            f"p95 {row['p95_ms']:.3f} ms  success {row.get('success', float('nan')):.3f}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
