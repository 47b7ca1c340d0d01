"""Batched float64 counterparts of the independent references (numpy only: no pyroki_ros, no
JAX, no PyYAML), for checks of many configurations at once: the MotionBenchMaker checker
(test/mbm_check.py) and the GPU report's verification (bench/gpu_report.py).

* :class:`Chain`: forward kinematics and link Jacobians of a URDF tree from
  :mod:`reference_fk`'s parse, the same conventions, one Rodrigues rotation per joint for a
  whole batch (checked against :func:`reference_fk.reference_fk` and its finite-difference
  Jacobian in test_mbm_check.py);
* :func:`box_signed_distance`, :func:`cylinder_signed_distance`: exact signed distances of
  many points to oriented boxes and finite cylinders (checked against brute-force sampling of
  the surfaces in test_mbm_check.py).
"""

from __future__ import annotations

import numpy as np
from reference_fk import (
    MOVABLE,
    UrdfLike,
    actuated_joint_limits,
    actuated_joint_names,
    joint_origin,
    parse_urdf,
    skew,
    topological_links,
)


class Chain:
    """Batched float64 FK and link Jacobians of a URDF tree; configurations are its actuated
    joints in URDF order (:func:`reference_fk.actuated_joint_names`)."""

    def __init__(self, urdf: UrdfLike):
        self.model = parse_urdf(urdf)
        self.joint_names = tuple(actuated_joint_names(self.model))
        lower, upper = actuated_joint_limits(self.model)
        self.lower, self.upper = np.asarray(lower), np.asarray(upper)
        self.links = tuple(topological_links(self.model))
        by_child = self.model.joint_by_child
        index = {n: i for i, n in enumerate(self.joint_names)}
        by_name = self.model.joint_by_name
        self._steps = []  # (link, parent, origin 4x4, type, axis, column, multiplier, offset)
        for link in self.links[1:]:
            j = by_child[link]
            column, mult, off = -1, 1.0, 0.0
            if j.type in MOVABLE:
                source = j
                while source.mimic is not None:  # resolve mimic chains to an actuated joint
                    m = source.mimic  # v = mult * (m1 * v_src + o1) + off
                    mult, off = mult * m[1], off + mult * m[2]
                    source = by_name[m[0]]
                column = index[source.name]
            self._steps.append((link, j.parent, joint_origin(j), j.type, j.axis, column, mult, off))

    def full(self, q: np.ndarray) -> np.ndarray:
        """(..., n) actuated values (a subclass may fill in joints it is not given)."""
        q = np.asarray(q, np.float64)
        if q.shape[-1] != len(self.joint_names):
            raise ValueError(
                f"configurations need {len(self.joint_names)} values, got {q.shape[-1]}"
            )
        return q

    def _ancestors(self, link: str) -> set[str]:
        """``link`` and the links between it and the root (the root excepted)."""
        out, by_child = set(), self.model.joint_by_child
        while link in by_child:
            out.add(link)
            link = by_child[link].parent
        return out

    def poses(self, q: np.ndarray, links=None) -> dict[str, np.ndarray]:
        """{link: (B, 4, 4)} root-frame poses for configurations ``q`` (B, n): every link, or
        with ``links`` only those and the links on their way from the root."""
        q = self.full(np.atleast_2d(q))
        batch = q.shape[0]
        wanted = None if links is None else set().union(*(self._ancestors(k) for k in links))
        out = {self.links[0]: np.broadcast_to(np.eye(4), (batch, 4, 4))}
        for link, parent, origin, jtype, axis, column, mult, off in self._steps:
            if wanted is not None and link not in wanted:
                continue
            t = out[parent] @ origin
            if column >= 0:
                value = mult * q[:, column] + off
                motion = np.broadcast_to(np.eye(4), (batch, 4, 4)).copy()
                if jtype == "prismatic":
                    motion[:, :3, 3] = value[:, None] * axis
                else:
                    k = skew(axis)
                    s, c = np.sin(value)[:, None, None], np.cos(value)[:, None, None]
                    motion[:, :3, :3] = np.eye(3) + s * k + (1.0 - c) * (k @ k)
                t = t @ motion
            out[link] = t
        return out

    def jacobian(self, q: np.ndarray, link: str) -> tuple[np.ndarray, np.ndarray]:
        """(pose (B, 4, 4), geometric Jacobian (B, 6, n)) of ``link``: rows linear velocity
        of the link origin then angular velocity, root frame."""
        q = self.full(np.atleast_2d(q))
        poses = self.poses(q, [link])
        target = poses[link]
        jac = np.zeros((q.shape[0], 6, len(self.joint_names)))
        ancestors = self._ancestors(link)
        for child, parent, origin, jtype, axis, column, mult, _ in self._steps:
            if column < 0 or child not in ancestors:
                continue
            frame = poses[parent] @ origin  # joint frame; its axis is unchanged by the motion
            z = frame[:, :3, :3] @ axis
            if jtype == "prismatic":
                jac[:, :3, column] += mult * z
            else:
                jac[:, :3, column] += mult * np.cross(z, target[:, :3, 3] - frame[:, :3, 3])
                jac[:, 3:, column] += mult * z
        return target, jac


def box_signed_distance(points, rot, pos, half) -> np.ndarray:
    """(..., Nb) exact signed distance of ``points`` (..., 3) to oriented boxes ``rot``
    (Nb, 3, 3), ``pos`` (Nb, 3), ``half`` (Nb, 3) half extents; negative inside."""
    # Box frame: p_local = R^T (p - c).
    local = np.einsum("nji,...nj->...ni", rot, np.asarray(points)[..., None, :] - pos)
    excess = np.abs(local) - half  # > 0 along the axes where the point is outside the slab
    outside = np.linalg.norm(np.maximum(excess, 0.0), axis=-1)
    inside = np.minimum(np.max(excess, axis=-1), 0.0)  # minus the depth to the nearest face
    return outside + inside


def cylinder_signed_distance(points, rot, pos, radius, half_height) -> np.ndarray:
    """(..., Nc) exact signed distance of ``points`` (..., 3) to finite cylinders along
    their local z: ``rot`` (Nc, 3, 3), ``pos`` (Nc, 3), ``radius`` (Nc,), ``half_height``
    (Nc,); negative inside. Flat caps with sharp rims (not a capsule)."""
    local = np.einsum("nji,...nj->...ni", rot, np.asarray(points)[..., None, :] - pos)
    radial = np.hypot(local[..., 0], local[..., 1]) - radius
    axial = np.abs(local[..., 2]) - half_height
    outside = np.hypot(np.maximum(radial, 0.0), np.maximum(axial, 0.0))
    inside = np.minimum(np.maximum(radial, axial), 0.0)
    return outside + inside
