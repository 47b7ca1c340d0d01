"""End to end: teleoperation through ``~/goal_pose`` / ``~/goal`` -> JointTrajectory.

The node is the real entry point in a subprocess; this process plays the robot driver
(/joint_states, fixed at STATE: no controller moves the robot here) and records the
trajectory topic. Reached poses are checked with the independent reference FK; every output
step must respect velocity_scaling x URDF velocity limit x step duration. No timing assertions.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import reference_fk as ref
from geometry_msgs.msg import PoseStamped
from harness import NODE, wait_until
from node_helpers import JOINTS, MODEL, STATE, URDF, pose_stamped, publish_robot, start_node
from pyroki_ros.msg import IKObjective, MultiLinkGoal
from trajectory_msgs.msg import JointTrajectory

from pyroki_ros.ros.teleop import TELEOP_RESYNC_SECONDS

BASE = "panda_link0"
RATE_HZ, SCALING = 50.0, 0.5  # config/panda.yaml
TRAJECTORY_TOPIC = "/joint_trajectory_controller/joint_trajectory"


def velocity_limits() -> np.ndarray:
    limits = {
        j.get("name"): float(j.find("limit").get("velocity"))
        for j in ET.fromstring(URDF).iter("joint")
        if j.find("limit") is not None and j.find("limit").get("velocity")
    }
    return np.array([limits[name] for name in JOINTS])


STEP_LIMIT = SCALING * velocity_limits() / RATE_HZ


def fk(q):
    return ref.reference_fk(MODEL, np.asarray(q, np.float64), JOINTS)


def cost(q, target) -> float:
    """Squared position error + squared rotation residual (2 sin(angle / 2)) of the hand."""
    hand = fk(q)["panda_hand"]
    p_err, angle = ref.pose_errors(target, hand)
    return p_err**2 + (2 * math.sin(angle / 2)) ** 2


POS_TOL, ROT_TOL = 1e-3 + 1e-4, math.radians(1.0) + 1e-3  # tolerances + float32 slack


def reached(q, target, pos_tol=POS_TOL, rot_tol=ROT_TOL) -> bool:
    p_err, r_err = ref.pose_errors(target, fk(q)["panda_hand"])
    return p_err <= pos_tol and r_err <= rot_tol


class Recorder:
    def __init__(self):
        self.lock = threading.Lock()
        self.messages: list[JointTrajectory] = []

    def __call__(self, msg):
        with self.lock:
            self.messages.append(msg)

    def since(self, index: int) -> list[JointTrajectory]:
        with self.lock:
            return self.messages[index:]

    def count(self) -> int:
        with self.lock:
            return len(self.messages)


@pytest.fixture(scope="module")
def teleop(tmp_path_factory):
    env = start_node(tmp_path_factory, "test_node_teleop")
    try:
        node = env.session.node
        publish_robot(node, URDF, list(JOINTS), STATE.tolist())
        recorder = Recorder()
        node.create_subscription(JointTrajectory, TRAJECTORY_TOPIC, recorder, 100)
        env.goal_pose = node.create_publisher(PoseStamped, f"{NODE}/goal_pose", 10)
        env.goal = node.create_publisher(MultiLinkGoal, f"{NODE}/goal", 10)
        env.recorder = recorder
        env.wait_ready("panda_hand", joint="panda_joint1")
        wait_until(
            lambda: (
                env.goal_pose.get_subscription_count() > 0
                and env.goal.get_subscription_count() > 0
                and node.count_publishers(TRAJECTORY_TOPIC) > 0
            ),
            60,
            what="teleop topics matched",
        )
        yield env
    finally:
        env.close()


def fresh_start(env):
    """Waits until the node is idle long enough to start the next goal from /joint_states."""
    last = env.recorder.count()
    while True:
        time.sleep(TELEOP_RESYNC_SECONDS + 0.3)
        if env.recorder.count() == last:
            return
        last = env.recorder.count()


def run_until_reached(env, first_index, target, timeout=120.0) -> list[JointTrajectory]:
    def done():
        messages = env.recorder.since(first_index)
        return messages and reached(messages[-1].points[0].positions, target)

    try:
        wait_until(done, timeout, what="teleop output reaching the goal")
    except TimeoutError:
        messages = env.recorder.since(first_index)
        last = messages[-1].points[0].positions if messages else None
        pytest.fail(
            f"goal not reached: {len(messages)} steps, last {last}\n{env.node.log()[-3000:]}"
        )
    return env.recorder.since(first_index)


def check_steps(messages, start):
    """Joint names, one point each, time_from_start = the step, per-joint step within limits."""
    previous = np.asarray(start)
    for msg in messages:
        assert list(msg.joint_names) == JOINTS
        assert len(msg.points) == 1
        point = msg.points[0]
        dt = point.time_from_start.sec + 1e-9 * point.time_from_start.nanosec
        assert dt == pytest.approx(1.0 / RATE_HZ, abs=1e-9)
        q = np.asarray(point.positions)
        step = np.abs(q - previous)
        assert np.all(step <= STEP_LIMIT * (1 + 1e-6) + 1e-9), (step, STEP_LIMIT)
        previous = q


def test_goal_pose_steps_respect_velocity_limits_and_reach_the_goal(teleop):
    fresh_start(teleop)
    q_goal = STATE + np.array([0.6, 0.4, -0.5, 0.5, 0.4, -0.3, 0.5, 0.0])
    target = fk(q_goal)["panda_hand"]
    first = teleop.recorder.count()
    teleop.goal_pose.publish(pose_stamped(target, BASE))
    messages = run_until_reached(teleop, first, target)
    check_steps(messages, STATE)
    # ~0.6 rad at 0.5 x 2.175 rad/s, 20 ms steps: it cannot have jumped there.
    assert len(messages) >= int(0.3 / STEP_LIMIT[0])
    # The finger moves nothing the goal sees: it stays where /joint_states has it.
    assert all(m.points[0].positions[-1] == pytest.approx(STATE[-1], abs=1e-9) for m in messages)
    # Warm start: after reaching the goal the node stops publishing for it.
    count = teleop.recorder.count()
    time.sleep(0.5)
    assert teleop.recorder.count() - count <= 1


def test_latest_goal_wins(teleop):
    fresh_start(teleop)
    decoy = fk(STATE + np.array([-0.8, 0.3, 0.0, 0.4, 0.0, -0.4, 0.0, 0.0]))["panda_hand"]
    final = fk(STATE + np.array([0.8, -0.3, 0.0, -0.4, 0.0, 0.4, 0.0, 0.0]))["panda_hand"]
    first = teleop.recorder.count()
    for k in range(15):  # a burst of stale goals, then the one that matters
        shifted = decoy.copy()
        shifted[2, 3] += 0.002 * k
        teleop.goal_pose.publish(pose_stamped(shifted, BASE))
    teleop.goal_pose.publish(pose_stamped(final, BASE))
    messages = run_until_reached(teleop, first, final)
    check_steps(messages, STATE)
    costs = [cost(STATE, final)] + [cost(m.points[0].positions, final) for m in messages]
    away = sum(b > a + 1e-9 for a, b in itertools.pairwise(costs))
    # At most a tick that fell inside the burst may have served a stale goal.
    assert away <= 2, f"{away} steps moved away from the newest goal"


def test_multi_link_goal_in_a_link_frame(teleop):
    """MultiLinkGoal whose header names the hand frame: 5 cm along the hand's own z axis,
    the frame taken when the goal starts (so the goal does not run away with the hand)."""
    fresh_start(teleop)
    goal = MultiLinkGoal()
    goal.header.frame_id = "panda_hand"
    objective = IKObjective(type=IKObjective.POSE, link="panda_hand")
    objective.target.pose.position.z = 0.05
    objective.target.pose.orientation.w = 1.0
    goal.objectives = [objective]
    offset = np.eye(4)
    offset[2, 3] = 0.05
    target = fk(STATE)["panda_hand"] @ offset
    first = teleop.recorder.count()
    teleop.goal.publish(goal)
    messages = run_until_reached(teleop, first, target)
    check_steps(messages, STATE)
    count = teleop.recorder.count()
    time.sleep(0.5)
    assert teleop.recorder.count() - count <= 1


def test_bad_goal_is_dropped_and_teleop_keeps_working(teleop):
    fresh_start(teleop)
    bad = MultiLinkGoal(objectives=[IKObjective(type=IKObjective.POSE, link="no_such_link")])
    teleop.goal.publish(bad)
    nan_goal = pose_stamped(np.eye(4), BASE)
    nan_goal.pose.position.x = math.nan
    teleop.goal_pose.publish(nan_goal)
    wait_until(lambda: "teleop goal dropped" in teleop.node.log(), 60, what="warning logged")
    target = fk(STATE + np.array([0.2, 0.1, 0.0, 0.1, 0.0, 0.1, 0.0, 0.0]))["panda_hand"]
    first = teleop.recorder.count()
    teleop.goal_pose.publish(pose_stamped(target, BASE))
    messages = run_until_reached(teleop, first, target)
    check_steps(messages, STATE)
    assert teleop.node.alive()
    assert "Traceback" not in teleop.node.log()
