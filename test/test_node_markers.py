"""End to end: the real node (a subprocess) publishes RViz markers on ``~/markers`` after
``~/solve_ik``, ``~/plan_trajectory`` and teleop goals, over DDS. Checked independently of
the node's own code: goal markers at the requested poses, the planned path's last point at the
reference FK (test/reference_fk.py) of the returned trajectory's last point, obstacle markers
matching the request, collision spheres at the reference FK of the answer."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")
pytest.importorskip("visualization_msgs", reason="visualization_msgs not installed: ./setup.sh")

import plan_check as check
from geometry_msgs.msg import PoseStamped
from node_helpers import panda_node, pose_stamped
from pyroki_ros.msg import CollisionObject, ErrorCode, IKObjective
from pyroki_ros.srv import ApplyPlanningScene, PlanTrajectory, SolveIK
from reference_fk import make_transform, quat_wxyz_to_matrix, reference_fk, rot_x, rot_z
from sensor_msgs.msg import JointState
from shape_msgs.msg import Plane, SolidPrimitive
from visualization_msgs.msg import Marker, MarkerArray

from pyroki_ros import Robot
from pyroki_ros.collision import RobotSpheres
from pyroki_ros.robots import urdf_path
from pyroki_ros.ros import markers

NODE = "/pyroki_ros_node"
BASE = "panda_link0"  # config/panda.yaml base_frame (the root link)
JOINTS = check.JOINTS
STATE = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    # The default sphere set, whose spheres check_spheres draws (config/panda.yaml ships the
    # fine set; its boxes' CUBEs: test_display.py).
    params = ("collision_spheres:=auto",)
    with panda_node(tmp_path_factory, "test_node_markers", state=STATE, params=params) as env:
        session = env.session.node
        env.markers = []
        lock = threading.Lock()

        def record(msg: MarkerArray) -> None:
            with lock:
                env.markers.append(msg)

        session.create_subscription(MarkerArray, f"{NODE}/markers", record, markers.QOS)
        env.goal_pose = session.create_publisher(PoseStamped, f"{NODE}/goal_pose", 10)
        yield env


def by_ns(message: MarkerArray) -> dict[str, list[Marker]]:
    out: dict[str, list[Marker]] = {}
    for m in message.markers:
        if m.action == Marker.ADD:
            out.setdefault(m.ns, []).append(m)
    return out


def wait_for(node, predicate, what: str, timeout: float = 60.0) -> dict[str, list[Marker]]:
    """The newest MarkerArray for which ``predicate(by_ns(msg))`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for message in reversed(list(node.markers)):
            groups = by_ns(message)
            if predicate(groups):
                check_structure(message)
                return groups
        assert node.node.alive(), node.node.log()[-3000:]
        time.sleep(0.05)
    raise AssertionError(f"no markers with {what} within {timeout} s ({len(node.markers)} seen)")


def check_structure(message: MarkerArray) -> None:
    """Every namespace opened by its DELETEALL before its markers, ids 0.. in order, the base
    frame everywhere."""
    seen_delete: set[str] = set()
    ids: dict[str, list[int]] = {}
    for m in message.markers:
        assert m.header.frame_id == BASE
        if m.action == Marker.DELETEALL:
            seen_delete.add(m.ns)
        else:
            assert m.ns in seen_delete, f"{m.ns} marker before its DELETEALL"
            ids.setdefault(m.ns, []).append(m.id)
    assert seen_delete >= set(markers.NAMESPACES)
    for ns, got in ids.items():
        assert got == list(range(len(got))), (ns, got)


def marker_matrix(m: Marker) -> np.ndarray:
    o, p = m.pose.orientation, m.pose.position
    return make_transform(quat_wxyz_to_matrix([o.w, o.x, o.y, o.z]), [p.x, p.y, p.z])


def at_pose(m: Marker, target: np.ndarray, tol: float = 1e-6) -> bool:
    return bool(np.allclose(marker_matrix(m), target, atol=tol))


def points(m: Marker) -> np.ndarray:
    return np.array([(p.x, p.y, p.z) for p in m.points]).reshape(-1, 3)


def joint_state(q) -> JointState:
    return JointState(name=list(JOINTS), position=[float(v) for v in q])


def check_spheres(groups, q: np.ndarray) -> None:
    """Every collision sphere of the bundled model at the reference FK of ``q``, drawn in a
    SPHERE_LIST at least its size."""
    lists = groups["collision_spheres"]
    assert all(m.type == Marker.SPHERE_LIST for m in lists)
    spheres = RobotSpheres.embedded("panda", Robot.from_urdf(urdf_path("panda")))
    frames = reference_fk(check.PANDA_URDF, q, JOINTS)
    local, radii = np.asarray(spheres.centers, float), np.asarray(spheres.radii, float)
    drawn = [(points(m), m.scale.x) for m in lists]
    assert sum(len(p) for p, _ in drawn) == len(radii)
    for i, link in enumerate(spheres.link_names):
        center = (frames[link] @ np.r_[local[i], 1.0])[:3]
        sizes = [d for p, d in drawn if np.any(np.linalg.norm(p - center, axis=1) < 1e-4)]
        assert sizes and 2 * radii[i] - 1e-6 <= sizes[0] <= 2 * radii[i] + 0.0101, (link, sizes)


def test_solve_ik_markers_show_the_goal_and_the_spheres_at_the_solution(node):
    q_goal = STATE + np.array([0.3, 0.2, -0.2, 0.3, 0.1, -0.2, 0.3, 0.0])
    target = check.link_pose(q_goal, "panda_hand")
    point = check.link_pose(q_goal, "panda_link4")[:3, 3]
    pose = IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target, BASE))
    response = node.call(
        SolveIK, "solve_ik", SolveIK.Request(objectives=[pose], seed=joint_state(STATE))
    )
    assert response.success, response.message

    def drawn(groups):
        return any(at_pose(m, target) for m in groups.get("objectives", ()))

    groups = wait_for(node, drawn, "the solve_ik pose goal")
    (triad,) = groups["objectives"]
    assert triad.type == Marker.LINE_LIST and len(triad.points) == 6 and len(triad.colors) == 6
    assert "panda_hand" in triad.text
    q = np.array(response.solution.position)[: len(JOINTS)]
    check_spheres(groups, q)

    # A position objective is a sphere at the target, in the base frame whatever its frame.
    hand = check.link_pose(STATE, "panda_hand")  # the target given in the hand's frame
    in_hand = np.linalg.inv(hand) @ make_transform(np.eye(3), point)
    position = IKObjective(type=IKObjective.POSITION, link="panda_link4")
    position.target = pose_stamped(in_hand, "panda_hand")
    request = SolveIK.Request(objectives=[pose, position], seed=joint_state(STATE))
    request.timeout.sec = 120  # a new objective combination compiles first
    node.call(SolveIK, "solve_ik", request, timeout=180.0)
    groups = wait_for(
        node,
        lambda g: any(m.type == Marker.SPHERE for m in g.get("objectives", ())),
        "the position goal",
    )
    (sphere,) = [m for m in groups["objectives"] if m.type == Marker.SPHERE]
    np.testing.assert_allclose(marker_matrix(sphere)[:3, 3], point, atol=2e-6)  # float32 FK
    assert any(at_pose(m, target) for m in groups["objectives"])


def test_plan_markers_show_path_obstacles_and_goal(node):
    q_goal = STATE + np.array([0.6, 0.2, -0.2, 0.4, 0.2, -0.3, 0.2, 0.0])
    target = check.link_pose(q_goal, "panda_hand")
    ball = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.06])
    crate = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.1, 0.2, 0.3])
    pole = SolidPrimitive(type=SolidPrimitive.CYLINDER)
    pole.dimensions = [0.4, 0.03]  # height, radius
    ball_pose = make_transform(np.eye(3), [-0.5, 0.4, 0.3])
    crate_pose = make_transform(rot_z(0.5) @ rot_x(0.3), [-0.5, -0.4, 0.2])
    # the pole in panda_link0's frame; the crate's pose given in another frame (a link)
    hand = check.link_pose(STATE, "panda_hand")
    pole_pose = make_transform(rot_x(0.2), [-0.6, 0.0, 0.3])
    floor = Plane(coef=[0.0, 0.0, 2.0, 0.8])  # 2z + 0.8 < 0: solid below z = -0.4
    # and one object of the node's planning scene
    shelf_pose = make_transform(rot_z(0.3), [-0.45, 0.1, 0.75])
    shelf = CollisionObject(id="shelf", operation=CollisionObject.ADD)
    shelf.primitive = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=[0.3, 0.1, 0.02])
    shelf.pose = pose_stamped(shelf_pose).pose
    applied = node.call(
        ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[shelf])
    )
    assert applied.success, applied.message
    request = PlanTrajectory.Request(
        start_state=joint_state(STATE),
        goal_objectives=[
            IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target, BASE))
        ],
        obstacles=[ball, crate, pole],
        obstacle_poses=[
            pose_stamped(ball_pose, BASE),
            pose_stamped(np.linalg.inv(hand) @ crate_pose, "panda_hand"),
            pose_stamped(pole_pose),
        ],
        half_spaces=[floor],
        obstacle_names=["ball", "crate", "pole", "floor"],
        num_steps=32,
    )
    response = node.call(PlanTrajectory, "plan_trajectory", request, timeout=300.0)
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    q = np.array([p.positions for p in response.trajectory.points])

    groups = wait_for(node, lambda g: "path" in g, "the planned path", timeout=120.0)
    (path,) = groups["path"]
    assert path.type == Marker.LINE_STRIP and len(path.points) == len(q)
    drawn = points(path)
    end = reference_fk(check.PANDA_URDF, q[-1], JOINTS)["panda_hand"][:3, 3]
    start = reference_fk(check.PANDA_URDF, q[0], JOINTS)["panda_hand"][:3, 3]
    np.testing.assert_allclose(drawn[-1], end, atol=2e-5)  # float32 FK in the node
    np.testing.assert_allclose(drawn[0], start, atol=2e-5)
    assert np.linalg.norm(drawn[-1] - target[:3, 3]) < 2e-3  # and the goal was reached

    (goal,) = groups["plan_goal"]
    assert at_pose(goal, target)

    obstacles = {m.text: m for m in groups["obstacles"]}
    assert set(obstacles) == {"ball", "crate", "pole", "floor"}
    assert obstacles["ball"].type == Marker.SPHERE
    np.testing.assert_allclose(marker_matrix(obstacles["ball"])[:3, 3], ball_pose[:3, 3])
    assert obstacles["ball"].scale.x == obstacles["ball"].scale.z == pytest.approx(0.12)
    assert obstacles["crate"].type == Marker.CUBE and at_pose(obstacles["crate"], crate_pose, 2e-6)
    scale = obstacles["crate"].scale
    assert (scale.x, scale.y, scale.z) == pytest.approx((0.1, 0.2, 0.3))
    assert obstacles["pole"].type == Marker.CYLINDER and at_pose(obstacles["pole"], pole_pose)
    scale = obstacles["pole"].scale
    assert (scale.x, scale.y, scale.z) == pytest.approx((0.06, 0.06, 0.4))
    (drawn_shelf,) = groups["scene"]
    assert drawn_shelf.text == "shelf" and drawn_shelf.type == Marker.CUBE
    assert at_pose(drawn_shelf, shelf_pose)
    plate = obstacles["floor"]
    assert plate.type == Marker.CUBE and plate.scale.x >= 1.0
    pose = marker_matrix(plate)
    np.testing.assert_allclose(pose[:3, 2], [0, 0, 1], atol=1e-12)  # normal
    top = pose[:3, 3] + pose[:3, 2] * plate.scale.z / 2
    assert top[2] == pytest.approx(-0.4)  # on the plane, the plate below it
    check_spheres(groups, q[-1])


def test_teleop_goal_marker_follows_the_newest_goal(node):
    for dz in (0.05, -0.04):
        target = check.link_pose(STATE, "panda_hand")
        target[2, 3] += dz
        node.goal_pose.publish(pose_stamped(target, BASE))
        wait_for(
            node,
            lambda g, t=target: any(at_pose(m, t) for m in g.get("goal", ())),
            f"the teleop goal {dz:+}",
        )


def test_view_client_shows_the_nodes_markers_state_and_trajectories(node):
    """``pyroki-ros view``'s client (in this process): the robot from robot_description, the
    node's latched markers, /joint_states, and a published trajectory as a plan to play."""
    pytest.importorskip("viser", reason="viser not installed")
    import socket

    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from pyroki_ros.ros.view import TRAJECTORY_TOPIC, ViewClient

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ViewClient(port=port)
    try:
        assert client.ready.wait(60.0), "no robot from /robot_description"
        viewer = client.viewer
        assert viewer.robot.name == "panda" and viewer.url.endswith(f":{port}")
        # Each step has its own deadline: on a loaded 2-core CI machine the client's first
        # drawings (FK compiled in this process) can take tens of seconds while the node warms up.
        step_s = 120.0
        deadline = time.monotonic() + step_s
        want = {f"markers/{ns}" for ns in ("path", "obstacles", "plan_goal", "collision_spheres")}
        while not want <= {g for g, n in viewer.shown().items() if n}:
            assert time.monotonic() < deadline, viewer.shown()
            time.sleep(0.1)
        assert viewer.shown()["markers/obstacles"] == 4
        deadline = time.monotonic() + step_s
        while client.configuration is None or not np.allclose(client.configuration, STATE):
            assert time.monotonic() < deadline, ("no /joint_states shown", client.messages)
            time.sleep(0.1)
        trajectories = node.session.node.create_publisher(JointTrajectory, TRAJECTORY_TOPIC, 10)
        goal = STATE + 0.2
        message = JointTrajectory(joint_names=list(JOINTS))
        for k, q in enumerate(np.linspace(STATE, goal, 10)):
            point = JointTrajectoryPoint(positions=q.tolist())
            point.time_from_start.nanosec = k * 50_000_000
            message.points.append(point)
        deadline = time.monotonic() + step_s
        while viewer.plan_slider.max != 9:
            assert time.monotonic() < deadline, (
                "no plan from the trajectory topic",
                client.messages,
            )
            trajectories.publish(message)
            time.sleep(0.2)
        viewer.plan_slider.value = 9
        assert client.messages["markers"] >= 1 and client.messages["trajectories"] >= 1
    finally:
        client.close()
