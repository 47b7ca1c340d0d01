"""Self-tests of the float64 reference FK (test/reference_fk.py) against closed-form results."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
import reference_fk as ref

L1, L2 = 0.7, 0.45

# Planar 2R arm in the xy plane, joint 2 listed BEFORE joint 1 in the document (actuated order
# is document order, FK must follow the tree), plus an end-effector frame.
PLANAR_2R = f"""<?xml version="1.0"?>
<robot name="planar_2r">
  <link name="base"/>
  <link name="upper"/>
  <link name="fore"/>
  <link name="tip"/>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="upper"/>
    <axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="continuous">
    <origin xyz="{L1} 0 0" rpy="0 0 0"/>
    <parent link="upper"/><child link="fore"/>
    <axis xyz="0 0 1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <origin xyz="{L2} 0 0"/>
    <parent link="fore"/><child link="tip"/>
  </joint>
</robot>
"""

# Prismatic (unnormalized axis), a revolute with default axis (1,0,0) and no <origin>, a mimic
# of the prismatic, a mimic of that mimic listed BEFORE its source, and a fixed joint that
# carries a (meaningless) mimic tag.
MIXED = """<?xml version="1.0"?>
<robot name="mixed">
  <link name="root"/>
  <link name="slider"/>
  <link name="roller"/>
  <link name="mim1"/>
  <link name="mim2"/>
  <link name="fixed_child"/>
  <joint name="mim2_joint" type="revolute">
    <origin xyz="0 0 0.5"/>
    <parent link="root"/><child link="mim2"/>
    <axis xyz="0 1 0"/>
    <mimic joint="mim1_joint" multiplier="0.5" offset="-0.2"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="slide" type="prismatic">
    <origin xyz="1 2 3" rpy="0 0 1.5707963267948966"/>
    <parent link="root"/><child link="slider"/>
    <axis xyz="2 0 0"/>
    <limit lower="0" upper="0.3" effort="1" velocity="1"/>
  </joint>
  <joint name="roll" type="revolute">
    <parent link="slider"/><child link="roller"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="mim1_joint" type="prismatic">
    <origin xyz="0 0 0"/>
    <parent link="root"/><child link="mim1"/>
    <axis xyz="0 0 1"/>
    <mimic joint="slide" multiplier="-2" offset="0.1"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/>
  </joint>
  <joint name="fixed_with_mimic" type="fixed">
    <origin xyz="0 0 1"/>
    <parent link="roller"/><child link="fixed_child"/>
    <axis xyz="0 0 1"/>
    <mimic joint="roll"/>
  </joint>
</robot>
"""


def _planar_pose(q1: float, q2: float) -> tuple[np.ndarray, float]:
    x = L1 * math.cos(q1) + L2 * math.cos(q1 + q2)
    y = L1 * math.sin(q1) + L2 * math.sin(q1 + q2)
    return np.array([x, y, 0.0]), q1 + q2


def test_actuated_order_and_limits():
    assert ref.actuated_joint_names(PLANAR_2R) == ["j1", "j2"]
    lo, hi = ref.actuated_joint_limits(PLANAR_2R)
    np.testing.assert_array_equal(lo, [-3.0, -math.pi])
    np.testing.assert_array_equal(hi, [3.0, math.pi])
    assert ref.actuated_joint_names(MIXED) == ["slide", "roll"]


@pytest.mark.parametrize("q", [(0.0, 0.0), (0.3, -1.2), (2.5, 2.9), (-math.pi / 2, math.pi)])
def test_planar_2r_closed_form(q):
    poses = ref.reference_fk(PLANAR_2R, np.array(q))
    pos, yaw = _planar_pose(*q)
    np.testing.assert_allclose(poses["tip"][:3, 3], pos, atol=1e-14)
    np.testing.assert_allclose(poses["tip"][:3, :3], ref.rot_z(yaw), atol=1e-14)
    np.testing.assert_allclose(
        poses["fore"][:3, 3], [L1 * math.cos(q[0]), L1 * math.sin(q[0]), 0], atol=1e-14
    )
    np.testing.assert_array_equal(poses["base"], np.eye(4))
    assert set(poses) == {"base", "upper", "fore", "tip"}


def test_joint_names_permutation():
    a = ref.reference_fk(PLANAR_2R, np.array([0.3, -0.4]))
    b = ref.reference_fk(PLANAR_2R, np.array([-0.4, 0.3]), joint_names=["j2", "j1"])
    for link in a:
        np.testing.assert_array_equal(a[link], b[link])
    with pytest.raises(ValueError):
        ref.reference_fk(PLANAR_2R, np.array([0.1, 0.2]), joint_names=["j1", "tip_joint"])
    with pytest.raises(ValueError):
        ref.reference_fk(PLANAR_2R, np.array([0.1, 0.2, 0.3]))


def test_planar_2r_jacobian_closed_form():
    q1, q2 = 0.4, -0.9
    jac = ref.reference_jacobian_fd(PLANAR_2R, np.array([q1, q2]), "tip")
    s1, c1 = math.sin(q1), math.cos(q1)
    s12, c12 = math.sin(q1 + q2), math.cos(q1 + q2)
    expected = np.array(
        [
            [-L1 * s1 - L2 * s12, -L2 * s12],
            [L1 * c1 + L2 * c12, L2 * c12],
            [0.0, 0.0],
            [0.0, 0.0],
            [0.0, 0.0],
            [1.0, 1.0],
        ]
    )
    np.testing.assert_allclose(jac, expected, atol=1e-8)


def test_mixed_prismatic_mimic_default_axis():
    s, r = 0.2, 0.7
    poses = ref.reference_fk(MIXED, np.array([s, r]))
    # slide: origin (1,2,3) + yaw 90deg; axis (2,0,0) normalized -> x of the joint frame, which
    # is +y of the root frame after the 90 deg yaw.
    np.testing.assert_allclose(poses["slider"][:3, 3], [1.0, 2.0 + s, 3.0], atol=1e-14)
    np.testing.assert_allclose(poses["slider"][:3, :3], ref.rot_z(math.pi / 2), atol=1e-15)
    # roll: no <origin>, default axis x of the slider frame.
    np.testing.assert_allclose(poses["roller"][:3, 3], [1.0, 2.0 + s, 3.0], atol=1e-14)
    np.testing.assert_allclose(
        poses["roller"][:3, :3], ref.rot_z(math.pi / 2) @ ref.rot_x(r), atol=1e-14
    )
    # mimic of a prismatic: value -2 s + 0.1 along z.
    m1 = -2.0 * s + 0.1
    np.testing.assert_allclose(poses["mim1"][:3, 3], [0.0, 0.0, m1], atol=1e-15)
    # mimic of a mimic, listed before its source: 0.5 * m1 - 0.2 about y.
    m2 = 0.5 * m1 - 0.2
    np.testing.assert_allclose(poses["mim2"][:3, :3], ref.rot_y(m2), atol=1e-15)
    np.testing.assert_allclose(poses["mim2"][:3, 3], [0.0, 0.0, 0.5], atol=1e-15)
    # fixed joint with a mimic tag: just the origin, z of the roller frame.
    expect_fixed = poses["roller"] @ ref.make_transform(np.eye(3), [0, 0, 1])
    np.testing.assert_allclose(poses["fixed_child"], expect_fixed, atol=1e-15)
    values = ref.joint_values(MIXED, np.array([s, r]))
    assert values["mim1_joint"] == pytest.approx(m1) and values["mim2_joint"] == pytest.approx(m2)


def test_prismatic_and_mimic_jacobian():
    jac = ref.reference_jacobian_fd(MIXED, np.array([0.1, 0.3]), "mim2")
    # d(m2)/d(slide) = 0.5 * -2 = -1 about root y; roll has no effect.
    np.testing.assert_allclose(jac, [[0, 0], [0, 0], [0, 0], [0, 0], [-1, 0], [0, 0]], atol=1e-8)
    jac = ref.reference_jacobian_fd(MIXED, np.array([0.1, 0.3]), "fixed_child")
    # slide moves everything along root +y; roll rotates about root +y (x of the slider frame)
    # with the child 1 m away along the rolled z axis.
    r = 0.3
    np.testing.assert_allclose(jac[:, 0], [0, 1, 0, 0, 0, 0], atol=1e-8)
    z_child = ref.rot_z(math.pi / 2) @ ref.rot_x(r) @ np.array([0, 0, 1.0])
    np.testing.assert_allclose(jac[:3, 1], np.cross([0, 1, 0], z_child), atol=1e-8)
    np.testing.assert_allclose(jac[3:, 1], [0, 1, 0], atol=1e-8)


def test_rpy_closed_form():
    # Explicit ZYX (fixed-axis XYZ) matrix written out element by element.
    for roll, pitch, yaw in [(0.1, -0.7, 2.3), (-2.9, 1.2, -0.4), (1.0, 0.0, 0.0)]:
        cr, sr = math.cos(roll), math.sin(roll)
        cp, sp = math.cos(pitch), math.sin(pitch)
        cy, sy = math.cos(yaw), math.sin(yaw)
        expected = np.array(
            [
                [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                [-sp, cp * sr, cp * cr],
            ]
        )
        np.testing.assert_allclose(ref.rpy_to_matrix((roll, pitch, yaw)), expected, atol=1e-15)
    # Fixed axes: roll 90 about x first, then yaw 90 about the ORIGINAL z.
    np.testing.assert_allclose(
        ref.rpy_to_matrix((math.pi / 2, 0, math.pi / 2)),
        [[0, 0, 1], [1, 0, 0], [0, 1, 0]],
        atol=1e-15,
    )
    # ... and the same rpy through a joint origin.
    urdf = """<robot name="r"><link name="a"/><link name="b"/>
      <joint name="f" type="fixed"><origin rpy="1.5707963267948966 0 1.5707963267948966"
        xyz="0.1  -0.2 0.3"/><parent link="a"/><child link="b"/></joint></robot>"""
    pose = ref.reference_fk(urdf, np.zeros(0))["b"]
    np.testing.assert_allclose(pose[:3, :3], [[0, 0, 1], [1, 0, 0], [0, 1, 0]], atol=1e-15)
    np.testing.assert_allclose(pose[:3, 3], [0.1, -0.2, 0.3], atol=0)


def test_rodrigues_and_log():
    rng = np.random.default_rng(0)
    for axis_fn, basis in ((ref.rot_x, 0), (ref.rot_y, 1), (ref.rot_z, 2)):
        a = rng.uniform(-3, 3)
        np.testing.assert_allclose(
            ref.axis_angle_to_matrix(np.eye(3)[basis], a), axis_fn(a), atol=1e-15
        )
    for _ in range(20):
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        angle = rng.uniform(-math.pi, math.pi)
        rot = ref.axis_angle_to_matrix(axis, angle)
        np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-15)
        np.testing.assert_allclose(rot @ axis, axis, atol=1e-15)
        assert np.linalg.det(rot) == pytest.approx(1.0, abs=1e-14)
        np.testing.assert_allclose(ref.so3_log(rot), axis * angle, atol=1e-12)
        assert ref.rotation_angle(rot) == pytest.approx(abs(angle), abs=1e-14)
    for angle in (1e-9, 1e-4, math.pi - 1e-6, math.pi):
        np.testing.assert_allclose(ref.so3_log(ref.rot_y(angle)), [0, angle, 0], atol=1e-9)


def test_quaternion_to_matrix():
    angle, axis = 1.1, np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    wxyz = np.concatenate([[math.cos(angle / 2)], math.sin(angle / 2) * axis])
    np.testing.assert_allclose(
        ref.quat_wxyz_to_matrix(wxyz), ref.axis_angle_to_matrix(axis, angle), atol=1e-15
    )


def test_invalid_urdfs():
    floating = """<robot name="r"><link name="a"/><link name="b"/>
      <joint name="f" type="floating"><parent link="a"/><child link="b"/></joint></robot>"""
    with pytest.raises(NotImplementedError):
        ref.actuated_joint_names(floating)
    two_roots = """<robot name="r"><link name="a"/><link name="b"/></robot>"""
    with pytest.raises(ValueError, match="root"):
        ref.parse_urdf(two_roots)
    bad_mimic = MIXED.replace('joint="slide"', 'joint="nope"')
    with pytest.raises(ValueError, match="unknown joint"):
        ref.parse_urdf(bad_mimic)
    cycle = MIXED.replace('<mimic joint="slide"', '<mimic joint="mim2_joint"')
    with pytest.raises(ValueError, match="cycle"):
        ref.reference_fk(cycle, np.zeros(2))


def test_panda_zero_configuration():
    # At q = 0 the Panda flange (panda_link8) is at x = 0.088, z = 0.333 + 0.316 + 0.384 - 0.107
    # (the DH parameters behind the URDF), pointing down.
    path = pathlib.Path(__file__).resolve().parents[1] / "pyroki_ros/robots/panda.urdf"
    model = ref.parse_urdf(path)
    names = ref.actuated_joint_names(model)
    assert names == [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
    poses = ref.reference_fk(model, np.zeros(len(names)))
    np.testing.assert_allclose(poses["panda_link8"][:3, 3], [0.088, 0.0, 0.926], atol=1e-12)
    np.testing.assert_allclose(poses["panda_link8"][:3, :3], np.diag([1.0, -1.0, -1.0]), atol=1e-12)
    # Fingers open symmetrically along +-y of the hand (mimic, axis 0 -1 0).
    q = np.zeros(len(names))
    q[-1] = 0.03
    poses = ref.reference_fk(model, q)
    hand = poses["panda_hand"]
    left = np.linalg.inv(hand) @ poses["panda_leftfinger"]
    right = np.linalg.inv(hand) @ poses["panda_rightfinger"]
    np.testing.assert_allclose(left[1, 3], 0.03, atol=1e-12)
    np.testing.assert_allclose(right[1, 3], -0.03, atol=1e-12)
