"""Float32 accuracy of the JAX forward kinematics and Jacobians against the float64 numpy
reference (test/reference_fk.py), on the mesh-free example-robot-data robots.

Float64 runs in test_fk_accuracy_f64.py, in a subprocess: enabling jax_enable_x64 here would
silently promote the float32 computations of every other test in the same pytest process.

Run with ``-rP`` (or ``-s``) to see the measured maximum errors per robot.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")
try:
    import jax
    import jax.numpy as jnp

    from pyroki_ros import Robot
    from pyroki_ros.model.kinematics import forward_kinematics, link_jacobian
except ImportError as exc:  # the core is not there (yet)
    pytest.skip(f"pyroki_ros JAX core not importable: {exc}", allow_module_level=True)

import fk_check
import reference_fk as ref
from robot_cases import JACOBIAN_CASES, ROBOT_PATHS

if jax.config.jax_enable_x64:  # pragma: no cover - depends on how pytest was started
    pytest.skip(
        "jax_enable_x64 is on in this process; the float32 checks would be promoted",
        allow_module_level=True,
    )

# ~5 s per robot, mostly XLA compilation of the unrolled FK.
pytestmark = pytest.mark.slow

DTYPE = "float32"
# float32 Jacobian vs float64 finite differences: entries are O(1) (m/rad); f32 round-off of
# the poses is ~1e-7 relative. Measured max ~1e-6 (see the printed numbers).
JAC_TOL_F32 = 1e-5


@pytest.mark.parametrize("robot", list(ROBOT_PATHS))
def test_fk_float32_matches_reference(robot):
    r = fk_check.fk_errors(robot, DTYPE)
    print(fk_check.format_fk_row(r))
    assert not r["problems"], r["problems"]
    assert r["max_pos_err"] < fk_check.position_tolerance(DTYPE), fk_check.format_fk_row(r)
    assert r["max_rot_err"] < fk_check.angle_tolerance(DTYPE), fk_check.format_fk_row(r)
    assert r["max_quat_norm_dev"] < 1e-5, fk_check.format_fk_row(r)


@pytest.mark.parametrize(("robot", "link"), JACOBIAN_CASES)
def test_jacobian_float32_matches_finite_differences(robot, link):
    r = fk_check.jacobian_errors(robot, link, DTYPE)
    print(r)
    assert r["max_err"] < JAC_TOL_F32, r


@pytest.mark.parametrize("robot", ["panda", "pr2"])
def test_batch_shapes(robot):
    for r in fk_check.batch_shape_errors(robot, DTYPE):
        print(r)
        assert r["fk_shape"] == r["fk_expected"], r
        assert r["jac_shape"] == r["jac_expected"], r
        assert r["fk_dtype"] == DTYPE, r
        assert r["max_err"] < fk_check.position_tolerance(DTYPE), r


def test_path_and_xml_text_give_the_same_robot():
    path = ROBOT_PATHS["pr2"]
    a = Robot.from_urdf(str(path), dtype=jnp.float32)
    b = Robot.from_urdf(path.read_text(), dtype=jnp.float32)
    assert a.joint_names == b.joint_names and a.link_names == b.link_names
    q = jnp.asarray(fk_check.sample_configurations(ref.parse_urdf(path), 3), jnp.float32)
    np.testing.assert_array_equal(
        np.asarray(forward_kinematics(a, q).wxyz_xyz), np.asarray(forward_kinematics(b, q).wxyz_xyz)
    )


def test_mimic_and_order_edge_cases():
    # tiago_pro lists mimic joints before their source; PR2 lists r_forearm_roll_joint before
    # its parent r_elbow_flex_joint; talos_reduced has fixed joints carrying <mimic>/<limit>.
    tiago_pro = Robot.from_urdf(str(ROBOT_PATHS["tiago_pro"]))
    assert "gripper_left_inner_finger_left_joint" not in tiago_pro.joint_names
    assert "gripper_left_finger_joint" in tiago_pro.joint_names
    pr2 = Robot.from_urdf(str(ROBOT_PATHS["pr2"]))
    names = list(pr2.joint_names)
    assert names.index("r_forearm_roll_joint") < names.index("r_elbow_flex_joint")
    talos_reduced = Robot.from_urdf(str(ROBOT_PATHS["talos_reduced"]))
    assert "gripper_left_inner_double_joint" not in talos_reduced.joint_names
    assert len(talos_reduced.joint_names) == 32


def test_jacobian_is_jit_and_matches_unjitted():
    robot = Robot.from_urdf(str(ROBOT_PATHS["panda"]), dtype=jnp.float32)
    q = jnp.asarray(
        fk_check.sample_configurations(ref.parse_urdf(ROBOT_PATHS["panda"]), 4), jnp.float32
    )
    eager = link_jacobian(robot, q, "panda_hand")
    jitted = jax.jit(link_jacobian, static_argnums=2)(robot, q, "panda_hand")
    np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), atol=1e-6)
