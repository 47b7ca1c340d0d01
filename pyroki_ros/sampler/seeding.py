"""The sampler's samples as IK start points.

Two ways, both without touching the solver's compiled loop:

* ``"best"``: draw K samples per target, rank them by their FK error (one cheap batched FK),
  and start the solver from the best one; the solver's own restarts remain the fallback.
  Drawing, ranking and picking are one compiled program per (sampler, K), with the batch
  padded to the solver's bucket sizes, so a call is one dispatch and one copy back.
* ``"all"``: solve every target from each of its K samples (one batched (N, K) solve with a
  budget of one attempt per sample) and keep the best answer per target.
* ``"fallback"`` (the rule for when the sampler's seeds go first): the solver's first attempt
  from the given start (or its default seed) runs alone; only the targets it leaves unsolved
  (the hard ones, which would need the solver's quasi-random restarts) get the best of K
  samples as the start of the rest of their iteration budget, the solver's own restarts
  after that. Targets solved by the first attempt never pay for the sampler, so on them the
  rule costs what the plain solver costs; on hard targets it replaces the first restarts
  with a better-informed start. Measured by ``bench/sampler_benchmark.py --hard``
  (docs/benchmarks/sampler.md).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.ik import DEFAULT_ITERATIONS_PER_RESTART, IKResult, IKSolver, bucket
from pyroki_ros.sampler.core import IKSampler, _errors, _sample

Strategy = Literal["best", "all", "fallback"]
ORIENTATION_WEIGHT = 0.1  # m per rad when ranking pose samples, as objectives.pose weighs them


def objective_for(sampler: IKSampler, targets) -> obj.Objective:
    """The IK objective matching the sampler's targets: tip position or tip pose."""
    spec = sampler.spec
    reference = None if spec.base == sampler.robot.root_link else spec.base
    objective = obj.position if spec.mode == "position" else obj.pose
    return objective(spec.tip, np.asarray(targets, np.float64), reference=reference)


def best_samples(
    sampler: IKSampler,
    targets,
    k: int = 8,
    *,
    seed: int = 0,
    temperature: float | None = None,
    incumbent=None,
) -> tuple[np.ndarray, np.ndarray]:
    """The lowest-error of ``k`` samples per target: (q (*batch, n_all), error (*batch,)),
    error = position error + 0.1 m/rad x orientation error (float32 FK).

    The samples are those of ``sampler.sample(targets, k, seed=seed, temperature=...)``;
    drawing, ranking and picking run as one compiled program (per sampler and ``k``; batch
    sizes padded to the solver's buckets).

    ``incumbent`` (*batch, n_all), optional: a configuration per target that competes with
    the samples (ranked the same way) and is returned, exactly as given, where no sample has
    a lower error (the node's current seed).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    targets = sampler._targets(targets)
    batch = targets.shape[:-1]
    n = sampler.robot.n_joints
    flat = targets.reshape(-1, targets.shape[-1])
    count = flat.shape[0]
    current = None
    if incumbent is not None:
        current = np.broadcast_to(np.asarray(incumbent), (*batch, n)).reshape(-1, n)
        if not np.isfinite(current).all():
            raise ValueError("incumbent contains NaN or infinite values")
    if count == 0:
        return np.zeros((*batch, n), np.float32), np.zeros(batch, np.float32)
    inputs = [flat] if current is None else [flat, current.astype(np.float32)]
    # padded to a bucket with copies of the last target: no compile per batch size
    args = devices.pad_rows(inputs, bucket(count))
    program = _best_program(sampler, k, current is not None)
    width = np.float32(sampler.temperature(temperature))  # None: the model's
    out = np.asarray(program(*args, _key(seed), width))[:count]
    q, score = out[:, :n], out[:, n]
    if current is not None:
        kept = out[:, n + 1] == 0  # column n + 1: index of the winner, 0 = the incumbent
        q = np.where(kept[:, None], current, q)
    return q.reshape(*batch, n), score.reshape(batch)


@functools.lru_cache(maxsize=256)
def _int_key(seed: int) -> np.ndarray:
    return np.asarray(jax.random.PRNGKey(seed))


def _key(seed) -> np.ndarray:
    """The PRNG key ``sampler.sample`` makes from ``seed``, as a host array (a key made on
    the device per call costs a dispatch)."""
    if isinstance(seed, int | np.integer):
        return _int_key(int(seed))
    return np.asarray(seed)


def _best_program(sampler: IKSampler, k: int, with_incumbent: bool):
    """One jitted program: draw ``k`` samples per target, FK-rank them (after the incumbent,
    when given), return the best configuration, its error and its index per target, packed
    as (N, n_all + 2)."""
    key = ("best", k, with_incumbent)
    if key in sampler.programs:
        return sampler.programs[key]
    spec, robot, params = sampler.spec, sampler.robot, sampler.params
    rest = jnp.asarray(sampler.rest, jnp.float32)

    def score_of(targets, q):
        position, orientation = _errors(spec, robot, targets, q)
        return position + ORIENTATION_WEIGHT * orientation

    def best(targets, *inputs):
        *current, prng_key, temperature = inputs
        q = robot.clip(_sample(spec, params, temperature, rest, targets, prng_key, k))
        score = score_of(targets[:, None], q)  # (N, k)
        if current:  # the incumbent first: it wins ties, as the node always did
            q = jnp.concatenate([current[0][:, None], q], axis=1)
            score = jnp.concatenate([score_of(targets, current[0])[:, None], score], 1)
        i = jnp.argmin(score, axis=-1)
        q_best = jnp.take_along_axis(q, i[:, None, None], axis=1)[:, 0]
        score_best = jnp.take_along_axis(score, i[:, None], axis=1)
        index = i[:, None].astype(score.dtype)
        return jnp.concatenate([q_best, score_best, index], axis=-1)  # one copy back

    return sampler.programs.setdefault(key, jax.jit(best))


def seeded_solve(
    solver: IKSolver,
    sampler: IKSampler,
    targets,
    *,
    k: int = 8,
    strategy: Strategy = "best",
    seed: int = 0,
    temperature: float | None = None,
    start=None,
    **options,
) -> IKResult:
    """Solves IK for ``targets`` (*batch, 3 or 7) from sampler seeds; ``options`` as for
    :meth:`IKSolver.solve`. ``solve_seconds`` includes the sampling.

    With ``strategy="all"``, ``max_iterations`` defaults to ``iterations_per_restart`` (one
    attempt per sample) and ``iterations`` counts the iterations of all K attempts.

    With ``strategy="fallback"``, ``start`` ((*batch, n_all) or (n_all,), default the
    solver's default seed) is the first attempt's start, and the value of the joints the
    samples do not set (outside the chain or inactive); ``max_iterations`` and ``timeout``
    cover both stages, ``iterations`` counts both; ``max_deviation`` is refused (its box is
    centred on the seed). ``start`` is refused by the other strategies.
    """
    if solver.robot.joint_names != sampler.robot.joint_names:
        raise ValueError("the solver and the sampler are for different robots")
    targets = np.asarray(targets, np.float64)
    begin = time.perf_counter()
    if strategy == "fallback":
        return _fallback_solve(
            solver, sampler, targets, k, seed, temperature, start, begin, options
        )
    if start is not None:
        raise ValueError("start is only used by strategy='fallback'")
    if strategy == "best":
        seeds, _ = best_samples(sampler, targets, k, seed=seed, temperature=temperature)
        result = solver.solve(objective_for(sampler, targets), seed=seeds, **options)
        return dataclasses.replace(result, solve_seconds=time.perf_counter() - begin)
    if strategy != "all":
        raise ValueError(f"strategy must be 'best', 'all' or 'fallback', got '{strategy}'")
    seeds = sampler.sample(targets, k, seed=seed, temperature=temperature)  # (*batch, k, n)
    options.setdefault(
        "max_iterations", options.get("iterations_per_restart", DEFAULT_ITERATIONS_PER_RESTART)
    )
    every = solver.solve(objective_for(sampler, targets[..., None, :]), seed=seeds, **options)
    # Per target: a successful attempt if any, the lowest cost among those (or among all).
    rank = np.where(every.success, 0.0, 1.0) * 1e30 + np.nan_to_num(every.cost, nan=1e30)
    best = np.argmin(rank, axis=-1)
    scalar = lambda x: np.take_along_axis(x, best[..., None], axis=-1)[..., 0]
    row = lambda x: np.take_along_axis(x, best[..., None, None], axis=-2)[..., 0, :]
    picked = {f: (row if f in _ROWS else scalar)(getattr(every, f)) for f in _MERGED}
    iterations = every.iterations.sum(-1)
    return IKResult(**picked, iterations=iterations, solve_seconds=time.perf_counter() - begin)


def _fallback_solve(solver, sampler, targets, k, seed, temperature, start, begin, options):
    """``strategy="fallback"`` of :func:`seeded_solve`: one attempt from ``start``; the best
    of ``k`` samples for the targets it leaves unsolved, with the rest of the budget."""
    options = dict(options)
    if options.get("max_deviation") is not None:
        # A box centred on the seed: the sampler's seed would move it.
        raise ValueError("strategy='fallback' does not take max_deviation (solve-nearby)")
    timeout = float(options.pop("timeout", 0.0))
    per_attempt = options.get("iterations_per_restart", DEFAULT_ITERATIONS_PER_RESTART)
    first_budget = min(per_attempt, options.get("max_iterations", per_attempt))
    first_options = dict(options, max_iterations=first_budget)
    first = solver.solve(objective_for(sampler, targets), seed=start, **first_options)
    # The plain solver's whole call when the first attempt solves everything (the common
    # case): no sampler call, no second dispatch.
    if np.all(first.success):
        return dataclasses.replace(first, solve_seconds=time.perf_counter() - begin)
    checked = {k_: v for k_, v in options.items() if k_ != "feasible"}
    budget = solver.settings(**checked).max_iterations - int(first_budget)
    left = timeout - (time.perf_counter() - begin) if timeout > 0 else 0.0
    if budget <= 0 or (timeout > 0 and left <= 0):
        return dataclasses.replace(
            first, solve_seconds=time.perf_counter() - begin, timed_out=timeout > 0 and budget > 0
        )
    # The sample's chain joints; every other joint (and an inactive chain joint, which the
    # solve must not move) as the first attempt left it (an inactive joint: at ``start``).
    active = solver.robot.active_mask(options.get("active_joints"))
    moved = [j for j in sampler.spec.chain if active[j]]
    second_options = dict(options, max_iterations=budget, timeout=left)
    batch = first.success.shape  # () for one target: one row below
    # (a batch of starts for one target is a batch of problems too)
    flat_targets = np.broadcast_to(targets, (*batch, targets.shape[-1])).reshape(
        -1, targets.shape[-1]
    )
    flat = lambda x: np.asarray(x).reshape(len(flat_targets), -1)
    out = {f: flat(getattr(first, f)).copy() for f in (*_MERGED, "iterations")}  # (N, -1)
    hard = np.flatnonzero(~out["success"][:, 0])
    samples, _ = best_samples(sampler, flat_targets[hard], k, seed=seed, temperature=temperature)
    seeds = out["q"][hard].copy()
    seeds[:, moved] = samples[:, moved]
    second = solver.solve(objective_for(sampler, flat_targets[hard]), seed=seeds, **second_options)
    better = second.success | (second.cost <= out["cost"][hard, 0])
    for f in _MERGED:
        out[f][hard[better]] = np.reshape(getattr(second, f), (len(hard), -1))[better]
    out["iterations"][hard, 0] += second.iterations
    shaped = {f: v.reshape(*batch, -1) if f in _ROWS else v.reshape(batch) for f, v in out.items()}
    return IKResult(**shaped, solve_seconds=time.perf_counter() - begin, timed_out=second.timed_out)


_ROWS = ("q", "position_error", "orientation_error")  # (*batch, -1); the others (*batch,)
_MERGED = (*_ROWS, "success", "cost")  # per target, from the attempt kept (best / better)
