"""End to end: ``pyroki_ros_node`` (the real entry point, a subprocess) on the Panda, services
called over DDS from this process. Every answer is checked with the independent float64
reference FK (test/reference_fk.py); every bad input must get its error code, and the node must
keep serving.

The node gets its own ROS_DOMAIN_ID (reserved per module), loopback-only discovery, logs and
a JAX compilation cache under pytest's tmp folder.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import reference_fk as ref
from node_helpers import CONFIG, JOINTS, LOWER, MODEL, STATE, UPPER, panda_node, pose_stamped
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.srv import ComputeFK, SolveIK, SolveIKBatch
from sensor_msgs.msg import JointState

POS_TOL, ROT_TOL = 1e-3, math.radians(1.0)
# float32 solver vs float64 reference: a little slack on top of the tolerances.
POS_SLACK, ROT_SLACK = 1e-4, 1e-3


# --- independent helpers (numpy + reference_fk only) ---------------------------------------


def fk(q) -> dict[str, np.ndarray]:
    return ref.reference_fk(MODEL, np.asarray(q, np.float64), JOINTS)


def msg_matrix(pose) -> np.ndarray:
    o, p = pose.orientation, pose.position
    return ref.make_transform(ref.quat_wxyz_to_matrix([o.w, o.x, o.y, o.z]), [p.x, p.y, p.z])


def q_of(solution: JointState) -> np.ndarray:
    assert list(solution.name) == JOINTS
    return np.asarray(solution.position)


def random_q(rng, n=None) -> np.ndarray:
    margin = 0.1 * (UPPER - LOWER)
    shape = (len(JOINTS),) if n is None else (n, len(JOINTS))
    return rng.uniform(LOWER + margin, UPPER - margin, size=shape)


def joint_state(q) -> JointState:
    return JointState(name=list(JOINTS), position=[float(v) for v in q])


def pose_objective(link: str, t: np.ndarray, frame: str = "", kind=IKObjective.POSE):
    return IKObjective(type=kind, link=link, target=pose_stamped(t, frame))


def assert_pose_reached(q, link, target, pos_tol=POS_TOL, rot_tol=ROT_TOL):
    p_err, r_err = ref.pose_errors(target, fk(q)[link])
    assert p_err <= pos_tol + POS_SLACK, f"{link}: position error {p_err:.2e} m"
    assert r_err <= rot_tol + ROT_SLACK, f"{link}: orientation error {r_err:.2e} rad"


def assert_within_limits(q):
    assert np.all(q >= LOWER - 1e-6) and np.all(q <= UPPER + 1e-6), q


# --- the node ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with panda_node(
        tmp_path_factory,
        "test_node_services",
        warmup_batch_sizes="[16]",
        params=(f"fixed_frames:={CAMERA_PARAMETER}",),
    ) as env:
        # /joint_states arrived when an FK without robot_state answers with STATE.
        deadline = time.monotonic() + 60
        while True:
            response = env.call(
                ComputeFK, "compute_fk", ComputeFK.Request(link_names=["panda_hand"])
            )
            if response.error_code.val == ErrorCode.SUCCESS:
                break
            assert time.monotonic() < deadline, response.message
            time.sleep(0.1)
        yield env


def solve(node, objectives, **fields) -> SolveIK.Response:
    """A SolveIK call. Unless the test gives one, a budget that covers a first-time compile
    (the node counts it: a new objective combination with the 0.1 s default answers TIMEOUT
    while it compiles, see test_node_hostile.py)."""
    fields.setdefault("timeout", _duration(60.0))
    return node.call(SolveIK, "solve_ik", SolveIK.Request(objectives=list(objectives), **fields))


def assert_serving(node):
    """The node is alive and answers a good request correctly."""
    assert node.node.alive(), node.node.log()
    target = fk(STATE)["panda_hand"]
    response = solve(node, [pose_objective("panda_hand", target)], seed=joint_state(STATE))
    assert response.success, response.message


# --- compute_fk ----------------------------------------------------------------------------


def test_compute_fk_all_links_match_reference(node):
    rng = np.random.default_rng(1)
    for q in random_q(rng, 3):
        response = node.call(ComputeFK, "compute_fk", ComputeFK.Request(robot_state=joint_state(q)))
        assert response.error_code.val == ErrorCode.SUCCESS, response.message
        expected = fk(q)
        assert sorted(response.link_names) == sorted(expected)
        for link, pose in zip(response.link_names, response.poses):
            assert pose.header.frame_id == "panda_link0"
            p_err, r_err = ref.pose_errors(expected[link], msg_matrix(pose.pose))
            assert p_err < 1e-5 and r_err < 1e-5, link


def test_compute_fk_in_a_link_frame_and_default_state(node):
    response = node.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(link_names=["panda_hand", "panda_link2"], frame_id="panda_link3"),
    )
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    expected = fk(STATE)  # empty robot_state = the latest /joint_states
    to_link3 = np.linalg.inv(expected["panda_link3"])
    for link, pose in zip(response.link_names, response.poses):
        assert pose.header.frame_id == "panda_link3"
        p_err, r_err = ref.pose_errors(to_link3 @ expected[link], msg_matrix(pose.pose))
        assert p_err < 1e-5 and r_err < 1e-5, link


# A camera 1.2 m up, 0.8 m in front of the base, looking back at it (fixed_frames parameter).
CAMERA_XYZ, CAMERA_XYZW = [0.8, 0.1, 1.2], [0.0, 0.7071068, 0.0, 0.7071068]
CAMERA_PARAMETER = "world panda_link0 0 0 0 0 0 0 1; camera panda_link0 " + " ".join(
    str(v) for v in CAMERA_XYZ + CAMERA_XYZW
)


def camera_in_base() -> np.ndarray:
    x, y, z, w = CAMERA_XYZW
    return ref.make_transform(ref.quat_wxyz_to_matrix([w, x, y, z]), CAMERA_XYZ)


def test_fixed_frames_from_the_config_serve_fk_and_ik_targets(node):
    response = node.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(link_names=["panda_hand"], frame_id="camera"),
    )
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    hand = fk(STATE)["panda_hand"]
    in_camera = np.linalg.inv(camera_in_base()) @ hand
    p_err, r_err = ref.pose_errors(in_camera, msg_matrix(response.poses[0].pose))
    assert p_err < 1e-5 and r_err < 1e-5
    # An IK target given in the camera frame is the same target in the base frame.
    q_goal = STATE + np.array([0.2, -0.1, 0.1, 0.2, 0.0, -0.1, 0.1, 0.0])
    target = fk(q_goal)["panda_hand"]
    response = solve(
        node,
        [pose_objective("panda_hand", np.linalg.inv(camera_in_base()) @ target, "camera")],
        seed=joint_state(STATE),
    )
    assert response.success, response.message
    assert_pose_reached(q_of(response.solution), "panda_hand", target)
    response = node.call(
        ComputeFK, "compute_fk", ComputeFK.Request(link_names=["panda_hand"], frame_id="radar")
    )
    assert response.error_code.val == ErrorCode.UNKNOWN_FRAME
    assert "camera" in response.message and "world" in response.message


def test_compute_fk_partial_state_is_completed_from_joint_states(node):
    q = STATE.copy()
    q[1] = 0.3
    response = node.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(
            link_names=["panda_hand"], robot_state=JointState(name=["panda_joint2"], position=[0.3])
        ),
    )
    p_err, r_err = ref.pose_errors(fk(q)["panda_hand"], msg_matrix(response.poses[0].pose))
    assert p_err < 1e-5 and r_err < 1e-5


# --- solve_ik ------------------------------------------------------------------------------


def test_solve_ik_pose_targets_are_reached(node):
    rng = np.random.default_rng(2)
    solved = 0
    for q_target in random_q(rng, 8):
        target = fk(q_target)["panda_hand"]
        response = solve(node, [pose_objective("panda_hand", target)])
        q = q_of(response.solution)
        assert_within_limits(q)
        assert len(response.position_errors) == 1 and len(response.orientation_errors) == 1
        if response.success:
            solved += 1
            assert response.error_code.val == ErrorCode.SUCCESS
            assert response.message == ""
            assert_pose_reached(q, "panda_hand", target)
            assert response.position_errors[0] <= POS_TOL
            assert response.solve_time > 0 and response.iterations > 0
        else:
            assert response.error_code.val in (ErrorCode.NO_SOLUTION, ErrorCode.TIMEOUT)
    assert solved >= 6, f"only {solved}/8 reachable targets solved"


def test_solve_ik_every_objective_type_together(node):
    """Targets taken from one configuration, so that all objectives can hold at once."""
    q_ref = np.array([0.4, -0.3, -0.2, -2.1, 0.3, 1.9, 0.2, 0.03])
    poses = fk(q_ref)
    hand, link4, link6, link5, link3 = (
        poses[k] for k in ("panda_hand", "panda_link4", "panda_link6", "panda_link5", "panda_link3")
    )
    local = np.array([0.02, -0.01, 0.05])
    objectives = []
    # POSITION: a point on link4 (in link4's frame) at its place in the base frame.
    o = pose_objective("panda_link4", np.eye(4), kind=IKObjective.POSITION)
    o.local_point.x, o.local_point.y, o.local_point.z = local.tolist()
    point4 = (link4 @ np.append(local, 1))[:3]
    o.target.pose.position.x, o.target.pose.position.y, o.target.pose.position.z = point4.tolist()
    objectives.append(o)
    # ORIENTATION of link6.
    objectives.append(pose_objective("panda_link6", link6, kind=IKObjective.ORIENTATION))
    # HINGE: hand origin at its point, hand z axis along its direction; spin free.
    o = pose_objective("panda_hand", hand, kind=IKObjective.HINGE)
    o.axis.x, o.axis.y, o.axis.z = hand[:3, 2].tolist()
    o.local_axis.z = 1.0
    objectives.append(o)
    # PLANE: link5 origin on the horizontal plane through its place.
    o = pose_objective("panda_link5", link5, kind=IKObjective.PLANE)
    o.axis.z = 1.0
    objectives.append(o)
    # LINE: link3 origin on the line through its place along the base x axis.
    o = pose_objective("panda_link3", link3, kind=IKObjective.LINE)
    o.axis.x = 1.0
    objectives.append(o)

    seed = q_ref + np.array([0.15, -0.1, 0.1, 0.1, -0.1, 0.1, 0.1, 0.0])
    response = solve(node, objectives, seed=joint_state(seed))
    assert response.success, response.message
    q = q_of(response.solution)
    got = fk(q)
    tol = POS_TOL + POS_SLACK
    assert np.linalg.norm((got["panda_link4"] @ np.append(local, 1))[:3] - point4) <= tol
    assert ref.rotation_angle(link6[:3, :3].T @ got["panda_link6"][:3, :3]) <= ROT_TOL + ROT_SLACK
    assert np.linalg.norm(got["panda_hand"][:3, 3] - hand[:3, 3]) <= tol
    angle = math.acos(np.clip(got["panda_hand"][:3, 2] @ hand[:3, 2], -1, 1))
    assert angle <= ROT_TOL + ROT_SLACK
    assert abs(got["panda_link5"][2, 3] - link5[2, 3]) <= tol
    off = got["panda_link3"][:3, 3] - link3[:3, 3]
    assert np.linalg.norm(off[1:]) <= tol  # no offset across the x line
    assert len(response.position_errors) == 5


def test_solve_ik_axis_objective_points_the_tool_and_leaves_the_position_free(node):
    """AXIS: the hand's z axis straight down (given in link3's frame, to exercise the frame),
    wherever the hand is: only the angle is constrained (reference FK)."""
    down_in_link3 = fk(STATE)["panda_link3"][:3, :3].T @ np.array([0.0, 0.0, -1.0])
    o = IKObjective(type=IKObjective.AXIS, link="panda_hand")
    o.target.header.frame_id = "panda_link3"
    o.axis.x, o.axis.y, o.axis.z = down_in_link3.tolist()
    o.local_axis.z = 1.0
    response = solve(node, [o], seed=joint_state(STATE))
    assert response.success, response.message
    hand = fk(q_of(response.solution))["panda_hand"]
    angle = math.acos(np.clip(hand[:3, 2] @ [0.0, 0.0, -1.0], -1, 1))
    assert angle <= ROT_TOL + ROT_SLACK
    assert response.position_errors[0] == 0.0
    # Free position: from the seed the solver barely moves the hand's origin.
    assert np.linalg.norm(hand[:3, 3] - fk(STATE)["panda_hand"][:3, 3]) < 0.3


def test_solve_ik_point_objective_aims_the_ray_or_is_refused(node):
    """POINT = look-at. Served once the core has an aim objective; refused clearly before."""
    target = np.array([0.6, 0.3, 0.2])
    o = IKObjective(type=IKObjective.POINT, link="panda_hand")
    o.local_point.y, o.local_point.z = 0.05, 0.1
    o.local_axis.z = 1.0
    o.target.pose.position.x, o.target.pose.position.y, o.target.pose.position.z = target
    response = solve(node, [o])
    if response.error_code.val == ErrorCode.INVALID_REQUEST:  # a core without aim objectives
        assert "POINT (aim / look-at) objectives are not supported" in response.message
        assert_serving(node)
        return
    assert response.success, response.message
    hand = fk(q_of(response.solution))["panda_hand"]
    origin = (hand @ np.array([0.0, 0.05, 0.1, 1.0]))[:3]
    to_target = (target - origin) / np.linalg.norm(target - origin)
    angle = math.acos(np.clip(hand[:3, 2] @ to_target, -1, 1))
    assert angle <= ROT_TOL + ROT_SLACK


def test_solve_ik_relative_objective(node):
    """reference_link: the hand's pose in link3's frame *at the solution*."""
    q_ref = np.array([-0.5, 0.2, 0.4, -1.8, -0.2, 2.2, -0.4, 0.01])
    poses = fk(q_ref)
    relative = np.linalg.inv(poses["panda_link3"]) @ poses["panda_hand"]
    o = IKObjective(
        type=IKObjective.POSE,
        link="panda_hand",
        reference_link="panda_link3",
        target=pose_stamped(relative),
    )
    response = solve(node, [o], seed=joint_state(np.clip(q_ref + 0.2, LOWER, UPPER)))
    assert response.success, response.message
    got = fk(q_of(response.solution))
    p_err, r_err = ref.pose_errors(relative, np.linalg.inv(got["panda_link3"]) @ got["panda_hand"])
    assert p_err <= POS_TOL + POS_SLACK and r_err <= ROT_TOL + ROT_SLACK


def test_solve_ik_target_in_a_moving_link_frame_uses_fk_at_the_seed(node):
    seed = STATE
    q_target = np.array([0.3, -0.2, 0.1, -2.0, 0.2, 1.6, 0.3, 0.02])
    in_base = fk(q_target)["panda_hand"]
    link2_at_seed = fk(seed)["panda_link2"]
    target = np.linalg.inv(link2_at_seed) @ in_base
    response = solve(
        node, [pose_objective("panda_hand", target, frame="panda_link2")], seed=joint_state(seed)
    )
    assert response.success, response.message
    assert_pose_reached(q_of(response.solution), "panda_hand", in_base)


def test_solve_ik_default_seed_is_joint_states_and_max_deviation_holds(node):
    q_target = STATE + np.array([0.05, -0.04, 0.05, 0.05, -0.03, 0.04, 0.05, 0.0])
    target = fk(q_target)["panda_hand"]
    response = solve(node, [pose_objective("panda_hand", target)], max_deviation=0.06)
    assert response.success, response.message
    q = q_of(response.solution)
    assert np.all(np.abs(q - STATE) <= 0.06 + 1e-6), q - STATE
    assert_pose_reached(q, "panda_hand", target)
    # The finger moves nothing the objective sees: it keeps the seed's value.
    assert q[-1] == pytest.approx(STATE[-1], abs=1e-6)


def test_solve_ik_active_joints(node):
    q_target = STATE.copy()
    q_target[[1, 3]] += [0.2, -0.15]
    target = fk(q_target)["panda_hand"]
    o = pose_objective("panda_hand", target, kind=IKObjective.POSITION)
    response = solve(
        node, [o], seed=joint_state(STATE), active_joints=["panda_joint2", "panda_joint4"]
    )
    assert response.success, response.message
    q = q_of(response.solution)
    moved = np.flatnonzero(np.abs(q - STATE) > 1e-6)
    assert set(moved) <= {1, 3}, q - STATE
    assert np.linalg.norm(fk(q)["panda_hand"][:3, 3] - target[:3, 3]) <= POS_TOL + POS_SLACK


def test_solve_ik_unreachable_target_reports_no_solution(node):
    far = np.eye(4)
    far[:3, 3] = [2.5, 0.0, 0.5]  # beyond the Panda's reach: no budget would help
    for timeout in (30.0, 1e-6):
        response = solve(
            node, [pose_objective("panda_hand", far)], max_restarts=2, timeout=_duration(timeout)
        )
        assert not response.success
        assert response.error_code.val == ErrorCode.NO_SOLUTION, response.message
        assert "out of reach" in response.message
        assert_within_limits(q_of(response.solution))  # the best configuration found
        assert response.position_errors[0] > 1.0
    # Within the reach bound but not reachable (above the stretched arm): the restarts run out
    # (NO_SOLUTION), or, with a tiny budget, the time does (TIMEOUT).
    high = np.eye(4)
    high[:3, 3] = [0.0, 0.0, 1.30]
    response = solve(
        node, [pose_objective("panda_hand", high)], max_restarts=2, timeout=_duration(30.0)
    )
    assert response.error_code.val == ErrorCode.NO_SOLUTION, response.message
    assert "no solution" in response.message
    response = solve(
        node, [pose_objective("panda_hand", high)], max_restarts=50, timeout=_duration(1e-6)
    )
    assert not response.success
    assert response.error_code.val == ErrorCode.TIMEOUT, response.message


def _duration(seconds: float):
    from builtin_interfaces.msg import Duration

    return Duration(sec=int(seconds), nanosec=int((seconds % 1) * 1e9))


# --- solve_ik_batch ------------------------------------------------------------------------


def test_solve_ik_batch_matches_reference(node):
    rng = np.random.default_rng(3)
    qs = random_q(rng, 12)
    link2 = fk(STATE)["panda_link2"]  # the shared seed is /joint_states = STATE
    request = SolveIKBatch.Request(link="panda_hand")
    targets = []
    for i, q in enumerate(qs):
        t = fk(q)["panda_hand"]
        targets.append(t)
        # every third target is given in panda_link2's frame (at the seed)
        request.targets.append(
            pose_stamped(np.linalg.inv(link2) @ t, "panda_link2")
            if i % 3 == 0
            else pose_stamped(t, "panda_link0" if i % 3 == 1 else "")
        )
    response = node.call(SolveIKBatch, "solve_ik_batch", request)
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    assert len(response.solutions) == len(response.success) == len(qs)
    assert len(response.position_errors) == len(response.orientation_errors) == len(qs)
    assert sum(response.success) >= 10, response.message
    for solution, ok, target in zip(response.solutions, response.success, targets):
        q = q_of(solution)
        assert_within_limits(q)
        if ok:
            assert_pose_reached(q, "panda_hand", target)
    assert response.solve_time > 0


def _packed_row(t: np.ndarray) -> list[float]:
    """[x, y, z, qx, qy, qz, qw] of a 4x4 transform, via the same independent pose_stamped."""
    msg = pose_stamped(t).pose
    o, p = msg.orientation, msg.position
    return [p.x, p.y, p.z, o.x, o.y, o.z, o.w]


def test_solve_ik_batch_packed_matches_reference(node):
    rng = np.random.default_rng(7)
    qs = random_q(rng, 20)
    link2 = fk(STATE)["panda_link2"]  # targets in panda_link2's frame at the seed (STATE)
    targets = [fk(q)["panda_hand"] for q in qs]
    request = SolveIKBatch.Request(link="panda_hand", packed_frame_id="panda_link2")
    request.packed_poses = [v for t in targets for v in _packed_row(np.linalg.inv(link2) @ t)]
    response = node.call(SolveIKBatch, "solve_ik_batch", request)
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    assert list(response.solutions) == []  # packed in, packed out
    assert list(response.joint_names) == JOINTS
    q = np.asarray(response.positions).reshape(len(qs), len(JOINTS))
    assert len(response.success) == len(qs) and sum(response.success) >= 18, response.message
    for row, ok, target in zip(q, response.success, targets):
        assert_within_limits(row)
        if ok:
            assert_pose_reached(row, "panda_hand", target)


def test_solve_ik_batch_packed_positions_equal_solutions(node):
    """A PoseStamped request gets both answers; the packed rows are the JointStates."""
    rng = np.random.default_rng(8)
    request = SolveIKBatch.Request(
        link="panda_hand", targets=[pose_stamped(fk(q)["panda_hand"]) for q in random_q(rng, 4)]
    )
    response = node.call(SolveIKBatch, "solve_ik_batch", request)
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    packed = np.asarray(response.positions).reshape(4, len(JOINTS))
    np.testing.assert_array_equal(packed, [q_of(s) for s in response.solutions])


def test_solve_ik_batch_position_only_with_local_point(node):
    rng = np.random.default_rng(4)
    local = np.array([0.0, 0.0, 0.1034])  # the TCP, as a point on panda_hand
    request = SolveIKBatch.Request(link="panda_hand", orientation_weight=0.0)
    request.local_point.z = float(local[2])
    points = []
    for q in random_q(rng, 5):
        p = (fk(q)["panda_hand"] @ np.append(local, 1))[:3]
        points.append(p)
        t = np.eye(4)
        t[:3, 3] = p
        msg = pose_stamped(t)
        msg.pose.orientation.w = 0.0  # unused for position-only: a zero quaternion is fine
        request.targets.append(msg)
    response = node.call(SolveIKBatch, "solve_ik_batch", request)
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    assert sum(response.success) >= 4
    for solution, ok, p in zip(response.solutions, response.success, points):
        if ok:
            got = fk(q_of(solution))["panda_hand"] @ np.append(local, 1)
            assert np.linalg.norm(got[:3] - p) <= POS_TOL + POS_SLACK


# --- bad input: specific error code, readable message, node keeps serving --------------------


def _good_objective():
    return pose_objective("panda_hand", fk(STATE)["panda_hand"])


def _ik(**changes):
    objective = _good_objective()
    fields = {}
    for key, value in changes.items():
        if key.startswith("o_"):
            value(objective) if callable(value) else setattr(objective, key[2:], value)
        else:
            fields[key] = value
    fields.setdefault("objectives", [objective])
    return SolveIK.Request(**fields)


def _set(path, value):
    def apply(objective):
        target = objective
        *parents, last = path.split(".")
        for name in parents:
            target = getattr(target, name)
        setattr(target, last, value)

    return apply


def _zero_orientation(pose_stamped):
    o = pose_stamped.pose.orientation
    o.x = o.y = o.z = o.w = 0.0


def _zero_quaternion(objective):
    _zero_orientation(objective.target)


IK_CASES = {
    "unknown link": (_ik(o_link="panda_link99"), ErrorCode.UNKNOWN_LINK, "panda_link99"),
    "unknown reference_link": (_ik(o_reference_link="nope"), ErrorCode.UNKNOWN_LINK, "nope"),
    "unknown frame": (
        _ik(o_=_set("target.header.frame_id", "map")),
        ErrorCode.UNKNOWN_FRAME,
        "map",
    ),
    "NaN position": (
        _ik(o_=_set("target.pose.position.x", math.nan)),
        ErrorCode.INVALID_POSE,
        "NaN",
    ),
    "inf orientation": (
        _ik(o_=_set("target.pose.orientation.y", math.inf)),
        ErrorCode.INVALID_POSE,
        "NaN or infinite",
    ),
    "zero quaternion": (_ik(o_=_zero_quaternion), ErrorCode.INVALID_POSE, "zero quaternion"),
    "no objectives": (SolveIK.Request(), ErrorCode.INVALID_REQUEST, "no objectives"),
    "empty link": (_ik(o_link=""), ErrorCode.INVALID_REQUEST, "link is empty"),
    "unknown objective type": (_ik(o_type=42), ErrorCode.INVALID_REQUEST, "unknown objective"),
    "zero hinge axis": (_ik(o_type=IKObjective.HINGE), ErrorCode.INVALID_REQUEST, "axis"),
    "negative weight": (_ik(o_position_weight=-1.0), ErrorCode.INVALID_REQUEST, "weight"),
    "unknown active joint": (
        _ik(active_joints=["panda_joint1", "elbow"]),
        ErrorCode.UNKNOWN_JOINT,
        "elbow",
    ),
    "seed names/positions mismatch": (
        _ik(seed=JointState(name=["panda_joint1", "panda_joint2"], position=[0.1])),
        ErrorCode.INVALID_JOINT_STATE,
        "2 names but 1 positions",
    ),
    "seed NaN": (
        _ik(seed=JointState(name=["panda_joint1"], position=[math.nan])),
        ErrorCode.INVALID_JOINT_STATE,
        "NaN",
    ),
    "seed outside limits": (
        _ik(seed=JointState(name=["panda_joint4"], position=[1.0])),
        ErrorCode.INVALID_JOINT_STATE,
        "limits",
    ),
    "seed unknown joint": (
        _ik(seed=JointState(name=["shoulder_pan_joint"], position=[0.0])),
        ErrorCode.UNKNOWN_JOINT,
        "shoulder_pan_joint",
    ),
    "negative max_deviation": (_ik(max_deviation=-0.1), ErrorCode.INVALID_REQUEST, "max_deviation"),
    "NaN tolerance": (
        _ik(position_tolerance=math.nan),
        ErrorCode.INVALID_REQUEST,
        "position_tolerance",
    ),
    "max_restarts < -1": (_ik(max_restarts=-5), ErrorCode.INVALID_REQUEST, "max_restarts"),
    "relative target in another frame": (
        _ik(o_reference_link="panda_link3", o_=_set("target.header.frame_id", "panda_link2")),
        ErrorCode.INVALID_REQUEST,
        "reference_link",
    ),
}


@pytest.mark.parametrize("case", list(IK_CASES))
def test_solve_ik_bad_input(node, case):
    request, code, text = IK_CASES[case]
    response = node.call(SolveIK, "solve_ik", request)
    assert response.success is False
    assert response.error_code.val == code, (response.error_code.val, response.message)
    assert text in response.message
    assert_serving(node)


def _batch(**changes):
    request = SolveIKBatch.Request(
        link="panda_hand", targets=[pose_stamped(fk(STATE)["panda_hand"])]
    )
    for key, value in changes.items():
        value(request) if callable(value) else setattr(request, key, value)
    return request


BATCH_CASES = {
    "no targets": (_batch(targets=[]), ErrorCode.INVALID_REQUEST, "no targets"),
    "empty link": (_batch(link=""), ErrorCode.INVALID_REQUEST, "link"),
    "unknown link": (_batch(link="tool0"), ErrorCode.UNKNOWN_LINK, "tool0"),
    "NaN target": (
        _batch(x=lambda r: setattr(r.targets[0].pose.position, "y", math.nan)),
        ErrorCode.INVALID_POSE,
        "targets[0]",
    ),
    "zero quaternion": (
        _batch(x=lambda r: _zero_orientation(r.targets[0])),
        ErrorCode.INVALID_POSE,
        "zero quaternion",
    ),
    "unknown frame": (
        _batch(x=lambda r: setattr(r.targets[0].header, "frame_id", "odom")),
        ErrorCode.UNKNOWN_FRAME,
        "odom",
    ),
    "seed mismatch": (
        _batch(seed=JointState(name=["panda_joint1"], position=[])),
        ErrorCode.INVALID_JOINT_STATE,
        "1 names but 0 positions",
    ),
    "unknown active joint": (
        _batch(active_joints=["wrist_1_joint"]),
        ErrorCode.UNKNOWN_JOINT,
        "wrist_1_joint",
    ),
    "negative orientation weight": (
        _batch(orientation_weight=-1.0),
        ErrorCode.INVALID_REQUEST,
        "orientation_weight",
    ),
    "targets and packed_poses both": (
        _batch(packed_poses=[0.3, 0, 0.5, 0, 0, 0, 1]),
        ErrorCode.INVALID_REQUEST,
        "use one of them",
    ),
    "packed: not a multiple of 7": (
        _batch(targets=[], packed_poses=[0.0] * 13),
        ErrorCode.INVALID_REQUEST,
        "multiple of 7",
    ),
    "packed: NaN in the second target": (
        _batch(
            targets=[], packed_poses=[0.3, 0, 0.5, 0, 0, 0, 1] + [0.3, math.nan, 0.5, 0, 0, 0, 1]
        ),
        ErrorCode.INVALID_POSE,
        "packed_poses[1] position",
    ),
    "packed: zero quaternion": (
        _batch(targets=[], packed_poses=[0.3, 0, 0.5, 0, 0, 0, 0]),
        ErrorCode.INVALID_POSE,
        "packed_poses[0] orientation is a zero quaternion",
    ),
    "packed: unknown frame": (
        _batch(targets=[], packed_poses=[0.3, 0, 0.5, 0, 0, 0, 1], packed_frame_id="odom"),
        ErrorCode.UNKNOWN_FRAME,
        "odom",
    ),
}


@pytest.mark.parametrize("case", list(BATCH_CASES))
def test_solve_ik_batch_bad_input(node, case):
    request, code, text = BATCH_CASES[case]
    response = node.call(SolveIKBatch, "solve_ik_batch", request)
    assert response.error_code.val == code, (response.error_code.val, response.message)
    assert text in response.message
    assert list(response.solutions) == [] and list(response.success) == []
    assert_serving(node)


FK_CASES = {
    "unknown link": (
        ComputeFK.Request(link_names=["panda_hand", "base_link"]),
        ErrorCode.UNKNOWN_LINK,
        "base_link",
    ),
    "unknown frame": (ComputeFK.Request(frame_id="map"), ErrorCode.UNKNOWN_FRAME, "map"),
    "state mismatch": (
        ComputeFK.Request(robot_state=JointState(name=[], position=[0.1])),
        ErrorCode.INVALID_JOINT_STATE,
        "0 names but 1 positions",
    ),
    "state unknown joint": (
        ComputeFK.Request(robot_state=JointState(name=["j"], position=[0.0])),
        ErrorCode.UNKNOWN_JOINT,
        "not actuated joints",
    ),
    "state inf": (
        ComputeFK.Request(robot_state=JointState(name=["panda_joint1"], position=[math.inf])),
        ErrorCode.INVALID_JOINT_STATE,
        "NaN or infinite",
    ),
}


@pytest.mark.parametrize("case", list(FK_CASES))
def test_compute_fk_bad_input(node, case):
    request, code, text = FK_CASES[case]
    response = node.call(ComputeFK, "compute_fk", request)
    assert response.error_code.val == code, (response.error_code.val, response.message)
    assert text in response.message
    assert list(response.poses) == []
    assert_serving(node)


def test_node_log_has_no_internal_errors(node):
    log = node.node.log()
    assert "internal error" not in log, log
    assert "Traceback" not in log, log


# --- parameters ------------------------------------------------------------------------------


def test_parameters_are_declared_documented_and_loaded_from_the_yaml(node):
    yaml = pytest.importorskip("yaml")
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import DescribeParameters, GetParameters, SetParameters

    values = yaml.safe_load(CONFIG.read_text())["pyroki_ros_node"]["ros__parameters"]
    names = sorted(values)
    described = node.call(
        DescribeParameters, "describe_parameters", DescribeParameters.Request(names=names)
    )
    kinds = {
        bool: ParameterType.PARAMETER_BOOL,
        int: ParameterType.PARAMETER_INTEGER,
        float: ParameterType.PARAMETER_DOUBLE,
        str: ParameterType.PARAMETER_STRING,
        list: ParameterType.PARAMETER_INTEGER_ARRAY,
    }
    for name, descriptor in zip(names, described.descriptors):
        assert descriptor.name == name
        assert len(descriptor.description) > 20, name
        assert descriptor.type == kinds[type(values[name])], name
    got = node.call(GetParameters, "get_parameters", GetParameters.Request(names=names))
    overridden = {
        "warmup_batch_sizes",
        "warmup_plan",
        "planning_timeout",  # test nodes without the warm-up: 120 s (node_helpers.start_node)
        "cache_serving_compiles",  # test nodes share their compiles (node_helpers.start_node)
        "compilation_cache_dir",
        "fixed_frames",
    }
    for name, value in zip(names, got.values):
        if name in overridden:
            continue
        actual = {
            ParameterType.PARAMETER_BOOL: value.bool_value,
            ParameterType.PARAMETER_INTEGER: value.integer_value,
            ParameterType.PARAMETER_DOUBLE: value.double_value,
            ParameterType.PARAMETER_STRING: value.string_value,
        }.get(value.type)
        assert actual == values[name], name

    def set_string(name, text):
        request = SetParameters.Request(
            parameters=[
                Parameter(
                    name=name,
                    value=ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=text),
                )
            ]
        )
        return node.call(SetParameters, "set_parameters", request).results[0]

    result = set_string("tip_link", "no_such_link")
    assert not result.successful and "no_such_link" in result.reason
    result = set_string("device", "gpu")  # read-only at run time
    assert not result.successful
    assert set_string("tip_link", "panda_link7").successful
    assert set_string("tip_link", "panda_hand").successful
    assert_serving(node)
