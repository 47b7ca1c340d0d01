"""The separating direction of two convex shapes given by their support functions
(Gilbert, Johnson and Keerthi, IEEE J. Robotics and Automation 1988).

GJK looks for the point ``v`` of the Minkowski difference ``A - B`` nearest the origin: its
length is the shapes' distance and ``v / |v|`` the direction from B to A across which they
are furthest apart. Each round adds the difference's support point against ``v`` to a
simplex of at most four points and keeps the face, edge or vertex of it nearest the origin;
for polytopes it ends in a few rounds. Here a fixed number of rounds run for every pair (no
branches, element-wise on component tuples as in boxes.py), and the nearest sub-simplex is
found by trying the 7 that hold the new point (vertex, edge, triangle: the origin's
projection with non-negative barycentric weights) and checking the tetrahedron for the
origin (inside: the shapes overlap).

The caller measures the gap of the two shapes' projections on the direction found, which
never exceeds their distance whether or not the rounds converged; converged, it is the
distance. Where the shapes overlap the direction is void (zero) and other candidates answer.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from pyroki_ros.model.kinematics import cross, dot, sub

# Rounds per pair by default (boxes.HULL_ROUNDS takes fewer where an obstacle kind
# converges sooner); every round costs one support of each shape. 12 meets the tolerances of
# test_robot_hulls.py's convex-distance test (the Panda hand's hull against every kind,
# 0-30 mm apart: 0.1 mm, 0.5 mm to a cylinder, whose curved rim converges slowest, in its
# poses; up to 2.6 mm short in others, docs/benchmarks/gjk_rounds.md); in
# probes with 8 a few pairs stopped millimetres short (2026-11-28 note on issue 16).
GJK_ROUNDS = 12

# Directions are tilted by this much (relative) before a support is taken. At a tie (GJK's
# direction across a face, square to the face's edges) XLA may compute a point's three
# coordinates in separate loops whose float rounding (fused multiply-adds or not) breaks
# the tie differently: x from one corner, y from another, a point outside the shape and a
# distance too short (in probes, by up to centimetres; eager execution was right). Tilted,
# no tie is left within rounding; the support found is off by ~1e-5 of the shapes' size.
_TILT = (1.3e-5, 0.7e-5, 1.1e-5)
_REL = 1e-9  # a simplex face whose Gram determinant is below this, relative, is degenerate


def _combine(p, weights, edges):
    return tuple(x + sum(w * e[k] for w, e in zip(weights, edges)) for k, x in enumerate(p))


def _projection(points):
    """The origin's projection on the affine hull of 1-3 points, and whether it lies in
    their simplex (non-negative weights, not degenerate)."""
    p = points[0]
    if len(points) == 1:
        return p, jnp.ones_like(p[0], dtype=bool)
    edges = [sub(q, p) for q in points[1:]]
    if len(points) == 2:
        (e,) = edges
        ee = dot(e, e)
        ok = ee > _REL * (dot(p, p) + 1.0)
        s = -dot(p, e) / jnp.where(ok, ee, 1.0)
        return _combine(p, (s,), edges), ok & (s >= 0) & (s <= 1)
    e1, e2 = edges
    a11, a12, a22 = dot(e1, e1), dot(e1, e2), dot(e2, e2)
    b1, b2 = -dot(p, e1), -dot(p, e2)
    det = a11 * a22 - a12 * a12
    ok = det > _REL * a11 * a22
    inverse = 1.0 / jnp.where(ok, det, 1.0)
    s, u = (b1 * a22 - b2 * a12) * inverse, (a11 * b2 - a12 * b1) * inverse
    return _combine(p, (s, u), edges), ok & (s >= 0) & (u >= 0) & (s + u <= 1)


def _contains_origin(points):
    """Whether the tetrahedron of 4 points holds the origin."""
    p = points[0]
    e1, e2, e3 = (sub(q, p) for q in points[1:])
    det = dot(e1, cross(e2, e3))
    ok = jnp.abs(det) > _REL * jnp.sqrt(dot(e1, e1) * dot(e2, e2) * dot(e3, e3))
    inverse = 1.0 / jnp.where(ok, det, 1.0)
    m = tuple(-x for x in p)
    weights = (
        dot(m, cross(e2, e3)) * inverse,
        dot(e1, cross(m, e3)) * inverse,
        dot(e1, cross(e2, m)) * inverse,
    )
    return ok & (weights[0] >= 0) & (weights[1] >= 0) & (weights[2] >= 0) & (sum(weights) <= 1)


# The sub-simplices of (kept points, w) that hold the newest point w (index 3): the nearest
# point moves onto one of them whenever w is nearer the origin along v than v is.
_SUBSETS = [(3,), (0, 3), (1, 3), (2, 3), (0, 1, 3), (0, 2, 3), (1, 2, 3)]


def _nearest_face(v, keep, w):
    """The point of the simplex (kept points, w) nearest the origin, the 3 points (repeated
    where fewer) of the sub-simplex it lies on, and whether the origin is inside; v: the
    kept points' nearest point (it stays where w brings nothing nearer)."""
    points = keep + [w]
    best, n2 = v, dot(v, v)
    for subset in _SUBSETS:
        x, ok = _projection([points[i] for i in subset])
        norm2 = jnp.where(ok, dot(x, x), jnp.inf)
        kept = [points[i] for i in (subset + subset * 2)[:3]]
        better = norm2 < n2
        best = tuple(jnp.where(better, a, b) for a, b in zip(x, best))
        keep = [tuple(jnp.where(better, a, b) for a, b in zip(q, r)) for q, r in zip(kept, keep)]
        n2 = jnp.minimum(norm2, n2)
    return best, keep, _contains_origin(points)


def separation(support_a, support_b, start, rounds: int = GJK_ROUNDS):
    """The point of ``A - B`` nearest the origin after ``rounds`` rounds (components of
    the pair shape; zero where the shapes overlap). ``support_a(d)``: A's point furthest
    along d (components; d need not be unit), ``support_b`` likewise; ``start``: a first
    guess of the direction from B to A (the best separating axis known)."""

    def support(d):  # of A - B, furthest along d (tilted: see _TILT)
        size = jnp.abs(d[0]) + jnp.abs(d[1]) + jnp.abs(d[2])
        d = tuple(x + size * e for x, e in zip(d, _TILT))
        return sub(support_a(d), support_b(tuple(-x for x in d)))

    def round_(_, state):
        v, keep, overlap = state
        w = support(tuple(-x for x in v))
        v, keep, inside = _nearest_face(v, list(keep), w)
        return v, tuple(keep), overlap | inside

    w = support(tuple(-x for x in start))
    overlap = jnp.zeros(jnp.broadcast_shapes(*(x.shape for x in w)), bool)
    w = tuple(jnp.broadcast_to(x, overlap.shape) for x in w)
    # A loop, not unrolled: one round's program, compiled once (unrolled, every caller's
    # compile took minutes).
    v, _, overlap = jax.lax.fori_loop(0, rounds, round_, (w, (w, w, w), overlap))
    return tuple(jnp.where(overlap, 0.0, x) for x in v)
