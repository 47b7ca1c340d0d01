"""Signed distances and their gradients: sphere centres at a configuration, one distance and one
gradient function per obstacle kind with a dispatch over the kinds, and the world, self,
collision and minimum distances built on them."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros.collision.boxes import robot_box_distances
from pyroki_ros.collision.geometry import FAR, RobotSpheres, World, pose_rotations
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot


def sphere_centers(robot: Robot, spheres: RobotSpheres, q: jax.Array) -> jax.Array:
    """World (root-frame) sphere centres, (*batch, S, 3), for configurations q
    (*batch, n_joints)."""
    poses = k.forward_kinematics(robot, q).wxyz_xyz[..., np.asarray(spheres.link_indices, int), :]
    quat = tuple(poses[..., i] for i in range(4))
    local = tuple(spheres.centers[:, i].astype(poses.dtype) for i in range(3))
    rotated = k.rotate(quat, local)
    return jnp.stack([rotated[i] + poses[..., 4 + i] for i in range(3)], axis=-1)


def safe_norm(*xs: jax.Array) -> jax.Array:
    """|(x, y, z)| (or |(x, y)|: across a cylinder's axis) of component arrays, with gradient
    0 (not NaN) at 0."""
    sq = sum(x * x for x in xs)
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def _along(a: jax.Array, ndim: int, axis: int) -> jax.Array:
    """(N,) -> broadcastable against points of ``ndim`` dimensions, N on ``axis``."""
    shape = [1] * ndim
    shape[axis] = a.shape[0]
    return a.reshape(shape)


def _sphere_part(centers, world: World, along) -> jax.Array:
    o = world.sphere_centers
    d = safe_norm(*(c - along(o[:, i]) for i, c in enumerate(centers)))
    return d - along(world.sphere_radii)


def _capsule_part(centers, world: World, along) -> jax.Array:
    a, ab = world.capsule_a, world.capsule_b - world.capsule_a
    length2 = jnp.sum(ab * ab, axis=-1)
    rel = tuple(c - along(a[:, i]) for i, c in enumerate(centers))
    along_ab = sum(r * along(ab[:, i]) for i, r in enumerate(rel))
    t = jnp.clip(along_ab / along(jnp.where(length2 > 0, length2, 1.0)), 0.0, 1.0)
    d = safe_norm(*(r - t * along(ab[:, i]) for i, r in enumerate(rel)))
    return d - along(world.capsule_radii)


def _in_frames(centers, pose, along):
    """The points in the frames of obstacles at wxyz_xyz poses (N, 7): R^T (c - p)."""
    rot = pose_rotations(pose)
    rel = tuple(c - along(pose[:, 4 + i]) for i, c in enumerate(centers))
    return tuple(sum(along(rot[:, j, i]) * rel[j] for j in range(3)) for i in range(3))


def _box_part(centers, world: World, along) -> jax.Array:
    local = _in_frames(centers, world.box_poses, along)
    excess = tuple(jnp.abs(x) - along(world.box_half_extents[:, i]) for i, x in enumerate(local))
    outside = safe_norm(*(jnp.maximum(e, 0.0) for e in excess))
    inside = jnp.minimum(jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2]), 0.0)
    return outside + inside


def _halfspace_part(centers, world: World, along) -> jax.Array:
    n = world.halfspace_normals
    d = sum(c * along(n[:, i]) for i, c in enumerate(centers))
    return d + along(world.halfspace_offsets)


def _cylinder_part(centers, world: World, along) -> jax.Array:
    """Exact signed distance to finite solid cylinders along their local z: radial excess
    ``|xy| - r`` and axial excess ``|z| - h`` combined like a 2-D box's (outside: the norm of
    their positive parts, the distance to the side, a cap or the rim; inside: the larger,
    minus the depth to the nearest surface)."""
    local = _in_frames(centers, world.cylinder_poses, along)
    radial = safe_norm(local[0], local[1]) - along(world.cylinder_radii)
    axial = jnp.abs(local[2]) - along(world.cylinder_half_heights)
    outside = safe_norm(jnp.maximum(radial, 0.0), jnp.maximum(axial, 0.0))
    inside = jnp.minimum(jnp.maximum(radial, axial), 0.0)
    return outside + inside


# In the order of ``World.counts`` (geometry.KINDS).
_PARTS = (_sphere_part, _capsule_part, _box_part, _halfspace_part, _cylinder_part)


def obstacle_distances_t(centers: tuple[jax.Array, ...], world: World, axis: int) -> jax.Array:
    """Signed distances from points to every obstacle's surface, component form (m).

    Element-wise over separate x, y, z arrays, so the whole computation fuses (the form the
    trajectory optimiser's inner loop needs); :func:`world_distances` is this in (..., 3)
    layout.

    Args:
        centers: three arrays of one shape with a size-1 obstacle axis at ``axis``.
        world: the obstacles.
        axis: where the obstacle axis is.

    Returns:
        the centres' shape with ``axis`` of size Ns + Nc + Nb + Nh + Ny: spheres, capsules,
        boxes, half-spaces, cylinders in that order.
    """
    along = lambda a: _along(a, centers[0].ndim, axis)
    # Every part has the centres' shape with its own count on the obstacle axis.
    return jnp.concatenate([part(centers, world, along) for part in _PARTS], axis=axis)


def unit3(v) -> tuple[jax.Array, ...]:
    """v / |v| of a component triple (zero stays zero)."""
    length = jnp.maximum(safe_norm(*v), 1e-12)
    return tuple(x / length for x in v)


def _sphere_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    o = world.sphere_centers[index]  # (*shape, 3)
    return unit3(tuple(p - o[..., i] for i, p in enumerate(points)))


def _capsule_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    a = world.capsule_a[index]
    ab = world.capsule_b[index] - a
    length2 = jnp.sum(ab * ab, axis=-1)
    rel = tuple(p - a[..., i] for i, p in enumerate(points))
    t = sum(r * ab[..., i] for i, r in enumerate(rel)) / jnp.where(length2 > 0, length2, 1.0)
    t = jnp.clip(t, 0.0, 1.0)
    # The closest point is optimal along the segment: only the offset from it counts.
    return unit3(tuple(r - t * ab[..., i] for i, r in enumerate(rel)))


def _to_frame(points, pose):
    """The rotation (wxyz components) of poses (*shape, 7) and the points in their frames."""
    quat = tuple(pose[..., i] for i in range(4))
    rel = tuple(p - pose[..., 4 + i] for i, p in enumerate(points))
    return quat, k.rotate(k.qconj(quat), rel)


def _box_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    half = world.box_half_extents[index]
    quat, local = _to_frame(points, world.box_poses[index])
    sign = tuple(jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype) for x in local)
    excess = tuple(jnp.abs(x) - half[..., i] for i, x in enumerate(local))
    # Outside: away from the nearest surface point; inside: out through the nearest face.
    out = unit3(tuple(s * jnp.maximum(e, 0.0) for s, e in zip(sign, excess)))
    first = (excess[0] >= excess[1]) & (excess[0] >= excess[2])
    second = ~first & (excess[1] >= excess[2])
    face = (first, second, ~first & ~second)
    is_out = jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2]) > 0
    g = tuple(jnp.where(is_out, o, jnp.where(f, s, 0.0)) for o, f, s in zip(out, face, sign))
    return k.rotate(quat, g)


def _halfspace_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    n = world.halfspace_normals[index]
    return tuple(n[..., i] for i in range(3))


def _cylinder_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    quat, local = _to_frame(points, world.cylinder_poses[index])
    rho = safe_norm(local[0], local[1])
    # Radial unit vector; on the axis every radial direction is as good: take local x, so a
    # sphere on the axis of a can is still pushed out (a zero gradient would stall it).
    off_axis = rho > 0
    safe_rho = jnp.where(off_axis, rho, 1.0)
    ux = jnp.where(off_axis, local[0] / safe_rho, 1.0)
    uy = jnp.where(off_axis, local[1] / safe_rho, 0.0)
    sz = jnp.where(local[2] >= 0, 1.0, -1.0).astype(local[2].dtype)
    radial = rho - world.cylinder_radii[index]
    axial = jnp.abs(local[2]) - world.cylinder_half_heights[index]
    # Outside: away from the nearest surface point (side, cap or rim); inside: out through
    # the nearer of the side and the cap.
    er, ez = jnp.maximum(radial, 0.0), jnp.maximum(axial, 0.0)
    out = unit3((er * ux, er * uy, ez * sz))
    side = radial >= axial
    zero = jnp.zeros_like(ux)
    inward = (jnp.where(side, ux, zero), jnp.where(side, uy, zero), jnp.where(side, zero, sz))
    is_out = jnp.maximum(radial, axial) > 0
    g = tuple(jnp.where(is_out, o, i) for o, i in zip(out, inward))
    return k.rotate(quat, g)


# In the order of ``World.counts`` (geometry.KINDS).
_GRADIENTS = (
    _sphere_gradient,
    _capsule_gradient,
    _box_gradient,
    _halfspace_gradient,
    _cylinder_gradient,
)


def _kind_minima(points, world: World, checked, with_index: bool):
    """Per obstacle kind present: (kind, distance (*shape) from each point to its nearest
    checked obstacle of that kind, that obstacle's index (*shape) or None). One obstacle
    after the other with a running minimum, over the obstacles the scene has
    (:meth:`World.live_counts`: a loop that stops before the padding, so a coarse bucket
    costs nothing here). Without the index the loop carries half the state: the distances
    of the planner's spheres in four MotionBenchMaker scenes, 64-512 configurations, at
    0.42-0.72 of the cost with it (median 0.55; bench/clearance_check.py,
    docs/benchmarks/clearance_check.md)."""
    shape = jnp.broadcast_shapes(*(p.shape for p in points))
    expanded = tuple(p[..., None] for p in points)
    along = lambda a: _along(a, len(shape) + 1, len(shape))
    offset = 0
    for kind, (part, count, live) in enumerate(zip(_PARTS, world.counts, world.live_counts())):
        if count == 0:
            continue

        def distance(o, kind=kind, part=part, offset=offset):
            d = part(expanded, world.take(kind, o[None]), along)[..., 0]
            if checked is None:
                return d
            return jnp.where(jax.lax.dynamic_index_in_dim(checked, offset + o, -1, False), d, FAR)

        far = jnp.full(shape, FAR, points[0].dtype)
        if with_index:

            def visit(o, nearest, distance=distance):
                d = distance(o)
                closer = d < nearest[0]
                return jnp.where(closer, d, nearest[0]), jnp.where(closer, o, nearest[1])

            d, index = jax.lax.fori_loop(0, live, visit, (far, jnp.zeros(shape, jnp.int32)))
        else:
            d = jax.lax.fori_loop(0, live, lambda o, d, f=distance: jnp.minimum(d, f(o)), far)
            index = None
        offset += count
        yield kind, d, index


def nearest_obstacle_t(
    points: tuple[jax.Array, jax.Array, jax.Array],
    world: World,
    checked: jax.Array | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """Signed distance from each point to its nearest obstacle surface, and that distance's
    gradient with respect to the point (a unit vector pointing away from the obstacle).

    The distances are computed forward only (:func:`_kind_minima`, keeping the nearest
    obstacle's index); the gradient is worked out analytically for the nearest obstacle
    alone (a reverse pass over all of them cost twice the forward pass).

    Args:
        points: three component arrays of one shape (*shape).
        world: the obstacles (at least one).
        checked: optional, broadcastable to (*shape, N): False where a point and an obstacle
            may touch (:func:`checked_pairs`); such an obstacle is ``FAR`` away for it.

    Returns:
        distance (*shape), gradient: three arrays (*shape).
    """
    best = None
    for kind, d, index in _kind_minima(points, world, checked, with_index=True):
        g = _GRADIENTS[kind](points, world, index)
        best = (
            (d, g) if best is None else jax.tree.map(partial(jnp.where, d < best[0]), (d, g), best)
        )
    if best is None:
        raise ValueError("nearest_obstacle_t needs at least one obstacle")
    d, *g = k.materialize((best[0], *best[1]))
    return d, tuple(g)


def obstacle_clearance_t(
    points: tuple[jax.Array, jax.Array, jax.Array],
    world: World,
    checked: jax.Array | None = None,
) -> jax.Array:
    """Signed distance (*shape) from each point (three component arrays of one shape) to its
    nearest checked obstacle surface, without the gradient or which obstacle: the check's
    form of :func:`nearest_obstacle_t` (same arguments); ``FAR`` with no obstacle."""
    shape = jnp.broadcast_shapes(*(p.shape for p in points))
    best = jnp.full(shape, FAR, points[0].dtype)
    for _, d, _ in _kind_minima(points, world, checked, with_index=False):
        best = jnp.minimum(best, d)
    return best


def world_distances(
    centers: jax.Array, radii: jax.Array, world: World, checked: jax.Array | None = None
) -> jax.Array:
    """Signed distances between robot spheres and every obstacle, m (negative: penetration).

    Args:
        centers: (*batch, S, 3) sphere centres in the root frame.
        radii: (S,) (or broadcastable to (*batch, S)) sphere radii.
        world: the obstacles.
        checked: optional (S, N) bool (:func:`checked_pairs`): inf where False.

    Returns:
        (*batch, S, Ns + Nc + Nb + Nh + Ny): spheres, capsules, boxes, half-spaces, cylinders
        in that order.
    """
    components = tuple(centers[..., :, None, i] for i in range(3))  # (*batch, S, 1)
    d = obstacle_distances_t(components, world, axis=-1) - jnp.asarray(radii)[..., :, None]
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def self_distances(
    centers: jax.Array, spheres: RobotSpheres, checked: jax.Array | None = None
) -> jax.Array:
    """Signed distances of the self-collision pairs, (*batch, P), m.

    Args:
        centers: (*batch, S, 3) root-frame sphere centres (from :func:`sphere_centers`).
        spheres: gives the pairs ``spheres.self_pairs`` (P, 2) and the distance each
            collides below, ``spheres.self_reach`` (P,) (radii plus buffers).
        checked: optional (P,) bool (:func:`checked_pairs`): inf where False.
    """
    i, j = spheres.self_pairs[:, 0], spheres.self_pairs[:, 1]
    gap = centers[..., i, :] - centers[..., j, :]
    d = safe_norm(gap[..., 0], gap[..., 1], gap[..., 2]) - spheres.self_reach
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def collision_distances(
    robot: Robot,
    spheres: RobotSpheres,
    q: jax.Array,
    world: World | None = None,
    self_collision: bool = True,
    checked: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """All signed distances as one vector per configuration: (*batch, S * N + X * N + P)
    with the spheres' world distances (row-major over (S, N)) first, then the boxes'
    (conservative, :mod:`~pyroki_ros.collision.boxes`; none without boxes), then the self
    pairs. A residual ``max(0, margin - d)`` of it is zero exactly when every clearance
    exceeds ``margin``. ``checked``: (world (S + X, N), self (P,)) from
    :func:`checked_pairs`; unchecked pairs are inf. Without it, every sphere whose role
    includes the world and every box is checked against every obstacle.
    """
    centers = sphere_centers(robot, spheres, q)
    all_world, checked_self = (None, None) if checked is None else checked
    if all_world is not None:
        checked_world = all_world[: spheres.n_spheres]  # the boxes' rows follow
    else:
        checked_world = None if spheres.world_mask.all() else spheres.world_mask[:, None]
    parts = []
    if world is not None:
        d = world_distances(centers, spheres.radii, world, checked_world)
        parts.append(d.reshape(*d.shape[:-2], -1))
        if spheres.n_boxes:
            d = robot_box_distances(robot, spheres, q, world, all_world)
            parts.append(d.reshape(*d.shape[:-2], -1))
    if self_collision:
        parts.append(self_distances(centers, spheres, checked_self))
    if not parts:
        return jnp.zeros((*centers.shape[:-2], 0), centers.dtype)
    return jnp.concatenate(parts, axis=-1)


def min_distance(
    robot: Robot,
    spheres: RobotSpheres,
    q: jax.Array,
    world: World | None = None,
    self_collision: bool = True,
    checked: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Smallest signed distance (world and/or self), (*batch,), m; +inf if nothing is checked."""
    d = collision_distances(robot, spheres, q, world, self_collision, checked)
    return jnp.min(d, axis=-1, initial=jnp.inf)
