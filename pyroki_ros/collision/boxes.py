"""Boxes fixed to robot links (exact link geometry, such as the Panda's finger boxes), and
convex hulls (a link's convex collision mesh, such as the Panda's hand, measured with its
bounding box and gjk.py), against obstacles. (Over 600 lines: one distance per
obstacle kind for boxes and hulls together, since a hull reuses its bounding box's
candidates and the component helpers below.)

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

from pyroki_ros.collision import gjk
from pyroki_ros.collision.geometry import FAR, RobotSpheres, World, pose_rotations
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.kinematics import dot, norm
from pyroki_ros.model.robot import Robot

_EPS = 1e-9  # below this length a candidate axis (a cross product of parallel edges) is void

# Everything below works on component tuples (x, y, z arrays of one broadcast shape, pairs of
# a robot box and an obstacle), element-wise only, as the spheres' distances do
# (distance.py: a whole kind fuses into one loop on a CPU; bench/box_distance_speed.py
# times this form against finger and hand spheres), and in each robot box's own frame:
# there a candidate axis's reach of the box is sum_i h_i |a_i| and the oriented-box formulas
# take every axis from the direction cosines. Vectors: tuples of 3; a box's axes ``u``: u[i]
# is its axis i (a vector).


def _local(u, v):
    """Root-frame vector v in the box frame whose axes are u."""
    return tuple(dot(u[i], v) for i in range(3))


def _root(u, v):
    """Box-frame vector v back in the root frame."""
    return tuple(u[0][k] * v[0] + u[1][k] * v[1] + u[2][k] * v[2] for k in range(3))


def _reach(h, a):
    """Half-length of the robot box's projection on the (local) axis a."""
    return h[0] * jnp.abs(a[0]) + h[1] * jnp.abs(a[1]) + h[2] * jnp.abs(a[2])


def _edge(i, w, t, h, reach_o, with_axes):
    """The candidate along e_i x w (local) of the robot box and an obstacle at t whose reach
    along it, times |e_i x w|, is reach_o."""
    k, l = (i + 1) % 3, (i + 2) % 3
    length = jnp.sqrt(w[k] * w[k] + w[l] * w[l])
    along = w[k] * t[l] - w[l] * t[k]
    reach_r = h[k] * jnp.abs(w[l]) + h[l] * jnp.abs(w[k])
    gap = _normalised(jnp.abs(along) - reach_r - reach_o, length)
    axis = [0.0, 0.0, 0.0]  # e_i x w
    axis[k], axis[l] = -w[l], w[k]
    return gap, _unit(axis, length) if with_axes else None


def _normalised(gap, length):
    ok = length > _EPS
    return jnp.where(ok, gap / jnp.where(ok, length, 1.0), -FAR)


def _unit(v, length):
    ok = length > _EPS
    inverse = jnp.where(ok, 1.0 / jnp.where(ok, length, 1.0), 0.0)
    return tuple(x * inverse for x in v)


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
        out.append((jnp.abs(dot(v[j], t)) - reach_r - h2[j], v[j]))
    for i in range(3):
        for j in range(3):
            m, n = (j + 1) % 3, (j + 2) % 3
            # (e_i x v_j) . v_m = +-(v_n)_i: the obstacle's reach needs no product.
            out.append(_edge(i, v[j], t, h, h2[m] * a[i][n] + h2[n] * a[i][m], with_axes))
    return out


def _cylinder_point(x, t, z, radius, half_height):
    """The point of a solid cylinder (centre t, unit axis z, radius, half height) nearest x."""
    rel = tuple(a - b for a, b in zip(x, t))
    height = dot(rel, z)
    radial = tuple(r - height * c for r, c in zip(rel, z))
    rho = norm(radial)
    scale = jnp.where(rho > radius, radius / jnp.where(rho > 0, rho, 1.0), 1.0)
    height = jnp.clip(height, -half_height, half_height)
    return tuple(a + height * c + scale * r for a, c, r in zip(t, z, radial))


def _cylinder_reach(a, z, radius, half_height):
    """Half-length of a cylinder's projection (unit axis z) on the axis a, times |a|."""
    cos = dot(a, z)
    return half_height * jnp.abs(cos) + radius * jnp.sqrt(jnp.maximum(dot(a, a) - cos * cos, 0.0))


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
    along_z = dot(t, z)
    out.append((jnp.abs(along_z) - _reach(h, z) - half_height, z))
    for i in range(3):
        gap, axis = _edge(i, z, t, h, 0.0, with_axes)
        out.append((gap - radius, axis))  # a . z = 0
    d = tuple(a - along_z * c for a, c in zip(t, z))  # axis -> box centre, across the axis
    length = norm(d)
    out.append((_normalised(length * length - _reach(h, d), length) - radius, _unit(d, length)))
    zero = tuple(jnp.zeros_like(x) for x in t)
    x = _cylinder_point(zero, t, z, radius, half_height)
    x = _cylinder_point(tuple(jnp.clip(c, -e, e) for c, e in zip(x, h)), t, z, radius, half_height)
    a = tuple(c - jnp.clip(c, -e, e) for c, e in zip(x, h))
    length = norm(a)
    reach_c = _cylinder_reach(a, z, radius, half_height)
    gap = _normalised(jnp.abs(dot(a, t)) - _reach(h, a) - reach_c, length)
    out.append((gap, _unit(a, length) if with_axes else None))
    return out


def _box_capsule(a0, s, h, radius, with_axes):
    """Candidates for the robot box and a capsule from a0 along s (local): the box's faces,
    their cross products with the segment and the direction to the segment point nearest
    the box centre."""
    middle = tuple(a + 0.5 * b for a, b in zip(a0, s))
    out = [(jnp.abs(middle[i]) - h[i] - 0.5 * jnp.abs(s[i]) - radius, _E[i]) for i in range(3)]
    for i in range(3):
        gap, axis = _edge(i, s, middle, h, 0.0, with_axes)
        out.append((gap - radius, axis))
    x = _segment_centre_point(a0, s)
    length = norm(x)
    gap = jnp.abs(dot(x, middle)) - _reach(h, x) - 0.5 * jnp.abs(dot(x, s))
    out.append((_normalised(gap, length) - radius, _unit(x, length) if with_axes else None))
    return out


# A hull (the convex hull of a link's collision mesh, vertices in its bounding box's frame)
# keeps its bounding box's candidates (a box that contains it is never nearer an obstacle)
# and adds its own gaps: along the obstacle's own axes (a wall's normal, a cylinder's axis
# and the radial direction to the hull) and along the direction between the two shapes'
# nearest points that GJK finds from the best of those (gjk.py). Every gap is the exact
# separation of the hull's and the obstacle's projections, so the largest is still a
# conservative distance; apart, it is the distance (within GJK's convergence: 0.1 mm, 0.5
# mm to a cylinder's rim, test_robot_hulls.py).
# Obstacles per hull and configuration measured as the hull in the planner's search
# (nearest_box_obstacle_t): the nearest by the hull's bounding box.
NEAREST_HULL = 2
# GJK rounds per obstacle kind: every round costs a support over the hull's vertices, the
# largest part of a planning check. The fewest after which the largest shortfall below the
# convex distance stops falling (bench/gjk_rounds.py, docs/benchmarks/gjk_rounds.md: a
# sphere 0.001 mm at 6 rounds, a capsule and a box 0.01 mm at 10, as at 12; a cylinder's
# curved rim converges slowest and keeps 12).
HULL_ROUNDS = {"sphere": 6, "capsule": 10, "box": 10, "cylinder": gjk.GJK_ROUNDS}
# Configurations per hull measured as the hull in an optimiser iteration (of its 2T - 1
# knots and midpoints): those whose bounding box is nearest each obstacle; the others get
# the bounding box's rows (never nearer than the hull: a conservative push). A hinge row
# acts only within the margin: in the MotionBenchMaker plans' paths the hand's box was
# within 20 mm of an obstacle at a median 21 of 127 configurations (p95 60;
# bench/hull_columns.py, docs/benchmarks/hull_columns.md). 20 LM iterations on
# bookshelf_thin/1: 145-149 ms measuring every configuration, 115-116 ms with 32
# (docs/benchmarks/mbm_global_bounding_ab.md).
HULL_COLUMNS = 32


def _vertex_dots(hull, a):
    """a . v for every vertex v of the hull (its last axis): a's components broadcast."""
    return a[0][..., None] * hull[0] + a[1][..., None] * hull[1] + a[2][..., None] * hull[2]


def _support(hull, a):
    """The hull's reach along local a: the largest a . v over its vertices."""
    return jnp.max(_vertex_dots(hull, a), -1)


def _support_point(hull, a):
    """The hull's vertex furthest along local a (components; hull rows on the first axis).

    Speed: GJK takes one of these per round and pair. ``jnp.argmax`` over the vertices
    costs five to seven times the ``max`` on a CPU (XLA reduces (value, index) pairs), so the index rides in the
    low bits of the value's bit pattern (order-kept as an integer) and one integer ``max``
    finds both; the vertex found is the furthest or within a relative 2^-15 of it, which
    only GJK's convergence sees (bench/box_distance_speed.py: "support point")."""
    dots = _vertex_dots(hull, a)
    rows, count = hull[0].shape[0], hull[0].shape[-1]
    bits = max(1, (count - 1).bit_length())
    key = jax.lax.bitcast_convert_type(dots, jnp.int32)
    key = jnp.where(key < 0, key ^ jnp.int32(0x7FFFFFFF), key)  # the floats' order
    key = (key & jnp.int32(-(1 << bits))) | jnp.arange(count, dtype=jnp.int32)
    i = jnp.max(key, -1) & jnp.int32((1 << bits) - 1)
    i = i + (jnp.arange(rows, dtype=jnp.int32) * count).reshape((rows,) + (1,) * (i.ndim - 1))
    return tuple(jnp.take(v.reshape(-1), i) for v in hull)


def _hull_gap(hull, t, reach_o, a):
    """The gap between the hull and an obstacle (centre t, half-width ``reach_o(a)``) along
    the unit local axis a."""
    along = dot(a, t)
    sign = jnp.where(along >= 0, 1.0, -1.0)
    return jnp.abs(along) - reach_o(a) - _support(hull, tuple(sign * x for x in a))


def _hull_candidates(hull, t, reach_o, support_o, axes, start, kind):
    """(gap, unit local axis) of the hull along each of ``axes`` (unit, local), then along
    the direction GJK finds (gjk.py) from the best of those and ``start`` (the bounding
    box's best axis); ``support_o(a)``: the obstacle's point furthest along local a;
    ``kind``: the obstacle's kind (its GJK rounds: HULL_ROUNDS)."""
    out = [(_hull_gap(hull, t, reach_o, a), a) for a in axes]
    _, axis = _largest([start, *out])
    sign = jnp.where(dot(axis, t) >= 0, -1.0, 1.0)  # from the obstacle to the hull
    v = gjk.separation(
        lambda a: _support_point(hull, a),
        support_o,
        tuple(sign * x for x in axis),
        HULL_ROUNDS[kind],
    )
    v = tuple(jax.lax.stop_gradient(x) for x in v)
    length = norm(v)
    a = _unit(v, length)
    out.append((jnp.where(length > _EPS, _hull_gap(hull, t, reach_o, a), -FAR), a))
    return out


def _segment_support(a0, s):
    """A segment's support (a capsule's, less its radius: GJK then ends in a few rounds as
    for polytopes, and the direction is the same)."""
    return lambda a: tuple(p + jnp.where(dot(a, s) > 0, 1.0, 0.0) * q for p, q in zip(a0, s))


def _box_support(t, v, h2):
    def support(a):
        signs = [jnp.where(dot(a, v[j]) >= 0, h2[j], -h2[j]) for j in range(3)]
        return tuple(t[k] + sum(signs[j] * v[j][k] for j in range(3)) for k in range(3))

    return support


def _cylinder_support(t, z, radius, half_height):
    def support(a):
        along = dot(a, z)
        radial = tuple(x - along * c for x, c in zip(a, z))
        # Again: with a along the axis, rounding leaves a radial part that is not across it.
        radial = tuple(x - dot(radial, z) * c for x, c in zip(radial, z))
        e = _unit(radial, norm(radial))
        end = jnp.where(along >= 0, half_height, -half_height)
        return tuple(p + end * c + radius * r for p, c, r in zip(t, z, e))

    return support


def _segment_centre_point(a0, s):
    """The point of the segment from a0 along s (local) nearest the box's centre."""
    f = jnp.clip(-dot(a0, s) / jnp.maximum(dot(s, s), _EPS), 0, 1)
    return tuple(a + f * b for a, b in zip(a0, s))


def _largest(candidates, with_axes: bool = True):
    """The largest gap of (gap, axis) candidates and, with axes, its axis."""
    d, axis = candidates[0]
    for gap, a in candidates[1:]:
        if with_axes:
            better = gap > d
            axis = tuple(jnp.where(better, x, y) for x, y in zip(a, axis))
        d = jnp.maximum(d, gap)
    return d, axis


def _pairs(c, u, h, world: World, along, with_axes: bool, counts=None, hull=None):
    """Per obstacle kind present: distance, and with axes the normal and witness (root
    frame), of every robot box and obstacle pair. Robot quantities (centre c, axes u, half
    sizes h) are component arrays with a size-1 obstacle axis; ``along`` puts an (O,)
    obstacle array on that axis. ``counts``: the kinds to take (default ``world.counts``);
    a kind's arrays may also come laid out on the robot's axes already, (X, 1, B, ...): one
    obstacle per box and configuration (``World.take``), with ``along`` the identity.
    ``hull``: the boxes are hulls' bounding boxes, these their vertices (three (X, 1, 1, V)
    local component arrays): the hull's candidates join the box's, and the witness is the
    hull's vertex furthest towards the obstacle."""
    ns, nc, nb, nh, ny = world.counts if counts is None else counts
    parts = []

    def vector(a):  # (O, 3) -> three arrays on the obstacle axis
        return tuple(along(a[..., k]) for k in range(3))

    def point(a):  # obstacle points relative to the box centre, in its frame
        return _local(u, tuple(p - x for p, x in zip(vector(a), c)))

    need_axes = with_axes or hull is not None  # a hull's GJK starts from the box's best axis

    def best(candidates, t):
        """The largest gap; with axes, its normal and the box's corner towards the obstacle."""
        d, axis = _largest(candidates, with_axes)
        if not with_axes:
            return (d,)
        sign = jnp.where(dot(axis, t) >= 0, 1.0, -1.0)
        towards = tuple(sign * x for x in axis)
        if hull is None:
            corner = tuple(jnp.where(x >= 0, e, -e) for x, e in zip(towards, h))
        else:
            corner = _support_point(hull, towards)
        witness = tuple(a + b for a, b in zip(c, _root(u, corner)))
        return d, tuple(-x for x in _root(u, towards)), witness

    if ns:  # exact for a box: the sphere centre's distance to it
        p = point(world.sphere_centers)
        radius = along(world.sphere_radii)
        nearest = tuple(jnp.clip(x, -e, e) for x, e in zip(p, h))
        excess = tuple(jnp.abs(x) - e for x, e in zip(p, h))
        outside = norm(tuple(jnp.maximum(e, 0.0) for e in excess))
        deepest = jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2])
        d = outside + jnp.minimum(deepest, 0.0) - radius
        if need_axes:
            # Outside: from the sphere to the box's nearest point; inside: out through the
            # nearest face.
            first = (excess[0] >= excess[1]) & (excess[0] >= excess[2])
            second = ~first & (excess[1] >= excess[2])
            face = (first, second, ~first & ~second)
            away = _unit(tuple(n - x for n, x in zip(nearest, p)), outside)
            inward = tuple(jnp.where(f, -jnp.sign(x), 0.0) for f, x in zip(face, p))
            local = tuple(jnp.where(outside > 0, a, b) for a, b in zip(away, inward))
        if hull is not None:  # the bounding box's answer, then the hull's towards the centre
            candidates = [(d, local)]
            candidates += _hull_candidates(
                hull, p, lambda a: radius, lambda a: p, [_unit(p, norm(p))],
                _largest(candidates), "sphere",
            )  # fmt: skip
            parts.append(best(candidates, p))
        elif with_axes:
            witness = tuple(a + b for a, b in zip(c, _root(u, nearest)))
            parts.append((d, _root(u, local), witness))
        else:
            parts.append((d,))
    if nc:
        a0 = point(world.capsule_a)
        s = _local(u, vector(world.capsule_b - world.capsule_a))
        radius = along(world.capsule_radii)
        middle = tuple(a + 0.5 * b for a, b in zip(a0, s))
        candidates = _box_capsule(a0, s, h, radius, need_axes)
        if hull is not None:
            x = _segment_centre_point(a0, s)
            candidates += _hull_candidates(
                hull, middle, lambda a: 0.5 * jnp.abs(dot(a, s)) + radius,
                _segment_support(a0, s), [_unit(x, norm(x))], _largest(candidates), "capsule",
            )  # fmt: skip
        parts.append(best(candidates, middle))
    if nb:
        t = point(world.box_poses[..., 4:])
        axes = pose_rotations(world.box_poses)
        v = tuple(_local(u, vector(axes[..., :, j])) for j in range(3))
        h2 = tuple(along(world.box_half_extents[..., j]) for j in range(3))
        candidates = _box_box(t, v, h, h2, need_axes)
        if hull is not None:
            candidates += _hull_candidates(
                hull, t, lambda a: sum(e * jnp.abs(dot(a, w)) for e, w in zip(h2, v)),
                _box_support(t, v, h2), list(v), _largest(candidates), "box",
            )  # fmt: skip
        parts.append(best(candidates, t))
    if nh:  # exact: the corner deepest against the normal
        n = vector(world.halfspace_normals)
        local = _local(u, n)
        inward = tuple(-x for x in local)
        reach = _reach(h, local) if hull is None else _support(hull, inward)
        d = dot(n, c) + along(world.halfspace_offsets) - reach
        if with_axes:
            if hull is None:
                corner = tuple(jnp.where(x >= 0, -e, e) for x, e in zip(local, h))
            else:
                corner = _support_point(hull, inward)
            witness = tuple(a + b for a, b in zip(c, _root(u, corner)))
            parts.append((d, tuple(jnp.broadcast_to(x, d.shape) for x in n), witness))
        else:
            parts.append((d,))
    if ny:
        t = point(world.cylinder_poses[..., 4:])
        z = _local(u, vector(pose_rotations(world.cylinder_poses)[..., :, 2]))
        radius, height = along(world.cylinder_radii), along(world.cylinder_half_heights)
        candidates = _box_cylinder(t, z, h, radius, height, need_axes)
        if hull is not None:
            reach_o = lambda a: _cylinder_reach(a, z, radius, height)
            across = tuple(a - dot(t, z) * b for a, b in zip(t, z))  # box centre -> axis
            candidates += _hull_candidates(
                hull, t, reach_o, _cylinder_support(t, z, radius, height),
                [z, _unit(across, norm(across))], _largest(candidates), "cylinder",
            )  # fmt: skip
        parts.append(best(candidates, t))
    return parts


def _rows(c, u, h, rows: slice):
    """The component arrays of :func:`_pairs`' robot boxes ``rows`` only."""
    return jax.tree.map(lambda a: a[rows], (c, u, h))


def _nearer(a, b):
    """Of two (distance, normal, witness) answers, per element the one nearer."""
    closer = a[0] < b[0]
    return jax.tree.map(lambda x, y: jnp.where(closer, x, y), a, b)


def _hull_components(vertices: jax.Array, dtype):
    """Hull vertices (H, V, 3) as the component arrays :func:`_pairs` takes (three
    (H, 1, 1, V): rows, obstacles, configurations, vertices)."""
    return tuple(vertices[:, None, None, :, k].astype(dtype) for k in range(3))


def _grouped_pairs(c, u, h, vertices, world: World, with_axes: bool):
    """:func:`_pairs` of plain boxes and of hulls (the last H rows, ``vertices`` (H, V, 3)
    or None) against every obstacle, rows joined again."""
    x = h[0].shape[0]
    cut = x - (0 if vertices is None else vertices.shape[0])
    groups = []
    for rows, hull in ((slice(0, cut), None), (slice(cut, x), vertices)):
        if rows.stop == rows.start:
            continue
        if hull is not None:
            hull = _hull_components(hull, c[0].dtype)
        groups.append(_pairs(*_rows(c, u, h, rows), world, _on_axis_1, with_axes, None, hull))
    if len(groups) == 1:
        return groups[0]

    def join(arrays):  # along the rows, each broadcast to its full shape first
        full = jnp.broadcast_shapes(*(a.shape[1:] for a in arrays))
        return jnp.concatenate([jnp.broadcast_to(a, (a.shape[0], *full)) for a in arrays], 0)

    return [jax.tree.map(lambda *a: join(a), *kind) for kind in zip(*groups)]


def _components(centers: jax.Array, axes: jax.Array, half: jax.Array):
    """Batch-first arrays (B, X, 3), (B, X, 3, 3), (X, 3) -> batch-last component tuples
    (X, 1, B) (obstacles go on axis 1)."""
    c = tuple(centers[..., k].T[:, None, :] for k in range(3))
    u = tuple(tuple(axes[..., k, i].T[:, None, :] for k in range(3)) for i in range(3))
    h = tuple(jnp.asarray(half[:, k], centers.dtype)[:, None, None] for k in range(3))
    return c, u, h


def _on_axis_1(a: jax.Array) -> jax.Array:
    return a[None, :, None]


@jax.jit  # eager calls too: GJK's loop compiles once per shape
def box_obstacle_terms(
    centers: jax.Array,
    axes: jax.Array,
    half_extents: jax.Array,
    world: World,
    hull_vertices: jax.Array | None = None,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Per robot box and obstacle: the conservative signed distance (*batch, X, O), m, its
    unit normal (*batch, X, O, 3) and the box's witness point (*batch, X, O, 3): the distance
    grows at the rate ``normal . velocity of the witness``.

    Args:
        centers: (*batch, X, 3) box centres in the root frame.
        axes: (*batch, X, 3, 3) box axes as columns, in the root frame.
        half_extents: (X, 3) half sizes along them.
        world: the obstacles (any kind; padding dummies come out ~FAR away).
        hull_vertices: (H, V, 3): the last H boxes are hulls' bounding boxes, these the
            hulls' vertices in their frames (:attr:`RobotSpheres.hull_vertices`).
    """
    return _box_terms(centers, axes, half_extents, world, hull_vertices, True)


def _box_terms(centers, axes, half_extents, world: World, hull_vertices, with_axes: bool):
    """:func:`box_obstacle_terms`, or with_axes False its distances alone (one-tuple)."""
    batch, x_count = centers.shape[:-2], centers.shape[-2]
    flat_c, flat_u = centers.reshape(-1, *centers.shape[-2:]), axes.reshape(-1, *axes.shape[-3:])
    c, u, h = _components(flat_c, flat_u, half_extents)
    parts = _grouped_pairs(c, u, h, hull_vertices, world, with_axes)
    if not parts:
        shape = (*batch, x_count, 0)
        return jnp.zeros(shape, centers.dtype), jnp.zeros((*shape, 3)), jnp.zeros((*shape, 3))

    def back(a):  # (X, O, B) -> (*batch, X, O)
        a = jnp.broadcast_to(a, (x_count, a.shape[1], flat_c.shape[0]))
        return jnp.moveaxis(a, -1, 0).reshape(*batch, x_count, -1)

    d = jnp.concatenate([back(part[0]) for part in parts], -1)
    if not with_axes:
        return (d,)
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
    parts = tuple(poses[..., i] for i in range(7))
    local = tuple(spheres.box_poses[:, i].astype(poses.dtype) for i in range(7))
    centers, axes = _compose(parts[:4], parts[4:], local)
    return jnp.stack(centers, -1), jnp.stack([jnp.stack(a, -1) for a in axes], -1)


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
    return box_distances(
        centers, axes, spheres.box_half_extents, world, checked, spheres.hull_vertices
    )


@jax.jit  # eager calls too: GJK's loop compiles once per shape
def box_distances(
    centers: jax.Array,
    axes: jax.Array,
    half_extents: jax.Array,
    world: World,
    checked: jax.Array | None = None,
    hull_vertices: jax.Array | None = None,
) -> jax.Array:
    """Conservative signed distances (*batch, X, O), m, of robot boxes (and hulls:
    ``hull_vertices``) to every obstacle (:func:`box_obstacle_terms`); inf where
    ``checked`` (X, O) is False."""
    d = _box_terms(centers, axes, half_extents, world, hull_vertices, False)[0]
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def _take_columns(x, cols, count: int):
    """x (R, 1, B) (or broadcastable: B = ``count``) at columns cols (R, K): (R, 1, K)."""
    x = jnp.broadcast_to(x, (cols.shape[0], 1, count))
    return jnp.take_along_axis(x, cols[:, None], 2)


def nearest_box_obstacle_t(
    c, u, half, world: World, checked: jax.Array, hull_vertices=None, hull_columns=None
):
    """The planner's form of the nearest obstacle per robot box: box centres ``c`` (three
    (X, B)) and axes ``u`` (u[i]: three (X, B)), half sizes (X, 3), ``checked`` (X, O),
    ``hull_vertices`` (H, V, 3) of the last H boxes (hulls, or None); returns the distance
    (X, B), normal and witness (three (X, B) each). As
    :func:`~pyroki_ros.collision.distance.nearest_obstacle_t` does for points: distances
    alone, one obstacle after the other over those the scene has (not the padding), then
    the normal and witness of the nearest alone. A hull is a hundred vertices: it is
    measured as such against its :data:`NEAREST_HULL` nearest obstacles by its bounding box
    only, the others' bounding-box distance (never more than the hull's) bounding the rest.
    ``hull_columns`` (K < B): only in the K configurations whose bounding box is nearest
    each obstacle; elsewhere the bounding box answers, never more than the hull: the same
    hinge rows wherever no more than K configurations' boxes are within the margin
    (:data:`HULL_COLUMNS`)."""
    c, u = jax.tree.map(lambda x: x[:, None, :], (c, u))
    h = tuple(jnp.asarray(half[:, k], c[0].dtype)[:, None, None] for k in range(3))
    shape = (c[0].shape[0], c[0].shape[2])
    cut = shape[0] - (0 if hull_vertices is None else hull_vertices.shape[0])
    hull = _hull_components(hull_vertices, c[0].dtype) if cut < shape[0] else None
    slots = 1 if hull is None else NEAREST_HULL
    best = None
    offset = 0
    for kind, (count, live) in enumerate(zip(world.counts, world.live_counts())):
        if count == 0:
            continue
        only = tuple(int(i == kind) for i in range(len(world.counts)))

        def visit(o, nearest, kind=kind, only=only, offset=offset):
            """Keeps the NEAREST_HULL nearest obstacles (distance, index) in order and the
            distance of the next."""
            (d,) = _pairs(c, u, h, world.take(kind, o[None]), _on_axis_1, False, only)[0]
            d = jnp.where(jax.lax.dynamic_index_in_dim(checked, offset + o, 1), d[:, 0], FAR)
            out = []
            for k in range(slots):
                dk, ik = nearest[2 * k], nearest[2 * k + 1]
                closer = d < dk
                out += [jnp.where(closer, d, dk), jnp.where(closer, o, ik)]
                d, o = jnp.where(closer, dk, d), jnp.where(closer, ik, o)  # moves down
            return (*out, jnp.minimum(d, nearest[-1])) if hull is not None else tuple(out)

        far, zero = jnp.full(shape, FAR, c[0].dtype), jnp.zeros(shape, jnp.int32)
        start = (far, zero) * slots + ((far,) if hull is not None else ())
        found = jax.lax.fori_loop(0, live, visit, start)
        offset += count

        def terms(rows, index, hull_part=None, kind=kind, only=only):
            """Distance, normal and witness (X', B) of boxes ``rows`` to the obstacle of
            ``index`` (X, B) each."""
            return _terms_to(*_rows(c, u, h, rows), world, kind, only, index[rows], hull_part)

        d, index = found[0], found[1]
        if hull is None:
            kind_best = (d, *terms(slice(0, shape[0]), index)[1:])
        else:
            plain = terms(slice(0, cut), index)
            rows = slice(cut, shape[0])
            hulls = None
            for k in range(NEAREST_HULL):
                dk, index = found[2 * k][rows], found[2 * k + 1]
                if hull_columns is None or hull_columns >= shape[1]:
                    hd, normal, witness = terms(rows, index, hull)
                else:
                    hd, normal, witness = _hull_at_columns(
                        *_rows(c, u, h, rows), world, kind, only, index[rows], dk, hull,
                        hull_columns,
                    )  # fmt: skip
                slot = (jnp.where(dk >= FAR, FAR, hd), normal, witness)
                hulls = slot if hulls is None else _nearer(slot, hulls)
            hull_d = jnp.minimum(hulls[0], found[-1][rows])
            both = lambda x, y: jnp.concatenate([x, y])
            kind_best = jax.tree.map(both, (d[:cut], *plain[1:]), (hull_d, *hulls[1:]))
        best = kind_best if best is None else _nearer(kind_best, best)
    return best


def _terms_to(c, u, h, world: World, kind: int, only, index, hull=None):
    """Distance, normal and witness (R, K) of robot boxes (components (R, 1, K) or
    broadcastable) to the obstacles of kind ``kind`` at ``index`` (R, K), one each."""
    parts = _pairs(c, u, h, world.take(kind, index[:, None, :]), lambda a: a, True, only, hull)
    full = (index.shape[0], 1, index.shape[1])
    flat = lambda x: jnp.broadcast_to(x, full)[:, 0]
    return flat(parts[0][0]), *(tuple(flat(x) for x in v) for v in parts[0][1:])


def _hull_at_columns(c, u, h, world: World, kind: int, only, index, d_box, hull, count: int):
    """Distance, normal and witness (H, B) of hulls (robot box components (H, 1, B)) to the
    obstacles of ``index`` (H, B): as hulls in the ``count`` configurations of smallest
    bounding-box distance ``d_box`` (H, B) per hull, as their bounding boxes in the others."""
    d, normal, witness = _terms_to(c, u, h, world, kind, only, index)
    cols = jax.lax.top_k(-d_box, count)[1]  # (H, K)
    b = index.shape[1]
    c_k, u_k = jax.tree.map(lambda x: _take_columns(x, cols, b), (c, u))
    near = _terms_to(c_k, u_k, h, world, kind, only, jnp.take_along_axis(index, cols, 1), hull)
    at = (jnp.arange(index.shape[0])[:, None], cols)
    return jax.tree.map(lambda whole, x: whole.at[at].set(x), (d, normal, witness), near)
