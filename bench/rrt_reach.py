"""Can the planner's global step reach a MotionBenchMaker goal at all, and under which
collision model? A diagnostic for problems the planner fails: it tells a sphere model that
closes the passage from a search that is too weak to find it.

Per problem, RRT-Connect (:func:`pyroki_ros.planning.rrt.rrt_connect`, the plan's global step)
from the problem's start to its own goal configuration (``goal_ik[0]``: clear of the real
meshes) under three validity rules, each at every margin given:

* *plan*: the bundled fine sphere model with hulls as their bounding boxes, as the plan's
  global step checks (``rrt.Checker``: compiled, batched);
* *hulls*: the same with the hand's mesh hull itself (the fingers are boxes either way):
  the optimiser's and the final check's model, slower per configuration;
* *judge*: robometrics' Franka spheres and the exact obstacles, ``test/mbm_check.py``'s rule
  (numpy, far slower per configuration: compare its nodes, not only its verdict).

Near the start and goal the margin relaxes to their own clearance, as in the plan
(``Checker.relax_near``). Every row has the same wall-clock budget and seed. ``--local``
compares samplers: the share of each round's samples drawn near the growing tree
(``rrt_connect(local=...)``; 0: uniform only); ``--balance`` the size ratio past which the
smaller tree grows every round from samples near its own nodes (``rrt_connect(balance=...)``;
inf: the trees strictly take turns); ``--options`` other keywords of ``rrt_connect`` (its
extension ``step``, samples per round ``batch``, connection attempts ``connect``, edge
``resolution``), one JSON object per variant.

Usage: ``.venv/bin/python bench/rrt_reach.py [--problems FILE] [--names NAME ... | all]
[--budget S] [--margins M,...] [--models M,...] [--local L,...] [--balance B,...]
[--seeds N] [--options JSON ...]
[--markdown docs/benchmarks/rrt_reach.md]``
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import sys
from collections.abc import Sequence

from common import REPO, loadavg, measured_lines, pct, run_meta, write_report

import mbm_benchmark as mb
import mbm_check as mc
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.planning import rrt

MODELS = ("plan", "hulls", "judge")
DEFAULT_NAMES = ("bookshelf_thin/7", "bookshelf_thin/0", "bookshelf_thin/2")


class JudgeChecker(rrt.Checker):
    """``rrt.Checker`` whose clearance is the independent check's (robometrics' spheres,
    ``test/mbm_check.py``) over the problem's exact obstacles."""

    def __init__(self, planner: mb.Planner, problem, active: np.ndarray, margin: float):
        super().__init__(planner.optimizer, None, col.DEFAULT_CONTACTS, active, margin)
        names = list(planner.robot.joint_names)
        self._arm = [names.index(j) for j in mc.ARM_JOINTS]
        self._scene = problem.scene

    def clearance(self, q: np.ndarray) -> np.ndarray:
        q = np.atleast_2d(np.asarray(q, np.float64))
        c = mc.clearances(q[:, self._arm], self._scene)
        self.count += len(q)
        return np.minimum(c.world, c.self_margin)


def checker(planner: mb.Planner, problem, model: str, active, margin: float) -> rrt.Checker:
    """The validity rule ``model`` (one of :data:`MODELS`) at ``margin`` (m)."""
    if model == "judge":
        return JudgeChecker(planner, problem, active, margin)
    world = mb.to_world(problem)
    bounding = model == "plan"
    return rrt.Checker(planner.optimizer, world, col.DEFAULT_CONTACTS, active, margin, bounding)


def reach(
    planner: mb.Planner,
    problem,
    model: str,
    margin: float,
    budget: float,
    seed: int,
    local: float,
    balance: float = rrt.BALANCE,
    options: dict | None = None,
):
    """One RRT-Connect run: a row for the report; ``options``: more rrt_connect keywords."""
    options = options or {}
    optimizer = planner.optimizer
    active = np.isin(optimizer.robot.joint_names, planner.arm)
    start = mb.start_configuration(planner, problem)
    goal = mb.configurations(planner, problem.goal_ik[:1])
    check = checker(planner, problem, model, active, margin)
    ends = np.concatenate([start[None], goal])
    end_clearance = check.clearance(ends)
    check.relax_near(ends, end_clearance - 1e-4)
    for size in rrt.CHUNKS:  # compiles each call size outside the budget
        check.clearance(ends[:1].repeat(size, 0))
    check.count = 0
    found = rrt.rrt_connect(
        check,
        start,
        goal,
        optimizer.robot.limits.lower,
        optimizer.robot.limits.upper,
        active,
        np.random.default_rng([seed, 7]),
        budget=budget,
        local=local,
        balance=balance,
        **options,
    )
    return {
        "problem": problem.name,
        "model": model,
        "margin": margin,
        "local": local,
        "balance": balance,
        "options": json.dumps(options, sort_keys=True),
        "seed": seed,
        "ends": tuple(float(c) for c in end_clearance),
        "found": found.success,
        "seconds": found.seconds,
        "rounds": found.rounds,
        "nodes": found.nodes,
        "checked": check.count,
    }


def _key(r: dict) -> tuple:
    """The rule a row ran under: model, margin, local, balance, options."""
    return r["model"], r["margin"], r["local"], r["balance"], r["options"]


def summary(rows: list[dict]) -> list[str]:
    """One line per (model, margin, local, balance, options): runs that found a path, their
    seconds, and the seconds of all runs (a failure counts its whole run)."""
    out = [
        (
            "| model | margin | local | balance | options | found | seconds median / p90 / max "
            "(found) | seconds, all runs | ms per round | nodes median |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]

    for model, margin, local, balance, options in dict.fromkeys(map(_key, rows)):
        group = [r for r in rows if _key(r) == (model, margin, local, balance, options)]
        found = [r for r in group if r["found"]]
        times = [r["seconds"] for r in found]  # none found: nan
        total = sum(r["seconds"] for r in group)
        rounds = sum(r["rounds"] for r in group)
        out.append(
            f"| {model} | {1e3 * margin:.1f} mm | {local:g} | {balance:g} | `{options}` | "
            f"{len(found)}/{len(group)} | "
            f"{pct(times, 50):.2f} / {pct(times, 90):.2f} / {pct(times, 100):.2f} | "
            f"{total:.2f} | {1e3 * total / max(rounds, 1):.1f} | "
            f"{int(np.median([r['nodes'] for r in group]))} |"
        )
    return out


def families(rows: list[dict]) -> list[str]:
    """Seconds of all runs per problem family (columns) and rule (rows, as in the summary)."""
    totals: dict[tuple, float] = {}
    for r in rows:
        cell = (_key(r), r["problem"].split("/")[0])
        totals[cell] = totals.get(cell, 0.0) + r["seconds"]
    names = list(dict.fromkeys(family for _, family in totals))
    out = [
        "Seconds of all runs per family:",
        "",
        "| model | margin | local | balance | options | " + " | ".join(names) + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for key in dict.fromkeys(k for k, _ in totals):
        model, margin, local, balance, options = key
        cells = " | ".join(f"{totals[key, n]:.2f}" for n in names)
        out.append(
            f"| {model} | {1e3 * margin:.1f} mm | {local:g} | {balance:g} | `{options}` | {cells} |"
        )
    return out


def markdown(rows: list[dict], meta: dict) -> str:
    out = [
        "# Can the global step reach the goal? (RRT-Connect under three collision models)",
        "",
        *measured_lines(meta),
        "",
        __doc__.split("\n\nUsage:")[0].strip(),
        "",
        (
            f"Budget {meta['budget']:g} s per row, seeds {meta['seeds']}; problems from "
            f"`{meta['problems']}`. *ends*: the start's and goal's clearance under the model "
            "(mm); *checked*: configurations checked in the budget."
        ),
        "",
        *summary(rows),
        "",
        *families(rows),
        "",
        (
            "| problem | model | margin | local | balance | options | seed | ends | found | "
            "seconds | rounds | nodes | checked |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ends = " / ".join(f"{1e3 * c:.1f}" for c in r["ends"])
        out.append(
            f"| {r['problem']} | {r['model']} | {1e3 * r['margin']:.1f} mm | {r['local']:g} | "
            f"{r['balance']:g} | `{r['options']}` | "
            f"{r['seed']} | {ends} | {'yes' if r['found'] else 'no'} | {r['seconds']:.2f} | "
            f"{r['rounds']} | {r['nodes']} | {r['checked']} |"
        )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--problems", default="test/data/mbm/generated_seed2.yaml", help="a problem file"
    )
    parser.add_argument(
        "--names", nargs="+", default=list(DEFAULT_NAMES), help="problems ('all': every one)"
    )
    parser.add_argument("--budget", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--margins", default="0,0.005", help="m, comma-separated")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated")
    parser.add_argument(
        "--local", default="0", help="shares of samples near the tree, comma-separated"
    )
    parser.add_argument(
        "--balance",
        default=f"{rrt.BALANCE:g}",
        help="tree size ratios past which the smaller grows (inf: turns), comma-separated",
    )
    parser.add_argument("--seeds", type=int, default=1, help="seeds 0 .. N-1 per row")
    parser.add_argument(
        "--options",
        nargs="+",
        default=["{}"],
        help="more rrt_connect keywords per variant, JSON objects (e.g. '{\"step\": 0.5}')",
    )
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    models = [m.strip() for m in args.models.split(",")]
    unknown = set(models) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {MODELS}")
    margins = [float(m) for m in args.margins.split(",")]
    locals_ = [float(v) for v in args.local.split(",")]
    balances = [float(v) for v in args.balance.split(",")]
    options = [json.loads(v) for v in args.options]
    # rrt_connect's keyword-only settings, less those this script has options of its own for
    parameters = inspect.signature(rrt.rrt_connect).parameters.values()
    keywords = {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY}
    tunable = keywords - {"budget", "local", "balance"}
    unknown = {k for o in options for k in o} - tunable
    if unknown:
        parser.error(f"--options: unknown rrt_connect keywords {sorted(unknown)}")
    problems = {p.name: p for _, p in mb.select([REPO / args.problems], None, None, False)}
    names = list(problems) if args.names == ["all"] else args.names
    missing = [n for n in names if n not in problems]
    if missing:
        parser.error(f"no problems {missing} in {args.problems}")
    load_start = loadavg()
    planner = mb.make_planner(fine=True, buckets=mb.BUCKETS)
    rows = []
    for name in names:
        for model in models:
            for margin in margins:
                # The variants side by side on one problem, seed by seed (a drifting machine
                # slows them alike).
                for seed in range(args.seeds):
                    for local, balance, more in itertools.product(locals_, balances, options):
                        row = reach(
                            planner, problems[name], model, margin, args.budget, seed, local,
                            balance, more,
                        )  # fmt: skip
                        rows.append(row)
                        print(row, flush=True)
    meta = run_meta(
        "rrt_reach.py", argv, load_start, budget=args.budget, seeds=args.seeds,
        problems=args.problems,
    )  # fmt: skip
    write_report(markdown(rows, meta), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
