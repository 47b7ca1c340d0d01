"""Boxes fixed to robot links (exact link geometry, such as the Panda's finger boxes) against
obstacles.

Spheres that contain a box reach past its faces, so a grasp whose real fingers pass a
millimetre from an object reads as a collision (docs/benchmarks/mbm_exact_links.md). A box
is checked as a box instead: its signed distance to an obstacle is bounded from below by
separating axes. Both shapes projected on a unit axis ``a`` are intervals; the gap between
them, ``|a . (c_obstacle - c_box)| - reach_box(a) - reach_obstacle(a)``, never exceeds their
Euclidean distance (projection shortens distances), and when they overlap the largest gap
over the axes is minus the smallest push along them that separates the shapes. The largest
gap over a few candidate axes is therefore a conservative signed distance: never more than
the true one, equal to it in face and edge contacts (between two boxes, whenever they
touch), a little less where a corner faces a corner or a curved surface. Candidates: against a box, the classic 15 (both
boxes' face normals and their edges' cross products); against a cylinder, the box's faces,
the cylinder's axis, their cross products, the radial direction to the box centre and the
direction between nearest points after one round of alternating projections; against a
capsule, the box's faces, their cross products with the segment and the direction to the
segment point nearest the box centre. Spheres and half spaces are exact.

Per box and obstacle also: the best axis as a unit ``normal`` and the box's ``witness``
point (its corner furthest along the axis towards the obstacle), so that a planner's rate
of the distance is ``normal . d witness / d q`` (the axis held fixed: exact for a
translation, first order for a turn).

Shapes: boxes (*batch, X) with centres (*batch, X, 3) and axes (*batch, X, 3, 3) (columns
are the box's x, y, z in the root frame), half extents (X, 3); obstacles of a
:class:`~pyroki_ros.collision.geometry.World` in its order (spheres, capsules, boxes, half
spaces, cylinders)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros.collision.geometry import FAR, RobotSpheres, World, pose_rotations
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot

_EPS = 1e-9  # below this length a candidate axis (a cross product of parallel edges) is void

# Everything below works on component tuples (x, y, z arrays of one broadcast shape, pairs of
# a robot box and an obstacle), element-wise only, as the spheres' distances do
# (distance.py: a whole kind fuses into one loop on a CPU; bench/box_distance_speed.py
# times this form against finger and hand spheres), and in each robot box's own frame:
# there a candidate axis's reach of the box is sum_i h_i |a_i| and the oriented-box formulas
# take every axis from the direction cosines. Vectors: tuples of 3; a box's axes ``u``: u[i]
# is its axis i (a vector).


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _local(u, v):
    """Root-frame vector v in the box frame whose axes are u."""
    return tuple(_dot(u[i], v) for i in range(3))


def _root(u, v):
    """Box-frame vector v back in the root frame."""
    return tuple(u[0][k] * v[0] + u[1][k] * v[1] + u[2][k] * v[2] for k in range(3))


def _reach(h, a):
    """Half-length of the robot box's projection on the (local) axis a."""
    return h[0] * jnp.abs(a[0]) + h[1] * jnp.abs(a[1]) + h[2] * jnp.abs(a[2])


def _cross_e(i: int, w):
    """e_i x w (local)."""
    k, l = (i + 1) % 3, (i + 2) % 3
    out = [0.0, 0.0, 0.0]
    out[k], out[l] = -w[l], w[k]
    return tuple(out)


def _normalised(gap, length):
    ok = length > _EPS
    return jnp.where(ok, gap / jnp.where(ok, length, 1.0), -FAR)


def _unit(v, length):
    ok = length > _EPS
    inverse = jnp.where(ok, 1.0 / jnp.where(ok, length, 1.0), 0.0)
    return tuple(x * inverse for x in v)


def _norm(v):
    return jnp.sqrt(_dot(v, v))


_E = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def _box_box(t, v, h, h2, with_axes):
    """Separating-axis candidates (gap, local unit axis) of the robot box (half sizes h, at
    the origin) and an obstacle box at t with axes v (v[j]: axis j, local) and half sizes
    h2: the 3 + 3 face normals and the 9 edge cross products."""
    a = [[jnp.abs(v[j][i]) for j in range(3)] for i in range(3)]  # a[i][j] = |u_i . v_j|
    out = []
    for i in range(3):
        reach_o = sum(a[i][j] * h2[j] for j in range(3))
        out.append((jnp.abs(t[i]) - h[i] - reach_o, _E[i]))
    for j in range(3):
        reach_r = sum(a[i][j] * h[i] for i in range(3))
        out.append((jnp.abs(_dot(v[j], t)) - reach_r - h2[j], v[j]))
    for i in range(3):
        k, l = (i + 1) % 3, (i + 2) % 3
        for j in range(3):
            m, n = (j + 1) % 3, (j + 2) % 3
            w = v[j]
            length = jnp.sqrt(w[k] * w[k] + w[l] * w[l])
            along = w[k] * t[l] - w[l] * t[k]
            reach_r = h[k] * jnp.abs(w[l]) + h[l] * jnp.abs(w[k])
            # (e_i x v_j) . v_m = +-(v_n)_i: the obstacle's reach needs no product.
            reach_o = h2[m] * a[i][n] + h2[n] * a[i][m]
            gap = _normalised(jnp.abs(along) - reach_r - reach_o, length)
            out.append((gap, _unit(_cross_e(i, w), length) if with_axes else None))
    return out


def _cylinder_point(x, t, z, radius, half_height):
    """The point of a solid cylinder (centre t, unit axis z, radius, half height) nearest x."""
    rel = tuple(a - b for a, b in zip(x, t))
    height = _dot(rel, z)
    radial = tuple(r - height * c for r, c in zip(rel, z))
    rho = _norm(radial)
    scale = jnp.where(rho > radius, radius / jnp.where(rho > 0, rho, 1.0), 1.0)
    height = jnp.clip(height, -half_height, half_height)
    return tuple(a + height * c + scale * r for a, c, r in zip(t, z, radial))


def _box_cylinder(t, z, h, radius, half_height, with_axes):
    """Candidates for the robot box and a solid cylinder at t with unit axis z (local): the
    box's faces, the cylinder's axis, their cross products, the radial direction to the box
    centre and the direction between nearest points after one round of alternating
    projections (a corner or edge facing the rim or the curved side)."""
    out = []
    for i in range(3):
        sine = jnp.sqrt(jnp.maximum(1.0 - z[i] * z[i], 0.0))
        gap = jnp.abs(t[i]) - h[i] - half_height * jnp.abs(z[i]) - radius * sine
        out.append((gap, _E[i]))
    along_z = _dot(t, z)
    out.append((jnp.abs(along_z) - _reach(h, z) - half_height, z))
    for i in range(3):
        k, l = (i + 1) % 3, (i + 2) % 3
        length = jnp.sqrt(z[k] * z[k] + z[l] * z[l])
        along = z[k] * t[l] - z[l] * t[k]
        reach_r = h[k] * jnp.abs(z[l]) + h[l] * jnp.abs(z[k])
        gap = _normalised(jnp.abs(along) - reach_r, length) - radius  # a . z = 0
        out.append((gap, _unit(_cross_e(i, z), length) if with_axes else None))
    d = tuple(a - along_z * c for a, c in zip(t, z))  # axis -> box centre, across the axis
    length = _norm(d)
    out.append((_normalised(length * length - _reach(h, d), length) - radius, _unit(d, length)))
    zero = tuple(jnp.zeros_like(x) for x in t)
    x = _cylinder_point(zero, t, z, radius, half_height)
    x = _cylinder_point(tuple(jnp.clip(c, -e, e) for c, e in zip(x, h)), t, z, radius, half_height)
    a = tuple(c - jnp.clip(c, -e, e) for c, e in zip(x, h))
    length = _norm(a)
    cos = _dot(a, z)
    reach_c = half_height * jnp.abs(cos) + radius * jnp.sqrt(
        jnp.maximum(length * length - cos * cos, 0.0)
    )
    gap = _normalised(jnp.abs(_dot(a, t)) - _reach(h, a) - reach_c, length)
    out.append((gap, _unit(a, length) if with_axes else None))
    return out


def _box_capsule(a0, s, h, radius, with_axes):
    """Candidates for the robot box and a capsule from a0 along s (local): the box's faces,
    their cross products with the segment and the direction to the segment point nearest
    the box centre."""
    middle = tuple(a + 0.5 * b for a, b in zip(a0, s))
    out = [(jnp.abs(middle[i]) - h[i] - 0.5 * jnp.abs(s[i]) - radius, _E[i]) for i in range(3)]
    for i in range(3):
        k, l = (i + 1) % 3, (i + 2) % 3
        length = jnp.sqrt(s[k] * s[k] + s[l] * s[l])
        along = s[k] * middle[l] - s[l] * middle[k]
        reach_r = h[k] * jnp.abs(s[l]) + h[l] * jnp.abs(s[k])
        gap = _normalised(jnp.abs(along) - reach_r, length) - radius
        out.append((gap, _unit(_cross_e(i, s), length) if with_axes else None))
    length2 = jnp.maximum(_dot(s, s), _EPS)
    f = jnp.clip(-_dot(a0, s) / length2, 0.0, 1.0)
    x = tuple(a + f * b for a, b in zip(a0, s))
    length = _norm(x)
    gap = jnp.abs(_dot(x, middle)) - _reach(h, x) - 0.5 * jnp.abs(_dot(x, s))
    out.append((_normalised(gap, length) - radius, _unit(x, length) if with_axes else None))
    return out


def _pairs(c, u, h, world: World, along, with_axes: bool, counts=None):
    """Per obstacle kind present: distance, and with axes the normal and witness (root
    frame), of every robot box and obstacle pair. Robot quantities (centre c, axes u, half
    sizes h) are component arrays with a size-1 obstacle axis; ``along`` puts an (O,)
    obstacle array on that axis. ``counts``: the kinds to take (default ``world.counts``);
    a kind's arrays may also come laid out on the robot's axes already, (X, 1, B, ...): one
    obstacle per box and configuration (``World.take``), with ``along`` the identity."""
    ns, nc, nb, nh, ny = world.counts if counts is None else counts
    parts = []

    def vector(a):  # (O, 3) -> three arrays on the obstacle axis
        return tuple(along(a[..., k]) for k in range(3))

    def point(a):  # obstacle points relative to the box centre, in its frame
        return _local(u, tuple(p - x for p, x in zip(vector(a), c)))

    def best(candidates, t):
        """The largest gap; with axes, its normal and the box's corner towards the obstacle."""
        d, axis = candidates[0]
        for gap, a in candidates[1:]:
            if with_axes:
                better = gap > d
                axis = tuple(jnp.where(better, x, y) for x, y in zip(a, axis))
            d = jnp.maximum(d, gap)
        if not with_axes:
            return (d,)
        sign = jnp.where(_dot(axis, t) >= 0, 1.0, -1.0)
        towards = tuple(sign * x for x in axis)
        corner = tuple(jnp.where(x >= 0, e, -e) for x, e in zip(towards, h))
        witness = tuple(a + b for a, b in zip(c, _root(u, corner)))
        return d, tuple(-x for x in _root(u, towards)), witness

    if ns:  # exact: the sphere centre's distance to the box
        p = point(world.sphere_centers)
        nearest = tuple(jnp.clip(x, -e, e) for x, e in zip(p, h))
        excess = tuple(jnp.abs(x) - e for x, e in zip(p, h))
        outside = _norm(tuple(jnp.maximum(e, 0.0) for e in excess))
        deepest = jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2])
        d = outside + jnp.minimum(deepest, 0.0) - along(world.sphere_radii)
        if with_axes:
            # Outside: from the sphere to the box's nearest point; inside: out through the
            # nearest face.
            first = (excess[0] >= excess[1]) & (excess[0] >= excess[2])
            second = ~first & (excess[1] >= excess[2])
            face = (first, second, ~first & ~second)
            away = _unit(tuple(n - x for n, x in zip(nearest, p)), outside)
            inward = tuple(jnp.where(f, -jnp.sign(x), 0.0) for f, x in zip(face, p))
            local = tuple(jnp.where(outside > 0, a, b) for a, b in zip(away, inward))
            witness = tuple(a + b for a, b in zip(c, _root(u, nearest)))
            parts.append((d, _root(u, local), witness))
        else:
            parts.append((d,))
    if nc:
        a0 = point(world.capsule_a)
        s = _local(u, vector(world.capsule_b - world.capsule_a))
        radius = along(world.capsule_radii)
        middle = tuple(a + 0.5 * b for a, b in zip(a0, s))
        parts.append(best(_box_capsule(a0, s, h, radius, with_axes), middle))
    if nb:
        t = point(world.box_poses[..., 4:])
        axes = pose_rotations(world.box_poses)
        v = tuple(_local(u, vector(axes[..., :, j])) for j in range(3))
        h2 = tuple(along(world.box_half_extents[..., j]) for j in range(3))
        parts.append(best(_box_box(t, v, h, h2, with_axes), t))
    if nh:  # exact: the corner deepest against the normal
        n = vector(world.halfspace_normals)
        local = _local(u, n)
        d = _dot(n, c) + along(world.halfspace_offsets) - _reach(h, local)
        if with_axes:
            corner = tuple(jnp.where(x >= 0, -e, e) for x, e in zip(local, h))
            witness = tuple(a + b for a, b in zip(c, _root(u, corner)))
            parts.append((d, tuple(jnp.broadcast_to(x, d.shape) for x in n), witness))
        else:
            parts.append((d,))
    if ny:
        t = point(world.cylinder_poses[..., 4:])
        z = _local(u, vector(pose_rotations(world.cylinder_poses)[..., :, 2]))
        radius, height = along(world.cylinder_radii), along(world.cylinder_half_heights)
        parts.append(best(_box_cylinder(t, z, h, radius, height, with_axes), t))
    return parts


def _components(centers: jax.Array, axes: jax.Array, half: jax.Array):
    """Batch-first arrays (B, X, 3), (B, X, 3, 3), (X, 3) -> batch-last component tuples
    (X, 1, B) (obstacles go on axis 1)."""
    c = tuple(centers[..., k].T[:, None, :] for k in range(3))
    u = tuple(tuple(axes[..., k, i].T[:, None, :] for k in range(3)) for i in range(3))
    h = tuple(jnp.asarray(half[:, k], centers.dtype)[:, None, None] for k in range(3))
    return c, u, h


def _on_axis_1(a: jax.Array) -> jax.Array:
    return a[None, :, None]


def box_obstacle_terms(
    centers: jax.Array, axes: jax.Array, half_extents: jax.Array, world: World
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per robot box and obstacle: the conservative signed distance (*batch, X, O), m, its
    unit normal (*batch, X, O, 3) and the box's witness point (*batch, X, O, 3): the distance
    grows at the rate ``normal . velocity of the witness``.

    Args:
        centers: (*batch, X, 3) box centres in the root frame.
        axes: (*batch, X, 3, 3) box axes as columns, in the root frame.
        half_extents: (X, 3) half sizes along them.
        world: the obstacles (any kind; padding dummies come out ~FAR away).
    """
    batch = centers.shape[:-2]
    flat_c, flat_u = centers.reshape(-1, *centers.shape[-2:]), axes.reshape(-1, *axes.shape[-3:])
    c, u, h = _components(flat_c, flat_u, half_extents)
    parts = _pairs(c, u, h, world, _on_axis_1, True)
    x_count = centers.shape[-2]
    if not parts:
        shape = (*batch, x_count, 0)
        return jnp.zeros(shape, centers.dtype), jnp.zeros((*shape, 3)), jnp.zeros((*shape, 3))

    def back(a):  # (X, O, B) -> (*batch, X, O)
        a = jnp.broadcast_to(a, (x_count, a.shape[1], flat_c.shape[0]))
        return jnp.moveaxis(a, -1, 0).reshape(*batch, x_count, -1)

    d = jnp.concatenate([back(part[0]) for part in parts], -1)
    normal, witness = (
        jnp.concatenate([jnp.stack([back(x) for x in part[i]], -1) for part in parts], -2)
        for i in (1, 2)
    )
    return d, normal, witness


def box_frames_at(robot: Robot, spheres: RobotSpheres, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Root-frame centres (*batch, X, 3) and axes (*batch, X, 3, 3) of the robot's boxes at
    configurations q (*batch, n_joints)."""
    poses = k.forward_kinematics(robot, q).wxyz_xyz[
        ..., np.asarray(spheres.box_link_indices, int), :
    ]
    return box_frames(poses, spheres.box_poses.astype(poses.dtype))


def box_frames_t(quat, pos, local_poses: jax.Array):
    """Component form of :func:`box_frames`: link frames ``quat`` (four (X, B)) and ``pos``
    (three (X, B)) of each box's link -> centres (three (X, B)) and axes (u[i]: three)."""
    local = tuple(local_poses[:, i][:, None].astype(pos[0].dtype) for i in range(7))
    return _compose(quat, pos, local)


def _compose(quat, pos, local):
    """Centres and axes (component tuples) of boxes at ``local`` (seven component arrays,
    wxyz_xyz in their links' frames) on links at ``quat``, ``pos``."""
    bq = k.qmul(quat, local[:4])
    offset = k.rotate(quat, local[4:])
    centers = tuple(o + p for o, p in zip(offset, pos))
    zero, one = jnp.zeros_like(bq[0]), jnp.ones_like(bq[0])
    axes = tuple(k.rotate(bq, tuple(one if j == i else zero for j in range(3))) for i in range(3))
    return centers, axes


def box_frames(link_poses: jax.Array, local_poses: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Root-frame centres (..., X, 3) and axes (..., X, 3, 3) (columns) of boxes whose links
    are at ``link_poses`` (..., X, 7) wxyz_xyz, each box at ``local_poses`` (X, 7) in its
    link's frame."""
    parts = tuple(link_poses[..., i] for i in range(7))
    local = tuple(local_poses[:, i].astype(link_poses.dtype) for i in range(7))
    centers, axes = _compose(parts[:4], parts[4:], local)
    return jnp.stack(centers, -1), jnp.stack([jnp.stack(a, -1) for a in axes], -1)


def robot_box_distances(
    robot: Robot,
    spheres: RobotSpheres,
    q: jax.Array,
    world: World,
    world_checked: jax.Array | None = None,
) -> jax.Array:
    """Conservative signed distances (*batch, X, O), m, of the robot's boxes at
    configurations q (*batch, n_joints) to every obstacle; ``world_checked``: all world rows
    (S + X, O) of :func:`~pyroki_ros.collision.checked_pairs` (the boxes' are the last X),
    inf where False."""
    checked = None if world_checked is None else world_checked[spheres.n_spheres :]
    centers, axes = box_frames_at(robot, spheres, q)
    return box_distances(centers, axes, spheres.box_half_extents, world, checked)


def box_distances(
    centers: jax.Array,
    axes: jax.Array,
    half_extents: jax.Array,
    world: World,
    checked: jax.Array | None = None,
) -> jax.Array:
    """Conservative signed distances (*batch, X, O), m, of robot boxes to every obstacle
    (:func:`box_obstacle_terms`); inf where ``checked`` (X, O) is False."""
    batch, x_count = centers.shape[:-2], centers.shape[-2]
    flat_c, flat_u = centers.reshape(-1, *centers.shape[-2:]), axes.reshape(-1, *axes.shape[-3:])
    c, u, h = _components(flat_c, flat_u, half_extents)
    parts = _pairs(c, u, h, world, _on_axis_1, False)
    if not parts:
        return jnp.zeros((*batch, x_count, 0), centers.dtype)
    d = jnp.concatenate(
        [jnp.broadcast_to(p[0], (x_count, p[0].shape[1], flat_c.shape[0])) for p in parts], 1
    )
    d = jnp.moveaxis(d, -1, 0).reshape(*batch, x_count, -1)
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def nearest_box_obstacle_t(c, u, half, world: World, checked: jax.Array):
    """The planner's form of the nearest obstacle per robot box: box centres ``c`` (three
    (X, B)) and axes ``u`` (u[i]: three (X, B)), half sizes (X, 3), ``checked`` (X, O);
    returns the distance (X, B), normal and witness (three (X, B) each). As
    :func:`~pyroki_ros.collision.distance.nearest_obstacle_t` does for points: distances
    alone, one obstacle after the other over those the scene has (not the padding), then
    the normal and witness of the nearest alone."""
    c = tuple(x[:, None, :] for x in c)
    u = tuple(tuple(x[:, None, :] for x in axis) for axis in u)
    h = tuple(jnp.asarray(half[:, k], c[0].dtype)[:, None, None] for k in range(3))
    shape = (c[0].shape[0], c[0].shape[2])
    best = None
    offset = 0
    for kind, (count, live) in enumerate(zip(world.counts, world.live_counts())):
        if count == 0:
            continue
        only = tuple(int(i == kind) for i in range(len(world.counts)))

        def visit(o, nearest, kind=kind, only=only, offset=offset):
            (d,) = _pairs(c, u, h, world.take(kind, o[None]), _on_axis_1, False, only)[0]
            d = jnp.where(jax.lax.dynamic_index_in_dim(checked, offset + o, 1), d[:, 0], FAR)
            closer = d < nearest[0]
            return jnp.where(closer, d, nearest[0]), jnp.where(closer, o, nearest[1])

        start = (jnp.full(shape, FAR, c[0].dtype), jnp.zeros(shape, jnp.int32))
        d, index = jax.lax.fori_loop(0, live, visit, start)
        offset += count
        # The nearest obstacle laid out per box and configuration (X, 1, B, ...).
        nearest = world.take(kind, index[:, None, :])
        _, normal, witness = _pairs(c, u, h, nearest, lambda a: a, True, only)[0]
        normal, witness = (tuple(jnp.broadcast_to(x, d[:, None].shape)[:, 0] for x in v)
                           for v in (normal, witness))  # fmt: skip
        if best is None:
            best = (d, normal, witness)
        else:
            closer = d < best[0]
            best = (
                jnp.where(closer, d, best[0]),
                tuple(jnp.where(closer, x, y) for x, y in zip(normal, best[1])),
                tuple(jnp.where(closer, x, y) for x, y in zip(witness, best[2])),
            )
    return best
