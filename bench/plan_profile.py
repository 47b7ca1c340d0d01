"""Where a MotionBenchMaker plan's optimisation time goes: the fixed cost of one
``TrajectoryOptimizer.optimize`` call and its cost per Levenberg-Marquardt iteration, per
problem family, after warm-up.

Each problem's start path is the straight joint-space line from its start to its first own
goal configuration (``goal_ik``), both ends fixed (a joint goal), in its scene with the
bundled fine sphere model and the benchmark's obstacle buckets (as ``bench/mbm_benchmark.py
--fine-spheres`` plans them). ``optimize`` runs with ``max_iterations`` k in :data:`LIMITS`
and no early stop; each k is timed (median of :data:`REPEATS` calls) and a line
``seconds = fixed + per_iteration * iterations`` is fitted by least squares to the
iterations each call really did (a call that converges sooner does fewer). *fixed*: what a
call costs however many iterations it does (the linearisation at the start path, the dense
success check of the result, the host's work); *per iteration*: one linearisation (collision
rows at the T knots and T - 1 midpoints) and one banded solve.

Usage: ``.venv/bin/python bench/plan_profile.py [--problems FILE] [--limit N] [--markdown
docs/benchmarks/plan_profile.md]``
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common import REPO, loadavg, measured_lines, run_meta, time_calls, write_report

import mbm_benchmark as mb
import mbm_problems as mp
import numpy as np

LIMITS = (0, 1, 2, 5, 10, 20)  # max_iterations of the timed calls
REPEATS = 3
BUCKETS = mb.BUCKETS  # bench/mbm_benchmark.py's default --obstacle-buckets


def profile_problem(planner: mb.Planner, problem: mp.Problem, t_count: int) -> dict:
    """Times one problem's optimisation at every limit of :data:`LIMITS`; returns the fit
    (``fixed_ms``, ``per_iteration_ms``) and the points it was fitted to."""
    optimizer = planner.optimizer
    start = mb.start_configuration(planner, problem)
    goal = mb.configurations(planner, problem.goal_ik[:1])[0]
    knots = np.linspace(0.0, 1.0, t_count)[:, None]
    path = (start + knots * (goal - start))[None]
    free = np.ones((t_count, len(start))) * np.isin(optimizer.robot.joint_names, planner.arm)
    free[0] = free[-1] = 0.0
    world = mb.to_world(problem)

    def run(limit: int):
        return optimizer.optimize(
            path, (), world=world, free=free, max_iterations=limit, early_stop=0.0,
            rows=optimizer.plan_rows,
        )  # fmt: skip

    run(1)  # compiles for a new obstacle bucket (not timed)
    points = []
    for limit in LIMITS:
        calls = time_calls(lambda limit=limit: run(limit), min_repeats=REPEATS, max_repeats=REPEATS)
        points.append((calls.result.iterations, float(np.median(calls.wall))))
    iterations, seconds = (np.asarray(x, float) for x in zip(*points))
    per_iteration, fixed = np.polyfit(iterations, seconds, 1)
    return {
        "problem": problem.name,
        "family": problem.family,
        "fixed_ms": fixed * 1e3,
        "per_iteration_ms": per_iteration * 1e3,
        "points": points,
        "obstacles": (len(problem.cuboids), len(problem.cylinders)),
    }


def markdown(rows: list[dict], meta: dict) -> str:
    out = [
        "# Where a plan's optimisation time goes",
        "",
        *measured_lines(meta),
        "",
        __doc__.split("\n\nUsage:")[0].strip(),
        "",
        (
            f"T = {meta['t_count']} knots; obstacle buckets {BUCKETS}; problems: the first "
            f"{meta['limit']} of each family in `{meta['problems']}`."
        ),
        "",
        "| family | problems | fixed (median) | per iteration (median) | per iteration (max) |",
        "|---|---|---|---|---|",
    ]
    families = list(dict.fromkeys(r["family"] for r in rows))
    for family in [*families, None]:
        part = [r for r in rows if family is None or r["family"] == family]
        fixed = [r["fixed_ms"] for r in part]
        slope = [r["per_iteration_ms"] for r in part]
        label = family or "**all**"
        out.append(
            f"| {label} | {len(part)} | {np.median(fixed):.1f} ms | {np.median(slope):.2f} ms "
            f"| {np.max(slope):.2f} ms |"
        )
    out += [
        "",
        (
            "Per problem: (iterations done, median seconds) at each limit "
            f"{LIMITS}; obstacles (cuboids, cylinders)."
        ),
        "",
        "| problem | obstacles | fixed | per iteration | points |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        points = ", ".join(f"({i}, {s * 1e3:.1f} ms)" for i, s in r["points"])
        out.append(
            f"| {r['problem']} | {r['obstacles']} | "
            f"{r['fixed_ms']:.1f} ms | {r['per_iteration_ms']:.2f} ms | {points} |"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problems", default="test/data/mbm/generated_seed2.yaml", help="a problem file"
    )
    parser.add_argument("--limit", type=int, default=3, help="problems per family")
    parser.add_argument("--steps", type=int, default=64, help="knots T")
    parser.add_argument(
        "--markdown", default="docs/benchmarks/plan_profile.md", help="report ('' for none)"
    )
    args = parser.parse_args(argv)
    chosen = [p for _, p in mb.select([REPO / args.problems], None, args.limit, False)]
    load_start = loadavg()
    planner = mb.make_planner(fine=True, buckets=BUCKETS)
    rows = []
    for problem in chosen:
        row = profile_problem(planner, problem, args.steps)
        rows.append(row)
        print(
            f"{problem.name}: fixed {row['fixed_ms']:.1f} ms, per iteration "
            f"{row['per_iteration_ms']:.2f} ms",
            flush=True,
        )
    meta = run_meta(
        "plan_profile.py", argv, load_start,
        t_count=args.steps, limit=args.limit, problems=args.problems,
    )  # fmt: skip
    write_report(markdown(rows, meta), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
