"""Global planning step: RRT-Connect over the trajectory optimiser's sphere model.

A straight or randomly bent start path refined by local optimisation cannot leave one shelf
bin or cage and enter another; a sampling-based planner can. Its path (start to one of the
goal configurations) is shortcut, resampled to the plan's knots and handed to
:meth:`pyroki_ros.planning.trajopt.TrajectoryOptimizer.optimize` as an initial path, which refines
smoothness and clearance; the optimiser's dense check still decides success.

Validity is the optimiser's rule: :func:`pyroki_ros.collision.checked_pairs` masks (the same
``contacts`` and moving joints), its sphere model (hulls as their bounding boxes: a
conservative check at about a quarter of the cost, see :class:`Checker`),
a clearance of at least ``margin`` to the world and between self pairs, and joint limits
(samples and interpolations stay inside the limit box, which is convex). Only active joints
move; the others keep the start's value.

Configurations are checked in batches by compiled programs of a few fixed batch sizes
(:data:`CHUNKS`, so only a new obstacle bucket compiles again): an edge is sampled at a fixed
joint-space resolution (largest joint step), and every edge of a round (all tree extensions,
then all connection attempts) is checked in the same calls. A pose goal's tree starts with
straight retreats of the goal link from the goal (:func:`approaches`).

About 600 lines: the search, its checker and the path's finishing (shortcut, resampling) are
one algorithm, and each of its constants sits beside the measurement that chose it.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from typing import TYPE_CHECKING

import jaxlie
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import objectives as obj
from pyroki_ros.planning.budget import CompileFreeClock

if TYPE_CHECKING:
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

# Configurations per call of the compiled check: a call is padded to the smallest size that
# holds it (one program per size, for every scene). A call holds 6-1000 points (median ~420,
# a quarter under 130): the evaluation set's calls cost 1.44 s padded to 512 alone, 1.13 s
# with these three sizes, 1.10 s with 128 too (bench/rrt_check_sizes.py,
# docs/benchmarks/rrt_check_sizes.md).
CHUNKS = (64, 256, 512)
CHUNK = CHUNKS[-1]  # the largest call
RESOLUTION = 0.05  # rad, largest joint step between two checked points of an edge
# A round's work. RRT-Connect to each problem of the MotionBenchMaker tuning set, 3 seeds,
# 2 s (bench/rrt_reach.py --options, docs/benchmarks/rrt_constants_tuning.md): all runs
# together 11.1 s with these; step 0.5 10.5 s, 16 connections 10.6, batch 16 or 64 11.2,
# step 1.5 12.8, 4 connections 14.0 and one miss. Step 0.5, batch 64 and 16 connections
# gain in cages (4.5-4.8 s against 5.4) and lose or tie elsewhere (step 0.5 under tables:
# 2.0 s against 1.7). The defaults are within 5 % of the best tried: kept.
STEP = 1.0  # rad, Euclidean (active joints) length of one tree extension
BATCH = 32  # samples drawn (tree extensions) per round
CONNECT = 8  # new nodes per round that try to connect to the other tree
SHORTCUT_ROUNDS = 6
SHORTCUT_PAIRS = 24  # random vertex pairs tried per shortcut round
SHORTCUT_LONGEST = 0.5  # rad (Euclidean): a path is subdivided to this before its shortcuts
# m of clearance per rad from a start or goal closer than the margin (Checker.relax_near). At
# 0.1 the goal trees of grasps (fingers 1-5 mm from the object) rarely grew: 3 of 6 MBM
# problems found in 2 s; at 0.02 all 6 (table_pick/1, /3, /6, table_under_pick/9, cage/5,
# bookshelf_tall/6 of test/data/mbm/generated_seed0.yaml).
FUNNEL = 0.02
# Share of each round's samples drawn near the growing tree's nodes (a random node plus
# Gaussian offsets of LOCAL_SIGMA rad per active joint, clipped to the limits) instead of
# uniformly: a passage along the joint limits (a goal at the edge of the workspace) is a
# thin slab that uniform samples rarely land in. RRT-Connect to each MotionBenchMaker
# problem's own goal, 2 runs each, 2 s (bench/rrt_reach.py --local 0,0.25,0.5): found
# 139, 140, 140 of 140 on the tuning set, 136, 137, 139 on the second set; its two hardest
# (bookshelf_thin/7, cage/8), 6 seeds, 5 s: 1, 10, 12 of 12
# (docs/benchmarks/rrt_local_{tuning,seed2,hard}.md).
LOCAL = 0.5
LOCAL_SIGMA = 0.5
# A tree with fewer than 1/BALANCE of the other's nodes grows every round, from samples near
# its own nodes only, until it catches up: a goal deep in a shelf bin sits in a narrow region
# whose tree rarely reaches a uniform sample, while the open side's tree grows at every turn
# (bookshelf_thin/7 of the second set: goal tree ~50-120 nodes to the start's 3,000-4,700 in
# 2 s). RRT-Connect to each MotionBenchMaker problem's own goal, 2 runs each, 2 s, against
# strict turns: found 140 and 139 of 140 on the second set (slowest 1.00 and 1.47 s), 140 both
# on the tuning and evaluation sets (docs/benchmarks/rrt_balance_{seed2,tuning,evaluation}.md,
# bench/rrt_reach.py --balance 3,inf). Ratios 1.5-6 and the small tree's usual sampler (half
# uniform) on bookshelf_thin/7 alone, 12 seeds, 1.5 s: 3 with samples near its nodes only
# found it most often (12 of 12; a probe in the 2026-12-06 notes on issue 16).
BALANCE = 3.0

# The goal tree also starts with short straight retreats of the goal link from its pose (along
# each axis of the goal frame, both ways; each a chain of IK solutions near the goal
# configuration, kept while every edge is valid): a goal deep in a shelf bin is reached
# through a slot its tree rarely finds by sampling, and the retreat out of the slot is the
# way in. On bookshelf_thin/7 of the second MotionBenchMaker set the hand's -z retreat
# stays valid for 7.5 cm, and RRT-Connect needs fewer rounds with it (test_rrt.py); its plans
# in 2 s, seeds 0-7, with the distance-only check too: 8 of 8, against 3 of 8 before both
# (docs/benchmarks/plan_thin7_seeds_retreats.md, plan_thin7_seeds_before_retreats.md).
APPROACH_STEPS = (0.025, 0.05, 0.075, 0.1)  # m, the retreat's points along one axis
# Goals given retreats: 6 axes x 4 points x 5 goals = 120 IK rows, the goal search's
# batch bucket (one program).
APPROACH_GOALS = 5
APPROACH_DEVIATION = 0.5  # rad, largest joint change from the goal (keeps its IK branch)
# LM iterations per retreat point: seeded at its goal, a reachable point converges in a few;
# without a cap an unreachable one restarts up to the IK's default 1000.
APPROACH_ITERATIONS = 30


@dataclasses.dataclass(frozen=True)
class RRTResult:
    """What :func:`rrt_connect` found.

    Attributes:
        path: (m, n) vertices from the start to a goal configuration (every edge valid at the
            checker's resolution), or None.
        success: a path was found.
        reason: "" on success, else why not (no valid goal, start invalid, budget spent).
        goal_index: which goal configuration the path ends at (-1 without a path).
        rounds: rounds of batched extension done.
        nodes: tree nodes in both trees together.
        checked: configurations checked.
        seconds: wall time.
    """

    path: np.ndarray | None
    success: bool
    reason: str
    goal_index: int
    rounds: int
    nodes: int
    seconds: float


class Checker:
    """Batched validity of configurations and edges under the optimiser's collision rule.

    Args:
        planner: gives the robot, sphere model, padded world and compiled clearance program.
        world: the obstacles (None: none).
        contacts: contact rules (:func:`col.checked_pairs`).
        active: (n,) bool, the joints that move.
        margin: a configuration is valid with clearance >= margin (m).
        bounding: hulls as their bounding boxes (the default, see below); False: the hulls
            themselves, the optimiser's and the final check's model.
    """

    def __init__(
        self,
        planner: TrajectoryOptimizer,
        world: col.World | None,
        contacts: col.ContactRules,
        active: np.ndarray,
        margin: float,
        bounding: bool = True,
    ):
        self.planner = planner
        # Hulls as their bounding boxes: conservative, and 2.6 ms per 512 configurations on
        # table_under_pick/0 (docs/benchmarks/rrt_check_sizes.md) against 9-10 ms with the
        # hull (docs/benchmarks/gjk_rounds.md). The path found is optimised and checked
        # with the hulls.
        self._clearance = planner.clearance_function(world, contacts, active, bounding=bounding)
        self.margin = float(margin)
        self.active = np.asarray(active, bool)
        self.count = 0  # configurations checked so far
        self._ends = np.zeros((0, len(self.active)))
        self._end_clearance = np.zeros(0)

    def relax_near(self, q: np.ndarray, clearance: np.ndarray) -> None:
        """Lets configurations near q (k, n) (a start or goal closer than the margin, or in
        collision) be as close as those are: within ``FUNNEL`` m per rad (Euclidean over
        active joints) of their ``clearance`` (k,), so that a path can leave and reach them
        while the rest of it keeps the margin."""
        self._ends = np.asarray(q, np.float64).reshape(-1, len(self.active))
        self._end_clearance = np.asarray(clearance, np.float64)

    def clearance(self, q: np.ndarray) -> np.ndarray:
        """(B,) smallest checked clearance (m) of configurations q (B, n), in chunks of at
        most CHUNK, each padded (with its first row) to one of CHUNKS: one of their programs."""
        q = np.asarray(q, np.float64)
        out = np.empty(len(q))
        for at in range(0, len(q), CHUNK):
            part = q[at : at + CHUNK]
            size = next(c for c in CHUNKS if c >= len(part))
            out[at : at + len(part)] = self._clearance(part, size)
        self.count += len(q)
        return out

    def valid(self, q: np.ndarray) -> np.ndarray:
        """(B,) bool: q (B, n) at least ``margin`` clear (less near :meth:`relax_near`'s
        configurations)."""
        q = np.asarray(q, np.float64)
        threshold = np.full(len(q), self.margin)
        if len(self._ends):
            gap = q[:, None, self.active] - self._ends[None, :, self.active]  # (B, k, a)
            near = self._end_clearance + FUNNEL * np.linalg.norm(gap, axis=-1)
            threshold = np.minimum(threshold, near.min(axis=1))
        return self.clearance(q) >= threshold

    def edges(
        self, a: np.ndarray, b: np.ndarray, resolution: float = RESOLUTION
    ) -> tuple[np.ndarray, np.ndarray]:
        """Checks straight edges a -> b (E, n) each (``a`` assumed valid) at ``resolution``.

        Returns:
            (E,) fraction of each edge valid from ``a`` (1.0: the whole edge), and (E, n) the
            last valid checked point of each (``a`` when its first step is invalid).
        """
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        steps = np.maximum(np.ceil(np.max(np.abs(b - a), axis=1) / resolution), 1).astype(int)
        edge = np.repeat(np.arange(len(a)), steps)
        first = np.concatenate([[0], np.cumsum(steps)[:-1]])
        k = np.arange(edge.size) - first[edge] + 1  # 1 .. steps: a itself is not checked
        frac = k / steps[edge]
        points = a[edge] + frac[:, None] * (b - a)[edge]
        ok = self.valid(points) if points.size else np.zeros(0, bool)
        # First invalid point per edge: its valid prefix ends one step before it.
        bad_k = np.where(ok, steps[edge] + 1, k)
        first_bad = np.full(len(a), np.iinfo(np.int64).max)
        np.minimum.at(first_bad, edge, bad_k)
        good = np.minimum(first_bad, steps + 1) - 1  # valid steps from a
        fraction = good / steps
        last = a + fraction[:, None] * (b - a)
        return fraction, last


class _Tree:
    """Nodes (N, n), parents (N,) (-1 at a root) and roots (N,) (the root each descends
    from), grown in place."""

    def __init__(self, roots: np.ndarray):
        self.q = np.array(roots, np.float64)
        self.parent = np.full(len(roots), -1)
        self.root = np.arange(len(roots))

    def __len__(self) -> int:
        return len(self.q)

    def add(self, q: np.ndarray, parent: np.ndarray) -> np.ndarray:
        """Appends nodes q (k, n) with parents (k,); returns their indices (k,)."""
        index = np.arange(len(self.q), len(self.q) + len(q))
        self.q = np.concatenate([self.q, q])
        self.parent = np.concatenate([self.parent, parent])
        self.root = np.concatenate([self.root, self.root[parent]])
        return index

    def nearest(self, q: np.ndarray, active: np.ndarray) -> np.ndarray:
        """(k,) index of the node nearest each of q (k, n), Euclidean over active joints."""
        nodes, points = self.q[:, active], q[:, active]
        # |p - x|^2 = |x|^2 - 2 p.x + |p|^2 (the last the same for every node): one matrix
        # product, not a (k, N, a) array of differences, for trees of thousands of nodes.
        return np.argmin(np.einsum("ni,ni->n", nodes, nodes) - 2.0 * points @ nodes.T, axis=1)

    def branch(self, i: int) -> np.ndarray:
        """(m, n) from node i up to its root."""
        out = []
        while i >= 0:
            out.append(self.q[i])
            i = int(self.parent[i])
        return np.asarray(out)


def _goal_rows(goals, n: int) -> np.ndarray:
    """(G, n) float64 copy of the goal configurations ``goals`` (one (n,) or G of them; G
    may be 0); ValueError for another width."""
    goals = np.asarray(goals, np.float64)
    if goals.size == 0:
        return np.zeros((0, n))
    goals = np.atleast_2d(goals)
    if goals.ndim != 2 or goals.shape[1] != n:
        raise ValueError(f"goal configurations must have shape (G, {n}), got {goals.shape}")
    return goals.copy()


def approaches(
    planner: TrajectoryOptimizer,
    checker: Checker,
    objectives: tuple[obj.Objective, ...],
    goals: np.ndarray,
    active: np.ndarray,
) -> list[tuple[int, np.ndarray]]:
    """Straight retreats from the goal pose of the first ``pose`` objective of
    ``objectives`` (its link moved by :data:`APPROACH_STEPS` along each axis of the goal
    frame, both ways), for the first :data:`APPROACH_GOALS` of ``goals`` (G, n).

    Each retreat point is an IK solution of all ``objectives`` with the pose moved, seeded
    with its goal configuration and within :data:`APPROACH_DEVIATION` of it; a retreat is
    kept up to its first point that the IK missed or whose edge from the point before it
    (the goal first) is not valid by ``checker``.

    Returns:
        (goal index, chain (k, n)) for each retreat of at least one point, the chain's
        points in order away from the goal; none without a pose objective (a batched or
        relative one does not count).
    """
    index = next(
        (i for i, o in enumerate(objectives)
         if o.kind == "pose" and o.reference is None and o.batch_shape == ()),
        None,
    )  # fmt: skip
    goals = _goal_rows(goals, len(active))[:APPROACH_GOALS]
    if index is None or len(goals) == 0:
        return []
    pose = objectives[index]
    axes = np.concatenate([np.eye(3), -np.eye(3)])  # (6, 3) in the goal frame
    offsets = (axes[:, None, :] * np.asarray(APPROACH_STEPS)[None, :, None]).reshape(-1, 3)
    per_goal = len(offsets)
    targets = jaxlie.SE3(np.asarray(pose.target)) @ jaxlie.SE3.from_translation(offsets)
    moved = obj.pose(
        pose.link,
        np.tile(np.asarray(targets.wxyz_xyz), (len(goals), 1)),
        position_weight=float(pose.weights[0]),
        orientation_weight=float(pose.weights[1]),
    )
    names = tuple(np.asarray(planner.robot.joint_names)[active])
    seeds = np.repeat(goals, per_goal, axis=0)
    ik = planner.ik.solve(
        (*objectives[:index], moved, *objectives[index + 1 :]),
        seed=seeds,
        active_joints=names,
        max_deviation=APPROACH_DEVIATION,
        max_iterations=APPROACH_ITERATIONS,
    )
    steps = len(APPROACH_STEPS)
    q = np.asarray(ik.q, np.float64).reshape(len(goals), len(axes), steps, -1)
    chains = np.concatenate([np.repeat(goals[:, None, None], len(axes), 1), q], axis=2)
    fraction, _ = checker.edges(
        chains[:, :, :-1].reshape(-1, q.shape[-1]), chains[:, :, 1:].reshape(-1, q.shape[-1])
    )
    good = (fraction >= 1) & np.asarray(ik.success, bool).reshape(-1)
    kept = np.cumprod(good.reshape(len(goals), len(axes), steps), axis=2).sum(axis=2)
    return [
        (g, q[g, a, : kept[g, a]])
        for g in range(len(goals))
        for a in range(len(axes))
        if kept[g, a]
    ]


def rrt_connect(
    checker: Checker,
    start: np.ndarray,
    goals: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    active: np.ndarray,
    rng: np.random.Generator,
    *,
    budget: float = 1.0,
    max_rounds: int = 10_000,
    step: float = STEP,
    batch: int = BATCH,
    connect: int = CONNECT,
    resolution: float = RESOLUTION,
    local: float = LOCAL,
    balance: float = BALANCE,
    approach: list[tuple[int, np.ndarray]] = (),
) -> RRTResult:
    """Batched RRT-Connect from ``start`` (n,) to any of ``goals`` (G, n).

    Each round draws ``batch`` samples, extends the current tree's nearest nodes towards them
    by at most ``step`` (Euclidean over active joints; the valid prefix of each extension is
    kept), then the other tree tries to reach the ``connect`` new nodes nearest to it with
    straight edges (connect: the valid prefix of each becomes a node of the other tree; a
    whole edge joins the trees). The trees swap roles every round, except that a tree
    far smaller than the other (``balance``) grows until it catches up. Before the first round
    the direct edges start -> goal are tried. Goals that are not valid are dropped.

    Args:
        checker: the validity rule (:class:`Checker`).
        lower, upper: (n,) joint limits (finite: samples are drawn between them).
        active: (n,) bool: joints that move; the others keep the start's value.
        rng: the random source (a result is deterministic for a seed).
        budget: seconds; the search stops after the first round past it (compiles not
            counted: the start's check compiles the check's program for a new scene).
        max_rounds: at most this many rounds.
        local: share of each round's samples drawn near the growing tree (:data:`LOCAL`).
        balance: a tree with fewer than 1/balance of the other's nodes grows every round,
            all its samples near its own nodes (:data:`BALANCE`; inf: strict alternation).
        approach: (goal index, chain (k, n)) pairs (:func:`approaches`): the goal tree's
            first branches, each chain's points in order from its goal (every edge valid).
    """
    if not 0.0 <= local <= 1.0:
        raise ValueError(f"local is a share of the samples, in [0, 1]; got {local}")
    if not balance >= 1.0:
        raise ValueError(f"balance is a ratio of tree sizes, >= 1; got {balance}")
    active = np.asarray(active, bool)
    start = np.asarray(start, np.float64)
    goals = _goal_rows(goals, len(start))
    goals[:, ~active] = start[~active]
    clock = CompileFreeClock()  # the search's budget: compiles not counted, as for plans
    start_valid = checker.valid(start[None])[0]  # compiles the check for a new scene bucket

    def result(path, reason, goal=-1, rounds=0, nodes=0) -> RRTResult:
        seconds = time.perf_counter() - clock.start
        return RRTResult(path, path is not None, reason, goal, rounds, nodes, seconds)

    if not start_valid:
        return result(None, "start is not clear of obstacles by the margin")
    usable = np.flatnonzero(checker.valid(goals)) if len(goals) else np.zeros(0, int)
    if len(usable) == 0:
        return result(None, "no goal configuration is clear of obstacles by the margin")
    fraction, _ = checker.edges(np.repeat(start[None], len(usable), 0), goals[usable], resolution)
    if (fraction >= 1).any():
        g = int(usable[np.argmax(fraction >= 1)])
        return result(np.stack([start, goals[g]]), "", g)

    trees = [_Tree(start[None]), _Tree(goals[usable])]
    for g, chain in approach:  # each chain hangs from its goal's node, if that is usable
        parent = np.flatnonzero(usable == g)
        for q in np.asarray(chain, np.float64) if len(parent) else ():
            parent = trees[1].add(q[None], parent)
    lo = np.where(np.isfinite(lower), lower, -math.pi)[active]
    hi = np.where(np.isfinite(upper), upper, math.pi)[active]
    rounds = 0
    while rounds < max_rounds and clock.elapsed() < budget:
        small = int(len(trees[1]) < len(trees[0]))
        lagging = len(trees[1 - small]) > balance * len(trees[small])
        side = small if lagging else rounds % 2
        grow, other = trees[side], trees[1 - side]
        rounds += 1
        samples = np.repeat(start[None], batch, 0)
        samples[:, active] = rng.uniform(lo, hi, (batch, int(active.sum())))
        n_local = batch if lagging else round(local * batch)
        if n_local:
            near_nodes = grow.q[rng.integers(0, len(grow), n_local)][:, active]
            offsets = rng.normal(0.0, LOCAL_SIGMA, near_nodes.shape)
            samples[:n_local, active] = np.clip(near_nodes + offsets, lo, hi)
        near = grow.nearest(samples, active)
        delta = samples - grow.q[near]
        length = np.linalg.norm(delta[:, active], axis=1)
        targets = grow.q[near] + delta * np.minimum(1.0, step / np.maximum(length, 1e-12))[:, None]
        fraction, reached = checker.edges(grow.q[near], targets, resolution)
        moved = fraction * np.minimum(length, step) > resolution  # a real step, not a stall
        if not moved.any():
            continue
        new = grow.add(reached[moved], near[moved])
        # Connect: the other tree's nearest nodes head straight for the new nodes nearest it.
        toward = other.nearest(grow.q[new], active)
        gap = np.linalg.norm(grow.q[new][:, active] - other.q[toward][:, active], axis=1)
        pick = np.argsort(gap, kind="stable")[:connect]
        fraction, reached = checker.edges(other.q[toward[pick]], grow.q[new[pick]], resolution)
        joined = np.flatnonzero(fraction >= 1)
        if len(joined):
            j = pick[joined[np.argmin(gap[pick[joined]])]]
            mine, theirs = grow.branch(int(new[j])), other.branch(int(toward[j]))
            path = np.concatenate([mine[::-1], theirs])  # grow's root ... other's root
            goal_tree = trees[1]
            end = toward[j] if goal_tree is other else new[j]
            if goal_tree is grow:
                path = path[::-1]
            goal = int(usable[goal_tree.root[int(end)]])
            return result(path, "", goal, rounds, len(trees[0]) + len(trees[1]))
        progress = fraction * gap[pick] > resolution
        if progress.any():
            other.add(reached[progress], toward[pick][progress])
    reason = f"no path found within {budget:.3g} s ({rounds} rounds)"
    return result(None, reason, rounds=rounds, nodes=len(trees[0]) + len(trees[1]))


def _filled(path: np.ndarray, counts) -> np.ndarray:
    """``path`` (m, n) with its segment i replaced by ``counts[i]`` evenly spaced points (its
    end the last)."""
    out = [path[:1]]
    for a, b, c in zip(path[:-1], path[1:], counts):
        out.append(a + (np.arange(1, c + 1) / c)[:, None] * (b - a))
    return np.concatenate(out)


def shortcut(checker: Checker, path: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A shorter path (m', n) with the same ends: ``path`` (m, n) subdivided (segments of at
    most SHORTCUT_LONGEST), then per round SHORTCUT_PAIRS random vertex pairs (i, j > i + 1) checked at
    once; the valid straight edges that save most replace the vertices between their ends,
    as many as do not overlap."""
    path = np.asarray(path, np.float64)
    pieces = [
        max(1, math.ceil(np.linalg.norm(b - a) / SHORTCUT_LONGEST))
        for a, b in itertools.pairwise(path)
    ]
    path = _filled(path, pieces)  # no segment longer than SHORTCUT_LONGEST
    for _ in range(SHORTCUT_ROUNDS):
        m = len(path)
        if m < 3:
            break
        i = rng.integers(0, m - 2, SHORTCUT_PAIRS)
        j = rng.integers(i + 2, m)
        fraction, _ = checker.edges(path[i], path[j])
        seg = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))]
        saved = (seg[j] - seg[i]) - np.linalg.norm(path[j] - path[i], axis=1)
        taken = np.zeros(m, bool)  # vertices strictly inside a chosen shortcut
        cuts: list[tuple[int, int]] = []
        for c in np.argsort(-saved, kind="stable"):
            if fraction[c] < 1 or saved[c] <= 1e-6:
                continue
            if any(not (j[c] <= a or i[c] >= b) for a, b in cuts):
                continue  # overlaps one taken already
            taken[i[c] + 1 : j[c]] = True
            cuts.append((int(i[c]), int(j[c])))
        path = path[~taken]
    return path


def resample(path: np.ndarray, t_count: int) -> np.ndarray:
    """(T, n): ``path`` (m, n) at T knots, its vertices among them where m <= T (so corners
    are not cut); the T - 1 intervals shared out to the segments by their Euclidean length
    (at least one each). With more vertices than knots: evenly by arc length."""
    path = np.asarray(path, np.float64)
    lengths = np.linalg.norm(np.diff(path, axis=0), axis=1)
    keep = np.r_[True, lengths > 1e-9]
    path, lengths = path[keep], lengths[keep[1:]]
    if len(path) == 1:
        return np.repeat(path, t_count, 0)
    segments = len(lengths)
    if segments > t_count - 1:
        s = np.r_[0.0, np.cumsum(lengths)]
        at = np.linspace(0.0, s[-1], t_count)
        return np.stack([np.interp(at, s, path[:, i]) for i in range(path.shape[1])], 1)
    share = lengths / lengths.sum() * (t_count - 1 - segments)
    counts = 1 + np.floor(share).astype(int)
    left = t_count - 1 - counts.sum()
    counts[np.argsort(-(share - np.floor(share)), kind="stable")[:left]] += 1
    return _filled(path, counts)


def global_path(
    planner: TrajectoryOptimizer,
    start: np.ndarray,
    goals: list[np.ndarray],
    active: np.ndarray,
    t_count: int,
    *,
    world: col.World | None,
    contacts: col.ContactRules,
    margin: float,
    budget: float,
    seed: int = 0,
    goal: tuple[obj.Objective, ...] = (),
) -> tuple[np.ndarray | None, RRTResult]:
    """An initial path (T, n) for :meth:`TrajectoryOptimizer.optimize` from RRT-Connect
    (start to any of ``goals``), shortcut and resampled to ``t_count`` knots, or None.

    ``goals`` (k, n): for a pose goal, the plan's goal configurations
    (:func:`pyroki_ros.planning.goals.search`); none (k = 0): None and that reason. With
    a pose among the ``goal`` objectives, the goal tree starts with retreats from it
    (:func:`approaches`, their time counted in ``budget``).

    Valid: clearance >= ``margin`` (plan() passes a quarter of its margin: the optimiser pushes
    the path out to the whole margin), less near a start or goal that sits closer or
    collides (:meth:`Checker.relax_near`). Deterministic for ``seed``. None also when the
    answer is the straight line to one of the given ``goals`` (a caller's first start path)
    or the planner has no spheres (nothing to plan around)."""
    if planner.spheres is None:
        return None, RRTResult(None, False, "no sphere model", -1, 0, 0, 0.0)
    goals = _goal_rows(goals, planner.robot.n_joints)
    if len(goals) == 0:
        return None, RRTResult(None, False, "no goal configuration given", -1, 0, 0, 0.0)
    rng = np.random.default_rng([seed, 7])
    active = np.asarray(active, bool)
    checker = Checker(planner, world, contacts, active, margin)
    given = goals.copy()
    # By the plan's own model (the checker's bounding boxes may touch where hulls do not).
    clear = planner.clearances(goals, world, contacts, active) >= 0
    if clear.any():  # a path to a colliding goal cannot be the answer when a clear one exists
        goals = goals[clear]
    ends = np.concatenate([np.asarray(start, np.float64)[None], goals])
    # Goal poses in clutter often have no configuration clear by the margin (or at all, with
    # this sphere model): the path may come as close near its ends; the optimiser then moves
    # the goal knot out.
    checker.relax_near(ends, checker.clearance(ends) - 1e-4)
    clock = CompileFreeClock()
    approach = approaches(planner, checker, goal, goals, active) if goal else []
    found = rrt_connect(
        checker,
        start,
        goals,
        planner.robot.limits.lower,
        planner.robot.limits.upper,
        active,
        rng,
        budget=budget - clock.elapsed(),
        approach=approach,
    )
    if found.path is None:
        return None, found
    if len(found.path) == 2 and np.any(np.all(np.abs(given - found.path[-1]) < 1e-9, axis=1)):
        return None, found  # the straight line to a given goal: the caller has that one
    return resample(shortcut(checker, found.path, rng), t_count), found
