#!/usr/bin/env python3
"""How often the planner's self-collision model and MotionBenchMaker's judge disagree.

Plans are judged (``test/mbm_check.py``) by robometrics' self-collision rule: its Franka
spheres, its ignore list and a clearance buffer per link (5 cm on ``panda_link0`` to
``panda_link2``, 2 cm on the fingers). The planner uses its own spheres (the bundled fine
set's self-collision spheres, its ignore list, its ``self_buffer`` per link and its
``self_pair_buffer`` per link pair). On random
configurations within the joint limits this counts *misses* (the planner's model says clear,
the judge's rule says collision: a path through them is a false success) and *over*
(the planner's model refuses what the rule accepts: lost room), for the bundled buffers and
for the alternatives given with ``--buffers``, and names the judge's link pairs behind the
misses.

Usage (repository root)::

    .venv/bin/python bench/self_collision_agreement.py
    .venv/bin/python bench/self_collision_agreement.py --buffers none 'panda_link0=0.05'
    .venv/bin/python bench/self_collision_agreement.py --buffers \
        'panda_link0=0.05,panda_link2:panda_hand=0.05'
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from common import commit_of, machine_line, utc_now

import jax
import jax.numpy as jnp
import mbm_check as mc
import numpy as np

from pyroki_ros.collision import RobotSpheres
from pyroki_ros.collision import distance as col
from pyroki_ros.model.robot import Robot
from pyroki_ros.robots import urdf_path


def parse_buffers(text: str) -> tuple[dict[str, float], list[tuple[str, str, float]]] | None:
    """'bundled' -> None (the file's), 'none' -> no buffer, 'link=m,link_a:link_b=m' -> link
    buffers and pair buffers (``self_buffer``, ``self_pair_buffer``)."""
    if text == "bundled":
        return None
    links: dict[str, float] = {}
    pairs: list[tuple[str, str, float]] = []
    for item in [] if text == "none" else text.split(","):
        key, value = item.split("=")
        if ":" in key:
            a, b = key.split(":")
            pairs.append((a, b, float(value)))
        else:
            links[key] = float(value)
    return links, pairs


def label(spheres: RobotSpheres) -> str:
    """The buffers of ``spheres`` as 'link m, link_a:link_b m' ('-' for none)."""
    items = [f"{link} {m:g}" for link, m in spheres.self_buffer]
    items += [f"{a}:{b} {m:g}" for a, b, m in spheres.self_pair_buffer]
    return ", ".join(items) or "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--buffers",
        nargs="+",
        default=["none", "bundled"],
        help="'bundled', 'none' or 'link=m,link_a:link_b=m' (default: none and bundled)",
    )
    args = parser.parse_args(argv)

    robot = Robot.from_urdf(urdf_path("panda"))
    bundled = RobotSpheres.embedded("panda", robot, fine=True)
    bounds = np.asarray(robot.limits.bounds)
    q = np.random.default_rng(args.seed).uniform(
        bounds[:, 0], bounds[:, 1], (args.samples, robot.n_joints)
    )
    judge = mc.clearances(q[:, :7], mc.Scene())  # self margins by the judge's rule
    judged_bad = judge.self_margin < 0
    print("# Self-collision: the planner's fine spheres against the judge's rule\n")
    print(f"{utc_now()}; {machine_line()}; commit {commit_of()}")
    print(f"Command: `{' '.join(['bench/self_collision_agreement.py', *sys.argv[1:]])}`\n")
    print(
        f"{args.samples:,} configurations uniform within the Panda's joint limits (seed "
        f"{args.seed}); the judge's rule calls {judged_bad.mean():.1%} of them a collision.\n"
    )
    print(
        "| planner's buffers (link, link:link) | planner: collision | misses (planner clear, judge not) "
        "| over (planner collision, judge clear) | judge's pairs behind the misses |"
    )
    print("|---|---|---|---|---|")
    for text in args.buffers:
        buffers = parse_buffers(text)
        spheres = bundled
        if buffers is not None:  # the same spheres and ignore list with these buffers
            spheres = RobotSpheres.from_config(
                robot, bundled.to_config("world"), bundled.ignore, bundled.to_config("self"),
                *buffers,
            )  # fmt: skip
        smallest = jax.jit(
            lambda q, s=spheres: jnp.min(col.self_distances(col.sphere_centers(robot, s, q), s), -1)
        )
        mine = np.concatenate(
            [
                np.asarray(smallest(jnp.asarray(q[k : k + 10_000], robot.dtype)))
                for k in range(0, len(q), 10_000)
            ]
        )
        mine_bad = mine < 0
        miss = ~mine_bad & judged_bad
        over = mine_bad & ~judged_bad
        at = Counter(np.asarray(judge.self_at)[miss].tolist()).most_common(3)
        print(
            f"| {'bundled: ' if buffers is None else ''}{label(spheres)} | {mine_bad.mean():.1%} | {miss.mean():.2%} "
            f"| {over.mean():.2%} | {', '.join(f'{p} {n}' for p, n in at)} |"
        )


if __name__ == "__main__":
    main()
