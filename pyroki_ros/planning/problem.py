"""The trajectory problem of :mod:`pyroki_ros.planning.trajopt` as one traced value and
its compiled pieces: cost weights and results, the linearisation of every cost at a path, the
solve of several start paths at once (``vmap``) and the clearance report. Pure functions of
(robot, static collision terms, :class:`Problem`); the collision rows and their Jacobians are
:class:`pyroki_ros.collision.CollisionTerms`."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.collision.jacobians import CollisionTerms
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot
from pyroki_ros.solver import lm


@dataclasses.dataclass(frozen=True)
class Weights:
    """Cost weights (each multiplies a squared residual; traced, changing them never
    recompiles)."""

    # Multiplies the objectives' own weights. High enough that the goal sits well inside
    # 1 mm / 1 degree at once: at 1000 the pull of smoothness left ~0.8 mm, and plans took 3x
    # the iterations to converge onto the tolerance.
    goal: float = 1.0e4
    velocity: float = 1.0  # per (rad per knot step)^2
    acceleration: float = 4.0
    jerk: float = 0.0
    rest: float = 1e-4
    collision: float = 1000.0  # per m of penetration into the margin
    self_collision: float = 1000.0
    manipulability: float = 0.0  # per (1 / manipulability)^2 of ``manipulability_link``


@dataclasses.dataclass(frozen=True)
class PlanResult:
    """One optimised path (numpy, float64).

    Attributes:
        path: (T, n_joints) configurations, robot.joint_names order, inside the limits.
        success: every goal objective within tolerance and no knot or segment closer to an
            obstacle (or another link) than ``clearance_tolerance``.
        position_errors: (n_objectives,) m, of each objective at its last weighted knot.
        orientation_errors: (n_objectives,) rad.
        min_distance: smallest signed clearance between robot spheres and obstacles along the
            path (knots and sub-segment samples); inf without obstacles.
        min_self_distance: the same between sphere pairs of the robot; inf without pairs.
        cost: final total cost of the chosen start.
        iterations: LM iterations of the chosen start.
        solve_seconds: wall time of the whole call.
        message: a short human-readable summary.
        reason: why a plan failed, for a caller to act on: "" (success, or a path that misses
            its goal or clearance, see ``message``), START_IN_COLLISION, GOAL_UNREACHABLE,
            GOAL_IN_COLLISION or TIMED_OUT.
    """

    path: np.ndarray
    success: bool
    position_errors: np.ndarray
    orientation_errors: np.ndarray
    min_distance: float
    min_self_distance: float
    cost: float
    iterations: int
    solve_seconds: float
    message: str = ""
    reason: str = ""


# PlanResult.reason values.
START_IN_COLLISION = "start_in_collision"
TIMED_OUT = "timeout"  # the time budget ran out; the path is the best one so far
GOAL_UNREACHABLE = "goal_unreachable"  # no IK solution of the pose goal
GOAL_IN_COLLISION = "goal_in_collision"  # every IK solution of the pose goal collides


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Problem:
    """Traced inputs of one solve. Objective fields carry a knot axis: (T, ...)."""

    objectives: tuple[obj.Objective, ...]
    rest: jax.Array  # (n,)
    weights: jax.Array  # (7,) Weights in field order
    margin: jax.Array  # (T,) m, the collision costs' reach at each knot
    lower: jax.Array  # (T, n)
    upper: jax.Array  # (T, n)
    free: jax.Array  # (T, n)
    world: col.World
    world_checked: jax.Array  # (S, O) bool, padded obstacle order (col.checked_pairs)
    self_checked: jax.Array  # (P,) bool over the spheres' self pairs
    max_iterations: jax.Array  # ()
    tolerances: jax.Array  # (3,) position m, orientation rad, early-stop relative decrease
    vectors: jax.Array  # (T, V, 3) link-to-link vector targets (retargeting), root frame
    vector_weights: jax.Array  # (T, V)
    initial_damping: jax.Array  # () Marquardt damping of the first step
    vector_links: tuple[tuple[int, int], ...] = dataclasses.field(
        default=(), metadata={"static": True}
    )  # (from, to) link indices: residual p_to - p_from - vectors[t, v]
    manipulability_link: int = dataclasses.field(default=-1, metadata={"static": True})


def _between_knots(x: jax.Array, count: int) -> jax.Array:
    """(count, n) configurations on the path x (T, n), linear between knots, evenly spaced
    by the largest joint's travel: a segment gets samples in proportion to its largest joint
    step, so a fast segment is checked as finely as a slow one (at the same number of
    samples, one per segment at a fixed fraction missed a finger passing a shelf's edge
    inside a 0.17 rad segment of an otherwise 0.04 rad path)."""
    step = jnp.max(jnp.abs(x[1:] - x[:-1]), axis=-1)  # (T - 1,)
    reach = jnp.concatenate([jnp.zeros((1,), x.dtype), jnp.cumsum(step)])  # (T,)
    at = (jnp.arange(count, dtype=x.dtype) + 0.5) / count * reach[-1]  # (count,)
    segment = jnp.clip(jnp.searchsorted(reach, at, side="right") - 1, 0, x.shape[0] - 2)
    fraction = (at - reach[segment]) / jnp.maximum(step[segment], jnp.finfo(x.dtype).tiny)
    fraction = jnp.clip(fraction, 0.0, 1.0)[:, None]
    return x[segment] + fraction * (x[segment + 1] - x[segment])


# Collision rows of more configurations than this are evaluated this many at a time
# (lax.map): their sphere distances and Jacobians take ~40 KB per configuration (Panda), 1.8 GB
# for the 2 T - 1 configurations of a 22,000-knot motion at once. Plans up to T = 512 take one
# chunk (no loop).
COLLISION_CHUNK = 1024
# The same for the clearance report (knots and samples inside segments, ~3 KB each).
REPORT_CHUNK = 4096


def _in_chunks(fn, inputs, chunk: int):
    """``fn`` of ``inputs`` (arrays (B, ...), a pytree) -> arrays (B, ...), evaluated ``chunk``
    rows at a time when B > chunk (one after the other: the memory of one chunk); the same
    as ``fn(inputs)`` otherwise."""
    count = jax.tree.leaves(inputs)[0].shape[0]
    if count <= chunk:
        return fn(inputs)
    chunks = -(-count // chunk)

    def split(a):
        # Padded with copies of the last row (a valid configuration), dropped afterwards.
        extra = jnp.broadcast_to(a[-1:], (chunks * chunk - count, *a.shape[1:]))
        return jnp.concatenate([a, extra], 0).reshape(chunks, chunk, *a.shape[1:])

    out = jax.lax.map(fn, jax.tree.map(split, inputs))
    return jax.tree.map(lambda a: a.reshape(chunks * chunk, *a.shape[2:])[:count], out)


def _linearize(
    robot: Robot, collide: CollisionTerms, smoothing: jax.Array, p: Problem, x: jax.Array
) -> lm.Linearization:
    """Gauss-Newton pieces of all costs at the path x (T, n)."""
    t_count, n = x.shape
    w = p.weights
    diagonal = jnp.zeros((t_count, n, n), x.dtype)
    gradient = jnp.zeros((t_count, n), x.dtype)
    cost = jnp.zeros((), x.dtype)
    # Good enough to stop early: goals within 70 % of their tolerances (float32 headroom for
    # the float64 check), every knot and midpoint at least half the margin clear.
    satisfied = jnp.asarray(True)
    if p.objectives:
        moved = tuple(jax.tree.map(lambda a: jnp.moveaxis(a, -1, 0), o) for o in p.objectives)
        r, jac, pos_t, rot_t = obj.evaluate_t(robot, x.T, moved)  # (m, T), (m, n, T), (k, T)
        weighted = jnp.stack([jnp.any(o.weights > 0, 0) for o in moved])  # (k, T)
        near = (pos_t <= 0.7 * p.tolerances[0]) & (rot_t <= 0.7 * p.tolerances[1])
        satisfied = jnp.all(near | ~weighted)
        scale = jnp.sqrt(w[0])
        r, jac = scale * r, scale * jac
        diagonal = jnp.einsum("mit,mjt->tij", jac, jac)
        gradient = jnp.einsum("mit,mt->ti", jac, r)
        cost = 0.5 * jnp.sum(r * r)

    rest = x - p.rest
    diagonal = diagonal + w[4] * jnp.eye(n, dtype=x.dtype)
    gradient = gradient + w[4] * rest
    cost = cost + 0.5 * w[4] * jnp.sum(rest * rest)

    subdiagonal = jnp.zeros((t_count - 1, n, n), x.dtype)
    if collide.spheres is not None:

        def normal_terms(inputs):
            """Per configuration (B, n) and its margin (B,): J^T J (B, n, n), J^T r (B, n),
            r^T r and clearance (B,) of its collision rows."""
            configs, margin = inputs
            checked = (p.world_checked, p.self_checked)
            rc, jc, clearance = collide.rows_t(configs.T, p.world, checked, margin, w[5], w[6])
            jtj = jnp.einsum("rib,rjb->bij", jc, jc)
            return jtj, jnp.einsum("rib,rb->bi", jc, rc), jnp.sum(rc * rc, 0), clearance

        configs = jnp.concatenate([x, 0.5 * (x[1:] + x[:-1])], 0)  # knots, then midpoints
        margins = jnp.concatenate([p.margin, jnp.minimum(p.margin[1:], p.margin[:-1])])
        jtj, jtr, rr, clearance = _in_chunks(normal_terms, (configs, margins), COLLISION_CHUNK)
        # Fixed knots (the start, a goal configuration) cannot move: they and the midpoints
        # beside them only need to be clear, the others half their margin.
        fixed = jnp.all(p.free <= 0, axis=-1)  # (T,)
        beside = fixed[1:] | fixed[:-1]
        needed = jnp.where(jnp.concatenate([fixed, beside]), -jnp.inf, 0.5 * margins)
        needed = needed.at[t_count:].set(jnp.where(beside, 0.0, 0.5 * margins[t_count:]))
        satisfied = satisfied & jnp.all(clearance >= needed)
        diagonal = diagonal + jtj[:t_count]
        gradient = gradient + jtr[:t_count]
        # A midpoint residual sees each neighbour through half its Jacobian.
        m = 0.25 * jtj[t_count:]
        g = 0.5 * jtr[t_count:]
        diagonal = diagonal.at[:-1].add(m).at[1:].add(m)
        subdiagonal = m
        gradient = gradient.at[:-1].add(g).at[1:].add(g)
        cost = cost + 0.5 * jnp.sum(rr)

    if p.vector_links:
        frames = k.frames_t(robot, x.T)
        for v, (a, b) in enumerate(p.vector_links):
            scale = jnp.sqrt(p.vector_weights[:, v])  # (T,)
            jv_a, _ = k.jacobian_rows_t(robot, frames, a)
            jv_b, _ = k.jacobian_rows_t(robot, frames, b)
            for c in range(3):
                r_c = scale * (frames[1][c][b] - frames[1][c][a] - p.vectors[:, v, c])
                j_c = scale[None] * (jv_b[c] - jv_a[c])  # (n, T)
                diagonal = diagonal + jnp.einsum("it,jt->tij", j_c, j_c)
                gradient = gradient + (j_c * r_c[None]).T
                cost = cost + 0.5 * jnp.sum(r_c * r_c)

    if p.manipulability_link >= 0:
        # Yoshikawa's measure sqrt(det(J J^T)); its inverse grows near singularities.
        def inverse_manipulability(q):
            jac = k.link_jacobian(robot, q, p.manipulability_link)
            return 1.0 / jnp.sqrt(jnp.linalg.det(jac @ jac.T) + 1e-9)

        value, grad = jax.vmap(jax.value_and_grad(inverse_manipulability))(x)
        scale = jnp.sqrt(w[7])
        value, grad = scale * value, scale * grad
        diagonal = diagonal + grad[:, :, None] * grad[:, None, :]
        gradient = gradient + grad * value[:, None]
        cost = cost + 0.5 * jnp.sum(value * value)

    # (c + 1, T) diagonals of the smoothness matrix (lm.smoothing_bands), never (T, T).
    coupling = w[1] * smoothing[0] + w[2] * smoothing[1] + w[3] * smoothing[2]
    return lm.Linearization(
        cost=cost,
        gradient=gradient,
        diagonal=diagonal,
        subdiagonal=subdiagonal,
        coupling=coupling,
        coupling_weights=jnp.ones((n,), x.dtype),
        satisfied=satisfied,
    )


def _report(robot: Robot, collide: CollisionTerms, p: Problem, x: jax.Array, samples: int):
    """Errors at each objective's last weighted knot, and clearances along the whole path
    (the knots and ``samples`` points per segment, spread by joint travel:
    :func:`_between_knots`)."""
    t_count = x.shape[0]
    k_count = len(p.objectives)
    pos = rot = jnp.zeros((0,), x.dtype)
    if k_count:
        moved = tuple(jax.tree.map(lambda a: jnp.moveaxis(a, -1, 0), o) for o in p.objectives)
        _, _, pos_t, rot_t = obj.evaluate_t(robot, x.T, moved)  # (k, T)
        weighted = jnp.stack([jnp.any(o.weights > 0, -1) for o in p.objectives])  # (k, T)
        last = jnp.max(jnp.where(weighted, jnp.arange(t_count), 0), axis=1)
        pos = pos_t[jnp.arange(k_count), last]
        rot = rot_t[jnp.arange(k_count), last]
    inf = jnp.asarray(jnp.inf, x.dtype)
    if collide.spheres is None:
        return pos, rot, inf, inf
    inner = _between_knots(x, samples * (t_count - 1))
    configs = jnp.concatenate([x, inner], 0)

    def smallest(configs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Per configuration (B, n) its clearance to the world and between self pairs (B,)."""
        frames = k.frames_t(robot, configs.T)
        world_d, self_d = collide.distances_t(frames, p.world, p.world_checked, p.self_checked)
        none = jnp.full(configs.shape[:1], inf)
        return (
            jnp.min(world_d, 0) if world_d.size else none,
            jnp.min(self_d, 0) if self_d.size else none,
        )

    min_world, min_self = _in_chunks(smallest, configs, REPORT_CHUNK)
    return pos, rot, jnp.min(min_world), jnp.min(min_self)


def solve_starts(robot, collide, smoothing, bandwidth, samples, schedule, p: Problem, starts):
    """Optimises every start path (B, T, n), each with its own bounds and objective values
    (``p.lower``, ``p.upper`` (B, T, n), objective fields (B, T, ...)), by LM with the damping
    ``schedule``; returns per start the path, cost, iterations, errors and clearances."""

    def one(x0, lower, upper, objectives):
        q = dataclasses.replace(p, lower=lower, upper=upper, objectives=objectives)
        result = lm.solve_chain(
            functools.partial(_linearize, robot, collide, smoothing, q),
            x0,
            free=q.free,
            lower=lower,
            upper=upper,
            bandwidth=bandwidth,
            max_iterations=q.max_iterations,
            relative_tolerance=1e-5,
            satisfied_tolerance=q.tolerances[2],
            initial_damping=q.initial_damping,
            schedule=schedule,
        )
        pos, rot, min_world, min_self = _report(robot, collide, q, result.x, samples)
        return result.x, result.cost, result.iterations, pos, rot, min_world, min_self

    return jax.vmap(one)(starts, p.lower, p.upper, p.objectives)


def structure_key(o: obj.Objective) -> tuple:
    return (o.kind, o.link, o.reference, o.align_axis)


def batch_specs(p: Problem, starts: jax.Array) -> tuple:
    """``shard_map`` specs of :func:`solve_starts` over several devices: the starts and
    their own bounds and objective values (leading axis B) split, everything else copied."""
    same = jax.tree.map(lambda _: devices.SAME, p)
    rows = jax.tree.map(lambda _: devices.ROWS, p.objectives)
    split = dataclasses.replace(same, lower=devices.ROWS, upper=devices.ROWS, objectives=rows)
    return split, devices.ROWS


def contact_distances(
    robot: Robot,
    spheres: col.RobotSpheres,
    q: jax.Array,
    world: col.World,
    world_checked: jax.Array,
    self_checked: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """Signed distances of configuration q (n,), inf where not checked
    (:func:`col.checked_pairs`): each sphere, then each box, to each obstacle (S + X, O) and
    each self pair (P,), for the named answer of :func:`clearances`' rule (which pair is
    closest)."""
    centers = col.sphere_centers(robot, spheres, q)
    world_d = col.world_distances(centers, spheres.radii, world, world_checked[: spheres.n_spheres])
    if spheres.n_boxes:
        boxes = col.robot_box_distances(robot, spheres, q, world, world_checked)
        world_d = jnp.concatenate([world_d, boxes])
    return world_d, col.self_distances(centers, spheres, self_checked)


def clearances(
    collide: CollisionTerms,
    q: jax.Array,
    world: col.World,
    world_checked: jax.Array,
    self_checked: jax.Array,
):
    """(B,) smallest checked clearance of configurations q (B, n) to the world and between
    self pairs (``*_checked`` from :func:`col.checked_pairs`): each sphere's and box's
    nearest obstacle (the optimiser's search, over the obstacles the scene has) and every
    self pair."""
    world_d, self_d = collide.distances_t(
        k.frames_t(collide.robot, q.T), world, world_checked, self_checked
    )
    return jnp.minimum(
        jnp.min(world_d, axis=0, initial=jnp.inf), jnp.min(self_d, axis=0, initial=jnp.inf)
    )
