"""Where a MotionBenchMaker plan spends its time, start path by start path.

    .venv/bin/python bench/plan_progress.py [--problems FILE ...] [--options JSON]
        [--markdown docs/benchmarks/plan_progress.md]

Each problem is planned once as bench/mbm_benchmark.py plans it (fine spheres,
``start_collision='escape'``, the 2 s budget, T = 64, after one warm-up) with the plan's
``progress`` lines recorded: per start path, where it came from (the straight line first,
then bent paths or the global step's), its outcome, its LM iterations and seconds.
``--options``: more ``plan`` keywords (JSON), e.g. ``'{"first_path_iterations": 60}'`` for
the first start path uncut. Paths are not checked here (bench/mbm_benchmark.py does that).

The report gives the first start path's iterations when it planned and when it did not, how
many plans went on to the global step, and a row per problem. This is the evidence behind
``pipeline.FIRST_PATH_ITERATIONS``: a straight line that has not come clear within that many
iterations rarely does, and its iterations are the global step's time.
"""

from __future__ import annotations

import argparse
import re
import statistics
from collections.abc import Sequence
from pathlib import Path

from common import REPO, loadavg, measured_lines, plan_keywords, run_meta, write_report

import mbm_benchmark as mb
import mbm_problems as mp

# pipeline.plan's progress line: "start path 2/8 (global step): ok (4 iterations, 0.034 s)".
LINE = re.compile(
    r"start path (?P<index>\d+)/\d+(?P<origin> \(global step[^)]*\))?: (?P<message>.*) "
    r"\((?P<iterations>\d+) iterations, (?P<seconds>[\d.]+) s\)$"
)


def attempts(lines: list[str]) -> list[dict]:
    """The plan's start paths from its progress lines: index, global (the attempt's last
    path is the global step's), ok, iterations, seconds. Lines of other steps (the exact
    model's fallback says why it plans again) are passed over; a start path's line in
    another format raises ValueError (the report would otherwise miss it silently)."""
    out = []
    for line in lines:
        if not line.startswith("start path "):
            continue
        m = LINE.match(line)
        if m is None:
            raise ValueError(f"unexpected progress line: {line!r}")
        out.append(
            {
                "index": int(m["index"]),
                # " (global step: none found)": a bent path instead
                "global": m["origin"] == " (global step)",
                "ok": m["message"] == "ok" or m["message"].startswith("ok "),
                "iterations": int(m["iterations"]),
                "seconds": float(m["seconds"]),
            }
        )
    return out


def plan_one(planner: mb.Planner, problem: mp.Problem, options: dict) -> dict:
    """One plan (bench/mbm_benchmark.py's ``plan_problem``) with its progress lines: a row
    for the report; a plan that raised is a failure with its error as a note."""
    lines: list[str] = []
    planned = mb.plan_problem(planner, problem, progress=lines.append, **options)
    notes = [line for line in lines if not line.startswith("start path ")]
    return {
        "problem": problem.name,
        "success": planned.plan is not None and bool(planned.plan.success),
        "seconds": planned.seconds,
        "attempts": attempts(lines),
        "notes": notes + ([planned.error] if planned.error else []),
    }


def first_straight(rows: list[dict]) -> list[dict]:
    """Per plan whose first start path was the straight line (not the global step's, which
    goes first through a mostly blocked line): that attempt."""
    return [r["attempts"][0] for r in rows if r["attempts"] and not r["attempts"][0]["global"]]


def summary(rows: list[dict], cap: int) -> list[str]:
    """The report's findings, a line each: the first straight start path's iterations when it
    planned (and how many ran past ``cap``) and when it did not; the global step's path after."""
    straight = first_straight(rows)
    ok = [a["iterations"] for a in straight if a["ok"]]
    failed = [a for a in straight if not a["ok"]]
    global_first = sum(1 for r in rows if r["attempts"] and r["attempts"][0]["global"])
    after = [
        next(a for a in r["attempts"] if a["global"])
        for r in rows
        if any(a["global"] for a in r["attempts"][1:])
    ]

    def spread(values) -> str:
        if not values:
            return "none"
        return f"median {statistics.median(values):g}, max {max(values):g} ({len(values)} plans)"

    planned = sum(r["success"] for r in rows)
    follow = [a["iterations"] for a in after]
    over = sorted(i for i in ok if i > cap)
    tried = [a["iterations"] for a in failed]
    spent = [round(a["seconds"], 3) for a in failed]
    return [
        f"- Plans: {len(rows)}, planner success {planned}; the global step's path went "
        + f"first in {global_first} (a mostly blocked straight line).",
        f"- First straight start path that planned: iterations {spread(ok)}; more than "
        + f"FIRST_PATH_ITERATIONS ({cap}): {len(over)} ({over}).",
        f"- First straight start path that did not plan: iterations {spread(tried)}, "
        + f"seconds {spread(spent)}.",
        f"- The global step's path after it: iterations {spread(follow)}; planned "
        + f"{sum(a['ok'] for a in after)} of {len(after)}.",
    ]


def markdown(rows: list[dict], meta: dict, cap: int) -> str:
    out = [
        "# Where a plan's time goes, start path by start path (MotionBenchMaker)",
        "",
        *measured_lines(meta),
        "",
        __doc__.split("\n\n")[3].strip(),
        "",
        f"Problems: {meta['problems']}; plan options: `{meta['options']}`.",
        "",
        *summary(rows, cap),
        "",
        "| problem | success | seconds | start paths: iterations, seconds, outcome |",
        "|---|---|---|---|",
    ]
    for r in rows:
        steps = "; ".join(
            f"{a['index']}{' (global)' if a['global'] else ''}: {a['iterations']} it, "
            f"{a['seconds']:.3f} s, {'ok' if a['ok'] else 'failed'}"
            for a in r["attempts"]
        )
        notes = "".join(f" ({note})" for note in r["notes"])
        out.append(
            f"| {r['problem']} | {'yes' if r['success'] else 'no'} | {r['seconds']:.3f} | "
            f"{steps or 'none (refused)'}{notes} |"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from pyroki_ros.planning import pipeline

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--problems",
        type=Path,
        nargs="+",
        default=[Path("test/data/mbm/generated_seed1.yaml")],
        help="problem files (default: the tuning set)",
    )
    parser.add_argument("--options", default="{}", help="more plan keywords, a JSON object")
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    options = plan_keywords(args.options)
    problems = [p for path in args.problems for p in mp.load_problems(REPO / path)]
    load_start = loadavg()
    planner = mb.warmed_planner(problems[0])
    rows = []
    for problem in problems:
        rows.append(plan_one(planner, problem, options))
        print(problem.name, rows[-1]["seconds"], rows[-1]["attempts"], flush=True)
    cap = pipeline.FIRST_PATH_ITERATIONS  # what the plan's own cut would have stopped
    meta = run_meta(
        "plan_progress.py", argv, load_start, options=args.options,
        problems=", ".join(f"`{p}`" for p in args.problems),
    )  # fmt: skip
    text = markdown(rows, meta, cap)
    print("\n".join(summary(rows, cap)))
    write_report(text, args.markdown)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
