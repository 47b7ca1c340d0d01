"""Inverse kinematics: Levenberg-Marquardt with restarts, hard joint limits and a work queue.

One jitted program solves any number of targets. It keeps ``lanes`` solver states side by
side (structure of arrays); a lane whose target converged or ran out of iterations writes
its answer and takes the next target from the queue, so no lane idles waiting for the
slowest target, as it would under a plain ``vmap``. A single target is the same program
with one lane. Restart seeds are a quasi-random (Kronecker) sequence inside the limits.

Joint limits hold exactly: every step is clipped into the limits, and a joint sitting on a
limit that the step would push through is frozen for that step. Continuous joints wrap.

Compilation happens once per (robot, objective kinds/links, batch bucket); new target values,
seeds, tolerances, active joints or deviation bounds reuse the compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.model.robot import Robot
from pyroki_ros.solver.constant_pool import pooled_constants
from pyroki_ros.solver.linalg import solve_spd

Objectives = tuple[obj.Objective, ...]

BUCKETS = (1, 16, 128, 1024, 8192, 65536)
DEFAULT_POSITION_TOLERANCE = 1e-3  # m
DEFAULT_ORIENTATION_TOLERANCE = math.radians(1.0)  # rad
DEFAULT_ITERATIONS_PER_RESTART = 15  # LM iterations of one attempt (bench/tune_ik.py)


@dataclasses.dataclass(frozen=True, slots=True)  # slots: cheaper to build, per solve
class IKResult:
    """Solutions for a batch of ``(*batch,)`` problems (numpy arrays)."""

    q: np.ndarray  # (*batch, n_joints) inside the limits, robot.joint_names order
    success: np.ndarray  # (*batch,) every objective within tolerance
    position_error: np.ndarray  # (*batch, n_objectives) m
    orientation_error: np.ndarray  # (*batch, n_objectives) rad
    iterations: np.ndarray  # (*batch,) LM iterations spent, over all restarts
    solve_seconds: float  # wall time of the solve call, all problems together
    cost: np.ndarray | None = None  # (*batch,) final weighted sum of squared residuals
    timed_out: bool = False  # the timeout cut the restarts short


@dataclasses.dataclass(frozen=True)
class _Settings:
    """Per-call numbers; traced, so changing them never recompiles.

    Travels as one flat vector (see :meth:`pack`): every argument of a jitted call is a
    separate host-to-device copy, and a single small solve cannot afford a dozen of them.
    """

    active: jax.Array  # (n,) bool
    max_deviation: jax.Array  # (n,) inf = unlimited
    rest: jax.Array  # (n,)
    rest_weight: jax.Array  # ()
    tolerances: jax.Array  # (2,) position m, orientation rad
    iterations_per_restart: jax.Array  # () int
    max_iterations: jax.Array  # () int, per problem over all restarts

    def pack(self, n_valid: int, dtype) -> np.ndarray:
        scalars = [
            self.rest_weight,
            *self.tolerances,
            self.iterations_per_restart,
            self.max_iterations,
            n_valid,
        ]
        return np.concatenate(
            [self.active, self.max_deviation, self.rest, np.asarray(scalars, np.float64)],
            dtype=dtype,
        )

    @staticmethod
    def size(n: int) -> int:
        """Length of the packed vector for n joints."""
        return 3 * n + 6

    @staticmethod
    def unpack(vector: jax.Array, n: int) -> tuple[_Settings, jax.Array]:
        scalars = vector[3 * n :]
        settings = _Settings(
            active=vector[:n] > 0.5,
            max_deviation=vector[n : 2 * n],
            rest=vector[2 * n : 3 * n],
            rest_weight=scalars[0],
            tolerances=scalars[1:3],
            iterations_per_restart=scalars[3].astype(jnp.int32),
            max_iterations=scalars[4].astype(jnp.int32),
        )
        return settings, scalars[5].astype(jnp.int32)


def _kronecker_steps(n: int) -> np.ndarray:
    """Increments of an n-dimensional Kronecker low-discrepancy sequence (R_n)."""
    phi = 2.0
    for _ in range(64):  # root of x^(n+1) = x + 1
        phi = (1.0 + phi) ** (1.0 / (n + 1))
    return np.mod(phi ** -np.arange(1.0, n + 1.0), 1.0)


# The solver works with lanes LAST: a configuration batch is (n, lanes), a record
# (width, lanes), so that element-wise work runs along contiguous lanes (see kinematics.py).


def _bounds(robot: Robot, seed: jax.Array, settings: _Settings):
    """Per-problem box (n, lanes): the limits, tightened around the seed by max_deviation;
    inactive joints pinned to the seed. Also which joints wrap (continuous, unbounded)."""
    column = lambda x: x[:, None]
    active = column(settings.active)
    deviation = column(settings.max_deviation)
    limit_low, limit_high, continuous = map(column, _inner_limits(robot))
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


def _into_bounds(q, lower, upper, wraps):
    wrapped = jnp.mod(q + jnp.pi, 2 * jnp.pi) - jnp.pi
    return jnp.where(wraps, wrapped, jnp.clip(q, lower, upper))


def _evaluate(robot: Robot, objectives: Objectives, q: jax.Array, settings: _Settings):
    """Objectives at q (n, lanes): residual (m, lanes), Jacobian (m, n, lanes) with inactive
    columns zeroed, errors (k, lanes), cost (lanes,), converged (lanes,)."""
    residual, jacobian, pos_err, rot_err = obj.evaluate_t(robot, q, objectives)
    active = settings.active.astype(q.dtype)[:, None]
    jacobian = jacobian * active[None]
    offset = (q - settings.rest[:, None]) * active
    cost = jnp.sum(residual**2, 0) + settings.rest_weight * jnp.sum(offset**2, 0)
    converged = jnp.all(pos_err <= settings.tolerances[0], 0) & jnp.all(
        rot_err <= settings.tolerances[1], 0
    )
    return residual, jacobian, pos_err, rot_err, cost, converged


class _Layout:
    """Column layout of the packed per-lane records (one array each, so that a select or a
    scatter over the whole record is one kernel, not one per field)."""

    def __init__(self, n: int, m: int, k: int):
        self.n, self.m, self.k = n, m, k
        # accepted point: q, residual, Jacobian, position / orientation errors, cost
        self.acc = _slices(q=n, residual=m, jacobian=m * n, pos=k, rot=k, cost=1)
        self.out = _answer_columns(n, k)

    def acc_width(self) -> int:
        return self.acc["cost"].stop


@functools.cache
def _answer_columns(n: int, k: int) -> dict[str, slice]:
    """Columns of an answer record (the program's output rows, one per problem): the best or
    converged point q, success, position / orientation error per objective, iterations, cost."""
    return _slices(q=n, success=1, pos=k, rot=k, iterations=1, cost=1)


def _slices(**sizes: int) -> dict[str, slice]:
    out, start = {}, 0
    for name, size in sizes.items():
        out[name] = slice(start, start + size)
        start += size
    return out


def _restart_point(restart, seed, lower, upper, steps):
    """Start of attempt ``restart`` (lanes,): the seed for 0, later a quasi-random point in the
    box, the same sequence for every problem (an answer does not depend on batch position)."""
    u = jnp.mod(0.5 + restart[None, :] * steps, 1.0)
    return jnp.where(restart[None, :] == 0, seed, lower + u * (upper - lower))


def _accept(robot, objectives, q, settings, layout: _Layout, acc, best, lam):
    """Evaluates ``q`` (n, lanes) and applies the LM acceptance: a lower cost replaces the
    accepted record and relaxes the damping, a higher one stiffens it; the best record is kept.

    Returns the accepted record, best record, damping and ``done`` (lanes,): converged at a
    freshly accepted point."""
    n, m = layout.n, layout.m
    cost_row = layout.acc["cost"].start
    residual, jacobian, pos_err, rot_err, cost, converged = _evaluate(
        robot, objectives, q, settings
    )
    record = jnp.concatenate(
        [q, residual, jacobian.reshape(m * n, q.shape[1]), pos_err, rot_err, cost[None]]
    )
    better = cost < acc[cost_row]
    acc = jnp.where(better[None], record, acc)
    lam = jnp.where(better, jnp.maximum(lam * _DAMPING_DOWN, 1e-7), lam * _DAMPING_UP)
    best = jnp.where((acc[cost_row] < best[cost_row])[None], acc, best)
    return acc, best, lam, better & converged


def _lm_step(acc, lam, lower, upper, wraps, settings, layout: _Layout):
    """The damped Gauss-Newton step from the accepted record, joints on a limit that the step
    would push through frozen, put back into the box: the next q (n, lanes)."""
    n, m = layout.n, layout.m
    acc_q = acc[layout.acc["q"]]
    residual = acc[layout.acc["residual"]]  # (m, lanes)
    jacobian = acc[layout.acc["jacobian"]].reshape(m, n, -1)
    active = settings.active[:, None]
    # Element-wise products and sums instead of tiny dots: they fuse (see kinematics.py).
    gradient = jnp.sum(jacobian * residual[:, None], axis=0)  # (n, lanes)
    on_lower = (acc_q <= lower) & (gradient > 0)
    on_upper = (acc_q >= upper) & (gradient < 0)
    free = (active & (wraps | ~(on_lower | on_upper)) & (upper > lower)).astype(acc.dtype)
    jf = jacobian * free[None]
    hessian = jnp.sum(jf[:, :, None] * jf[:, None, :], axis=0)  # (n, n, lanes)
    # with the rest term w |q - rest|^2 of the cost (w = 0 without a rest bias)
    gradient = gradient + settings.rest_weight * (acc_q - settings.rest[:, None])
    diagonal = lam[None] + (1.0 - free) + settings.rest_weight
    eye = np.eye(n, dtype=acc.dtype)[:, :, None]  # numpy: a constant, not a kernel
    step = solve_spd(hessian + diagonal[:, None] * eye, -gradient * free) * free
    step = jnp.clip(step, -_MAX_STEP, _MAX_STEP)
    return _into_bounds(acc_q + step, lower, upper, wraps)


def _answer(layout: _Layout, acc, best, done, iterations):
    """Answer records (out width, lanes): the converged point, else the best over restarts."""
    answer = jnp.where(done[None], acc, best)
    return jnp.concatenate(
        [
            answer[layout.acc["q"]],
            done[None].astype(acc.dtype),
            answer[layout.acc["pos"]],
            answer[layout.acc["rot"]],
            iterations[None].astype(acc.dtype),
            answer[layout.acc["cost"]],
        ]
    )


def _single_solve(robot, objectives, seeds, settings: _Settings, valid) -> jax.Array:
    """The one-problem program (bucket 1): the loop of :func:`_queue_solve` without the queue,
    so the box is computed once and no iteration gathers or scatters problem data. A problem
    that is not ``valid`` (NaN, a zero quaternion) runs no iteration and reports failure.

    Returns the answer record (1, n + 3 + 2k) (see :func:`_answer_columns`).
    """
    n, dtype = seeds.shape[1], seeds.dtype
    layout = _Layout(n, sum(o.n_rows for o in objectives), len(objectives))
    steps = jnp.asarray(_kronecker_steps(n), dtype)[:, None]
    targets = jax.tree.map(lambda x: x[:1].T, objectives)  # fields (size, 1)
    seed = seeds[:1].T  # (n, 1)
    lower, upper, wraps = _bounds(robot, seed, settings)
    empty = jnp.zeros((layout.acc_width(), 1), dtype).at[layout.acc["cost"].start].set(jnp.inf)
    zero = jnp.zeros(1, jnp.int32)
    state = {
        "q": seed,
        "acc": empty,
        "best": empty,
        "lam": jnp.full(1, _DAMPING_START, dtype),
        "counters": jnp.stack([zero, zero, zero]),  # restart, iterations (restart, total)
        "finish": ~valid[:1],
        "done": jnp.zeros(1, bool),
    }

    def body(s):
        acc, best, lam, done = _accept(
            robot, targets, s["q"], settings, layout, s["acc"], s["best"], s["lam"]
        )
        restarts, iters_restart, iters_total = s["counters"] + np.array([[0], [1], [1]], np.int32)
        finish = done | (iters_total >= settings.max_iterations)
        restart = ~finish & ((iters_restart >= settings.iterations_per_restart) | (lam > 1e5))
        restarts = restarts + restart.astype(jnp.int32)
        stepped = _lm_step(acc, lam, lower, upper, wraps, settings, layout)
        start = _restart_point(restarts, seed, lower, upper, steps)
        return {
            "q": jnp.where(restart[None], start, stepped),
            "acc": jnp.where(restart[None], empty, acc),
            "best": best,
            "lam": jnp.where(restart, _DAMPING_START, lam),
            "counters": jnp.stack([restarts, jnp.where(restart, 0, iters_restart), iters_total]),
            "finish": finish,
            "done": done,
        }

    s = jax.lax.while_loop(lambda s: ~s["finish"][0], pooled_constants(body), state)
    return _answer(layout, s["acc"], s["best"], s["done"], s["counters"][2]).T


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
) -> jax.Array:
    """Solves the problems ``order[:n_queued]`` with ``lanes`` parallel solver states.

    Each problem gets ``budget`` iterations over its restarts, numbered from
    ``first_restart`` (0 = start at the seed). Answers update the records ``out``
    (N, n + 3 + 2k: q, success, position and orientation errors per objective, iterations,
    cost) where they are better than what is there.
    """
    n_problems, n = seeds.shape
    dtype = seeds.dtype
    m, k = sum(o.n_rows for o in objectives), len(objectives)
    layout = _Layout(n, m, k)
    acc_of, out_of = layout.acc, layout.out
    steps = jnp.asarray(_kronecker_steps(n), dtype)[:, None]
    lane_ids = jnp.arange(lanes)
    cost_row = acc_of["cost"].start

    def problem(slot):
        index = order[jnp.minimum(slot, n_problems - 1)]
        picked = jax.tree.map(lambda x: x[index].T, objectives)  # fields (size, lanes)
        seed = seeds[index].T  # (n, lanes)
        return index, picked, seed, _bounds(robot, seed, settings)

    def restart_point(restart, seed, lower, upper):
        return _restart_point(restart, seed, lower, upper, steps)

    first = jnp.where(lane_ids < n_queued, lane_ids, n_problems)  # lanes beyond it start idle
    _, _, seed0, (lower0, upper0, _) = problem(first)
    restart0 = jnp.full(lanes, first_restart, jnp.int32)  # may be traced
    empty_acc = jnp.zeros((layout.acc_width(), lanes), dtype).at[cost_row].set(jnp.inf)
    state = {
        "slot": first,
        "next": jnp.minimum(jnp.int32(lanes), n_queued),
        "counters": jnp.stack([restart0, 0 * restart0, 0 * restart0]),  # restart, iterations
        "lam": jnp.full(lanes, _DAMPING_START, dtype),
        "q": restart_point(restart0, seed0, lower0, upper0),
        "acc": empty_acc,
        "best": empty_acc,
        "out": out,
    }

    def body(s):
        live = s["slot"] < n_queued
        index, targets, _seed, (lower, upper, wraps) = problem(s["slot"])
        acc, best, lam, done = _accept(
            robot, targets, s["q"], settings, layout, s["acc"], s["best"], s["lam"]
        )

        restarts, iters_restart, iters_total = s["counters"]
        iters_restart, iters_total = iters_restart + 1, iters_total + 1
        finish = live & (done | (iters_total >= budget))
        restart = (
            live & ~finish & ((iters_restart >= settings.iterations_per_restart) | (lam > 1e5))
        )

        # Finished lanes write their answer (the converged point, else the best over
        # restarts) unless an earlier pass left a better one.
        previous = s["out"][index].T  # (out width, lanes)
        iterations = iters_total + previous[out_of["iterations"].start].astype(jnp.int32)
        rows = _answer(layout, acc, best, done, iterations)
        keep_previous = (previous[out_of["success"].start] > 0.5) | (
            ~done & (previous[out_of["cost"].start] <= rows[out_of["cost"].start])
        )
        rows = jnp.where(
            keep_previous[None],
            previous.at[out_of["iterations"]].set(rows[out_of["iterations"]]),
            rows,
        )
        out = s["out"].at[jnp.where(finish, index, n_problems)].set(rows.T, mode="drop")

        # ... and take the next problems from the queue, in lane order.
        slot = jnp.where(finish, s["next"] + jnp.cumsum(finish) - 1, s["slot"])
        next_slot = s["next"] + jnp.sum(finish, dtype=jnp.int32)
        _, _, new_seed, (new_lower, new_upper, _) = problem(slot)
        restarts = jnp.where(finish, first_restart, restarts + restart.astype(jnp.int32))
        reset = finish | restart
        start = restart_point(restarts, new_seed, new_lower, new_upper)

        stepped = _lm_step(acc, lam, lower, upper, wraps, settings, layout)

        return {
            "slot": slot,
            "next": next_slot,
            "counters": jnp.stack(
                [restarts, jnp.where(reset, 0, iters_restart), jnp.where(finish, 0, iters_total)]
            ),
            "lam": jnp.where(reset, _DAMPING_START, lam),
            "q": jnp.where(reset[None], start, stepped),
            "acc": jnp.where(reset[None], empty_acc, acc),
            "best": jnp.where(finish[None], empty_acc, best),
            "out": out,
        }

    state = jax.lax.while_loop(lambda s: jnp.any(s["slot"] < n_queued), body, state)
    return state["out"]


def _solve_all(
    robot: Robot, objectives: Objectives, seeds, n_valid, settings: _Settings, lanes: int, valid
) -> jax.Array:
    """All problems ``[0, n_valid)``: a capped pass, then a pass over the leftovers.

    The queue keeps lanes busy, but a few hard targets (many restarts) started late would
    still hold all lanes at the end. So the first pass caps each problem at a few restarts,
    and a second pass gives the unsolved ones, queued together, the rest of their budget.
    Both passes run the same compiled loop (a loop over passes), so compile time does not
    double.
    """
    n_problems, n = seeds.shape
    k = len(objectives)
    columns = _answer_columns(n, k)
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
        return _queue_solve(
            robot,
            objectives,
            seeds,
            settings,
            lanes,
            order,
            jnp.where(
                first,
                n_valid,
                jnp.where(settings.max_iterations > cap, jnp.sum(unsolved, dtype=jnp.int32), 0),
            ),
            jnp.where(first, cap, settings.max_iterations - cap),
            jnp.where(first, 0, _FIRST_PASS_RESTARTS),
            out,
        )

    return jax.lax.fori_loop(0, 2, one_pass, out)


_FIRST_PASS_RESTARTS = 3
# Lanes on a CPU: past ~512-byte buffers XLA:CPU runs a program's kernels on its thread pool,
# and per-iteration overhead grows; 16 lanes measured best on 2 cores (bench/ik_lanes.py).
_CPU_LANES = 16
# Levenberg-Marquardt damping: start, and factors on an accepted / rejected step.
_DAMPING_START, _DAMPING_DOWN, _DAMPING_UP = 0.3, 0.35, 3.0  # tuned: bench/tune_ik.py
_MAX_STEP = np.inf  # rad or m per joint and iteration


_FIELDS = (("target", 7), ("axis", 3), ("local_point", 3), ("local_axis", 3), ("weights", 2))
_WIDTH = sum(size for _, size in _FIELDS)


def _structure(o: obj.Objective) -> tuple:
    return (o.kind, o.link, o.reference, o.align_axis)


def _packed_solve(robot: Robot, structure: tuple, lanes: int, packed):
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
    lower, upper, continuous = _inner_limits(robot)
    objectives = []
    column = n
    for kind, link, reference, align_axis in structure:
        fields = {}
        for name, size in _FIELDS:
            fields[name] = params[:, column : column + size]
            column += size
        wxyz, position = fields["target"][:, :4], fields["target"][:, 4:]
        norm = jnp.sqrt(jnp.sum(wxyz * wxyz, axis=1, keepdims=True))
        valid = valid & (norm[:, 0] > 1e-9)
        fields["target"] = jnp.concatenate([wxyz / norm, position], axis=1)
        objectives.append(
            obj.Objective(
                **fields, kind=kind, link=link, reference=reference, align_axis=align_axis
            )
        )
    seeds = _wrap_or_clip(params[:, :n], lower, upper, continuous)
    # Only the joints that move an objective's link are unknowns (a Panda's finger joint is
    # not, for its hand): a smaller system; the others keep their seed values.
    joints = tuple(sorted({i for i in robot.q_index if i >= 0}))
    if len(joints) < n:
        pick = np.asarray(joints)
        reduced = dataclasses.replace(
            settings,
            active=settings.active[pick],
            max_deviation=settings.max_deviation[pick],
            rest=settings.rest[pick],
        )
        robot = robot.with_joints(joints)
        out = _solve_all(robot, tuple(objectives), seeds[:, pick], n_valid, reduced, lanes, valid)
        out = jnp.concatenate(
            [seeds.at[:, pick].set(out[:, : len(joints)]), out[:, len(joints) :]], 1
        )
    else:
        out = _solve_all(robot, tuple(objectives), seeds, n_valid, settings, lanes, valid)
    q = _wrap_or_clip(out[:, :n], lower, upper, continuous)
    return jnp.concatenate([q, out[:, n:]], axis=1)


def _inner_limits(robot: Robot) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The limits in the robot's dtype, rounded inwards, and which joints are continuous
    (numpy: constants of the program). (n,) each."""
    return (*robot.limits.inner(robot.dtype), robot.limits.wraps)


def _wrap_or_clip(q, lower, upper, continuous):
    """(N, n): continuous joints wrapped to [-pi, pi), then every joint clipped into the
    (inward-rounded) limits: a continuous joint's are +-pi, and a float32 wrap can land on
    -pi rounded outwards."""
    wrapped = jnp.where(continuous, jnp.mod(q + jnp.pi, 2 * jnp.pi) - jnp.pi, q)
    return jnp.clip(wrapped, lower, upper)


def _sharded_solve(robot: Robot, structure: tuple, lanes: int, settings_vector, params):
    """:func:`_packed_solve` of one device's share of the problems (the body of a
    ``shard_map``): ``settings_vector`` (3n + 6,) the same on every device, ``params``
    (N / devices, n + 18 k) this device's rows. The count of real (not padding) problems in
    the settings becomes this share's."""
    rows = params.shape[0]
    first = jax.lax.axis_index(devices.AXIS) * rows
    last = _Settings.size(robot.n_joints) - 1  # n_valid: the packed settings' last entry
    local = jnp.clip(settings_vector[last] - first, 0, rows).astype(settings_vector.dtype)
    packed = jnp.concatenate([settings_vector.at[last].set(local), params.ravel()])
    return _packed_solve(robot, structure, lanes, packed)


@dataclasses.dataclass(frozen=True)
class _ShardedProgram:
    """A program of :func:`_sharded_solve` over several devices: settings and rows are
    separate arguments (the rows split over the devices, the settings copied)."""

    program: object

    def __call__(self, settings_vector: np.ndarray, params: np.ndarray) -> jax.Array:
        return self.program(settings_vector, params)


def _run(program, settings_vector: np.ndarray, params: np.ndarray) -> np.ndarray:
    """Calls a program of :func:`_packed_solve` (or a :class:`_ShardedProgram`) on host
    arrays; its answer records, a numpy array (N, n + 3 + 2k)."""
    if isinstance(program, _ShardedProgram):
        return np.asarray(program(settings_vector, params))
    return np.asarray(program(np.concatenate([settings_vector, params.ravel()])))


def _bucket(n: int) -> int:
    for size in BUCKETS:
        if n <= size:
            return size
    return int(math.ceil(n / BUCKETS[-1]) * BUCKETS[-1])


class IKSolver:
    """Solves IK problems for one robot; keeps one compiled program per problem structure.

    Example:
        >>> solver = IKSolver(robot)
        >>> result = solver.solve(objectives.pose("panda_hand", target_wxyz_xyz))
    """

    def __init__(self, robot: Robot, *, lanes: int | None = None, device: str | None = None):
        self.robot = robot
        try:
            self.device = jax.local_devices(backend=device)[0]  # this process's (jax.distributed)
        except RuntimeError as e:
            raise ValueError(f"device '{device}' is not available here: {e}") from None
        # CPU: a few lanes keep each step's arrays small and cache-resident; GPU: one lane per
        # problem, all in parallel.
        self._max_lanes = lanes or (_CPU_LANES if self.device.platform == "cpu" else 1 << 16)
        # Several local devices of this platform: batches are split over them (devices.py).
        self._mesh = devices.batch_mesh(self.device.platform)
        self._programs: dict = {}
        self._lock = threading.Lock()
        self._settings_cache: dict = {}
        self._derived: dict = {}  # see _per_settings
        # Host copies, so that a call does no device round trip before the solve itself.
        self._lower, self._upper = np.array(robot.limits.bounds, np.float64).reshape(-1, 2).T
        self._center = (self._lower + self._upper) / 2
        self._continuous = np.asarray(robot.continuous, bool)
        self._any_continuous = bool(self._continuous.any())
        self._dtype = np.dtype(robot.dtype)

    def program(self, structure: tuple, size: int):
        """The compiled solver for an objective structure and a batch bucket size (a
        :class:`_ShardedProgram` when a batch is split over several devices: ``size`` then a
        multiple of their count, see :meth:`_size`)."""
        mesh = self._mesh if size > 1 else None
        lanes = min(self._max_lanes, size // (mesh.size if mesh is not None else 1))
        key = (structure, lanes, mesh is not None)
        program = self._programs.get(key)
        if program is None:
            with self._lock:  # one jitted function per key, even under concurrent first calls
                program = self._programs.get(key)
                if program is None:
                    links = {s[1] for s in structure} | {s[2] for s in structure if s[2]}
                    pruned = self.robot.subtree(tuple(sorted(links)))
                    if mesh is None:
                        pruned = jax.device_put(pruned, self.device)
                        fn = functools.partial(_packed_solve, pruned, structure, lanes)
                        program = jax.jit(fn)
                    else:  # the robot as constants of the program (every device), rows split
                        pruned = jax.tree.map(np.asarray, pruned)
                        fn = functools.partial(_sharded_solve, pruned, structure, lanes)
                        program = _ShardedProgram(
                            devices.over_devices(fn, mesh, (devices.SAME, devices.ROWS))
                        )
                    self._programs[key] = program
        return program

    def _size(self, count: int) -> int:
        """Rows of the program for ``count`` problems: the bucket, a multiple of the device
        count when batches are split over several devices."""
        size = _bucket(count)
        return devices.padded_size(size, self._mesh) if size > 1 else size

    def forget(self, structure: tuple) -> None:
        """Drops the compiled programs of an objective structure (``tuple(_structure(o))``
        per objective): their executables are freed once no caller holds them."""
        with self._lock:
            for key in [k for k in self._programs if k[0] == structure]:
                del self._programs[key]

    def _cached_settings(self, options: dict) -> _Settings:
        # Options repeat from call to call (a teleop loop, a benchmark): check them once.
        try:
            key = tuple(
                (k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in options.items()
            )
            hash(key)
        except TypeError:  # numpy arrays and the like: no caching
            return self.settings(**options)
        settings = self._settings_cache.get(key)
        if settings is None:  # get-then-set: safe when several threads share the solver
            if len(self._settings_cache) > 64:
                self._settings_cache.clear()
            settings = self._settings_cache[key] = self.settings(**options)
        return settings

    def _per_settings(self, settings: _Settings, extra, make):
        """``make()``, kept per (settings object, ``extra``): repeated calls with the cached
        settings (a request stream, teleop) skip the work. Keyed on identity, checked against
        the object itself, so a recycled id never returns a stale entry."""
        key = (id(settings), extra)
        entry = self._derived.get(key)
        if entry is None or entry[0] is not settings:
            if len(self._derived) > 128:
                self._derived.clear()
            entry = self._derived[key] = (settings, make())
        return entry[1]

    def _first_stage(self, settings: _Settings, timed: bool) -> _Settings:
        """Settings of a call's first stage: with a rest bias, a short biased stage; with a
        time budget, the attempt from the seed only (the second stage, :meth:`_continue`, gets
        the rest)."""
        if not (settings.rest_weight > 0 or timed):
            return settings

        def make() -> _Settings:
            first = settings
            if settings.rest_weight > 0:
                first = dataclasses.replace(
                    first,
                    max_iterations=min(first.max_iterations, 2 * first.iterations_per_restart),
                )
            if timed:
                first = dataclasses.replace(
                    first,
                    max_iterations=min(first.max_iterations, settings.iterations_per_restart),
                )
            return first

        return self._per_settings(settings, ("first stage", timed), make)

    def _packed(self, settings: _Settings, count: int) -> np.ndarray:
        """``settings`` packed for ``count`` problems. A host array, like every other argument:
        a device array would be a different jit signature (a second compilation)."""
        return self._per_settings(
            settings, ("packed", count), lambda: settings.pack(count, self._dtype)
        )

    def into_limits(self, q: np.ndarray) -> np.ndarray:
        """Host-side, float64: continuous joints wrapped to [-pi, pi), others clipped (the
        solver's rule, applied to seeds before they are cast to the program's dtype, so that
        a continuous joint's accumulated angle wraps exactly)."""
        clipped = np.minimum(np.maximum(q, self._lower), self._upper)
        if not self._any_continuous:
            return clipped
        wrapped = np.mod(q + np.pi, 2 * np.pi) - np.pi
        return np.where(self._continuous, wrapped, clipped)

    def pose_solver(
        self,
        link: str,
        *,
        reference: str | None = None,
        position_weight: float = 1.0,
        orientation_weight: float = obj.POSE_ORIENTATION_WEIGHT,
        **options,
    ) -> PoseSolver:
        """A prepared single-target pose solver for ``link`` (see :class:`PoseSolver`);
        ``options`` as for :meth:`solve`."""
        return PoseSolver(self, link, reference, position_weight, orientation_weight, options)

    def settings(
        self,
        *,
        active_joints=None,
        max_deviation=None,
        rest=None,
        rest_weight: float = 0.0,
        position_tolerance: float = DEFAULT_POSITION_TOLERANCE,
        orientation_tolerance: float = DEFAULT_ORIENTATION_TOLERANCE,
        iterations_per_restart: int = DEFAULT_ITERATIONS_PER_RESTART,
        max_iterations: int = 1000,
    ) -> _Settings:
        """Checks and gathers the per-call options (see :meth:`solve`)."""
        robot = self.robot
        n = robot.n_joints
        active = np.ones(n, bool)
        if active_joints is not None:
            active_joints = list(active_joints)
            if not active_joints:
                raise ValueError("active_joints is empty: give at least one joint (or None = all)")
            active[:] = False
            for name in active_joints:
                active[robot.joint_index(name)] = True
        deviation = np.full(n, np.inf)
        if max_deviation is not None:
            deviation = np.asarray(max_deviation, np.float64)
            if deviation.shape not in ((), (n,)):
                raise ValueError(f"max_deviation must be one number or {n} numbers")
            deviation = np.broadcast_to(deviation, (n,)).copy()
            if np.any(np.isnan(deviation)) or np.any(deviation < 0):
                raise ValueError("max_deviation must be >= 0 (per joint or one number)")
        rest_q = np.zeros(n) if rest is None else np.asarray(rest, np.float64)
        if rest_q.shape != (n,) or not np.all(np.isfinite(rest_q)):
            raise ValueError(f"rest must be {n} finite joint values")
        for name, value in (
            ("position_tolerance", position_tolerance),
            ("orientation_tolerance", orientation_tolerance),
        ):
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")
        if not rest_weight >= 0:
            raise ValueError(f"rest_weight must be >= 0, got {rest_weight}")
        if iterations_per_restart < 1 or max_iterations < 1:
            raise ValueError("iterations_per_restart and max_iterations must be >= 1")
        return _Settings(
            active=active,
            max_deviation=deviation,
            rest=rest_q,
            rest_weight=rest_weight,
            tolerances=(position_tolerance, orientation_tolerance),
            iterations_per_restart=iterations_per_restart,
            max_iterations=max_iterations,
        )

    def solve(self, objectives, seed=None, *, timeout: float = 0.0, **options) -> IKResult:
        """Solves every problem in the batch.

        Args:
            objectives: one :class:`~pyroki_ros.objectives.Objective` or a sequence of them,
                all broadcastable to a common batch shape ``(*batch,)``.
            seed: (*batch, n_joints) or (n_joints,) start configuration; default the middle
                of the limits. Also the value of inactive joints.
            **options: active_joints (names; the others stay at the seed), max_deviation
                (solve-nearby: each joint within this of the seed), rest and rest_weight
                (a w |q - rest|^2 term that biases redundant robots towards ``rest``; problems
                it keeps from the tolerance are finished without it), position_tolerance
                (m, default 1e-3),
                orientation_tolerance (rad, default 1 degree), iterations_per_restart
                (default 15), max_iterations (per problem over all restarts, default 1000).
            timeout: wall-clock budget in s (0 = none). The first attempt from the seed always
                runs; the restarts of the problems it leaves unsolved then get the iterations
                that fit in the time left (estimated from the first attempt's cost per
                iteration), so a call ends near ``timeout`` unless one attempt alone is longer.
                ``IKResult.timed_out`` says whether the budget cut the restarts short.

        Returns:
            IKResult with numpy arrays of batch shape ``(*batch,)``.

        Raises:
            ValueError: unknown links or joints, NaN/inf targets or seeds, wrong shapes,
                negative max_deviation, an empty batch.
        """
        robot = self.robot
        if isinstance(objectives, obj.Objective):
            objectives = (objectives,)
        objectives = tuple(objectives)
        obj.validate(robot, objectives, check_values=False)  # values: checked once packed
        settings = self._cached_settings(options)
        n = robot.n_joints
        if seed is None:
            seed = self._center
        else:
            seed = np.asarray(seed, np.float64)
            if seed.ndim == 0 or seed.shape[-1] != n:
                raise ValueError(f"seed must have shape (*batch, {n}), got {seed.shape}")
            seed = self.into_limits(seed)  # NaN survives: checked below
        shapes = {seed.shape[:-1]} | {o.batch_shape for o in objectives}
        try:
            batch = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(
                "objectives and seed have batch shapes that do not broadcast: "
                f"{[o.batch_shape for o in objectives]} and {seed.shape[:-1]}"
            ) from None
        count = math.prod(batch)
        if count == 0:
            raise ValueError("empty batch: nothing to solve")

        columns = [seed]
        for o in objectives:
            columns += [o.target, o.axis, o.local_point, o.local_axis, o.weights]
        if batch != ():
            columns = [
                np.broadcast_to(c, (*batch, c.shape[-1])).reshape(count, -1) for c in columns
            ]
        params = np.concatenate(columns, axis=-1, dtype=self._dtype).reshape(count, -1)
        if not np.isfinite(params).all():
            what = "the seed" if not np.isfinite(params[:, :n]).all() else "an objective"
            raise ValueError(f"{what} contains NaN or infinite values")
        size = self._size(count)
        if size > count:
            params = np.concatenate([params, np.repeat(params[-1:], size - count, 0)])
        structure = tuple(_structure(o) for o in objectives)
        program = self.program(structure, size)

        first_settings = self._first_stage(settings, timeout > 0)
        columns = _answer_columns(n, len(objectives))
        start = time.perf_counter()
        out = _run(program, self._packed(first_settings, count), params)[:count]
        out, timed_out = self._second_stage(
            out, params, settings, first_settings, structure, start, timeout
        )
        return self._result(out, columns, batch, time.perf_counter() - start, timed_out)

    def _second_stage(
        self, out, params, settings, first_settings, structure, start: float, timeout: float
    ) -> tuple[np.ndarray, bool]:
        """After the first stage (``first_settings``): the problems it left unsolved get the
        rest of their iteration budget, as much of it as fits in what is left of ``timeout``
        (estimated from the first stage's cost per iteration). Returns the answer records
        and whether the time budget cut the restarts short."""
        columns = _answer_columns(self.robot.n_joints, len(structure))
        failed = np.flatnonzero(out[:, columns["success"].start] < 0.5)
        budget = settings.max_iterations - first_settings.max_iterations
        timed_out = False
        if len(failed) and budget > 0 and timeout > 0:
            elapsed = time.perf_counter() - start
            per_iteration = elapsed / max(float(out[:, columns["iterations"]].sum()), 1.0)
            affordable = int((timeout - elapsed) / per_iteration / len(failed))
            timed_out = affordable < budget
            budget = min(budget, affordable)
        if len(failed) and budget > 0:
            out = self._continue(out, params, failed, settings, structure, budget, columns)
        return out, timed_out

    def _continue(self, out, params, failed, settings, structure, budget, columns) -> np.ndarray:
        """Second stage for the problems ``failed`` left unsolved by the first: ``budget`` more
        iterations each, without the rest term (it pulls the optimum off the task by
        ~ w |q - rest| / sigma^2), starting from where they are unless a max_deviation box
        (centred on the seed) holds them. Keeps the better answer per problem."""
        n = self.robot.n_joints
        again = params[failed].copy()
        if not np.isfinite(settings.max_deviation).any():
            again[:, :n] = out[failed, :n]
        bucket = self._size(len(failed))
        again = np.concatenate([again, np.repeat(again[-1:], bucket - len(failed), 0)])
        stage = dataclasses.replace(settings, rest_weight=0.0, max_iterations=budget)
        program = self.program(structure, bucket)
        later = _run(program, stage.pack(len(failed), self._dtype), again)[: len(failed)].copy()
        out = out.copy()
        later[:, columns["iterations"]] += out[failed, columns["iterations"]]
        before = out[failed]
        # The first stage's cost includes the rest term: an unbiased answer replaces it.
        better = (
            (later[:, columns["success"].start] > 0.5)
            | (later[:, columns["cost"].start] <= before[:, columns["cost"].start])
            | (settings.rest_weight > 0)
        )
        out[failed] = np.where(better[:, None], later, before)
        out[failed[~better], columns["iterations"]] = later[~better, columns["iterations"]]
        return out

    def _result(
        self, out: np.ndarray, columns: dict, batch: tuple, seconds: float, timed_out=False
    ) -> IKResult:
        """IKResult from answer records (count, width), reshaped to ``batch``."""
        if batch == ():
            return self._one_result(out[0], columns, seconds, timed_out)
        out = np.asarray(out, np.float64)  # one conversion for every field
        field = lambda name: out[:, columns[name]].reshape(*batch, -1)
        scalar = lambda name: out[:, columns[name].start].reshape(batch)
        return IKResult(
            q=field("q"),  # wrapped and inside the limits (see _packed_solve)
            success=scalar("success") > 0.5,
            position_error=field("pos"),
            orientation_error=field("rot"),
            iterations=scalar("iterations").astype(np.int64),
            solve_seconds=seconds,
            cost=scalar("cost"),
            timed_out=timed_out,
        )

    def _one_result(
        self, record: np.ndarray, columns: dict, seconds: float, timed_out: bool = False
    ) -> IKResult:
        """IKResult of a single problem from its answer record (width,): one float64 array,
        the fields views of it (for one short record, numpy's per-call set-up is the cost)."""
        values = record.astype(np.float64)  # q wrapped and inside the limits (the program)
        return IKResult(
            q=values[columns["q"]],
            success=np.True_ if values.item(columns["success"].start) > 0.5 else np.False_,
            position_error=values[columns["pos"]],
            orientation_error=values[columns["rot"]],
            iterations=np.int64(values.item(columns["iterations"].start)),
            solve_seconds=seconds,
            cost=values[columns["cost"].start],
            timed_out=timed_out,
        )


class PoseSolver:
    """A prepared pose problem for one link: the low-overhead path for a stream of single
    targets (teleoperation, benchmarks). Everything but the target and the seed is checked
    and packed once, so a call is one small array copy and one compiled program call.

    Create with :meth:`IKSolver.pose_solver`.
    """

    def __init__(
        self,
        solver: IKSolver,
        link: str,
        reference: str | None,
        position_weight: float,
        orientation_weight: float,
        options: dict,
    ):
        template = obj.pose(
            link,
            np.array([1.0, 0, 0, 0, 0, 0, 0]),
            reference=reference,
            position_weight=position_weight,
            orientation_weight=orientation_weight,
        )
        obj.validate(solver.robot, (template,))
        self._solver = solver
        self._template = template
        self._options = options
        self._settings = settings = solver.settings(**options)
        # The program's flat input is [settings, seed, target, the template's other fields];
        # the settings of the first stage, without and with a time budget (see solve()).
        self._first = {timed: solver._first_stage(settings, timed) for timed in (False, True)}
        tail = [template.axis, template.local_point, template.local_axis, template.weights]
        self._inputs = {  # seed (default: the center) and target filled in per call
            timed: np.concatenate(
                [solver._packed(first, 1), np.zeros(solver.robot.n_joints + 7), *tail],
                dtype=solver._dtype,
            )
            for timed, first in self._first.items()
        }
        n = self._n = solver.robot.n_joints
        self._seed = slice(_Settings.size(n), _Settings.size(n) + n)
        self._target = slice(self._seed.stop, self._seed.stop + 7)
        for inputs in self._inputs.values():
            inputs[self._seed] = solver._center
        self._structure = (_structure(template),)
        self._program = solver.program(self._structure, 1)
        self._columns = _answer_columns(n, 1)
        self._success = self._columns["success"].start

    def __call__(self, target, seed=None, *, timeout: float = 0.0) -> IKResult:
        """Solves for ``target`` (7,) wxyz_xyz, from ``seed`` (n_joints,) (default: center),
        within ``timeout`` s (0 = none; as for :meth:`IKSolver.solve`).

        A batch of targets (*batch, 7) goes through :meth:`IKSolver.solve` instead.

        Raises:
            ValueError: NaN or infinite values, a zero quaternion.
        """
        shape = getattr(target, "shape", None) or np.shape(target)  # an array's is cheaper
        if shape != (7,) or (seed is not None and np.shape(seed) != (self._n,)):
            return self._solver.solve(
                obj.pose(
                    self._template.link,
                    target,
                    reference=self._template.reference,
                    position_weight=self._template.weights[0],
                    orientation_weight=self._template.weights[1],
                ),
                seed=seed,
                timeout=timeout,
                **self._options,
            )
        # Straight into the program's input: it normalises the quaternion, puts the seed
        # into the limits and flags NaN (checked below, off the path of a solved target).
        timed = timeout > 0
        packed = self._inputs[timed].copy()
        packed[self._target] = target
        if seed is not None:
            packed[self._seed] = seed
        start = time.perf_counter()
        out = np.asarray(self._program(packed))
        timed_out = False
        if out[0, self._success] < 0.5:  # restarts left, a rest bias, or invalid input
            self._check(packed)
            out, timed_out = self._solver._second_stage(
                out,
                packed[self._seed.start :].reshape(1, -1),
                self._settings,
                self._first[timed],
                self._structure,
                start,
                timeout,
            )
        seconds = time.perf_counter() - start
        return self._solver._one_result(out[0], self._columns, seconds, timed_out)

    def _check(self, packed: np.ndarray) -> None:
        problem = packed[self._seed.start : self._target.stop]
        if not np.isfinite(problem).all():
            raise ValueError("target or seed contain NaN or infinite values")
        if not np.linalg.norm(problem[self._n : self._n + 4]) > 1e-9:
            raise ValueError("target quaternion is zero")


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> Path:
    """Keeps compiled programs on disk (JAX's persistent cache), so that a new process
    reuses them instead of compiling again. Default: ``$XDG_CACHE_HOME/pyroki_ros/xla``."""
    if directory is None:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        directory = Path(base) / "pyroki_ros" / "xla"
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def residual_and_jacobian(robot: Robot, objectives, q) -> obj.Evaluation:
    """Weighted residual (*batch, m), its Jacobian (*batch, m, n), per-objective errors."""
    if isinstance(objectives, obj.Objective):
        objectives = (objectives,)
    obj.validate(robot, tuple(objectives))
    return obj.evaluate(robot, q, tuple(objectives))
