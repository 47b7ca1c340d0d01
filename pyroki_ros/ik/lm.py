"""The IK fast path: Levenberg-Marquardt with restarts, hard joint limits and a work queue, and
the jitted entry point that unpacks one flat input.

One jitted program solves any number of targets. It keeps ``lanes`` solver states side by
side (structure of arrays); a lane whose target converged or ran out of iterations writes
its answer and takes the next target from the queue, so no lane idles waiting for the
slowest target, as it would under a plain ``vmap``. A single target is the same program
with one lane. Restart seeds are a quasi-random (Kronecker) sequence inside the limits.

Joint limits hold exactly: every step is clipped into the limits, and a joint sitting on a
limit that the step would push through is frozen for that step. Continuous joints wrap.
The limits are the solve's (settings), not constants: per-solve limits never recompile.

The LM rules are the engine's (pyroki_ros/solver/): the damping schedule and the acceptance
test of solver/damping.py (the IK constants, tuned in bench/tune_ik.py), the damped normal
equations of solver/lm.py at T = 1. What is specialised here, for speed, is the layout: states
kept lanes LAST, (n, lanes) and (width, lanes), element-wise sums instead of tiny dots, records
packed into one array each, a few CPU lanes (bench/ik_lanes.py, docs/benchmarks/ik.md), and
the damped step's solve (:func:`_damped_step_lanes`, with its measurement). About 600
lines because that specialisation is kept in this one named place beside its measurements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.ik.settings import (
    _FIELDS,
    _WIDTH,
    Objectives,
    _answer_columns,
    _layout,
    _Settings,
    _slices,
)
from pyroki_ros.model.limits import wrap_or_clip
from pyroki_ros.model.robot import Robot
from pyroki_ros.solver.damping import IK as _DAMPING
from pyroki_ros.solver.damping import improves


def _kronecker_steps(n: int) -> np.ndarray:
    """Increments of an n-dimensional Kronecker low-discrepancy sequence (R_n)."""
    phi = 2.0
    for _ in range(64):  # root of x^(n+1) = x + 1
        phi = (1.0 + phi) ** (1.0 / (n + 1))
    return np.mod(phi ** -np.arange(1.0, n + 1.0), 1.0)


# The solver works with lanes LAST: a configuration batch is (n, lanes), a record
# (width, lanes), so that element-wise work runs along contiguous lanes (see kinematics.py).


def _wrapping(robot: Robot, settings: _Settings):
    """(n,) which joints wrap: a numpy constant when the robot has no continuous joint (per-solve
    limits never add one), so that such a program is the same as without per-solve limits."""
    return settings.wraps if robot.limits.wraps.any() else np.zeros(robot.n_joints, bool)


def _bounds(robot: Robot, seed: jax.Array, settings: _Settings):
    """Per-problem box (n, lanes): the solve's limits (+-inf for a bound turned off), tightened
    around the seed by max_deviation; inactive joints pinned to the seed. Also which joints wrap
    (continuous, unbounded)."""
    column = lambda x: x[:, None]
    active = column(settings.active)
    deviation = column(settings.max_deviation)
    limit_low, limit_high = column(settings.lower), column(settings.upper)
    continuous = column(_wrapping(robot, settings))
    # A continuous joint has no limits: near the seed its box is [seed - d, seed + d] in
    # unwrapped angles (it may cross +-pi; the answer is wrapped at the end, _packed_solve).
    lower = jnp.where(continuous, seed - deviation, jnp.maximum(limit_low, seed - deviation))
    upper = jnp.where(continuous, seed + deviation, jnp.minimum(limit_high, seed + deviation))
    lower = jnp.where(active, lower, seed)
    upper = jnp.where(active, upper, seed)
    wraps = continuous & jnp.isinf(deviation) & active
    lower = jnp.where(wraps, -jnp.pi, lower)  # restart points for wrapping joints
    upper = jnp.where(wraps, jnp.pi, upper)
    return lower, upper, wraps


def _record_columns(objectives: Objectives, n: int) -> dict[str, slice]:
    """Rows of the packed per-lane record of an accepted point for ``objectives`` and n joints
    (one array, so that a select or a scatter over the whole record is one kernel, not one per
    field): q, residual (m), Jacobian (m n), position / orientation errors (k each), cost."""
    m, k = sum(o.n_rows for o in objectives), len(objectives)
    return _slices(q=n, residual=m, jacobian=m * n, pos=k, rot=k, cost=1)


def _sample_box(lower, upper, settings: _Settings):
    """The box (n, lanes) restart points are drawn from: ``lower``/``upper`` with a bound that
    is turned off for this solve (infinite) replaced by the settings' finite sampling box."""
    lower = jnp.where(jnp.isfinite(lower), lower, settings.sample_lower[:, None])
    upper = jnp.where(jnp.isfinite(upper), upper, settings.sample_upper[:, None])
    return lower, upper


def _restart_point(restart, seed, lower, upper, steps):
    """Start of attempt ``restart`` (lanes,): the seed for 0, later a quasi-random point in the
    finite box (see :func:`_sample_box`), the same sequence for every problem (an answer does
    not depend on batch position)."""
    u = jnp.mod(0.5 + restart[None, :] * steps, 1.0)
    return jnp.where(restart[None, :] == 0, seed, lower + u * (upper - lower))


def _accept(robot, objectives, q, settings, acc_of: dict, acc, best, lam):
    """Evaluates ``q`` (n, lanes) and applies the LM acceptance: a lower cost replaces the
    accepted record (columns ``acc_of``) and relaxes the damping, a higher one stiffens it; the
    best record is kept. The Jacobian's columns of inactive joints are zeroed.

    Returns the accepted record, best record, damping and ``done`` (lanes,): converged at a
    freshly accepted point."""
    cost_row = acc_of["cost"].start
    residual, jacobian, pos_err, rot_err = obj.evaluate_t(robot, q, objectives)
    active = settings.active.astype(q.dtype)[:, None]
    jacobian = jacobian * active[None]
    offset = (q - settings.rest[:, None]) * active
    cost = jnp.sum(residual**2, 0) + settings.rest_weight * jnp.sum(offset**2, 0)
    converged = jnp.all(pos_err <= settings.tolerances[0], 0) & jnp.all(
        rot_err <= settings.tolerances[1], 0
    )
    record = jnp.concatenate(
        [q, residual, jacobian.reshape(-1, q.shape[1]), pos_err, rot_err, cost[None]]
    )
    better = improves(cost, acc[cost_row])
    acc = jnp.where(better[None], record, acc)
    lam = _DAMPING.update(lam, better)
    best = jnp.where((acc[cost_row] < best[cost_row])[None], acc, best)
    return acc, best, lam, better & converged


def _lm_step(acc, lam, lower, upper, wraps, settings, acc_of: dict):
    """The damped Gauss-Newton step from the accepted record, joints on a limit that the step
    would push through frozen, put back into the box: the next q (n, lanes)."""
    acc_q = acc[acc_of["q"]]
    residual = acc[acc_of["residual"]]  # (m, lanes)
    jacobian = acc[acc_of["jacobian"]].reshape(residual.shape[0], acc_q.shape[0], -1)
    active = settings.active[:, None]
    # Element-wise products and sums instead of tiny dots: they fuse (see kinematics.py).
    gradient = jnp.sum(jacobian * residual[:, None], axis=0)  # (n, lanes)
    on_lower = (acc_q <= lower) & (gradient > 0)
    on_upper = (acc_q >= upper) & (gradient < 0)
    free = (active & (wraps | ~(on_lower | on_upper)) & (upper > lower)).astype(acc.dtype)
    # with the rest term w |q - rest|^2 of the cost (w = 0 without a rest bias)
    gradient = gradient + settings.rest_weight * (acc_q - settings.rest[:, None])
    step = _damped_step_lanes(jacobian, gradient, free, lam, settings.rest_weight)
    return wrap_or_clip(acc_q + step, lower, upper, wraps)


def _damped_step_lanes(
    jacobian: jax.Array, gradient: jax.Array, free: jax.Array, lam: jax.Array, rest_weight
) -> jax.Array:
    """The IK specialisation of the damped step, lanes last: delta (n, lanes) solving
    ``(J^T J + rest_weight I + D(lam)) delta = -gradient`` over the ``free`` joints (the others
    get an identity row and a zero step), D by the IK damping schedule (solver/damping.py).

    Args:
        jacobian: (m, n, lanes); gradient: (n, lanes) J^T r plus the rest term's;
        free: (n, lanes) 1 where a joint may move; lam: (lanes,) the damping.

    It is :func:`pyroki_ros.solver.lm.solve_chain`'s damped step with T = 1 (one knot, no
    coupling), written for the lanes-last layout with a Gauss-Jordan elimination over the
    whole augmented matrix (n fused array updates) instead of the chain solver's LAPACK
    Cholesky (on a CPU, LAPACK on batches of 7x7 systems costs more than the arithmetic).
    Measured (bench/ik_benchmark.py --quick --robots panda --solvers
    pyroki_ros,pyroki_ros-batch, 2 shared CPU cores, 2026-11-25, two interleaved runs each):
    this 0.100 / 0.100 ms single-target median and 20,200 / 21,100 targets/s batched; the
    Cholesky instead 0.118 / 0.111 ms (+11-18 %) and 16,700 / 17,300 /s (-17 %). Above
    ``_UNROLL_MAX`` joints the elimination's trace grows too long: Cholesky there.
    """
    n = free.shape[0]
    jf = jacobian * free[None]
    # Element-wise products and sums instead of tiny dots: they fuse (see kinematics.py).
    hessian = jnp.sum(jf[:, :, None] * jf[:, None, :], axis=0)  # (n, n, lanes)
    damped = _DAMPING.diagonal(jnp.sum(jf * jf, axis=0), lam[None])  # (n, lanes)
    diagonal = damped + (1.0 - free) + rest_weight
    eye = np.eye(n, dtype=jacobian.dtype)[:, :, None]  # numpy: a constant, not a kernel
    a = hessian + diagonal[:, None] * eye  # symmetric positive definite: no pivoting
    b = -gradient * free
    if n > _UNROLL_MAX:
        factor = jax.scipy.linalg.cho_factor(jnp.moveaxis(a, (0, 1), (-2, -1)))
        x = jax.scipy.linalg.cho_solve(factor, jnp.moveaxis(b, 0, -1)[..., None])[..., 0]
        return jnp.moveaxis(x, -1, 0) * free
    augmented = jnp.concatenate([a, b[:, None]], axis=1)  # (n, n + 1, lanes)
    rows = np.arange(n)[:, None]  # numpy: masks become constants
    for k in range(n):
        pivot = augmented[k] / augmented[k, k : k + 1]  # (n + 1, lanes)
        factor = jnp.where(rows == k, 0.0, augmented[:, k])  # (n, lanes)
        augmented = augmented - factor[:, None] * pivot[None]
        augmented = augmented.at[k].set(pivot)
    return augmented[:, n] * free


def _answer(acc_of: dict, acc, best, done, iterations):
    """Answer records (out width, lanes): the converged point, else the best over restarts."""
    answer = jnp.where(done[None], acc, best)
    part = lambda name: answer[acc_of[name]]
    row = lambda x: x[None].astype(acc.dtype)
    return jnp.concatenate(
        [part("q"), row(done), part("pos"), part("rot"), row(iterations), part("cost")]
    )


def _single_solve(robot, objectives, seeds, settings: _Settings, valid) -> jax.Array:
    """The one-problem program (bucket 1): the loop of :func:`_queue_solve` without the queue,
    so the box is computed once and no iteration gathers or scatters problem data. A problem
    that is not ``valid`` (NaN, a zero quaternion) runs no iteration and reports failure.

    Returns the answer record (1, n + 3 + 2k) (see :func:`_answer_columns`).
    """
    n, dtype = seeds.shape[1], seeds.dtype
    acc_of = _record_columns(objectives, n)
    steps = jnp.asarray(_kronecker_steps(n), dtype)[:, None]
    targets = jax.tree.map(lambda x: x[:1].T, objectives)  # fields (size, 1)
    seed = seeds[:1].T  # (n, 1)
    lower, upper, wraps = _bounds(robot, seed, settings)
    sample_box = _sample_box(lower, upper, settings)  # once: the box is the same every step
    empty = jnp.zeros((acc_of["cost"].stop, 1), dtype).at[acc_of["cost"].start].set(jnp.inf)
    zero = jnp.zeros(1, jnp.int32)
    restart0 = jnp.full(1, settings.first_restart, jnp.int32)
    state = {
        "q": _restart_point(restart0, seed, *sample_box, steps),
        "acc": empty,
        "best": empty,
        "lam": jnp.full(1, _DAMPING.initial, dtype),
        "counters": jnp.stack([restart0, zero, zero]),  # restart, iterations (restart, total)
        "finish": ~valid[:1],
        "done": jnp.zeros(1, bool),
    }

    def body(s):
        acc, best, lam, done = _accept(
            robot, targets, s["q"], settings, acc_of, s["acc"], s["best"], s["lam"]
        )
        restarts, iters_restart, iters_total = s["counters"] + np.array([[0], [1], [1]], np.int32)
        finish = done | (iters_total >= settings.max_iterations)
        restart = ~finish & (
            (iters_restart >= settings.iterations_per_restart) | _DAMPING.stuck(lam)
        )
        restarts = restarts + restart.astype(jnp.int32)
        stepped = _lm_step(acc, lam, lower, upper, wraps, settings, acc_of)
        start = _restart_point(restarts, seed, *sample_box, steps)
        return {
            "q": jnp.where(restart[None], start, stepped),
            "acc": jnp.where(restart[None], empty, acc),
            "best": best,
            "lam": jnp.where(restart, _DAMPING.initial, lam),
            "counters": jnp.stack([restarts, jnp.where(restart, 0, iters_restart), iters_total]),
            "finish": finish,
            "done": done,
        }

    s = jax.lax.while_loop(lambda s: ~s["finish"][0], body, state)
    return _answer(acc_of, s["acc"], s["best"], s["done"], s["counters"][2]).T


def _queue_solve(
    robot: Robot,
    objectives: Objectives,
    seeds: jax.Array,
    settings: _Settings,
    lanes: int,
    order: jax.Array,
    n_queued: jax.Array,
    budget: jax.Array,
    first_restart: int,
    out: jax.Array,
    parallel: bool = False,
    jobs: jax.Array | bool = False,
    jobs_period: jax.Array | int = 1,
    jobs_iterations: jax.Array | int = 0,
) -> jax.Array:
    """Solves the problems ``order[:n_queued]`` with ``lanes`` parallel solver states.

    Each problem gets ``budget`` iterations over its restarts, numbered from
    ``first_restart`` (0 = start at the seed). Answers update the records ``out``
    (N, n + 3 + 2k: q, success, position and orientation errors per objective, iterations,
    cost) where they are better than what is there.

    With ``parallel`` (static) and ``jobs`` (traced) the queue holds restarts instead of
    problems (see :func:`_solve_all`): ``n_queued`` jobs, job j is restart
    ``first_restart + j // n_problems_queued`` of problem ``order[j % n_problems_queued]``
    (``n_problems_queued`` = ``jobs_period``), each with at most ``budget`` iterations (and
    the rounds together ``jobs_iterations``) and no restart of its own; a job whose problem
    another job solved stops. Several lanes may then finish the same problem at once: the
    successful one (else the lowest cost, then the lowest lane) writes, and every lane's
    iterations count.
    """
    n_problems, n = seeds.shape
    dtype = seeds.dtype
    acc_of, out_of = _record_columns(objectives, n), _answer_columns(n, len(objectives))
    steps = jnp.asarray(_kronecker_steps(n), dtype)[:, None]
    lane_ids = jnp.arange(lanes)
    period = jnp.maximum(jobs_period, 1)

    def position(slot):
        """Queue slot -> (position in ``order``, restart offset): a job's problem and round."""
        if not parallel:
            return slot, 0
        return jnp.where(jobs, slot % period, slot), jnp.where(jobs, slot // period, 0)

    def problem(slot):
        index = order[jnp.minimum(position(slot)[0], n_problems - 1)]
        picked = jax.tree.map(lambda x: x[index].T, objectives)  # fields (size, lanes)
        seed = seeds[index].T  # (n, lanes)
        return index, picked, seed, _bounds(robot, seed, settings)

    def restart_point(restart, seed, lower, upper):
        return _restart_point(restart, seed, *_sample_box(lower, upper, settings), steps)

    # lanes beyond the queue start idle (a slot past it; jobs may outnumber the problems)
    idle = np.iinfo(np.int32).max if parallel else n_problems
    first = jnp.where(lane_ids < n_queued, lane_ids, idle)
    _, _, seed0, (lower0, upper0, _) = problem(first)
    restart0 = first_restart + position(first)[1] + jnp.zeros(lanes, jnp.int32)  # may be traced
    empty_acc = jnp.zeros((acc_of["cost"].stop, lanes), dtype).at[acc_of["cost"].start].set(jnp.inf)
    state = {
        "slot": first,
        "next": jnp.minimum(jnp.int32(lanes), n_queued),
        "counters": jnp.stack([restart0, 0 * restart0, 0 * restart0]),  # restart, iterations
        "lam": jnp.full(lanes, _DAMPING.initial, dtype),
        "q": restart_point(restart0, seed0, lower0, upper0),
        "acc": empty_acc,
        "best": empty_acc,
        "out": out,
    }

    def body(s):
        live = s["slot"] < n_queued
        index, targets, _seed, (lower, upper, wraps) = problem(s["slot"])
        acc, best, lam, done = _accept(
            robot, targets, s["q"], settings, acc_of, s["acc"], s["best"], s["lam"]
        )

        restarts, iters_restart, iters_total = s["counters"]
        iters_restart, iters_total = iters_restart + 1, iters_total + 1
        previous = s["out"][index].T  # (out width, lanes)
        stuck = _DAMPING.stuck(lam)
        limit = budget
        if parallel:  # the last round's jobs get what is left of the problem's budget
            offset = position(s["slot"])[1]
            limit = jnp.where(jobs, jnp.minimum(budget, jobs_iterations - offset * budget), budget)
        finish = live & (done | (iters_total >= limit))
        if parallel:  # a job ends where a restart would begin, or once its problem is solved
            solved = previous[out_of["success"].start] > 0.5
            finish = finish | (live & jobs & (stuck | solved))
        restart = live & ~finish & ((iters_restart >= settings.iterations_per_restart) | stuck)

        # Finished lanes write their answer (the converged point, else the best over
        # restarts) unless an earlier pass left a better one.
        iterations = iters_total + previous[out_of["iterations"].start].astype(jnp.int32)
        rows = _answer(acc_of, acc, best, done, iterations)
        keep_previous = (previous[out_of["success"].start] > 0.5) | (
            ~done & (previous[out_of["cost"].start] <= rows[out_of["cost"].start])
        )
        counts = out_of["iterations"]  # a kept record takes this pass's iteration count
        rows = jnp.where(keep_previous[None], previous.at[counts].set(rows[counts]), rows)
        if parallel:
            out = _write_jobs(s["out"], rows, index, finish, iters_total, out_of)
        else:
            out = s["out"].at[jnp.where(finish, index, n_problems)].set(rows.T, mode="drop")

        # ... and take the next problems from the queue, in lane order.
        slot = jnp.where(finish, s["next"] + jnp.cumsum(finish) - 1, s["slot"])
        next_slot = s["next"] + jnp.sum(finish, dtype=jnp.int32)
        _, _, new_seed, (new_lower, new_upper, _) = problem(slot)
        restarts = jnp.where(
            finish, first_restart + position(slot)[1], restarts + restart.astype(jnp.int32)
        )
        reset = finish | restart
        start = restart_point(restarts, new_seed, new_lower, new_upper)

        stepped = _lm_step(acc, lam, lower, upper, wraps, settings, acc_of)

        return {
            "slot": slot,
            "next": next_slot,
            "counters": jnp.stack(
                [restarts, jnp.where(reset, 0, iters_restart), jnp.where(finish, 0, iters_total)]
            ),
            "lam": jnp.where(reset, _DAMPING.initial, lam),
            "q": jnp.where(reset[None], start, stepped),
            "acc": jnp.where(reset[None], empty_acc, acc),
            "best": jnp.where(finish[None], empty_acc, best),
            "out": out,
        }

    state = jax.lax.while_loop(lambda s: jnp.any(s["slot"] < n_queued), body, state)
    return state["out"]


def _write_jobs(out, rows, index, finish, iterations, out_of) -> jax.Array:
    """``out`` (N, width) updated by finishing lanes that may share a problem (restart jobs):
    per problem one lane writes its record ``rows`` (width, lanes), the successful one, else
    the lowest cost, then the lowest lane (a scatter of duplicate indices has no defined
    order); the others add their ``iterations`` (lanes,)."""
    n_problems, lanes = out.shape[0], rows.shape[1]
    lane_ids = jnp.arange(lanes)
    target = jnp.where(finish, index, n_problems)
    score = jnp.where(rows[out_of["success"].start] > 0.5, -1.0, rows[out_of["cost"].start])
    lowest = jnp.full(n_problems + 1, jnp.inf, out.dtype).at[target].min(score)
    candidate = finish & (score <= lowest[target])
    first = jnp.full(n_problems + 1, lanes, jnp.int32)
    first = first.at[jnp.where(candidate, index, n_problems)].min(lane_ids)
    writer = candidate & (first[target] == lane_ids)
    out = out.at[jnp.where(writer, index, n_problems)].set(rows.T, mode="drop")
    others = jnp.where(finish & ~writer, index, n_problems)
    column = out_of["iterations"].start
    return out.at[others, column].add(iterations.astype(out.dtype), mode="drop")


def _solve_all(
    robot: Robot,
    objectives: Objectives,
    seeds,
    n_valid,
    settings: _Settings,
    lanes: int,
    valid,
    parallel: bool = False,
) -> jax.Array:
    """All problems ``[0, n_valid)``: a capped pass, then a pass over the leftovers.

    The queue keeps lanes busy, but a few hard targets (many restarts) started late would
    still hold all lanes at the end. So the first pass caps each problem at a few restarts,
    and a second pass gives the unsolved ones, queued together, the rest of their budget.
    Both passes run the same compiled loop (a loop over passes), so compile time does not
    double.

    ``parallel`` (static; an accelerator's many lanes, see ``IKSolver``): the second pass
    queues the unsolved problems' remaining restarts as separate jobs, round by round
    (restart 3 of every unsolved problem, then restart 4, ...), so that idle lanes run a hard
    problem's restarts side by side instead of one after another: the loop then runs about
    as many trips as a few restarts take, not as many as the hardest problem's iterations.
    A problem's answer is its first success (of simultaneous ones, the lowest lane's).
    """
    n_problems, n = seeds.shape
    columns = _answer_columns(n, len(objectives))
    out = jnp.zeros((n_problems, columns["cost"].stop), seeds.dtype)
    out = out.at[:, columns["cost"]].set(jnp.inf)
    problems = jnp.arange(n_problems)
    if n_problems == 1:  # one problem: one pass with the whole budget, no queue
        return _single_solve(robot, objectives, seeds, settings, valid)
    cap = jnp.minimum(
        settings.max_iterations, _FIRST_PASS_RESTARTS * settings.iterations_per_restart
    )

    def one_pass(pass_index, out):
        first = pass_index == 0
        unsolved = (out[:, columns["success"].start] < 0.5) & (problems < n_valid)
        order = jnp.where(first, problems, jnp.argsort(~unsolved, stable=True))
        n_unsolved = jnp.sum(unsolved, dtype=jnp.int32)
        remaining = settings.max_iterations - cap
        if parallel:
            per_restart = settings.iterations_per_restart
            rounds = (remaining + per_restart - 1) // per_restart
            second = (jnp.where(remaining > 0, n_unsolved * rounds, 0), per_restart)
        else:
            second = (jnp.where(remaining > 0, n_unsolved, 0), remaining)
        return _queue_solve(
            robot,
            objectives,
            seeds,
            settings,
            lanes,
            order,
            jnp.where(first, n_valid, second[0]),
            jnp.where(first, cap, second[1]),
            settings.first_restart + jnp.where(first, 0, _FIRST_PASS_RESTARTS),
            out,
            parallel,
            jobs=~first,
            jobs_period=n_unsolved,
            jobs_iterations=remaining,
        )

    return jax.lax.fori_loop(0, 2, one_pass, out)


_FIRST_PASS_RESTARTS = 3
# Lanes on a CPU: past ~512-byte buffers XLA:CPU runs a program's kernels on its thread pool,
# and per-iteration overhead grows; 16 lanes measured best on 2 cores (bench/ik_lanes.py).
_CPU_LANES = 16
_UNROLL_MAX = 16  # joints: above, the damped step's elimination is replaced by LAPACK


def _packed_solve(robot: Robot, structure: tuple, lanes: int, packed, parallel: bool = False):
    """The jitted entry point: one flat array in (the packed settings, then the (N, n + 18 k)
    rows of seeds and targets), one (N, n + 3 + 2k) array out. ``robot`` holds the links the
    objectives need (see Robot.subtree) and every actuated joint.

    One argument, not two: each argument of a jitted call is a separate host-to-device copy
    (~3 us on a CPU), a noticeable share of a single small solve. The program also does the
    per-row preparation that would otherwise cost host time per call (a few fused kernels
    here, several microseconds of Python there): seeds into the limits, target quaternions
    made unit, and a row with NaN or a zero quaternion marked invalid (see _single_solve).

    Output columns: q (n, inside the float64 limits once widened to float64), success,
    position errors (k), orientation errors (k), iterations, cost.
    """
    n = robot.n_joints
    width = n + _WIDTH * len(structure)
    settings, n_valid = _Settings.unpack(packed[: _Settings.size(n)], n)
    params = packed[_Settings.size(n) :].reshape(-1, width)
    valid = jnp.all(jnp.isfinite(params), axis=1)
    lower, upper, continuous = settings.lower, settings.upper, _wrapping(robot, settings)
    objectives = []
    for index, (kind, link, reference, align_axis) in enumerate(structure):
        start = n + index * _WIDTH  # the objective's columns, its fields in _FIELDS' order
        fields = {name: params[:, start + f.start : start + f.stop] for name, f in _FIELDS.items()}
        wxyz, position = fields["target"][:, :4], fields["target"][:, 4:]
        norm = jnp.sqrt(jnp.sum(wxyz * wxyz, axis=1, keepdims=True))
        valid = valid & (norm[:, 0] > 1e-9)
        fields["target"] = jnp.concatenate([wxyz / norm, position], axis=1)
        objectives.append(
            obj.Objective(
                **fields, kind=kind, link=link, reference=reference, align_axis=align_axis
            )
        )
    seeds = wrap_or_clip(params[:, :n], lower, upper, continuous)
    # Only the joints that move an objective's link are unknowns (a Panda's finger joint is
    # not, for its hand): a smaller system; the others keep their seed values.
    joints = tuple(sorted({i for i in robot.q_index if i >= 0}))
    if len(joints) < n:
        pick = np.asarray(joints)
        reduced = settings.take(pick)
        robot = robot.with_joints(joints)
        out = _solve_all(
            robot, tuple(objectives), seeds[:, pick], n_valid, reduced, lanes, valid, parallel
        )
        joint_values = seeds.at[:, pick].set(out[:, : len(joints)])  # the others keep the seed's
        out = jnp.concatenate([joint_values, out[:, len(joints) :]], 1)
    else:
        out = _solve_all(robot, tuple(objectives), seeds, n_valid, settings, lanes, valid, parallel)
    q = wrap_or_clip(out[:, :n], lower, upper, continuous)
    return jnp.concatenate([q, out[:, n:]], axis=1)


def _sharded_solve(
    robot: Robot, structure: tuple, lanes: int, settings_vector, params, parallel: bool = False
):
    """:func:`_packed_solve` of one device's share of the problems (the body of a
    ``shard_map``): ``settings_vector`` (_Settings.size(n),) the same on every device, ``params``
    (N / devices, n + 18 k) this device's rows. The count of real (not padding) problems in
    the settings becomes this share's."""
    rows = params.shape[0]
    first = jax.lax.axis_index(devices.AXIS) * rows
    last = _layout(robot.n_joints)["n_valid"].start  # the count of real problems
    local = jnp.clip(settings_vector[last] - first, 0, rows).astype(settings_vector.dtype)
    packed = jnp.concatenate([settings_vector.at[last].set(local), params.ravel()])
    return _packed_solve(robot, structure, lanes, packed, parallel)


@dataclasses.dataclass(frozen=True)
class _ShardedProgram:
    """A program of :func:`_sharded_solve` over several devices: settings and rows are
    separate arguments (the rows split over the devices, the settings copied), where a
    program of :func:`_packed_solve` takes one flat array."""

    program: Callable[[np.ndarray, np.ndarray], jax.Array]
