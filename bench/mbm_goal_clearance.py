#!/usr/bin/env python3
"""Why a MotionBenchMaker goal is out of the planner's reach: for every problem none of whose
own goal configurations (``goal_ik``) the planner's sphere model calls clear, how close the
real collision geometry comes to the scene there and how deep the spheres go.

Per such problem and goal configuration: the smallest clearance of the Panda's collision
geometry (``test/mbm_mesh.py``: example-robot-data's meshes and finger boxes, their surfaces
sampled every ``--spacing``, 1 mm by default, finer than the generator's 5 mm) with the link
and obstacle, and the deepest overlap of the planner's spheres per link (all links but
``panda_link0``, which stands on the stand). A positive mesh clearance with a sphere overlap
means the sphere model, not the scene, rules the goal out.

Usage (repository root; ~1 min)::

    .venv/bin/python bench/mbm_goal_clearance.py            # the fine set
    .venv/bin/python bench/mbm_goal_clearance.py --default  # the default spheres
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common import machine_line, utc_now

import mbm_benchmark as mb
import mbm_mesh
import mbm_problems as mp
import numpy as np


def sphere_overlaps(planner: mb.Planner, problem: mp.Problem, q: np.ndarray) -> dict[str, float]:
    """{link: deepest overlap (m, > 0)} of the planner's obstacle spheres at configurations
    ``q`` (K, n), links with an overlap only."""
    import jax.numpy as jnp

    from pyroki_ros.collision import sphere_centers, world_distances

    spheres = planner.spheres
    centers = sphere_centers(planner.robot, spheres, jnp.asarray(q, jnp.float32))
    d = np.asarray(world_distances(centers, spheres.radii, mb.to_world(problem))).min(-1)
    links = np.asarray(spheres.link_names)
    d[:, ~spheres.world_mask] = np.inf
    out = {}
    for link in dict.fromkeys(spheres.link_names):
        deepest = float(d[:, links == link].min())
        if link != "panda_link0" and deepest < 0:
            out[link] = -deepest
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--default", action="store_true", help="the default spheres, not fine")
    parser.add_argument("--spacing", type=float, default=0.001, help="mesh samples (m)")
    args = parser.parse_args(argv)
    planner = mb.make_planner(fine=not args.default)
    mbm_mesh.POINTS = mbm_mesh.load_geometry(spacing=args.spacing)
    print(f"{utc_now()} {machine_line()}")
    print(
        f"spheres: {'default' if args.default else 'fine'}; mesh samples every "
        f"{args.spacing * 1e3:g} mm"
    )
    for path in mb.DEFAULT_SETS:
        for problem in mp.load_problems(path):
            if mb.own_goals_clear(planner, problem).startswith("0/"):
                arm = np.asarray(problem.goal_ik, np.float64).reshape(-1, 7)
                clearance, where = mbm_mesh.mesh_clearances(arm, problem.scene)
                best = int(np.argmax(clearance))
                overlaps = sphere_overlaps(planner, problem, mb.configurations(planner, arm))
                spheres = ", ".join(f"{k} {v * 1e3:.1f} mm" for k, v in overlaps.items())
                print(
                    f"{path.stem} {problem.name}: {len(arm)} own goals; the clearest by the "
                    f"meshes {clearance[best] * 1e3:.2f} mm ({where[best]}); spheres "
                    f"overlap: {spheres}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
