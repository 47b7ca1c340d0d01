"""End to end: ``~/plan_trajectory`` and ``~/retarget_motion`` of the real node (a subprocess),
called over DDS. Answers are checked independently: clearances by the numpy reference at a
dense interpolation of the returned points, goals by the reference FK, the timing by finite
differences of positions and time_from_start. Bad requests get their error codes and the node
keeps serving."""

from __future__ import annotations

import math
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import collision_reference
import plan_check as check
import scenes  # bench/scenes.py: random planning scenes
from builtin_interfaces.msg import Duration
from geometry_msgs.msg import Point, Pose, PoseStamped
from node_helpers import panda_node, pose_stamped
from pyroki_ros.msg import CollisionObject, ErrorCode, IKObjective, Keypoints
from pyroki_ros.srv import ApplyPlanningScene, PlanTrajectory, RetargetMotion
from reference_fk import make_transform, pose_errors, quat_wxyz_to_matrix
from sensor_msgs.msg import JointState
from shape_msgs.msg import Plane, SolidPrimitive
from trajectory_msgs.msg import JointTrajectory

from pyroki_ros import Robot
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path

JOINTS = check.JOINTS
STATE = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])
TRAJECTORY_TOPIC = "/joint_trajectory_controller/joint_trajectory"
VELOCITY_SCALING = 0.5  # config/panda.yaml
ACCELERATION = 5.0 * 0.5  # acceleration_limit x acceleration_scaling
URDF_VELOCITY = np.array(
    [
        float(j.find("limit").get("velocity"))
        for j in ET.fromstring(check.PANDA_URDF).iter("joint")
        if j.get("name") in JOINTS
    ]
)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with panda_node(
        tmp_path_factory, "test_node_planning", state=STATE, params=("allow_execute:=true",)
    ) as env:
        env.trajectories = []
        lock = threading.Lock()

        def record(msg):
            with lock:
                env.trajectories.append(msg)

        env.session.node.create_subscription(JointTrajectory, TRAJECTORY_TOPIC, record, 10)
        yield env


def joint_state(q) -> JointState:
    return JointState(name=list(JOINTS), position=[float(v) for v in q])


def obstacle_messages(world: World):
    shapes, poses = [], []
    for c, r in zip(np.asarray(world.sphere_centers), np.asarray(world.sphere_radii)):
        shapes.append(SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[float(r)]))
        t = np.eye(4)
        t[:3, 3] = c
        poses.append(pose_stamped(t))
    for p, h in zip(np.asarray(world.box_poses), np.asarray(world.box_half_extents)):
        shapes.append(SolidPrimitive(type=SolidPrimitive.BOX, dimensions=(2 * h).tolist()))
        poses.append(pose_stamped(make_transform(quat_wxyz_to_matrix(p[:4]), p[4:])))
    return shapes, poses


def seconds(duration) -> float:
    return duration.sec + duration.nanosec * 1e-9


def check_timing(trajectory: JointTrajectory, start: np.ndarray):
    """Monotonic times from 0, the first point at the start state, and finite differences of
    the returned positions within the scaled limits."""
    assert list(trajectory.joint_names) == JOINTS
    times = np.array([seconds(p.time_from_start) for p in trajectory.points])
    q = np.array([p.positions for p in trajectory.points])
    assert times[0] == 0 and np.all(np.diff(times) > 0)
    np.testing.assert_allclose(q[0], start, atol=1e-6)
    assert np.allclose(trajectory.points[0].velocities, 0)
    velocity = np.diff(q, axis=0) / np.diff(times)[:, None]
    limits = URDF_VELOCITY * VELOCITY_SCALING
    assert np.all(np.abs(velocity) <= limits * (1 + 1e-6)), np.abs(velocity / limits).max()
    dt = np.diff(times).mean()
    held = np.concatenate([q[:1], q, q[-1:]])
    acceleration = (held[2:] - 2 * held[1:-1] + held[:-2]) / dt**2
    assert np.all(np.abs(acceleration) <= ACCELERATION * (1 + 1e-6))
    return q


def test_plan_around_obstacles_is_collision_free_timed_and_executed(node):
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    model = check.SphereModel(spheres)
    rng = np.random.default_rng(21)
    world = scenes.random_obstacles(rng, 6)
    case = scenes.feasible_cases(robot, spheres, world, "panda_hand", 1, rng)[0]
    shapes, poses = obstacle_messages(world)
    target = make_transform(quat_wxyz_to_matrix(case.goal_pose[:4]), case.goal_pose[4:])
    floor = Plane(coef=[0.0, 0.0, 1.0, 0.4])  # z < -0.4 is solid: below every link
    before = len(node.trajectories)
    response = node.call(
        PlanTrajectory,
        "plan_trajectory",
        PlanTrajectory.Request(
            start_state=joint_state(case.start),
            goal_objectives=[
                IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
            ],
            obstacles=shapes,
            obstacle_poses=poses,
            half_spaces=[floor],
            execute=True,
        ),
        timeout=300.0,
    )
    assert response.success, response.message
    assert response.error_code.val == ErrorCode.SUCCESS
    q = check_timing(response.trajectory, case.start)
    assert len(q) == 64  # config/panda.yaml trajectory_num_steps
    assert check.within_limits(q)
    obstacles = {name: np.asarray(getattr(world, name)) for name in World.__dataclass_fields__}
    obstacles["halfspace_normals"] = np.array([[0.0, 0.0, 1.0]])
    obstacles["halfspace_offsets"] = np.array([0.4])
    world_min, self_min = check.path_clearance(model, q, obstacles, samples=10)
    assert world_min > 0 and self_min > 0, (world_min, self_min)
    assert response.min_obstacle_distance > 0
    p_err, r_err = pose_errors(target, check.link_pose(q[-1], "panda_hand"))
    assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3
    assert response.goal_position_errors[0] <= 1e-3
    assert response.executed
    deadline = time.monotonic() + 10
    while len(node.trajectories) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    published = node.trajectories[-1]
    assert len(published.points) == len(q)
    np.testing.assert_allclose(published.points[-1].positions, q[-1])


def test_joint_goal_plan_with_defaults_starts_at_joint_states(node):
    goal = STATE + np.array([0.6, 0.3, -0.2, 0.4, 0.2, -0.3, 0.2, 0.0])
    response = node.call(
        PlanTrajectory,
        "plan_trajectory",
        PlanTrajectory.Request(goal_state=joint_state(goal), num_steps=20),
        timeout=300.0,
    )
    assert response.success, response.message
    q = check_timing(response.trajectory, STATE)  # empty start_state = latest /joint_states
    assert len(q) == 20
    np.testing.assert_allclose(q[-1], goal, atol=1e-6)
    assert not response.executed
    assert math.isinf(response.min_obstacle_distance)


def test_a_goal_inside_an_obstacle_or_out_of_reach_answers_at_once_with_its_code(node):
    """A pose goal whose hand would sit inside a named box: GOAL_IN_COLLISION naming the box
    (every configuration reaching that pose puts the hand in the box: the box is 20 cm wide
    around the hand's goal point). A pose 3 m away: NO_SOLUTION. Both without optimising
    paths: answered well inside the node's 5 s planning budget."""
    target = make_transform(np.diag([1.0, -1.0, -1.0]), [0.45, -0.3, 0.25])  # hand down
    crate = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.2, 0.2, 0.2])
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_objectives=[
            IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
        ],
        num_steps=20,
        obstacles=[crate],
        obstacle_poses=[pose_stamped(make_transform(np.eye(3), [0.45, -0.3, 0.25]))],
        obstacle_names=["crate"],
    )
    node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)  # compiles
    started = time.perf_counter()
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert time.perf_counter() - started < 2.0
    assert response.error_code.val == ErrorCode.GOAL_IN_COLLISION, response.message
    assert "crate" in response.message and not response.success

    far = make_transform(np.eye(3), [3.0, 0.0, 0.5])
    request.goal_objectives = [
        IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(far))
    ]
    request.obstacles, request.obstacle_poses, request.obstacle_names = [], [], []
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.error_code.val == ErrorCode.NO_SOLUTION, response.message
    assert "no IK solution" in response.message and not response.success
    assert response.goal_position_errors[0] > 1.5  # the closest IK answer, reference: 3 m out


def test_a_robot_on_its_stand_plans_and_contacts_follow_the_request(node):
    """The stand under panda_link0 (a box whose top is the base's floor) does not count: the
    base cannot move. Asked to check fixed links, the start is refused naming both; a start
    whose hand is inside a named box is refused unless that contact is allowed."""
    goal = STATE + np.array([0.5, 0.3, -0.2, 0.4, 0.2, -0.3, 0.2, 0.0])
    stand = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.4, 0.4, 0.2])
    stand_pose = pose_stamped(make_transform(np.eye(3), [0.0, 0.0, -0.1]))
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_state=joint_state(goal),
        num_steps=20,
        obstacles=[stand],
        obstacle_poses=[stand_pose],
        obstacle_names=["robot_stand"],
    )
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.success, response.message
    q = np.array([p.positions for p in response.trajectory.points])
    model = check.SphereModel(RobotSpheres.embedded("panda", Robot.from_urdf(urdf_path("panda"))))
    box = {"box_poses": [[1.0, 0, 0, 0, 0, 0, -0.1]], "box_half_extents": [[0.2, 0.2, 0.1]]}
    arm = [i for i, link in enumerate(model.links) if link != "panda_link0"]
    for config in check.dense(q, 5):  # independent: every sphere but the base's is clear
        c = collision_reference.sphere_centers(model.urdf, model.links, model.centers, config)
        assert collision_reference.world_distances(c[arm], model.radii[arm], box).min() >= 0

    request.check_fixed_links = True
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.error_code.val == ErrorCode.START_IN_COLLISION, response.message
    assert "panda_link0" in response.message and "robot_stand" in response.message

    hand = check.link_pose(STATE, "panda_hand")
    held = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.03])
    held_pose = pose_stamped(make_transform(np.eye(3), hand[:3, :3] @ [0, 0, 0.1] + hand[:3, 3]))
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_state=joint_state(goal),
        num_steps=20,
        obstacles=[stand, held],
        obstacle_poses=[stand_pose, held_pose],
        obstacle_names=["robot_stand", "held_ball"],
    )
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.error_code.val == ErrorCode.START_IN_COLLISION, response.message
    assert "held_ball" in response.message
    fingers = ["panda_hand", "panda_leftfinger", "panda_rightfinger"]
    request.allowed_contact_links = fingers
    request.allowed_contact_others = ["held_ball"] * 3
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.success, response.message
    request.allowed_contact_others = ["no_such_thing"] * 3
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.error_code.val == ErrorCode.INVALID_REQUEST
    assert "no_such_thing" in response.message


def test_the_planning_scene_is_kept_applied_all_or_none_and_used_by_plans(node):
    goal = STATE + np.array([0.5, 0.3, -0.2, 0.4, 0.2, -0.3, 0.2, 0.0])
    hand = check.link_pose(STATE, "panda_hand")
    box = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.1, 0.1])
    add = CollisionObject(id="crate", primitive=box, operation=CollisionObject.ADD)
    add.pose = pose_stamped(hand).pose  # around the hand: the start collides with it
    response = node.call(
        ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[add])
    )
    assert response.success and list(response.object_ids) == ["crate"], response.message

    plan = PlanTrajectory.Request(
        start_state=joint_state(STATE), goal_state=joint_state(goal), num_steps=20
    )
    response = node.call(PlanTrajectory, "plan_trajectory", plan, timeout=300.0)
    assert response.error_code.val == ErrorCode.START_IN_COLLISION, response.message
    assert "crate" in response.message

    # All or none: a good move and a bad one (unknown id) change nothing.
    away = CollisionObject(id="crate", operation=CollisionObject.MOVE)
    away.pose = pose_stamped(make_transform(np.eye(3), [0.0, -0.6, 0.3])).pose
    ghost = CollisionObject(id="ghost", operation=CollisionObject.MOVE)
    response = node.call(
        ApplyPlanningScene,
        "apply_planning_scene",
        ApplyPlanningScene.Request(objects=[away, ghost]),
    )
    assert response.error_code.val == ErrorCode.INVALID_REQUEST and "ghost" in response.message
    assert list(response.object_ids) == ["crate"]
    response = node.call(PlanTrajectory, "plan_trajectory", plan, timeout=300.0)
    assert response.error_code.val == ErrorCode.START_IN_COLLISION

    # The move alone, sent on the topic; a second object too.
    publisher = node.session.node.create_publisher(
        CollisionObject, "/pyroki_ros_node/collision_objects", 10
    )
    ball = CollisionObject(id="ball", operation=CollisionObject.ADD)
    ball.primitive = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.05])
    ball.pose = pose_stamped(make_transform(np.eye(3), [0.5, 0.5, 0.9])).pose
    deadline = time.monotonic() + 30
    while True:
        publisher.publish(away)
        publisher.publish(ball)
        time.sleep(0.5)
        response = node.call(
            ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request()
        )
        if list(response.object_ids) == ["ball", "crate"] or time.monotonic() > deadline:
            break
    assert list(response.object_ids) == ["ball", "crate"]
    response = node.call(PlanTrajectory, "plan_trajectory", plan, timeout=300.0)
    assert response.success, response.message
    q = np.array([p.positions for p in response.trajectory.points])
    crate = {"box_poses": [[1.0, 0, 0, 0, 0.0, -0.6, 0.3]], "box_half_extents": [[0.05] * 3]}
    model = check.SphereModel(RobotSpheres.embedded("panda", Robot.from_urdf(urdf_path("panda"))))
    for config in check.dense(q, 5):  # independent: clear of the moved crate
        c = collision_reference.sphere_centers(model.urdf, model.links, model.centers, config)
        assert collision_reference.world_distances(c, model.radii, crate).min() >= 0

    clear = CollisionObject(id="", operation=CollisionObject.REMOVE)
    response = node.call(
        ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[clear])
    )
    assert response.success and list(response.object_ids) == []
    node.session.node.destroy_publisher(publisher)


def test_a_goal_in_collision_is_refused_and_a_tiny_budget_answers_timeout(node):
    """A joint goal whose fingers enclose a ball: GOAL_IN_COLLISION at once, naming the
    ball. A clear goal behind a ball on the straight line, with a 1 ms budget: TIMEOUT with
    the best path so far (its points start at the start state), although the same plan
    succeeds without a budget."""
    goal = STATE + np.array([0.5, 0.3, -0.2, 0.4, 0.2, -0.3, 0.2, 0.0])
    hand = check.link_pose(goal, "panda_hand")
    ball = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.03])
    pose = pose_stamped(make_transform(np.eye(3), hand[:3, :3] @ [0, 0, 0.1] + hand[:3, 3]))
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_state=joint_state(goal),
        num_steps=16,
        obstacles=[ball],
        obstacle_poses=[pose],
        obstacle_names=["ball"],
    )
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert not response.success
    assert response.error_code.val == ErrorCode.GOAL_IN_COLLISION, response.message
    assert "ball" in response.message

    # A swing of joint 1 with a ball where the hand passes halfway along the joint-space
    # line (~0.2 m from the hand at either end): plans without a budget succeed; with 1 ms
    # left, one LM iteration cannot take the path around the ball.
    goal = STATE + np.array([1.2, 0, 0, 0, 0, 0, 0, 0.0])
    middle = check.link_pose(0.5 * (STATE + goal), "panda_hand")[:3, 3]
    request.goal_state = joint_state(goal)
    request.obstacles = [SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.08])]
    request.obstacle_poses = [pose_stamped(make_transform(np.eye(3), middle))]
    for _ in range(2):  # the first compiles; the second measures the pace
        response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
        assert response.success, response.message
    request.timeout = Duration(sec=0, nanosec=1_000_000)
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert not response.success
    assert response.error_code.val == ErrorCode.TIMEOUT, response.message
    assert "budget" in response.message
    np.testing.assert_allclose(response.trajectory.points[0].positions, STATE, atol=1e-6)


def test_a_plan_that_must_compile_answers_timeout_within_its_budget_and_compiles_on(node):
    """A plan among 20 cylinders (an obstacle-count bucket no other test here uses) compiles
    new programs for seconds: with a 1 s budget it answers TIMEOUT once the budget and the
    node's 0.25 s grace have passed, the compile goes on in the background, and the same plan
    later succeeds as fast. Each answer within 2 s (issue 16's bound for a failure): the node
    answers at 1.25 s, and the call's DDS time was up to 0.28 s in CI while the background
    compile held both of its cores."""
    goal = STATE + np.array([0.3, 0.1, -0.2, 0.2, 0.1, -0.1, 0.2, 0.0])
    cylinder = SolidPrimitive(type=SolidPrimitive.CYLINDER, dimensions=[0.2, 0.03])
    places = [[-0.7, y, 0.1] for y in np.linspace(-0.8, 0.8, 20)]  # behind the robot
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_state=joint_state(goal),
        obstacles=[cylinder] * len(places),
        obstacle_poses=[pose_stamped(make_transform(np.eye(3), p)) for p in places],
        timeout=Duration(sec=1),
    )
    started = time.perf_counter()
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=120.0)
    elapsed = time.perf_counter() - started
    assert elapsed <= 2.0, f"{elapsed:.2f} s for a 1 s budget: {response.message}"
    assert response.error_code.val == ErrorCode.TIMEOUT, response.message
    assert "compiles" in response.message, response.message
    deadline = time.monotonic() + 300.0
    while not response.success and time.monotonic() < deadline:
        time.sleep(2.0)
        started = time.perf_counter()
        response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=120.0)
        elapsed = time.perf_counter() - started
        assert elapsed <= 2.0, f"{elapsed:.2f} s for a 1 s budget: {response.message}"
    assert response.success, response.message
    np.testing.assert_allclose(response.trajectory.points[-1].positions, goal, atol=1e-6)


def test_retarget_motion_follows_keypoints(node):
    t_count = 30
    s = np.linspace(0, 1, t_count)[:, None]
    q1 = STATE + np.array([0.8, 0.4, 0.1, 0.5, 0.2, -0.3, -0.4, 0.0])
    joints = STATE + (3 * s**2 - 2 * s**3) * (q1 - STATE)
    links = ["panda_link4", "panda_hand"]
    scale = 1.25
    points = np.array([[check.link_pose(q, k)[:3, 3] for k in links] for q in joints]) / scale
    request = RetargetMotion.Request(
        link_names=links,
        steps=[Keypoints(points=[Point(x=p[0], y=p[1], z=p[2]) for p in step]) for step in points],
        scale=scale,
        dt=0.1,
        seed=joint_state(STATE),
        timeout=Duration(sec=120),  # the first motion of this length compiles, counted
    )
    response = node.call(RetargetMotion, "retarget_motion", request, timeout=300.0)
    assert response.success, response.message
    q = np.array([p.positions for p in response.trajectory.points])
    times = np.array([seconds(p.time_from_start) for p in response.trajectory.points])
    np.testing.assert_allclose(times, 0.1 * np.arange(t_count), atol=1e-9)
    assert check.within_limits(q)
    for t in range(t_count):
        for k, link in enumerate(links):
            err = np.linalg.norm(check.link_pose(q[t], link)[:3, 3] - scale * points[t, k])
            assert err < 3e-3, (t, link, err)
    assert len(response.step_errors) == t_count and max(response.step_errors) < 3e-3


def test_retarget_motion_by_link_to_link_vectors_follows_the_motion_shape(node):
    """A demonstrator 2 m in front of the robot: no absolute keypoint is reachable, the
    shoulder-to-elbow and elbow-to-hand vectors (scaled) are. With link_weights 0 only the
    vectors count; the robot's vectors (reference FK) must follow them at every step."""
    t_count = 30
    s = np.linspace(0, 1, t_count)[:, None]
    q1 = STATE + np.array([0.9, 0.5, 0.2, 0.7, 0.3, -0.4, -0.3, 0.0])
    joints = STATE + (3 * s**2 - 2 * s**3) * (q1 - STATE)
    links = ["panda_link2", "panda_link4", "panda_hand"]
    scale = 1.25
    offset = np.array([2.0, 0.5, 0.0])  # the demonstrator's place, out of the robot's reach
    positions = np.array([[check.link_pose(q, k)[:3, 3] for k in links] for q in joints])
    points = (positions + offset) / scale
    pairs = [(0, 1), (1, 2)]
    wanted = np.stack([scale * (points[:, j] - points[:, i]) for i, j in pairs], 1)  # (T, 2, 3)
    # The vectors really move: a robot ignoring them (holding any one pose) misses by far more
    # than the tolerance below.
    assert np.linalg.norm(wanted - wanted[:1], axis=-1).max() > 0.2
    request = RetargetMotion.Request(
        link_names=links,
        steps=[Keypoints(points=[Point(x=p[0], y=p[1], z=p[2]) for p in step]) for step in points],
        link_weights=[0.0, 0.0, 0.0],
        vector_from_links=[links[i] for i, _ in pairs],
        vector_to_links=[links[j] for _, j in pairs],
        scale=scale,
        dt=0.1,
        seed=joint_state(STATE),
        timeout=Duration(sec=120),  # the first motion of this length compiles, counted
    )
    response = node.call(RetargetMotion, "retarget_motion", request, timeout=300.0)
    assert response.success, response.message
    q = np.array([p.positions for p in response.trajectory.points])
    assert q.shape == (t_count, len(JOINTS)) and check.within_limits(q)
    errors = np.zeros((t_count, len(pairs)))
    for t in range(t_count):
        at = {link: check.link_pose(q[t], link)[:3, 3] for link in links}
        for v, (i, j) in enumerate(pairs):
            errors[t, v] = np.linalg.norm(at[links[j]] - at[links[i]] - wanted[t, v])
    assert errors.max() < 3e-3, (errors.max(), np.unravel_index(errors.argmax(), errors.shape))
    # The absolute keypoints stayed out of reach (step_errors are absolute position errors).
    assert len(response.step_errors) == t_count and min(response.step_errors) > 1.0


@pytest.mark.parametrize(
    "change,code",
    [
        (lambda r: setattr(r.goal_objectives[0], "link", "no_such_link"), ErrorCode.UNKNOWN_LINK),
        (
            lambda r: setattr(r.goal_objectives[0].target.pose.position, "x", math.nan),
            ErrorCode.INVALID_POSE,
        ),
        (
            lambda r: (
                r.obstacles.append(SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.0])),
                r.obstacle_poses.append(PoseStamped(pose=Pose())),
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            lambda r: (
                r.obstacles.append(SolidPrimitive(type=SolidPrimitive.CONE, dimensions=[0.1, 0.1])),
                r.obstacle_poses.append(PoseStamped(pose=Pose())),
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            lambda r: r.obstacles.append(
                SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.1])
            ),
            ErrorCode.INVALID_REQUEST,
        ),
        (lambda r: setattr(r, "velocity_scaling", 2.0), ErrorCode.INVALID_REQUEST),
        (lambda r: setattr(r, "num_steps", 1), ErrorCode.INVALID_REQUEST),
        (lambda r: r.goal_objectives.clear(), ErrorCode.INVALID_REQUEST),
        (
            lambda r: setattr(r, "start_state", JointState(name=["nope"], position=[0.0])),
            ErrorCode.UNKNOWN_JOINT,
        ),
    ],
)
def test_bad_plan_requests_get_clear_errors_and_the_node_keeps_serving(node, change, code):
    target = check.link_pose(STATE, "panda_hand")
    request = PlanTrajectory.Request(
        goal_objectives=[
            IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
        ],
        num_steps=16,
    )
    change(request)
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert not response.success
    assert response.error_code.val == code, response.message
    assert response.message
    assert node.node.alive()


def test_bad_retarget_requests_get_clear_errors(node):
    step = Keypoints(points=[Point(x=0.3, y=0.0, z=0.5)])
    for request, code in (
        (
            RetargetMotion.Request(link_names=["nope"], steps=[step, step], dt=0.1),
            ErrorCode.UNKNOWN_LINK,
        ),
        (
            RetargetMotion.Request(link_names=["panda_hand"], steps=[step, step], dt=0.0),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            RetargetMotion.Request(link_names=["panda_hand"], steps=[step], dt=0.1),
            ErrorCode.INVALID_REQUEST,
        ),
        (
            RetargetMotion.Request(
                link_names=["panda_hand", "panda_link4"], steps=[step, step], dt=0.1
            ),
            ErrorCode.INVALID_REQUEST,
        ),
    ):
        response = node.call(RetargetMotion, "retarget_motion", request)
        assert not response.success and response.error_code.val == code, response.message

    # Link-to-link vectors: between two keypoint links, one 'to' per 'from', weight >= 0.
    two = Keypoints(points=[Point(x=0.3, y=0.0, z=0.5), Point(x=0.3, y=0.0, z=0.2)])
    links = ["panda_link4", "panda_hand"]
    for fields, code, words in (
        (
            {"vector_from_links": ["panda_link4"], "vector_to_links": ["nope"]},
            ErrorCode.UNKNOWN_LINK,
            "nope",
        ),
        (
            {"vector_from_links": ["panda_link2"], "vector_to_links": ["panda_hand"]},
            ErrorCode.INVALID_REQUEST,
            "not one of link_names",
        ),
        (
            {"vector_from_links": ["panda_hand"], "vector_to_links": ["panda_hand"]},
            ErrorCode.INVALID_REQUEST,
            "to itself",
        ),
        (
            {
                "vector_from_links": ["panda_link4", "panda_link4"],
                "vector_to_links": ["panda_hand"],
            },
            ErrorCode.INVALID_REQUEST,
            "2 vector_from_links but 1 vector_to_links",
        ),
        *(
            (
                {
                    "vector_from_links": ["panda_link4"],
                    "vector_to_links": ["panda_hand"],
                    "vector_weight": weight,
                },
                ErrorCode.INVALID_REQUEST,
                "vector_weight",
            )
            for weight in (-1.0, math.nan, math.inf)
        ),
        ({"link_weights": [0.0, 0.0]}, ErrorCode.INVALID_REQUEST, "nothing to follow"),
    ):
        request = RetargetMotion.Request(link_names=links, steps=[two, two], dt=0.1, **fields)
        response = node.call(RetargetMotion, "retarget_motion", request)
        assert not response.success, fields
        assert response.error_code.val == code, (fields, response.message)
        assert words in response.message, (fields, response.message)
    assert node.node.alive()


def _warm_up_goal() -> tuple[np.ndarray, list[IKObjective]]:
    """The warm-up tests' pose goal for panda_hand: its target (4, 4) and objectives."""
    goal = STATE + np.array([0.6, 0.2, -0.3, 0.3, 0.2, -0.2, 0.3, 0.0])
    target = check.link_pose(goal, "panda_hand")
    return target, [
        IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
    ]


def _wait_for_warm_up(node) -> None:
    """Until the node logs that its planner's background warm-up compiled (fails at once on
    a failed warm-up)."""
    from harness import wait_until

    def warmed() -> bool:
        log = node.node.log()
        assert "background warm-up failed" not in log, log[-2000:]
        return "planning programs compiled" in log

    wait_until(warmed, 900.0, interval=0.5, what="the planner's background warm-up")


def _plan_behind_the_robot(node, pose_goal, boxes: int, cylinders: int):
    """A ~/plan_trajectory from STATE to ``pose_goal`` among 10 cm boxes and 20 cm x 3 cm
    cylinders in a row behind the robot, out of the way: the response and its seconds."""
    box = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.1, 0.1])
    cylinder = SolidPrimitive(type=SolidPrimitive.CYLINDER, dimensions=[0.2, 0.03])
    shapes = [box] * boxes + [cylinder] * cylinders
    places = [[-0.6, y, 0.1] for y in np.linspace(-0.7, 0.7, len(shapes))]
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_objectives=pose_goal,
        obstacles=shapes,
        obstacle_poses=[pose_stamped(make_transform(np.eye(3), p)) for p in places],
    )
    started = time.perf_counter()
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    return response, time.perf_counter() - started


def test_the_first_plans_after_the_background_warm_up_answer_within_2_s(tmp_path_factory):
    """With warmup_plan (config/panda.yaml's default) the node compiles its planner after
    the model loads; then the first plans of a pose goal among a box and a cylinder, among
    other counts of boxes and cylinders and among boxes alone (the same coarse obstacle
    buckets) need no compile (a cold one takes seconds: docs/benchmarks/mbm.md). A plan sent
    during the warm-up answers TIMEOUT within its budget. With start_collision:=escape, a
    start 4 mm into a crate is planned out of, also within 2 s: the trajectory begins at the
    start, its first segment is no deeper in the crate, the rest is clear (reference spheres)."""
    from harness import wait_until

    # The default sphere set: the crate below is placed 4 mm into its spheres (the fine set,
    # config/panda.yaml's, warms up and plans in the test after this one).
    params = ("warmup_plan:=true", "start_collision:=escape", "collision_spheres:=auto")
    with panda_node(tmp_path_factory, "warm_plan", params=params) as node:
        target, pose_goal = _warm_up_goal()

        # While the warm-up holds the planner (tens of seconds here), a plan waits at most
        # its budget and says why.
        wait_until(lambda: "planning for robot" in node.node.log(), 120.0, what="the warm-up")
        request = PlanTrajectory.Request(
            start_state=joint_state(STATE), goal_objectives=pose_goal, timeout=Duration(sec=1)
        )
        started = time.perf_counter()
        response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=60.0)
        elapsed = time.perf_counter() - started
        if "planning programs compiled" not in node.node.log():  # the warm-up went on
            assert elapsed <= 1.5, f"{elapsed:.2f} s for a 1 s budget: {response.message}"
            assert response.error_code.val == ErrorCode.TIMEOUT, response.message
            assert "waiting for the planner" in response.message, response.message

        _wait_for_warm_up(node)
        box_shape = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.08, 0.08, 0.08])
        for boxes, cylinders in ((1, 1), (9, 3), (5, 0)):
            response, elapsed = _plan_behind_the_robot(node, pose_goal, boxes, cylinders)
            assert response.success, (boxes, cylinders, response.message)
            assert elapsed <= 2.0, (
                f"first plan among {boxes} boxes, {cylinders} cylinders: {elapsed:.2f} s"
            )
            q = np.array(response.trajectory.points[-1].positions)
            p_err, r_err = pose_errors(target, check.link_pose(q, "panda_hand"))
            assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3

        # A crate 4 mm into the hand (the reference model's clearance, stepped to it; a box:
        # the warm-up's obstacle kinds).
        model = check.SphereModel(
            RobotSpheres.embedded("panda", Robot.from_urdf(urdf_path("panda")))
        )
        hand = check.link_pose(STATE, "panda_hand")
        center = hand[:3, 3] + 0.2 * hand[:3, 0]
        arm = [i for i, link in enumerate(model.links) if link != "panda_link0"]
        crate = lambda c: {"box_poses": [[1.0, 0, 0, 0, *c]], "box_half_extents": [[0.04] * 3]}

        def clearance(q, obstacles) -> float:
            c = collision_reference.sphere_centers(model.urdf, model.links, model.centers, q)
            d = collision_reference.world_distances(c[arm], model.radii[arm], obstacles)
            return float(d.min())

        for _ in range(30):
            center = center - (clearance(STATE, crate(center)) + 0.004) * hand[:3, 0]
        request = PlanTrajectory.Request(
            start_state=joint_state(STATE),
            goal_objectives=pose_goal,
            obstacles=[box_shape],
            obstacle_poses=[pose_stamped(make_transform(np.eye(3), center))],
            obstacle_names=["crate"],
        )
        started = time.perf_counter()
        response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
        elapsed = time.perf_counter() - started
        assert response.success, response.message
        assert "planned out of it" in response.message and "crate" in response.message
        assert elapsed <= 2.0, f"plan out of a start in collision: {elapsed:.2f} s"
        q = np.array([p.positions for p in response.trajectory.points])
        np.testing.assert_allclose(q[0], STATE, atol=1e-9)
        at_start = clearance(STATE, crate(center))
        assert -0.0045 < at_start < -0.0035
        first = check.dense(q[:2], 20)
        assert min(clearance(c, crate(center)) for c in first) >= at_start - 1e-6
        assert min(clearance(c, crate(center)) for c in check.dense(q[1:], 5)) >= 0


def test_the_fine_set_with_its_boxes_warms_up_and_plans_within_2_s(tmp_path_factory):
    """collision_spheres:=fine (spheres and the fingers' and hand's boxes): the background
    warm-up completes (its first scene has no obstacles) and the first plan among boxes and
    cylinders then answers within 2 s, reaching its goal by the reference FK."""

    params = ("warmup_plan:=true", "collision_spheres:=fine")
    with panda_node(tmp_path_factory, "warm_fine", params=params) as node:
        target, pose_goal = _warm_up_goal()
        _wait_for_warm_up(node)
        response, elapsed = _plan_behind_the_robot(node, pose_goal, 3, 1)
        assert response.success, response.message
        assert elapsed <= 2.0, f"first plan with the fine set: {elapsed:.2f} s"
        q = np.array(response.trajectory.points[-1].positions)
        p_err, r_err = pose_errors(target, check.link_pose(q, "panda_hand"))
        assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3
