#!/usr/bin/env python3
"""How many GJK rounds a robot hull needs per obstacle kind: the justification of
``pyroki_ros.collision.boxes.HULL_ROUNDS``.

The Panda hand's collision hull (its mesh's 102 vertices) against one obstacle of each
kind in random poses from touching to 3 cm apart, as test_robot_hulls.py's convex-distance
test draws them (other seeds, more cases). For each round count, the largest shortfall of
the hull's distance below the true convex distance (an independent reference: non-negative
least squares over the two shapes' vertices; a cylinder between prisms of 64 sides inside
and around it, so its shortfall carries up to the prisms' 0.1 % of the radius).

Usage (repository root)::

    .venv/bin/python bench/gjk_rounds.py [--cases 300]
"""

from __future__ import annotations

import argparse

from common import machine_line, utc_now

import jax
import numpy as np

ROUNDS = (2, 3, 4, 5, 6, 8, 10, 12)
KINDS = ("sphere", "capsule", "box", "cylinder")


def main() -> int:
    import test_robot_hulls as th

    from pyroki_ros.collision import boxes

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=300, help="random poses per kind")
    args = parser.parse_args()

    print(f"{utc_now()}  {machine_line()}")
    print(f"largest shortfall (mm) below the convex distance, {args.cases} poses per kind")
    print("| kind | apart | " + " | ".join(f"{r} rounds" for r in ROUNDS) + " |")
    print("|---|---|" + "---|" * len(ROUNDS))
    keep = dict(boxes.HULL_ROUNDS)
    for kind in KINDS:
        rng = np.random.default_rng(100 + KINDS.index(kind))
        cases = []
        for _ in range(args.cases):
            rotation, at = th._rotation(rng), rng.uniform(-0.2, 0.2, 3)
            corners = th.VERTICES @ rotation.T + at
            direction = rng.normal(size=3)
            direction /= np.linalg.norm(direction)
            near = corners[np.argmax(corners @ direction)] + direction * rng.uniform(0.0, 0.03)
            world, _ = th._random_obstacle(rng, kind, near)
            _, outer, radius = th._obstacle_polytopes(world)
            low = th._polytope_distance(corners, outer) - radius
            if low >= 1e-3:  # apart (touching: the separating axes answer)
                cases.append((rotation, at, world, low))
        worst = []
        for rounds in ROUNDS:
            boxes.HULL_ROUNDS[kind] = rounds
            jax.clear_caches()  # the jitted distance traces the constant again
            short = [low - th._hull_terms(rot, at, world)[0] for rot, at, world, low in cases]
            worst.append(max(short))
        boxes.HULL_ROUNDS[kind] = keep[kind]
        cells = " | ".join(f"{w * 1e3:.3f}" for w in worst)
        print(f"| {kind} | {len(cases)} | {cells} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
