"""IK objectives: residuals against independent float64 geometry, Jacobians against central
finite differences, for every objective kind (Panda, UR5, Kinova).

References: ``test/reference_fk.py`` (float64 numpy FK from the URDF) through
``test/ik_cases.py`` for the residual values and errors; central differences of the
residual itself (float32, as computed by the library) for the Jacobian.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from ik_cases import Spec, build, geometric_errors, residuals
from ik_reference import RefRobot

from pyroki_ros import Robot
from pyroki_ros.ik import residual_and_jacobian
from pyroki_ros.robots import urdf_path

KINOVA = Path(__file__).resolve().parent / "data" / "robots" / "kinova.urdf"
LP = (0.03, -0.05, 0.11)  # a point on the link, off every axis
LA = (0.3, -0.5, 0.81)  # an oblique axis on the link (normalized by the library and by us)
N = (0.2, 0.9, -0.4)  # oblique plane normal / line direction

PANDA_CASES = {
    "pose": [Spec("pose", "panda_hand")],
    "pose_weighted": [Spec("pose", "panda_hand", weights=(2.0, 0.7))],
    "point": [Spec("point", "panda_hand", local_point=LP, weights=(1.5, 0.0))],
    "position": [Spec("position", "panda_hand", weights=(0.8, 0.0))],
    "orientation": [Spec("orientation", "panda_hand", weights=(0.0, 1.3))],
    "hinge": [Spec("hinge", "panda_hand", local_point=LP, local_axis=LA, weights=(1.0, 0.5))],
    "axis": [Spec("axis", "panda_hand", local_axis=LA, weights=(0.0, 1.2))],
    "relative_axis": [Spec("axis", "panda_hand", reference="panda_link2", local_axis=LA)],
    "plane": [Spec("plane", "panda_hand", local_point=LP, set_axis=N)],
    "plane_axis": [
        Spec(
            "plane",
            "panda_hand",
            local_point=LP,
            local_axis=LA,
            set_axis=N,
            align=True,
            weights=(1.0, 0.6),
        )
    ],
    "line": [Spec("line", "panda_hand", local_point=LP, set_axis=N)],
    "line_axis": [
        Spec(
            "line",
            "panda_hand",
            local_point=LP,
            local_axis=LA,
            set_axis=N,
            align=True,
            weights=(1.0, 0.6),
        )
    ],
    "relative_pose": [Spec("pose", "panda_hand", reference="panda_link3", weights=(1.0, 0.5))],
    "relative_point": [Spec("point", "panda_hand", reference="panda_link3", local_point=LP)],
    "relative_orientation": [
        Spec("orientation", "panda_link7", reference="panda_link2", weights=(0.0, 1.0))
    ],
    "relative_hinge": [
        Spec(
            "hinge",
            "panda_hand",
            reference="panda_link2",
            local_point=LP,
            local_axis=LA,
            weights=(1.0, 0.4),
        )
    ],
    "relative_line_axis": [
        Spec(
            "line",
            "panda_hand",
            reference="panda_link2",
            local_point=LP,
            local_axis=LA,
            set_axis=N,
            align=True,
            weights=(1.0, 0.4),
        )
    ],
    # reference below the link: the target frame moves with the joints in between, the other way
    "relative_to_child": [Spec("pose", "panda_link4", reference="panda_hand", weights=(1.0, 0.3))],
    "stacked": [
        Spec("pose", "panda_hand", weights=(1.0, 0.3)),
        Spec("position", "panda_link4"),
        Spec("line", "panda_link6", local_point=LP, set_axis=N),
        # prismatic finger joint, and the mimic finger (multiplier 1, axis 0 -1 0)
        Spec("point", "panda_leftfinger", local_point=(0.0, 0.01, 0.05)),
        Spec("point", "panda_rightfinger", local_point=(0.0, -0.01, 0.05), weights=(0.7, 0.0)),
        Spec("plane", "panda_link5", local_point=LP, local_axis=LA, set_axis=N, align=True),
    ],
}
OTHER_CASES = {
    "ur5_pose_and_forearm_point": (
        "ur5",
        [
            Spec("pose", "tool0", weights=(1.0, 0.2)),
            Spec("point", "forearm_link", local_point=(0.1, 0.0, 0.2)),
        ],
    ),
    "kinova_pose_continuous": ("kinova", [Spec("pose", "j2s6s200_end_effector")]),
}


@pytest.fixture(scope="module")
def robots():
    sources = {"panda": urdf_path("panda"), "ur5": urdf_path("ur5"), "kinova": KINOVA}
    return {name: (Robot.from_urdf(path), RefRobot(path)) for name, path in sources.items()}


def _seed(specs, salt=0):
    return zlib.crc32(" ".join(s.name for s in specs).encode()) + salt


def _setup(robot, ref, specs, seed, count=3, spread=0.4):
    """Configurations q (count, n), and targets from FK at perturbed configurations."""
    rng = np.random.default_rng(seed)
    # float32-representable, so that the library evaluates exactly these configurations
    q = ref.random(rng, count, margin=0.1).astype(np.float32).astype(np.float64)
    q_star = np.clip(q + rng.normal(scale=spread, size=q.shape), ref.lower, ref.upper)
    q_star[0] = q[0]  # the first one sits exactly on its targets (zero residual)
    targets = build(specs, ref, q_star, rng)
    return q, targets


def _all_cases():
    for name, specs in PANDA_CASES.items():
        yield pytest.param("panda", specs, id=name)
    for name, (robot, specs) in OTHER_CASES.items():
        yield pytest.param(robot, specs, id=name)


@pytest.mark.parametrize("robot_name, specs", list(_all_cases()))
def test_residual_and_errors_match_independent_geometry(robots, robot_name, specs):
    robot, ref = robots[robot_name]
    q, targets = _setup(robot, ref, specs, seed=_seed(specs))
    objs = [s.objective(t) for s, t in zip(specs, targets)]
    ev = residual_and_jacobian(robot, objs, np.asarray(q, np.float32))
    expected = residuals(specs, ref, q, targets)
    pos, rot = geometric_errors(specs, ref, q, targets)
    assert ev.residual.shape == expected.shape
    assert ev.jacobian.shape == (*expected.shape, robot.n_joints)
    actual = np.asarray(ev.residual, np.float64)
    # float32 kinematics of a ~1 m robot: a few 1e-6 m / rad
    row = 0
    for s in specs:
        for size, how in s.blocks():
            a, e = actual[:, row : row + size], expected[:, row : row + size]
            row += size
            if how == "exact":
                np.testing.assert_allclose(a, e, atol=2e-5, err_msg=s.name)
                continue
            # Rotation rows: any smooth error vector along the rotation axis of R R_target^T
            # whose length grows with the angle theta, between the chord 2 sin(theta / 2)
            # and the angle itself (log map), times the orientation weight.
            _check_rotation_rows(a, e, s.weights[1], s.name)
    assert row == actual.shape[-1]
    np.testing.assert_allclose(np.asarray(ev.position_error), pos, atol=2e-5)
    np.testing.assert_allclose(np.asarray(ev.orientation_error), rot, atol=5e-5)
    # the first configuration sits on its targets; the others do not
    assert np.all(np.abs(expected[0]) < 1e-9)
    assert np.all(np.abs(expected[1:]).max(-1) > 1e-2)
    # unconstrained parts report 0
    for i, s in enumerate(specs):
        if not s.constrains_position:
            assert np.all(np.asarray(ev.position_error)[:, i] == 0)
        if not s.constrains_orientation:
            assert np.all(np.asarray(ev.orientation_error)[:, i] == 0)


def _check_rotation_rows(actual, log_rows, weight, name):
    theta = np.linalg.norm(log_rows, axis=-1) / weight
    length = np.linalg.norm(actual, axis=-1) / weight
    tol = 2e-5 / weight
    assert np.all(length >= 2 * np.sin(theta / 2) - tol), (name, length, theta)
    assert np.all(length <= theta + tol), (name, length, theta)
    big = theta > 1e-3
    cosine = np.sum(actual[big] * log_rows[big], -1) / (
        np.linalg.norm(actual[big], axis=-1) * np.linalg.norm(log_rows[big], axis=-1)
    )
    assert np.all(cosine > 1 - 1e-6), (name, cosine)
    assert np.all(np.abs(actual[~big]) < tol * weight), name


# Finite-difference step and tolerance (float32). Each residual entry is a ~1 m / ~1 rad
# quantity computed to ~1e-7 relative, so a central difference with h = 1e-3 carries
# ~1e-7 / 1e-3 = 1e-4 of round-off (the step is the exactly representable difference of the
# two float32 configurations); the O(h^2) truncation is ~1e-6. Measured: at most 2.4e-4
# (orientation rows with weight 1.3). 1e-3 absolute + 1e-2 relative leaves 4x margin and is
# well below what a real bug gives: a missing weight, lever arm, mimic multiplier, sign or
# frame change is >= 1e-2 on a ~1 m robot, as is a Jacobian that ignores the curvature of the
# rotation error at a 0.5 rad error (~0.25 x weight).
FD_STEP = 1e-3
FD_ATOL = 1e-3
FD_RTOL = 1e-2


@pytest.mark.parametrize("robot_name, specs", list(_all_cases()))
def test_jacobian_matches_central_differences(robots, robot_name, specs):
    robot, ref = robots[robot_name]
    q, targets = _setup(robot, ref, specs, seed=_seed(specs, 1))
    n = robot.n_joints
    q32 = np.asarray(q, np.float32)
    eye = np.eye(n, dtype=np.float32) * np.float32(FD_STEP)
    plus, minus = q32[:, None, :] + eye, q32[:, None, :] - eye  # (C, n, n)
    stacked = np.concatenate([q32[:, None, :], plus, minus], axis=1)  # (C, 1 + 2n, n)
    # targets broadcast over the perturbations: add an axis
    objs = [s.objective({k: v[:, None] for k, v in t.items()}) for s, t in zip(specs, targets)]
    ev = residual_and_jacobian(robot, objs, stacked)
    r = np.asarray(ev.residual, np.float64)
    jac = np.asarray(ev.jacobian, np.float64)[:, 0]  # (C, m, n) at q
    step = np.diagonal(plus, axis1=1, axis2=2).astype(np.float64) - np.diagonal(
        minus, axis1=1, axis2=2
    ).astype(np.float64)  # (C, n)
    fd = (r[:, 1 : 1 + n] - r[:, 1 + n :]).transpose(0, 2, 1) / step[:, None, :]  # (C, m, n)
    error = np.abs(fd - jac)
    allowed = FD_ATOL + FD_RTOL * np.abs(fd)
    worst = np.unravel_index(np.argmax(error - allowed), error.shape)
    assert np.all(error <= allowed), (
        f"max |J - FD| = {error.max():.2e}; worst at (config, row, joint) {worst}: "
        f"J={jac[worst]:.5f} FD={fd[worst]:.5f}"
    )
    # the Jacobian is not trivially zero where the residual moves
    assert np.abs(fd).max() > 0.05
    # joints that do not move any constrained link have zero columns, exactly
    moving = np.abs(fd).max(axis=(0, 1)) > 1e-6
    assert np.all(jac[:, :, ~moving] == 0)
