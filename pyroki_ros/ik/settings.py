"""IK settings and formats: the per-call settings (their checks, and the layout of the flat
vector they travel in), the column layout of answer records, the objective structure key,
batch buckets, defaults, and the result type with its construction from answer records."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import objectives as obj
from pyroki_ros.model.limits import JointLimits
from pyroki_ros.model.robot import Robot

Objectives = tuple[obj.Objective, ...]

BUCKETS = (1, 16, 128, 1024, 8192, 65536)
DEFAULT_POSITION_TOLERANCE = 1e-3  # m
DEFAULT_ORIENTATION_TOLERANCE = math.radians(1.0)  # rad
DEFAULT_ITERATIONS_PER_RESTART = 15  # LM iterations of one attempt (bench/tune_ik.py)


@dataclasses.dataclass(frozen=True, slots=True)  # slots: cheaper to build, per solve
class IKResult:
    """Solutions for a batch of ``(*batch,)`` problems (numpy arrays)."""

    q: np.ndarray  # (*batch, n_joints) inside the solve's limits, robot.joint_names order
    success: np.ndarray  # (*batch,) every objective within tolerance (and feasible, if checked)
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
    The vector's layout: the (n,) fields of ``_VECTORS`` in that order, then the scalars of
    ``_SCALARS`` (see :func:`_layout`).
    """

    active: jax.Array  # (n,) bool
    max_deviation: jax.Array  # (n,) inf = unlimited
    rest: jax.Array  # (n,)
    # The joint limits of this solve (per-solve limits travel here, not as program constants,
    # so narrowing them never recompiles): (n,) each, rounded inwards to the program's dtype,
    # +-inf for a bound turned off; the finite box restart points are drawn from; wrapping.
    lower: jax.Array
    upper: jax.Array
    sample_lower: jax.Array
    sample_upper: jax.Array
    wraps: jax.Array  # (n,) bool
    rest_weight: jax.Array  # ()
    tolerances: jax.Array  # (2,) position m, orientation rad
    iterations_per_restart: jax.Array  # () int
    max_iterations: jax.Array  # () int, per problem over all restarts
    first_restart: jax.Array  # () int, index of the first attempt (0: from the seed)
    # host only, not packed: the solve's limits (the robot's unless narrowed) and the default
    # seed (the middle of them)
    limits: JointLimits | None = None
    center: np.ndarray | None = None

    def pack(self, n_valid: int, dtype) -> np.ndarray:
        """The flat vector (:func:`size`,) in ``dtype``, for ``n_valid`` real problems."""
        values = [getattr(self, name) for name in _VECTORS + _SCALARS[:-1]] + [n_valid]
        return np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in values], dtype=dtype)

    @staticmethod
    def size(n: int) -> int:
        """Length of the packed vector for n joints (the count of real problems its last entry)."""
        return _layout(n)["n_valid"].stop

    @staticmethod
    def unpack(vector: jax.Array, n: int) -> tuple[_Settings, jax.Array]:
        """Traced settings and the count of real problems from a packed ``vector``."""
        field = {name: vector[where] for name, where in _layout(n).items()}
        field["active"], field["wraps"] = field["active"] > 0.5, field["wraps"] > 0.5
        field["rest_weight"] = field["rest_weight"][0]
        for name in ("iterations_per_restart", "max_iterations", "first_restart", "n_valid"):
            field[name] = field[name][0].astype(jnp.int32)
        n_valid = field.pop("n_valid")
        return _Settings(**field), n_valid

    def take(self, joints: np.ndarray) -> _Settings:
        """The settings of the joints ``joints`` (indices) only."""
        return dataclasses.replace(self, **{k: getattr(self, k)[joints] for k in _VECTORS})


# The packed settings vector: these (n,) fields, then these scalars, one number each but the
# two tolerances (n_valid last: _sharded_solve rewrites it per device).
_VECTORS = ("active", "max_deviation", "rest", "lower", "upper")
_VECTORS += ("sample_lower", "sample_upper", "wraps")
_SCALARS = ("rest_weight", "tolerances", "iterations_per_restart", "max_iterations")
_SCALARS += ("first_restart", "n_valid")


@functools.cache
def _layout(n: int) -> dict[str, slice]:
    """Where each field lies in the packed settings vector for n joints."""
    return _slices(**dict.fromkeys(_VECTORS, n), **dict.fromkeys(_SCALARS, 1) | {"tolerances": 2})


def checked_settings(
    robot: Robot,
    dtype: np.dtype,
    *,
    active_joints=None,
    max_deviation=None,
    rest=None,
    rest_weight: float = 0.0,
    position_tolerance: float = DEFAULT_POSITION_TOLERANCE,
    orientation_tolerance: float = DEFAULT_ORIENTATION_TOLERANCE,
    iterations_per_restart: int = DEFAULT_ITERATIONS_PER_RESTART,
    max_iterations: int = 1000,
    limits: JointLimits | None = None,
) -> _Settings:
    """Checks and gathers the per-call options of :meth:`IKSolver.solve` for ``robot`` and a
    program of ``dtype`` (ValueError / TypeError on a bad one)."""
    n = robot.n_joints
    active = robot.active_mask(active_joints)
    deviation = np.asarray(np.inf if max_deviation is None else max_deviation, np.float64)
    if deviation.shape not in ((), (n,)):
        raise ValueError(f"max_deviation must be one number or {n} numbers")
    deviation = np.broadcast_to(deviation, (n,)).copy()
    if not np.all(deviation >= 0):  # NaN fails too
        raise ValueError("max_deviation must be >= 0 (per joint or one number)")
    rest_q = np.zeros(n) if rest is None else np.asarray(rest, np.float64)
    if rest_q.shape != (n,) or not np.all(np.isfinite(rest_q)):
        raise ValueError(f"rest must be {n} finite joint values")
    tolerances = (position_tolerance, orientation_tolerance)
    for name, value in zip(("position_tolerance", "orientation_tolerance"), tolerances):
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
        **_limit_fields(robot, dtype, limits),
        rest_weight=rest_weight,
        tolerances=tolerances,
        iterations_per_restart=iterations_per_restart,
        max_iterations=max_iterations,
        first_restart=0,
    )


def _limit_fields(robot: Robot, dtype: np.dtype, limits: JointLimits | None) -> dict:
    """The settings' limit fields for per-solve ``limits`` (None: the robot's), checked:
    TypeError / ValueError unless a :class:`JointLimits` for the robot's joints whose finite
    bounds lie inside the URDF's (as ``robot.limits.narrowed(...)`` makes them)."""
    urdf = robot.limits
    if limits is not None and not isinstance(limits, JointLimits):
        raise TypeError(
            "limits must be a JointLimits (robot.limits.narrowed(lower, upper)), "
            f"got {type(limits).__name__}"
        )
    narrowed = limits is not None and limits != urdf
    if narrowed:
        limits.check_within(urdf, "limits", robot.joint_names)
    effective = limits if narrowed else urdf
    # Rounded inwards in the program's dtype, held as float64: packing casts them exactly.
    lower, upper = (x.astype(np.float64) for x in effective.inner(dtype))
    # Restart points: inside the finite box; a bound turned off samples up to the URDF's.
    finite_low, finite_high = np.isfinite(lower), np.isfinite(upper)
    sample_upper = np.where(
        finite_high, upper, np.maximum(urdf.upper, np.where(finite_low, lower, -np.inf))
    )
    sample_lower = np.where(finite_low, lower, np.minimum(urdf.lower, sample_upper))
    return {
        "lower": lower,
        "upper": upper,
        "sample_lower": sample_lower,
        "sample_upper": sample_upper,
        "wraps": effective.wraps,
        "limits": effective,
        "center": (sample_lower + sample_upper) / 2 if narrowed else urdf.center(),
    }


@functools.cache
def _answer_columns(n: int, k: int) -> dict[str, slice]:
    """Columns of an answer record (the program's output rows, one per problem): the best or
    converged point q, success, position / orientation error per objective, iterations, cost."""
    return _slices(q=n, success=1, pos=k, rot=k, iterations=1, cost=1)


def _slices(**sizes: int) -> dict[str, slice]:
    """Consecutive slices of the given sizes, by name."""
    ends = itertools.accumulate(sizes.values())
    return {name: slice(end - size, end) for (name, size), end in zip(sizes.items(), ends)}


# One objective's columns of an input row (after the seed's n), 18 in all.
_FIELDS = _slices(target=7, axis=3, local_point=3, local_axis=3, weights=2)
_WIDTH = _FIELDS["weights"].stop


def _result(
    out: np.ndarray, columns: dict, batch: tuple, seconds: float, timed_out=False
) -> IKResult:
    """IKResult from answer records (count, width), reshaped to ``batch``."""
    if batch == ():
        return _one_result(out[0], columns, seconds, timed_out)
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
    record: np.ndarray, columns: dict, seconds: float, timed_out: bool = False
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


def structure(objective: obj.Objective) -> tuple:
    """What a program is compiled for: (kind, link, reference, align_axis) of an objective.
    Objectives with equal keys share compiled programs (:meth:`IKSolver.forget` takes a tuple
    of these keys, one per objective)."""
    return (objective.kind, objective.link, objective.reference, objective.align_axis)


def bucket(n: int) -> int:
    """The batch-size bucket for ``n`` problems: the smallest of :data:`BUCKETS` that holds
    them, past the largest a multiple of it. Batches in one bucket share a compiled program."""
    for size in BUCKETS:
        if n <= size:
            return size
    return int(math.ceil(n / BUCKETS[-1]) * BUCKETS[-1])
