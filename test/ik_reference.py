"""Independent float64 geometry for the IK tests (numpy only, on top of test/reference_fk.py).

Nothing here imports pyroki_ros or jaxlie: targets are generated and solutions are checked
with the colleague's URDF-spec forward kinematics and the formulas below, so a bug in the
solver's kinematics or residuals cannot hide itself.
"""

from __future__ import annotations

import numpy as np
from reference_fk import (
    actuated_joint_limits,
    actuated_joint_names,
    parse_urdf,
    quat_wxyz_to_matrix,
    reference_fk,
    rotation_angle,
    so3_log,
)

__all__ = [
    "RefRobot",
    "actuated_joint_limits",
    "angle_between",
    "line_distance",
    "matrix_to_wxyz",
    "pose7",
    "quat_wxyz_to_matrix",
    "rotation_angle",
    "so3_log",
    "unit",
]


def matrix_to_wxyz(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a rotation matrix (Shepperd's method)."""
    m = np.asarray(rot, np.float64)
    trace = np.trace(m)
    candidates = np.array([trace, m[0, 0], m[1, 1], m[2, 2]])
    i = int(np.argmax(candidates))
    if i == 0:
        s = 2.0 * np.sqrt(1.0 + trace)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif i == 1:
        s = 2.0 * np.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2])
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif i == 2:
        s = 2.0 * np.sqrt(1.0 - m[0, 0] + m[1, 1] - m[2, 2])
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = 2.0 * np.sqrt(1.0 - m[0, 0] - m[1, 1] + m[2, 2])
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.asarray(q)
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def pose7(transform: np.ndarray) -> np.ndarray:
    """(…, 4, 4) homogeneous transforms -> (…, 7) wxyz_xyz."""
    t = np.asarray(transform, np.float64)
    flat = t.reshape(-1, 4, 4)
    out = np.stack([np.concatenate([matrix_to_wxyz(m[:3, :3]), m[:3, 3]]) for m in flat])
    return out.reshape(*t.shape[:-2], 7)


def unit(v) -> np.ndarray:
    v = np.asarray(v, np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def angle_between(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, -1))


def line_distance(p, p0, direction) -> np.ndarray:
    d = unit(direction)
    delta = np.asarray(p, np.float64) - p0
    return np.linalg.norm(delta - np.sum(delta * d, -1, keepdims=True) * d, axis=-1)


class RefRobot:
    """A parsed URDF with batched reference FK: ``poses(q)[link]`` is (*batch, 4, 4)."""

    def __init__(self, urdf):
        self.model = parse_urdf(urdf)
        self.joint_names = actuated_joint_names(self.model)
        self.lower, self.upper = actuated_joint_limits(self.model)

    @property
    def n(self) -> int:
        return len(self.joint_names)

    def poses(self, q) -> dict[str, np.ndarray]:
        q = np.asarray(q, np.float64)
        flat = q.reshape(-1, q.shape[-1])
        per = [reference_fk(self.model, x) for x in flat]
        return {
            link: np.stack([p[link] for p in per]).reshape(*q.shape[:-1], 4, 4) for link in per[0]
        }

    def relative(self, q, link: str, reference: str | None) -> np.ndarray:
        """inv(T_reference) @ T_link, (*batch, 4, 4); the root frame when reference is None."""
        p = self.poses(q)
        if reference is None:
            return p[link]
        return np.linalg.inv(p[reference]) @ p[link]

    def random(self, rng: np.random.Generator, count: int, margin: float = 0.05) -> np.ndarray:
        """Uniform configurations inside the limits, ``margin`` (fraction of the span) away."""
        span = self.upper - self.lower
        u = rng.uniform(margin, 1.0 - margin, size=(count, self.n))
        return self.lower + u * span
