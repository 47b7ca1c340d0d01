"""The global planning step (pyroki_ros.planning.rrt: batched RRT-Connect over the sphere model):
paths around an obstacle the straight joint-space line hits, every edge checked independently
at a fine resolution (numpy float64 distances of test/collision_reference.py through
plan_check.SphereModel, never the planner's own checker); determinism for a seed; joint limits
and inactive joints; a bounded, explained failure when no path exists; samples near the tree
finding a passage along a joint limit that uniform samples miss; and plan() solving a
MotionBenchMaker problem that the local attempts alone did not (test/mbm_check.py)."""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import plan_check as check
import pytest

from pyroki_ros import Robot
from pyroki_ros import collision as col
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.planning import rrt
from pyroki_ros.planning.trajopt import TrajectoryOptimizer
from pyroki_ros.robots import urdf_path

MARGIN = 0.01
# A pillar in front of the Panda; the arm swings from one side of it to the other.
PILLAR = {"box_poses": [[1.0, 0, 0, 0, 0.5, 0.0, 0.4]], "box_half_extents": [[0.06, 0.06, 0.4]]}
TALL = {"box_poses": [[1.0, 0, 0, 0, 0.5, 0.0, 0.5]], "box_half_extents": [[0.06, 0.06, 2.0]]}
BASE = np.array([0.0, 0.3, 0.0, -1.8, 0.0, 2.1, 0.8, 0.04])


def _ends(angle: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    start, goal = BASE.copy(), BASE.copy()
    start[0], goal[0] = angle, -angle
    return start, goal


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    return robot, TrajectoryOptimizer(robot, spheres), check.SphereModel(spheres)


def _checker(planner, obstacles: dict, active: np.ndarray) -> rrt.Checker:
    world = World.create(**obstacles)
    return rrt.Checker(planner, world, col.DEFAULT_CONTACTS, active, MARGIN)


def _rrt(planner, checker, start, goal, active, seed: int, budget: float = 20.0):
    lower, upper = planner.robot.limits.lower, planner.robot.limits.upper
    rng = np.random.default_rng(seed)
    return rrt.rrt_connect(checker, start, goal[None], lower, upper, active, rng, budget=budget)


def _edge_points(path: np.ndarray, step: float):
    """Each edge of ``path`` as (m, n) points, both ends included, no joint moving more than
    ``step`` between two of them."""
    for a, b in itertools.pairwise(path):
        count = max(1, int(np.ceil(np.max(np.abs(b - a)) / step)))
        yield a + (np.arange(count + 1) / count)[:, None] * (b - a)


def _edges_clear(model, path: np.ndarray, obstacles: dict, step: float = 0.01) -> float:
    """Smallest reference clearance (world and self) along every edge of ``path``, each
    sampled with no joint moving more than ``step`` between points."""
    smallest = np.inf
    for points in _edge_points(path, step):
        for q in points:
            smallest = min(smallest, *model.clearances(q, obstacles))
    return smallest


def test_path_around_a_pillar_the_straight_line_hits(panda):
    robot, planner, model = panda
    start, goal = _ends()
    assert min(model.clearances(start, PILLAR)) > MARGIN
    assert min(model.clearances(goal, PILLAR)) > MARGIN
    assert _edges_clear(model, np.stack([start, goal]), PILLAR) < -0.05  # the line collides
    active = np.ones(robot.n_joints, bool)
    active[-1] = False  # the fingers stay
    checker = _checker(planner, PILLAR, active)
    found = _rrt(planner, checker, start, goal, active, seed=3)
    assert found.success and found.reason == "" and found.goal_index == 0
    path = found.path
    np.testing.assert_allclose(path[0], start)
    np.testing.assert_allclose(path[-1], goal)
    assert check.within_limits(path)
    np.testing.assert_array_equal(path[:, -1], start[-1])
    # Checked at 0.05 rad in float32 by the planner; here at 0.01 rad in float64: a few mm of
    # the margin may go between two of its points, never the whole margin.
    assert _edges_clear(model, path, PILLAR) > MARGIN - 0.005

    short = rrt.shortcut(checker, path, np.random.default_rng(0))
    length = lambda p: np.linalg.norm(np.diff(p, axis=0), axis=1).sum()
    assert length(short) <= length(path) + 1e-9
    np.testing.assert_allclose(short[[0, -1]], path[[0, -1]])
    assert _edges_clear(model, short, PILLAR) > MARGIN - 0.005

    knots = rrt.resample(short, 64)
    assert knots.shape == (64, robot.n_joints)
    for vertex in short:  # corners are knots: resampling cuts none
        assert np.min(np.max(np.abs(knots - vertex), axis=1)) < 1e-9
    assert _edges_clear(model, knots, PILLAR) > MARGIN - 0.005


def test_deterministic_and_inactive_joints_hold(panda):
    robot, planner, model = panda
    start, goal = _ends()
    goal[6] = 0.2  # joint 7 is held: the goal's value is not used
    active = np.ones(robot.n_joints, bool)
    active[[6, 7]] = False
    checker = _checker(planner, PILLAR, active)
    runs = [_rrt(planner, checker, start, goal, active, seed=11) for _ in range(2)]
    assert runs[0].success and runs[1].success
    np.testing.assert_array_equal(runs[0].path, runs[1].path)
    assert runs[0].rounds == runs[1].rounds
    path = runs[0].path
    np.testing.assert_array_equal(path[:, [6, 7]], np.broadcast_to(start[[6, 7]], (len(path), 2)))
    assert check.within_limits(path)
    assert _edges_clear(model, path, PILLAR) > MARGIN - 0.005
    # The whole pipeline too.
    kwargs = {"world": World.create(**PILLAR), "contacts": col.DEFAULT_CONTACTS, "margin": MARGIN}
    a, _ = rrt.global_path(planner, start, [goal], active, 32, budget=20.0, seed=5, **kwargs)
    b, _ = rrt.global_path(planner, start, [goal], active, 32, budget=20.0, seed=5, **kwargs)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[:, [6, 7]], np.broadcast_to(start[[6, 7]], (32, 2)))


def test_gives_up_within_its_budget_when_enclosed(panda):
    robot, planner, model = panda
    # Only joints 1 and 7 move and the pillar is too tall to pass: no path exists.
    start, goal = _ends()
    assert min(model.clearances(start, TALL)) > MARGIN
    assert min(model.clearances(goal, TALL)) > MARGIN
    active = np.zeros(robot.n_joints, bool)
    active[[0, 6]] = True
    checker = _checker(planner, TALL, active)
    checker.valid(start[None])  # compiled outside the timed budget
    budget = 0.5
    clock = time.perf_counter()
    found = _rrt(planner, checker, start, goal, active, seed=0, budget=budget)
    elapsed = time.perf_counter() - clock
    assert not found.success and found.path is None and found.goal_index == -1
    assert "no path found within" in found.reason
    assert found.rounds > 0
    assert elapsed < budget + 1.0  # one round past the budget at most, on a loaded CPU

    # A goal in collision is refused at once, with its reason.
    inside = goal.copy()
    inside[0] = 0.0  # the arm through the pillar
    found = _rrt(planner, checker, start, inside, active, seed=0, budget=budget)
    assert not found.success and "no goal configuration" in found.reason


def test_no_goal_configuration_is_an_answer_and_a_wrong_width_an_error(panda):
    robot, planner, _ = panda
    start, goal = _ends()
    active = np.ones(robot.n_joints, bool)
    world = World.create(**PILLAR)
    path, found = rrt.global_path(
        planner, start, [], active, 64, world=world, contacts=col.DEFAULT_CONTACTS,
        margin=MARGIN, budget=1.0,
    )  # fmt: skip
    assert path is None and not found.success and found.reason == "no goal configuration given"
    checker = _checker(planner, PILLAR, active)
    lower, upper = robot.limits.lower, robot.limits.upper
    rng = np.random.default_rng(0)
    found = rrt.rrt_connect(
        checker, start, np.zeros((0, robot.n_joints)), lower, upper, active, rng
    )
    assert not found.success and "no goal configuration" in found.reason
    with pytest.raises(ValueError, match=r"shape \(G, 8\)"):
        rrt.rrt_connect(checker, start, goal[:-1], lower, upper, active, rng)
    with pytest.raises(ValueError, match=r"shape \(G, 8\)"):
        rrt.global_path(
            planner, start, [goal[:-1]], active, 64, world=world,
            contacts=col.DEFAULT_CONTACTS, margin=MARGIN, budget=1.0,
        )  # fmt: skip


def test_clearances_refuse_another_width_and_answer_an_empty_batch(panda):
    """The check every sampling step shares: a configuration of another width was answered
    (JAX gathers past the end clamp) instead of refused."""
    robot, planner, _ = panda
    world = World.create(**PILLAR)
    moving = np.ones(robot.n_joints, bool)
    start, _ = _ends()
    clearance = planner.clearance_function(world, col.DEFAULT_CONTACTS, moving)
    assert clearance(start[None]).shape == (1,)
    assert clearance(np.zeros((0, robot.n_joints))).shape == (0,)
    for wrong in (start[None, :-1], start, np.zeros((2, 0))):
        with pytest.raises(ValueError, match=r"shape \(B, 8\)"):
            clearance(wrong)
    with pytest.raises(ValueError, match=r"shape \(B, 8\)"):
        planner.clearances(start[None, :-1], world, col.DEFAULT_CONTACTS, moving)


def test_hulls_as_bounding_boxes_are_the_conservative_rule(panda):
    """The global step checks the hand's hull as its bounding box by default (cheaper);
    ``bounding=False`` checks the hull. A bounding box contains its hull,
    so its clearance is never larger, and smaller where the hand or a finger is nearest (a
    slab under the hand, configurations around one above it)."""
    robot, _, _ = panda
    fine = TrajectoryOptimizer(robot, RobotSpheres.embedded("panda", robot, fine=True))
    start, _ = _ends()
    rng = np.random.default_rng(5)
    q = start + rng.uniform(-0.3, 0.3, (64, robot.n_joints)) * (np.arange(robot.n_joints) < 7)
    # A slab 14 cm under the hand's origin (about 3 cm under the finger tips) at the start.
    hand = robot.link_names.index("panda_hand")
    position = np.asarray(forward_kinematics(robot, start).translation()[hand])
    obstacle = {"box_poses": [[1.0, 0, 0, 0, *position + [0.0, 0.0, -0.14]]],
                "box_half_extents": [[0.2, 0.2, 0.01]]}  # fmt: skip
    world = World.create(**obstacle)
    active = np.ones(robot.n_joints, bool)
    boxes = rrt.Checker(fine, world, col.DEFAULT_CONTACTS, active, MARGIN).clearance(q)
    hulls = rrt.Checker(fine, world, col.DEFAULT_CONTACTS, active, MARGIN, bounding=False)
    hulls = hulls.clearance(q)
    assert np.all(boxes <= hulls + 1e-6)
    assert np.any(hulls - boxes > 1e-3)


@pytest.mark.slow  # the first plan compiles the optimiser: 30-130 s on a loaded 2-core CPU
def test_plan_with_the_global_step_solves_an_mbm_problem(panda):
    """bookshelf_small/5 of the generated set, planned with the global step on (the
    default): the planner's word and the independent check agree. (Its local attempts alone
    also solve it since goal configurations are searched clear of obstacles first; the
    global step's own paths are checked in the tests above.)"""
    import mbm_benchmark as mb
    import mbm_check as mc
    import mbm_problems as mp

    robot, planner, _ = panda
    problem = next(p for p in mp.load_problems(mp.GENERATED_SET) if p.name == "bookshelf_small/5")
    names = list(robot.joint_names)
    start = np.array(
        [dict(zip(mc.ARM_JOINTS, problem.start)).get(j, mc.FINGER_OPEN) for j in names]
    )
    from pyroki_ros import objectives as O

    plan = planner.plan(
        start,
        [O.pose(mc.GOAL_LINK, np.asarray(problem.goal_pose))],
        world=mb.to_world(problem),
        num_steps=64,
        active_joints=tuple(j for j in names if j in mc.ARM_JOINTS),
        # Its global step needs most of the 1 s default on a 2-core machine and stopped
        # short under load (the file failed now and then); 5 s leaves room.
        sampling_budget=5.0,
    )
    path = plan.path[:, [names.index(j) for j in mc.PANDA.joint_names]]
    verdict = mc.check_path(path, problem.goal_pose, problem.scene)
    assert plan.success, plan.message
    assert verdict.ok, verdict.reason


def test_without_a_sphere_model_nothing_collides_and_warm_up_runs(panda):
    """A planner without a sphere model: every clearance is inf (the check the global step,
    goal search and warm-up share raised on the missing model, warm_up with it), and its
    warm-up and a plan run."""
    from ik_reference import pose7

    from pyroki_ros import objectives as O

    robot = panda[0]
    planner = TrajectoryOptimizer(robot, None)
    start, goal = _ends()
    moving = np.ones(robot.n_joints, bool)
    clearance = planner.clearance_function(None, col.DEFAULT_CONTACTS, moving, bounding=True)
    assert np.all(clearance(np.stack([start, goal]), 64) == np.inf)
    target = [O.pose("panda_hand", pose7(check.link_pose(goal, "panda_hand")))]
    planner.warm_up(start, target, num_steps=32)
    assert planner.plan(start, target, num_steps=32).success


# A wall across the swing of joint 1 from +1.2 to -1.2 rad: most of the straight line is
# inside it (the pillar above blocks less than half of the line from +0.8 to -0.8).
WALL = {"box_poses": [[1.0, 0, 0, 0, 0.5, 0.0, 0.4]], "box_half_extents": [[0.06, 0.5, 0.4]]}


def _blocked_share(model, obstacles: dict, a: np.ndarray, b: np.ndarray) -> float:
    """Share of 32 evenly spaced configurations of the line a -> b that the reference model
    calls a collision (world or self)."""
    return float(np.mean([min(model.clearances(q, obstacles)) < 0 for q in np.linspace(a, b, 32)]))


def test_a_mostly_blocked_straight_line_goes_to_the_global_step_first(panda):
    """plan() tries the global step's path first when more than pipeline.BLOCKED of the
    straight joint-space line is inside obstacles, else the straight line first; both plans
    succeed and pass the independent check."""
    from pyroki_ros.planning import pipeline

    robot, planner, model = panda
    arm = robot.joint_names[:7]
    for obstacles, angle, global_first in ((WALL, 1.2, True), (PILLAR, 0.8, False)):
        start, goal = _ends(angle)
        share = _blocked_share(model, obstacles, start, goal)
        # Each scene sits clearly on its side of the rule (the planner's own spheres are
        # the same model in float32).
        assert (share > pipeline.BLOCKED + 0.05) if global_first else (share < 0.5), share
        lines: list[str] = []
        plan = planner.plan(
            start, goal, world=World.create(**obstacles), num_steps=32, active_joints=arm,
            progress=lines.append, sampling_budget=5.0,
        )  # fmt: skip
        assert plan.success, plan.message
        assert ("(global step)" in lines[0]) == global_first, lines
        assert _edges_clear(model, plan.path, obstacles) > -1e-3


def test_no_global_step_without_time_to_optimise_its_path(panda, monkeypatch):
    """The global step gets the budget left less GLOBAL_PATH_ITERATIONS iterations' time:
    where a plan's pace says that is nothing, the mostly blocked line above goes without it
    (its checks alone would spend the time the optimisation needs); with time, it goes first."""
    from pyroki_ros.planning import pipeline
    from pyroki_ros.planning.budget import Pace

    robot, planner, _ = panda
    start, goal = _ends(1.2)
    plan = lambda lines, **budget: planner.plan(
        start, goal, world=World.create(**WALL), num_steps=32, active_joints=robot.joint_names[:7],
        progress=lines.append, sampling_budget=5.0, **budget,
    )  # fmt: skip
    # 1 s per iteration: one fits in 5 s, GLOBAL_PATH_ITERATIONS do not.
    assert pipeline.GLOBAL_PATH_ITERATIONS * 1.0 > 5.0
    monkeypatch.setattr(planner, "pace", lambda t_count, world=None: Pace(0.0, 1.0))
    without: list[str] = []
    plan(without, timeout=5.0)
    assert without and not any("global step" in line for line in without), without
    monkeypatch.setattr(planner, "pace", lambda t_count, world=None: Pace(0.0, 1e-3))
    with_time: list[str] = []
    plan(with_time, timeout=5.0)
    assert "(global step)" in with_time[0], with_time


def test_the_first_start_path_is_cut_short_only_while_the_global_step_follows(panda, monkeypatch):
    """With the straight line through the wall tried first (BLOCKED raised past any share),
    its optimisation stops at ``first_path_iterations`` when the global step is to follow,
    whose path then plans; without a global step (sampling_budget 0) the same line gets the
    full iterations. The iteration counts are the plan's progress lines."""
    import re

    from pyroki_ros.planning import pipeline

    robot, planner, model = panda
    start, goal = _ends(1.2)
    monkeypatch.setattr(pipeline, "BLOCKED", 1.0)
    plan = lambda lines, **options: planner.plan(
        start, goal, world=World.create(**WALL), num_steps=32, active_joints=robot.joint_names[:7],
        progress=lines.append, first_path_iterations=3, **options,
    )  # fmt: skip
    iterations = lambda line: int(re.search(r"\((\d+) iterations", line).group(1))
    alone: list[str] = []
    plan(alone, sampling_budget=0.0)
    assert "global step" not in alone[0] and iterations(alone[0]) > 3, alone
    lines: list[str] = []
    result = plan(lines, sampling_budget=5.0)
    assert "global step" not in lines[0] and iterations(lines[0]) <= 3, lines
    assert "(global step)" in lines[1], lines
    assert result.success, result.message
    assert _edges_clear(model, result.path, WALL) > -1e-3
    with pytest.raises(ValueError, match="first_path_iterations"):
        planner.plan(start, goal, first_path_iterations=0)


# The elbow (panda_joint4, index 3) within SLAB rad of its upper limit, and the shoulder
# (index 0) may cross zero only with the upper arm (index 1) raised: a passage along a
# joint limit, as a hand deep in a shelf at the edge of the workspace has.
SLAB = 0.005
SLAB_ROUNDS = 100  # enough for the default sampler, not for uniform samples (asserted below)


class _LimitSlab(rrt.Checker):
    """The validity rule above, analytic (no obstacles): clearance in rad."""

    def __init__(self, planner, active):
        super().__init__(planner, None, col.DEFAULT_CONTACTS, active, 0.0)
        self.upper = float(planner.robot.limits.upper[3])

    def clearance(self, q):
        q = np.atleast_2d(q)
        self.count += len(q)
        slab = SLAB - (self.upper - q[:, 3])
        cross = np.maximum(np.abs(q[:, 0]) - 0.3, q[:, 1] - 0.5)
        return np.minimum(slab, cross)


def test_samples_near_the_tree_find_a_passage_along_a_joint_limit(panda):
    robot, planner, _ = panda
    active = np.ones(robot.n_joints, bool)
    active[-1] = False
    start, goal = BASE.copy(), BASE.copy()
    start[[0, 1, 3]] = (-0.8, 0.0, robot.limits.upper[3])
    goal[[0, 1, 3]] = (0.8, 0.0, robot.limits.upper[3])
    checker = _LimitSlab(planner, active)
    lower, upper = robot.limits.lower, robot.limits.upper

    def search(seed: int, **sampler):
        rng = np.random.default_rng(seed)
        return rrt.rrt_connect(checker, start, goal[None], lower, upper, active, rng,
                               budget=60.0, max_rounds=SLAB_ROUNDS, **sampler)  # fmt: skip

    for seed in range(3):
        found = search(seed)  # the default sampler
        assert found.success, found.reason
        # Every edge at 5 mrad steps, finer than the search's checks: inside the slab
        # throughout (a half-space: exact for straight edges between valid points); a corner
        # of the crossing cut by less than the search's edge resolution.
        for points in _edge_points(found.path, 0.005):
            assert np.all(upper[3] - points[:, 3] <= SLAB + 1e-12)
            assert checker.clearance(points).min() >= -rrt.RESOLUTION
        assert found.path[:, 1].max() > 0.5  # over the crossing, not through it
    # Uniform samples alone stall at the slab's face in as many rounds.
    assert not any(search(seed, local=0.0).success for seed in range(3))
    with pytest.raises(ValueError, match="local"):
        search(0, local=1.5)


@pytest.fixture(scope="module")
def thin7():
    """bookshelf_thin/7 of the second MotionBenchMaker set as the benchmark plans it: the
    problem, its optimiser, active joints (the arm), start and own goal configuration (1, n)."""
    from pathlib import Path

    import mbm_benchmark as mb
    import mbm_problems as mp

    (problem,) = [
        p
        for p in mp.load_problems(Path(mb.mc.DATA) / "generated_seed2.yaml")
        if p.name == "bookshelf_thin/7"
    ]
    planner = mb.make_planner(fine=True, buckets=mb.BUCKETS)
    optimizer = planner.optimizer
    active = np.isin(optimizer.robot.joint_names, planner.arm)
    start = mb.start_configuration(planner, problem)
    goal = mb.configurations(planner, problem.goal_ik[:1])
    return problem, optimizer, active, start, goal, mb.to_world(problem)


def _thin7_checker(thin7) -> rrt.Checker:
    """The global step's checker for ``thin7`` (margin 1 mm), relaxed near its start and goal
    as rrt.global_path relaxes it."""
    _, optimizer, active, start, goal, world = thin7
    checker = rrt.Checker(optimizer, world, col.DEFAULT_CONTACTS, active, 1e-3)
    ends = np.concatenate([start[None], goal])
    checker.relax_near(ends, checker.clearance(ends) - 1e-4)
    return checker


def test_a_goal_tree_stuck_deep_in_a_shelf_grows_out_of_it(thin7):
    """bookshelf_thin/7 of the second MotionBenchMaker set: its own goal configuration sits
    3 mm from a shelf board with two joints near their limits. With the trees strictly taking
    turns, the goal tree stayed at 50-120 nodes while the start tree grew thousands, and the
    search rarely found the way out in a plan's time. A tree under 1/BALANCE of the other's
    size grows every round from samples near its own nodes: every seed finds the path in
    fewer rounds than strict alternation needs (73-178 against 232-388 and one not found in
    600 when calibrated; rounds, not seconds, so the machine's speed does not matter)."""
    _, optimizer, active, start, goal, _ = thin7
    limits = optimizer.robot.limits
    rounds = 600

    def search(seed: int, balance: float) -> rrt.RRTResult:
        rng = np.random.default_rng(seed)
        checker = _thin7_checker(thin7)
        return rrt.rrt_connect(checker, start, goal, limits.lower, limits.upper, active, rng,
                               budget=1e3, max_rounds=rounds, balance=balance)  # fmt: skip

    for seed in range(3):
        balanced, alternating = search(seed, rrt.BALANCE), search(seed, math.inf)
        assert balanced.success, balanced.reason
        assert balanced.rounds < (alternating.rounds if alternating.success else rounds)
        np.testing.assert_allclose(balanced.path[[0, -1]], [start, goal[0]], atol=1e-12)
    with pytest.raises(ValueError, match="balance"):
        search(0, 0.5)


def test_retreats_from_the_goal_pose_start_the_goal_tree(thin7):
    """bookshelf_thin/7 of the second MotionBenchMaker set again: the goal tree starts with
    straight retreats of the hand from its goal pose (rrt.approaches). Each retreat point is
    checked independently: reference FK puts the hand at the goal pose moved along one axis
    of the goal frame by its step (1 mm / 1 deg); it stays within APPROACH_DEVIATION of its
    goal; every edge of the chain from the goal is clear of the shelf by the reference sphere
    distances at 0.01 rad. The way out of the bin (the hand's -z) is among them, and with
    the retreats the search needs fewer rounds over three seeds than without; the path still
    ends at the goal configuration. No pose objective: no retreats."""
    import jaxlie
    import mbm_problems as mp

    from pyroki_ros import objectives as O

    problem, optimizer, active, start, goal, _ = thin7
    boxes = [c for c in problem.cuboids if c.name != mp.STAND.name]  # the base stands on it
    obstacles = {
        "box_poses": [c.pose for c in boxes],
        "box_half_extents": [np.asarray(c.dims) / 2 for c in boxes],
        "cylinder_poses": [c.pose for c in problem.cylinders],
        "cylinder_radii": [c.radius for c in problem.cylinders],
        "cylinder_half_heights": [c.height / 2 for c in problem.cylinders],
    }

    target = np.asarray(problem.goal_pose, np.float64)
    chains = rrt.approaches(
        optimizer, _thin7_checker(thin7), (O.pose("panda_hand", target),), goal, active
    )
    assert chains
    goal_pose = jaxlie.SE3(target).as_matrix()
    model = check.SphereModel(optimizer.spheres)
    directions = set()
    for g, chain in chains:
        assert g == 0
        assert np.abs(chain - goal[0]).max() <= rrt.APPROACH_DEVIATION + 1e-9
        moved = []
        for q, step in zip(chain, rrt.APPROACH_STEPS):
            pose = check.link_pose(q, "panda_hand")
            offset = goal_pose[:3, :3].T @ (pose[:3, 3] - goal_pose[:3, 3])  # in the goal frame
            axis = np.argmax(np.abs(offset))
            expected = np.zeros(3)
            expected[axis] = math.copysign(step, offset[axis])
            assert np.linalg.norm(offset - expected) < 1e-3
            turn = pose[:3, :3].T @ goal_pose[:3, :3]
            assert math.acos(np.clip((np.trace(turn) - 1) / 2, -1, 1)) < math.radians(1.0)
            moved.append((axis, expected[axis] > 0))
        assert len(set(moved)) == 1  # one axis, one way
        directions.add(moved[0])
        assert _edges_clear(model, np.concatenate([goal, chain]), obstacles) > 0
    assert (2, False) in directions  # out of the bin: the hand's -z

    limits = optimizer.robot.limits

    def search(seed: int, approach) -> rrt.RRTResult:
        rng = np.random.default_rng(seed)
        checker = _thin7_checker(thin7)
        return rrt.rrt_connect(checker, start, goal, limits.lower, limits.upper, active, rng,
                               budget=1e3, max_rounds=600, approach=approach)  # fmt: skip

    with_retreats = [search(seed, chains) for seed in range(3)]
    without = [search(seed, ()) for seed in range(3)]
    for found in with_retreats:
        assert found.success, found.reason
        np.testing.assert_allclose(found.path[[0, -1]], [start, goal[0]], atol=1e-12)
    assert sum(f.rounds for f in with_retreats) < sum(
        f.rounds if f.success else 600 for f in without
    )
    position = O.position("panda_hand", target[4:])
    assert rrt.approaches(optimizer, _thin7_checker(thin7), (position,), goal, active) == []


def test_after_warm_up_a_plan_through_the_global_step_compiles_nothing():
    """``warm_up`` compiles what the global step needs, its retreats from the goal pose
    included (their IK settings, and the eager pose maths JAX compiles on a first call),
    also when its own plan does not go there: warmed up with a box out of the way (its plan
    takes the straight line), a pose-goal plan behind the wall (one box too: the same
    obstacle bucket), which goes to the global step first, spends no time compiling by
    JAX's own compile events (``budget.compile_seconds``; a fresh planner, so no other test
    warmed it)."""
    from ik_reference import pose7

    from pyroki_ros import objectives as O
    from pyroki_ros.planning.budget import compile_seconds

    robot = Robot.from_urdf(urdf_path("panda"))
    planner = TrajectoryOptimizer(robot, RobotSpheres.embedded("panda", robot))
    arm = robot.joint_names[:7]

    def hand_goal(q: np.ndarray) -> list:
        return [O.pose("panda_hand", pose7(check.link_pose(q, "panda_hand")))]

    lines: list[str] = []
    start, goal = _ends(0.8)
    aside = World.create(box_poses=[[1.0, 0, 0, 0, -0.8, 0.0, 0.1]], box_half_extents=[[0.05] * 3])
    planner.warm_up(start, hand_goal(goal), world=aside, num_steps=32, active_joints=arm,
                    progress=lines.append)  # fmt: skip
    assert "global step" not in " ".join(lines), lines
    start, goal = _ends(1.2)
    world = World.create(**WALL)  # made first: World.create converts on the device
    lines = []
    before = compile_seconds()
    plan = planner.plan(
        start, hand_goal(goal), world=world, num_steps=32, active_joints=arm,
        progress=lines.append, sampling_budget=5.0,
    )  # fmt: skip
    compiling = compile_seconds() - before
    assert plan.success, plan.message
    assert "(global step)" in lines[0], lines
    assert compiling == 0.0, f"{compiling:.3f} s compiling after warm_up"
