"""IK settings and formats: the per-call settings and their flat packing, the column layout of
answer records, the objective structure key, batch buckets, defaults and the result type."""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import objectives as obj
from pyroki_ros.model.limits import JointLimits

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
    # host only, not packed: the per-solve limits (None: the robot's) and the default seed
    limits: JointLimits | None = None
    center: np.ndarray | None = None

    _VECTORS = ("active", "max_deviation", "rest", "lower", "upper")
    _VECTORS += ("sample_lower", "sample_upper", "wraps")

    def pack(self, n_valid: int, dtype) -> np.ndarray:
        scalars = [
            self.rest_weight,
            *self.tolerances,
            self.iterations_per_restart,
            self.max_iterations,
            self.first_restart,
            n_valid,  # last: _sharded_solve rewrites it
        ]
        vectors = [getattr(self, name) for name in self._VECTORS]
        return np.concatenate([*vectors, np.asarray(scalars, np.float64)], dtype=dtype)

    @staticmethod
    def size(n: int) -> int:
        """Length of the packed vector for n joints."""
        return len(_Settings._VECTORS) * n + 7

    @staticmethod
    def unpack(vector: jax.Array, n: int) -> tuple[_Settings, jax.Array]:
        rows = len(_Settings._VECTORS)
        fields = {name: vector[i * n : (i + 1) * n] for i, name in enumerate(_Settings._VECTORS)}
        scalars = vector[rows * n :]
        settings = _Settings(
            **fields | {"active": fields["active"] > 0.5, "wraps": fields["wraps"] > 0.5},
            rest_weight=scalars[0],
            tolerances=scalars[1:3],
            iterations_per_restart=scalars[3].astype(jnp.int32),
            max_iterations=scalars[4].astype(jnp.int32),
            first_restart=scalars[5].astype(jnp.int32),
        )
        return settings, scalars[6].astype(jnp.int32)

    def take(self, joints: np.ndarray) -> _Settings:
        """The settings of the joints ``joints`` (indices) only."""
        return dataclasses.replace(self, **{k: getattr(self, k)[joints] for k in self._VECTORS})


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


_FIELDS = (("target", 7), ("axis", 3), ("local_point", 3), ("local_axis", 3), ("weights", 2))
_WIDTH = sum(size for _, size in _FIELDS)


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
