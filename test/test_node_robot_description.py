"""End to end: the robot model comes from /robot_description (transient local, like
robot_state_publisher) and can change while the node runs.

Stages, in this module's order: no model yet (NO_ROBOT_MODEL, garbage is logged and ignored),
the Panda loads (garbage afterwards keeps it), then a UR5 replaces it while a Panda batch is
being solved, and requests use UR5 links. Answers are checked with the independent reference
FK. No /joint_states is published here (NO_JOINT_STATE).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import reference_fk as ref
from geometry_msgs.msg import PoseStamped
from harness import wait_until
from node_helpers import LATCHED, pose_stamped, start_node
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.srv import ComputeFK, SolveIK, SolveIKBatch
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from pyroki_ros.robots import urdf_path

PANDA = urdf_path("panda").read_text()
UR5 = urdf_path("ur5").read_text()
PANDA_MODEL, UR5_MODEL = ref.parse_urdf(PANDA), ref.parse_urdf(UR5)
PANDA_JOINTS = ref.actuated_joint_names(PANDA_MODEL)
UR5_JOINTS = ref.actuated_joint_names(UR5_MODEL)

GARBAGE = [
    "this is not a URDF",
    (
        "<robot name='broken'><link name='a'/><joint name='j' type='revolute'>"
        "<parent link='a'/><child link='missing'/><axis xyz='0 0 1'/>"
        "<limit lower='-1' upper='1' effort='1' velocity='1'/></joint></robot>"
    ),
    "<robot name='no_joints'><link name='only'/></robot>",
]


def msg_matrix(pose):
    o, p = pose.orientation, pose.position
    return ref.make_transform(ref.quat_wxyz_to_matrix([o.w, o.x, o.y, o.z]), [p.x, p.y, p.z])


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    node = start_node(tmp_path_factory, "test_node_robot_description")
    try:
        node.description = node.session.node.create_publisher(String, "/robot_description", LATCHED)
        node.published = []
        wait_until(
            lambda: node.description.get_subscription_count() > 0,
            120,
            what="the node subscribing to /robot_description",
        )
        yield node
    finally:
        node.close()


def publish(env, urdf: str) -> None:
    env.published.append(urdf)
    env.description.publish(String(data=urdf))


def assert_log_grows_with(env, text: str, count: int) -> None:
    wait_until(lambda: env.node.log().count(text) >= count, 120, what=f"{count} x '{text}' logged")


def test_requests_before_any_model_get_no_robot_model(env):
    if env.published:
        pytest.skip("a robot_description was already published in this module")
    # A publisher without a message: the node re-subscribes (its remedy for a transient-local
    # sample lost on the way to a late-joining reader), and still gets what comes next.
    wait_until(
        lambda: "has a publisher but no description arrived yet" in env.node.log(),
        120,
        what="the node's description watchdog",
    )
    fk = env.call(ComputeFK, "compute_fk", ComputeFK.Request(link_names=["panda_hand"]))
    assert fk.error_code.val == ErrorCode.NO_ROBOT_MODEL
    assert "no robot model" in fk.message and "/robot_description" in fk.message
    ik = env.call(
        SolveIK,
        "solve_ik",
        SolveIK.Request(objectives=[IKObjective(type=IKObjective.POSE, link="panda_hand")]),
    )
    assert ik.success is False and ik.error_code.val == ErrorCode.NO_ROBOT_MODEL
    batch = env.call(
        SolveIKBatch,
        "solve_ik_batch",
        SolveIKBatch.Request(link="panda_hand", targets=[PoseStamped()]),
    )
    assert batch.error_code.val == ErrorCode.NO_ROBOT_MODEL
    # Garbage descriptions: an error each, still no model, still serving.
    for k, garbage in enumerate(GARBAGE, start=1):
        publish(env, garbage)
        assert_log_grows_with(env, "invalid URDF from robot_description", k)
    assert env.node.alive()
    fk = env.call(ComputeFK, "compute_fk", ComputeFK.Request(link_names=["panda_hand"]))
    assert fk.error_code.val == ErrorCode.NO_ROBOT_MODEL
    assert "no robot model loaded" in env.node.log()


def test_panda_loads_and_a_bad_description_keeps_it(env):
    publish(env, PANDA)
    env.wait_ready("panda_hand", joint="panda_joint1")
    # Nothing on /joint_states and an empty robot_state: NO_JOINT_STATE.
    fk = env.call(ComputeFK, "compute_fk", ComputeFK.Request(link_names=["panda_hand"]))
    assert fk.error_code.val == ErrorCode.NO_JOINT_STATE, fk.message
    failures = env.node.log().count("invalid URDF")
    publish(env, "<robot name='half'><link name='x'>")  # truncated XML
    assert_log_grows_with(env, "invalid URDF", failures + 1)
    assert "still using robot 'panda'" in env.node.log()
    q = np.array([0.2, -0.3, 0.1, -2.0, 0.3, 1.5, 0.4, 0.01])
    fk = env.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(
            robot_state=JointState(name=PANDA_JOINTS, position=q.tolist()),
            link_names=["panda_hand"],
        ),
    )
    assert fk.error_code.val == ErrorCode.SUCCESS, fk.message
    expected = ref.reference_fk(PANDA_MODEL, q, PANDA_JOINTS)["panda_hand"]
    p_err, r_err = ref.pose_errors(expected, msg_matrix(fk.poses[0].pose))
    assert p_err < 1e-5 and r_err < 1e-5


def test_swap_to_ur5_while_a_panda_batch_runs(env):
    publish(env, PANDA)  # (already loaded when the stages run in order: "unchanged")
    env.wait_ready("panda_hand", joint="panda_joint1")
    rng = np.random.default_rng(5)
    lower, upper = ref.actuated_joint_limits(PANDA_MODEL)
    qs = rng.uniform(lower + 0.1 * (upper - lower), upper - 0.1 * (upper - lower), (100, 8))
    targets = [ref.reference_fk(PANDA_MODEL, q, PANDA_JOINTS)["panda_hand"] for q in qs]
    request = SolveIKBatch.Request(link="panda_hand", targets=[pose_stamped(t) for t in targets])
    request.seed = JointState(name=PANDA_JOINTS, position=((lower + upper) / 2).tolist())
    result = {}

    def run_batch():
        try:
            result["response"] = env.call(SolveIKBatch, "solve_ik_batch", request, timeout=300)
        except Exception as e:  # noqa: BLE001 -- reported below
            result["error"] = e

    batch = threading.Thread(target=run_batch)
    batch.start()
    publish(env, UR5)  # while the batch (and its compilation) runs
    try:
        env.wait_ready("tool0", joint="shoulder_pan_joint")
    finally:
        batch.join(timeout=300)
    assert "error" not in result, result.get("error")
    response = result["response"]
    # The batch was answered, for the robot it was asked about.
    assert response.error_code.val == ErrorCode.SUCCESS, response.message
    assert sum(response.success) >= 90
    for solution, ok, target in zip(response.solutions, response.success, targets):
        assert list(solution.name) == PANDA_JOINTS
        if ok:
            got = ref.reference_fk(PANDA_MODEL, np.asarray(solution.position), PANDA_JOINTS)
            p_err, r_err = ref.pose_errors(target, got["panda_hand"])
            assert p_err <= 1.1e-3 and r_err <= math.radians(1) + 1e-3

    # Now everything is UR5: its links, its joints, its root as the base frame (the configured
    # panda_link0 does not exist in it).
    assert "base_frame 'panda_link0' is not a link of robot" in env.node.log()
    q = np.array([0.3, -1.2, 1.4, -0.8, 1.2, 0.5])
    fk = env.call(
        ComputeFK,
        "compute_fk",
        ComputeFK.Request(
            robot_state=JointState(name=UR5_JOINTS, position=q.tolist()),
            link_names=["tool0", "wrist_2_link"],
        ),
    )
    assert fk.error_code.val == ErrorCode.SUCCESS, fk.message
    expected = ref.reference_fk(UR5_MODEL, q, UR5_JOINTS)
    for link, pose in zip(fk.link_names, fk.poses):
        assert pose.header.frame_id == "world"
        p_err, r_err = ref.pose_errors(expected[link], msg_matrix(pose.pose))
        assert p_err < 1e-5 and r_err < 1e-5, link

    target = expected["tool0"]
    ik = env.call(
        SolveIK,
        "solve_ik",
        SolveIK.Request(
            objectives=[
                IKObjective(
                    type=IKObjective.POSE, link="tool0", target=pose_stamped(target, "world")
                )
            ],
            seed=JointState(name=UR5_JOINTS, position=(q + 0.2).tolist()),
        ),
    )
    assert ik.success, ik.message
    assert list(ik.solution.name) == UR5_JOINTS
    got = ref.reference_fk(UR5_MODEL, np.asarray(ik.solution.position), UR5_JOINTS)["tool0"]
    p_err, r_err = ref.pose_errors(target, got)
    assert p_err <= 1.1e-3 and r_err <= math.radians(1) + 1e-3

    stale = env.call(
        SolveIK,
        "solve_ik",
        SolveIK.Request(objectives=[IKObjective(type=IKObjective.POSE, link="panda_hand")]),
    )
    assert stale.success is False and stale.error_code.val == ErrorCode.UNKNOWN_LINK
    assert "panda_hand" in stale.message and "ur5" in stale.message
    assert env.node.alive()
    assert "Traceback" not in env.node.log()
