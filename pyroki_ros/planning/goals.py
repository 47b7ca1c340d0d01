"""Goal configurations of a plan with a pose goal: the joint configurations its paths may end in.

One batched IK solve from the start and random seeds (inactive joints at the start's value)
gives many solutions of the goal; those clear of obstacles and of the joint limits are kept,
distinct, nearest to the start first (only those clear by :data:`GOAL_CLEARANCE` when there
are any). While none is clear, up to ROUNDS - 1 more solves from new seeds follow (a goal in
clutter: its clear solutions can be a small part of its IK set). When none is, the plan can
stop at once and say why:
GOAL_UNREACHABLE (no seed reached the goal within tolerance) or GOAL_IN_COLLISION (every
solution collides; the message names the deepest contact of the clearest one), instead of
optimising paths towards a goal no path can reach. A plan that tries one start path at a
time asks for the search lazily (``lazy``): the IK solution from the start alone first
(:data:`FIRST_SEEDS`), the batched solve only when that one is not usable or the plan needs
more goals. The same rule as every other check
(:func:`pyroki_ros.collision.checked_pairs`, the planner's sphere model).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import jax
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros import objectives as obj
from pyroki_ros.planning.problem import GOAL_IN_COLLISION, GOAL_UNREACHABLE, Weights

if TYPE_CHECKING:
    from pyroki_ros.planning.budget import PlanBudget
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

SEEDS = 32  # one batched IK solve: the start and 31 random seeds (one compiled program)
KEEP = 6  # distinct usable goal configurations kept
DISTINCT = 0.1  # rad: two goals differ when some joint differs by more
LIMIT_SLACK = 0.02  # rad from the limits of a joint wider than 0.5 rad: such goals first
REFINE = 2  # clearest colliding solutions pushed clear when none is clear
# Batched IK solves of SEEDS new random seeds each, after the first, while no solution is
# clear (a goal inside clutter: its clear solutions can be a small part of its IK set).
ROUNDS = 4
# The lazy search's first solve: the start alone (seed 0 of the batched solve). Most plans
# end at that solution (it is usually the nearest to the start, which the batched solve
# ranks first) and succeed on their first start path, so the batched solve (32 seeds, padded
# to the IK's batch bucket, and their clearances) is left until a second goal is needed:
# bench/ab_trajopt.py, after/before the restructure, 1.24 with it up front (commit c08391c),
# 1.12 and 1.07 lazily (two runs, 2026-11-26; docs/benchmarks/trajopt.md holds the second).
FIRST_SEEDS = 1
# The goal IK solves to this share of the plan's tolerances: the path's last knot is fixed at
# the answer, and the optimiser's early stop asks the goal to be within 70 % of them
# (problem.py); an answer between 70 and 100 % kept every plan iterating to its budget
# (bench/ab_trajopt.py: 11.7 LM iterations a plan on average against 3.2 before the fixed
# goal knot).
GOAL_IK_SHARE = 0.5
# m: goal configurations at least this clear come first, a thinner one only when no goal
# is: a sphere model and the real robot (or another model, such as the one a benchmark
# judges by) differ by millimetres, and a goal 0.1-0.5 mm clear by ours overlapped the
# judge's spheres by 0.2-0.7 mm (MotionBenchMaker tuning set, plan seed 2).
GOAL_CLEARANCE = 0.003
PUSH_MARGIN = 0.005  # m: the collision costs' reach while pushing a goal clear
PUSH_ITERATIONS = 60  # LM iterations of one push at most (the optimiser's default)
# No smoothness and little rest: each knot is the goal configuration alone.
PUSH_WEIGHTS = Weights(velocity=0.0, acceleration=0.0, jerk=0.0, rest=1e-6)


@dataclasses.dataclass(frozen=True)
class GoalSearch:
    """What the goal search found.

    Attributes:
        configurations: (k, n) usable goal configurations, nearest to the start first
            (k = 0 when ``reason`` is set).
        reason: "" when k > 0, else GOAL_UNREACHABLE or GOAL_IN_COLLISION.
        message: why, for a person (the best position / orientation error, or the contact).
        reached: IK solutions (of ``tried``) within the goal's tolerance.
        tried: IK seeds.
        position_errors, orientation_errors: (n_objectives,) m and rad of the closest IK
            solution when none reached the goal (GOAL_UNREACHABLE), else zeros.
        clearances: (k,) m, each configuration's clearance (inf without a sphere model).
        more: with ``lazy``, while only the start's solution was tried: the whole search
            (every seed), whose goals :func:`extended` adds after these; else None.
    """

    configurations: np.ndarray
    reason: str
    message: str
    position_errors: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    orientation_errors: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    clearances: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    more: Callable[[], GoalSearch] | None = None


def on_knots(o: obj.Objective, mask: np.ndarray) -> obj.Objective:
    """``o`` (fields (*batch, ...)) repeated on T knots (fields (*batch, T, ...)), its weights
    times ``mask`` (T, 1)."""
    knots = lambda a: np.broadcast_to(
        np.asarray(a)[..., None, :], (*a.shape[:-1], len(mask), a.shape[-1])
    )
    return dataclasses.replace(
        jax.tree.map(knots, o), weights=mask * np.asarray(o.weights, np.float64)[..., None, :]
    )


def limit_slack(planner: TrajectoryOptimizer, q: np.ndarray) -> np.ndarray:
    """(B,) bool for configurations q (B, n): every joint wider than 0.5 rad (not a gripper)
    at least LIMIT_SLACK from its limits. Such goals come first: a knot on a limit can only
    slide along it, and a goal pose that needs it to leave stays missed by a few hundredths
    of a radian."""
    lower, upper = planner.robot.limits.lower, planner.robot.limits.upper
    wide = (upper - lower) > 0.5
    return np.all((np.minimum(q - lower, upper - q) >= LIMIT_SLACK) | ~wide, axis=-1)


def distinct(q: np.ndarray) -> np.ndarray:
    """Indices of the rows of ``q`` (B, n) kept in order when each must differ from every
    one kept before it by more than DISTINCT in some joint."""
    kept: list[int] = []
    for i in range(len(q)):
        if not kept or np.all(np.max(np.abs(q[kept] - q[i]), axis=-1) > DISTINCT):
            kept.append(i)
    return np.asarray(kept, int)


def search(
    planner: TrajectoryOptimizer,
    objectives: tuple[obj.Objective, ...],
    start: np.ndarray,
    active_joints: tuple[str, ...] | None,
    world: col.World | None,
    contacts: col.ContactRules,
    moving: np.ndarray,
    rng: np.random.Generator,
    *,
    t_count: int,
    position_tolerance: float = 1e-3,
    orientation_tolerance: float = math.radians(1.0),
    lazy: bool = False,
    budget: PlanBudget | None = None,
) -> GoalSearch:
    """Goal configurations of ``objectives`` clear of obstacles and the robot itself: one
    batched IK solve from ``start`` (n,) and SEEDS - 1 random seeds; those away from the
    joint limits (:func:`limit_slack`) first, each group nearest to the start first. When no
    solution is clear, the REFINE clearest ones are pushed clear by the collision costs
    (:func:`push_clear`, ``t_count``: the plan's knots). The IK solves to GOAL_IK_SHARE of
    the plan's tolerances (``position_tolerance`` m, ``orientation_tolerance`` rad).

    ``lazy``: the solution from the start alone (:data:`FIRST_SEEDS`) when it is clear by
    GOAL_CLEARANCE and away from the limits, with the whole search left in ``more``;
    otherwise the whole search at once. The random seeds are drawn first either way
    (``rng`` ends in the same state). ``budget``: the plan's (:class:`PlanBudget`), which bounds the pushes."""
    start = np.asarray(start, np.float64)
    limits = planner.robot.limits  # finite: continuous joints read (-pi, pi)
    # The later rounds' seeds from a fixed stream: ``rng`` ends in the same state whatever
    # number of rounds the search needs.
    later = np.random.default_rng(ROUNDS).uniform(
        limits.lower, limits.upper, ((ROUNDS - 1) * SEEDS, len(start))
    )
    q0 = np.concatenate([rng.uniform(limits.lower, limits.upper, (SEEDS, len(start))), later])
    q0[0] = start
    if active_joints is not None:  # inactive joints keep the start's value
        fixed = ~np.isin(planner.robot.joint_names, tuple(active_joints))
        q0[:, fixed] = start[fixed]
    solve = functools.partial(
        _solutions, planner, objectives, world=world, contacts=contacts, moving=moving,
        active_joints=active_joints, position_tolerance=GOAL_IK_SHARE * position_tolerance,
        orientation_tolerance=GOAL_IK_SHARE * orientation_tolerance,
    )  # fmt: skip
    whole = lambda: _search(planner, objectives, start, world, contacts, moving, q0, solve,
                            t_count=t_count, budget=budget)  # fmt: skip
    if lazy:
        _, q, clearance = solve(q0[:FIRST_SEEDS])
        usable = (clearance >= GOAL_CLEARANCE) & limit_slack(planner, q)
        if usable.any():
            order = _ranked(planner, q[usable], start, clearance[usable])
            q, clearance = q[usable][order], clearance[usable][order]
            return GoalSearch(q, "", "", clearances=clearance, more=whole)
    return whole()


def _ranked(
    planner: TrajectoryOptimizer, q: np.ndarray, start: np.ndarray, clearance
) -> np.ndarray:
    """Indices of at most KEEP distinct goal configurations of q (B, n) with their
    ``clearance`` (B,): those at least GOAL_CLEARANCE clear when there are any (else all),
    those away from the joint limits first, each group nearest to ``start`` first."""
    order = np.flatnonzero(_thick_or_all(clearance))
    order = order[np.argsort(np.linalg.norm(q[order] - start, axis=-1), kind="stable")]
    order = order[np.argsort(~limit_slack(planner, q[order]), kind="stable")]
    return order[distinct(q[order])][:KEEP]


def _thick_or_all(clearance) -> np.ndarray:
    """(B,) bool: the goals at least GOAL_CLEARANCE clear, or all when none is."""
    thick = np.asarray(clearance) >= GOAL_CLEARANCE
    return thick if thick.any() else np.ones_like(thick)


def extended(found: GoalSearch) -> GoalSearch:
    """``found`` (a lazy search's first goals) followed by the distinct goals of the whole
    search (``found.more()``), up to KEEP; ``found`` itself when the whole search has
    nothing usable."""
    if found.more is None:
        return found
    whole = found.more()
    if whole.reason:
        return dataclasses.replace(found, more=None)
    q = np.concatenate([found.configurations, whole.configurations])
    clearance = np.concatenate([found.clearances, whole.clearances])
    kept = np.flatnonzero(_thick_or_all(clearance))
    order = kept[distinct(q[kept])][:KEEP]
    return dataclasses.replace(
        whole, configurations=q[order], clearances=clearance[order], more=None
    )


def _solutions(planner: TrajectoryOptimizer, objectives, q0, rows: int = 1, *, world, contacts,
               moving, **ik):  # fmt: skip
    """The goal IK from the seeds ``q0`` (B, n): its result, the solutions that reached the
    goal (k, n) and their clearances (k,) (``rows``: :meth:`TrajectoryOptimizer.clearances`)."""
    result = planner.ik.solve(objectives, seed=q0, **ik)
    q = np.asarray(result.q, np.float64)[np.asarray(result.success, bool)]
    return result, q, np.asarray(planner.clearances(q, world, contacts, moving, rows), np.float64)


def _search(
    planner: TrajectoryOptimizer,
    objectives: tuple[obj.Objective, ...],
    start: np.ndarray,
    world: col.World | None,
    contacts: col.ContactRules,
    moving: np.ndarray,
    q0: np.ndarray,
    solve: Callable,
    *,
    t_count: int,
    budget: PlanBudget | None,
) -> GoalSearch:
    """:func:`search` from the seeds of ``q0`` (ROUNDS * S, n) (row 0: the start), S at a
    time while no solution is clear."""
    seeds = len(q0) // ROUNDS
    empty = np.zeros((0, len(start)))
    found, clearances = [], []
    for at in range(0, len(q0), seeds):
        # On ``seeds`` rows: one program whatever number of seeds reached the goal,
        # compiled with the search (a lazy plan's first use of the whole search would
        # otherwise compile one per power of two of that number).
        ik, q, clearance = solve(q0[at : at + seeds], seeds)
        found.append(q)
        clearances.append(clearance)
        spent = budget is not None and budget.left() <= 0
        if (clearance >= 0).any() or (at == 0 and not len(q)) or spent:
            break  # a clear goal; or no seed reached the goal: unreachable, most likely
    tried = at + seeds
    q, clearance = np.concatenate(found), np.concatenate(clearances)
    if len(q) == 0:
        position, angle = np.asarray(ik.position_error), np.asarray(ik.orientation_error)
        best = int(np.argmin(np.max(position, axis=-1)))
        return GoalSearch(
            empty,
            GOAL_UNREACHABLE,
            f"no IK solution of the goal from {tried} seeds: the closest misses it by "
            f"{np.max(position[best]) * 1e3:.1f} mm / {np.degrees(np.max(angle[best])):.2f} deg",
            position[best],
            angle[best],
        )
    if not (clearance >= 0).any():
        order = np.argsort(-clearance, kind="stable")[:REFINE]
        pushed = push_clear(planner, q[order], objectives, world, contacts, moving, t_count, budget)
        if not len(pushed):
            spent = budget is not None and not budget.affords(t_count)
            cut = " (the pushes cut short by the plan's budget)" if spent else ""
            depth, side_a, side_b = planner.deepest_contact(q[order[0]], world, contacts, moving)
            return GoalSearch(
                empty,
                GOAL_IN_COLLISION,
                f"every one of {len(q)} IK solutions of the goal collides, also when "
                f"pushed clear{cut}; in the clearest, {side_a} and {side_b} overlap by "
                f"{-depth * 1e3:.1f} mm",
            )
        q = pushed
        clearance = np.asarray(planner.clearances(q, world, contacts, moving), np.float64)
    else:
        q, clearance = q[clearance >= 0], clearance[clearance >= 0]
    order = _ranked(planner, q, start, clearance)
    return GoalSearch(q[order], "", "", clearances=clearance[order])


def push_clear(
    planner: TrajectoryOptimizer,
    q: np.ndarray,
    objectives: tuple[obj.Objective, ...],
    world: col.World | None,
    contacts: col.ContactRules,
    moving: np.ndarray,
    t_count: int,
    budget: PlanBudget | None = None,
) -> np.ndarray:
    """(k, n): those of the goal configurations q (B, n) that the optimiser moves clear of
    obstacles while keeping the goal (IK with the collision costs), each push cut to the
    iterations ``budget`` (the plan's) leaves, none once not even one iteration fits.

    Each runs as a "path" of ``t_count`` copies of itself with every knot free, the goal at
    every knot and no smoothness cost: every knot is then the same IK problem, and the plan's
    own compiled program (same objectives, same knots, padded to the plan's rows) does it,
    where a one-knot problem would compile a program of its own, per obstacle bucket."""
    free = np.ones((t_count, len(q[0]))) * moving
    goal = tuple(on_knots(o, np.ones((t_count, 1))) for o in objectives)
    kept = []
    for c in q:
        if budget is not None and not budget.affords(t_count):
            break
        result = planner.optimize(
            np.repeat(c[None, None], t_count, 1),
            goal,
            world=world,
            free=free,
            weights=PUSH_WEIGHTS,
            margin=PUSH_MARGIN,
            contacts=contacts,
            rows=planner.plan_rows,  # the plan's program
            max_iterations=PUSH_ITERATIONS
            if budget is None
            else budget.iterations(t_count, PUSH_ITERATIONS),
        )
        if result.success:
            kept.append(result.path[-1])
    return np.asarray(kept).reshape(-1, len(q[0]))
