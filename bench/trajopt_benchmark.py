#!/usr/bin/env python3
"""Trajectory-optimisation benchmark: collision-aware Panda plans among random obstacles.

Protocol:

* one world of ``--obstacles`` random obstacles (spheres and tilted boxes, 3-7 cm, in front
  of the robot; :func:`scenes.random_obstacles`, fixed seed);
* ``--pairs`` random start/goal pairs inside the limits, both configurations at least 3 cm
  from every obstacle and from the robot itself, the hand moving >= 0.3 m
  (:func:`scenes.feasible_cases`); the goal is the hand's pose at the goal
  configuration (IK decides the goal configuration);
* success: the planner's own verdict, re-checked here independently: goal within 1 mm /
  1 degree by a float64 numpy FK (test/reference_fk.py), every point inside the limits, and
  no penetration of any obstacle or self pair at 10 samples per segment (numpy distances of
  test/collision_reference.py);
* per T in ``--steps``: success %, median / p95 / max wall time per plan (after a warm-up plan
  that compiles), mean LM iterations, and the cold compile time; each path checked right
  after its plan, or with ``--check-after`` all after the last plan, the plans timed back to
  back (on a shared VM a plan that follows other work runs slower: bench/plan_after_idle.py);
  ``--plan-options``: ``plan`` keywords as JSON, one row per variant, every pair planned with
  each variant back to back (the order reversed every other pair);
* batched: ``plan_batch`` of all pairs at once (one program, vmap over pairs: the GPU mode;
  one IK goal configuration from each start, straight-line starts, no restarts), on a fresh
  optimiser: the first call's time minus the best later call's is the compile time of the
  batch program (it is compiled per batch size); plans/s from the best of ``--batch-repeats``
  timed calls, success % (planner's verdict and the independent check) and why the rest fail;
  the batch alone (``replan_failures=False``) and with its default re-planning of the
  batch's failures by ``plan`` one by one (pairs re-planned, extra seconds, final success).

Usage (repository root)::

    .venv/bin/python bench/trajopt_benchmark.py --markdown docs/benchmarks/trajopt.md
    .venv/bin/python bench/trajopt_benchmark.py --pairs 20 --steps 64     # quick
    # only the batched part (minutes instead of ~45); --markdown then replaces only the
    # "Batched (...)" paragraph of an existing file:
    .venv/bin/python bench/trajopt_benchmark.py --only batch --markdown docs/benchmarks/trajopt.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path

from common import commit_of, interleaved, machine_line, plan_keywords, utc_now

import numpy as np


def independent_check(model, check, path, case, obstacles) -> tuple[bool, str]:
    from reference_fk import make_transform, pose_errors, quat_wxyz_to_matrix

    if not check.within_limits(path):
        return False, "outside limits"
    world_min, self_min = check.path_clearance(model, path, obstacles, samples=10)
    if world_min <= 0 or self_min <= 0:
        return False, f"collision ({world_min:.4f}, {self_min:.4f})"
    target = make_transform(quat_wxyz_to_matrix(case.goal_pose[:4]), case.goal_pose[4:])
    p_err, r_err = pose_errors(target, check.link_pose(path[-1], "panda_hand"))
    if p_err > 1e-3 or r_err > math.radians(1.0):
        return False, f"goal error {p_err:.2e} m / {r_err:.2e} rad"
    return True, ""


def check_case(model, check, plan, case, obstacles) -> tuple[bool, bool, str]:
    """(the planner's word, the independent check's, why the check said no)."""
    good, why = independent_check(model, check, plan.path, case, obstacles)
    return bool(plan.success), good, why


def single_row(steps: int, options: str, plans: list, verdicts: list, compile_s: float) -> dict:
    """One row of single plans: success by the planner and by the check, plan times."""
    ms = np.array([plan.solve_seconds for plan in plans]) * 1e3
    return {
        "steps": steps,
        "options": options,
        "pairs": len(plans),
        "success_pct": 100.0 * np.mean([ok for ok, _, _ in verdicts]),
        "checked_pct": 100.0 * np.mean([good for _, good, _ in verdicts]),
        "median_ms": float(np.median(ms)),
        "p95_ms": float(np.percentile(ms, 95)),
        "max_ms": float(ms.max()),
        "mean_iterations": float(np.mean([plan.iterations for plan in plans])),
        "compile_s": compile_s,
        "disagreements": [
            f"pair {i}: planner says {ok}, check says {why or good}"
            for i, (ok, good, why) in enumerate(verdicts)
            if ok != good
        ],
    }


def run_batch(args, robot, spheres, model, check, world, cases, obstacles) -> dict:
    """``plan_batch`` of all pairs on a fresh optimiser, first the batch alone
    (``replan_failures=False``: compile time, plans/s, success), then with its default
    re-planning of the batch's failures one by one (extra seconds, final success)."""
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    planner = TrajectoryOptimizer(robot, spheres)  # cold: nothing compiled yet
    starts = np.stack([c.start for c in cases])
    goals = np.stack([c.goal_pose for c in cases])
    load_start = os.getloadavg()

    def call(replan: bool):
        t0 = time.perf_counter()
        results = planner.plan_batch(
            starts,
            goals,
            tip="panda_hand",
            world=world,
            num_steps=args.batch_steps,
            replan_failures=replan,
            batched=True,  # the vmapped solve (the GPU default), also on this CPU
        )
        return results, time.perf_counter() - t0

    def verdicts_of(results):
        verdicts = [
            independent_check(model, check, r.path, c, obstacles) for r, c in zip(results, cases)
        ]
        reasons: dict[str, int] = {}
        for good, why in verdicts:
            if not good:
                kind = "goal error" if why.startswith("goal") else why.split(" (")[0]
                reasons[kind] = reasons.get(kind, 0) + 1
        return {
            "success_pct": 100.0 * sum(r.success for r in results) / len(cases),
            "checked_pct": 100.0 * sum(good for good, _ in verdicts) / len(cases),
            "failures": reasons,
            "disagreements": sum(r.success != good for r, (good, _) in zip(results, verdicts)),
        }

    _, first = call(False)  # compiles the IK and the optimiser for this batch size, then solves
    timed = [call(False) for _ in range(max(args.batch_repeats, 1))]
    results, batch_s = min(timed, key=lambda rt: rt[1])
    iterations = np.array([r.iterations for r in results])
    # With re-planning: the first call also compiles plan()'s programs for the failures.
    _, replan_first = call(True)
    replan_timed = [call(True) for _ in range(max(args.batch_repeats, 1))]
    replanned, replan_s = min(replan_timed, key=lambda rt: rt[1])
    count = sum("re-planned alone" in r.message for r in replanned)
    kept = sum("re-planned alone: no better" in r.message for r in replanned)
    return {
        "steps": args.batch_steps,
        "pairs": len(cases),
        "seconds": batch_s,
        "all_seconds": [t for _, t in timed],
        "first_call_s": first,
        "compile_s": first - batch_s,
        "plans_per_s": len(cases) / batch_s,
        **verdicts_of(results),
        "mean_iterations": float(iterations.mean()),
        "max_iterations": int(iterations.max()),
        "replan": {
            "seconds": replan_s,
            "all_seconds": [t for _, t in replan_timed],
            "first_call_s": replan_first,
            "extra_s": replan_s - batch_s,
            "replanned": count,
            "kept_batch_result": kept,
            "plans_per_s": len(cases) / replan_s,
            **verdicts_of(replanned),
        },
        "load_average": {"start": load_start[0], "end": os.getloadavg()[0]},
        "niceness": os.nice(0),
        "measured": utc_now(),
    }


def _failures(verdict: dict) -> str:
    failures = ", ".join(f"{n} {kind}" for kind, n in sorted(verdict["failures"].items()))
    agree = (
        "planner and check agree on every pair"
        if verdict["disagreements"] == 0
        else f"planner and check disagree on {verdict['disagreements']} pairs"
    )
    return f" ({'failures: ' + failures + '; ' if failures else ''}{agree})"


def batch_paragraph(batch: dict, machine: str = "", command: str = "") -> str:
    replan = batch["replan"]
    text = (
        f"Batched (`plan_batch`, T = {batch['steps']}, all {batch['pairs']} pairs in one "
        "vmapped solve: one IK goal configuration from each start, straight-line starts, no "
        f"restarts). The batch alone (`replan_failures=False`): {batch['seconds']:.2f} s = "
        f"{batch['plans_per_s']:.1f} plans/s (best of {len(batch['all_seconds'])} calls: "
        + ", ".join(f"{t:.2f}" for t in batch["all_seconds"])
        + f" s), {batch['success_pct']:.1f} % successful by the planner, "
        f"{batch['checked_pct']:.1f} % by the independent check"
        + _failures(batch)
        + f"; mean {batch['mean_iterations']:.0f} LM iterations, max {batch['max_iterations']} "
        f"(the vmapped loop runs until its slowest pair stops); compile of the batch program "
        f"{batch['compile_s']:.1f} s (first call {batch['first_call_s']:.1f} s minus the best "
        "later call; it is compiled per batch size). With re-planning (the default, "
        f"`replan_failures=True`: each pair the batch left unsuccessful planned again by `plan`, "
        f"one after the other): {replan['replanned']} pairs re-planned"
        + (
            f" ({replan['kept_batch_result']} kept the batch's result)"
            if replan["kept_batch_result"]
            else ""
        )
        + f", {replan['seconds']:.2f} s in all = {replan['plans_per_s']:.1f} plans/s (best of "
        f"{len(replan['all_seconds'])} calls: "
        + ", ".join(f"{t:.2f}" for t in replan["all_seconds"])
        + f" s; {replan['extra_s']:.2f} s more than the batch alone, "
        f"{replan['extra_s'] / max(replan['replanned'], 1):.2f} s per re-planned pair; the "
        f"first such call, {replan['first_call_s']:.1f} s, also compiled `plan`'s programs), "
        f"{replan['success_pct']:.1f} % successful by the planner, {replan['checked_pct']:.1f} "
        "% by the independent check" + _failures(replan) + "."
    )
    if command:
        load = batch["load_average"]
        text += (
            f" Measured {batch['measured']} on {machine}, shared with other developers' jobs "
            f"and run with niceness {batch['niceness']} (load average {load['start']:.2f} at "
            f"the start of the batched part, {load['end']:.2f} at its end), so the times are "
            f"pessimistic; command: `{command}`."
        )
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--obstacles", type=int, default=10)
    parser.add_argument("--steps", default="32,64,128")
    parser.add_argument("--batch-steps", type=int, default=64)
    parser.add_argument("--batch-repeats", type=int, default=2, help="timed batched calls")
    parser.add_argument(
        "--only",
        choices=("all", "single", "batch"),
        default="all",
        help="run only the single plans or only the batched part (default both)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--plan-options",
        nargs="+",
        default=["{}"],
        help="plan keywords as JSON, one object per variant (each a row; every pair planned "
        "with each variant back to back)",
    )
    parser.add_argument(
        "--check-after",
        action="store_true",
        help="time every plan back to back and check the paths after the last (default: "
        "each path checked right after its plan)",
    )
    parser.add_argument("--markdown", type=Path)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import plan_check as check
    import scenes

    from pyroki_ros import Robot
    from pyroki_ros import objectives as O
    from pyroki_ros.collision import RobotSpheres, World
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer
    from pyroki_ros.robots import urdf_path

    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    model = check.SphereModel(spheres)
    world, cases, warm = scenes.benchmark_scene(
        robot, spheres, args.seed, args.obstacles, args.pairs, "panda_hand"
    )
    obstacles = {name: np.asarray(getattr(world, name)) for name in World.__dataclass_fields__}

    rows = []
    single_steps = [] if args.only == "batch" else [int(s) for s in args.steps.split(",")]
    variants = [plan_keywords(text) for text in args.plan_options]
    for steps in single_steps:
        planner = TrajectoryOptimizer(robot, spheres)  # cold: compile counted below
        goal = [O.pose("panda_hand", warm.goal_pose)]
        t0 = time.perf_counter()
        planner.warm_up(warm.start, goal, world=world, num_steps=steps)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        planner.plan(warm.start, goal, world=world, num_steps=steps)
        compile_s = first - (time.perf_counter() - t0)
        plans = [[] for _ in variants]
        verdicts = [[] for _ in variants]
        for i, case in enumerate(cases):
            for v in interleaved(len(variants), i):
                plans[v].append(
                    planner.plan(
                        case.start,
                        [O.pose("panda_hand", case.goal_pose)],
                        world=world,
                        num_steps=steps,
                        **variants[v],
                    )
                )
                if not args.check_after:
                    verdicts[v].append(check_case(model, check, plans[v][-1], case, obstacles))
        for v, options in enumerate(args.plan_options):  # each variant's JSON text
            if args.check_after:
                verdicts[v] = [
                    check_case(model, check, plan, case, obstacles)
                    for plan, case in zip(plans[v], cases)
                ]
            rows.append(single_row(steps, options, plans[v], verdicts[v], compile_s))
            row = rows[-1]
            print(
                json.dumps({key: value for key, value in row.items() if key != "disagreements"}),
                flush=True,
            )
            for line in row["disagreements"]:
                print("  ", line)

    batch = None
    if args.only != "single":
        batch = run_batch(args, robot, spheres, model, check, world, cases, obstacles)
        print(json.dumps(batch), flush=True)

    machine = machine_line()
    command = "bench/trajopt_benchmark.py " + shlex.join(sys.argv[1:])
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "batch": batch, "machine": machine}))
    if args.markdown and args.only == "batch":
        # Replace only the batched paragraph: the single-plan rows stay as they were measured.
        paragraph = batch_paragraph(batch, machine, f".venv/bin/python {command}")
        paragraph = paragraph[:-1] + (
            " (`--only batch` skips the single plans; the rows above are from an earlier run)."
        )
        lines = args.markdown.read_text().split("\n")
        at = [i for i, line in enumerate(lines) if line.startswith("Batched (`plan_batch`")]
        if not at:
            print(f"no 'Batched (`plan_batch`' paragraph in {args.markdown}", file=sys.stderr)
            return 1
        lines[at[0]] = paragraph
        args.markdown.write_text("\n".join(lines))
    elif args.markdown:
        lines = [
            "# Trajectory optimisation benchmark",
            "",
            f"Measured {utc_now()} on {machine}; commit {commit_of(None)}.",
            f"Command: `.venv/bin/python {command}`",
            "",
            (
                f"Panda (bundled sphere model: {spheres.n_spheres} spheres, {spheres.n_pairs} self "
                f"pairs), {args.obstacles} random obstacles, {len(cases)} random feasible "
                "start/goal pairs (hand pose goals), margin 2 cm, one plan at a time (CPU "
                "strategy: up to 8 start paths one after the other, cycling through up to 4 IK "
                "goal configurations when the first is unusable or fails). Success re-checked "
                "independently (reference FK, numpy distances at 10 samples per segment)"
                + (
                    ", every path after the last plan (the plans timed back to back)."
                    if args.check_after
                    else ", each path right after its plan (the next plan follows the check)."
                )
                + (
                    " Plan options per row (`plan` keywords), every pair planned with each "
                    "back to back, the order reversed every other pair."
                    if len(variants) > 1
                    else ""
                )
            ),
            "",
            "| T | options | success | checked | median | p95 | max | LM iterations | compile |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['steps']} | `{r['options']}` | {r['success_pct']:.1f} % | "
                f"{r['checked_pct']:.1f} % | "
                f"{r['median_ms']:.0f} ms | {r['p95_ms']:.0f} ms | {r['max_ms']:.0f} ms | "
                f"{r['mean_iterations']:.0f} | {r['compile_s']:.1f} s |"
            )
        if batch is not None:
            lines += ["", batch_paragraph(batch)]
        lines.append("")
        args.markdown.write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
