"""Motion retargeting: a smooth joint path whose links follow keypoint sequences
(:func:`retarget`), optimised as one long trajectory by the planner's programs."""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING

import jax
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import objectives as obj
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot
from pyroki_ros.planning.budget import CompileFreeClock
from pyroki_ros.planning.memory import trajectory_memory_bytes
from pyroki_ros.planning.problem import TIMED_OUT, PlanResult, Weights

if TYPE_CHECKING:
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer


@jax.jit
def _link_poses(robot: Robot, q: jax.Array) -> jax.Array:
    return k.forward_kinematics(robot, q).wxyz_xyz


def knot_bucket(t_count: int) -> int:
    """Keypoint sequences are padded to these lengths so a new length rarely recompiles."""
    size = 16
    while size < t_count:
        size *= 2 if size < 256 else 1.5
        size = int(size)
    return size


def retarget_memory_bytes(steps: int, n_joints: int, n_links: int) -> int:
    """Estimated peak memory (bytes) of :func:`retarget` of ``steps`` keypoint steps of
    ``n_links`` links for a robot of ``n_joints`` joints: :func:`trajectory_memory_bytes` of
    the knots it optimises (``steps`` padded up to a bucket, at most 1.5x)."""
    return trajectory_memory_bytes(knot_bucket(max(int(steps), 1)), n_joints, n_links)


# Retargeting paths start held still at one configuration, far from the keypoints of later
# steps: an undamped (Gauss-Newton) first step leapt across to another IK branch (a Panda
# following link-to-link vectors flipped its wrist, joint 5 onto its limit, and the limit then
# blocked the motion 10-27 mm off); damped steps bend the path from its start towards the
# motion. Any value from 0.1 to 10 gave the same paths in 10-57 iterations (10 cases).
RETARGET_DAMPING = 1.0
# IK iterations (restarts included) for the start configuration: reachable keypoints are
# reached within the first restarts; towards unreachable ones the IK would spend its whole
# default budget (1000) on an answer that is not used (see retarget_start).
RETARGET_START_ITERATIONS = 150
# Iterations between two checks of a retargeting budget: each check restarts the LM from the
# path so far (after the first chunk with optimize's default damping: the path follows the
# motion by then).
RETARGET_CHUNK = 5


def retarget_start(
    planner: TrajectoryOptimizer,
    links: tuple[str, ...],
    targets: np.ndarray,
    link_weights: np.ndarray,
    seed: np.ndarray,
    active_joints: tuple[str, ...] | None,
) -> np.ndarray:
    """(n,) the configuration a retargeting path starts from (held still; every knot, the
    first one included, is then optimised): IK from the seed towards the keypoints
    ``targets`` (K, 3) of the first step, each link weighted as in the path's cost and only
    the active joints moving, if that reaches them; else the seed.

    Only a reaching answer: towards keypoints out of reach the IK returns whichever of its
    random restarts came closest, among configurations about equally close, and the path
    optimised from there depended on that draw. Without weighted links (only link-to-link
    vectors, which are relative) there is nothing absolute to reach: the seed, the
    configuration the robot is in."""
    pulling = tuple(
        obj.position(link, targets[i], weight=float(link_weights[i]))
        for i, link in enumerate(links)
        if link_weights[i] > 0
    )
    if not pulling:
        return seed
    ik = planner.ik.solve(
        pulling,
        seed=seed,
        active_joints=active_joints,
        max_iterations=RETARGET_START_ITERATIONS,
    )
    return np.asarray(ik.q, np.float64) if ik.success else seed


def retarget(
    planner: TrajectoryOptimizer,
    links: tuple[str, ...],
    keypoints: np.ndarray,
    *,
    seed: np.ndarray | None = None,
    link_weights: np.ndarray | None = None,
    scale: float = 1.0,
    smoothness: float = 1.0,
    world: col.World | None = None,
    active_joints: tuple[str, ...] | None = None,
    max_iterations: int = 100,
    vector_pairs: tuple[tuple[int, int], ...] = (),
    vector_weight: float = 1.0,
    timeout: float = 0.0,
) -> tuple[PlanResult, np.ndarray]:
    """Follows keypoints with links: link ``links[k]`` towards ``scale * keypoints[t, k]``
    at step t, with smooth joint motion, limits that hold and (with ``world`` and the
    planner's spheres) collision avoidance. With ``vector_pairs`` the links also match the
    scaled keypoint-to-keypoint vectors (how a demonstrator's hand sits relative to its
    elbow, say), which transfers the motion's shape when absolute positions cannot match;
    ``link_weights`` of 0 then leave only the vectors.

    Args:
        links: K link names.
        keypoints: (T, K, 3) positions in the robot's root frame (m), T >= 2.
        seed: (n,) configuration the motion starts from (default the middle of the limits);
            the first knot is free, the seed only initialises the path: every knot starts at
            the IK solution from the seed for the first step's weighted keypoints (only the
            active joints moving), or at the seed where none are weighted or IK cannot reach
            them.
        link_weights: (K,) >= 0 relative weights (default 1).
        scale: keypoints are multiplied by this (e.g. human to robot size).
        smoothness: multiplies the velocity and acceleration weights.
        vector_pairs: (i, j) index pairs into ``links``: p(links[j]) - p(links[i]) follows
            scale * (keypoints[t, j] - keypoints[t, i]).
        vector_weight: weight of each vector term.
        timeout: wall-clock budget (s, 0 = none), checked before every chunk of at most
            RETARGET_CHUNK iterations, each chunk cut to what fits in the time left at the
            measured pace (the first one too, where a pace for this length is known, to one
            iteration at least); when no iteration fits, the path so far comes back with ``reason``
            TIMED_OUT. Compiles (a new motion length's programs, on their first use) are not
            counted.

    Returns:
        (the PlanResult over the T steps, per-step RMS keypoint error (T,) m).
    """
    clock = CompileFreeClock()  # the budget's: compiles not counted
    robot = planner.robot
    n = robot.n_joints
    keypoints = np.asarray(keypoints, np.float64)
    links = tuple(links)
    if keypoints.ndim != 3 or keypoints.shape[1:] != (len(links), 3):
        raise ValueError(
            f"keypoints must have shape (T, {len(links)}, 3) for {len(links)} links, "
            f"got {keypoints.shape}"
        )
    t_real = keypoints.shape[0]
    if t_real < 2:
        raise ValueError("need at least 2 keypoint steps")
    if not links:
        raise ValueError("no links given")
    if not np.isfinite(keypoints).all():
        raise ValueError("keypoints contain NaN or infinite values")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and > 0, got {scale}")
    if not (np.isfinite(smoothness) and smoothness >= 0):
        raise ValueError(f"smoothness must be finite and >= 0, got {smoothness}")
    for link in links:
        robot.link_index(link)
    weights_k = np.ones(len(links)) if link_weights is None else np.asarray(link_weights, float)
    if (
        weights_k.shape != (len(links),)
        or not np.isfinite(weights_k).all()
        or (weights_k < 0).any()
    ):
        raise ValueError(f"link_weights must be {len(links)} finite values >= 0")
    seed = planner.robot.limits.center() if seed is None else np.asarray(seed, float)
    if seed.shape != (n,) or not np.isfinite(seed).all():
        raise ValueError(f"seed must be {n} finite joint values")
    seed = planner.robot.limits.clip(seed)

    t_count = knot_bucket(t_real)
    targets = np.concatenate(
        [keypoints * scale, np.repeat(keypoints[-1:] * scale, t_count - t_real, 0)]
    )
    on = np.zeros((t_count, 1))
    on[:t_real] = 1.0  # padded steps carry no target: they just rest after the motion
    per_link = tuple(
        dataclasses.replace(
            obj.position(link, targets[:, i]),
            weights=on * np.array([weights_k[i], 0.0]),
        )
        for i, link in enumerate(links)
    )
    active_joints = None if active_joints is None else tuple(active_joints)
    active = robot.active_mask(active_joints).astype(np.float64)
    free = np.ones((t_count, n)) * active
    base = Weights()
    weights = dataclasses.replace(
        base,
        goal=100.0,  # tracking: keypoints are noisy, smoothness should still count
        velocity=base.velocity * smoothness,
        acceleration=base.acceleration * smoothness,
    )
    pairs = tuple((int(i), int(j)) for i, j in vector_pairs)
    for i, j in pairs:
        if not (0 <= i < len(links) and 0 <= j < len(links)) or i == j:
            raise ValueError(f"vector pair ({i}, {j}) must name two different links by index")
    if not (np.isfinite(vector_weight) and vector_weight >= 0):
        raise ValueError(f"vector_weight must be finite and >= 0, got {vector_weight}")
    start = retarget_start(planner, links, targets[0], weights_k, seed, active_joints)
    starts = np.repeat(start[None, None], t_count, 1)
    tails, heads = [i for i, _ in pairs], [j for _, j in pairs]
    solve = functools.partial(
        planner.optimize,
        objectives=per_link,
        vectors=tuple((links[i], links[j]) for i, j in pairs),
        vector_targets=targets[:, heads] - targets[:, tails],
        vector_weights=np.broadcast_to(on * weights.goal * vector_weight, (t_count, len(pairs))),
        world=world,
        free=free,
        weights=weights,
        position_tolerance=np.inf,
        orientation_tolerance=np.inf,
    )
    if timeout <= 0:
        result = solve(starts, max_iterations=max_iterations, initial_damping=RETARGET_DAMPING)
    else:  # the same solve in chunks of iterations, the budget checked between them
        iterations, result = 0, None
        while iterations < max_iterations:
            chunk = min(RETARGET_CHUNK, max_iterations - iterations)
            # A chunk gets the iterations that fit in the time left at the measured pace (a
            # long motion's iterations are slow: a fixed 5 overran 2 s budgets), the first
            # one too where the pace is known (at least one iteration: a path). One
            # iteration's time is kept for the path's FK and errors after the loop.
            pace = planner.pace(t_count, world)
            left = timeout - clock.elapsed() - (pace.per_iteration if pace else 0.0)
            if pace:
                chunk = min(chunk, pace.iterations_within(left))
            if result is None:
                chunk = max(chunk, 1)
            elif left <= 0 or chunk < 1:
                result = dataclasses.replace(
                    result,
                    success=False,
                    message=f"the {timeout:.3g} s budget ran out after {iterations} "
                    "iterations (the path so far is returned)",
                    reason=TIMED_OUT,
                )
                break
            if result is None:
                result = solve(starts, max_iterations=chunk, initial_damping=RETARGET_DAMPING)
            else:  # near the motion now: nearly Gauss-Newton steps, as for plans
                result = solve(result.path[None], max_iterations=chunk)
            iterations += result.iterations
            if result.iterations < chunk:  # converged
                break
        result = dataclasses.replace(
            result, iterations=iterations, solve_seconds=time.perf_counter() - clock.start
        )
    frames = np.asarray(_link_poses(robot, result.path[:t_real].astype(np.dtype(robot.dtype))))
    idx = [robot.link_index(link) for link in links]
    errors = np.linalg.norm(frames[:, idx, 4:] - targets[:t_real], axis=-1)
    step_errors = np.sqrt(np.mean(errors**2, axis=1))
    return dataclasses.replace(result, path=result.path[:t_real]), step_errors
