"""Allowed contacts (collision.checked_pairs, TrajectoryOptimizer.plan's ``contacts``): links
that no active joint moves are not checked against the world, allowed (link, obstacle) and
(link, link) pairs are not checked, everything else is; a start in collision is refused and
named. Paths are checked by the independent numpy sphere model (collision_reference), with
only the allowed contacts left out."""

from __future__ import annotations

import collision_reference as cref
import numpy as np
import plan_check as check
import pytest
from reference_fk import reference_fk

from pyroki_ros import Robot
from pyroki_ros.collision import ContactRules, RobotSpheres, World, checked_pairs
from pyroki_ros.planning.budget import Pace
from pyroki_ros.planning.trajopt import (
    GOAL_IN_COLLISION,
    START_IN_COLLISION,
    TIMED_OUT,
    TrajectoryOptimizer,
)
from pyroki_ros.robots import urdf_path

START = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.7, 0.02])
GOAL = START + np.array([0.5, 0.3, -0.2, 0.4, 0.2, -0.3, 0.3, 0.0])
# The stand under the robot: its top face at z = 0, where panda_link0 sits.
STAND = {"box_poses": [[1.0, 0, 0, 0, 0, 0, -0.1]], "box_half_extents": [[0.2, 0.2, 0.1]]}
HAND_LINKS = ("panda_hand", "panda_leftfinger", "panda_rightfinger")


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    return robot, spheres, TrajectoryOptimizer(robot, spheres), check.SphereModel(spheres)


def reference_clearance(model, path, obstacles: dict, skip) -> float:
    """Smallest sphere-obstacle clearance along the densely sampled path, pairs (sphere index,
    obstacle index) for which ``skip(link, obstacle)`` is true left out; independent code."""
    smallest = np.inf
    for q in check.dense(np.asarray(path), 10):
        c = cref.sphere_centers(model.urdf, model.links, model.centers, q)
        d = cref.world_distances(c, model.radii, obstacles)  # (S, O)
        for s, link in enumerate(model.links):
            for o in range(d.shape[1]):
                if not skip(link, o):
                    smallest = min(smallest, d[s, o])
    return smallest


def moved_by(robot, joints: set[str]) -> set[str]:
    """Links that a joint of ``joints`` moves, from the URDF tree walked here (reference)."""
    import yourdfpy

    urdf = yourdfpy.URDF.load(str(urdf_path("panda")), load_meshes=False)
    parent_joint = {j.child: j for j in urdf.robot.joints}
    moved = set()
    for link in robot.link_names:
        name = link
        while name in parent_joint:
            joint = parent_joint[name]
            mimic = joint.mimic.joint if joint.mimic is not None else None
            if joint.name in joints or mimic in joints:
                moved.add(link)
                break
            name = joint.parent
    return moved


def test_checked_pairs_follow_the_rule(panda):
    robot, spheres, _, _ = panda
    world = World.create(
        sphere_centers=[[0.5, 0, 0.5], [0.0, 0.5, 0.5]],
        sphere_radii=[0.05, 0.05],
        **STAND,
        names=["cup", "ball", "stand"],
    )
    active = {"panda_joint5", "panda_joint6", "panda_joint7"}
    moving = np.isin(robot.joint_names, sorted(active))
    rules = ContactRules(allowed=(("cup", "panda_hand"), ("panda_link6", "panda_hand")))
    world_ok, self_ok = checked_pairs(robot, spheres, world, rules, moving)
    moved = moved_by(robot, active)
    for s, link in enumerate(spheres.link_names):
        for o, name in enumerate(world.names):
            expected = link in moved and not (link == "panda_hand" and name == "cup")
            assert world_ok[s, o] == expected, (link, name)
    for p, (i, j) in enumerate(np.asarray(spheres.self_pairs)):
        a, b = spheres.link_names[i], spheres.link_names[j]
        expected = (a in moved or b in moved) and {a, b} != {"panda_link6", "panda_hand"}
        assert self_ok[p] == expected, (a, b)
    # Everything checked when asked, and unknown names are errors that name them.
    world_ok, self_ok = checked_pairs(robot, spheres, world, ContactRules(check_fixed_links=True))
    assert world_ok.all() and self_ok.all()
    with pytest.raises(ValueError, match="'mug'"):
        checked_pairs(robot, spheres, world, ContactRules(allowed=(("panda_hand", "mug"),)))
    with pytest.raises(ValueError, match="two obstacles"):
        checked_pairs(robot, spheres, world, ContactRules(allowed=(("cup", "ball"),)))


def test_a_robot_on_its_stand_plans_and_the_stand_counts_only_when_asked(panda):
    _, _, planner, model = panda
    world = World.create(**STAND, names=["stand"])
    d, link, other = planner.deepest_contact(START, world, ContactRules(check_fixed_links=True))
    assert d < 0 and link == "panda_link0" and other == "stand"  # the base sits in it

    plan = planner.plan(START, GOAL, world=world, num_steps=32)
    assert plan.success, plan.message
    base = lambda link, o: link == "panda_link0"
    assert reference_clearance(model, plan.path, STAND, base) >= 0

    refused = planner.plan(
        START, GOAL, world=world, num_steps=32, contacts=ContactRules(check_fixed_links=True)
    )
    assert not refused.success and refused.reason == START_IN_COLLISION
    assert "panda_link0" in refused.message and "stand" in refused.message


def test_a_start_in_collision_is_named_and_an_allowed_contact_plans_out_of_it(panda):
    _, _, planner, model = panda
    hand = reference_fk(model.urdf, START)["panda_hand"]
    between_fingers = hand[:3, :3] @ [0, 0, 0.1] + hand[:3, 3]
    cup = {"sphere_centers": [between_fingers], "sphere_radii": [0.03]}
    wall = {"box_poses": [[1.0, 0, 0, 0, 0, -0.7, 0.5]], "box_half_extents": [[0.5, 0.02, 0.5]]}
    world = World.create(**cup, **wall, names=["cup", "wall"])

    refused = planner.plan(START, GOAL, world=world, num_steps=32)
    assert refused.reason == START_IN_COLLISION and not refused.success
    assert "cup" in refused.message and any(h in refused.message for h in HAND_LINKS)

    allowed = ContactRules(allowed=tuple((h, "cup") for h in HAND_LINKS))
    plan = planner.plan(START, GOAL, world=world, num_steps=32, contacts=allowed)
    assert plan.success, plan.message
    obstacles = {**cup, **wall}  # cup first (spheres), then the wall (boxes)
    hand_in_cup = lambda link, o: link == "panda_link0" or (link in HAND_LINKS and o == 0)
    assert reference_clearance(model, plan.path, obstacles, hand_in_cup) >= 0
    # Not allowed: the hand against the wall, the arm against the cup.
    assert reference_clearance(model, plan.path, wall, lambda link, o: link == "panda_link0") >= 0


def test_a_start_in_collision_is_planned_out_of_when_asked(panda):
    """``start_collision="escape"``: a ball 5 mm into the hand at the start. The plan starts at
    exactly the given start, its first segment is never deeper in the ball than the start
    (by the reference model, densely), every later segment is clear; a hand deep inside a
    big ball finds no clear configuration within the escape's reach and is refused."""
    _, _, planner, model = panda
    hand = reference_fk(model.urdf, START)["panda_hand"]
    side = hand[:3, 0]  # the hand's x axis: across the palm, away from the fingers

    def ball_at(depth: float) -> dict:
        # Moved towards the hand until it overlaps by ``depth`` (steps of the clearance).
        center = hand[:3, 3] + 0.2 * side
        for _ in range(20):
            world = World.create(sphere_centers=[center], sphere_radii=[0.04], names=["ball"])
            gap, _, _ = planner.deepest_contact(START, world, ContactRules())
            center = center - (gap + depth) * side
        return {"sphere_centers": [center], "sphere_radii": [0.04]}

    ball = ball_at(0.005)
    world = World.create(**ball, names=["ball"])
    refused = planner.plan(START, GOAL, world=world, num_steps=32)
    assert refused.reason == START_IN_COLLISION and "ball" in refused.message
    with pytest.raises(ValueError, match="start_collision"):
        planner.plan(START, GOAL, world=world, num_steps=32, start_collision="ignore")

    plan = planner.plan(START, GOAL, world=world, num_steps=32, start_collision="escape")
    assert plan.success, plan.message
    assert "start in collision" in plan.message and "ball" in plan.message
    np.testing.assert_array_equal(plan.path[0], START)
    base = lambda link, o: link == "panda_link0"
    at_start = reference_clearance(model, plan.path[:1], ball, base)
    assert -0.0055 < at_start < -0.0045
    assert reference_clearance(model, plan.path[:2], ball, base) >= at_start - 1e-6
    assert reference_clearance(model, plan.path[1:], ball, base) >= 0

    deep = World.create(sphere_centers=[hand[:3, 3]], sphere_radii=[0.2], names=["ball"])
    stuck = planner.plan(START, GOAL, world=deep, num_steps=32, start_collision="escape")
    assert stuck.reason == START_IN_COLLISION and not stuck.success
    assert "within 0.2 rad of it no clear configuration" in stuck.message
    np.testing.assert_array_equal(stuck.path, np.broadcast_to(START, stuck.path.shape))


def test_links_of_held_joints_do_not_count_against_obstacles(panda):
    _, _, planner, model = panda
    link3 = reference_fk(model.urdf, START)["panda_link3"]
    world = World.create(sphere_centers=[link3[:3, 3]], sphere_radii=[0.05], names=["post"])
    wrist = ("panda_joint5", "panda_joint6", "panda_joint7")
    goal = START.copy()
    goal[4:7] += [0.3, -0.3, 0.3]
    refused = planner.plan(START, goal, world=world, num_steps=16)
    assert refused.reason == START_IN_COLLISION and "post" in refused.message
    plan = planner.plan(START, goal, world=world, num_steps=16, active_joints=wrist)
    assert plan.success, plan.message
    np.testing.assert_allclose(plan.path[:, :4], np.broadcast_to(START[:4], (16, 4)), atol=1e-9)


def test_a_goal_in_collision_is_refused_and_a_budget_cuts_the_optimisation(panda):
    """A goal configuration whose fingers enclose a post: GOAL_IN_COLLISION at once, naming
    the post, no start path optimised. A clear goal behind a ball on the joint-space line:
    planned without a budget; with 1 ms the first optimisation is cut to the iterations
    that fit (the pace of the plans before) and the plan says so (TIMED_OUT) with the best
    path it had."""
    _, _, planner, model = panda
    hand = reference_fk(model.urdf, GOAL)["panda_hand"]
    between_fingers = hand[:3, :3] @ [0, 0, 0.1] + hand[:3, 3]
    world = World.create(sphere_centers=[between_fingers], sphere_radii=[0.03], names=["post"])
    tried: dict[str, list] = {"refused": [], "unbounded": [], "cut": []}
    plan = lambda name, goal, **budget: planner.plan(
        START, goal, world=world, num_steps=16, sampling_budget=0.0,
        progress=tried[name].append, **budget,
    )  # fmt: skip
    refused = plan("refused", GOAL)
    assert refused.reason == GOAL_IN_COLLISION and "post" in refused.message
    assert not refused.success and tried["refused"] == []

    swing = START + np.array([1.2, 0, 0, 0, 0, 0, 0, 0.0])
    middle = reference_fk(model.urdf, 0.5 * (START + swing))["panda_hand"][:3, 3]
    world = World.create(sphere_centers=[middle], sphere_radii=[0.08], names=["ball"])
    for _ in range(2):  # the first compiles, the second measures the pace
        unbounded = plan("unbounded", swing)
        assert unbounded.success, unbounded.message
    cut = plan("cut", swing, timeout=1e-3)
    assert not cut.success and cut.reason == TIMED_OUT
    assert "budget" in cut.message and cut.path.shape == unbounded.path.shape
    assert len(tried["cut"]) == 1 and cut.iterations < unbounded.iterations


def test_a_plan_starts_no_optimisation_its_budget_cannot_pay_for(panda, monkeypatch):
    """Each optimisation costs a fixed part besides its iterations (the planner's ``pace``).
    With a pace whose fixed part alone exceeds the budget, the plan runs its first start path
    (one iteration: a path to answer with) and then stops at once, TIMED_OUT, long before
    the budget's end, instead of starting more optimisations that would overrun it."""
    _, _, planner, model = panda
    swing = START + np.array([1.2, 0, 0, 0, 0, 0, 0, 0.0])
    middle = reference_fk(model.urdf, 0.5 * (START + swing))["panda_hand"][:3, 3]
    world = World.create(sphere_centers=[middle], sphere_radii=[0.08], names=["ball"])
    tried: list[str] = []
    plan = lambda **budget: planner.plan(
        START, swing, world=world, num_steps=16, progress=tried.append, **budget
    )
    assert plan().success  # compiles; the ball is passable without a budget
    tried.clear()
    monkeypatch.setattr(planner, "pace", lambda t_count, world=None: Pace(8.0, 0.5))
    cut = plan(timeout=4.0)
    assert not cut.success and cut.reason == TIMED_OUT and "budget" in cut.message
    assert len(tried) == 1 and "(1 iterations" in tried[0], tried
    assert cut.iterations == 1 and cut.solve_seconds < 2.0


def test_a_lazy_goal_search_offers_the_starts_own_solution_first(panda):
    """``goals.search(lazy=True)``: the IK solution from the start alone when it is clear,
    the whole search kept for later (``extended`` puts it after that first goal); when that
    solution is in collision, the whole search at once. Every goal reaches the pose (reference
    FK) and is clear (reference sphere distances)."""
    import jaxlie

    from pyroki_ros import objectives as obj
    from pyroki_ros.planning import goals

    robot, _, planner, model = panda
    hand = reference_fk(model.urdf, GOAL)["panda_hand"]
    target = obj.pose("panda_hand", jaxlie.SE3.from_matrix(hand).wxyz_xyz)
    moving = robot.active_mask(None)

    def search(world, obstacles):
        found = goals.search(
            planner, (target,), START, None, world, ContactRules(), moving,
            np.random.default_rng(0), t_count=16, lazy=True,
        )  # fmt: skip
        for q in found.configurations:
            reached = reference_fk(model.urdf, q)["panda_hand"]
            assert np.linalg.norm(reached[:3, 3] - hand[:3, 3]) < 1e-3
            if obstacles:
                c = cref.sphere_centers(model.urdf, model.links, model.centers, q)
                assert cref.world_distances(c, model.radii, obstacles).min() >= -1e-6
        return found

    first = search(None, {})
    assert len(first.configurations) == 1 and first.more is not None
    more = goals.extended(first)
    assert more.more is None and 1 < len(more.configurations) <= goals.KEEP
    np.testing.assert_array_equal(more.configurations[0], first.configurations[0])

    # A ball on the first solution's elbow: that solution collides, the whole search answers.
    elbow = reference_fk(model.urdf, first.configurations[0])["panda_link4"][:3, 3]
    ball = {"sphere_centers": [elbow], "sphere_radii": [0.06]}
    blocked = search(World.create(**ball), ball)
    assert blocked.more is None and len(blocked.configurations) >= 1
    assert np.abs(blocked.configurations - first.configurations[0]).max() > goals.DISTINCT


def test_the_plan_budget_bounds_the_goal_search(panda):
    """A pose goal whose every IK solution encloses a post with the (held) fingers: the goal
    search pushes its clearest solutions, fails, and answers GOAL_IN_COLLISION; with a budget
    spent before the pushes, the same answer sooner, saying the pushes were cut short."""
    import jaxlie

    from pyroki_ros import objectives as obj

    robot, _, planner, model = panda
    hand = reference_fk(model.urdf, GOAL)["panda_hand"]
    between_fingers = hand[:3, :3] @ [0, 0, 0.1] + hand[:3, 3]
    world = World.create(sphere_centers=[between_fingers], sphere_radii=[0.03], names=["post"])
    goal = [obj.pose("panda_hand", jaxlie.SE3.from_matrix(hand).wxyz_xyz)]
    arm = tuple(robot.joint_names[:7])
    plan = lambda **budget: planner.plan(
        START, goal, world=world, num_steps=16, sampling_budget=0.0, active_joints=arm,
        **budget,
    )  # fmt: skip
    for _ in range(2):  # the first compiles
        full = plan()
    assert full.reason == GOAL_IN_COLLISION and "post" in full.message
    assert "cut short" not in full.message
    cut = plan(timeout=1e-3)
    assert cut.reason == GOAL_IN_COLLISION and "cut short" in cut.message
    assert cut.solve_seconds < full.solve_seconds


@pytest.mark.parametrize("start_batches", [None, (8,)], ids=["device-default", "eight-at-once"])
def test_after_warm_up_plans_among_other_obstacle_counts_compile_nothing(start_batches):
    """``warm_up`` on a scene compiles what later plans among the same kinds of obstacles
    need, other counts in the same buckets included: a plan that succeeds and one whose goal
    collides (its named contact, the whole goal search, the one-configuration pushes) spend
    no time compiling, by JAX's own compile events. Also with start paths eight at once
    (``start_batches=(8,)``, once a GPU's default), where the pushes and refinements optimise
    one path at a time: a program of another batch size (on an H200 the first such plan
    spent 13-16 s compiling, docs/benchmarks/gpu.md)."""
    import jax

    from pyroki_ros.collision import COARSE_WORLD_BUCKETS

    robot = Robot.from_urdf(urdf_path("panda"))
    planner = TrajectoryOptimizer(
        robot, RobotSpheres.embedded("panda", robot), obstacle_buckets=COARSE_WORLD_BUCKETS
    )
    if start_batches is not None:
        planner.start_batches = start_batches
    compiled = []

    def listen(event: str, seconds: float, **_) -> None:
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    from ik_reference import pose7

    from pyroki_ros import objectives as O

    start, target = START, pose7(check.link_pose(GOAL, "panda_hand"))

    def boxes(count: int, blocking: bool = False) -> World:
        places = [[-0.6, y, 0.1] for y in np.linspace(-0.7, 0.7, count)]
        sizes = [[0.05, 0.05, 0.05]] * count
        if blocking:  # a small box at the goal's hand: every goal configuration collides
            places, sizes = places + [list(target[4:])], sizes + [[0.02, 0.02, 0.02]]
        return World.create(
            box_poses=[[1.0, 0.0, 0.0, 0.0, *p] for p in places], box_half_extents=sizes
        )

    goal_objective = [O.pose("panda_hand", target)]
    planner.warm_up(start, goal_objective, world=boxes(3), num_steps=32)
    scenes = boxes(9), boxes(6, blocking=True)  # made first: World.create converts on the device
    before = len(compiled)
    try:
        clear = planner.plan(start, goal_objective, world=scenes[0], num_steps=32)
        blocked = planner.plan(start, goal_objective, world=scenes[1], num_steps=32)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert clear.success, clear.message
    assert not blocked.success and "IK solutions of the goal collide" in blocked.message, (
        blocked.message
    )
    assert len(compiled) == before, f"{len(compiled) - before} programs compiled after warm_up"
