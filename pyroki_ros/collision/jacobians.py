"""Collision rows of the trajectory optimiser and their Jacobians: sphere centres at a batch of
configurations, their rates with respect to the joints (written out: a few integers per row
instead of a whole Jacobian), the nearest obstacle per sphere and the nearest pair per group
of self pairs, as residual rows ``max(0, margin - distance)``. Configurations come
batch-last: (n, B)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros.collision.boxes import HULL_COLUMNS, box_frames_t, nearest_box_obstacle_t
from pyroki_ros.collision.distance import (
    nearest_obstacle_t,
    obstacle_clearance_t,
    safe_norm,
    unit3,
)
from pyroki_ros.collision.geometry import FAR, RobotSpheres, World
from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import Robot

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
    table = np.zeros((len(groups), width, 3), int)  # first, second, row
    pad = np.ones((len(groups), width))
    for g, members in enumerate(groups):
        table[g, : len(members)] = members
        pad[g, : len(members)] = 0.0
    return table[..., 0].copy(), table[..., 1].copy(), pad, table[..., 2].copy()


def _on_path(robot: Robot, links: np.ndarray) -> np.ndarray:
    """(len(links), n_links) bool: the link frames that move each of ``links``."""
    on_path = np.zeros((len(links), robot.n_links), bool)
    for row, link in enumerate(links):
        on_path[row, list(robot.ancestors(int(link)))] = True
    return on_path


def _hinge(d, margin, weight, rates):
    """Rows ``sqrt(weight) max(0, margin - d)`` and their Jacobian (R, n, B) from the rates
    of d, one (R, B) per joint."""
    active = (d < margin) * -jnp.sqrt(weight)
    return jnp.sqrt(weight) * jax.nn.relu(margin - d), jnp.stack([active * r for r in rates], 1)


class CollisionTerms:
    """Collision residuals and their Jacobians for one robot's spheres (static: closed over
    by the compiled programs). Configurations come batch-last: (n, B)."""

    def __init__(self, robot: Robot, spheres: RobotSpheres | None):
        self.robot = robot
        self.spheres = spheres
        if spheres is None:
            return
        # Which link frames move each sphere.
        links = np.asarray(spheres.link_indices, int)
        on_path = _on_path(robot, links)
        self._links = links
        self._first, self._second, self._pad, self._pair_row = self_pair_groups(
            spheres.self_pairs, spheres.link_indices
        )
        # The links that joints move (revolute, prismatic, mimic), and per sphere which of
        # them move it, packed 31 to an int32 word: the sphere a row picks is then described
        # by its centre and a few integers instead of its whole Jacobian.
        self._moving = [int(link) for link in range(robot.n_links) if robot.q_index[link] >= 0]
        self._link_bits = self._bit_words(on_path)  # per word (S,)
        self._has_pairs = spheres.self_pairs.shape[0] > 0
        # The spheres checked against obstacles (a set with self-only spheres: only these get
        # an obstacle row; static indices, so the compiled program computes nothing for the
        # others). None: all of them.
        world = np.flatnonzero(spheres.world_mask)
        self._world = None if len(world) == len(links) else world
        # The boxes (obstacles only): their links and link bits, as the spheres'.
        box_links = np.asarray(spheres.box_link_indices, int)
        self._box_links = box_links
        self._box_bits = self._bit_words(_on_path(robot, box_links))  # per word (X,)

    def _bit_words(self, on_path: np.ndarray) -> list[np.ndarray]:
        """Per row of ``on_path`` (R, n_links) which moving links move it, 31 to an int32
        word: one (R,) array per word."""
        words = []
        for w in range(0, len(self._moving), 31):
            chunk = self._moving[w : w + 31]
            words.append((on_path[:, chunk] * (1 << np.arange(len(chunk)))).sum(1).astype(np.int32))
        return words

    def centers_t(self, frames) -> tuple[jax.Array, ...]:
        """Sphere centres, three (S, B) arrays."""
        quat, pos = frames
        idx = self._links
        local = tuple(self.spheres.centers[:, i][:, None] for i in range(3))
        rotated = k.rotate(tuple(c[idx] for c in quat), local)
        return tuple(r + p[idx] for r, p in zip(rotated, pos))

    def world_part(self, centers, checked: jax.Array):
        """The centres (three (W, B)) and checked obstacle pairs (W, O) of the W spheres
        checked against obstacles, of all centres (three (S, B)) and pairs (S, O)."""
        checked = checked[: self.spheres.n_spheres]  # the boxes' rows follow
        if self._world is None:
            return centers, checked
        return tuple(c[self._world] for c in centers), checked[self._world]

    def nearest_box_t(self, frames, world: World, checked: jax.Array, hull_columns=None):
        """Per robot box (:attr:`RobotSpheres.box_poses`) its nearest checked obstacle:
        conservative distance (X, B), unit normal and witness point (three (X, B) each; see
        :func:`~pyroki_ros.collision.boxes.nearest_box_obstacle_t`). ``frames``: the link
        frames (:func:`k.frames_t`); ``checked``: all world rows (S + X, O)."""
        quat, pos = frames
        idx = self._box_links
        centers, axes = box_frames_t(
            tuple(c[idx] for c in quat), tuple(p[idx] for p in pos), self.spheres.box_poses
        )
        return nearest_box_obstacle_t(
            centers,
            axes,
            self.spheres.box_half_extents,
            world,
            checked[self.spheres.n_spheres :],
            self.spheres.hull_vertices,
            hull_columns,
        )

    def nearest_obstacle_t(self, centers, world: World, checked: jax.Array):
        """Per sphere checked against obstacles (:meth:`world_part`) the signed distance to
        its nearest checked obstacle (W, B) and its gradient with respect to the centre
        (three (W, B)); inf and zeros without obstacles. ``centers``: three (W, B);
        ``checked``: (W, O) (:func:`checked_pairs`)."""
        if world.n_obstacles == 0:
            inf = jnp.full(centers[0].shape, jnp.inf, centers[0].dtype)
            return inf, tuple(jnp.zeros_like(c) for c in centers)
        d, grad = nearest_obstacle_t(centers, world, checked[:, None, :])
        return d - self._world_radii()[:, None], grad

    def _world_radii(self) -> np.ndarray:
        """(W,) radii of the spheres checked against obstacles (:meth:`world_part`)."""
        return self.spheres.radii if self._world is None else self.spheres.radii[self._world]

    def nearest_pairs_t(self, centers, checked: jax.Array):
        """Per self-collision group (:func:`self_pair_groups`) its nearest checked sphere
        pair: signed distance (G, B), both centres (two triples of (G, B)) and the link bits
        of both spheres (two tuples of (G, B) int32 words). ``checked``: (P,)."""
        first, second = self._first, self._second  # (G, K)
        # Padded and unchecked slots sit 1e6 m further away: they never win.
        skip = jnp.maximum(self._pad, 1.0 - checked[self._pair_row].astype(centers[0].dtype))
        reach = np.asarray(self.spheres.self_reach, np.float64)[self._pair_row] - FAR * skip
        gap = k.materialize(tuple(c[first] - c[second] for c in centers))  # (G, K, B)
        (d_all,) = k.materialize((safe_norm(*gap) - reach[:, :, None].astype(gap[0].dtype),))
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

    def distances_t(self, frames, world: World, world_checked, self_checked):
        """Per sphere checked against obstacles, then per box, its smallest checked obstacle
        distance (W + X, B), per self pair (P, B) (inf where not checked). ``frames``: the
        link frames (:func:`k.frames_t`)."""
        centers = self.centers_t(frames)
        all_checked = world_checked
        world_centers, world_checked = self.world_part(centers, world_checked)
        if world.n_obstacles:  # distances alone: no nearest obstacle to carry
            world_d = obstacle_clearance_t(world_centers, world, world_checked[:, None, :])
            world_d = world_d - self._world_radii()[:, None]
        else:
            world_d = jnp.full(world_centers[0].shape, jnp.inf, world_centers[0].dtype)
        if self._box_links.size and world.n_obstacles:
            box_d = self.nearest_box_t(frames, world, all_checked)[0]
            world_d = jnp.concatenate([world_d, box_d], 0)
        pairs = np.asarray(self.spheres.self_pairs)
        gap = tuple(c[pairs[:, 0]] - c[pairs[:, 1]] for c in centers)
        self_d = safe_norm(*gap) - self.spheres.self_reach[:, None]
        return world_d, jnp.where(self_checked[:, None], self_d, jnp.inf)

    def rows_t(
        self,
        q_t: jax.Array,
        world: World,
        checked: tuple[jax.Array, jax.Array],
        margin,
        w_world,
        w_self,
    ):
        """Hinge residuals max(0, margin - distance), weighted: one row per sphere for its
        nearest obstacle and one per link-pair group for its nearest sphere pair, (R, B), their
        Jacobian (R, n, B), and each configuration's smallest clearance (B,). ``checked``:
        (world (S, O), self (P,)) pairs that count (:func:`checked_pairs`)."""
        frames = k.frames_t(self.robot, q_t)
        centers = self.centers_t(frames)
        world_centers, world_checked = self.world_part(centers, checked[0])
        world_d, grad = self.nearest_obstacle_t(world_centers, world, world_checked)
        words = (
            self._link_bits if self._world is None else [b[self._world] for b in self._link_bits]
        )
        rates = self._point_rates(frames, world_centers, grad, tuple(b[:, None] for b in words))
        r_world, j_world = _hinge(world_d, margin, w_world, rates)  # (W,), (W, n, B)
        if self._box_links.size and world.n_obstacles:
            # Box rows: the distance moves with the witness corner along the normal.
            box_d, normal, witness = self.nearest_box_t(frames, world, checked[0], HULL_COLUMNS)
            rates = self._point_rates(frames, witness, normal, [b[:, None] for b in self._box_bits])
            r_box, j_box = _hinge(box_d, margin, w_world, rates)
            r_world, j_world = jnp.concatenate([r_world, r_box]), jnp.concatenate([j_world, j_box])
            world_d = jnp.concatenate([world_d, box_d])
        if not self._has_pairs:
            return r_world, j_world, jnp.min(world_d, 0)
        self_d, ((c_a, bits_a), (c_b, bits_b)) = self.nearest_pairs_t(centers, checked[1])
        unit = unit3(tuple(a - b for a, b in zip(c_a, c_b)))
        # d distance / d q_j = u . (d c_a / d q_j - d c_b / d q_j).
        rate_a = self._point_rates(frames, c_a, unit, bits_a)
        rate_b = self._point_rates(frames, c_b, unit, bits_b)
        r_self, j_self = _hinge(self_d, margin, w_self, [a - b for a, b in zip(rate_a, rate_b)])
        clearance = jnp.minimum(jnp.min(world_d, 0), jnp.min(self_d, 0))
        return (
            jnp.concatenate([r_world, r_self], 0),
            jnp.concatenate([j_world, j_self], 0),
            clearance,
        )
