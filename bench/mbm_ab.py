"""Interleaved A/B of ``plan`` options on MotionBenchMaker problems, in one process.

    .venv/bin/python bench/mbm_ab.py '{"early_stop": 0.01}' '{"early_stop": 1.0}'

Each argument is a variant: keyword options of ``TrajectoryOptimizer.plan`` as JSON (on top
of the benchmark's own: fine spheres, ``start_collision='escape'``, the 2 s budget; a
``weights`` object becomes :class:`~pyroki_ros.planning.problem.Weights`); a ``damping``
object is not a plan option: that variant plans with a planner of its own whose LM damping
schedule is :data:`pyroki_ros.solver.damping.CHAIN` with those fields changed
(``'{"damping": {"increase": 4.0}}'``), warmed up as the first. Every problem is
planned once per variant, back to back, the order reversed every other problem, after one
warm-up: so a drift of this machine's speed (run-to-run medians of bench/mbm_benchmark.py move
~10 % here) falls on every variant alike. Paths are checked as bench/mbm_benchmark.py checks
them (``test/mbm_check.py``), after the last plan (so no plan follows a check). Reported per variant: successes (planner and check), false
successes, plan time median / p95 / max, its geometric-mean ratio to the first variant over
the same problems, LM iterations in all, per-family medians, the median path length, and per
problem file its successes, median, p95 and max.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from common import (
    REPO,
    geometric_ratio,
    interleaved,
    loadavg,
    measured_lines,
    plan_keywords,
    run_meta,
    write_report,
)

import mbm_benchmark as mb
import mbm_problems as mp

# A start path's LM iterations in a plan's progress line ("... (12 iterations, 0.08 s)").
ITERATIONS = re.compile(r"\((\d+) iterations, ")


def planners(problems: list, schedules: list[dict | None]) -> list[mb.Planner]:
    """A warmed planner per variant: one shared by those without a schedule change (None),
    one each for those with one (fields of ``CHAIN`` changed)."""
    from pyroki_ros.solver.damping import CHAIN

    shared = None
    out = []
    for changes in schedules:
        if changes is None:
            shared = shared or mb.warmed_planner(problems[0][1])
            out.append(shared)
        else:
            schedule = dataclasses.replace(CHAIN, **changes)
            out.append(mb.warmed_planner(problems[0][1], schedule=schedule))
    return out


def run(planners: list[mb.Planner], problems: list, variants: list[dict]) -> list[tuple[list, int]]:
    """Per variant, per problem: its ProblemResult and LM iterations. Every plan timed back to
    back, the variants of a problem in :func:`common.interleaved` order; the paths checked
    after the last plan (a plan that follows the check runs slower here:
    bench/plan_after_idle.py)."""
    planned: list[list] = [[] for _ in variants]
    iterations = [0] * len(variants)
    for k, (_, problem) in enumerate(problems):
        for i in interleaved(len(variants), k):
            lines: list[str] = []
            planned[i].append(
                mb.plan_problem(planners[i], problem, progress=lines.append, **variants[i])
            )
            iterations[i] += sum(int(m) for m in ITERATIONS.findall(" ".join(lines)))
        times = " ".join(f"{p[-1].seconds * 1e3:6.0f}" for p in planned)
        print(f"{problem.name:22s} {times}", flush=True)
    labels = [label for label, _ in problems]
    return [
        (
            [mb.check_problem(planners[i], p, label) for p, label in zip(variant, labels)],
            iterations[i],
        )
        for i, variant in enumerate(planned)
    ]


def summary(results: list, first: list) -> dict:
    """bench/mbm_benchmark.py's summary of one variant's results, with the geometric-mean
    ratio of its plan times to the first variant's (``ratio``) and per-family medians."""
    families = dict.fromkeys(r.family for r in results)
    sets = dict.fromkeys(r.source for r in results)
    return {
        **mb.summarize(results),
        "sets": {name: mb.summarize([r for r in results if r.source == name]) for name in sets},
        "ratio": geometric_ratio([r.seconds for r in results], [r.seconds for r in first]),
        "families": {
            f: statistics.median(r.seconds for r in results if r.family == f) * 1e3
            for f in families
        },
    }


def markdown(texts: list[str], rows: list[dict], meta: dict) -> str:
    out = [
        "# MotionBenchMaker: interleaved A/B of plan options",
        "",
        *measured_lines(meta),
        "",
        (
            "Every problem planned once per variant, back to back (order reversed every other "
            "problem), after one warm-up; fine spheres, `start_collision='escape'`, 2 s "
            "budget, T = 64, paths checked by `test/mbm_check.py` after the last plan. *ratio*: geometric mean "
            "over the problems of the plan time against the first variant's."
        ),
        "",
        f"Problems: {meta['problems']}.",
        "",
        "| variant | both | false success | median | p95 | max | ratio | LM iterations | path length |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for text, s in zip(texts, rows):
        out.append(
            f"| `{text}` | {s['both_ok']}/{s['problems']} | {s['false_success']} | {s['median_ms']:.0f} ms "
            f"| {s['p95_ms']:.0f} ms | {s['max_ms']:.0f} ms | {s['ratio']:.3f} | {s['iterations']} "
            f"| {s['path_length']:.2f} |"
        )
    families = list(rows[0]["families"])
    out += ["", "Median plan time per family:", ""]
    out.append("| variant | " + " | ".join(families) + " |")
    out.append("|---|" + "---|" * len(families))
    for text, s in zip(texts, rows):
        cells = " | ".join(f"{s['families'][f]:.0f} ms" for f in families)
        out.append(f"| `{text}` | {cells} |")
    out += ["", "Per problem file:", "", "| file | variant | both | median | p95 | max |"]
    out.append("|---|---|---|---|---|---|")
    for name in rows[0]["sets"]:
        for text, s in zip(texts, rows):
            t = s["sets"][name]
            out.append(
                f"| {name} | `{text}` | {t['both_ok']}/{t['problems']} | {t['median_ms']:.0f} ms "
                f"| {t['p95_ms']:.0f} ms | {t['max_ms']:.0f} ms |"
            )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="+", help="plan options per variant, JSON objects")
    parser.add_argument(
        "--problems",
        type=Path,
        nargs="+",
        default=[Path("test/data/mbm/generated_seed2.yaml")],
        help="problem files",
    )
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    if len(args.variants) < 2:
        parser.error("give at least two variants")
    variants = [plan_keywords(text) for text in args.variants]
    problems = [(path.stem, p) for path in args.problems for p in mp.load_problems(REPO / path)]
    load_start = loadavg()
    schedules = [variant.pop("damping", None) for variant in variants]  # not plan options
    results = run(planners(problems, schedules), problems, variants)
    rows = [{**summary(r, results[0][0]), "iterations": n} for r, n in results]
    for text, s in zip(args.variants, rows):
        print(f"{text}: both {s['both_ok']}/{s['problems']}, false {s['false_success']}, median "
              f"{s['median_ms']:.0f} ms, p95 {s['p95_ms']:.0f} ms, ratio {s['ratio']:.3f}, "
              f"{s['iterations']} LM iterations")  # fmt: skip
    if args.markdown:
        problems_text = ", ".join(f"`{p}`" for p in args.problems)
        meta = run_meta("mbm_ab.py", argv, load_start, problems=problems_text)
        write_report(markdown(args.variants, rows, meta), args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
