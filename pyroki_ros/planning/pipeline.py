"""The plan pipeline of :class:`~pyroki_ros.planning.trajopt.TrajectoryOptimizer`: checks,
goal configurations, start paths, the global step (:mod:`pyroki_ros.planning.rrt`), and the
refinements of a path (push clear, exact goal) around :meth:`TrajectoryOptimizer.optimize`.
Functions of the optimiser (``planner``): it owns the compiled programs, these own the
order in which a plan tries things.

Over ~600 lines because it is the one place that orders a plan's steps (checks, goal
search, start paths, the global step, refinements, the escape from a start in collision,
the batched plan); each step's mechanics live in their own modules (goals, rrt, budget,
problem)."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING

import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import objectives as obj
from pyroki_ros.model.limits import MEASURED_SLACK
from pyroki_ros.model.robot import Robot
from pyroki_ros.planning import goals as goal_search
from pyroki_ros.planning import rrt
from pyroki_ros.planning.budget import CompileFreeClock, PlanBudget
from pyroki_ros.planning.problem import (
    GOAL_IN_COLLISION,
    START_IN_COLLISION,
    TIMED_OUT,
    PlanResult,
    Weights,
)

if TYPE_CHECKING:
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer


# Plans stop at the first step that leaves the path usable (a step gains less than this
# fraction of the cost: every accepted step does at 1.0; see TrajectoryOptimizer.optimize).
# Polishing on until a step gains < 1 % made MotionBenchMaker plans ~6-9 % slower for paths
# ~2 % shorter, at the same successes (bench/mbm_ab.py, docs/benchmarks/mbm_early_stop_ab*.md).
EARLY_STOP = 1.0

# m: the least reach of the collision costs when a start or goal is that close (_margins)
MIN_MARGIN = 0.004
# Share of the knots over which the reach rises from a close start or goal's to the margin.
MARGIN_RAMP = 0.25

# Goal poses: IK solutions tried as the path's last knot (planning/goals.py).
GOAL_SEEDS = goal_search.SEEDS

# What a plan does with a start in collision (``start_collision``): "refuse" answers
# START_IN_COLLISION; "escape" plans from the nearest clear configuration around it, like
# MoveIt's FixStartStateCollision adapter (a measured state is where the robot is: a sphere
# model, which reaches past the real surface, can call it a collision).
START_COLLISION = ("refuse", "escape")
# rad: largest per-joint offsets (active joints) of the escape's random configurations, in
# rounds of rrt.CHUNK each, until a round has a usable one (_escape).
ESCAPE_REACH = (0.02, 0.05, 0.1, 0.2)

# The global step goes first when more than this share of the straight start path (sampled
# at BLOCKED_SAMPLES configurations, one compiled clearance call) lies inside obstacles: local
# optimisation rarely pulls so buried a line out (a hand under a table, reaching through the
# shelf above). Chosen on the tuning set (generated_seed1.yaml, fine spheres; a probe's
# shares, in the 2026-11-27 notes on issue 16): table_under_pick lines 0.53-0.95 blocked,
# every other family's <= 0.68. Random scenes do not slow down for the check
# (docs/benchmarks/trajopt_blocked_ab.md).
BLOCKED = 0.7
BLOCKED_SAMPLES = 32
# LM iterations kept from the global step's budget for the optimisation of the path it finds
# (a path found at the budget's end would otherwise get one iteration).
GLOBAL_PATH_ITERATIONS = 10
# Default seconds for the global step. When the first start path fails in clutter, the global
# step is the plan's best chance, and in a 2 s plan 1 s cut it short: bookshelf_thin/7 of the
# second MotionBenchMaker set, plan seeds 0-7, found its path after 0.73-1.44 s (4 of 7 past
# 1 s; a probe, 2026-12-06 notes on issue 16). Plans of that problem that succeed in 2 s,
# `bench/plan_overrun.py --budgets 2 --seeds 8`: 3/8 at 1 s; 3/8, 2/8 and 6/8 in three runs
# at 1.5 s, this VM's speed moving the rest (docs/benchmarks/plan_thin7_seeds*.md).
SAMPLING_BUDGET = 1.5
# LM iterations of the first start path (the straight line) while the global step is still
# to follow: a straight line that does not come clear in this many rarely does at all, and
# the iterations it would spend are the global step's time. MotionBenchMaker plans, tuning
# set, uncut (bench/plan_progress.py, docs/benchmarks/plan_progress_uncut_tuning.md): the 49
# straight paths that planned took a median of 6 iterations, 3 more than 30 (31, 38, 53);
# 5 of the 11 that failed ran past 30 (up to 60, 0.30 s) before the global step's path
# planned in 1-8. Interleaved A/B over all 215 problems: p95 610 -> 472 ms, the tuning
# set's 577 -> 382 ms, the evaluation set's 502 -> 534 ms (docs/benchmarks/mbm_first_path_ab.md).
FIRST_PATH_ITERATIONS = 30


def plan(
    planner: TrajectoryOptimizer,
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
    sampling_budget: float = SAMPLING_BUDGET,
    first_path_iterations: int = FIRST_PATH_ITERATIONS,
    timeout: float = 0.0,
    start_collision: str = "refuse",
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
            GPU 8 at once. A pose goal's configurations come first from one batched IK
            solve (:func:`pyroki_ros.planning.goals.search`: the start and random seeds;
            those clear of obstacles and joint limits, nearest to the start first); they
            take turns as the last knot: straight lines to each, then bent paths. When none
            is usable the plan stops at once: ``reason`` GOAL_UNREACHABLE (no IK solution)
            or GOAL_IN_COLLISION (every solution collides; the message names the contact).
            A joint goal that collides: GOAL_IN_COLLISION too. A planner with an exact
            model (:attr:`TrajectoryOptimizer.exact`) first plans such a goal again with
            it, in the time left (:func:`_exact_fallback`; the message says so).
        active_joints: joints that may move (default all); the others keep the start value.
        seed: of the random intermediate configurations (plans are deterministic).
        progress: optional callable taking a line of text per attempt (for a log; an
            attempt whose last start path is the global step's says so).
        contacts: contacts that are not collisions (:func:`col.checked_pairs`): by
            default links no active joint moves (the base on its stand) are not checked
            against the world. A start that collides otherwise is not planned from:
            ``reason`` START_IN_COLLISION, the message names both sides.
        start_collision: "refuse" (default: as above) or "escape": a start in collision is
            planned out of (:func:`_escape`): the plan starts at a nearby clear
            configuration within :data:`ESCAPE_REACH` of it and its first knot is the
            start again; the first segment may overlap, never deeper than the start does
            (checked densely), and the message says so. None that near: START_IN_COLLISION.
        sampling_budget: seconds for the global step (:mod:`pyroki_ros.planning.rrt`:
            RRT-Connect over the sphere model at a quarter of the margin) whose path is
            the next start path once the first one fails, or the first when the straight
            line is mostly inside obstacles (:data:`BLOCKED`) (0: none). Not with waypoints.
        first_path_iterations: LM iterations at most of the first batch of start paths
            while the global step may still follow it (more batches to come: start paths
            one at a time, the CPU default); the others get ``max_iterations`` (60).
        timeout: wall-clock budget (s, 0 = none), checked before each start path,
            bounding the global step and cutting every optimisation (also the goal
            search's pushes of colliding goal configurations) to the LM iterations
            that fit in the time left (at the last measured pace): when it runs out the
            best path so far comes back with ``reason`` TIMED_OUT. Compiling a new problem
            structure (its first plan) cannot be cut and is not counted.
        **options: passed to :meth:`optimize` (weights, margin, tolerances, ...). The
            ``margin`` (one value, m) is kept between start and goal; near a start or goal
            closer than it the reach narrows (:func:`_margins`).
    """
    arguments = dict(locals())  # every argument as given: _escape plans again with all of them
    clock = time.perf_counter()
    spent = CompileFreeClock(clock)  # what counts against ``timeout``
    robot = planner.robot
    start = _checked_start(robot, start)
    if num_steps < 2:
        raise ValueError(f"num_steps must be >= 2, got {num_steps}")
    if num_starts is not None and num_starts < 1:
        raise ValueError(f"num_starts must be >= 1, got {num_starts}")
    if first_path_iterations < 1:
        raise ValueError(f"first_path_iterations must be >= 1, got {first_path_iterations}")
    active = robot.active_mask(active_joints)
    t_count = int(num_steps)
    if start_collision not in START_COLLISION:
        raise ValueError(
            f"start_collision must be one of {START_COLLISION}, got {start_collision!r}"
        )
    start_clearance = _clearance(planner, start, world, contacts, active)
    if start_clearance < 0 and start_collision == "escape":
        return _escape(arguments, start, active, start_clearance, clock, spent)
    if start_clearance < 0:
        return _collision(planner, start, world, contacts, active, t_count, clock, start=start)
    rng = np.random.default_rng(seed)
    margin = float(options.get("margin", 0.02))
    goal_objectives = _goal_objectives(goal)
    # Start paths in turn, a batch of each size (planner.start_batches: one at a time by
    # default), stopping at the first success.
    attempts = (num_starts,) if num_starts else planner.start_batches
    found = None
    budget = PlanBudget(planner, timeout, clock, world)  # the goal search's pushes count too
    names = None if active_joints is None else tuple(active_joints)
    if not goal_objectives:
        known = [_joint_goal(robot, goal, start, active)]
        ends = [_clearance(planner, known[0], world, contacts, active)]
        if ends[0] < 0:
            refusal = _collision(planner, known[0], world, contacts, active, t_count, clock,
                                 start=start, reason=GOAL_IN_COLLISION)  # fmt: skip
            return _exact_fallback(arguments, refusal, clock, spent)
    else:
        found = goal_search.search(
            planner, goal_objectives, start, names, world, contacts, active, rng,
            t_count=t_count,
            position_tolerance=options.get("position_tolerance", 1e-3),
            orientation_tolerance=options.get("orientation_tolerance", math.radians(1.0)),
            lazy=attempts[0] == 1,  # one goal is enough for a first start path alone
            budget=budget,
        )  # fmt: skip
        if found.reason:
            refusal = dataclasses.replace(
                _refused(start, t_count, clock, found.message, found.reason),
                position_errors=found.position_errors,
                orientation_errors=found.orientation_errors,
            )
            if found.reason != GOAL_IN_COLLISION:
                return refusal
            return _exact_fallback(arguments, refusal, clock, spent)
        ends = list(found.clearances)
        known = list(found.configurations)

    # Every path ends in one of the known goal configurations: the last knot is fixed (a
    # pose goal's configurations reach it within the IK's tolerance).
    free = np.ones((t_count, robot.n_joints)) * active
    free[0] = free[-1] = 0.0
    full_margin = margin
    options["margin"] = margin = _margins(full_margin, start_clearance, ends, t_count)
    weights = options.pop("weights", Weights())
    options.setdefault("early_stop", EARLY_STOP)
    planned = options.pop("max_iterations", 60)
    objectives = _knot_objectives(goal_objectives, waypoints, t_count)

    def solve(starts: np.ndarray, iterations: int = planned, **changes) -> PlanResult:
        """One optimisation, cut to the iterations the time left allows."""
        settings = {"weights": weights, **options, **changes}
        return planner.optimize(
            starts,
            objectives,
            world=world,
            contacts=contacts,
            max_iterations=budget.iterations(t_count, iterations),
            rows=planner.plan_rows,
            **settings,
        )

    global_step = sampling_budget > 0 and not waypoints  # still to run (once per plan)
    global_first = (
        global_step and _blocked_share(planner, start, known[0], world, contacts, active) > BLOCKED
    )
    result, used, cut_short = None, 0, False
    for count in attempts:
        if result is not None and not budget.affords(t_count):
            cut_short = True  # not even one iteration fits: answer now, within the budget
            break
        origin = ""  # where the attempt's last start path came from, for progress
        if found is not None and found.more is not None and used + count > len(known):
            # A lazy goal search's first goals are used up: the whole search's join them.
            found = goal_search.extended(found)
            known, ends = list(found.configurations), list(found.clearances)
            options["margin"] = margin = _margins(full_margin, start_clearance, ends, t_count)
        starts = np.stack(
            [
                _initial_path(
                    planner, start, known[i % len(known)], active, t_count, rng, i >= len(known)
                )
                for i in range(used, used + count)
            ]
        )
        # The global step's time: what is left, less what optimising its path will need
        # (none: no global step, whose checks alone would spend the optimisation's time).
        sampling = min(
            sampling_budget, budget.left() - budget.seconds(t_count, GLOBAL_PATH_ITERATIONS)
        )
        if global_step and sampling > 0 and (used > 0 or count > 1 or global_first):
            seeded, _ = rrt.global_path(
                planner, start, known, active, t_count, world=world, contacts=contacts,
                margin=float(margin.min()) / 4, seed=seed, budget=sampling,
                goal=goal_objectives,
            )  # fmt: skip
            global_step = False  # once per plan
            starts[-1] = starts[-1] if seeded is None else seeded
            origin = " (global step)" if seeded is not None else " (global step: none found)"
        # The first batch of start paths, with the global step still to follow: cut shorter.
        global_next = used == 0 and len(attempts) > 1 and global_step
        iterations = min(planned, first_path_iterations) if global_next else planned
        used += count
        # A pose goal the path missed: tightened onto it (one that collides goes as it is).
        candidate = solve(starts, iterations, free=free)
        if goal_objectives and not candidate.success:
            candidate = _exact_goal(
                planner, candidate, goal_objectives, names, free, solve, weights
            )
        if result is None or _better(candidate, result):
            result = candidate
        if progress is not None:
            progress(
                f"start path {used}/{sum(attempts)}{origin}: {candidate.message} "
                f"({candidate.iterations} iterations, {candidate.solve_seconds:.3f} s)"
            )
        if result.success:
            break
    if not result.success and (cut_short or budget.left() <= 0):
        result = dataclasses.replace(
            result,
            message=f"no path found within the {timeout:.3g} s budget ({used} start paths "
            f"tried); best: {result.message}",
            reason=TIMED_OUT,
        )
    return dataclasses.replace(result, solve_seconds=time.perf_counter() - clock)


def _checked_start(robot: Robot, start) -> np.ndarray:
    """(n,) float64 ``start`` inside the limits (see :func:`_checked_configuration`)."""
    return robot.limits.clip(_checked_configuration(robot, start, "start"))


def _checked_configuration(robot: Robot, q, what: str) -> np.ndarray:
    """(n,) float64 ``q``; ValueError naming ``what`` for a wrong shape, a non-finite value
    or a joint past a limit by more than MEASURED_SLACK (a measured state may sit a little
    past one)."""
    n = robot.n_joints
    q = np.asarray(q, np.float64)
    if q.shape != (n,):
        raise ValueError(f"{what} must have shape ({n},), got {q.shape}")
    if not np.isfinite(q).all():
        raise ValueError(f"{what} contains NaN or infinite values")
    outside = robot.limits.outside(q, MEASURED_SLACK)
    if outside.any():
        names = [robot.joint_names[i] for i in np.flatnonzero(outside)]
        raise ValueError(f"{what} is outside the joint limits at {', '.join(names)}")
    return q


def _clearance(planner: TrajectoryOptimizer, q, world, contacts, active) -> float:
    """The clearance (m) of the configuration ``q`` (n,): inf without a sphere model."""
    return float(planner.clearances(q[None], world, contacts, active)[0])


def _collision(
    planner: TrajectoryOptimizer,
    q,
    world,
    contacts,
    active,
    t_count: int,
    clock: float,
    *,
    start,
    reason: str = START_IN_COLLISION,
) -> PlanResult:
    """The result for ``q`` (the start, or a joint goal) in collision: ``reason``, the
    deepest contact named (the path: the start held for ``t_count`` knots)."""
    clearance, overlap = _overlap(planner, q, world, contacts, active)
    what = "start" if reason == START_IN_COLLISION else "goal configuration"
    message = f"{what} is in collision: {overlap} (allow the pair in contacts to plan anyway)"
    return _refused(start, t_count, clock, message, reason, clearance)


def _blocked_share(planner: TrajectoryOptimizer, a, b, world, contacts, active) -> float:
    """The share of the straight joint-space line from ``a`` to ``b`` (n,) inside obstacles
    (clearance < 0 at :data:`BLOCKED_SAMPLES` evenly spaced configurations); 0 without a
    sphere model."""
    line = np.linspace(a, b, BLOCKED_SAMPLES)
    return float(np.mean(planner.clearances(line, world, contacts, active) < 0))


def _overlap(planner: TrajectoryOptimizer, q, world, contacts, active) -> tuple[float, str]:
    """The deepest contact of ``q`` (n,): its clearance (m, < 0) and a text naming it."""
    clearance, side_a, side_b = planner.deepest_contact(q, world, contacts, active)
    return clearance, f"{side_a} and {side_b} overlap by {-clearance * 1e3:.1f} mm"


def _escape(
    arguments: dict,
    start: np.ndarray,
    active: np.ndarray,
    start_clearance: float,
    clock: float,
    spent: CompileFreeClock,
) -> PlanResult:
    """Plans out of a start in collision (``start_collision="escape"``): random
    configurations around ``start`` (per-joint offsets up to each :data:`ESCAPE_REACH` in
    turn, active joints only) at least MIN_MARGIN clear are candidates; of the nearest
    eight, the first whose straight way from ``start`` never overlaps deeper than ``start``
    does (``start_clearance``, m; :func:`_deepest`) starts the plan. The path's first knot is
    then ``start`` again; its first segment (``start`` to the second knot) is held to the
    same rule, else the plan fails with START_IN_COLLISION. ``arguments``: :func:`plan`'s,
    as given (its ``options`` among them); ``start`` the checked start, ``active`` (n,);
    ``spent``: the plan's time so far, compiles left out."""
    planner, world, contacts = arguments["planner"], arguments["world"], arguments["contacts"]
    robot = planner.robot
    t_count = int(arguments["num_steps"])
    clearance = planner.clearance_function(world, contacts, active)
    rng = np.random.default_rng(arguments["seed"])
    # Nearest first: a clear configuration whose straight way from the start is no deeper.
    escaped = None
    for reach in ESCAPE_REACH:
        offsets = rng.uniform(-reach, reach, (rrt.CHUNK, robot.n_joints)) * active
        q = robot.limits.clip(start + offsets)
        clear = np.flatnonzero(clearance(q, rrt.CHUNK) >= MIN_MARGIN)
        near = clear[np.argsort(np.linalg.norm(q[clear] - start, axis=1))]
        escaped = next(
            (q[i] for i in near[:8] if _deepest(clearance, start, q[i]) >= start_clearance), None
        )
        if escaped is not None:
            break
    depth, overlap = _overlap(planner, start, world, contacts, active)
    if escaped is None:
        message = (
            f"start is in collision: {overlap}, and within "
            f"{ESCAPE_REACH[-1]:g} rad of it no clear configuration is reachable without going deeper"
        )
        return _refused(start, t_count, clock, message, START_IN_COLLISION, depth)
    result = plan(**_again(arguments, spent, start=escaped))
    path = result.path.copy()
    path[0] = start
    deepest = _deepest(clearance, start, path[1])
    if deepest < start_clearance:
        message = (
            f"start is in collision: {overlap}, and the path out of it goes deeper "
            f"({-deepest * 1e3:.1f} mm)"
        )
        return _refused(start, t_count, clock, message, START_IN_COLLISION, depth)
    note = f"start in collision: {overlap}; planned out of it over the first segment"
    return dataclasses.replace(
        result,
        path=path,
        min_distance=min(result.min_distance, deepest),
        message=f"{result.message} ({note})",
        solve_seconds=time.perf_counter() - clock,
    )


def _again(arguments: dict, spent: CompileFreeClock, **changes) -> dict:
    """:func:`plan`'s ``arguments`` as given (its ``options`` among them) with ``changes``,
    for a plan that starts over: its timeout cut to what is left after ``spent`` (compiles
    do not count, as in :class:`PlanBudget`)."""
    given = {k: v for k, v in arguments.items() if k != "options"}
    again = {**given, **arguments["options"], **changes}
    if again["timeout"] > 0:
        again["timeout"] = max(again["timeout"] - spent.elapsed(), 1e-3)
    return again


def _exact_fallback(
    arguments: dict, refusal: PlanResult, clock: float, spent: CompileFreeClock
) -> PlanResult:
    """A plan whose goal configurations all collide for the planner's spheres, planned again
    with its exact model (:attr:`TrajectoryOptimizer.exact`: links as their mesh hulls)
    within the time left; ``refusal`` comes back when there is none, no obstacle (the models
    differ only there) or no time. Spheres that contain a link reach millimetres past it:
    a goal the real link clears by 1-3 mm (a forearm beside a cage's wall) can collide for
    them. Only then does the plan use the exact model, whose paths pass as near obstacles as
    the real link may: everywhere else the spheres' extra reach stays a margin."""
    planner, world = arguments["planner"], arguments["world"]
    timeout = arguments["timeout"]
    late = timeout > 0 and spent.elapsed() >= timeout
    if planner.exact is None or world is None or world.n_obstacles == 0 or late:
        return refusal
    if arguments["progress"] is not None:
        arguments["progress"](f"{refusal.message}: planning with the exact model")
    result = plan(**_again(arguments, spent, planner=planner.exact))
    links = ", ".join(planner.exact_links)
    if result.success:
        note = f"with the exact model ({links}); the spheres put every goal in collision"
    else:
        note = f"the exact model ({links}) too; the spheres: {refusal.message}"
    return dataclasses.replace(
        result, message=f"{result.message} ({note})", solve_seconds=time.perf_counter() - clock
    )


def _deepest(clearance, a: np.ndarray, b: np.ndarray) -> float:
    """The smallest clearance (m) on the straight segment from ``a`` to ``b`` (n,), sampled
    at steps of at most 1 mrad per joint (at most rrt.CHUNK samples: one program)."""
    steps = min(rrt.CHUNK, max(2, int(np.ceil(np.abs(b - a).max() / 1e-3)) + 1))
    segment = a + np.linspace(0.0, 1.0, steps)[:, None] * (b - a)
    # float32 sphere distances: a hair below the start's own value is the same depth.
    return float(clearance(segment, rrt.CHUNK).min()) + 1e-6


def _refused(
    start, t_count: int, clock: float, message: str, reason: str, clearance: float = math.inf
) -> PlanResult:
    """A plan that did not start: the start held for ``t_count`` knots, with ``reason``."""
    return PlanResult(
        path=start[None].repeat(max(t_count, 2), 0),
        success=False,
        position_errors=np.full(0, np.inf),
        orientation_errors=np.full(0, np.inf),
        min_distance=clearance,
        min_self_distance=clearance,
        cost=math.inf,
        iterations=0,
        solve_seconds=time.perf_counter() - clock,
        message=message,
        reason=reason,
    )


def _margins(margin: float, start_clearance: float, ends, t_count: int) -> np.ndarray:
    """(T,) the collision costs' reach at each knot of a plan whose start or goal
    configurations sit closer to an obstacle than ``margin`` (m): at the start twice its
    clearance ``start_clearance``, at the goal twice the least of the goals' ``ends`` (m;
    at least MIN_MARGIN), rising linearly to ``margin`` over MARGIN_RAMP of the knots. A
    grasp's fingers are millimetres from the object: with the whole margin every knot near
    the goal would be pushed away from where the path has to end; with the ends' margin on
    every knot, the path between them would graze obstacles that it has room to keep clear
    of (a sphere model is only an approximation of the robot's surface)."""
    at_start = min(margin, max(MIN_MARGIN, 2.0 * float(start_clearance)))
    at_goal = min(margin, max(MIN_MARGIN, 2.0 * float(np.min(ends))))
    ramp = max(1.0, MARGIN_RAMP * (t_count - 1))
    t = np.arange(t_count, dtype=np.float64)
    rising = at_start + (margin - at_start) * t / ramp
    falling = at_goal + (margin - at_goal) * (t_count - 1 - t) / ramp
    return np.minimum(margin, np.minimum(rising, falling))


def _goal_objectives(goal) -> tuple[obj.Objective, ...]:
    """A pose goal's objectives, or () for a joint goal (n,)."""
    if isinstance(goal, obj.Objective):
        return (goal,)
    if isinstance(goal, np.ndarray) or (len(goal) and not isinstance(goal[0], obj.Objective)):
        return ()
    if not len(goal):
        raise ValueError("no goal given")
    return tuple(goal)


def _joint_goal(robot: Robot, goal, start, active) -> np.ndarray:
    """A joint goal (n,) checked like the start, its inactive joints at the start's value."""
    goal_q = _checked_configuration(robot, goal, "goal configuration")
    return np.where(active, robot.limits.clip(goal_q), start)


def _knot_objectives(goal_objectives, waypoints, t_count: int) -> tuple[obj.Objective, ...]:
    """The goal's objectives at the last knot and each waypoint group at its evenly spread
    inner knot, as objectives with a knot axis (T, ...) weighted only there."""
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
            per_knot.append(goal_search.on_knots(o, np.arange(t_count)[:, None] == knot))
    return tuple(per_knot)


def warm_up(
    planner: TrajectoryOptimizer,
    start: np.ndarray,
    goal,
    *,
    world: col.World | None = None,
    num_steps: int = 64,
    exact: bool = True,
    **options,
) -> PlanResult:
    """Compiles what plans of this structure (knots, obstacle buckets, goal objectives) need,
    before they are asked for: one :func:`plan` (``options`` passed on; its optimisations,
    the pushes and refinements included, share one program: ``plan_rows``), the named
    contact of a failure's message, the global step's clearance checks, an escape's (a start
    in collision) and, for a pose goal, the whole goal search and the global step's set-up
    (:func:`rrt.global_path`: the goal's retreats), which a plan asks for only when its first
    goal configuration does not do; among obstacles and with ``exact``, the same for the
    planner's exact model (its fallback; the node warms it apart, between requests:
    ros/planning.py). Returns the plan's result. A ``timeout`` in ``options`` is not
    applied: a budget would stop the plan before its later steps (the global step, more
    start paths) compile."""
    options = {**options, "timeout": 0.0}
    result = plan(planner, start, goal, world=world, num_steps=num_steps, **options)
    contacts = options.get("contacts", col.DEFAULT_CONTACTS)
    q = _checked_start(planner.robot, start)
    planner.deepest_contact(q, world, contacts)  # its program
    moving = planner.robot.active_mask(None)
    bounding = planner.clearance_function(world, contacts, moving, bounding=True)
    for rows in rrt.CHUNKS:  # the global step's checks
        bounding(q[None], rows)
    planner.clearances(q[None], world, contacts, moving, rows=rrt.CHUNK)  # an escape's
    objectives = _goal_objectives(goal)
    if objectives:
        goal_search.search(
            planner, objectives, q, None, world, contacts, moving,
            np.random.default_rng(0), t_count=int(num_steps),
        )  # fmt: skip
        # The global step once, to q itself (its answer: the straight line): what it runs
        # before its search, the goal's retreats with their IK settings and the eager pose
        # maths that JAX compiles on its first call in a process, else inside the first
        # plan that reaches it.
        rrt.global_path(planner, q, q[None], moving, int(num_steps), world=world,
                        contacts=contacts, margin=0.0, budget=1.0, goal=objectives)  # fmt: skip
    if exact and planner.exact is not None and world is not None and world.n_obstacles > 0:
        warm_up(planner.exact, start, goal, world=world, num_steps=num_steps, **options)
    return result


def plan_batch(
    planner: TrajectoryOptimizer,
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
    n = planner.robot.n_joints
    starts = np.asarray(starts, np.float64)
    goals = np.asarray(goals, np.float64)
    if starts.ndim != 2 or starts.shape[1] != n or len(starts) == 0:
        raise ValueError(f"starts must have shape (B >= 1, {n}), got {starts.shape}")
    width, kind = (n, "joint goals; pose goals need tip") if tip is None else (7, "wxyz_xyz")
    if goals.shape != (len(starts), width):
        raise ValueError(
            f"goals must have shape ({len(starts)}, {width}) ({kind}), got {goals.shape}"
        )
    if not (np.isfinite(starts).all() and np.isfinite(goals).all()):
        raise ValueError("starts or goals contain NaN or infinite values")
    if num_steps < 2:
        raise ValueError(f"num_steps must be >= 2, got {num_steps}")
    t_count = int(num_steps)
    if batched is None:
        batched = planner.device.platform != "cpu"
    if not batched:
        results = []
        for i, start in enumerate(starts):
            goal = obj.pose(tip, goals[i]) if tip is not None else goals[i]
            try:
                results.append(
                    plan(planner, start, goal, world=world, num_steps=t_count, **options)
                )
            except ValueError as e:
                raise ValueError(f"pair {i}: {e}") from None
    else:
        free = np.ones((t_count, n))
        free[0] = 0.0
        objectives: tuple[obj.Objective, ...] = ()
        if tip is not None:
            pose = obj.pose(tip, goals)
            goal_q = planner.ik.solve(pose, seed=starts).q
            objectives = (goal_search.on_knots(pose, np.arange(t_count)[:, None] == t_count - 1),)
        else:
            goal_q = planner.robot.limits.clip(goals)
            free[-1] = 0.0
        knots = np.linspace(0.0, 1.0, t_count)[None, :, None]
        paths = starts[:, None] + knots * (goal_q - starts)[:, None]
        options.setdefault("early_stop", EARLY_STOP)
        results = planner.optimize(paths, objectives, world=world, free=free, each=True, **options)
        if replan_failures:
            # as plan(): a measured start may sit a little past a limit
            inside = ~planner.robot.limits.outside(starts, MEASURED_SLACK).any(-1)
            for i, batched in enumerate(results):
                if batched.success or not inside[i]:
                    continue
                goal = obj.pose(tip, goals[i]) if tip is not None else goal_q[i]
                alone = plan(planner, starts[i], goal, world=world, num_steps=t_count, **options)
                # success first: a successful re-plan always wins
                kept, note = (alone, "") if _better(alone, batched) else (batched, ": no better")
                results[i] = dataclasses.replace(
                    kept, message=f"{kept.message} (re-planned alone{note})"
                )
    seconds = time.perf_counter() - clock
    return [dataclasses.replace(r, solve_seconds=seconds) for r in results]


def _initial_path(
    planner: TrajectoryOptimizer, start, goal_q, active, t_count, rng, bent: bool
) -> np.ndarray:
    """(T, n): the straight line in joint space, or (``bent``) a path through a random
    intermediate configuration (within a quarter of each joint's range of the middle)."""
    knots = np.linspace(0.0, 1.0, t_count)[:, None]
    if not bent:
        return start + knots * (goal_q - start)
    limits = planner.robot.limits
    span = limits.upper - limits.lower  # finite: continuous joints read (-pi, pi)
    first, second = np.clip(2 * knots, 0, 1), np.clip(2 * knots - 1, 0, 1)
    via = 0.5 * (start + goal_q) + rng.uniform(-0.25, 0.25, start.shape) * span
    via = np.where(active, limits.clip(via), start)
    return start + first * (via - start) + second * (goal_q - via)


def _exact_goal(
    planner: TrajectoryOptimizer, result, goal_objectives, names, free, solve, weights: Weights
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
        ik = planner.ik.solve(
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
        iterations, seconds = iterations + again.iterations, seconds + again.solve_seconds
        if _better(again, best):
            best = again
    return dataclasses.replace(best, iterations=iterations, solve_seconds=seconds)


def _better(a: PlanResult, b: PlanResult) -> bool:
    """Success first, then clearance, then goal error, then cost."""
    key = lambda r: (
        not r.success,
        -min(r.min_distance, r.min_self_distance, 0.0),
        float(np.sum(r.position_errors) + np.sum(r.orientation_errors)),
        r.cost,
    )
    return key(a) < key(b)
