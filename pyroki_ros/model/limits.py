"""Joint position limits: the one rule for clipping, wrapping and checking configurations.

A :class:`JointLimits` holds the limits of a robot's actuated joints as written in the URDF,
in float64, and which joints are continuous (unbounded: the angle wraps to [-pi, pi), and their
limits read [-pi, pi]). Every place that puts a configuration inside the limits or checks it
calls this module:

* :meth:`JointLimits.clip` wraps continuous joints and clips the others. numpy in (the host:
  seeds, measured states, answers) clips to the exact float64 limits; a JAX array in (inside a
  program) clips to :meth:`JointLimits.inner`, the limits rounded *inwards* to the array's dtype,
  so that a float32 answer widened to float64 never lies past the URDF's limit.
* :meth:`JointLimits.outside` says which joints of a configuration lie past their limits,
  with a tolerance (:data:`MEASURED_SLACK` for measured states).
* :meth:`JointLimits.narrowed` gives per-solve limits (Klampt's custom joint limits): a
  narrower box for some joints, a bound turned off (infinite) for others, NaN keeps one.

It is hashable (tuples inside), so a :class:`~pyroki_ros.model.robot.Robot` keeps it as static
metadata: the limits are constants of a compiled program, and narrowed limits for one solve are
passed to the solver as arrays instead (no recompile).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

# rad or m: a measured state (joint encoders, a controller's last command) may sit this far past
# a limit and is still taken as inside it (and clipped); farther is an error.
MEASURED_SLACK = 1e-3


@dataclasses.dataclass(frozen=True)
class JointLimits:
    """Position limits of ``n`` actuated joints, float64 as written in the URDF.

    Attributes:
        bounds: (n,) pairs (lower, upper), rad or m; continuous joints read (-pi, pi).
        continuous: (n,) whether the joint is continuous (unbounded, its angle wraps).
        lower, upper: (n,) float64 numpy views of ``bounds``, and ``wraps`` (n,) bool of
            ``continuous``: made once, read-only (a request checks its seed with them).
    """

    bounds: tuple[tuple[float, float], ...]
    continuous: tuple[bool, ...]
    lower: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)
    upper: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)
    wraps: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        lower, upper = np.array(self.bounds, np.float64).reshape(-1, 2).T.copy()
        wraps = np.array(self.continuous, bool)
        for name, array in (("lower", lower), ("upper", upper), ("wraps", wraps)):
            array.flags.writeable = False
            object.__setattr__(self, name, array)

    @staticmethod
    def create(
        lower: Sequence[float], upper: Sequence[float], continuous: Sequence[bool]
    ) -> JointLimits:
        """From (n,) lower and upper bounds and the continuous flags; a continuous joint's bounds
        are set to [-pi, pi] whatever is given."""
        lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        flags = tuple(bool(c) for c in continuous)
        if not (lower.shape == upper.shape == (len(flags),)):
            raise ValueError(
                f"limits: lower {lower.shape}, upper {upper.shape}, {len(flags)} joints"
            )
        lower, upper = np.where(flags, -np.pi, lower), np.where(flags, np.pi, upper)
        if np.any(~np.isfinite(lower)) or np.any(~np.isfinite(upper)) or np.any(lower > upper):
            raise ValueError("limits: every lower bound must be finite and <= its upper bound")
        return JointLimits(tuple(zip(lower.tolist(), upper.tolist())), flags)

    # --- views ---------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return len(self.bounds)

    def center(self) -> np.ndarray:
        """(n,) the middle of each joint's range, float64."""
        return (self.lower + self.upper) / 2

    def inner(self, dtype) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper), (n,) each, in ``dtype``, rounded inwards: a value inside them stays
        inside the exact limits when widened to float64."""
        return _inner(self, np.dtype(dtype).name)

    def select(self, joints: Sequence[int]) -> JointLimits:
        """The limits of the joints ``joints`` (indices), in that order."""
        return JointLimits(
            tuple(self.bounds[i] for i in joints), tuple(self.continuous[i] for i in joints)
        )

    # --- the rule ------------------------------------------------------------------------------

    def clip(self, q):
        """``q`` (*batch, n) inside the limits: continuous joints wrapped to [-pi, pi), the others
        clipped. numpy in: float64 against the exact limits; a JAX array: in its dtype against
        :meth:`inner` (a float32 wrap can land on -pi rounded outwards, so wrapped joints are
        clipped too)."""
        if isinstance(q, jax.Array | jax.core.Tracer):
            return wrap_or_clip(q, *self.inner(q.dtype), self.wraps)
        q = np.asarray(q, np.float64)
        clipped = np.minimum(np.maximum(q, self.lower), self.upper)
        if not self.wraps.any():
            return clipped
        return np.where(self.wraps, np.mod(q + np.pi, 2 * np.pi) - np.pi, clipped)

    def outside(self, q, tolerance: float = 0.0) -> np.ndarray:
        """(*batch, n) bool: joints of ``q`` more than ``tolerance`` past a limit (continuous
        joints never are; NaN is)."""
        q = np.asarray(q, np.float64)
        inside = (q >= self.lower - tolerance) & (q <= self.upper + tolerance)
        return ~inside & ~self.wraps

    def random(
        self, key: jax.Array, shape: tuple[int, ...] = (), dtype=jnp.float32, margin: float = 0.0
    ):
        """Uniform configurations (*shape, n) inside the limits (``margin``: a fraction of each
        range kept clear at both ends)."""
        low, high = (jnp.asarray(x, dtype) for x in self.inner(dtype))
        span = high - low
        u = jax.random.uniform(key, (*shape, self.n), dtype)
        return low + margin * span + u * (1 - 2 * margin) * span

    def narrowed(
        self, lower=None, upper=None, *, name: str = "limits", joint_names: Sequence[str] = ()
    ) -> JointLimits:
        """Per-solve limits (Klampt's custom joint limits): (n,) ``lower`` / ``upper``, each
        entry NaN to keep the URDF's bound, a finite value inside the URDF's limits to narrow
        it, or -inf / +inf to turn that bound off for this solve (the caller asks for answers
        past the URDF's limit). A joint with a bound given is no longer continuous.
        ValueError otherwise, naming the joint (see :meth:`check_within`)."""
        new_low, new_high = self.lower.copy(), self.upper.copy()
        flags = np.array(self.continuous, bool)
        for given, into, off in ((lower, new_low, -np.inf), (upper, new_high, np.inf)):
            if given is None:
                continue
            given = np.asarray(given, np.float64)
            if given.shape != (self.n,):
                raise ValueError(f"{name}: expected {self.n} values, got shape {given.shape}")
            if np.any(given == -off):
                raise ValueError(f"{name}: a bound of {-off} would leave nothing")
            set_ = ~np.isnan(given)
            into[set_] = given[set_]
            flags[set_] = False
        narrowed = JointLimits(
            tuple(zip(new_low.tolist(), new_high.tolist())), tuple(flags.tolist())
        )
        narrowed.check_within(self, name, joint_names)
        return narrowed

    def check_within(self, outer: JointLimits, name: str, joint_names: Sequence[str] = ()) -> None:
        """ValueError naming (by ``joint_names``, else by index) the first joint whose range is
        empty (or NaN) or reaches past ``outer``'s; ``name``: the input's, for the message. A
        bound of -inf / +inf is turned off (the caller asks for answers past ``outer``), not
        past it; a joint cannot wrap unless it wraps in ``outer``."""
        if self.n != outer.n:
            raise ValueError(f"{name}: expected {outer.n} joints, got {self.n}")
        low, high = self.lower, self.upper
        bad = np.isnan(low) | np.isnan(high) | (low > high) | (low == np.inf) | (high == -np.inf)
        bad |= self.wraps & ~outer.wraps
        bad |= np.isfinite(low) & (low < outer.lower - 1e-12)
        bad |= np.isfinite(high) & (high > outer.upper + 1e-12)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            joint = f"'{joint_names[i]}'" if joint_names else str(i)
            raise ValueError(
                f"{name}: joint {joint} [{low[i]:.6g}, {high[i]:.6g}] is empty or not inside its "
                f"limits [{outer.lower[i]:.6g}, {outer.upper[i]:.6g}] (turn a bound off with "
                "-inf / +inf)"
            )


def wrap_or_clip(q, lower, upper, wraps):
    """JAX: ``q`` (*batch, n) with the joints ``wraps`` wrapped to [-pi, pi), then every joint
    clipped into [lower, upper] (a float32 wrap can land on -pi rounded outwards)."""
    return jnp.clip(jnp.where(wraps, jnp.mod(q + jnp.pi, 2 * jnp.pi) - jnp.pi, q), lower, upper)


@functools.cache
def _inner(limits: JointLimits, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    lower, upper = limits.lower, limits.upper
    low, high = lower.astype(dtype), upper.astype(dtype)
    low = np.where(low < lower, np.nextafter(low, np.inf, dtype=low.dtype), low)
    high = np.where(high > upper, np.nextafter(high, -np.inf, dtype=high.dtype), high)
    low.flags.writeable = high.flags.writeable = False
    return low, high
