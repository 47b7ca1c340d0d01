"""Planning scenes: random obstacle sets and feasible start/goal pairs among them.

Used by the benchmarks (trajopt_benchmark.py, gpu_report.py) and the tests (test_trajopt.py,
test_node_planning.py; pytest.ini puts bench/ on sys.path); not part of the package. A pair is
feasible when both configurations keep at least ``clearance`` from every obstacle and between
the robot's own non-ignored sphere pairs (per the robot's sphere model). Whether a path between
them exists is not known in advance; with obstacles placed away from the start and goal it
almost always does.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.model.robot import Robot


@dataclasses.dataclass(frozen=True)
class PlanningCase:
    """One start/goal pair (numpy, robot.joint_names order)."""

    start: np.ndarray  # (n,)
    goal: np.ndarray  # (n,) a goal configuration
    goal_pose: np.ndarray  # (7,) wxyz_xyz of the tip link at ``goal``


def random_obstacles(
    rng: np.random.Generator,
    count: int,
    *,
    center=(0.45, 0.0, 0.45),
    spread=(0.35, 0.55, 0.35),
    size=(0.03, 0.07),
) -> col.World:
    """``count`` obstacles, alternately spheres and axis-aligned-or-tilted boxes, with
    centres uniform in ``center +- spread`` (m) and radii / half-extents in ``size``."""
    center, spread = np.asarray(center), np.asarray(spread)
    n_spheres = (count + 1) // 2
    n_boxes = count // 2
    sphere_centers = center + rng.uniform(-1, 1, (n_spheres, 3)) * spread
    sphere_radii = rng.uniform(*size, n_spheres)
    box_quats = rng.normal(size=(n_boxes, 4))
    box_quats /= np.linalg.norm(box_quats, axis=1, keepdims=True)
    box_poses = np.concatenate(
        [box_quats, center + rng.uniform(-1, 1, (n_boxes, 3)) * spread], axis=1
    )
    return col.World.create(
        sphere_centers=sphere_centers,
        sphere_radii=sphere_radii,
        box_poses=box_poses,
        box_half_extents=rng.uniform(*size, (n_boxes, 3)),
    )


def clearances(
    robot: Robot, spheres: col.RobotSpheres, world: col.World, q: np.ndarray
) -> np.ndarray:
    """Smallest clearance to the world and between self pairs, (N,) for q (N, n)."""
    centers = col.sphere_centers(robot, spheres, jnp.asarray(q, robot.dtype))
    d = col.world_distances(centers, spheres.radii, world)
    world_min = jnp.min(d.reshape(d.shape[0], -1), axis=1) if d.shape[-1] else jnp.inf
    if spheres.self_pairs.shape[0]:
        self_min = jnp.min(col.self_distances(centers, spheres), axis=1)
    else:
        self_min = jnp.inf
    return np.asarray(jnp.minimum(world_min, self_min))


def feasible_cases(
    robot: Robot,
    spheres: col.RobotSpheres,
    world: col.World,
    tip: str,
    count: int,
    rng: np.random.Generator,
    *,
    clearance: float = 0.03,
    min_travel: float = 0.3,
) -> list[PlanningCase]:
    """``count`` random start/goal pairs inside the limits, each configuration at least
    ``clearance`` from obstacles and itself, the tip moving at least ``min_travel`` (m)."""
    lower, upper = (np.asarray(x, np.float64) for x in (robot.lower, robot.upper))
    tip_index = robot.link_index(tip)
    fk = jax.jit(lambda q: forward_kinematics(robot, q).wxyz_xyz[..., tip_index, :])
    cases: list[PlanningCase] = []
    for _ in range(200):
        q = rng.uniform(lower, upper, (512, len(lower)))
        ok = q[clearances(robot, spheres, world, q) >= clearance]
        poses = np.asarray(fk(jnp.asarray(ok, robot.dtype)), np.float64)
        for i in range(0, len(ok) - 1, 2):
            if np.linalg.norm(poses[i, 4:] - poses[i + 1, 4:]) < min_travel:
                continue
            cases.append(PlanningCase(ok[i], ok[i + 1], poses[i + 1]))
            if len(cases) == count:
                return cases
    raise RuntimeError(f"found only {len(cases)} feasible pairs among these obstacles")


# The warm-up pair's own generator: warming up on a timed pair would time it warm.
WARM_SEED = 99


def benchmark_scene(
    robot: Robot, spheres: col.RobotSpheres, seed: int, obstacles: int, pairs: int, tip: str
) -> tuple[col.World, list[PlanningCase], PlanningCase]:
    """The random-scene benchmark's problem (``bench/trajopt_benchmark.py``): ``obstacles``
    random boxes and ``pairs`` feasible start/goal pairs from one generator seeded
    ``seed``, and a warm-up pair in the same scene from :data:`WARM_SEED`."""
    rng = np.random.default_rng(seed)
    world = random_obstacles(rng, obstacles)
    cases = feasible_cases(robot, spheres, world, tip, pairs, rng)
    warm = feasible_cases(robot, spheres, world, tip, 1, np.random.default_rng(WARM_SEED))[0]
    return world, cases, warm
