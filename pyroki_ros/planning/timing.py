"""Time parameterisation: knot spacing for a joint path within velocity and acceleration limits.

The path's knots are spaced uniformly in time by the smallest step ``dt`` for which the
finite-difference velocities and accelerations stay inside the (scaled) limits, the way the
path was optimised (smoothness per knot step). The trajectory rests at both ends: velocity
zero at the first and last knot, and the acceleration there is the one-sided difference of a
path that holds still before and after. Host-side numpy, float64.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class TimedPath:
    """A path with times (numpy, float64; T knots, n joints).

    Attributes:
        times: (T,) s from the start, strictly increasing, times[0] = 0.
        positions: (T, n) rad or m; positions[0] is the start state.
        velocities: (T, n) per s, zero at both ends.
        accelerations: (T, n) per s^2.
    """

    times: np.ndarray
    positions: np.ndarray
    velocities: np.ndarray
    accelerations: np.ndarray

    @property
    def duration(self) -> float:
        return float(self.times[-1])


def _finite_limits(limits: np.ndarray, name: str, n: int) -> np.ndarray:
    limits = np.asarray(limits, np.float64)
    if limits.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},), got {limits.shape}")
    if np.isnan(limits).any() or (limits <= 0).any():
        raise ValueError(f"{name} must be > 0 (inf = unlimited)")
    return limits


def parameterize(
    path: np.ndarray,
    velocity_limits: np.ndarray,
    acceleration_limits: np.ndarray,
    *,
    duration: float = 0.0,
    min_step: float = 1e-3,
) -> TimedPath:
    """Times a path (T, n) so that every joint respects its limits.

    Args:
        path: (T, n) knots, T >= 2.
        velocity_limits: (n,) > 0, inf where unlimited (already scaled).
        acceleration_limits: (n,) > 0, inf where unlimited (already scaled).
        duration: requested total time (s); the result takes the larger of this and the
            shortest duration within the limits. 0: the shortest.
        min_step: smallest knot spacing (s), so a path that does not move still has
            increasing times.

    Returns:
        TimedPath with uniform knot spacing.
    """
    path = np.asarray(path, np.float64)
    if path.ndim != 2 or path.shape[0] < 2:
        raise ValueError(f"path must have shape (T >= 2, n), got {path.shape}")
    if not np.isfinite(path).all():
        raise ValueError("path contains NaN or infinite values")
    n = path.shape[1]
    v_max = _finite_limits(velocity_limits, "velocity_limits", n)
    a_max = _finite_limits(acceleration_limits, "acceleration_limits", n)
    if not (np.isfinite(duration) and duration >= 0):
        raise ValueError(f"duration must be finite and >= 0, got {duration}")

    held = np.concatenate([path[:1], path, path[-1:]])  # at rest before and after
    step = np.abs(np.diff(path, axis=0))  # (T - 1, n) per knot step
    bend = np.abs(held[2:] - 2 * held[1:-1] + held[:-2])  # (T, n) per knot step^2
    dt = max(
        min_step,
        float(np.max(step / v_max)),
        float(np.sqrt(np.max(bend / a_max))),
        duration / (path.shape[0] - 1),
    )
    velocities = np.zeros_like(path)
    velocities[1:-1] = (path[2:] - path[:-2]) / (2 * dt)
    accelerations = (held[2:] - 2 * held[1:-1] + held[:-2]) / dt**2
    times = dt * np.arange(path.shape[0], dtype=np.float64)
    return TimedPath(times, path.copy(), velocities, accelerations)
