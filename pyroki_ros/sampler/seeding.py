"""The sampler's samples as IK start points.

Two ways, both without touching the solver's compiled loop:

* ``"best"``: draw K samples per target, rank them by their FK error (one cheap batched FK),
  and start the solver from the best one; the solver's own restarts remain the fallback.
* ``"all"``: solve every target from each of its K samples (one batched (N, K) solve with a
  budget of one attempt per sample) and keep the best answer per target.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Literal

import numpy as np

from .. import objectives as obj
from ..ik import IKResult, IKSolver
from .core import IKSampler

Strategy = Literal["best", "all"]
ORIENTATION_WEIGHT = 0.1  # m per rad when ranking pose samples, as objectives.pose weighs them


def objective_for(sampler: IKSampler, targets) -> obj.Objective:
    """The IK objective matching the sampler's targets: tip position or tip pose."""
    spec = sampler.spec
    reference = None if spec.base == sampler.robot.root_link else spec.base
    targets = np.asarray(targets, np.float64)
    if spec.mode == "position":
        return obj.position(spec.tip, targets, reference=reference)
    return obj.pose(spec.tip, targets, reference=reference)


def best_samples(
    sampler: IKSampler, targets, k: int = 8, *, seed: int = 0, temperature: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """The lowest-error of ``k`` samples per target: (q (*batch, n_all), error (*batch,)),
    error = position error + 0.1 m/rad x orientation error."""
    targets = np.asarray(targets, np.float32)
    q = sampler.sample(targets, k, seed=seed, temperature=temperature)  # (*batch, k, n_all)
    position, orientation = sampler.errors(targets[..., None, :], q)
    score = position + ORIENTATION_WEIGHT * orientation
    best = np.argmin(score, axis=-1)
    pick = lambda x: np.take_along_axis(x, best[..., None, None], axis=-2)[..., 0, :]
    return pick(q), np.take_along_axis(score, best[..., None], axis=-1)[..., 0]


def seeded_solve(
    solver: IKSolver,
    sampler: IKSampler,
    targets,
    *,
    k: int = 8,
    strategy: Strategy = "best",
    seed: int = 0,
    temperature: float = 1.0,
    **options,
) -> IKResult:
    """Solves IK for ``targets`` (*batch, 3 or 7) from sampler seeds; ``options`` as for
    :meth:`IKSolver.solve`. ``solve_seconds`` includes the sampling.

    With ``strategy="all"``, ``max_iterations`` defaults to ``iterations_per_restart`` (one
    attempt per sample) and ``iterations`` counts the iterations of all K attempts.
    """
    if solver.robot.joint_names != sampler.robot.joint_names:
        raise ValueError("the solver and the sampler are for different robots")
    targets = np.asarray(targets, np.float64)
    start = time.perf_counter()
    if strategy == "best":
        seeds, _ = best_samples(sampler, targets, k, seed=seed, temperature=temperature)
        result = solver.solve(objective_for(sampler, targets), seed=seeds, **options)
        return dataclasses.replace(result, solve_seconds=time.perf_counter() - start)
    if strategy != "all":
        raise ValueError(f"strategy must be 'best' or 'all', got '{strategy}'")
    seeds = sampler.sample(targets, k, seed=seed, temperature=temperature)  # (*batch, k, n)
    options.setdefault("max_iterations", options.get("iterations_per_restart", 15))
    every = solver.solve(objective_for(sampler, targets[..., None, :]), seed=seeds, **options)
    # Per target: a successful attempt if any, the lowest cost among those (or among all).
    rank = np.where(every.success, 0.0, 1.0) * 1e30 + np.nan_to_num(every.cost, nan=1e30)
    best = np.argmin(rank, axis=-1)
    scalar = lambda x: np.take_along_axis(x, best[..., None], axis=-1)[..., 0]
    row = lambda x: np.take_along_axis(x, best[..., None, None], axis=-2)[..., 0, :]
    return IKResult(
        q=row(every.q),
        success=scalar(every.success),
        position_error=row(every.position_error),
        orientation_error=row(every.orientation_error),
        iterations=every.iterations.sum(-1),
        solve_seconds=time.perf_counter() - start,
        cost=scalar(every.cost),
    )
