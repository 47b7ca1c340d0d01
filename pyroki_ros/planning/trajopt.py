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
from pyroki_ros.collision import WORLD_BUCKETS, CollisionTerms, self_pair_groups
from pyroki_ros.model.robot import Robot
from pyroki_ros.planning import pipeline
from pyroki_ros.planning.budget import Pace, PaceLog
from pyroki_ros.planning.memory import trajectory_memory_bytes
from pyroki_ros.planning.pipeline import EARLY_STOP, GOAL_SEEDS
from pyroki_ros.planning.problem import (
    GOAL_IN_COLLISION,
    GOAL_UNREACHABLE,
    START_IN_COLLISION,
    TIMED_OUT,
    PlanResult,
    Problem,
    Weights,
    batch_specs,
    clearances,
    contact_distances,
    solve_starts,
    structure_key,
)
from pyroki_ros.planning.retarget import retarget, retarget_memory_bytes
from pyroki_ros.solver import damping, lm

__all__ = [
    "EARLY_STOP",
    "GOAL_IN_COLLISION",
    "GOAL_SEEDS",
    "GOAL_UNREACHABLE",
    "START_IN_COLLISION",
    "TIMED_OUT",
    "PlanResult",
    "TrajectoryOptimizer",
    "Weights",
    "retarget",
    "retarget_memory_bytes",
    "self_pair_groups",
    "trajectory_memory_bytes",
]

# Obstacles per kind are padded to obstacle_buckets (collision.WORLD_BUCKETS, the default;
# COARSE_WORLD_BUCKETS for scenes that vary: why each, beside them in collision/geometry.py).
# Configurations per call of the compiled clearance check (clearance_function): a plan's
# start or ends (<= 8), the goal search's seeds (32). A padded row costs one more row's
# distances; another count would cost a compile of its own.
CLEARANCE_ROWS = (8, 32)
# Configurations per segment, on average, that a path's success check adds between its knots,
# spread along the path by the largest joint's travel (a path of 2.5 rad of it over 64 knots:
# one every ~10 mrad).
DENSE_SAMPLES = 4


class TrajectoryOptimizer:
    """Plans joint-space paths for one robot; one compiled program per problem structure
    (number of knots, objective kinds and links, obstacle buckets, number of starts).

    Its success check samples between the knots (:data:`DENSE_SAMPLES`).

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
        max_programs: int = 32,
        obstacle_buckets: tuple[int, ...] = WORLD_BUCKETS,
        exact: col.RobotSpheres | None = None,
        schedule: damping.Damping = damping.CHAIN,
    ):
        """``exact``: a closer model of the same robot (a sphere file's exact model,
        :meth:`col.RobotSpheres.from_yaml`: links as their mesh hulls) that a plan falls back
        to when ``spheres`` puts every goal configuration in collision (:attr:`exact`,
        :func:`pyroki_ros.planning.pipeline.plan`); its programs compile apart (the warm-up
        compiles them too). ``max_programs``: compiled programs kept; past it the least recently used one is
        dropped with its memory (each request structure compiles one, so a client that varies
        structures cannot grow the process without bound). ``obstacle_buckets``: the counts
        each obstacle kind is padded up to (:meth:`World.padded`); coarser buckets
        (:data:`COARSE_WORLD_BUCKETS`) compile fewer programs for scenes that vary (a plan's
        searches stop where the padding starts: :meth:`World.live_counts`). ``schedule``: the
        Levenberg-Marquardt damping schedule of every optimisation (:data:`damping.CHAIN`)."""
        self.robot = robot
        self.spheres = spheres
        self.device = jax.local_devices(backend=device)[0]  # this process's (jax.distributed)
        self.schedule = schedule
        self._collide = CollisionTerms(robot, spheres)
        self.max_programs = max_programs
        self.obstacle_buckets = tuple(int(b) for b in obstacle_buckets)
        col.World.empty().padded(self.obstacle_buckets)  # a bad list fails here, not in a plan
        self.programs_built = 0  # programs created so far (each compiles on its first call)
        # Wall time of optimisations that compiled nothing, per knot count and obstacle
        # buckets (plan budgets turn the time left into an iteration limit: pace()).
        self._paces = PaceLog()
        self._programs: collections.OrderedDict[tuple, Callable] = collections.OrderedDict()
        # The last world seen: its padded copy and its checked pairs per contact rule.
        self._world_cache: tuple[col.World, col.World, dict] | None = None
        self._empty_world = col.World.empty()
        self._clearance_program = jax.jit(functools.partial(clearances, self._collide))
        self._bounding_program = self._clearance_program
        if spheres is not None and spheres.n_hulls:
            bounding = CollisionTerms(robot, spheres.bounding())
            self._bounding_program = jax.jit(functools.partial(clearances, bounding))
        self._contacts = jax.jit(functools.partial(contact_distances, robot, spheres))
        self._lock = threading.Lock()
        self._dtype = np.dtype(robot.dtype)
        from pyroki_ros.ik import IKSolver

        self.ik = IKSolver(robot, device=device)
        # The exact model's planner (None without one); it shares this planner's IK.
        self.exact: TrajectoryOptimizer | None = None
        self.exact_links: tuple[str, ...] = ()  # links the exact model has as mesh hulls
        if exact is not None:
            if spheres is None:
                raise ValueError("an exact model needs spheres to fall back from")
            self.exact = TrajectoryOptimizer(
                robot, exact, device=device, max_programs=max_programs,
                obstacle_buckets=obstacle_buckets, schedule=schedule,
            )  # fmt: skip
            self.exact.ik = self.ik
            hulls = exact.box_link_names[exact.n_boxes - exact.n_hulls :]
            self.exact_links = tuple(sorted(set(hulls) - set(spheres.box_link_names)))
        # Start paths per optimisation of a plan, in turn: one at a time, stopping at the
        # first success, on every device. Eight at once on a GPU (the earlier default there)
        # planned the MotionBenchMaker evaluation set 4x slower on an H200 (median 304 ms
        # against 77 ms, docs/benchmarks/gpu.md): a batch runs every path to the slowest's end.
        self.start_batches = (1,) * 8

    @property
    def plan_rows(self) -> int:
        """Start paths every optimisation of a plan is padded to (``optimize(rows=...)``): the
        largest of :attr:`start_batches`, so that the start paths, the goal search's pushes
        and the goal refinements (one path each) share one compiled program. 1 by default."""
        return max(self.start_batches)

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
                solve_starts, self.robot, self._collide, smoothing, bandwidth,
                DENSE_SAMPLES, self.schedule,
            )  # fmt: skip
            program = self._programs[key] = jax.jit(fn)
            self.programs_built += 1
            while len(self._programs) > self.max_programs:
                self._programs.popitem(last=False)
            return program

    def _checked(
        self, world: col.World | None, contacts: col.ContactRules, moving: np.ndarray
    ) -> tuple[col.World, col.World, tuple[np.ndarray, np.ndarray]]:
        """:func:`col.checked_pairs` with the world's columns padded like ``padded`` (the
        dummies count as checked: they are far away anyway). Kept with the last world's
        padded copy (:meth:`_padded_world`, called first): a plan asks several times."""
        world = self._empty_world if world is None else world
        padded = self._padded_world(world)
        if self.spheres is None:
            return world, padded, (np.ones((0, padded.n_obstacles), bool), np.ones((0,), bool))
        moving = np.asarray(moving, bool)
        key, cached = (contacts, moving.tobytes()), self._world_cache
        rules = cached[2] if cached[0] is world else {}  # another thread's world meanwhile
        if key not in rules:
            world_ok, self_ok = col.checked_pairs(self.robot, self.spheres, world, contacts, moving)
            dummy = np.ones((len(world_ok), 1), bool)  # last column: what the dummies take
            columns = _columns(world.counts, padded.counts)
            rules[key] = (
                np.concatenate([world_ok, dummy], 1)[:, columns],
                np.asarray(self_ok, bool),
            )
            for a in rules[key]:
                a.flags.writeable = False  # shared by the calls that find it cached
        return world, padded, rules[key]

    def _padded_world(self, world: col.World) -> col.World:
        """The world padded to its bucket, on the device in the robot's dtype. Kept for the
        last world seen: a plan calls :meth:`optimize` several times with one world, and
        padding costs ~30 small eager operations (~9 ms here)."""
        cached = self._world_cache
        if cached is not None and cached[0] is world:
            return cached[1]
        dt = self._dtype
        padded = jax.tree.map(lambda a: jnp.asarray(a, dt), world.padded(self.obstacle_buckets))
        self._world_cache = (world, padded, {})
        return padded

    # -- planning ----------------------------------------------------------------------------

    def optimize(
        self,
        starts: np.ndarray,
        objectives: tuple[obj.Objective, ...] = (),
        *,
        world: col.World | None = None,
        free: np.ndarray | None = None,
        weights: Weights = Weights(),  # noqa: B008 (frozen: safe to share)
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
        initial_damping: float | None = None,
        contacts: col.ContactRules = col.DEFAULT_CONTACTS,
        rows: int = 1,
    ) -> PlanResult | list[PlanResult]:
        """Optimises B initial paths (B, T, n) and returns the best one (``each``: a result
        per start, for batches of different problems).

        ``objectives`` carry a knot axis: fields (T, ...), weights zero at knots where an
        objective does not apply; fields (B, T, ...) give every start its own values (a batch
        of different problems). ``free`` (T, n): 1 where a variable may move (default: every
        knot but the first); fixed variables keep each start path's value. ``vectors``:
        (from, to) link pairs whose difference p_to - p_from should follow ``vector_targets``
        (T, V, 3) (root frame, m) with ``vector_weights`` (T, V) (retargeting by link-to-link
        vectors). ``margin``: the collision costs' reach (m), one value or one per knot (T,).
        ``manipulability_link``: with ``weights.manipulability`` > 0, a cost on the
        inverse manipulability of this link keeps the path away from singularities.
        ``early_stop`` > 0: once every goal is within 70 % of its tolerance and every knot and
        segment midpoint is at least half the margin clear, stop as soon as a step lowers the
        cost by less than this fraction (a usable path, not the smoothest one). The best
        start is the successful one of least cost, else the one closest to success.
        ``initial_damping``: the LM's Marquardt damping of its first step (relative to the
        diagonal). The default, the schedule's (:attr:`schedule`), is nearly Gauss-Newton,
        right for start paths already near their targets (plans); a start path far from them
        needs more (see :func:`retarget`).
        ``contacts``: which contacts are not collisions (:func:`col.checked_pairs`; links that
        no free joint moves are not checked against the world by default). ``rows``: the
        batch is padded to at least this many start paths (copies of the last, dropped), for
        a caller whose optimisations should share one program whatever their count (a plan:
        :attr:`plan_rows`).
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
        margin = np.asarray(margin, np.float64)
        if margin.shape not in ((), (t_count,)) or not (
            np.isfinite(margin).all() and (margin >= 0).all()
        ):
            raise ValueError(
                f"margin must be finite and >= 0, one value or one per knot ({t_count},), "
                f"got {margin if margin.size < 8 else margin.shape}"
            )
        if initial_damping is None:
            initial_damping = self.schedule.initial
        if not (np.isfinite(initial_damping) and initial_damping > 0):
            raise ValueError(f"initial_damping must be finite and > 0, got {initial_damping}")
        limits = robot.limits
        rest = limits.center() if rest is None else np.asarray(rest, np.float64)
        # Bounds: the limits, but a fixed variable keeps its (possibly wrapped) start value.
        lower = np.where(free > 0, limits.lower, starts)  # (B, T, n)
        upper = np.where(free > 0, limits.upper, starts)
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
        world, padded, (world_checked, self_checked) = self._checked(world, contacts, free.any(0))
        problem = Problem(
            objectives=tuple(jax.tree.map(per_start, o) for o in objectives),
            rest=np.asarray(rest, dt),
            weights=np.asarray(dataclasses.astuple(weights), dt),
            margin=np.broadcast_to(margin, (t_count,)).astype(dt),
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
        size = max(count, int(rows))
        mesh = devices.batch_mesh(self.device.platform) if size > 1 else None
        size = devices.padded_size(size, mesh)  # several devices: a share of the starts each
        if size > count:  # padding rows that solve like the last real one, then dropped
            per_start = devices.pad_rows((problem.lower, problem.upper, problem.objectives), size)
            problem = dataclasses.replace(
                problem, lower=per_start[0], upper=per_start[1], objectives=per_start[2]
            )
            starts = devices.pad_rows(starts, size)
        structure = (tuple(structure_key(o) for o in objectives), padded.counts, size)
        built = self.programs_built
        program = self._program(structure, t_count, bandwidth)
        starts = starts.astype(dt)
        if mesh is not None:
            program = devices.over_devices_cached(program, mesh, batch_specs)
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
        if self.programs_built == built and iterations.max() > 0:
            self._paces.record((t_count, padded.counts), int(iterations.max()), seconds)

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
                path=limits.clip(paths[i]),
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

    # The pipeline's docstring and signature (help() and inspect.signature show its keywords).
    @functools.wraps(pipeline.plan)
    def plan(self, start: np.ndarray, goal, **options) -> PlanResult:
        return pipeline.plan(self, start, goal, **options)

    @functools.wraps(pipeline.warm_up)
    def warm_up(self, start: np.ndarray, goal, **options) -> PlanResult:
        return pipeline.warm_up(self, start, goal, **options)

    @functools.wraps(pipeline.plan_batch)
    def plan_batch(self, starts: np.ndarray, goals: np.ndarray, **options) -> list[PlanResult]:
        return pipeline.plan_batch(self, starts, goals, **options)

    def clearances(
        self,
        q: np.ndarray,
        world: col.World | None,
        contacts: col.ContactRules,
        moving,
        rows: int = 1,
    ) -> np.ndarray:
        """(B,) smallest checked clearance of configurations q (B, n): one compiled call (the
        named answer: :meth:`deepest_contact`); ``rows``: see :meth:`clearance_function`."""
        return self.clearance_function(world, contacts, moving)(q, rows)

    def pace(self, t_count: int, world: col.World | None = None) -> Pace | None:
        """How long an optimisation of T knots among ``world`` (its obstacle buckets) takes,
        measured on the last ones that compiled nothing (None before the first)."""
        world = self._empty_world if world is None else world
        return self._paces.get((t_count, world.padded_counts(self.obstacle_buckets)))

    def clearance_function(
        self,
        world: col.World | None,
        contacts: col.ContactRules,
        moving: np.ndarray,
        *,
        bounding: bool = False,
    ) -> Callable[[np.ndarray], np.ndarray]:
        """The smallest checked clearance (m) as a function of configurations q (B, n) ->
        (B,), for one world and contact rule (the padding and the checked pairs made once:
        a sampling planner calls it many times). B is padded to one of :data:`CLEARANCE_ROWS`
        (past the last, to the next power of two; the first row repeated), so callers whose
        batch varies (IK solutions that reached a goal, a plan's ends) share two programs
        that the warm-up compiles, not one per size; to at least ``rows`` (the function's
        second argument) for a caller that wants one program whatever its count (the goal
        search: its seed count). ``bounding``: hulls as their bounding boxes
        (:meth:`col.RobotSpheres.bounding`), a cheaper conservative check. ValueError for
        configurations of another shape; none (B = 0): an empty answer."""
        world, padded, checked = self._checked(world, contacts, moving)
        program = self._bounding_program if bounding else self._clearance_program
        dt = self._dtype

        n = self.robot.n_joints

        def clearance(q: np.ndarray, rows: int = 1) -> np.ndarray:
            q = np.asarray(q, dt)
            if q.ndim != 2 or q.shape[1] != n:  # gathers past the end would clamp: no error
                raise ValueError(f"configurations must have shape (B, {n}), got {q.shape}")
            count = len(q)
            if count == 0:  # nothing to check: no program for an empty batch
                return np.zeros(0, dt)
            if self.spheres is None:  # no sphere model: nothing can collide
                return np.full(count, np.inf, dt)
            need = max(count, rows, 1)
            fit = [b for b in CLEARANCE_ROWS if b >= need]
            size = fit[0] if fit else 1 << (need - 1).bit_length()
            if size > count:
                q = np.concatenate([q, np.repeat(q[:1], size - count, 0)])
            return np.asarray(program(jnp.asarray(q), padded, *checked))[:count]

        return clearance

    def deepest_contact(
        self,
        q: np.ndarray,
        world: col.World | None = None,
        contacts: col.ContactRules = col.DEFAULT_CONTACTS,
        moving: np.ndarray | None = None,
    ) -> tuple[float, str, str]:
        """The smallest checked clearance of configuration ``q`` (n,) (m, < 0: penetration)
        and what it is between: (distance, link, obstacle name or other link); (inf, "", "")
        when nothing is checked. Uses the rule of :func:`col.checked_pairs`, as planning does,
        and the padded world of the plan's programs (one compiled program per bucket)."""
        if self.spheres is None:
            return math.inf, "", ""
        moving = np.ones(self.robot.n_joints, bool) if moving is None else moving
        world, padded, (world_ok, self_ok) = self._checked(world, contacts, moving)
        q = jnp.asarray(np.asarray(q, self._dtype))
        world_d, self_d = (
            np.asarray(d, np.float64) for d in self._contacts(q, padded, world_ok, self_ok)
        )
        best = (math.inf, "", "")
        if world_d.size:
            s_i, o_i = np.unravel_index(np.argmin(world_d), world_d.shape)
            if world_d[s_i, o_i] < 0.5 * col.FAR:  # a padding dummy: nothing is checked
                obstacle = int(_columns(world.counts, padded.counts)[o_i])
                rows = self.spheres.link_names + self.spheres.box_link_names  # spheres, boxes
                best = (float(world_d[s_i, o_i]), rows[s_i], world.name(obstacle))
        if self_d.size:
            i = int(np.argmin(self_d))
            if self_d[i] < best[0]:
                a, b = np.asarray(self.spheres.self_pairs)[i]
                best = (float(self_d[i]), self.spheres.link_names[a], self.spheres.link_names[b])
        return best


def _columns(counts: tuple[int, ...], padded: tuple[int, ...]) -> np.ndarray:
    """(sum(padded),) the unpadded world's obstacle index of each column of the padded world
    (kinds in the same order, each followed by its dummies), -1 for a dummy."""
    first = np.cumsum((0, *counts[:-1]))
    index = [
        np.where(np.arange(s) < c, f + np.arange(s), -1) for c, s, f in zip(counts, padded, first)
    ]
    return np.concatenate(index)
