"""Trajectory optimisation: a path of T joint configurations from a start to a goal.

The path is the variable chain of :mod:`pyroki_ros.solver.lm` (T knots x n joints). Costs:

* objectives (the IK vocabulary of :mod:`pyroki_ros.objectives`) with per-knot weights: the
  goal at the last knot, waypoints at inner knots, keypoints at every knot (retargeting);
* smoothness: squared velocity, acceleration and jerk by finite differences (per knot step;
  the path rests before its first and after its last knot);
* a rest / bias configuration;
* collision: robot spheres (:mod:`pyroki_ros.collision`) against world obstacles and against
  each other, as hinge residuals ``max(0, margin - distance)``, at every knot and between
  knots (segment midpoints), so a thin obstacle cannot slip between two knots.

Joint limits hold by projection; the start knot (and a joint-space goal) stays fixed. Several
initial paths are optimised at once (``vmap``) and the best feasible one wins. Velocity and
acceleration limits are met by the time parameterisation (:mod:`pyroki_ros.planning.timing`).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import threading
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot
from pyroki_ros.planning import rrt
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
            its goal or clearance, see ``message``), START_IN_COLLISION or TIMED_OUT.
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


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class _Problem:
    """Traced inputs of one solve. Objective fields carry a knot axis: (T, ...)."""

    objectives: tuple[obj.Objective, ...]
    rest: jax.Array  # (n,)
    weights: jax.Array  # (7,) Weights in field order
    margin: jax.Array  # () m
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


def _sample_fractions(count: int) -> np.ndarray:
    return (np.arange(1, count + 1) / (count + 1)).astype(np.float32)


# Plans stop once usable and a step gains less than this fraction of the cost (see
# TrajectoryOptimizer.optimize): most plans are usable after 5-10 of their 30-60 iterations.
EARLY_STOP = 1e-2

# Goal poses: IK solutions tried as the path's last knot (see TrajectoryOptimizer.plan).
GOAL_SEEDS = 16  # one batched IK solve: the start and 15 random seeds
GOAL_CANDIDATES = 4  # distinct usable solutions kept, nearest to the start first
GOAL_LIMIT_SLACK = 0.02  # rad a goal keeps from joint limits

# Obstacles per kind are padded up to these counts (few programs, little padding: every
# padded slot costs a distance per sphere and configuration in the inner loop).
WORLD_BUCKETS = (0, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)


SELF_GROUP = 16  # sphere pairs per self-collision row (a link pair's pairs, in chunks)


def self_pair_groups(
    pairs: np.ndarray, link_indices: tuple[int, ...], width: int = SELF_GROUP
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The self pairs grouped by link pair, each group split into chunks of at most
    ``width``, as padded tables (G, width): first and second sphere index, 1 where a slot is
    padding, and the slot's row in ``pairs`` (0 for padding). Each group gives one residual
    row per configuration, its nearest pair: the signed distance between two links' sphere
    sets. (A row per pair is 752 rows for the Panda; a per-configuration sort of all pairs
    cost more than the rest of the iteration.)"""
    by_links: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for p, (i, j) in enumerate(np.asarray(pairs, int).reshape(-1, 2)):
        key = tuple(sorted((link_indices[i], link_indices[j])))
        by_links.setdefault(key, []).append((int(i), int(j), p))
    groups = [
        chunk[start : start + width]
        for chunk in by_links.values()
        for start in range(0, len(chunk), width)
    ]
    first = np.zeros((len(groups), width), int)
    second = np.zeros((len(groups), width), int)
    row = np.zeros((len(groups), width), int)
    pad = np.ones((len(groups), width))
    for g, members in enumerate(groups):
        first[g, : len(members)] = [i for i, _, _ in members]
        second[g, : len(members)] = [j for _, j, _ in members]
        row[g, : len(members)] = [p for _, _, p in members]
        pad[g, : len(members)] = 0.0
    return first, second, pad, row


class _Collision:
    """Collision residuals and their Jacobians for one robot's spheres (static: closed over
    by the compiled programs). Configurations come batch-last: (n, B)."""

    def __init__(self, robot: Robot, spheres: col.RobotSpheres | None):
        self.robot = robot
        self.spheres = spheres
        if spheres is None:
            return
        # Which link frames move each sphere.
        links = np.asarray(spheres.link_indices, int)
        on_path = np.zeros((len(links), robot.n_links), bool)
        for s, link in enumerate(links):
            on_path[s, list(robot.ancestors(int(link)))] = True
        self._on_path = on_path  # (S, n_links)
        self._links = links
        self._first, self._second, self._pad, self._pair_row = self_pair_groups(
            spheres.self_pairs, spheres.link_indices
        )
        # The links that joints move (revolute, prismatic, mimic), and per sphere which of
        # them move it, packed 31 to an int32 word: the sphere a row picks is then described
        # by its centre and a few integers instead of its whole Jacobian.
        self._moving = [int(link) for link in range(robot.n_links) if robot.q_index[link] >= 0]
        words = []
        for w in range(0, len(self._moving), 31):
            chunk = self._moving[w : w + 31]
            words.append((on_path[:, chunk] * (1 << np.arange(len(chunk)))).sum(1).astype(np.int32))
        self._link_bits = words  # per word (S,)
        self._has_pairs = spheres.self_pairs.shape[0] > 0

    def centers_t(self, frames) -> tuple[jax.Array, ...]:
        """Sphere centres, three (S, B) arrays."""
        quat, pos = frames
        idx = self._links
        local = tuple(self.spheres.centers[:, i][:, None] for i in range(3))
        rotated = k.rotate(tuple(c[idx] for c in quat), local)
        return tuple(r + p[idx] for r, p in zip(rotated, pos))

    def center_jacobian_t(self, frames, centers) -> tuple[tuple[jax.Array, ...], ...]:
        """d centre / d q as three tuples (x, y, z rows) of n arrays (S, B): a revolute joint
        moves a centre by axis x lever, a prismatic one along its axis; mimic joints add
        their multiple. Element-wise only (tiny dots cost more than they compute on a CPU)."""
        robot = self.robot
        quat, pos = frames
        q_index = np.asarray(robot.q_index)
        types = np.asarray(robot.joint_type)
        axes = np.asarray(robot.axes)
        columns = []
        for j in range(robot.n_joints):
            total = None
            for link in np.flatnonzero(q_index == j):
                moves = self._on_path[:, link]
                if not moves.any():
                    continue
                lq = tuple(c[link] for c in quat)
                axis = k.rotate(
                    lq, tuple(jnp.asarray(axes[link, i], pos[0].dtype) for i in range(3))
                )
                if types[link] == k.REVOLUTE:
                    lever = tuple(c - p[link] for c, p in zip(centers, pos))
                    part = k.cross(axis, lever)
                else:
                    part = tuple(jnp.broadcast_to(a, centers[0].shape) for a in axis)
                scale = robot.multipliers[link] * jnp.asarray(moves, pos[0].dtype)[:, None]
                part = tuple(scale * x for x in part)
                total = part if total is None else tuple(t + x for t, x in zip(total, part))
            if total is None:
                total = tuple(jnp.zeros_like(centers[0]) for _ in range(3))
            columns.append(total)
        return tuple(tuple(col_[i] for col_ in columns) for i in range(3))

    def nearest_obstacle_t(self, centers, world: col.World, checked: jax.Array):
        """Per sphere the signed distance to its nearest checked obstacle (S, B) and its
        gradient with respect to the centre (three (S, B)); inf and zeros without obstacles.
        ``checked``: (S, O) (:func:`col.checked_pairs`)."""
        if world.n_obstacles == 0:
            inf = jnp.full(centers[0].shape, jnp.inf, centers[0].dtype)
            return inf, tuple(jnp.zeros_like(c) for c in centers)
        d, grad = col.nearest_obstacle_t(centers, world, checked[:, None, :])
        return d - self.spheres.radii[:, None], grad

    def nearest_pairs_t(self, centers, checked: jax.Array):
        """Per self-collision group (:func:`self_pair_groups`) its nearest checked sphere
        pair: signed distance (G, B), both centres (two triples of (G, B)) and the link bits
        of both spheres (two tuples of (G, B) int32 words). ``checked``: (P,)."""
        radii = np.asarray(self.spheres.radii, np.float64)
        first, second = self._first, self._second  # (G, K)
        # Padded and unchecked slots sit 1e6 m further away: they never win.
        skip = jnp.maximum(self._pad, 1.0 - checked[self._pair_row].astype(centers[0].dtype))
        reach = radii[first] + radii[second] - col.FAR * skip  # (G, K)
        gap = k.materialize(tuple(c[first] - c[second] for c in centers))  # (G, K, B)
        (d_all,) = k.materialize((col.safe_norm3(*gap) - reach[:, :, None].astype(gap[0].dtype),))
        d = jnp.min(d_all, axis=1)
        # One-hot of the nearest slot and reductions instead of gathers (gathers with
        # computed indices fuse badly on a CPU).
        slot = jnp.argmin(d_all, axis=1)
        pick = jnp.arange(first.shape[1])[None, :, None] == slot[:, None, :]
        chosen = lambda values: jnp.sum(jnp.where(pick, values, 0), axis=1)  # (G, K, B)
        ends = []
        for index in (first, second):
            points = tuple(chosen(c[index]) for c in centers)
            bits = tuple(chosen(word[index][:, :, None]) for word in self._link_bits)
            ends.append((points, bits))
        return d, ends

    def _point_rates(self, frames, point, unit, bits) -> list[jax.Array]:
        """u . d point / d q_j for every joint j, (S, B) each: the point moves with the
        links flagged in ``bits`` (words of :attr:`_link_bits`)."""
        robot = self.robot
        quat, pos = frames
        axes = np.asarray(robot.axes)
        rates = [jnp.zeros_like(unit[0]) for _ in range(robot.n_joints)]
        for m, link in enumerate(self._moving):
            flag = ((bits[m // 31] >> (m % 31)) & 1).astype(unit[0].dtype)
            lq = tuple(c[link] for c in quat)
            axis = k.rotate(lq, tuple(jnp.asarray(axes[link, i], unit[0].dtype) for i in range(3)))
            if robot.joint_type[link] == k.REVOLUTE:
                lever = tuple(p - o[link] for p, o in zip(point, pos))
                move = k.cross(axis, lever)
            else:
                move = axis
            j = int(robot.q_index[link])
            rates[j] = rates[j] + robot.multipliers[link] * flag * sum(
                u * x for u, x in zip(unit, move)
            )
        return rates

    def distances_t(self, centers, world: col.World, world_checked, self_checked):
        """Per sphere its smallest checked obstacle distance (S, B), per self pair (P, B)
        (inf where not checked)."""
        world_d = self.nearest_obstacle_t(centers, world, world_checked)[0]
        pairs = np.asarray(self.spheres.self_pairs)
        gap = tuple(c[pairs[:, 0]] - c[pairs[:, 1]] for c in centers)
        radii = self.spheres.radii[:, None]
        self_d = col.safe_norm3(*gap) - radii[pairs[:, 0]] - radii[pairs[:, 1]]
        return world_d, jnp.where(self_checked[:, None], self_d, jnp.inf)

    def rows_t(
        self,
        q_t: jax.Array,
        world: col.World,
        checked: tuple[jax.Array, jax.Array],
        margin,
        w_world,
        w_self,
    ):
        """Hinge residuals max(0, margin - distance), weighted: one row per sphere for its
        nearest obstacle and one per link-pair group for its nearest sphere pair, (R, B), their
        Jacobian (R, n, B), and each configuration's smallest clearance (B,). ``checked``:
        (world (S, O), self (P,)) pairs that count (:func:`col.checked_pairs`)."""
        frames = k.frames_t(self.robot, q_t)
        centers = self.centers_t(frames)
        jac = self.center_jacobian_t(frames, centers)  # [xyz][joint] (S, B)
        n = len(jac[0])
        flat = k.materialize(tuple(x for row in jac for x in row))
        jac = tuple(flat[i * n : (i + 1) * n] for i in range(3))

        world_d, grad = self.nearest_obstacle_t(centers, world, checked[0])
        active = (world_d < margin) * -jnp.sqrt(w_world)
        r_world = jnp.sqrt(w_world) * jax.nn.relu(margin - world_d)
        j_world = jnp.stack(
            [active * sum(g * jac[i][j] for i, g in enumerate(grad)) for j in range(n)], 1
        )  # (S, n, B)
        if not self._has_pairs:
            return r_world, j_world, jnp.min(world_d, 0)
        self_d, ((c_a, bits_a), (c_b, bits_b)) = self.nearest_pairs_t(centers, checked[1])
        unit = col.unit3(tuple(a - b for a, b in zip(c_a, c_b)))
        active = (self_d < margin) * -jnp.sqrt(w_self)
        r_self = jnp.sqrt(w_self) * jax.nn.relu(margin - self_d)
        # d distance / d q_j = u . (d c_a / d q_j - d c_b / d q_j).
        rate_a = self._point_rates(frames, c_a, unit, bits_a)
        rate_b = self._point_rates(frames, c_b, unit, bits_b)
        j_self = jnp.stack([active * (a - b) for a, b in zip(rate_a, rate_b)], 1)  # (G, n, B)
        clearance = jnp.minimum(jnp.min(world_d, 0), jnp.min(self_d, 0))
        return (
            jnp.concatenate([r_world, r_self], 0),
            jnp.concatenate([j_world, j_self], 0),
            clearance,
        )


# Collision rows of more configurations than this are evaluated this many at a time
# (lax.map): their sphere distances and Jacobians take ~40 KB per configuration (Panda), 1.8 GB
# for the 2 T - 1 configurations of a 22,000-knot motion at once. Plans up to T = 512 take one
# chunk (no loop).
COLLISION_CHUNK = 1024
# The same for the clearance report (knots and samples inside segments, ~3 KB each).
REPORT_CHUNK = 4096


def _in_chunks(fn, configs: jax.Array, chunk: int):
    """``fn`` of configurations (B, n) -> arrays (B, ...), evaluated ``chunk`` configurations
    at a time when B > chunk (one after the other: the memory of one chunk); the same as
    ``fn(configs)`` otherwise."""
    count, n = configs.shape
    if count <= chunk:
        return fn(configs)
    chunks = -(-count // chunk)
    # Padded with copies of the last configuration: valid input, dropped afterwards.
    extra = jnp.broadcast_to(configs[-1:], (chunks * chunk - count, n))
    padded = jnp.concatenate([configs, extra], 0).reshape(chunks, chunk, n)
    out = jax.lax.map(fn, padded)
    return jax.tree.map(lambda a: a.reshape(chunks * chunk, *a.shape[2:])[:count], out)


def _linearize(
    robot: Robot, collide: _Collision, smoothing: jax.Array, p: _Problem, x: jax.Array
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

        def normal_terms(configs: jax.Array):
            """Per configuration (B, n): J^T J (B, n, n), J^T r (B, n), r^T r and clearance
            (B,) of its collision rows."""
            checked = (p.world_checked, p.self_checked)
            rc, jc, clearance = collide.rows_t(configs.T, p.world, checked, p.margin, w[5], w[6])
            jtj = jnp.einsum("rib,rjb->bij", jc, jc)
            return jtj, jnp.einsum("rib,rb->bi", jc, rc), jnp.sum(rc * rc, 0), clearance

        configs = jnp.concatenate([x, 0.5 * (x[1:] + x[:-1])], 0)  # knots, then midpoints
        jtj, jtr, rr, clearance = _in_chunks(normal_terms, configs, COLLISION_CHUNK)
        satisfied = satisfied & jnp.all(clearance >= 0.5 * p.margin)
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


def _report(robot: Robot, collide: _Collision, p: _Problem, x: jax.Array, samples: int):
    """Errors at each objective's last weighted knot, and clearances along the whole path
    (knots and ``samples`` points inside every segment)."""
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
    fractions = jnp.asarray(_sample_fractions(samples), x.dtype)
    inner = x[:-1, None] + fractions[None, :, None] * (x[1:] - x[:-1])[:, None]
    configs = jnp.concatenate([x, inner.reshape(-1, x.shape[1])], 0)

    def smallest(configs: jax.Array) -> tuple[jax.Array, jax.Array]:
        """Per configuration (B, n) its clearance to the world and between self pairs (B,)."""
        centers = collide.centers_t(k.frames_t(robot, configs.T))
        world_d, self_d = collide.distances_t(centers, p.world, p.world_checked, p.self_checked)
        none = jnp.full(configs.shape[:1], inf)
        return (
            jnp.min(world_d, 0) if world_d.size else none,
            jnp.min(self_d, 0) if self_d.size else none,
        )

    min_world, min_self = _in_chunks(smallest, configs, REPORT_CHUNK)
    return pos, rot, jnp.min(min_world), jnp.min(min_self)


def _solve_starts(robot, collide, smoothing, bandwidth, samples, p: _Problem, starts):
    """Optimises every start path (B, T, n), each with its own bounds and objective values
    (``p.lower``, ``p.upper`` (B, T, n), objective fields (B, T, ...)); returns per start the
    path, cost, iterations, errors and clearances."""

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
        )
        pos, rot, min_world, min_self = _report(robot, collide, q, result.x, samples)
        return result.x, result.cost, result.iterations, pos, rot, min_world, min_self

    return jax.vmap(one)(starts, p.lower, p.upper, p.objectives)


def _structure(o: obj.Objective) -> tuple:
    return (o.kind, o.link, o.reference, o.align_axis)


def _batch_specs(p: _Problem, starts: jax.Array) -> tuple:
    """``shard_map`` specs of :func:`_solve_starts` over several devices: the starts and
    their own bounds and objective values (leading axis B) split, everything else copied."""
    same = jax.tree.map(lambda _: devices.SAME, p)
    rows = jax.tree.map(lambda _: devices.ROWS, p.objectives)
    split = dataclasses.replace(same, lower=devices.ROWS, upper=devices.ROWS, objectives=rows)
    return split, devices.ROWS


class TrajectoryOptimizer:
    """Plans joint-space paths for one robot; one compiled program per problem structure
    (number of knots, objective kinds and links, obstacle buckets, number of starts).

    Example:
        >>> planner = TrajectoryOptimizer(robot, spheres)
        >>> plan = planner.plan(start, goal=[objectives.pose("panda_hand", target)], world=world)
    """

    def __init__(
        self,
        robot: Robot,
        spheres: col.RobotSpheres | None = None,
        *,
        device: str | None = None,
        dense_samples: int = 4,
        max_programs: int = 32,
    ):
        """``max_programs``: compiled programs kept; past it the least recently used one is
        dropped with its memory (each request structure compiles one, so a client that varies
        structures cannot grow the process without bound)."""
        self.robot = robot
        self.spheres = spheres
        self.device = jax.local_devices(backend=device)[0]  # this process's (jax.distributed)
        self.dense_samples = dense_samples
        self._collide = _Collision(robot, spheres)
        self.max_programs = max_programs
        self.programs_built = 0  # programs created so far (each compiles on its first call)
        self._programs: collections.OrderedDict[tuple, Callable] = collections.OrderedDict()
        self._world_cache: tuple[col.World, col.World] | None = None
        self._empty_world = col.World.empty()
        self._clearance_program = jax.jit(functools.partial(_clearances, robot, spheres))
        self._lock = threading.Lock()
        self._lower, self._upper = np.array(robot.limits.bounds, np.float64).reshape(-1, 2).T
        self._dtype = np.dtype(robot.dtype)
        from pyroki_ros.ik import IKSolver

        self.ik = IKSolver(robot, device=device)
        self._attempts = (1,) * 8 if self.device.platform == "cpu" else (8,)

    # -- compiled programs -------------------------------------------------------------------

    @property
    def compiled_programs(self) -> int:
        """Number of compiled programs held (at most :attr:`max_programs`)."""
        return len(self._programs)

    def _program(self, structure: tuple, t_count: int, bandwidth: int) -> Callable:
        key = (structure, t_count, bandwidth)
        with self._lock:  # jax.jit only wraps here; tracing happens at the first call
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
                return program
            # Velocity, acceleration, jerk by diagonals (3, bandwidth + 1, T): without jerk
            # (bandwidth 2) its weight is 0 and its third diagonal is not needed.
            bands = lm.smoothing_bands(t_count, (1, 2, 3))[:, : bandwidth + 1]
            smoothing = jnp.asarray(bands, self._dtype)
            fn = functools.partial(
                _solve_starts, self.robot, self._collide, smoothing, bandwidth, self.dense_samples
            )
            program = self._programs[key] = jax.jit(fn)
            self.programs_built += 1
            while len(self._programs) > self.max_programs:
                self._programs.popitem(last=False)
            return program

    def _checked(
        self, world: col.World, padded: col.World, contacts: col.ContactRules, moving: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`col.checked_pairs` with the world's columns padded like ``padded`` (the
        dummies count as checked: they are far away anyway)."""
        if self.spheres is None:
            return np.ones((0, padded.n_obstacles), bool), np.ones((0,), bool)
        world_ok, self_ok = col.checked_pairs(self.robot, self.spheres, world, contacts, moving)
        parts, start = [], 0
        for count, size in zip(world.counts, padded.counts):
            part = world_ok[:, start : start + count]
            parts.append(np.pad(part, ((0, 0), (0, size - count)), constant_values=True))
            start += count
        return np.concatenate(parts, axis=1), self_ok

    def _padded_world(self, world: col.World) -> col.World:
        """The world padded to its bucket, on the device in the robot's dtype. Kept for the
        last world seen: a plan calls :meth:`optimize` several times with one world, and
        padding costs ~30 small eager operations (~9 ms here)."""
        cached = self._world_cache
        if cached is not None and cached[0] is world:
            return cached[1]
        dt = self._dtype
        padded = jax.tree.map(lambda a: jnp.asarray(a, dt), world.padded(WORLD_BUCKETS))
        self._world_cache = (world, padded)
        return padded

    # -- planning ----------------------------------------------------------------------------

    def optimize(
        self,
        starts: np.ndarray,
        objectives: tuple[obj.Objective, ...] = (),
        *,
        world: col.World | None = None,
        free: np.ndarray | None = None,
        weights: Weights = Weights(),
        rest: np.ndarray | None = None,
        margin: float = 0.02,
        max_iterations: int = 60,
        position_tolerance: float = 1e-3,
        orientation_tolerance: float = math.radians(1.0),
        clearance_tolerance: float = 0.0,
        each: bool = False,
        early_stop: float = 0.0,
        vectors: tuple[tuple[str, str], ...] = (),
        vector_targets: np.ndarray | None = None,
        vector_weights: np.ndarray | None = None,
        manipulability_link: str | None = None,
        initial_damping: float = 1e-3,
        contacts: col.ContactRules = col.DEFAULT_CONTACTS,
    ) -> PlanResult | list[PlanResult]:
        """Optimises B initial paths (B, T, n) and returns the best one (``each``: a result
        per start, for batches of different problems).

        ``objectives`` carry a knot axis: fields (T, ...), weights zero at knots where an
        objective does not apply; fields (B, T, ...) give every start its own values (a batch
        of different problems). ``free`` (T, n): 1 where a variable may move (default: every
        knot but the first); fixed variables keep each start path's value. ``vectors``:
        (from, to) link pairs whose difference p_to - p_from should follow ``vector_targets``
        (T, V, 3) (root frame, m) with ``vector_weights`` (T, V) (retargeting by link-to-link
        vectors). ``manipulability_link``: with ``weights.manipulability`` > 0, a cost on the
        inverse manipulability of this link keeps the path away from singularities.
        ``early_stop`` > 0: once every goal is within 70 % of its tolerance and every knot and
        segment midpoint is at least half the margin clear, stop as soon as a step lowers the
        cost by less than this fraction (a usable path, not the smoothest one). The best
        start is the successful one of least cost, else the one closest to success.
        ``initial_damping``: the LM's Marquardt damping of its first step (relative to the
        diagonal). The default is nearly Gauss-Newton, right for start paths already near
        their targets (plans); a start path far from them needs more (see :func:`retarget`).
        ``contacts``: which contacts are not collisions (:func:`col.checked_pairs`; links that
        no free joint moves are not checked against the world by default).
        """
        clock = time.perf_counter()
        robot = self.robot
        starts = np.asarray(starts, np.float64)
        if starts.ndim != 3 or starts.shape[2] != robot.n_joints or starts.shape[1] < 2:
            raise ValueError(
                f"starts must have shape (B, T >= 2, {robot.n_joints}), got {starts.shape}"
            )
        if not np.isfinite(starts).all():
            raise ValueError("initial paths contain NaN or infinite values")
        t_count = starts.shape[1]
        obj.validate(robot, tuple(objectives), check_values=True) if objectives else None
        count = starts.shape[0]
        for o in objectives:
            if o.batch_shape not in ((t_count,), (count, t_count)):
                raise ValueError(
                    f"objective on '{o.link}' must carry one entry per knot ({t_count},) or "
                    f"per start and knot ({count}, {t_count}), got batch shape {o.batch_shape}"
                )
        if free is None:
            free = np.ones((t_count, robot.n_joints))
            free[0] = 0.0
        if world is None:
            world = self._empty_world
        if not (np.isfinite(margin) and margin >= 0):
            raise ValueError(f"margin must be finite and >= 0, got {margin}")
        if not (np.isfinite(initial_damping) and initial_damping > 0):
            raise ValueError(f"initial_damping must be finite and > 0, got {initial_damping}")
        rest = (self._lower + self._upper) / 2 if rest is None else np.asarray(rest, np.float64)
        # Bounds: the limits, but a fixed variable keeps its (possibly wrapped) start value.
        lower = np.where(free > 0, self._lower, starts)  # (B, T, n)
        upper = np.where(free > 0, self._upper, starts)
        starts = np.clip(starts, lower, upper)
        dt = self._dtype
        per_start = lambda a: np.broadcast_to(np.asarray(a, dt), (count, t_count, a.shape[-1]))
        if vectors:
            vector_targets = np.asarray(vector_targets, np.float64)
            if vector_targets.shape != (t_count, len(vectors), 3):
                raise ValueError(
                    f"vector_targets must have shape ({t_count}, {len(vectors)}, 3), got "
                    f"{vector_targets.shape}"
                )
            if vector_weights is None:
                vector_weights = np.ones((t_count, len(vectors)))
            if not (np.isfinite(vector_targets).all() and np.isfinite(vector_weights).all()):
                raise ValueError("vector targets or weights contain NaN or infinite values")
        else:
            vector_targets = np.zeros((t_count, 0, 3))
            vector_weights = np.zeros((t_count, 0))
        padded = self._padded_world(world)
        world_checked, self_checked = self._checked(world, padded, contacts, free.any(0))
        problem = _Problem(
            objectives=tuple(jax.tree.map(per_start, o) for o in objectives),
            rest=np.asarray(rest, dt),
            weights=np.asarray(dataclasses.astuple(weights), dt),
            margin=np.asarray(margin, dt),
            lower=lower.astype(dt),
            upper=upper.astype(dt),
            free=np.asarray(free, dt),
            world=padded,
            world_checked=world_checked,
            self_checked=self_checked,
            max_iterations=np.asarray(max_iterations, np.int32),
            tolerances=np.asarray([position_tolerance, orientation_tolerance, early_stop], dt),
            vectors=np.asarray(vector_targets, dt).reshape(t_count, len(vectors), 3),
            vector_weights=np.asarray(vector_weights, dt).reshape(t_count, len(vectors)),
            initial_damping=np.asarray(initial_damping, dt),
            vector_links=tuple((robot.link_index(a), robot.link_index(b)) for a, b in vectors),
            manipulability_link=-1
            if manipulability_link is None
            else robot.link_index(manipulability_link),
        )
        bandwidth = 3 if weights.jerk > 0 else 2
        structure = (
            tuple(_structure(o) for o in objectives),
            padded.counts,
            starts.shape[0],
        )
        program = self._program(structure, t_count, bandwidth)
        starts = starts.astype(dt)
        mesh = devices.batch_mesh(self.device.platform) if count > 1 else None
        if mesh is not None:  # several devices: each optimises its share of the starts
            size = devices.padded_size(count, mesh)
            per_start = devices.pad_rows((problem.lower, problem.upper, problem.objectives), size)
            problem = dataclasses.replace(
                problem, lower=per_start[0], upper=per_start[1], objectives=per_start[2]
            )
            starts = devices.pad_rows(starts, size)
            program = devices.over_devices_cached(program, mesh, _batch_specs)
        out = program(problem, starts)
        paths, costs, iterations, pos, rot, min_world, min_self = (
            np.asarray(a)[:count] for a in out
        )
        if world.n_obstacles == 0:  # only the padding's far-away dummies
            min_world = np.full_like(min_world, np.inf)
        ok_goal = np.all(pos <= position_tolerance, -1) & np.all(rot <= orientation_tolerance, -1)
        ok_clear = (min_world >= clearance_tolerance) & (min_self >= clearance_tolerance)
        ok = ok_goal & ok_clear
        # Rank: success first, then clearance, then the goal; ties by total cost.
        goal_shortfall = np.sum(np.maximum(pos - position_tolerance, 0), -1) + np.sum(
            np.maximum(rot - orientation_tolerance, 0), -1
        )
        clearance_shortfall = np.maximum(clearance_tolerance - np.minimum(min_world, min_self), 0)
        rank = np.lexsort((costs, goal_shortfall, clearance_shortfall, ~ok))
        seconds = time.perf_counter() - clock

        def result(i: int) -> PlanResult:
            problems = (
                ("goal not reached within tolerance", not ok_goal[i]),
                (
                    "path comes closer to an obstacle than allowed",
                    min_world[i] < clearance_tolerance,
                ),
                ("path collides with itself", min_self[i] < clearance_tolerance),
            )
            return PlanResult(
                path=np.clip(paths[i].astype(np.float64), self._lower, self._upper),
                success=bool(ok[i]),
                position_errors=pos[i].astype(np.float64),
                orientation_errors=rot[i].astype(np.float64),
                min_distance=float(min_world[i]),
                min_self_distance=float(min_self[i]),
                cost=float(costs[i]),
                iterations=int(iterations[i]),
                solve_seconds=seconds,
                message="ok" if ok[i] else "; ".join(m for m, bad in problems if bad),
            )

        if each:
            return [result(i) for i in range(count)]
        return result(int(rank[0]))

    def plan(
        self,
        start: np.ndarray,
        goal: tuple[obj.Objective, ...] | np.ndarray,
        *,
        waypoints: tuple[tuple[obj.Objective, ...], ...] = (),
        world: col.World | None = None,
        num_steps: int = 64,
        num_starts: int | None = None,
        active_joints: tuple[str, ...] | None = None,
        seed: int = 0,
        progress=None,
        contacts: col.ContactRules = col.DEFAULT_CONTACTS,
        sampling_budget: float = 1.0,
        timeout: float = 0.0,
        **options,
    ) -> PlanResult:
        """Plans from ``start`` (n,) to a goal: IK objectives (reached at the last knot, the
        goal configuration found by IK first) or a joint configuration (n,).

        Args:
            waypoints: objective groups visited in order, at evenly spread inner knots.
            world: obstacles (default none).
            num_steps: knots T, start and goal included.
            num_starts: initial paths optimised together: the straight line in joint space and
                ``num_starts - 1`` paths through random intermediate configurations. Default:
                on a CPU up to 8 paths one after the other, stopping at the first success; on a
                GPU 8 at once. A pose goal's configuration comes from IK from the start; when
                that one is not usable (in the margin of an obstacle, on a joint limit) or its
                first path fails, up to GOAL_CANDIDATES other IK solutions (nearest to the
                start first) take turns as the last knot: straight lines to each, then bent
                paths.
            active_joints: joints that may move (default all); the others keep the start value.
            seed: of the random intermediate configurations (plans are deterministic).
            progress: optional callable taking a line of text per attempt (for a log).
            contacts: contacts that are not collisions (:func:`col.checked_pairs`): by
                default links no active joint moves (the base on its stand) are not checked
                against the world. A start that collides otherwise is not planned from:
                ``reason`` START_IN_COLLISION, the message names both sides.
            sampling_budget: seconds for the global step (:mod:`pyroki_ros.planning.rrt`:
                RRT-Connect over the sphere model at a quarter of the margin) whose path is
                the next start path once the first one fails (0: none). Not with waypoints.
            timeout: wall-clock budget (s, 0 = none), checked before each start path (and
                bounding the global step): when it runs out the best path so far comes back
                with ``reason`` TIMED_OUT. One start path's optimisation is not cut, and
                compiling a new problem structure (its first plan) is not counted.
            **options: passed to :meth:`optimize` (weights, margin, tolerances, ...).
        """
        clock = time.perf_counter()
        robot = self.robot
        n = robot.n_joints
        start = np.asarray(start, np.float64)
        if start.shape != (n,):
            raise ValueError(f"start must have shape ({n},), got {start.shape}")
        if not np.isfinite(start).all():
            raise ValueError("start contains NaN or infinite values")
        slack = 1e-3  # a measured state may sit a little past a limit
        outside = (start < self._lower - slack) | (start > self._upper + slack)
        if outside.any():
            names = [robot.joint_names[i] for i in np.flatnonzero(outside)]
            raise ValueError(f"start is outside the joint limits at {', '.join(names)}")
        start = np.clip(start, self._lower, self._upper)
        if num_steps < 2:
            raise ValueError(f"num_steps must be >= 2, got {num_steps}")
        if num_starts is not None and num_starts < 1:
            raise ValueError(f"num_starts must be >= 1, got {num_starts}")
        active = np.ones(n, bool)
        if active_joints is not None:
            if len(active_joints) == 0:
                raise ValueError("active_joints is empty: nothing may move")
            active = np.zeros(n, bool)
            active[[robot.joint_index(j) for j in active_joints]] = True

        start_clear = (
            self.spheres is None or self._clearances(start[None], world, contacts, active)[0] >= 0
        )
        if not start_clear:
            clearance, side_a, side_b = self.deepest_contact(start, world, contacts, active)
            return PlanResult(
                path=start[None].repeat(max(int(num_steps), 2), 0),
                success=False,
                position_errors=np.full(0, np.inf),
                orientation_errors=np.full(0, np.inf),
                min_distance=clearance,
                min_self_distance=clearance,
                cost=math.inf,
                iterations=0,
                solve_seconds=time.perf_counter() - clock,
                message=f"start is in collision: {side_a} and {side_b} overlap by "
                f"{-clearance * 1e3:.1f} mm (allow the pair in contacts to plan anyway)",
                reason=START_IN_COLLISION,
            )

        joint_goal = isinstance(goal, np.ndarray) or (
            not isinstance(goal, obj.Objective)
            and len(goal) > 0
            and not isinstance(goal[0], obj.Objective)
        )
        if joint_goal:
            goal_q = np.asarray(goal, np.float64)
            if goal_q.shape != (n,):
                raise ValueError(f"a joint goal must have shape ({n},), got {goal_q.shape}")
            if not np.isfinite(goal_q).all():
                raise ValueError("goal configuration contains NaN or infinite values")
            outside = (goal_q < self._lower - slack) | (goal_q > self._upper + slack)
            if outside.any():
                names = [robot.joint_names[i] for i in np.flatnonzero(outside)]
                raise ValueError(f"goal is outside the joint limits at {', '.join(names)}")
            goal_q = np.where(active, np.clip(goal_q, self._lower, self._upper), start)
            goal_objectives: tuple[obj.Objective, ...] = ()
        else:
            goal_objectives = (goal,) if isinstance(goal, obj.Objective) else tuple(goal)
            if not goal_objectives:
                raise ValueError("no goal given")
            names = None if active_joints is None else tuple(active_joints)
            goal_q = self.ik.solve(goal_objectives, seed=start, active_joints=names).q

        t_count = int(num_steps)
        rng = np.random.default_rng(seed)
        margin = float(options.get("margin", 0.02))
        goals = [goal_q]
        more_goals = None
        if not joint_goal:
            # Other IK solutions of the goal, for when the one found from the start sits in
            # the margin of an obstacle or on a joint limit, or its paths all fail.
            more_goals = functools.partial(
                self._goal_configurations,
                goal_objectives,
                start,
                active_joints,
                world,
                margin,
                rng,
                contacts,
                active,
            )
            if not self._usable_goals(goal_q[None], world, margin, contacts, active)[0]:
                goals = more_goals() or goals
                more_goals = None

        groups = [(t_count - 1, goal_objectives)]
        for i, group in enumerate(waypoints):
            group = (group,) if isinstance(group, obj.Objective) else tuple(group)
            knot = round((i + 1) * (t_count - 1) / (len(waypoints) + 1))
            groups.append((knot, group))
        per_knot = []
        for knot, group in groups:
            for o in group:
                if o.batch_shape != ():
                    raise ValueError("goal and waypoint objectives must be single (unbatched)")
                mask = np.zeros((t_count, 1))
                mask[knot] = 1.0
                per_knot.append(
                    dataclasses.replace(
                        jax.tree.map(lambda a: np.broadcast_to(a, (t_count, a.shape[-1])), o),
                        weights=mask * np.asarray(o.weights, np.float64),
                    )
                )

        per_knot = tuple(per_knot)
        free = np.ones((t_count, n)) * active
        free[0] = 0.0
        if joint_goal:
            free[-1] = 0.0
        weights = options.pop("weights", Weights())
        options.setdefault("early_stop", EARLY_STOP)
        solve = functools.partial(
            self.optimize,
            objectives=per_knot,
            world=world,
            weights=weights,
            contacts=contacts,
            **options,
        )

        # CPU: one start path at a time (a batch costs its size anyway), stopping at the first
        # success; GPU: all start paths at once.
        attempts = (num_starts,) if num_starts else self._attempts
        if more_goals is not None and attempts[0] > 1:
            goals = _merge_goals(goals, more_goals())
            more_goals = None
        result, used = None, 0
        budget_start, built = clock, self.programs_built
        for count in attempts:
            if self.programs_built > built:  # a compile cannot be cut: not counted
                budget_start, built = time.perf_counter(), self.programs_built
            left = timeout - (time.perf_counter() - budget_start)
            if timeout > 0 and result is not None and left <= 0:
                result = dataclasses.replace(
                    result,
                    message=f"no path found within the {timeout:.3g} s budget ({used} start "
                    f"paths tried); best: {result.message}",
                    reason=TIMED_OUT,
                )
                break
            if used == 1 and more_goals is not None:  # the first path failed: more goals
                goals = _merge_goals(goals, more_goals())
                more_goals = None
            starts = np.stack(
                [
                    self._initial_path(
                        start, goals[i % len(goals)], active, t_count, rng, i >= len(goals)
                    )
                    for i in range(used, used + count)
                ]
            )
            if sampling_budget > 0 and not waypoints and (used > 0 or count > 1):
                seeded, _ = rrt.global_path(
                    self, start, goals, active, t_count, world=world, contacts=contacts,
                    margin=margin / 4, seed=seed,
                    budget=min(sampling_budget, left) if timeout > 0 else sampling_budget,
                    goal_objectives=goal_objectives, active_joints=active_joints,
                )  # fmt: skip
                sampling_budget = 0.0  # once per plan
                starts[-1] = starts[-1] if seeded is None else seeded
            used += count
            candidate = solve(starts, free=free)
            candidate = self._push_clear(candidate, solve, free, weights)
            if not joint_goal and not candidate.success:
                candidate = self._exact_goal(
                    candidate, goal_objectives, active_joints, free, solve, weights
                )
            if result is None or _better(candidate, result):
                result = candidate
            if progress is not None:
                progress(
                    f"start path {used}/{sum(attempts)}: {candidate.message} "
                    f"({candidate.iterations} iterations, {candidate.solve_seconds:.3f} s)"
                )
            if result.success:
                break
        return dataclasses.replace(result, solve_seconds=time.perf_counter() - clock)

    def plan_batch(
        self,
        starts: np.ndarray,
        goals: np.ndarray,
        *,
        tip: str | None = None,
        world: col.World | None = None,
        num_steps: int = 64,
        replan_failures: bool = True,
        batched: bool | None = None,
        **options,
    ) -> list[PlanResult]:
        """Plans many start/goal pairs: on a GPU in one batched solve (one compiled program,
        ``vmap`` over the pairs, parallel), on a CPU one :meth:`plan` per pair (``batched``
        None, the default, picks by device; True / False force either).

        Why by device: a vmapped loop runs every pair until the slowest one stops and a CPU
        gains no parallelism from it, so there it was ~20x slower than planning the pairs
        one after the other (docs/benchmarks/trajopt.md), while a GPU runs the pairs at once.

        The batched solve starts from straight-line paths, without restarts. Alone it has
        none of :meth:`plan`'s fallbacks (other IK goal configurations, bent start paths,
        raised weights), so some pairs may fail that :meth:`plan` solves.
        With ``replan_failures`` (default) every pair the batch left unsuccessful is planned
        again with :meth:`plan` (same world, ``num_steps`` and options; the pose goal as
        ``obj.pose(tip, goal)``, or the joint goal), and the better result is kept: a
        successful re-plan replaces the failure; when both fail, the one closer to success by
        :meth:`plan`'s own ranking (clearance, then goal error, then cost). Cost: one
        :meth:`plan` per failed pair, one after the other on the host after the batch (on a
        CPU typically 0.02-2 s each; the first also compiles :meth:`plan`'s programs for this
        ``num_steps`` if nothing did before). A pair whose start lies outside the joint
        limits (which :meth:`plan` refuses) keeps its batch result. The message of a re-planned
        pair ends in " (re-planned alone)", or " (re-planned alone: no better)" where the
        batch's result was kept. ``replan_failures=False``: the batch alone.

        Args:
            starts: (B, n) start configurations.
            goals: (B, n) goal configurations, or with ``tip`` (B, 7) wxyz_xyz poses of that
                link (goal configurations by one batched IK solve from the starts first).
            tip: the link of pose goals (None: joint goals).
            replan_failures: re-plan the batch's failures one by one (see above).
            batched: the vmapped solve (True) or one :meth:`plan` per pair (False; a start
                outside the joint limits then raises ValueError naming the pair); None: by
                device.
            **options: as for :meth:`optimize`.

        Returns:
            one PlanResult per pair; ``solve_seconds`` of every result is the whole call's
            time (the batch and any re-plans).
        """
        clock = time.perf_counter()
        n = self.robot.n_joints
        starts = np.asarray(starts, np.float64)
        goals = np.asarray(goals, np.float64)
        if starts.ndim != 2 or starts.shape[1] != n or len(starts) == 0:
            raise ValueError(f"starts must have shape (B >= 1, {n}), got {starts.shape}")
        if goals.shape not in ((len(starts), n), (len(starts), 7)):
            raise ValueError(
                f"goals must have shape ({len(starts)}, {n}) or ({len(starts)}, 7), got "
                f"{goals.shape}"
            )
        if not (np.isfinite(starts).all() and np.isfinite(goals).all()):
            raise ValueError("starts or goals contain NaN or infinite values")
        if num_steps < 2:
            raise ValueError(f"num_steps must be >= 2, got {num_steps}")
        t_count = int(num_steps)
        if tip is not None and goals.shape[1] != 7:
            raise ValueError(f"pose goals of '{tip}' must have shape (B, 7) wxyz_xyz")
        if tip is None and goals.shape[1] != n:
            raise ValueError(f"joint goals must have shape (B, {n}); pose goals need tip")
        if batched is None:
            batched = self.device.platform != "cpu"
        if not batched:
            results = []
            for i, start in enumerate(starts):
                goal = obj.pose(tip, goals[i]) if tip is not None else goals[i]
                try:
                    results.append(
                        self.plan(start, goal, world=world, num_steps=t_count, **options)
                    )
                except ValueError as e:
                    raise ValueError(f"pair {i}: {e}") from None
            seconds = time.perf_counter() - clock
            return [dataclasses.replace(r, solve_seconds=seconds) for r in results]
        free = np.ones((t_count, n))
        free[0] = 0.0
        objectives: tuple[obj.Objective, ...] = ()
        if tip is not None:
            goal_q = self.ik.solve(obj.pose(tip, goals), seed=starts).q
            mask = np.zeros((t_count, 1))
            mask[-1] = 1.0
            pose = obj.pose(tip, np.broadcast_to(goals[:, None], (len(goals), t_count, 7)))
            objectives = (dataclasses.replace(pose, weights=mask * np.asarray(pose.weights)),)
        else:
            goal_q = np.clip(goals, self._lower, self._upper)
            free[-1] = 0.0
        knots = np.linspace(0.0, 1.0, t_count)[None, :, None]
        paths = starts[:, None] + knots * (goal_q - starts)[:, None]
        options.setdefault("early_stop", EARLY_STOP)
        results = self.optimize(paths, objectives, world=world, free=free, each=True, **options)
        if replan_failures:
            slack = 1e-3  # as plan(): a measured start may sit a little past a limit
            inside = np.all((starts >= self._lower - slack) & (starts <= self._upper + slack), -1)
            for i, batched in enumerate(results):
                if batched.success or not inside[i]:
                    continue
                goal = obj.pose(tip, goals[i]) if tip is not None else goal_q[i]
                alone = self.plan(starts[i], goal, world=world, num_steps=t_count, **options)
                if _better(alone, batched):  # success first: a successful re-plan always wins
                    results[i] = dataclasses.replace(
                        alone, message=f"{alone.message} (re-planned alone)"
                    )
                else:
                    results[i] = dataclasses.replace(
                        batched, message=f"{batched.message} (re-planned alone: no better)"
                    )
        seconds = time.perf_counter() - clock
        return [dataclasses.replace(r, solve_seconds=seconds) for r in results]

    def _initial_path(self, start, goal_q, active, t_count, rng, bent: bool) -> np.ndarray:
        """(T, n): the straight line in joint space, or (``bent``) a path through a random
        intermediate configuration (within a quarter of each joint's range of the middle)."""
        knots = np.linspace(0.0, 1.0, t_count)[:, None]
        if not bent:
            return start + knots * (goal_q - start)
        span = self._upper - self._lower
        span = np.where(np.isfinite(span), span, 2 * np.pi)
        first, second = np.clip(2 * knots, 0, 1), np.clip(2 * knots - 1, 0, 1)
        via = 0.5 * (start + goal_q) + rng.uniform(-0.25, 0.25, start.shape) * span
        via = np.where(active, np.clip(via, self._lower, self._upper), start)
        return start + first * (via - start) + second * (goal_q - via)

    def _usable_goals(
        self,
        q: np.ndarray,
        world: col.World | None,
        margin: float,
        contacts: col.ContactRules,
        moving: np.ndarray,
    ) -> np.ndarray:
        """(B,) bool for goal configurations q (B, n): at least ``margin`` clear of obstacles
        and itself, and every joint with a range wider than 0.5 (not a gripper) at least
        GOAL_LIMIT_SLACK from its limits (a knot on a limit can only slide along it: a goal
        pose that needs it to leave stays missed by a few hundredths of a radian)."""
        wide = (self._upper - self._lower) > 0.5
        slack = np.minimum(q - self._lower, self._upper - q)
        ok = np.all((slack >= GOAL_LIMIT_SLACK) | ~wide, axis=-1)
        if self.spheres is None:
            return ok
        return ok & (self._clearances(q, world, contacts, moving) >= margin)

    def _clearances(
        self, q: np.ndarray, world: col.World | None, contacts: col.ContactRules, moving
    ) -> np.ndarray:
        """(B,) smallest checked clearance of configurations q (B, n): one compiled call (the
        named answer, :meth:`deepest_contact`, runs eagerly: ~40 ms, only when needed)."""
        world = self._empty_world if world is None else world
        padded = self._padded_world(world)
        checked = self._checked(world, padded, contacts, moving)
        return np.asarray(self._clearance_program(jnp.asarray(q, self._dtype), padded, *checked))

    def deepest_contact(
        self,
        q: np.ndarray,
        world: col.World | None = None,
        contacts: col.ContactRules = col.DEFAULT_CONTACTS,
        moving: np.ndarray | None = None,
    ) -> tuple[float, str, str]:
        """The smallest checked clearance of configuration ``q`` (n,) (m, < 0: penetration)
        and what it is between: (distance, link, obstacle name or other link); (inf, "", "")
        when nothing is checked. Uses the rule of :func:`col.checked_pairs`, as planning does.
        """
        if self.spheres is None:
            return math.inf, "", ""
        world = self._empty_world if world is None else world
        moving = np.ones(self.robot.n_joints, bool) if moving is None else moving
        world_ok, self_ok = col.checked_pairs(self.robot, self.spheres, world, contacts, moving)
        centers = col.sphere_centers(self.robot, self.spheres, jnp.asarray(q, self._dtype))
        radii = self.spheres.radii
        best = (math.inf, "", "")
        if world.n_obstacles:
            d = np.asarray(col.world_distances(centers, radii, world, world_ok), np.float64)
            s_i, o_i = np.unravel_index(np.argmin(d), d.shape)
            best = (float(d[s_i, o_i]), self.spheres.link_names[s_i], world.name(int(o_i)))
        if self.spheres.n_pairs:
            d = np.asarray(col.self_distances(centers, radii, self.spheres, self_ok), np.float64)
            i = int(np.argmin(d))
            if d[i] < best[0]:
                a, b = np.asarray(self.spheres.self_pairs)[i]
                best = (float(d[i]), self.spheres.link_names[a], self.spheres.link_names[b])
        return best

    def _goal_configurations(
        self, goal_objectives, start, active_joints, world, margin, rng, contacts, moving
    ) -> list[np.ndarray]:
        """Up to GOAL_CANDIDATES distinct usable IK solutions of the goal (see
        :meth:`_usable_goals`), nearest to the start first: one batched IK solve from the
        start and GOAL_SEEDS - 1 random seeds."""
        names = None if active_joints is None else tuple(active_joints)
        lower = np.where(np.isfinite(self._lower), self._lower, -np.pi)
        upper = np.where(np.isfinite(self._upper), self._upper, np.pi)
        seeds = rng.uniform(lower, upper, (GOAL_SEEDS, len(start)))
        seeds[0] = start
        if names is not None:  # inactive joints keep the start's value
            fixed = ~np.isin(self.robot.joint_names, names)
            seeds[:, fixed] = start[fixed]
        ik = self.ik.solve(goal_objectives, seed=seeds, active_joints=names)
        q = np.asarray(ik.q, np.float64)[np.asarray(ik.success)]
        if len(q) == 0:
            return []
        usable = self._usable_goals(q, world, margin, contacts, moving)
        q = q[usable]
        q = q[np.argsort(np.linalg.norm(q - start, axis=-1))]
        return _merge_goals([], list(q))[:GOAL_CANDIDATES]

    def _push_clear(self, result, solve, free, weights: Weights, rounds: int = 2) -> PlanResult:
        """Penalty continuation: while a path still cuts into an obstacle (or itself), raise
        the collision weights tenfold and re-optimise from it."""
        total_iterations, seconds = result.iterations, result.solve_seconds
        for _ in range(rounds):
            if min(result.min_distance, result.min_self_distance) >= 0 or result.success:
                break
            weights = dataclasses.replace(
                weights,
                collision=10 * weights.collision,
                self_collision=10 * weights.self_collision,
            )
            again = solve(result.path[None], free=free, weights=weights)
            total_iterations += again.iterations
            seconds += again.solve_seconds
            if _better(again, result):
                result = again
        return dataclasses.replace(result, iterations=total_iterations, solve_seconds=seconds)

    def _exact_goal(
        self, result, goal_objectives, active_joints, free, solve, weights: Weights
    ) -> PlanResult:
        """The goal costs trade a little accuracy for smoothness and clearance. Tighten them:
        re-optimise with the goal weight raised tenfold, twice (the collision costs stay on
        the last knot, unlike a separate IK). If that still misses, IK from the last knot
        within a small radius, then re-optimise with that knot fixed."""
        if result.min_distance < 0 or result.min_self_distance < 0:
            return result  # a colliding path is not worth finishing
        iterations, seconds = result.iterations, result.solve_seconds
        best = result
        for factor in (10.0, 100.0):
            heavier = dataclasses.replace(weights, goal=weights.goal * factor)
            again = solve(best.path[None], free=free, weights=heavier)
            iterations, seconds = iterations + again.iterations, seconds + again.solve_seconds
            if _better(again, best):
                best = again
            if best.success:
                break
        if not best.success and min(best.min_distance, best.min_self_distance) >= 0:
            names = None if active_joints is None else tuple(active_joints)
            ik = self.ik.solve(
                goal_objectives,
                seed=best.path[-1],
                active_joints=names,
                max_deviation=0.05,
                position_tolerance=2e-4,
                orientation_tolerance=2e-3,
            )
            t_count = best.path.shape[0]
            ramp = np.clip(np.linspace(-1.0, 1.0, t_count), 0.0, 1.0)[:, None]
            start = best.path + ramp * (ik.q - best.path[-1])
            fixed_goal = free.copy()
            fixed_goal[-1] = 0.0
            again = solve(start[None], free=fixed_goal)
            again = self._push_clear(again, solve, fixed_goal, weights)
            iterations, seconds = iterations + again.iterations, seconds + again.solve_seconds
            if _better(again, best):
                best = again
        return dataclasses.replace(best, iterations=iterations, solve_seconds=seconds)


def _merge_goals(goals: list[np.ndarray], more: list[np.ndarray]) -> list[np.ndarray]:
    """``goals`` followed by those of ``more`` that differ from every one kept by more than
    0.1 rad in some joint."""
    kept = list(goals)
    for q in more:
        if all(np.max(np.abs(q - k)) > 0.1 for k in kept):
            kept.append(q)
    return kept


def _clearances(
    robot: Robot,
    spheres: col.RobotSpheres,
    q: jax.Array,
    world: col.World,
    world_checked: jax.Array,
    self_checked: jax.Array,
):
    """(B,) smallest checked clearance of configurations q (B, n) to the world and between
    self pairs (``*_checked`` from :func:`col.checked_pairs`)."""
    centers = col.sphere_centers(robot, spheres, q)
    d = col.world_distances(centers, spheres.radii, world, world_checked)
    smallest = jnp.min(d.reshape(d.shape[0], -1), axis=1, initial=jnp.inf)
    if spheres.n_pairs:
        pairs = col.self_distances(centers, spheres.radii, spheres, self_checked)
        smallest = jnp.minimum(smallest, jnp.min(pairs, axis=1))
    return smallest


def _better(a: PlanResult, b: PlanResult) -> bool:
    """Success first, then clearance, then goal error, then cost."""
    key = lambda r: (
        not r.success,
        -min(r.min_distance, r.min_self_distance, 0.0),
        float(np.sum(r.position_errors) + np.sum(r.orientation_errors)),
        r.cost,
    )
    return key(a) < key(b)


@jax.jit
def _link_poses(robot: Robot, q: jax.Array) -> jax.Array:
    return k.forward_kinematics(robot, q).wxyz_xyz


def _knot_bucket(t_count: int) -> int:
    """Keypoint sequences are padded to these lengths so a new length rarely recompiles."""
    size = 16
    while size < t_count:
        size *= 2 if size < 256 else 1.5
        size = int(size)
    return size


# Fixed part of trajectory_memory_bytes: compiling the programs (path, IK start) and the
# chunk buffers of the collision terms (COLLISION_CHUNK configurations at a time). Measured
# as peak RSS growth minus the program's buffers: ~220 MB without collision spheres, ~370 MB
# with the Panda's 48.
MEMORY_FIXED_BYTES = 384 << 20


def trajectory_memory_bytes(
    steps: int, n_joints: int, n_links: int, *, starts: int = 1, jerk: bool = False
) -> int:
    """Estimated peak memory (bytes) of optimising a path of ``steps`` knots of ``n_joints``
    joints with ``n_links`` objectives / keypoint links (or link-to-link vectors), ``starts``
    start paths at once (a plan on a GPU: 8; on a CPU: 1), in float32, including compiling
    its program. For a refusal before the work: nothing is allocated.

    ``MEMORY_FIXED_BYTES + starts * steps * 4 * ((8 + 6 b) n^2 + 16 n + 64 K)``, with
    b = 3 with a jerk weight, else 2 (knots per group of the banded solve):

    * (8 + 6 b) n^2 per knot: the Gauss-Newton blocks, (n, n) per knot and its neighbour,
      of the linearisation (twice: the iterate and the candidate), and b n^2 per knot for
      each of the grouped blocks, their Cholesky factors and the intermediate products;
    * 16 n: the path, its bounds, gradient, step and collision rows per configuration;
    * 64 K: per link and knot, its target and weights and their residual rows (and the host's
      float64 keypoints).

    All of it is linear in T: the smoothness matrix is kept by its (b + 1, T) diagonals and
    long paths evaluate collisions in chunks (no (T, T) matrix, which took 1.6 GB at 20,000
    steps). Against XLA's buffer plan of the retarget program (22,141 knots, Panda n = 8 and
    UR5 n = 6, K = 1 and 10, with and without spheres): 63-123 MB of buffers, 71-160 MB by
    the per-knot term; a whole 20,000-step Panda retarget in a fresh process grew its peak
    RSS by 471 MB, estimated 512 MB.
    """
    for name, value in (("steps", steps), ("n_joints", n_joints), ("n_links", n_links)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    b = 3 if jerk else 2
    per_knot = 4 * ((8 + 6 * b) * n_joints**2 + 16 * n_joints + 64 * n_links)
    return MEMORY_FIXED_BYTES + int(starts) * int(steps) * per_knot


def retarget_memory_bytes(steps: int, n_joints: int, n_links: int) -> int:
    """Estimated peak memory (bytes) of :func:`retarget` of ``steps`` keypoint steps of
    ``n_links`` links for a robot of ``n_joints`` joints: :func:`trajectory_memory_bytes` of
    the knots it optimises (``steps`` padded up to a bucket, at most 1.5x)."""
    return trajectory_memory_bytes(_knot_bucket(max(int(steps), 1)), n_joints, n_links)


# Retargeting paths start held still at one configuration, far from the keypoints of later
# steps: an undamped (Gauss-Newton) first step leapt across to another IK branch (a Panda
# following link-to-link vectors flipped its wrist, joint 5 onto its limit, and the limit then
# blocked the motion 10-27 mm off); damped steps bend the path from its start towards the
# motion. Any value from 0.1 to 10 gave the same paths in 10-57 iterations (10 cases).
RETARGET_DAMPING = 1.0
# IK iterations (restarts included) for the start configuration: reachable keypoints are
# reached within the first restarts; towards unreachable ones the IK would spend its whole
# default budget (1000) on an answer that is not used (see _retarget_start).
RETARGET_START_ITERATIONS = 150
# Iterations between two checks of a retargeting budget: each check restarts the LM from the
# path so far (after the first chunk with optimize's default damping: the path follows the
# motion by then).
RETARGET_CHUNK = 5


def _retarget_start(
    planner: TrajectoryOptimizer,
    links: tuple[str, ...],
    targets: np.ndarray,
    link_weights: np.ndarray,
    seed: np.ndarray,
    active_joints: tuple[str, ...] | None,
) -> np.ndarray:
    """(n,) the configuration a retargeting path starts from (held still; every knot, the
    first one included, is then optimised): IK from the seed towards the keypoints
    ``targets`` (K, 3) of the first step, each link weighted as in the path's cost and only
    the active joints moving, if that reaches them; else the seed.

    Only a reaching answer: towards keypoints out of reach the IK returns whichever of its
    random restarts came closest, among configurations about equally close, and the path
    optimised from there depended on that draw. Without weighted links (only link-to-link
    vectors, which are relative) there is nothing absolute to reach: the seed, the
    configuration the robot is in."""
    pulling = tuple(
        obj.position(link, targets[i], weight=float(link_weights[i]))
        for i, link in enumerate(links)
        if link_weights[i] > 0
    )
    if not pulling:
        return seed
    ik = planner.ik.solve(
        pulling,
        seed=seed,
        active_joints=active_joints,
        max_iterations=RETARGET_START_ITERATIONS,
    )
    return np.asarray(ik.q, np.float64) if ik.success else seed


def retarget(
    planner: TrajectoryOptimizer,
    links: tuple[str, ...],
    keypoints: np.ndarray,
    *,
    seed: np.ndarray | None = None,
    link_weights: np.ndarray | None = None,
    scale: float = 1.0,
    smoothness: float = 1.0,
    world: col.World | None = None,
    active_joints: tuple[str, ...] | None = None,
    max_iterations: int = 100,
    vector_pairs: tuple[tuple[int, int], ...] = (),
    vector_weight: float = 1.0,
    timeout: float = 0.0,
) -> tuple[PlanResult, np.ndarray]:
    """Follows keypoints with links: link ``links[k]`` towards ``scale * keypoints[t, k]``
    at step t, with smooth joint motion, limits that hold and (with ``world`` and the
    planner's spheres) collision avoidance. With ``vector_pairs`` the links also match the
    scaled keypoint-to-keypoint vectors (how a demonstrator's hand sits relative to its
    elbow, say), which transfers the motion's shape when absolute positions cannot match;
    ``link_weights`` of 0 then leave only the vectors.

    Args:
        links: K link names.
        keypoints: (T, K, 3) positions in the robot's root frame (m), T >= 2.
        seed: (n,) configuration the motion starts from (default the middle of the limits);
            the first knot is free, the seed only initialises the path: every knot starts at
            the IK solution from the seed for the first step's weighted keypoints (only the
            active joints moving), or at the seed where none are weighted or IK cannot reach
            them.
        link_weights: (K,) >= 0 relative weights (default 1).
        scale: keypoints are multiplied by this (e.g. human to robot size).
        smoothness: multiplies the velocity and acceleration weights.
        vector_pairs: (i, j) index pairs into ``links``: p(links[j]) - p(links[i]) follows
            scale * (keypoints[t, j] - keypoints[t, i]).
        vector_weight: weight of each vector term.
        timeout: wall-clock budget (s, 0 = none), checked every RETARGET_CHUNK iterations:
            when the next chunk would end past it, the path so far comes back with ``reason``
            TIMED_OUT. Compiling the program of a new motion length (its first use) is not
            counted.

    Returns:
        (the PlanResult over the T steps, per-step RMS keypoint error (T,) m).
    """
    clock = budget_start = time.perf_counter()
    robot = planner.robot
    n = robot.n_joints
    keypoints = np.asarray(keypoints, np.float64)
    links = tuple(links)
    if keypoints.ndim != 3 or keypoints.shape[1:] != (len(links), 3):
        raise ValueError(
            f"keypoints must have shape (T, {len(links)}, 3) for {len(links)} links, "
            f"got {keypoints.shape}"
        )
    t_real = keypoints.shape[0]
    if t_real < 2:
        raise ValueError("need at least 2 keypoint steps")
    if not links:
        raise ValueError("no links given")
    if not np.isfinite(keypoints).all():
        raise ValueError("keypoints contain NaN or infinite values")
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be finite and > 0, got {scale}")
    if not (np.isfinite(smoothness) and smoothness >= 0):
        raise ValueError(f"smoothness must be finite and >= 0, got {smoothness}")
    for link in links:
        robot.link_index(link)
    weights_k = np.ones(len(links)) if link_weights is None else np.asarray(link_weights, float)
    if (
        weights_k.shape != (len(links),)
        or not np.isfinite(weights_k).all()
        or (weights_k < 0).any()
    ):
        raise ValueError(f"link_weights must be {len(links)} finite values >= 0")
    seed = (planner._lower + planner._upper) / 2 if seed is None else np.asarray(seed, float)
    if seed.shape != (n,) or not np.isfinite(seed).all():
        raise ValueError(f"seed must be {n} finite joint values")
    seed = np.clip(seed, planner._lower, planner._upper)

    t_count = _knot_bucket(t_real)
    targets = np.concatenate(
        [keypoints * scale, np.repeat(keypoints[-1:] * scale, t_count - t_real, 0)]
    )
    on = np.zeros((t_count, 1))
    on[:t_real] = 1.0  # padded steps carry no target: they just rest after the motion
    per_link = tuple(
        dataclasses.replace(
            obj.position(link, targets[:, i]),
            weights=on * np.array([weights_k[i], 0.0]),
        )
        for i, link in enumerate(links)
    )
    active = np.ones(n)
    if active_joints is not None:
        active_joints = tuple(active_joints)
        if not active_joints:
            raise ValueError("active_joints is empty: nothing may move")
        active = np.zeros(n)
        active[[robot.joint_index(j) for j in active_joints]] = 1.0
    free = np.ones((t_count, n)) * active
    base = Weights()
    weights = dataclasses.replace(
        base,
        goal=100.0,  # tracking: keypoints are noisy, smoothness should still count
        velocity=base.velocity * smoothness,
        acceleration=base.acceleration * smoothness,
    )
    pairs = tuple((int(i), int(j)) for i, j in vector_pairs)
    for i, j in pairs:
        if not (0 <= i < len(links) and 0 <= j < len(links)) or i == j:
            raise ValueError(f"vector pair ({i}, {j}) must name two different links by index")
    if not (np.isfinite(vector_weight) and vector_weight >= 0):
        raise ValueError(f"vector_weight must be finite and >= 0, got {vector_weight}")
    start = _retarget_start(planner, links, targets[0], weights_k, seed, active_joints)
    starts = np.repeat(start[None, None], t_count, 1)
    vector_targets = (
        np.stack([targets[:, j] - targets[:, i] for i, j in pairs], 1) if pairs else None
    )
    solve = functools.partial(
        planner.optimize,
        objectives=per_link,
        vectors=tuple((links[i], links[j]) for i, j in pairs),
        vector_targets=vector_targets,
        vector_weights=np.broadcast_to(on * weights.goal * vector_weight, (t_count, len(pairs)))
        if pairs
        else None,
        world=world,
        free=free,
        weights=weights,
        position_tolerance=np.inf,
        orientation_tolerance=np.inf,
    )
    if timeout <= 0:
        result = solve(starts, max_iterations=max_iterations, initial_damping=RETARGET_DAMPING)
    else:  # the same solve in chunks of iterations, the budget checked between them
        iterations, result = 0, None
        while iterations < max_iterations:
            chunk = min(RETARGET_CHUNK, max_iterations - iterations)
            chunk_start = time.perf_counter()
            if result is None:
                built = planner.programs_built
                result = solve(starts, max_iterations=chunk, initial_damping=RETARGET_DAMPING)
                if planner.programs_built > built:  # a compile cannot be cut short: not counted
                    budget_start = chunk_start = time.perf_counter()
            else:  # near the motion now: nearly Gauss-Newton steps, as for plans
                result = solve(result.path[None], max_iterations=chunk)
            iterations += result.iterations
            if result.iterations < chunk:  # converged
                break
            now = time.perf_counter()
            # Stop when the next chunk, as long as this one, would end past the budget.
            if now - budget_start + (now - chunk_start) > timeout:
                result = dataclasses.replace(
                    result,
                    success=False,
                    message=f"the {timeout:.3g} s budget ran out after {iterations} iterations "
                    "(the path so far is returned)",
                    reason=TIMED_OUT,
                )
                break
        result = dataclasses.replace(
            result, iterations=iterations, solve_seconds=time.perf_counter() - clock
        )
    frames = np.asarray(_link_poses(robot, result.path[:t_real].astype(planner._dtype)))
    idx = [robot.link_index(link) for link in links]
    errors = np.linalg.norm(frames[:, idx, 4:] - targets[:t_real], axis=-1)
    step_errors = np.sqrt(np.mean(errors**2, axis=1))
    return dataclasses.replace(result, path=result.path[:t_real]), step_errors
