"""The aim (look-at) objective (Jacobian by finite differences, solutions by an independent
FK), and answers inside the float64 URDF limits."""

import jaxlie
import numpy as np
import pytest
from reference_fk import actuated_joint_limits, reference_fk

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.ik import IKSolver, residual_and_jacobian
from pyroki_ros.robots import urdf_path

ARM = [f"panda_joint{i}" for i in range(1, 8)]
LOCAL_POINT = np.array([0.0, 0.0, 0.1])
LOCAL_AXIS = np.array([0.0, 0.0, 1.0])  # the hand's approach axis, like a wrist camera


@pytest.fixture(scope="module")
def panda():
    return Robot.from_urdf(urdf_path("panda")), urdf_path("panda").read_text()


def _ray(urdf, q, joint_names):
    hand = reference_fk(urdf, q, joint_names)["panda_hand"]
    return hand[:3, :3] @ LOCAL_POINT + hand[:3, 3], hand[:3, :3] @ LOCAL_AXIS


def test_aim_jacobian_matches_finite_differences(panda):
    robot, _ = panda
    rng = np.random.default_rng(0)
    lo, hi = np.asarray(robot.lower), np.asarray(robot.upper)
    q = lo + rng.uniform(0.1, 0.9, size=robot.n_joints) * (hi - lo)
    objective = O.aim("panda_hand", LOCAL_POINT, LOCAL_AXIS, [0.5, -0.3, 0.2])
    ev = residual_and_jacobian(robot, objective, q)
    h = 1e-3
    numeric = np.zeros_like(np.asarray(ev.jacobian))
    for j in range(robot.n_joints):
        step = np.zeros(robot.n_joints)
        step[j] = h
        plus = np.asarray(residual_and_jacobian(robot, objective, q + step).residual, np.float64)
        minus = np.asarray(residual_and_jacobian(robot, objective, q - step).residual, np.float64)
        numeric[:, j] = (plus - minus) / (2 * h)
    np.testing.assert_allclose(ev.jacobian, numeric, atol=2e-3, rtol=1e-2)


def test_aim_solutions_point_at_the_target(panda):
    robot, urdf = panda
    rng = np.random.default_rng(1)
    targets = rng.uniform([0.3, -0.4, 0.0], [0.7, 0.4, 0.5], size=(20, 3))
    solver = IKSolver(robot)
    result = solver.solve(O.aim("panda_hand", LOCAL_POINT, LOCAL_AXIS, targets), active_joints=ARM)
    assert result.success.mean() >= 0.95
    for q, target, ok, reported in zip(
        result.q, targets, result.success, result.orientation_error[:, 0]
    ):
        origin, axis = _ray(urdf, q, robot.joint_names)
        to_target = (target - origin) / np.linalg.norm(target - origin)
        angle = np.arctan2(np.linalg.norm(np.cross(axis, to_target)), axis @ to_target)
        assert abs(angle - reported) < 1e-4
        if ok:
            assert angle <= np.radians(1.0) + 1e-5


def test_answers_are_inside_the_float64_urdf_limits(panda):
    """float32(3.7525) > 3.7525: answers at a limit must not round past the URDF's value."""
    robot, urdf = panda
    lower, upper = (np.asarray(v, np.float64) for v in actuated_joint_limits(urdf))
    rng = np.random.default_rng(2)
    lo, hi = np.asarray(robot.limits.bounds).T
    # targets from configurations on the limits, so many answers sit exactly at one
    q_star = np.where(rng.uniform(size=(64, robot.n_joints)) < 0.5, lo, hi)
    q_star = np.where(rng.uniform(size=q_star.shape) < 0.5, q_star, (lo + hi) / 2)
    poses = np.stack([_hand_pose(urdf, q, robot.joint_names) for q in q_star])
    result = IKSolver(robot).solve(O.pose("panda_hand", poses), active_joints=ARM)
    assert np.all(result.q >= lower) and np.all(result.q <= upper)


def _hand_pose(urdf, q, joint_names):
    hand = reference_fk(urdf, q, joint_names)["panda_hand"]
    return np.asarray(jaxlie.SE3.from_matrix(hand).wxyz_xyz, np.float64)
