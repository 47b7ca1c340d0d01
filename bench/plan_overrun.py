#!/usr/bin/env python3
"""How far past its budget a plan answers when it cannot succeed in it.

    .venv/bin/python bench/plan_overrun.py --markdown docs/benchmarks/plan_overrun.md

A plan checks its budget between steps; a step it starts near the end runs to completion
(an optimisation cannot be stopped inside its compiled program), so a failing plan answers
somewhat after its budget. This script measures by how much.

Protocol: the MotionBenchMaker planner of ``bench/mbm_benchmark.py`` (fine spheres,
``start_collision='escape'``, T = 64) after its warm-up on the first problem; each problem
planned with each budget (``timeout``) and plan seed, the wall time around ``plan`` as
``bench/mbm_benchmark.py`` takes it. Default problem: bookshelf_thin/7 of the second set,
which no budget up to 2 s plans. Reported per budget: plans that failed, and their overrun
(wall time less the budget) median and max; and the largest overrun of any plan.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from common import REPO, loadavg, measured_lines, pct, run_meta, write_report

import mbm_benchmark as mb


def run(planner: mb.Planner, problems: list, budgets: list[float], seeds: int) -> list[dict]:
    """One row per (problem, seed, budget): wall seconds and success."""
    rows = []
    for problem in problems:
        for seed in range(seeds):
            for budget in budgets:
                planner.plan_options.update(timeout=budget, seed=seed)
                planned = mb.plan_problem(planner, problem)
                ok = planned.plan is not None and bool(planned.plan.success)
                rows.append(
                    {
                        "problem": problem.name,
                        "seed": seed,
                        "budget": budget,
                        "seconds": planned.seconds,
                        "success": ok,
                    }
                )
                print(
                    f"{problem.name:20s} seed {seed} budget {budget:g} s: "
                    f"{planned.seconds:.3f} s {'ok' if ok else 'failed'}",
                    flush=True,
                )
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    out = [
        "# How far past its budget a failing plan answers",
        "",
        *measured_lines(meta),
        "",
        "Protocol: " + __doc__.split("Protocol: ")[1].strip(),
        "",
        f"Problems: {meta['problems']}; plan seeds 0-{meta['seeds'] - 1}.",
        "",
        "| budget | plans | failed | overrun of failures median / max | largest overrun |",
        "|---|---|---|---|---|",
    ]
    for budget in dict.fromkeys(r["budget"] for r in rows):
        group = [r for r in rows if r["budget"] == budget]
        late = [1e3 * (r["seconds"] - budget) for r in group if not r["success"]]
        largest = max(1e3 * (r["seconds"] - budget) for r in group)
        out.append(
            f"| {budget:g} s | {len(group)} | {len(late)} | "
            f"{pct(late, 50):+.1f} / {pct(late, 100):+.1f} ms | {largest:+.1f} ms |"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=Path, default=Path("test/data/mbm/generated_seed2.yaml"))
    parser.add_argument("--names", nargs="+", default=["bookshelf_thin/7"], help="problems")
    parser.add_argument("--budgets", default="0.3,0.6,1,2", help="s, comma-separated")
    parser.add_argument("--seeds", type=int, default=3, help="plan seeds 0 .. N-1")
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    known = {p.name: p for _, p in mb.select([REPO / args.problems], None, None, False)}
    missing = [n for n in args.names if n not in known]
    if missing:
        parser.error(f"no problems {missing} in {args.problems}")
    problems = [known[n] for n in args.names]
    budgets = [float(b) for b in args.budgets.split(",")]
    load_start = loadavg()
    planner = mb.warmed_planner(problems[0])
    rows = run(planner, problems, budgets, args.seeds)
    names = ", ".join(args.names)
    meta = run_meta(
        "plan_overrun.py", argv, load_start, problems=f"{names} of `{args.problems}`",
        seeds=args.seeds,
    )  # fmt: skip
    write_report(markdown(rows, meta), args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
