"""Forward kinematics and geometric Jacobians over any leading batch shape.

All functions are pure, jit-/vmap-/grad-safe, and work in the robot's dtype. Public results
are ``jaxlie.SE3`` poses (wxyz_xyz) in the root link's frame.

Internally a pose is a unit quaternion (wxyz) and a translation, each stored as a tuple of
component arrays of shape (n_links, *batch). Written this way, the arithmetic over all
links is element-wise, and XLA fuses it into a few kernels instead of dozens of tiny ones:
on a CPU the kernel count, not the flop count, sets the cost of a single small solve.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.model.robot import PRISMATIC, REVOLUTE, Robot

Quat = tuple[jax.Array, jax.Array, jax.Array, jax.Array]  # w, x, y, z
Vec = tuple[jax.Array, jax.Array, jax.Array]


# --- quaternion / vector arithmetic on component tuples ----------------------------------


def qmul(a: Quat, b: Quat) -> Quat:
    """Hamilton product a * b."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return (
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    )


def qconj(a: Quat) -> Quat:
    return (a[0], -a[1], -a[2], -a[3])


def dot(a: Vec, b: Vec) -> jax.Array:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def sub(a: Vec, b: Vec) -> Vec:
    return tuple(x - y for x, y in zip(a, b))


def norm(a: Vec) -> jax.Array:
    return jnp.sqrt(dot(a, a))


def rotate(q: Quat, v: Vec) -> Vec:
    """R(q) v for a unit quaternion: v + 2w (u x v) + 2 u x (u x v)."""
    u = q[1:]
    t = cross(u, v)
    t = (2 * t[0], 2 * t[1], 2 * t[2])
    s = cross(u, t)
    return (v[0] + q[0] * t[0] + s[0], v[1] + q[0] * t[1] + s[1], v[2] + q[0] * t[2] + s[2])


def compose(a: tuple[Quat, Vec], b: tuple[Quat, Vec]) -> tuple[Quat, Vec]:
    """Pose a * b (b expressed in a's frame)."""
    (qa, pa), (qb, pb) = a, b
    r = rotate(qa, pb)
    return qmul(qa, qb), (pa[0] + r[0], pa[1] + r[1], pa[2] + r[2])


def materialize(parts: tuple) -> tuple:
    """Stacks component arrays, computes them once, and splits them again.

    XLA fuses element-wise producers into every consumer, recomputing them; with component
    tuples feeding many consumers (a pose feeds 7 outputs and several Jacobian rows) that
    multiplied the work per iteration several times over. The optimization barrier makes
    XLA materialize the stack once.
    """
    stacked = jax.lax.optimization_barrier(jnp.stack(parts, axis=0))
    return tuple(stacked[i] for i in range(len(parts)))


def split(x: jax.Array) -> tuple[jax.Array, ...]:
    """Leading axis of ``x`` into a tuple of components."""
    return tuple(x[i] for i in range(x.shape[0]))


def _per_link(values: jax.Array, batch_ndim: int) -> jax.Array:
    """(n_links,) robot constants shaped to broadcast against (n_links, *batch)."""
    return values.reshape(values.shape + (1,) * batch_ndim)


# --- kinematics ----------------------------------------------------------------------------
#
# Internally the batch axes come LAST: components are (n_links, *batch), Jacobian rows are
# (n_joints, *batch). With many configurations at once (a batch, or the solver's lanes) the
# innermost, contiguous axis is then the batch, which is what SIMD units and caches want;
# the public functions take and return (*batch, ...) as usual.


def _check_q(robot: Robot, q: jax.Array) -> jax.Array:
    q = jnp.asarray(q, robot.dtype)
    if q.ndim == 0 or q.shape[-1] != robot.n_joints:
        raise ValueError(
            f"q must have shape (*batch, {robot.n_joints}) for the actuated joints "
            f"{', '.join(robot.joint_names)}; got {q.shape}"
        )
    return q


def joint_values(robot: Robot, q_t: jax.Array) -> jax.Array:
    """Value of every link's parent joint, mimic joints resolved.

    Args:
        q_t: (n_joints, *batch), batch axes last.

    Returns:
        (n_links, *batch)
    """
    batch = q_t.shape[1:]
    if robot.n_joints == 0:  # nothing moves; q_t[index] would gather from an empty axis
        return jnp.zeros((robot.n_links, *batch), q_t.dtype)
    index = np.maximum(np.asarray(robot.q_index), 0)
    moving = _per_link(np.asarray(robot.q_index) >= 0, len(batch))
    multipliers = _per_link(robot.multipliers, len(batch))
    offsets = _per_link(robot.offsets, len(batch))
    return jnp.where(moving, q_t[index] * multipliers + offsets, 0.0)


def _local_frames(robot: Robot, q_t: jax.Array) -> tuple[Quat, Vec]:
    """Each link's pose in its parent link's frame, components (n_links, *batch)."""
    nb = q_t.ndim - 1
    values = joint_values(robot, q_t)
    types = _per_link(np.asarray(robot.joint_type), nb)
    half = 0.5 * jnp.where(types == REVOLUTE, values, 0.0)
    shift = jnp.where(types == PRISMATIC, values, 0.0)
    c, s = jnp.cos(half), jnp.sin(half)
    ax, ay, az = (_per_link(robot.axes[:, i], nb) for i in range(3))
    motion_q = (c, s * ax, s * ay, s * az)
    origin_q = tuple(_per_link(robot.origins[:, i], nb) for i in range(4))
    origin_p = tuple(_per_link(robot.origins[:, 4 + i], nb) for i in range(3))
    moved = rotate(origin_q, (shift * ax, shift * ay, shift * az))
    parts = materialize(qmul(origin_q, motion_q) + tuple(o + m for o, m in zip(origin_p, moved)))
    return parts[:4], parts[4:]


def frames_t(robot: Robot, q_t: jax.Array) -> tuple[Quat, Vec]:
    """Every link's pose in the root frame, components (n_links, *batch), from
    configurations ``q_t`` (n_joints, *batch) with the batch axes last.

    Composition by pointer jumping: after round k each link holds its pose relative to its
    2^k-th ancestor, so a tree of depth d takes ceil(log2 d) rounds of element-wise work.
    """
    quat, pos = _local_frames(robot, q_t)
    ancestor = np.maximum(np.asarray(robot.parent_index), 0)  # the root points at itself
    while np.any(ancestor != 0):
        # One gather of all seven components per round: (7, n_links, *batch).
        parts = split(jnp.stack(quat + pos, axis=0)[:, ancestor])
        quat, pos = compose((parts[:4], parts[4:]), (quat, pos))
        composed = materialize(quat + pos)
        quat, pos = composed[:4], composed[4:]
        ancestor = ancestor[ancestor]
    return quat, pos


def forward_kinematics(robot: Robot, q: jax.Array) -> jaxlie.SE3:
    """Poses of all links in the root frame.

    Args:
        robot: the model.
        q: (*batch, n_joints) joint positions in ``robot.joint_names`` order.

    Returns:
        ``jaxlie.SE3`` with ``wxyz_xyz`` of shape (*batch, n_links, 7), links in
        ``robot.link_names`` order.
    """
    q = _check_q(robot, q)
    quat, pos = frames_t(robot, jnp.moveaxis(q, -1, 0))
    stacked = jnp.stack(quat + pos, axis=0)  # (7, n_links, *batch)
    return jaxlie.SE3(jnp.moveaxis(stacked, (0, 1), (-1, -2)))


def _columns_to_joints(robot: Robot, link_columns: jax.Array, on_path: np.ndarray) -> jax.Array:
    """Sums per-link Jacobian columns (..., n_links, *batch) into per-joint ones
    (..., n_joints, *batch); ``link_columns`` has ``lead`` axes before the link axis.

    A joint drives one link, or several through mimic joints (times their multipliers).
    Done with static gathers and element-wise sums: a tiny ``dot`` costs several
    microseconds on a CPU, element-wise work fuses into the surrounding kernel.
    """
    index = np.asarray(robot.q_index)
    drivers = [np.flatnonzero((index == a) & on_path) for a in range(robot.n_joints)]
    depth = max(1, max((len(d) for d in drivers), default=0))
    nb = link_columns.ndim - 2  # batch axes after (rows, links)
    total = 0.0
    for k in range(depth):  # the k-th link each joint drives (link 0, scaled by 0, if none)
        used = np.array([len(d) > k for d in drivers], dtype=bool)
        links = np.array([d[k] if len(d) > k else 0 for d in drivers], dtype=np.int64)
        scale = jnp.where(used, robot.multipliers[links], 0.0)
        total = total + link_columns[:, links] * _per_link(scale, nb)
    return total


def jacobian_rows_t(robot: Robot, frames: tuple[Quat, Vec], link: int) -> tuple[Vec, Vec]:
    """Geometric Jacobian of ``link`` as rows: (linear rows, angular rows), each a tuple of
    three (n_joints, *batch) arrays, in the root frame, for the velocity of the link origin."""
    quat, pos = frames
    nb = quat[0].ndim - 1
    types = np.asarray(robot.joint_type)
    on_path = np.isin(np.arange(robot.n_links), robot.ancestors(link))
    revolute = _per_link(types == REVOLUTE, nb)
    prismatic = _per_link(types == PRISMATIC, nb)

    axis = rotate(quat, tuple(_per_link(robot.axes[:, i], nb) for i in range(3)))
    lever = tuple(p[link : link + 1] - p for p in pos)
    swept = cross(axis, lever)
    linear = tuple(
        jnp.where(revolute, s, jnp.where(prismatic, a, 0.0)) for s, a in zip(swept, axis)
    )
    angular = tuple(jnp.where(revolute, a, 0.0) for a in axis)
    # All six rows in one array, so the link -> joint gather runs once: (6, n_joints, *batch).
    columns = _columns_to_joints(robot, jnp.stack(linear + angular, axis=0), on_path)
    columns = jax.lax.optimization_barrier(columns)  # see materialize()
    rows = split(columns)
    return rows[:3], rows[3:]


def link_jacobian(robot: Robot, q: jax.Array, link: str | int) -> jax.Array:
    """Geometric Jacobian of a link, (*batch, 6, n_joints), rows [v; w] in the root frame.

    Computed analytically from the joint axes (not by autodiff); ``v`` is the velocity of
    the link frame's origin.
    """
    if isinstance(link, str):
        index = robot.link_index(link)
    else:
        index = operator.index(link)  # rejects floats such as 1.7
        if not -robot.n_links <= index < robot.n_links:
            raise ValueError(f"link index {link} is out of range for {robot.n_links} links")
        index %= robot.n_links
    q = _check_q(robot, q)
    linear, angular = jacobian_rows_t(robot, frames_t(robot, jnp.moveaxis(q, -1, 0)), index)
    stacked = jnp.stack(linear + angular, axis=0)  # (6, n_joints, *batch)
    return jnp.moveaxis(stacked, (0, 1), (-2, -1))
