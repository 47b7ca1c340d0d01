"""What a check pays for carrying the nearest obstacle: the justification of
``pyroki_ros.collision.obstacle_clearance_t`` (the checks' sphere-to-world distances).

A collision check wants each sphere's smallest distance to the world; the optimiser also
wants which obstacle is nearest (its gradient). Both loop over the scene's obstacles with a
running minimum; ``nearest_obstacle_t`` carries the obstacle's index through the loop as
well. Per MotionBenchMaker scene, the planner's sphere centres (the spheres checked against
obstacles, in the compiled programs' component layout) at B random configurations around
the problem's start, each function compiled alone, timed in turns (median of repeated
calls), and their distances compared.

Usage (repository root)::

    .venv/bin/python bench/clearance_check.py [--problems FILE] [--names NAME ...]
        [--markdown docs/benchmarks/clearance_check.md]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common import REPO, loadavg, measured_lines, run_meta, time_calls, write_report

import jax
import jax.numpy as jnp
import mbm_benchmark as mb
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.collision.jacobians import CollisionTerms
from pyroki_ros.model import kinematics as k

SIZES = (64, 256, 512)  # the global step's check sizes (rrt.CHUNKS)
DEFAULT_NAMES = ("bookshelf_thin/7", "cage/4", "table_under_pick/0", "box/0")


def measure(planner: mb.Planner, problem, size: int, rng: np.random.Generator) -> dict:
    """One row: both loops on ``size`` configurations of ``problem``'s scene."""
    optimizer = planner.optimizer
    scene = mb.to_world(problem)  # not padded: the loops stop at the padding anyway
    world = jax.tree.map(lambda a: jnp.asarray(a, optimizer.robot.dtype), scene)
    active = planner.robot.active_mask(planner.arm)
    checked, _ = col.checked_pairs(optimizer.robot, optimizer.spheres, scene, moving=active)
    terms = CollisionTerms(optimizer.robot, optimizer.spheres)
    start = mb.start_configuration(planner, problem)
    q = start + rng.normal(0.0, 0.5, (size, len(start))) * active
    centers = terms.centers_t(k.frames_t(optimizer.robot, jnp.asarray(q.T, optimizer.robot.dtype)))
    points, mask = terms.world_part(centers, jnp.asarray(checked))
    mask = mask[:, None, :]
    nearest = jax.jit(lambda p, w, m: col.nearest_obstacle_t(p, w, m)[0])
    clearance = jax.jit(col.obstacle_clearance_t)
    a = np.asarray(nearest(points, world, mask))  # compiles
    b = np.asarray(clearance(points, world, mask))
    seconds = {"nearest": [], "clearance": []}
    for _ in range(5):  # in turns: a drifting machine slows both alike
        for name, fn in (("nearest", nearest), ("clearance", clearance)):
            calls = time_calls(
                lambda fn=fn: fn(points, world, mask).block_until_ready(), min_repeats=10
            )
            seconds[name] += list(calls.wall)
    return {
        "problem": problem.name,
        "obstacles": scene.n_obstacles,
        "size": size,
        "nearest": float(np.median(seconds["nearest"])),
        "clearance": float(np.median(seconds["clearance"])),
        "difference": float(np.abs(a - b).max()),
    }


def markdown(rows: list[dict], meta: dict) -> str:
    lines = ["# The checks' distances: with and without the nearest obstacle", ""]
    lines += measured_lines(meta) + [""]
    lines += [
        (
            "Per scene and batch size B: one call of `nearest_obstacle_t` (distance and the "
            "nearest obstacle's index carried through the loop over obstacles; its gradient "
            "not asked) and of `obstacle_clearance_t` (the distance alone), the planner's "
            "fine spheres checked against obstacles, median of 50 calls each in turns; "
            "*difference*: largest difference of their distances (m)."
        ),
        "",
        "| scene | obstacles | B | nearest | clearance | ratio | difference |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['problem']} | {r['obstacles']} | {r['size']} | {r['nearest'] * 1e3:.3f} ms "
            f"| {r['clearance'] * 1e3:.3f} ms | {r['clearance'] / r['nearest']:.2f} "
            f"| {r['difference']:.1e} |"
        )
    ratios = [r["clearance"] / r["nearest"] for r in rows]
    summary = f"median {np.median(ratios):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}"
    lines += ["", f"Ratio clearance / nearest over all rows: {summary}."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", default="test/data/mbm/generated_seed2.yaml")
    parser.add_argument("--names", nargs="+", default=list(DEFAULT_NAMES))
    parser.add_argument("--markdown", default="", help="report file ('' for none)")
    args = parser.parse_args(argv)
    problems = {p.name: p for _, p in mb.select([REPO / args.problems], None, None, False)}
    missing = [n for n in args.names if n not in problems]
    if missing:
        parser.error(f"no problems {missing} in {args.problems}")
    load_start = loadavg()
    planner = mb.make_planner(fine=True, buckets=mb.BUCKETS)
    rng = np.random.default_rng(0)
    rows = []
    for name in args.names:
        for size in SIZES:
            rows.append(measure(planner, problems[name], size, rng))
            print(rows[-1], flush=True)
    meta = run_meta("clearance_check.py", argv, load_start, problems=args.problems)
    write_report(markdown(rows, meta), args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
