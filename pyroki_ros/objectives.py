"""IK objectives in the Klampt vocabulary: point, pose, hinge, plane, line, position, orientation.

An objective constrains a link (optionally a point and an axis fixed on it) relative to a
reference frame: the root link, or another link of the same robot (a relative objective).
Its *kind*, link and reference are static (they set the problem structure, and so what gets
compiled); its targets and weights are arrays, optionally batched over leading dimensions,
so new target values never recompile.

Residuals are in metres (position rows) and radians (orientation rows), multiplied by the
objective's weights. Their Jacobians are analytic, built from the robot's geometric Jacobian.

One module for the whole vocabulary (~620 lines): each kind's constructor, checks and
residual rows are read side by side, and the solvers import one place.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot

Kind = Literal["pose", "point", "position", "orientation", "hinge", "plane", "line", "aim", "axis"]

# Rows of the residual for each kind (plane/line get 3 more rows with an axis).
_POSITION_ROWS = {"pose": 3, "point": 3, "position": 3, "hinge": 3, "plane": 1, "line": 3}
_ORIENTATION_ROWS = {"pose": 3, "orientation": 3, "hinge": 3, "aim": 3, "axis": 3}

# Default weight of a pose's orientation residual against its position residual (m per rad:
# 1 degree counts as 3.5 mm). Tuned by iteration counts to 1 mm / 1 degree on four arms
# (bench/tune_ik.py --orientation-weights): 0.2 takes 1-2 fewer median iterations than 0.1.
POSE_ORIENTATION_WEIGHT = 0.2


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Objective:
    """One IK objective. Array fields may carry leading batch dimensions ``(*batch, ...)``.

    Attributes:
        target: (*batch, 7) wxyz_xyz, a pose in the reference frame. Its translation is the
            target point (or a point on the plane / line); its rotation the target orientation.
        axis: (*batch, 3) target axis (hinge), plane normal (plane) or line direction (line),
            in the reference frame; unit length.
        local_point: (*batch, 3) point on the link, in the link frame.
        local_axis: (*batch, 3) axis on the link, in the link frame (hinge, and plane / line
            with ``align_axis``); unit length.
        weights: (*batch, 2) position and orientation weights.
    """

    target: jax.Array
    axis: jax.Array
    local_point: jax.Array
    local_axis: jax.Array
    weights: jax.Array
    kind: str = dataclasses.field(metadata={"static": True})
    link: str = dataclasses.field(metadata={"static": True})
    reference: str | None = dataclasses.field(default=None, metadata={"static": True})
    align_axis: bool = dataclasses.field(default=False, metadata={"static": True})

    @property
    def batch_shape(self) -> tuple[int, ...]:
        return self.target.shape[:-1]

    @property
    def n_rows(self) -> int:
        rows = _POSITION_ROWS.get(self.kind, 0) + _ORIENTATION_ROWS.get(self.kind, 0)
        return rows + (3 if self.align_axis and self.kind in ("plane", "line") else 0)

    @property
    def constrains_position(self) -> bool:
        return self.kind in _POSITION_ROWS


def _xp(*values):
    """numpy for concrete inputs (cheap on the host), jax.numpy inside a trace."""
    traced = any(isinstance(v, jax.core.Tracer) for v in values)
    return jnp if traced else np


# Default arguments, checked once: id of the (live, module-level) tuple -> its checked array
# (saves host work).
_Z, _ZERO, _IDENTITY = (0.0, 0.0, 1.0), (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
_DEFAULTS = {id(value): np.asarray(value, np.float64) for value in (_Z, _ZERO, _IDENTITY)}


def _vec(x, size: int, name: str, xp=np):
    if xp is np and id(x) in _DEFAULTS:
        return _DEFAULTS[id(x)]
    x = xp.asarray(x, dtype=xp.float64 if xp is np else None)
    if x.ndim == 0 or x.shape[-1] != size:
        raise ValueError(f"{name} must have shape (*batch, {size}), got {x.shape}")
    if xp is np and not _all_finite(x):
        raise ValueError(f"{name} contains NaN or infinite values")
    return x


def _all_finite(x: np.ndarray) -> bool:
    # One vector (a single request): Python floats, as numpy's reduction set-up alone costs
    # several microseconds, a noticeable share of a 0.1 ms solve.
    if x.ndim == 1:
        return all(map(math.isfinite, x.tolist()))
    return bool(np.isfinite(x).all())


def _unit(x, name: str, xp=np):
    if xp is np and id(x) in _DEFAULTS:
        return _DEFAULTS[id(x)]
    x = _vec(x, x_size := (4 if name == "wxyz" else 3), name, xp)
    one = xp is np and x.ndim == 1  # one vector: see _all_finite
    norm = math.hypot(*x.tolist()) if one else xp.sqrt(xp.sum(x * x, axis=-1, keepdims=True))
    if xp is np and (norm < 1e-9 if one else np.any(norm < 1e-9)):
        raise ValueError(f"{name} must be a non-zero {'quaternion' if x_size == 4 else 'vector'}")
    return x / norm


def _make(
    kind: Kind,
    link: str,
    *,
    position=None,
    wxyz=None,
    axis=_Z,
    local_point=_ZERO,
    local_axis=_Z,
    reference: str | None = None,
    position_weight=1.0,
    orientation_weight=0.1,
    align_axis: bool = False,
) -> Objective:
    if not isinstance(link, str) or not link:
        raise ValueError(f"link must be a link name, got {link!r}")
    position = _ZERO if position is None else position
    wxyz = _IDENTITY if wxyz is None else wxyz
    xp = _xp(position, wxyz, axis, local_point, local_axis, position_weight, orientation_weight)
    position = _vec(position, 3, "position", xp)
    wxyz = _unit(wxyz, "wxyz", xp)
    axis, local_axis = _unit(axis, "axis", xp), _unit(local_axis, "local_axis", xp)
    local_point = _vec(local_point, 3, "local_point", xp)
    if xp is np and np.isscalar(position_weight) and np.isscalar(orientation_weight):
        if not all(math.isfinite(w) and w >= 0 for w in (position_weight, orientation_weight)):
            raise ValueError("weights must be finite and >= 0")
        weights = np.array([position_weight, orientation_weight], np.float64)
    else:
        pair = (xp.asarray(w, dtype=position.dtype) for w in (position_weight, orientation_weight))
        weights = xp.stack(xp.broadcast_arrays(*pair), -1)
        if xp is np and (not np.isfinite(weights).all() or (weights < 0).any()):
            raise ValueError("weights must be finite and >= 0")
    fields = (wxyz, position, axis, local_point, local_axis, weights)
    shapes = {f.shape[:-1] for f in fields}
    if len(shapes) > 1:
        batch = np.broadcast_shapes(*shapes)
        fields = tuple(xp.broadcast_to(f, (*batch, f.shape[-1])) for f in fields)
    wxyz, position, axis, local_point, local_axis, weights = fields
    return Objective(
        target=xp.concatenate([wxyz, position], axis=-1),
        axis=axis,
        local_point=local_point,
        local_axis=local_axis,
        weights=weights,
        kind=kind,
        link=link,
        reference=reference,
        align_axis=align_axis,
    )


def pose(
    link: str,
    target,
    *,
    reference: str | None = None,
    position_weight=1.0,
    orientation_weight=POSE_ORIENTATION_WEIGHT,
) -> Objective:
    """Fixed pose: the link frame at ``target``, a jaxlie.SE3 or (*batch, 7) wxyz_xyz."""
    wxyz_xyz = target.wxyz_xyz if isinstance(target, jaxlie.SE3) else target
    wxyz_xyz = _vec(wxyz_xyz, 7, "target", _xp(wxyz_xyz))
    return _make(
        "pose",
        link,
        position=wxyz_xyz[..., 4:],
        wxyz=wxyz_xyz[..., :4],
        reference=reference,
        position_weight=position_weight,
        orientation_weight=orientation_weight,
    )


def aim(
    link: str, local_point, local_axis, target_point, *, reference: str | None = None, weight=1.0
) -> Objective:
    """Look-at: the ray from ``local_point`` along ``local_axis`` (link frame) passes through
    ``target_point`` (2 constrained DoF; e.g. a camera). The error is the angle (rad) between
    the ray and the direction to the target; a target behind the ray counts as far off."""
    return _make(
        "aim",
        link,
        position=target_point,
        local_point=local_point,
        local_axis=local_axis,
        reference=reference,
        orientation_weight=weight,
    )


def point(
    link: str, local_point, target_point, *, reference: str | None = None, weight=1.0
) -> Objective:
    """A point fixed on the link (link frame) at a target point (reference frame)."""
    return _make(
        "point",
        link,
        position=target_point,
        local_point=local_point,
        reference=reference,
        position_weight=weight,
    )


def position(link: str, target_position, *, reference: str | None = None, weight=1.0) -> Objective:
    """Position only: the link origin at ``target_position``; orientation free."""
    return _make(
        "position", link, position=target_position, reference=reference, position_weight=weight
    )


def orientation(link: str, target_wxyz, *, reference: str | None = None, weight=1.0) -> Objective:
    """Orientation only: the link frame's rotation equals ``target_wxyz``; position free."""
    return _make(
        "orientation", link, wxyz=target_wxyz, reference=reference, orientation_weight=weight
    )


def hinge(
    link: str,
    local_point,
    local_axis,
    target_point,
    target_axis,
    *,
    reference: str | None = None,
    position_weight=1.0,
    orientation_weight=0.1,
) -> Objective:
    """A point plus an axis: rotation about ``target_axis`` stays free (5 constrained DoF)."""
    return _make(
        "hinge",
        link,
        position=target_point,
        axis=target_axis,
        local_point=local_point,
        local_axis=local_axis,
        reference=reference,
        position_weight=position_weight,
        orientation_weight=orientation_weight,
    )


def axis(
    link: str, local_axis, target_axis, *, reference: str | None = None, weight=1.0
) -> Objective:
    """Axis only: ``local_axis`` (link frame) parallel to ``target_axis`` (reference frame);
    the position and the rotation about the axis stay free (2 constrained DoF; e.g. a tool
    pointing down wherever it is). The error is the angle between the two axes."""
    return _make(
        "axis",
        link,
        axis=target_axis,
        local_axis=local_axis,
        reference=reference,
        position_weight=0.0,
        orientation_weight=weight,
    )


def plane(
    link: str,
    local_point,
    plane_point,
    normal,
    *,
    local_axis=None,
    axis=None,
    reference: str | None = None,
    position_weight=1.0,
    orientation_weight=0.1,
) -> Objective:
    """A point on the link lies on a plane; with ``local_axis``/``axis``, that axis aligns too."""
    return _make(
        "plane",
        link,
        position=plane_point,
        axis=normal,
        local_point=local_point,
        reference=reference,
        position_weight=position_weight,
        orientation_weight=orientation_weight,
        **_alignment("plane", local_axis, axis),
    )


def line(
    link: str,
    local_point,
    line_point,
    direction,
    *,
    local_axis=None,
    axis=None,
    reference: str | None = None,
    position_weight=1.0,
    orientation_weight=0.1,
) -> Objective:
    """A point on the link lies on a line; with ``local_axis``/``axis``, that axis aligns too."""
    return _make(
        "line",
        link,
        position=line_point,
        axis=direction,
        local_point=local_point,
        reference=reference,
        position_weight=position_weight,
        orientation_weight=orientation_weight,
        **_alignment("line", local_axis, axis),
    )


def _alignment(kind: str, local_axis, axis) -> dict:
    """plane / line: the fields for an axis to align, none without one. The plane normal /
    line direction lives in ``axis``; the axis to align is the z column of the target
    rotation, so one objective carries both."""
    if (local_axis is None) != (axis is None):
        raise ValueError(f"{kind}: give both local_axis and axis, or neither")
    if local_axis is None:
        return {}
    wxyz = _rotation_with_z(_unit(axis, "axis"))
    return {"wxyz": wxyz, "local_axis": local_axis, "align_axis": True}


def _rotation_with_z(z: np.ndarray) -> np.ndarray:
    """A quaternion (wxyz) whose rotation maps the z axis onto unit vector ``z``."""
    helper = np.where(np.abs(z[..., :1]) < 0.9, np.array([1.0, 0, 0]), np.array([0, 1.0, 0]))
    x = np.cross(helper, z)
    x = x / np.linalg.norm(x, axis=-1, keepdims=True)
    y = np.cross(z, x)
    return np.asarray(jaxlie.SO3.from_matrix(np.stack([x, y, z], axis=-1)).wxyz, np.float64)


# --- evaluation --------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Evaluation:
    """Objective values at a configuration. Shapes for a batch of ``(*batch,)``."""

    residual: jax.Array  # (*batch, m)
    jacobian: jax.Array  # (*batch, m, n_joints)
    position_error: jax.Array  # (*batch, n_objectives), m; 0 where not constrained
    orientation_error: jax.Array  # (*batch, n_objectives), rad; 0 where not constrained


# Below, batch axes come last (see kinematics.py): scalars are (*b,), Jacobian rows (n, *b),
# and objective fields component-first, e.g. target (7, *b).


def _rows(v: tuple) -> tuple:
    """Per-configuration values (*b,) shaped to broadcast against Jacobian rows (n, *b)."""
    return tuple(c[None] for c in v)


def rotation_residual(q: k.Quat, jw: k.Vec) -> tuple[k.Vec, k.Vec, jax.Array]:
    """Rotation error of unit quaternion ``q`` (the error rotation R R_target^T).

    Residual: 2 sign(w) v, the vector part scaled (2 sin(theta/2) along the axis): smooth,
    zero only at the target, and its Jacobian needs no trigonometry:
    d(2 v) = (w I - [v]x) d(omega) for a world-frame perturbation exp(d omega) R.

    Returns the residual, its Jacobian rows (from angular-velocity rows ``jw``), and the
    angle theta (rad) for the tolerance test.
    """
    sign = jnp.where(q[0] < 0, -1.0, 1.0)
    w, v = sign * q[0], tuple(sign * c for c in q[1:])
    residual = tuple(2.0 * c for c in v)
    swept = k.cross(_rows(v), jw)
    jac = tuple(w[None] * j - s for j, s in zip(jw, swept))
    angle = 2.0 * jnp.arctan2(k.norm(v), w)
    return residual, jac, angle


def relative_frame(
    robot: Robot, frames: tuple[k.Quat, k.Vec], link: str, reference: str | None
) -> tuple[k.Quat, k.Vec, k.Vec, k.Vec]:
    """Pose of ``link`` in ``reference`` and its Jacobian rows (linear, angular), each a
    tuple of three (n, *b) arrays, for the velocity of the link origin in that frame."""
    quat, pos = frames
    i = robot.link_index(link)
    q = tuple(c[i] for c in quat)
    p = tuple(c[i] for c in pos)
    jv, jw = k.jacobian_rows_t(robot, frames, i)
    if reference is None or robot.link_index(reference) == 0:
        return q, p, jv, jw
    r = robot.link_index(reference)
    qr = tuple(c[r] for c in quat)
    pr = tuple(c[r] for c in pos)
    jv_r, jw_r = k.jacobian_rows_t(robot, frames, r)
    lever = k.sub(p, pr)
    # v_rel = R_r^T (v - v_r - w_r x lever),  w_rel = R_r^T (w - w_r)
    swept = k.cross(jw_r, _rows(lever))
    v = tuple(a - b - c for a, b, c in zip(jv, jv_r, swept))
    w = k.sub(jw, jw_r)
    inverse = _rows(k.qconj(qr))
    return (
        k.qmul(k.qconj(qr), q),
        k.rotate(k.qconj(qr), lever),
        k.rotate(inverse, v),
        k.rotate(inverse, w),
    )


def _angle_between(a: k.Vec, b: k.Vec) -> jax.Array:
    return jnp.arctan2(k.norm(k.cross(a, b)), k.dot(a, b))


def evaluate_one_t(
    robot: Robot, frames: tuple[k.Quat, k.Vec], objective: Objective
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """One objective, batch axes last: its fields component-first (e.g. target (7, *b)).

    Returns residual (rows, *b), Jacobian (rows, n, *b), position and orientation error (*b,).
    """
    q, p, jv, jw = relative_frame(robot, frames, objective.link, objective.reference)
    target_q, target_p = k.split(objective.target[:4]), k.split(objective.target[4:])
    w_pos, w_rot = objective.weights[0], objective.weights[1]
    zero = jnp.zeros_like(p[0])
    rows, jac_rows = [], []  # residual entries (*b,) and Jacobian rows (n, *b)
    pos_err = rot_err = zero
    kind = objective.kind

    def add(values, jacobians, weight):
        rows.extend(weight * v for v in values)
        jac_rows.extend(weight[None] * j for j in jacobians)

    if kind in _POSITION_ROWS or kind == "aim":  # the link point and its Jacobian rows
        arm = k.rotate(q, k.split(objective.local_point))
        point = tuple(a + b for a, b in zip(p, arm))
        j_point = tuple(a + b for a, b in zip(jv, k.cross(jw, _rows(arm))))  # v + w x arm
    if kind in _POSITION_ROWS:
        delta = k.sub(point, target_p)
        if kind == "plane":
            normal = k.split(objective.axis)
            distance = k.dot(normal, delta)
            add([distance], [k.dot(_rows(normal), j_point)], w_pos)
            pos_err = jnp.abs(distance)
        elif kind == "line":
            d = k.split(objective.axis)
            along = k.dot(d, delta)
            off = tuple(x - along * c for x, c in zip(delta, d))
            j_along = k.dot(_rows(d), j_point)
            add(off, [j - j_along * c[None] for j, c in zip(j_point, d)], w_pos)
            pos_err = k.norm(off)
        else:
            add(delta, j_point, w_pos)
            pos_err = k.norm(delta)

    if kind in ("pose", "orientation"):
        residual, jac, rot_err = rotation_residual(k.qmul(q, k.qconj(target_q)), jw)
        add(residual, jac, w_rot)
    elif kind == "aim":
        # Residual: the ray direction minus the unit direction from the point to the target.
        delta = k.sub(target_p, point)
        distance = jnp.maximum(k.norm(delta), 1e-6)
        u = tuple(c / distance for c in delta)
        ray = k.rotate(q, k.split(objective.local_axis))
        # d u = -(I - u u^T) d point / |delta|;  d ray = w x ray
        u_dot_j = k.dot(_rows(u), j_point)
        du = tuple(-(j - c[None] * u_dot_j) / distance[None] for j, c in zip(j_point, u))
        add(k.sub(ray, u), tuple(a - b for a, b in zip(k.cross(jw, _rows(ray)), du)), w_rot)
        rot_err = _angle_between(ray, u)
    elif kind in ("hinge", "axis") or objective.align_axis:
        if kind in ("hinge", "axis"):
            goal = k.split(objective.axis)
        else:
            goal = k.rotate(target_q, (zero, zero, jnp.ones_like(zero)))
        axis = k.rotate(q, k.split(objective.local_axis))
        add(k.sub(axis, goal), k.cross(jw, _rows(axis)), w_rot)  # d axis = w x axis
        rot_err = _angle_between(axis, goal)

    # Computed once, whatever consumes them (see kinematics.materialize).
    return jax.lax.optimization_barrier(
        (jnp.stack(rows, 0), jnp.stack(jac_rows, 0), pos_err, rot_err)
    )


def evaluate_t(
    robot: Robot, q_t: jax.Array, objectives: tuple[Objective, ...]
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """All objectives, batch axes last: configurations (n, *b), objective fields
    component-first. Returns residual (m, *b), Jacobian (m, n, *b), position and orientation
    errors (n_objectives, *b)."""
    frames = k.frames_t(robot, q_t)
    rows, jacobians, pos_err, rot_err = zip(*(evaluate_one_t(robot, frames, o) for o in objectives))
    return jnp.concatenate(rows), jnp.concatenate(jacobians), jnp.stack(pos_err), jnp.stack(rot_err)


def evaluate(robot: Robot, q: jax.Array, objectives: tuple[Objective, ...]) -> Evaluation:
    """Residuals, Jacobians and errors of ``objectives`` at configurations q (*batch, n).

    Objective fields must broadcast against the batch shape of ``q``.
    """
    q = k._check_q(robot, q)
    batch = np.broadcast_shapes(q.shape[:-1], *(o.batch_shape for o in objectives))
    q = jnp.broadcast_to(q, (*batch, q.shape[-1]))

    def batch_last(x):
        return jnp.moveaxis(jnp.broadcast_to(jnp.asarray(x, q.dtype), (*batch, x.shape[-1])), -1, 0)

    moved = tuple(jax.tree.map(batch_last, o) for o in objectives)
    residual, jacobian, pos_err, rot_err = evaluate_t(robot, jnp.moveaxis(q, -1, 0), moved)
    return Evaluation(
        residual=jnp.moveaxis(residual, 0, -1),
        jacobian=jnp.moveaxis(jacobian, (0, 1), (-2, -1)),
        position_error=jnp.moveaxis(pos_err, 0, -1),
        orientation_error=jnp.moveaxis(rot_err, 0, -1),
    )


def validate(robot: Robot, objectives: tuple[Objective, ...], check_values: bool = True) -> None:
    """Raises ValueError for unknown links and non-finite targets (host-side, before solving)."""
    if not objectives:
        raise ValueError("no objectives given")
    for o in objectives:
        if o.kind not in _POSITION_ROWS and o.kind not in _ORIENTATION_ROWS:
            raise ValueError(f"unknown objective kind '{o.kind}'")
        robot.link_index(o.link)
        if o.reference is not None:
            robot.link_index(o.reference)
        if not check_values:
            continue
        for name in ("target", "axis", "local_point", "local_axis", "weights"):
            if not np.isfinite(np.asarray(getattr(o, name))).all():
                raise ValueError(f"objective on '{o.link}': {name} contains NaN or infinite values")
        if np.any(np.asarray(o.weights) < 0):
            raise ValueError(f"objective on '{o.link}': weights must be >= 0")
