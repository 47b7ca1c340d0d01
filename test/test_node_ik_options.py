"""~/solve_ik's Klampt-style options over DDS, against the real node: per-solve joint limits
(``limit_joints`` / ``limit_lower`` / ``limit_upper``) and the feasibility check of the global
solve (``avoid_collisions``: clear of the planning scene). Answers are checked independently:
poses by reference_fk.py, clearances by collision_reference.py with the bundled spheres."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import collision_reference as cref
import reference_fk as ref
from builtin_interfaces.msg import Duration
from node_helpers import JOINTS, MODEL, STATE, URDF, panda_node, pose_stamped
from pyroki_ros.msg import CollisionObject, ErrorCode, IKObjective
from pyroki_ros.srv import ApplyPlanningScene, SolveIK
from sensor_msgs.msg import JointState
from shape_msgs.msg import SolidPrimitive

from pyroki_ros.robots import urdf_path

SPHERES = yaml.safe_load(urdf_path("panda").with_name("panda_spheres.yaml").read_text())["spheres"]
SPHERE_LINKS = [link for link, rows in SPHERES.items() for _ in rows if link != "panda_link0"]
SPHERE_ROWS = np.array(
    [row for link, rows in SPHERES.items() for row in rows if link != "panda_link0"]
)


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with panda_node(tmp_path_factory, "test_node_ik_options") as env:
        yield env


def solve(node, target: np.ndarray, seed: np.ndarray, **fields) -> SolveIK.Response:
    request = SolveIK.Request(
        objectives=[
            IKObjective(type=IKObjective.POSE, link="panda_hand", target=pose_stamped(target))
        ],
        seed=JointState(name=list(JOINTS), position=[float(v) for v in seed]),
        timeout=Duration(sec=60),
        **fields,
    )
    return node.call(SolveIK, "solve_ik", request, timeout=120.0)


def hand(q) -> np.ndarray:
    return ref.reference_fk(MODEL, np.asarray(q, np.float64), JOINTS)["panda_hand"]


def box_clearance(q, pose_wxyz_xyz, half) -> float:
    centers = cref.sphere_centers(URDF, SPHERE_LINKS, SPHERE_ROWS[:, :3], np.asarray(q))
    return min(
        cref.sphere_box(c, r, pose_wxyz_xyz, half) for c, r in zip(centers, SPHERE_ROWS[:, 3])
    )


def test_per_solve_limits_hold_and_bad_ones_are_refused(node):
    goal = np.array([0.4, -0.5, 0.2, -2.0, 0.3, 1.9, 0.5, 0.02])
    target = hand(goal)
    # joint1 boxed around the known solution, joint4 narrowed; the seed lies outside the box
    box = {"panda_joint1": (0.3, 0.5), "panda_joint4": (-2.2, -1.8)}
    response = solve(
        node,
        target,
        STATE,
        limit_joints=list(box),
        limit_lower=[lo for lo, _ in box.values()],
        limit_upper=[hi for _, hi in box.values()],
    )
    assert response.success, response.message
    q = np.asarray(response.solution.position)
    for name, (lo, hi) in box.items():
        value = q[JOINTS.index(name)]
        assert lo - 1e-6 <= value <= hi + 1e-6, f"{name} = {value} outside [{lo}, {hi}]"
    p_err, r_err = ref.pose_errors(target, hand(q))
    assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3

    def refused(code, **fields):
        answer = solve(node, target, STATE, **fields)
        assert not answer.success and answer.error_code.val == code, answer.message
        return answer.message

    assert "nowhere" in refused(
        ErrorCode.UNKNOWN_JOINT, limit_joints=["nowhere"], limit_lower=[0.0], limit_upper=[1.0]
    )
    refused(
        ErrorCode.INVALID_REQUEST, limit_joints=["panda_joint1"], limit_lower=[0.0], limit_upper=[]
    )
    # past the URDF's limit (2.8973) without turning the bound off: refused, not clipped
    assert "panda_joint1" in refused(
        ErrorCode.INVALID_REQUEST,
        limit_joints=["panda_joint1"],
        limit_lower=[0.0],
        limit_upper=[3.5],
    )


def test_avoid_collisions_keeps_searching_past_colliding_answers(node):
    goal = np.array([0.0, 0.2, 0.0, -1.6, 0.0, 1.9, 0.8, 0.02])
    target = hand(goal)
    # a pillar where the goal's elbow (panda_link4) is: the plain answer, near the goal seed,
    # collides with it; another arm posture reaches the same hand pose clear of it
    elbow = ref.reference_fk(MODEL, goal, JOINTS)["panda_link4"][:3, 3]
    pillar = np.array([1.0, 0.0, 0.0, 0.0, *elbow])
    half = np.array([0.06, 0.06, 0.06])
    add = CollisionObject(id="pillar", operation=CollisionObject.ADD)
    add.primitive = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=(2 * half).tolist())
    add.pose.position.x, add.pose.position.y, add.pose.position.z = map(float, elbow)
    add.pose.orientation.w = 1.0
    scene = node.call(
        ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[add])
    )
    assert scene.success, scene.message
    try:
        plain = solve(node, target, goal)
        assert plain.success, plain.message
        plain_clearance = box_clearance(plain.solution.position, pillar, half)
        assert plain_clearance < 0, "the check cannot fail here: the plain answer is clear"

        checked = solve(node, target, goal, avoid_collisions=True, max_restarts=64)
        assert checked.success, checked.message
        q = np.asarray(checked.solution.position)
        clearance = box_clearance(q, pillar, half)
        assert clearance >= -1e-3, (
            f"avoid_collisions answer is {-clearance * 100:.1f} cm inside the pillar "
            f"(plain answer: {-plain_clearance * 100:.1f} cm)"
        )
        p_err, r_err = ref.pose_errors(target, hand(q))
        assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3
    finally:
        remove = CollisionObject(id="pillar", operation=CollisionObject.REMOVE)
        node.call(
            ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[remove])
        )
