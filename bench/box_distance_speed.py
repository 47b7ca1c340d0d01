#!/usr/bin/env python3
"""What the robot's boxes and hulls cost the planner: the bundled fine Panda set (fingers as
boxes, the hand as its hull, ``collision.boxes``) against the set of an earlier commit
(``--before``, default 2d118f0: fingers and hand as spheres; 7733759: the hand as 4 boxes)
or a sphere file (``--spheres``).

On one MotionBenchMaker scene (``--problem``, obstacles padded as the benchmark pads them):

* ``clearance``: one call of the compiled clearance program for 512 random configurations
  (the global step's batched edge checks and the goal search use it);
* ``optimize``: 20 LM iterations of a 64-knot straight-line path (every iteration evaluates
  the collision rows and their Jacobians at the knots and midpoints);
* ``box_distances``: the boxes' distances alone for the 512 configurations;
* ``support point``: the last hull's vertex furthest along 4,096 directions, as
  ``collision.boxes`` finds it (the index packed into the value, one integer max) and with
  ``jnp.argmax`` (the justification of the packing; GJK takes nine per pair and round).

Median of repeated calls after a compiling one. Usage (repository root)::

    .venv/bin/python bench/box_distance_speed.py
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from pathlib import Path

from common import REPO, machine_line, time_calls, utc_now

import numpy as np


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problem", default="bookshelf_thin/1")
    parser.add_argument("--spheres", type=Path, help="a fine sphere file to compare with")
    parser.add_argument("--before", default="2d118f0", help="or the fine set at this commit")
    parser.add_argument(
        "--hull-columns", type=int, help="collision.jacobians.HULL_COLUMNS for the optimiser"
    )
    args = parser.parse_args()
    if args.hull_columns is not None:  # read when the planners' programs are traced
        from pyroki_ros.collision import jacobians

        jacobians.HULL_COLUMNS = args.hull_columns

    import jax
    import jax.numpy as jnp
    import mbm_benchmark as mb
    import mbm_check as mc
    import mbm_problems as mp

    from pyroki_ros import Robot
    from pyroki_ros import collision as col
    from pyroki_ros.collision import RobotSpheres
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer
    from pyroki_ros.robots import urdf_path

    robot = Robot.from_urdf(urdf_path("panda"))
    boxes = RobotSpheres.embedded("panda", robot, fine=True)
    label = str(args.spheres or args.before)
    if args.spheres is None:
        old = subprocess.run(
            ["git", "show", f"{args.before}:pyroki_ros/robots/panda_spheres_fine.yaml"],
            cwd=REPO, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        args.spheres = Path(tempfile.mkdtemp()) / f"panda_spheres_fine_{args.before}.yaml"
        args.spheres.write_text(old)
    spheres = RobotSpheres.from_yaml(robot, args.spheres)
    problem = next(p for p in mp.load_problems(mp.GENERATED_SET) if p.name == args.problem)
    world = mb.to_world(problem).padded(col.COARSE_WORLD_BUCKETS)  # the benchmark's (0, 16, 64)
    names = list(robot.joint_names)
    arm = lambda q: np.array([dict(zip(mc.ARM_JOINTS, q)).get(j, mc.FINGER_OPEN) for j in names])
    path = np.linspace(arm(problem.start), arm(problem.goal_ik[0]), 64)[None]
    q = np.asarray(robot.random_configurations(jax.random.PRNGKey(0), (512,)))
    moving = np.ones(robot.n_joints, bool)

    def costs(model) -> tuple:
        """Times of the 512-row clearance call and of 20 LM iterations with ``model``."""
        planner = TrajectoryOptimizer(robot, model)
        clearance = planner.clearance_function(world, col.DEFAULT_CONTACTS, moving)
        clearance(q, 512)
        c = time_calls(lambda: clearance(q, 512), min_repeats=10, min_seconds=1.0)
        settings = {"world": world, "max_iterations": 20, "early_stop": 0.0}
        planner.optimize(path, (), **settings)
        o = time_calls(lambda: planner.optimize(path, (), **settings), min_repeats=3, min_seconds=1)
        return c, o

    print(f"{utc_now()}  {machine_line()}")
    print(f"scene {args.problem}: obstacles per kind (padded) {world.counts}")
    rows = []
    for name, model in ((label, spheres), ("bundled", boxes)):
        rows.append((name, int(model.world_mask.sum()), model.n_boxes, *costs(model)))
    frames = col.box_frames_at(robot, boxes, jnp.asarray(q, jnp.float32))
    distances = jax.jit(
        lambda c, a: col.box_distances(
            c, a, boxes.box_half_extents, world, hull_vertices=boxes.hull_vertices
        )
    )
    distances(*frames).block_until_ready()
    b = time_calls(lambda: distances(*frames).block_until_ready(), min_repeats=10, min_seconds=1)

    print(
        "| fine set | obstacle spheres | boxes (hulls' included) | clearance, 512 configurations "
        "| optimize, 20 LM iterations |"
    )
    print("|---|---|---|---|---|")
    for label, n_spheres, n_boxes, c, o in rows:
        print(
            f"| {label} | {n_spheres} | {n_boxes} | {np.median(c.wall) * 1e3:.1f} ms "
            f"| {np.median(o.wall) * 1e3:.0f} ms |"
        )
    print(f"box_distances alone (bundled), 512 configurations x {boxes.n_boxes} boxes x "
          f"{world.n_obstacles} obstacle slots: {np.median(b.wall) * 1e3:.1f} ms")  # fmt: skip
    name = boxes.box_link_names[-1]
    print(f"support point, 4096 directions x {name}'s hull vertices: " + support_times(boxes))
    return 0


def support_times(model) -> str:
    import jax
    import jax.numpy as jnp

    from pyroki_ros.collision import boxes as b

    hull = tuple(model.hull_vertices[-1:, None, None, :, k] for k in range(3))
    a = tuple(jax.random.normal(jax.random.PRNGKey(k), (1, 1, 4096)) for k in range(3))

    def argmax(hull, a):
        dots = b._vertex_dots(hull, a)
        i = jnp.argmax(dots, -1)[..., None]
        return tuple(
            jnp.take_along_axis(jnp.broadcast_to(v, dots.shape), i, -1)[..., 0] for v in hull
        )

    out = []
    for name, f in (("packed", b._support_point), ("argmax", argmax)):
        g = jax.jit(lambda a, f=f: f(hull, a))
        jax.block_until_ready(g(a))
        t = time_calls(lambda g=g: jax.block_until_ready(g(a)), min_repeats=10, min_seconds=1)
        out.append(f"{name} {np.median(t.wall) * 1e3:.2f} ms")
    found = zip(b._support_point(hull, a), argmax(hull, a))
    same = int(np.all([np.asarray(x) == np.asarray(y) for x, y in found], 0).sum())
    return ", ".join(out) + f" (the same vertex for {same} of 4096)"


if __name__ == "__main__":
    raise SystemExit(main())
