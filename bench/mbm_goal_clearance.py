#!/usr/bin/env python3
"""Why a MotionBenchMaker goal is out of the planner's reach: for every problem none of whose
own goal configurations (``goal_ik``) the planner's sphere model calls clear, how close the
real collision geometry comes to the scene there and how deep the spheres go.

Per such problem and goal configuration: the smallest clearance of the Panda's collision
geometry (``test/mbm_mesh.py``: example-robot-data's meshes and finger boxes, their surfaces
sampled every ``--spacing``, 1 mm by default, finer than the generator's 5 mm) with the link
and obstacle, and the deepest overlap of the planner's spheres (and boxes) per link (all links but
``panda_link0``, which stands on the stand). A positive mesh clearance with a sphere overlap
means the sphere model, not the scene, rules the goal out.

``--exact LINK ...`` answers what a better model of those links would buy: per family, the
problems with at least one own goal configuration clear by the spheres, and by the spheres
with the named links' spheres replaced by their real geometry (the sampled surfaces above:
the fingers' boxes, the hand's mesh). It bounds the gain from exact link shapes in the
planner (its goal search may also find goals the generator did not keep).

Usage (repository root; ~1 min per set)::

    .venv/bin/python bench/mbm_goal_clearance.py            # the fine set
    .venv/bin/python bench/mbm_goal_clearance.py --default  # the default spheres
    .venv/bin/python bench/mbm_goal_clearance.py --exact panda_leftfinger panda_rightfinger \
        --exact panda_hand panda_leftfinger panda_rightfinger
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from common import machine_line, utc_now

import mbm_benchmark as mb
import mbm_mesh
import mbm_problems as mp
import numpy as np


def sphere_overlaps(planner: mb.Planner, problem: mp.Problem, q: np.ndarray) -> dict[str, float]:
    """{link: deepest overlap (m, > 0)} of the planner's obstacle spheres at configurations
    ``q`` (K, n), links with an overlap only."""
    per_link = link_clearances(planner, problem, q)
    return {link: -float(c.min()) for link, c in per_link.items() if c.min() < 0}


def link_clearances(
    planner: mb.Planner, problem: mp.Problem, q: np.ndarray
) -> dict[str, np.ndarray]:
    """{link: (K,) smallest clearance (m) of the planner's obstacle spheres and boxes of that
    link} at configurations ``q`` (K, n), every link but ``panda_link0`` (on the stand)."""
    import jax.numpy as jnp

    from pyroki_ros.collision import robot_box_distances, sphere_centers, world_distances

    spheres = planner.spheres
    q = jnp.asarray(q, jnp.float32)
    world = mb.to_world(problem)
    centers = sphere_centers(planner.robot, spheres, q)
    d = np.asarray(world_distances(centers, spheres.radii, world)).min(-1)
    d[:, ~spheres.world_mask] = np.inf
    if spheres.n_boxes:  # the boxes' rows follow the spheres'
        boxes = np.asarray(robot_box_distances(planner.robot, spheres, q, world)).min(-1)
        d = np.concatenate([d, boxes], axis=1)
    links = np.asarray(spheres.link_names + spheres.box_link_names)
    return {
        link: d[:, links == link].min(axis=1)
        for link in dict.fromkeys(links.tolist())
        if link != "panda_link0"
    }


def exact_gain(planner: mb.Planner, problems, exact: Sequence[tuple[str, ...]]) -> list[str]:
    """Table rows: per family, problems with an own goal configuration clear by the spheres,
    and by the spheres with each group of ``exact`` links taken at their real geometry."""
    counts: dict[str, list[int]] = {}
    for problem in problems:
        arm = np.asarray(problem.goal_ik, np.float64).reshape(-1, 7)
        per_link = link_clearances(planner, problem, mb.configurations(planner, arm))
        row = counts.setdefault(problem.family, [0] * (len(exact) + 2))
        row[0] += 1
        row[1] += bool((np.min(list(per_link.values()), axis=0) >= 0).any())
        for g, links in enumerate(exact):
            spheres = [c for link, c in per_link.items() if link not in links]
            skip = [link for link in mbm_mesh.POINTS if link not in links]
            real = mbm_mesh.mesh_clearances(arm, problem.scene, skip_links=skip)[0]
            row[g + 2] += bool(((np.min(spheres, axis=0) >= 0) & (real >= 0)).any())
    total = [sum(c) for c in zip(*counts.values(), strict=True)]
    heads = ["family", "problems", "spheres"] + [f"real {' + '.join(g)}" for g in exact]
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for family, row in [*counts.items(), ("**all**", total)]:
        cells = [str(row[0])] + [f"{c} ({100 * c / row[0]:.0f} %)" for c in row[1:]]
        lines.append(f"| {family} | " + " | ".join(cells) + " |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--default", action="store_true", help="the default spheres, not fine")
    parser.add_argument("--spacing", type=float, default=0.001, help="mesh samples (m)")
    parser.add_argument(
        "--problems", type=Path, nargs="+", default=list(mb.DEFAULT_SETS), help="problem files"
    )
    parser.add_argument(
        "--exact",
        nargs="+",
        action="append",
        default=[],
        metavar="LINK",
        help="links taken at their real geometry in the gain table (repeat for more groups)",
    )
    args = parser.parse_args(argv)
    planner = mb.make_planner(fine=not args.default)
    mbm_mesh.POINTS = mbm_mesh.load_geometry(spacing=args.spacing)
    print(f"{utc_now()} {machine_line()}")
    print(
        f"spheres: {'default' if args.default else 'fine'}; mesh samples every "
        f"{args.spacing * 1e3:g} mm"
    )
    if args.exact:
        problems = [p for path in args.problems for p in mp.load_problems(path)]
        print(
            f"problems with an own goal configuration clear ({', '.join(map(str, args.problems))}):"
        )
        print("\n".join(exact_gain(planner, problems, [tuple(g) for g in args.exact])))
        return 0
    for path in args.problems:
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
