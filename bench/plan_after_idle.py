#!/usr/bin/env python3
"""How a plan's time depends on what the machine did just before it: another plan, nothing
(an idle pause), or the benchmark's independent check of the last path.

    .venv/bin/python bench/plan_after_idle.py --markdown docs/benchmarks/plan_after_idle.md

Why: on a shared VM the same compiled plan can take several times longer when it follows an
idle pause or other work than when it follows another plan (the CPU's caches and clock, the
hypervisor's scheduling: nothing in the planner changes). ``bench/mbm_benchmark.py`` checks
each path right after its plan by default, so its plan times include that penalty;
``--check-after`` times the plans back to back. This script measures the penalty per problem.

Protocol: the MotionBenchMaker planner of ``bench/mbm_benchmark.py`` (fine spheres,
``start_collision='escape'``, the 2 s budget, T = 64) after its warm-up; for each problem,
each condition once, in an order rotated from problem to problem, the timed ``plan`` right
after the condition's preceding action:

* *after a plan*: ``plan`` of the previous problem (untimed);
* *after a pause of s*: ``time.sleep(s)``;
* *after the check*: ``test/mbm_check.py``'s check of the previous problem's path (what the
  benchmark does between two plans).

Reported per condition: median plan time, and the geometric mean over the problems of its
time against *after a plan*.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from common import (
    REPO,
    geometric_ratio,
    loadavg,
    measured_lines,
    run_meta,
    stats_ms,
    write_report,
)

import mbm_benchmark as mb
import mbm_problems as mp

PAUSES = (0.01, 0.1, 1.0)  # s


def conditions(planner: mb.Planner, previous: mp.Problem) -> dict[str, Callable[[], None]]:
    """The preceding action of each condition, for a plan that follows ``previous``."""
    last = mb.plan_problem(planner, previous)  # the path the check will judge

    def check() -> None:
        mb.check_problem(planner, last)

    actions = {"after a plan": lambda: mb.plan_problem(planner, previous)}
    for pause in PAUSES:
        actions[f"after a pause of {pause:g} s"] = lambda pause=pause: time.sleep(pause)
    actions["after the check"] = check
    return actions


def run(planner: mb.Planner, problems: list[mp.Problem]) -> dict[str, list[float]]:
    """Per condition, the plan time (s) of every problem but the first."""
    times: dict[str, list[float]] = {}
    for k in range(1, len(problems)):
        actions = conditions(planner, problems[k - 1])
        names = list(actions)
        times = times or {name: [] for name in names}  # rows in the order of ``conditions``
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            actions[name]()
            times[name].append(mb.plan_problem(planner, problems[k]).seconds)
        row = " ".join(f"{times[n][-1] * 1e3:6.0f}" for n in names)
        print(f"{problems[k].name:22s} {row}", flush=True)
    return times


def markdown(times: dict[str, list[float]], meta: dict) -> str:
    base = times["after a plan"]
    out = [
        "# A plan's time after a plan, a pause or the check",
        "",
        *measured_lines(meta),
        "",
        (
            "The MotionBenchMaker planner of `bench/mbm_benchmark.py` (fine spheres, "
            "`start_collision='escape'`, 2 s budget, T = 64) after its warm-up; every problem "
            "planned once per condition (the order rotated from problem to problem) right "
            "after the condition's preceding action: a plan of the previous problem, an idle "
            "pause, or `test/mbm_check.py`'s check of the previous problem's path (what "
            "`bench/mbm_benchmark.py` does between plans unless `--check-after`). *ratio*: "
            "geometric mean over the problems of the plan time against *after a plan*."
        ),
        "",
        f"Problems: {meta['problems']} ({len(base)} timed per condition).",
        "",
        "| condition | median | p95 | ratio |",
        "|---|---|---|---|",
    ]
    for name, seconds in times.items():
        ms = stats_ms(seconds)
        ratio = geometric_ratio(seconds, base)
        out.append(f"| {name} | {ms['p50']:.0f} ms | {ms['p95']:.0f} ms | {ratio:.2f} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--problems",
        type=Path,
        default=Path("test/data/mbm/generated_seed2.yaml"),
        help="problem file",
    )
    parser.add_argument("--limit", type=int, default=4, help="problems per family")
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    chosen = [p for _, p in mb.select([REPO / args.problems], None, args.limit, False)]
    load_start = loadavg()
    planner = mb.warmed_planner(chosen[0])
    times = run(planner, chosen)
    chosen_text = f"`{args.problems}`, the first {args.limit} of each family"
    meta = run_meta("plan_after_idle.py", argv, load_start, problems=chosen_text)
    write_report(markdown(times, meta), args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
