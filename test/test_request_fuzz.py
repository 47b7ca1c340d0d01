"""Property-based test of the request translation (hypothesis): random, mostly malformed
messages go through what the node does with every request (requests.seed / configuration /
objective, the pose-row and JointState checks). Each call either returns finite arrays of the
documented shapes (unit quaternions) or raises RequestError with a specific code and a short
message; never another exception, never FAILURE.

Derandomized (the same examples on every run) and without an example database, so that CI is
reproducible and the repository stays clean.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")
hypothesis = pytest.importorskip("hypothesis")

from geometry_msgs.msg import Pose, PoseStamped
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroki_ros.msg import ErrorCode, IKObjective
from sensor_msgs.msg import JointState

from pyroki_ros.robots import urdf_path
from pyroki_ros.ros import requests as R
from pyroki_ros.ros.model import LoadedModel
from pyroki_ros.ros.requests import RequestError, joint_state_positions

MODEL = LoadedModel(urdf_path("panda").read_text())
CODES = {
    value
    for name, value in vars(ErrorCode).items()
    if name.isupper() and isinstance(value, int) and name not in ("SUCCESS", "FAILURE")
}
MAX_MESSAGE = 2000  # characters: an error message must never grow with the input
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# Floats a hostile client sends: ordinary, edge and absurd values.
floats = st.one_of(
    st.floats(-2.0, 2.0),
    st.sampled_from(
        [0.0, -0.0, 1e-320, 5e-324, 1e300, -1e300, 1e6, 1e7, math.inf, -math.inf, math.nan]
    ),
    st.floats(allow_nan=True, allow_infinity=True),
)
names = st.one_of(
    st.sampled_from([*MODEL.joint_names, *MODEL.link_names, "panda_finger_joint2"]),
    st.text(max_size=12),
)


def assert_refused(error: RequestError) -> None:
    assert error.code in CODES, (error.code, error.message)
    assert error.message and len(error.message) <= MAX_MESSAGE, len(error.message)


@st.composite
def poses(draw) -> Pose:
    pose = Pose()
    p, o = pose.position, pose.orientation
    p.x, p.y, p.z = (draw(floats) for _ in range(3))
    if draw(st.booleans()):  # often a plausible unit quaternion
        q = np.asarray([draw(st.floats(-1, 1)) for _ in range(4)]) + [0, 0, 0, 1e-3]
        o.x, o.y, o.z, o.w = (q / np.linalg.norm(q)).tolist()
    else:
        o.x, o.y, o.z, o.w = (draw(floats) for _ in range(4))
    return pose


@st.composite
def joint_states(draw) -> JointState:
    listed = draw(st.lists(names, max_size=12))
    count = len(listed) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    positions = [draw(st.one_of(st.floats(-3, 3), floats)) for _ in range(max(count, 0))]
    return JointState(name=listed, position=positions)


@st.composite
def objectives(draw) -> IKObjective:
    msg = IKObjective()
    msg.type = draw(st.integers(-2, 9))
    msg.link = draw(names)
    msg.reference_link = draw(st.one_of(st.just(""), names))
    msg.target = PoseStamped(pose=draw(poses()))
    msg.target.header.frame_id = draw(st.one_of(st.just(""), names))
    for vector in (msg.axis, msg.local_point, msg.local_axis):
        vector.x, vector.y, vector.z = (draw(floats) for _ in range(3))
    msg.position_weight = draw(st.one_of(st.just(1.0), floats))
    msg.orientation_weight = draw(st.one_of(st.just(1.0), floats))
    return msg


@FUZZ
@given(joint_states())
def test_seed_from_any_joint_state(state):
    try:
        q = R.seed(MODEL, state, None, "seed")
    except RequestError as e:
        assert_refused(e)
        return
    assert q.shape == (len(MODEL.joint_names),) and np.all(np.isfinite(q))
    limits = MODEL.robot.limits
    assert np.all(q >= limits.lower) and np.all(q <= limits.upper)


@FUZZ
@given(joint_states())
def test_exact_configuration_from_any_joint_state(state):
    try:
        q, outside = R.configuration(MODEL, state, None, "robot_state")
    except RequestError as e:
        assert_refused(e)
        return
    assert q.shape == (len(MODEL.joint_names),) and np.all(np.isfinite(q))
    given_values = dict(zip(state.name, state.position))
    for j, name in enumerate(MODEL.joint_names):  # exactly the given value, never clipped
        if name in given_values:
            assert q[j] == given_values[name]
    assert set(outside) <= set(MODEL.joint_names)


@FUZZ
@given(joint_states())
def test_joint_state_positions(state):
    try:
        values = joint_state_positions(state, "a message")
    except RequestError as e:
        assert_refused(e)
        return
    assert list(values) == list(state.name)
    assert all(math.isfinite(v) for v in values.values())


@FUZZ
@given(objectives())
def test_objective_from_any_message(msg):
    frames = MODEL.frames_at(MODEL.robot.limits.center())
    try:
        made = R.objective(MODEL, msg, "objectives[0]", frames)
    except RequestError as e:
        assert_refused(e)
        return
    for field in (made.target, made.axis, made.local_point, made.local_axis, made.weights):
        # The solver works in float32: its squares of these must not overflow either.
        with np.errstate(over="ignore"):
            assert np.all(np.isfinite(np.asarray(field, np.float32) ** 2)), made
    assert abs(np.linalg.norm(np.asarray(made.target)[:4]) - 1) < 1e-6
    assert made.link in MODEL.link_names


@FUZZ
@given(st.lists(poses(), min_size=1, max_size=8), st.booleans())
def test_pose_rows(pose_list, orientation):
    rows = [
        [p.position.x, p.position.y, p.position.z]
        + [p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w]
        for p in pose_list
    ]
    try:
        out = R.pose_rows(np.asarray(rows), "packed_poses", orientation=orientation)
    except RequestError as e:
        assert_refused(e)
        return
    assert out.shape == (len(rows), 7)
    with np.errstate(over="ignore"):
        assert np.all(np.isfinite(out.astype(np.float32) ** 2))
    assert np.allclose(np.linalg.norm(out[:, :4], axis=1), 1.0)


def test_huge_name_lists_are_linear_and_their_messages_short():
    import time

    names_60k = [f"j{i % 50_000}" for i in range(60_000)]  # 10,000 duplicated
    start = time.perf_counter()
    with pytest.raises(RequestError) as refused:
        joint_state_positions(JointState(name=names_60k, position=[0.0] * 60_000), "seed")
    assert time.perf_counter() - start < 0.5
    assert refused.value.code == ErrorCode.INVALID_JOINT_STATE
    assert "more" in refused.value.message and len(refused.value.message) < MAX_MESSAGE

    unknown = [f"x{i}" for i in range(60_000)]
    start = time.perf_counter()
    with pytest.raises(RequestError) as refused:
        R.seed(MODEL, JointState(name=unknown, position=[0.0] * 60_000), None, "seed")
    assert time.perf_counter() - start < 0.5
    assert refused.value.code == ErrorCode.UNKNOWN_JOINT
    assert len(refused.value.message) < MAX_MESSAGE
