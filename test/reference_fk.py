"""Independent float64 reference forward kinematics for cross-checking the JAX core.

Written directly from the URDF specification with ``xml.etree`` and numpy only (no yourdfpy, no
JAX), so that it shares no code with :mod:`pyroki_ros`. Deliberately simple and slow: one 4x4
matrix product per joint, no batching.

Conventions (URDF spec):

* ``<origin xyz rpy>``: translation, then fixed-axis roll-pitch-yaw,
  ``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``; missing origin = identity.
* ``<axis xyz>``: default ``(1, 0, 0)``, normalized here; expressed in the joint frame.
* joint transform ``T_parent_child(q) = T_origin @ T_motion(axis, q)`` with ``T_motion`` a
  rotation about the axis (revolute, continuous) or a translation along it (prismatic).
* ``<mimic joint multiplier offset>``: ``value = multiplier * value(joint) + offset``
  (defaults 1 and 0); the source may itself be a mimic joint. A ``<mimic>`` on a fixed joint has
  no effect.
* actuated joints: movable (revolute, continuous, prismatic) and not mimic, in URDF document
  order. Floating and planar joints are not supported (``NotImplementedError``).

All poses are expressed in the frame of the (single) root link.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import numpy as np

MOVABLE = ("revolute", "continuous", "prismatic")
SUPPORTED = MOVABLE + ("fixed",)
UNSUPPORTED = ("floating", "planar")


@dataclasses.dataclass(frozen=True)
class Joint:
    name: str
    type: str
    parent: str
    child: str
    xyz: np.ndarray
    rpy: np.ndarray
    axis: np.ndarray  # unit vector
    mimic: tuple[str, float, float] | None  # (source joint, multiplier, offset); None if fixed
    lower: float | None
    upper: float | None


@dataclasses.dataclass(frozen=True)
class Model:
    name: str
    links: tuple[str, ...]  # document order
    joints: tuple[Joint, ...]  # document order
    root: str

    @property
    def joint_by_name(self) -> dict[str, Joint]:
        return {j.name: j for j in self.joints}

    @property
    def joint_by_child(self) -> dict[str, Joint]:
        return {j.child: j for j in self.joints}


UrdfLike = str | os.PathLike | Model


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _floats(text: str | None, default: Sequence[float], what: str) -> np.ndarray:
    if text is None:
        return np.asarray(default, dtype=np.float64)
    values = [float(v) for v in text.split()]
    if len(values) != len(default):
        raise ValueError(f"{what}: expected {len(default)} numbers, got {text!r}")
    return np.asarray(values, dtype=np.float64)


def _opt_float(elem: ET.Element | None, attr: str) -> float | None:
    if elem is None or elem.get(attr) is None:
        return None
    return float(elem.get(attr))


def parse_urdf(urdf: UrdfLike) -> Model:
    """Parse a URDF given as an XML string, a path, or an already parsed :class:`Model`."""
    if isinstance(urdf, Model):
        return urdf
    if isinstance(urdf, os.PathLike) or (
        isinstance(urdf, str) and not urdf.lstrip().startswith("<")
    ):
        urdf = pathlib.Path(urdf).read_text(encoding="utf-8")
    root_elem = ET.fromstring(urdf)
    if root_elem.tag != "robot":
        raise ValueError(f"root element is <{root_elem.tag}>, expected <robot>")

    links = tuple(l.get("name") for l in root_elem.findall("link"))
    if len(set(links)) != len(links):
        raise ValueError("duplicate link names")
    link_set = set(links)

    joints = []
    for je in root_elem.findall("joint"):
        name, jtype = je.get("name"), je.get("type")
        if jtype not in SUPPORTED + UNSUPPORTED:
            raise ValueError(f"joint {name!r}: unknown type {jtype!r}")
        parent, child = je.find("parent").get("link"), je.find("child").get("link")
        for l in (parent, child):
            if l not in link_set:
                raise ValueError(f"joint {name!r} references unknown link {l!r}")
        origin = je.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None, (0, 0, 0), f"{name} xyz")
        rpy = _floats(origin.get("rpy") if origin is not None else None, (0, 0, 0), f"{name} rpy")
        axis_e = je.find("axis")
        axis = _floats(axis_e.get("xyz") if axis_e is not None else None, (1, 0, 0), f"{name} axis")
        norm = np.linalg.norm(axis)
        if jtype in MOVABLE:
            if norm < 1e-12:
                raise ValueError(f"joint {name!r}: zero axis")
            axis = axis / norm
        mimic = None
        me = je.find("mimic")
        if me is not None and jtype in MOVABLE:
            mimic = (
                me.get("joint"),
                float(me.get("multiplier", "1")),
                float(me.get("offset", "0")),
            )
        lim = je.find("limit")
        joints.append(
            Joint(
                name,
                jtype,
                parent,
                child,
                xyz,
                rpy,
                axis,
                mimic,
                _opt_float(lim, "lower"),
                _opt_float(lim, "upper"),
            )
        )

    names = [j.name for j in joints]
    if len(set(names)) != len(names):
        raise ValueError("duplicate joint names")
    children = [j.child for j in joints]
    if len(set(children)) != len(children):
        raise ValueError("a link has more than one parent joint")
    roots = [l for l in links if l not in set(children)]
    if len(roots) != 1:
        raise ValueError(f"expected exactly one root link, found {roots}")
    model = Model(root_elem.get("name", ""), links, tuple(joints), roots[0])
    if len(topological_links(model)) != len(links):
        raise ValueError("kinematic graph is not a tree (cycle or disconnected link)")
    by_name = model.joint_by_name
    for j in joints:
        if j.mimic is not None:
            src = by_name.get(j.mimic[0])
            if src is None:
                raise ValueError(f"joint {j.name!r} mimics unknown joint {j.mimic[0]!r}")
            if src.type not in MOVABLE:
                raise ValueError(f"joint {j.name!r} mimics non-movable joint {src.name!r}")
    return model


def topological_links(model: Model) -> list[str]:
    """Links in breadth-first order from the root (children in joint document order)."""
    kids: dict[str, list[str]] = {l: [] for l in model.links}
    for j in model.joints:
        kids[j.parent].append(j.child)
    order, frontier, seen = [], [model.root], {model.root}
    while frontier:
        link = frontier.pop(0)
        order.append(link)
        for c in kids[link]:
            if c not in seen:
                seen.add(c)
                frontier.append(c)
    return order


def actuated_joint_names(urdf: UrdfLike) -> list[str]:
    """Non-fixed, non-mimic joints in URDF document order."""
    model = parse_urdf(urdf)
    for j in model.joints:
        if j.type in UNSUPPORTED:
            raise NotImplementedError(f"joint {j.name!r} has unsupported type {j.type!r}")
    return [j.name for j in model.joints if j.type in MOVABLE and j.mimic is None]


def actuated_joint_limits(
    urdf: UrdfLike, continuous: tuple[float, float] = (-math.pi, math.pi)
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the actuated joints; continuous joints get ``continuous``."""
    model = parse_urdf(urdf)
    by_name = model.joint_by_name
    lower, upper = [], []
    for name in actuated_joint_names(model):
        j = by_name[name]
        if j.type == "continuous":
            lo, hi = continuous
        else:
            if j.lower is None or j.upper is None:
                raise ValueError(f"joint {name!r} ({j.type}) has no lower/upper limit")
            lo, hi = j.lower, j.upper
        lower.append(lo)
        upper.append(hi)
    return np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)


# --------------------------------------------------------------------------------------------
# SO(3) / SE(3) helpers
# --------------------------------------------------------------------------------------------


def rot_x(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def rot_y(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def rot_z(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rpy_to_matrix(rpy: Sequence[float]) -> np.ndarray:
    """URDF fixed-axis roll, pitch, yaw: ``Rz(yaw) @ Ry(pitch) @ Rx(roll)``."""
    roll, pitch, yaw = (float(v) for v in rpy)
    return rot_z(yaw) @ rot_y(pitch) @ rot_x(roll)


def skew(w: Sequence[float]) -> np.ndarray:
    x, y, z = (float(v) for v in w)
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


def axis_angle_to_matrix(axis: Sequence[float], angle: float) -> np.ndarray:
    """Rodrigues' formula ``I + sin(a) K + (1 - cos(a)) K^2`` for a unit ``axis``."""
    k = skew(axis)
    return np.eye(3) + math.sin(angle) * k + (1.0 - math.cos(angle)) * (k @ k)


def so3_log(rot: np.ndarray) -> np.ndarray:
    """Rotation vector ``w`` with ``expm(skew(w)) == rot`` (angle in [0, pi])."""
    vee = 0.5 * np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    s = np.linalg.norm(vee)  # sin(angle)
    c = 0.5 * (np.trace(rot) - 1.0)  # cos(angle)
    angle = math.atan2(s, c)
    if angle < 1e-6:
        return vee * (1.0 + angle * angle / 6.0)  # angle / sin(angle), series
    if math.pi - angle > 1e-4:
        return vee * (angle / s)
    # Near pi: axis from the symmetric part, sign from vee.
    sym = 0.5 * (rot + rot.T) - c * np.eye(3)
    col = int(np.argmax(np.diag(sym)))
    axis = sym[:, col] / math.sqrt(max(sym[col, col], 1e-300))
    axis /= np.linalg.norm(axis)
    if np.dot(axis, vee) < 0.0:
        axis = -axis
    return axis * angle


def rotation_angle(rot: np.ndarray) -> float:
    """Angle (rad, in [0, pi]) of a rotation matrix; robust for small and large angles."""
    vee = 0.5 * np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    return math.atan2(float(np.linalg.norm(vee)), 0.5 * (float(np.trace(rot)) - 1.0))


def make_transform(rot: np.ndarray, trans: Sequence[float]) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rot
    t[:3, 3] = np.asarray(trans, dtype=np.float64)
    return t


def quat_wxyz_to_matrix(wxyz: Sequence[float]) -> np.ndarray:
    """Rotation matrix (..., 3, 3) of (normalized here) quaternions ``(w, x, y, z)`` (..., 4)."""
    q = np.asarray(wxyz, dtype=np.float64)
    w, x, y, z = np.moveaxis(q / np.linalg.norm(q, axis=-1, keepdims=True), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def joint_motion(joint: Joint, value: float) -> np.ndarray:
    """``T_motion``: the part of the joint transform that depends on the joint value."""
    if joint.type in ("revolute", "continuous"):
        return make_transform(axis_angle_to_matrix(joint.axis, value), (0.0, 0.0, 0.0))
    if joint.type == "prismatic":
        return make_transform(np.eye(3), joint.axis * value)
    if joint.type == "fixed":
        return np.eye(4)
    raise NotImplementedError(f"joint {joint.name!r} has unsupported type {joint.type!r}")


def joint_origin(joint: Joint) -> np.ndarray:
    return make_transform(rpy_to_matrix(joint.rpy), joint.xyz)


# --------------------------------------------------------------------------------------------
# FK and Jacobian
# --------------------------------------------------------------------------------------------


def joint_values(
    urdf: UrdfLike, q: np.ndarray, joint_names: Sequence[str] | None = None
) -> dict[str, float]:
    """Values of all movable joints (actuated and mimic) for actuated values ``q``.

    ``joint_names`` gives the order of ``q`` (any permutation of the actuated joints); default is
    :func:`actuated_joint_names` order.
    """
    model = parse_urdf(urdf)
    act = actuated_joint_names(model)
    names = list(act if joint_names is None else joint_names)
    if sorted(names) != sorted(act) or len(set(names)) != len(names):
        raise ValueError(
            f"joint_names must be a permutation of the actuated joints {act}, got {names}"
        )
    q = np.asarray(q, dtype=np.float64)
    if q.shape != (len(names),):
        raise ValueError(f"q must have shape ({len(names)},), got {q.shape}")
    values = {n: float(v) for n, v in zip(names, q)}
    by_name = model.joint_by_name

    def resolve(name: str, stack: tuple[str, ...]) -> float:
        if name in values:
            return values[name]
        if name in stack:
            raise ValueError(f"mimic cycle: {' -> '.join(stack + (name,))}")
        src, mult, off = by_name[name].mimic
        val = mult * resolve(src, stack + (name,)) + off
        values[name] = val
        return val

    for j in model.joints:
        if j.type in MOVABLE:
            resolve(j.name, ())
    return values


def reference_fk(
    urdf_xml: UrdfLike, q: np.ndarray, joint_names: Sequence[str] | None = None
) -> dict[str, np.ndarray]:
    """Pose (4x4, float64) of every link in the root-link frame, keyed by link name."""
    model = parse_urdf(urdf_xml)
    values = joint_values(model, q, joint_names)
    by_child = model.joint_by_child
    poses = {model.root: np.eye(4)}
    for link in topological_links(model)[1:]:
        j = by_child[link]
        poses[link] = poses[j.parent] @ joint_origin(j) @ joint_motion(j, values.get(j.name, 0.0))
    return poses


def reference_jacobian_fd(
    urdf_xml: UrdfLike,
    q: np.ndarray,
    link_name: str,
    joint_names: Sequence[str] | None = None,
    h: float = 1e-6,
) -> np.ndarray:
    """Central-difference geometric Jacobian (6 x n_act) of ``link_name``.

    Rows 0-2: linear velocity of the link origin; rows 3-5: angular velocity; both in the root
    frame. Column i: ``(p(q + h e_i) - p(q - h e_i)) / 2h`` and
    ``log(R(q + h e_i) R(q - h e_i)^T) / 2h``. Truncation error O(h^2), round-off O(eps / h).
    """
    model = parse_urdf(urdf_xml)
    q = np.asarray(q, dtype=np.float64)
    jac = np.zeros((6, q.shape[0]))
    for i in range(q.shape[0]):
        dq = np.zeros_like(q)
        dq[i] = h
        tp = reference_fk(model, q + dq, joint_names)[link_name]
        tm = reference_fk(model, q - dq, joint_names)[link_name]
        jac[:3, i] = (tp[:3, 3] - tm[:3, 3]) / (2.0 * h)
        jac[3:, i] = so3_log(tp[:3, :3] @ tm[:3, :3].T) / (2.0 * h)
    return jac


def pose_errors(t_ref: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(position error in m, orientation error in rad = angle of R_ref^T R)."""
    return (
        float(np.linalg.norm(t[:3, 3] - t_ref[:3, 3])),
        rotation_angle(t_ref[:3, :3].T @ t[:3, :3]),
    )
