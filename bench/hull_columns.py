#!/usr/bin/env python3
"""How many of an optimiser iteration's configurations need a hull measured as a hull: the
justification of ``pyroki_ros.collision.boxes.HULL_COLUMNS``.

Plans every problem of a MotionBenchMaker set (``--problems``, default the evaluation set)
as ``bench/mbm_benchmark.py --fine-spheres --start-collision escape`` does, without a budget,
and records each optimisation's start paths and result paths. In each path's knots and
segment midpoints (the configurations an iteration evaluates) it counts those whose hull's
bounding box is within the plan's margin (0.02 m) of an obstacle: only there can a hull's
hinge row be non-zero. Prints the distribution of that count per path; a count above
HULL_COLUMNS would make the optimiser's rows differ (conservatively) from the full hulls'.

Usage (repository root)::

    .venv/bin/python bench/hull_columns.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import machine_line, utc_now

import numpy as np

MARGIN = 0.02  # m, plan()'s default margin


def main() -> int:
    import jax
    import jax.numpy as jnp
    import mbm_benchmark as mb
    import mbm_problems as mp

    from pyroki_ros import collision as col
    from pyroki_ros.collision import boxes
    from pyroki_ros.model import kinematics as k
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=Path, default=mp.GENERATED_SET)
    parser.add_argument("--limit", type=int, help="the first problems only")
    args = parser.parse_args()

    planner = mb.make_planner(fine=True, start_collision="escape")
    robot, spheres = planner.robot, planner.optimizer.spheres
    boxed = col.CollisionTerms(robot, spheres.bounding())
    hull_rows = slice(spheres.n_boxes - spheres.n_hulls, None)  # of the boxes' rows
    paths: list[tuple[np.ndarray, object]] = []
    optimize = TrajectoryOptimizer.optimize

    def recorded(self, starts, *a, **kw):
        result = optimize(self, starts, *a, **kw)
        for path in [*np.asarray(starts), *(r.path for r in np.atleast_1d(result))]:
            if len(path) == 64 and kw.get("world") is not None:  # a plan's, not the goal search's
                paths.append((path, kw["world"]))
        return result

    TrajectoryOptimizer.optimize = recorded
    problems = mp.load_problems(args.problems)[: args.limit]
    for problem in problems:
        mb.run_problem(planner, problem)
    TrajectoryOptimizer.optimize = optimize

    box_distances = jax.jit(lambda q, world, checked: boxed.nearest_box_t(
        k.frames_t(robot, q), world, checked)[0])  # fmt: skip
    counts = []
    for path, world in paths:
        q = np.concatenate([path, (path[1:] + path[:-1]) / 2])  # knots and midpoints
        padded = world.padded(planner.optimizer.obstacle_buckets)
        checked = jnp.ones((spheres.n_spheres + spheres.n_boxes, padded.n_obstacles), bool)
        d = np.asarray(box_distances(jnp.asarray(q.T, robot.dtype), padded, checked))[hull_rows]
        counts.append(int((d < MARGIN).sum(axis=1).max()))
    counts = np.asarray(counts)
    print(f"{utc_now()}  {machine_line()}")
    print(
        f"set {args.problems.name}: {len(problems)} problems, {len(counts)} paths of "
        f"{len(q)} configurations; configurations with a hull's bounding box within "
        f"{MARGIN * 1e3:.0f} mm of an obstacle, per path: median {np.median(counts):.0f}, "
        f"p95 {np.percentile(counts, 95):.0f}, p99 {np.percentile(counts, 99):.0f}, max "
        f"{counts.max()}; paths over HULL_COLUMNS ({boxes.HULL_COLUMNS}): "
        f"{int((counts > boxes.HULL_COLUMNS).sum())}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
