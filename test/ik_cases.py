"""IK objective cases shared by the IK tests: how to build each kind from a reachable
configuration, and the independent float64 geometry (errors and residual rows) to check it.

``Spec.objective`` is the only place that touches pyroki_ros (to construct the objective);
``Spec.errors`` and ``Spec.residual`` use numpy and test/reference_fk.py only.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from ik_reference import RefRobot, angle_between, line_distance, pose7, so3_log, unit

from pyroki_ros import objectives as O


@dataclasses.dataclass(frozen=True)
class Spec:
    """One objective: ``kind`` on ``link`` relative to ``reference`` (None = root link).

    local_point / local_axis are fixed on the link; ``set_axis`` is the plane normal or line
    direction (reference frame); ``align`` adds the axis alignment to plane / line.
    """

    kind: str
    link: str
    reference: str | None = None
    local_point: tuple = (0.0, 0.0, 0.0)
    local_axis: tuple = (0.0, 0.0, 1.0)
    set_axis: tuple = (0.0, 0.0, 1.0)
    align: bool = False
    weights: tuple = (1.0, 0.1)

    @property
    def name(self) -> str:
        extra = "+axis" if self.align else ""
        ref = f"@{self.reference}" if self.reference else ""
        return f"{self.kind}{extra}({self.link}{ref})"

    @property
    def constrains_position(self) -> bool:
        return self.kind not in ("orientation", "axis")

    @property
    def constrains_orientation(self) -> bool:
        return self.kind in ("pose", "orientation", "hinge", "axis") or self.align

    # --- targets ----------------------------------------------------------------------

    def targets(self, transform: np.ndarray, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Targets met exactly by the frame ``transform`` (*batch, 4, 4) of the link in the
        reference frame. Plane / line points are moved along the plane / line at random, so
        the target point itself is not where the link point ends up."""
        rot, trans = transform[..., :3, :3], transform[..., :3, 3]
        point = np.einsum("...ij,j->...i", rot, np.asarray(self.local_point)) + trans
        axis = np.einsum("...ij,j->...i", rot, unit(self.local_axis))
        out = {"pose": pose7(transform), "point": point, "axis": axis}
        n = unit(self.set_axis)
        if self.kind == "plane":
            slide = rng.normal(size=point.shape) * 0.3
            out["set_point"] = point + slide - np.sum(slide * n, -1, keepdims=True) * n
        elif self.kind == "line":
            out["set_point"] = point + rng.normal(size=point.shape[:-1] + (1,)) * 0.3 * n
        return out

    def objective(self, t: dict[str, np.ndarray]):
        wp, wr = self.weights
        ref = self.reference
        kind = self.kind
        if kind == "pose":
            return O.pose(
                self.link, t["pose"], reference=ref, position_weight=wp, orientation_weight=wr
            )
        if kind == "point":
            return O.point(self.link, self.local_point, t["point"], reference=ref, weight=wp)
        if kind == "position":
            return O.position(self.link, t["pose"][..., 4:], reference=ref, weight=wp)
        if kind == "orientation":
            return O.orientation(self.link, t["pose"][..., :4], reference=ref, weight=wr)
        if kind == "axis":
            return O.axis(self.link, self.local_axis, t["axis"], reference=ref, weight=wr)
        if kind == "hinge":
            return O.hinge(
                self.link,
                self.local_point,
                self.local_axis,
                t["point"],
                t["axis"],
                reference=ref,
                position_weight=wp,
                orientation_weight=wr,
            )
        make = O.plane if kind == "plane" else O.line
        extra = {"local_axis": self.local_axis, "axis": t["axis"]} if self.align else {}
        return make(
            self.link,
            self.local_point,
            t["set_point"],
            self.set_axis,
            reference=ref,
            position_weight=wp,
            orientation_weight=wr,
            **extra,
        )

    # --- independent geometry ------------------------------------------------------------

    def _parts(self, transform):
        rot, trans = transform[..., :3, :3], transform[..., :3, 3]
        point = np.einsum("...ij,j->...i", rot, np.asarray(self.local_point, np.float64)) + trans
        axis = np.einsum("...ij,j->...i", rot, unit(self.local_axis))
        return rot, trans, point, axis

    def errors(self, transform: np.ndarray, t: dict[str, np.ndarray]):
        """(position error m, orientation error rad), each (*batch,), 0 where unconstrained."""
        rot, trans, point, axis = self._parts(transform)
        zero = np.zeros(transform.shape[:-2])
        kind = self.kind
        target_rot = _rotations(t["pose"][..., :4])
        if kind in ("pose", "orientation"):
            rel = np.swapaxes(target_rot, -1, -2) @ rot
            vee = 0.5 * np.stack(
                [
                    rel[..., 2, 1] - rel[..., 1, 2],
                    rel[..., 0, 2] - rel[..., 2, 0],
                    rel[..., 1, 0] - rel[..., 0, 1],
                ],
                -1,
            )
            rot_err = np.arctan2(
                np.linalg.norm(vee, axis=-1), 0.5 * (np.trace(rel, axis1=-2, axis2=-1) - 1.0)
            )
        elif kind in ("hinge", "axis") or self.align:
            rot_err = angle_between(axis, t["axis"])
        else:
            rot_err = zero
        if kind == "pose" or kind == "position":
            pos_err = np.linalg.norm(trans - t["pose"][..., 4:], axis=-1)
        elif kind in ("point", "hinge"):
            pos_err = np.linalg.norm(point - t["point"], axis=-1)
        elif kind == "plane":
            pos_err = np.abs(np.sum((point - t["set_point"]) * unit(self.set_axis), -1))
        elif kind == "line":
            pos_err = line_distance(point, t["set_point"], self.set_axis)
        else:
            pos_err = zero
        return pos_err, rot_err

    def blocks(self) -> list[tuple[int, str]]:
        """Row blocks of :meth:`residual`: (size, "exact") rows are compared as they are;
        (3, "rotation") rows are weight * log(R R_target^T), a rotation vector."""
        out = []
        if self.kind in ("pose", "position", "point", "hinge", "line"):
            out.append((3, "exact"))
        elif self.kind == "plane":
            out.append((1, "exact"))
        if self.kind in ("pose", "orientation"):
            out.append((3, "rotation"))
        elif self.kind in ("hinge", "axis") or self.align:
            out.append((3, "exact"))
        return out

    def residual(self, transform: np.ndarray, t: dict[str, np.ndarray]) -> np.ndarray:
        """Weighted residual rows (*batch, k): position rows (m) then orientation rows;
        rotation of pose / orientation = log(R R_target^T); axes: R a_local - a_target."""
        rot, trans, point, axis = self._parts(transform)
        wp, wr = self.weights
        kind = self.kind
        rows = []
        if kind in ("pose", "position"):
            rows.append(wp * (trans - t["pose"][..., 4:]))
        elif kind in ("point", "hinge"):
            rows.append(wp * (point - t["point"]))
        elif kind == "plane":
            n = unit(self.set_axis)
            rows.append(wp * np.sum((point - t["set_point"]) * n, -1, keepdims=True))
        elif kind == "line":
            d = unit(self.set_axis)
            delta = point - t["set_point"]
            rows.append(wp * (delta - np.sum(delta * d, -1, keepdims=True) * d))
        if kind in ("pose", "orientation"):
            target_rot = _rotations(t["pose"][..., :4])
            rel = rot @ np.swapaxes(target_rot, -1, -2)
            flat = rel.reshape(-1, 3, 3)
            rows.append(wr * np.stack([so3_log(m) for m in flat]).reshape(*rel.shape[:-2], 3))
        elif kind in ("hinge", "axis") or self.align:
            rows.append(wr * (axis - t["axis"]))
        return np.concatenate(rows, -1)


# A planar arm: a continuous joint (spin) and a revolute one (elbow +-2.5 rad).
TOY_CONTINUOUS = """<?xml version="1.0"?>
<robot name="toy_continuous">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="tip"/>
  <joint name="spin" type="continuous">
    <parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="l1"/><child link="l2"/><origin xyz="0.5 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2.5" upper="2.5" effort="1" velocity="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="l2"/><child link="tip"/><origin xyz="0.3 0 0"/>
  </joint>
</robot>
"""


def _rotations(wxyz: np.ndarray) -> np.ndarray:
    """(*batch, 4) unit quaternions -> (*batch, 3, 3), numpy only."""
    q = unit(wxyz)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def build(specs, ref: RefRobot, q_star: np.ndarray, rng: np.random.Generator):
    """Targets (one dict per spec) met exactly by configurations ``q_star`` (*batch, n)."""
    poses = ref.poses(q_star)
    out = []
    for s in specs:
        transform = (
            poses[s.link]
            if s.reference is None
            else (np.linalg.inv(poses[s.reference]) @ poses[s.link])
        )
        out.append(s.targets(transform, rng))
    return out


def geometric_errors(specs, ref: RefRobot, q: np.ndarray, targets):
    """Independent (position, orientation) errors (*batch, n_objectives) at ``q``."""
    poses = ref.poses(q)
    pos, rot = [], []
    for s, t in zip(specs, targets):
        transform = (
            poses[s.link]
            if s.reference is None
            else (np.linalg.inv(poses[s.reference]) @ poses[s.link])
        )
        p, r = s.errors(transform, t)
        pos.append(p)
        rot.append(r)
    return np.stack(pos, -1), np.stack(rot, -1)


def residuals(specs, ref: RefRobot, q: np.ndarray, targets) -> np.ndarray:
    poses = ref.poses(q)
    rows = []
    for s, t in zip(specs, targets):
        transform = (
            poses[s.link]
            if s.reference is None
            else (np.linalg.inv(poses[s.reference]) @ poses[s.link])
        )
        rows.append(s.residual(transform, t))
    return np.concatenate(rows, -1)
