"""~/solve_ik's and ~/solve_ik_batch's Klampt-style options over DDS, against the real node:
per-solve joint limits (``limit_joints`` / ``limit_lower`` / ``limit_upper``) and the
feasibility check of the global solve (``avoid_collisions``: clear of the planning scene).
Answers are checked independently: poses by reference_fk.py, clearances by
collision_reference.py with the bundled spheres."""

from __future__ import annotations

import contextlib
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
from pyroki_ros.srv import ApplyPlanningScene, SolveIK, SolveIKBatch
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


def solve_batch(node, targets, seed: np.ndarray, **fields) -> SolveIKBatch.Response:
    request = SolveIKBatch.Request(
        link="panda_hand",
        targets=[pose_stamped(t) for t in targets],
        seed=JointState(name=list(JOINTS), position=[float(v) for v in seed]),
        timeout=Duration(sec=60),
        **fields,
    )
    return node.call(SolveIKBatch, "solve_ik_batch", request, timeout=120.0)


def batch_answers(response: SolveIKBatch.Response) -> np.ndarray:
    """(N, n) solutions of a batch answer, in JOINTS order."""
    columns = [list(response.joint_names).index(name) for name in JOINTS]
    q = np.asarray(response.positions, np.float64).reshape(-1, len(response.joint_names))
    return q[:, columns]


def on_target(target: np.ndarray, q) -> bool:
    """Within the node's default tolerances (1 mm, 1 degree) by the reference FK."""
    p_err, r_err = ref.pose_errors(target, hand(q))
    return p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3


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


# Per-solve limits of the batch tests: joint1 and joint4 boxed; the shared seed (STATE) lies
# outside the box.
BOX = {"panda_joint1": (0.3, 0.5), "panda_joint4": (-2.2, -1.8)}


def inside(q, box: dict) -> bool:
    return all(lo - 1e-6 <= q[JOINTS.index(name)] <= hi + 1e-6 for name, (lo, hi) in box.items())


def test_batch_per_solve_limits_hold_and_bad_ones_are_refused(node):
    # Targets reached by configurations inside the box, and by others outside it (the
    # Panda is redundant): the box must pick the answers inside it.
    rng = np.random.default_rng(18)
    goals = np.tile(STATE, (6, 1))
    goals[:, 0] = rng.uniform(0.32, 0.48, 6)
    goals[:, 3] = rng.uniform(-2.15, -1.85, 6)
    goals[:, [1, 2, 4, 5, 6]] += rng.uniform(-0.3, 0.3, (6, 5))
    targets = [hand(g) for g in goals]
    fields = {
        "limit_joints": list(BOX),
        "limit_lower": [lo for lo, _ in BOX.values()],
        "limit_upper": [hi for _, hi in BOX.values()],
    }
    plain = solve_batch(node, targets, STATE)
    assert plain.error_code.val == ErrorCode.SUCCESS, plain.message
    assert not all(inside(q, BOX) for q in batch_answers(plain)), (
        "the box cannot matter here: the plain batch's answers all lie inside it"
    )
    boxed = solve_batch(node, targets, STATE, **fields)
    assert boxed.error_code.val == ErrorCode.SUCCESS, boxed.message
    assert all(boxed.success), boxed.message
    for i, (target, q) in enumerate(zip(targets, batch_answers(boxed))):
        assert inside(q, BOX), f"target {i}: {dict(zip(JOINTS, q.round(3)))} outside {BOX}"
        assert on_target(target, q), f"target {i} missed (reference FK)"

    def refused(code, **bad):
        answer = solve_batch(node, targets[:1], STATE, **bad)
        assert answer.error_code.val == code, answer.message
        assert not answer.success and not len(answer.positions)
        return answer.message

    assert "nowhere" in refused(
        ErrorCode.UNKNOWN_JOINT, limit_joints=["nowhere"], limit_lower=[0.0], limit_upper=[1.0]
    )
    refused(
        ErrorCode.INVALID_REQUEST, limit_joints=["panda_joint1"], limit_lower=[0.0], limit_upper=[]
    )
    refused(
        ErrorCode.INVALID_REQUEST,
        limit_joints=["panda_joint1", "panda_joint1"],
        limit_lower=[0.0, 0.0],
        limit_upper=[1.0, 1.0],
    )
    # past the URDF's limit (2.8973) without turning the bound off: refused, not clipped
    assert "panda_joint1" in refused(
        ErrorCode.INVALID_REQUEST,
        limit_joints=["panda_joint1"],
        limit_lower=[0.0],
        limit_upper=[3.5],
    )
    refused(  # an empty box
        ErrorCode.INVALID_REQUEST,
        limit_joints=["panda_joint1"],
        limit_lower=[0.5],
        limit_upper=[0.3],
    )


# A goal whose elbow (panda_link4) the pillar below surrounds: answers near it collide with the
# pillar; other arm postures reach the same hand poses clear of it.
PILLAR_GOAL = np.array([0.0, 0.2, 0.0, -1.6, 0.0, 1.9, 0.8, 0.02])
PILLAR_HALF = np.array([0.06, 0.06, 0.06])
ELBOW = ref.reference_fk(MODEL, PILLAR_GOAL, JOINTS)["panda_link4"][:3, 3]


@contextlib.contextmanager
def pillar_scene(node, center: np.ndarray = ELBOW, half: np.ndarray = PILLAR_HALF):
    """A box (half extents ``half``, m) at ``center`` in the planning scene (default: around
    PILLAR_GOAL's elbow); yields its pose (wxyz_xyz)."""
    add = CollisionObject(id="pillar", operation=CollisionObject.ADD)
    add.primitive = SolidPrimitive(type=SolidPrimitive.BOX, dimensions=(2 * half).tolist())
    add.pose.position.x, add.pose.position.y, add.pose.position.z = map(float, center)
    add.pose.orientation.w = 1.0
    scene = node.call(
        ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[add])
    )
    assert scene.success, scene.message
    try:
        yield np.array([1.0, 0.0, 0.0, 0.0, *center])
    finally:
        remove = CollisionObject(id="pillar", operation=CollisionObject.REMOVE)
        node.call(
            ApplyPlanningScene, "apply_planning_scene", ApplyPlanningScene.Request(objects=[remove])
        )


def test_avoid_collisions_keeps_searching_past_colliding_answers(node):
    goal = PILLAR_GOAL
    target = hand(goal)
    half = PILLAR_HALF
    with pillar_scene(node) as pillar:
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
        assert on_target(target, q)


def test_batch_avoid_collisions_answers_clear_of_the_scene(node):
    # Hand poses of the pillar goal's wrist turned (joints 5-7 do not move the elbow), a small
    # box just above the elbow: from the goal as the shared seed, the plain answers keep the
    # elbow's spheres ~1 cm into it; the node's default restarts (a batch has no max_restarts)
    # find other postures.
    goals = np.tile(PILLAR_GOAL, (4, 1))
    goals[:, 4:7] += np.array([[0.0, 0.0, 0.0], [0.3, 0.0, 0.2], [-0.3, 0.2, 0.0], [0, -0.2, -0.3]])
    targets = [hand(g) for g in goals]
    center, half = ELBOW + [0.0, 0.0, 0.13], np.full(3, 0.03)
    with pillar_scene(node, center, half) as pillar:
        plain = solve_batch(node, targets, PILLAR_GOAL)
        assert plain.error_code.val == ErrorCode.SUCCESS, plain.message
        plain_clearance = [box_clearance(q, pillar, half) for q in batch_answers(plain)]
        assert min(plain_clearance) < 0, (
            "the check cannot fail here: every plain answer is clear",
            plain_clearance,
        )

        checked = solve_batch(node, targets, PILLAR_GOAL, avoid_collisions=True)
        assert checked.error_code.val == ErrorCode.SUCCESS, checked.message
        answers = batch_answers(checked)
        assert all(checked.success), (
            checked.message,
            [box_clearance(q, pillar, half) for q in answers],
            list(checked.position_errors),
            answers.round(3).tolist(),
        )
        for i, (target, q) in enumerate(zip(targets, answers)):
            clearance = box_clearance(q, pillar, half)
            assert clearance >= -1e-3, (
                f"target {i}: avoid_collisions answer is {-clearance * 100:.1f} cm inside the "
                f"pillar (plain answer: {-plain_clearance[i] * 100:.1f} cm)"
            )
            assert on_target(target, q), f"target {i} missed (reference FK)"
