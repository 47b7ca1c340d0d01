"""Forward kinematics and Jacobians against closed forms, finite differences and autodiff.

Independent references used here:
* closed-form poses and Jacobians of small hand-written robots (planar arm, prismatic joint on
  a rotated axis, mimic chains, rpy chains), built with numpy rotation matrices written here;
* ``test/reference_fk.py`` (plain numpy, no yourdfpy/JAX) for the shipped Panda and UR5;
* central finite differences (float64) for gradients, and ``jax.jacfwd`` of the poses for the
  analytic geometric Jacobian.

XLA compilation dominates the run time on a CPU, so every robot is compiled once: one jitted
``evaluate`` returns everything the tests need for a batch of configurations, and the toy
robots are branches of one URDF.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference_fk import reference_fk

from pyroki_ros import Robot, forward_kinematics, link_jacobian
from pyroki_ros.robots import urdf_path

# The backend optimisation level only changes how fast the generated code runs, not what it
# computes; level 0 roughly halves compile time, which is most of this file's run time.
_jit = partial(jax.jit, compiler_options={"xla_backend_optimization_level": 0})


def _pose_derivatives(robot: Robot, q: jax.Array):
    """jax.jacfwd of the poses of one configuration: (n_links, 7, n_joints), and the poses."""

    def poses(x):
        p = forward_kinematics(robot, x).wxyz_xyz
        return p, p

    return jax.jacfwd(poses, has_aux=True)(q)


@partial(_jit, static_argnums=2)
def evaluate(robot: Robot, q: jax.Array, links: tuple[str, ...]) -> dict[str, jax.Array]:
    """For q of shape (B, n_joints): batched poses, link_jacobian of ``links``, and
    jax.jacfwd of the poses (computed per configuration under vmap)."""
    d_poses, vmapped_poses = jax.vmap(_pose_derivatives, in_axes=(None, 0))(robot, q)
    return {
        "poses": forward_kinematics(robot, q).wxyz_xyz,  # (B, L, 7)
        "vmapped_poses": vmapped_poses,  # (B, L, 7)
        "d_poses": d_poses,  # (B, L, 7, n)
        "jac": jnp.stack(
            [link_jacobian(robot, q, link) for link in links], axis=-3
        ),  # (B, K, 6, n)
    }


@partial(_jit, static_argnums=2)
def fk_and_jac(robot: Robot, q: jax.Array, link: str) -> tuple[jax.Array, jax.Array]:
    return forward_kinematics(robot, q).wxyz_xyz, link_jacobian(robot, q, link)


# --------------------------------------------------------------------------------------------
# numpy helpers (independent of pyroki_ros and jaxlie)
# --------------------------------------------------------------------------------------------


def rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1.0, 0, 0], [0, c, -s], [0, s, c]])


def ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1.0, 0], [-s, 0, c]])


def rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def rpy(r, p, y):
    return rz(y) @ ry(p) @ rx(r)


def rot_axis(axis, angle):
    """Rodrigues' formula."""
    k = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def homogeneous(rot=None, trans=(0.0, 0.0, 0.0)):
    t = np.eye(4)
    if rot is not None:
        t[:3, :3] = rot
    t[:3, 3] = trans
    return t


def pose_matrix(wxyz_xyz) -> np.ndarray:
    """4x4 from a wxyz_xyz vector (quaternion normalised first)."""
    v = np.asarray(wxyz_xyz, np.float64)
    w, x, y, z = v[:4] / np.linalg.norm(v[:4])
    rot = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    return homogeneous(rot, v[4:])


def quat_to_matrix_unnormalised(p: np.ndarray) -> np.ndarray:
    """The usual quadratic quaternion-to-matrix formula, valid for unit wxyz ``p``."""
    w, x, y, z = p
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def geometric_from_pose_derivative(pose: np.ndarray, d_pose: np.ndarray):
    """Turns d(wxyz_xyz)/dq (7, n) at ``pose`` (7,) into [v; w] (6, n), w from dR R^T.

    The matrix formula is quadratic in the quaternion, so its derivative along dp is exactly
    (M(p + dp) - M(p - dp)) / 2. Also returns the largest |dR R^T + (dR R^T)^T| (must be ~0).
    """
    p = pose[:4]
    rot = quat_to_matrix_unnormalised(p)
    out = np.zeros((6, d_pose.shape[-1]))
    asymmetry = 0.0
    for k in range(d_pose.shape[-1]):
        dp = d_pose[:4, k]
        d_rot = (quat_to_matrix_unnormalised(p + dp) - quat_to_matrix_unnormalised(p - dp)) / 2
        w_hat = d_rot @ rot.T
        asymmetry = max(asymmetry, float(np.abs(w_hat + w_hat.T).max()))
        out[:3, k] = d_pose[4:, k]
        out[3:, k] = [w_hat[2, 1], w_hat[0, 2], w_hat[1, 0]]
    return out, asymmetry


# --------------------------------------------------------------------------------------------
# Toy robots: four independent branches hanging off the root "world" (identity origins), so
# each branch's closed form is written in the world frame.
# --------------------------------------------------------------------------------------------


def _joint(name, jtype, parent, child, origin="", axis="", extra=""):
    o = f"<origin {origin}/>" if origin else ""
    a = f'<axis xyz="{axis}"/>' if axis else ""
    return (
        f'<joint name="{name}" type="{jtype}"><parent link="{parent}"/><child link="{child}"/>'
        f"{o}{a}{extra}</joint>"
    )


def _links(*names):
    return "".join(f'<link name="{n}"/>' for n in names)


def _v(values):
    return " ".join(map(str, values))


LIM = '<limit lower="-3" upper="3" velocity="1" effort="1"/>'

# 1. Planar two-link arm: q1, q2 about z, link lengths L1, L2.
L1, L2 = 0.7, 0.4
PLANAR = (
    _links("l1", "l2", "tip")
    + _joint("q1", "revolute", "world", "l1", axis="0 0 1", extra=LIM)
    + _joint("q2", "revolute", "l1", "l2", origin=f'xyz="{L1} 0 0"', axis="0 0 1", extra=LIM)
    + _joint("t", "fixed", "l2", "tip", origin=f'xyz="{L2} 0 0"')
)

# 2. Prismatic joint d along a non-unit axis in a rotated origin, then a revolute r about a
#    non-unit axis, then a fixed rotated tip.
PRISM_T = (0.1, -0.2, 0.3)
PRISM_RPY = (0.4, -0.7, 1.1)
PRISM_AXIS = np.array([1.0, 2.0, 2.0])  # norm 3
REV_AXIS = np.array([1.0, 1.0, 0.0])
PRISMATIC = (
    _links("slider", "link2", "ptip")
    + _joint(
        "d",
        "prismatic",
        "world",
        "slider",
        origin=f'xyz="{_v(PRISM_T)}" rpy="{_v(PRISM_RPY)}"',
        axis=_v(PRISM_AXIS),
        extra='<limit lower="-0.5" upper="1" velocity="1" effort="1"/>',
    )
    + _joint(
        "r", "revolute", "slider", "link2", origin='xyz="0.1 0 0"', axis=_v(REV_AXIS), extra=LIM
    )
    + _joint("t2", "fixed", "link2", "ptip", origin='xyz="0.3 0 0" rpy="0.3 0 0"')
)


def prismatic_closed_form(d, r):
    slider = homogeneous(rpy(*PRISM_RPY), PRISM_T) @ homogeneous(trans=PRISM_AXIS / 3 * d)
    link2 = slider @ homogeneous(trans=(0.1, 0, 0)) @ homogeneous(rot_axis(REV_AXIS, r))
    tip = link2 @ homogeneous(rx(0.3), (0.3, 0, 0))
    return {"slider": slider, "link2": link2, "ptip": tip}


# 3. Mimic chain: j drives A; m mimics j (x-2, +0.3); m2 mimics m (x0.5, -0.1), a mimic of a
#    mimic, listed before its source. s is prismatic along x; sm mimics s (x3, +0.01) along y.
MIMIC = (
    _links("A", "B", "C", "D", "S", "S2")
    + _joint(
        "m2",
        "revolute",
        "B",
        "C",
        origin='xyz="1 0 0"',
        axis="0 0 1",
        extra=LIM + '<mimic joint="m" multiplier="0.5" offset="-0.1"/>',
    )
    + _joint("j", "revolute", "world", "A", axis="0 0 1", extra=LIM)
    + _joint(
        "m",
        "revolute",
        "A",
        "B",
        origin='xyz="1 0 0"',
        axis="0 0 1",
        extra=LIM + '<mimic joint="j" multiplier="-2" offset="0.3"/>',
    )
    + _joint("f", "fixed", "C", "D", origin='xyz="1 0 0"')
    + _joint(
        "s",
        "prismatic",
        "world",
        "S",
        axis="1 0 0",
        extra='<limit lower="0" upper="1" velocity="1" effort="1"/>',
    )
    + _joint(
        "sm",
        "prismatic",
        "S",
        "S2",
        axis="0 1 0",
        extra='<limit lower="0" upper="5" velocity="1" effort="1"/>'
        '<mimic joint="s" multiplier="3" offset="0.01"/>',
    )
)


def mimic_closed_form(q, s):
    """Positions and headings (about z) of B, C, D and S2."""
    th_b = q + (-2 * q + 0.3)
    th_c = th_b + 0.5 * (-2 * q + 0.3) - 0.1
    b = np.array([math.cos(q), math.sin(q), 0.0])
    c = b + np.array([math.cos(th_b), math.sin(th_b), 0.0])
    d = c + np.array([math.cos(th_c), math.sin(th_c), 0.0])
    s2 = np.array([s, 3 * s + 0.01, 0.0])
    return {"B": (b, th_b), "C": (c, th_c), "D": (d, th_c), "S2": (s2, 0.0)}


# 4. Fixed rpy origins composed, then a continuous joint behind a third rpy origin.
R1, R2, R3 = (0.3, -1.2, 2.5), (-2.9, 1.5, 0.7), (1.0, 2.0, -0.4)
A1, A2 = (0.5, -0.1, 0.2), (-0.3, 0.4, 1.0)
RPY_CHAIN = (
    _links("L1", "L2", "L3")
    + _joint("f1", "fixed", "world", "L1", origin=f'xyz="{_v(A1)}" rpy="{_v(R1)}"')
    + _joint("f2", "fixed", "L1", "L2", origin=f'xyz="{_v(A2)}" rpy="{_v(R2)}"')
    + _joint("c", "continuous", "L2", "L3", origin=f'rpy="{_v(R3)}"', axis="0 0 1")
)

TOYS = (
    '<robot name="toys"><link name="world"/>' + PLANAR + PRISMATIC + MIMIC + RPY_CHAIN + "</robot>"
)
TOY_JOINTS = ("q1", "q2", "d", "r", "j", "s", "c")  # actuated, document order
# Links whose Jacobians are evaluated (each one costs about a second of compile time).
TOY_LINKS = ("tip", "ptip", "D", "S2")


class Evaluated:
    """A robot, a batch of configurations, and what ``evaluate`` returns for them."""

    def __init__(self, robot: Robot, q, links: tuple[str, ...]):
        self.robot, self.links = robot, links
        self.q = np.asarray(q, np.float64)
        out = evaluate(robot, jnp.asarray(self.q, robot.dtype), links)
        for key, value in out.items():
            setattr(self, key, np.asarray(value, np.float64))

    def value(self, b: int, joint: str) -> float:
        return float(self.q[b, self.robot.joint_index(joint)])

    def pose(self, b: int, link: str) -> np.ndarray:
        return pose_matrix(self.poses[b, self.robot.link_index(link)])

    def jacobian(self, b: int, link: str) -> np.ndarray:
        return self.jac[b, self.links.index(link)]


@pytest.fixture(scope="module")
def toys():
    robot = Robot.from_urdf(TOYS)
    q = np.random.default_rng(1).uniform(-2.5, 2.5, (6, robot.n_joints))
    q[0] = 0.0
    d, s = robot.joint_index("d"), robot.joint_index("s")
    q[:, d] = [0.0, 0.7, -0.3, 0.9, 0.2, -0.45]
    q[:, s] = [0.0, 0.25, 0.9, 0.5, 1.0, 0.1]
    return Evaluated(robot, q, TOY_LINKS)


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    q = robot.random_configurations(jax.random.PRNGKey(3), (5,))
    return Evaluated(robot, q, ("panda_hand_tcp", "panda_rightfinger"))


@pytest.fixture(scope="module")
def ur5():
    robot = Robot.from_urdf(urdf_path("ur5"))
    q = robot.random_configurations(jax.random.PRNGKey(4), (5,))
    return Evaluated(robot, q, ("tool0",))


ALL = ["toys", "panda", "ur5"]

# --------------------------------------------------------------------------------------------
# Closed-form poses and Jacobians
# --------------------------------------------------------------------------------------------


def test_toy_structure(toys):
    assert toys.robot.joint_names == TOY_JOINTS
    assert set(toys.robot.mimic_joint_names) == {"m", "m2", "sm"}
    assert toys.robot.root_link == "world"


def test_planar_two_link(toys):
    for b in range(len(toys.q)):
        q1, q2 = toys.value(b, "q1"), toys.value(b, "q2")
        elbow = np.array([L1 * math.cos(q1), L1 * math.sin(q1), 0.0])
        tip = elbow + L2 * np.array([math.cos(q1 + q2), math.sin(q1 + q2), 0.0])
        np.testing.assert_allclose(toys.pose(b, "l1")[:3, :3], rz(q1), atol=1e-5)
        np.testing.assert_allclose(toys.pose(b, "l2")[:3, 3], elbow, atol=1e-5)
        np.testing.assert_allclose(toys.pose(b, "l2")[:3, :3], rz(q1 + q2), atol=1e-5)
        np.testing.assert_allclose(toys.pose(b, "tip")[:3, 3], tip, atol=1e-5)
        np.testing.assert_allclose(toys.pose(b, "tip")[:3, :3], rz(q1 + q2), atol=1e-5)
        np.testing.assert_allclose(toys.pose(b, "world"), np.eye(4), atol=1e-7)


def test_planar_jacobian_closed_form(toys):
    n, i1, i2 = toys.robot.n_joints, toys.robot.joint_index("q1"), toys.robot.joint_index("q2")
    for b in range(len(toys.q)):
        q1, q2 = toys.value(b, "q1"), toys.value(b, "q2")
        s1, c1 = math.sin(q1), math.cos(q1)
        s12, c12 = math.sin(q1 + q2), math.cos(q1 + q2)
        expected = np.zeros((6, n))
        expected[:, i1] = [-L1 * s1 - L2 * s12, L1 * c1 + L2 * c12, 0, 0, 0, 1]
        expected[:, i2] = [-L2 * s12, L2 * c12, 0, 0, 0, 1]
        np.testing.assert_allclose(toys.jacobian(b, "tip"), expected, atol=1e-5)


def test_prismatic_along_rotated_axis(toys):
    i_d = toys.robot.joint_index("d")
    for b in range(len(toys.q)):
        for link, t in prismatic_closed_form(toys.value(b, "d"), toys.value(b, "r")).items():
            np.testing.assert_allclose(toys.pose(b, link), t, atol=2e-6, err_msg=link)
        # A prismatic joint moves along its axis (in the root frame) and turns nothing.
        axis_root = rpy(*PRISM_RPY) @ PRISM_AXIS / 3
        np.testing.assert_allclose(
            toys.jacobian(b, "ptip")[:, i_d], [*axis_root, 0, 0, 0], atol=1e-6
        )


def test_mimic_joints(toys):
    for b in range(len(toys.q)):
        for link, (pos, heading) in mimic_closed_form(
            toys.value(b, "j"), toys.value(b, "s")
        ).items():
            np.testing.assert_allclose(toys.pose(b, link)[:3, 3], pos, atol=2e-6, err_msg=link)
            np.testing.assert_allclose(
                toys.pose(b, link)[:3, :3], rz(heading), atol=2e-6, err_msg=link
            )


def test_mimic_jacobian_closed_form(toys):
    n, i_j, i_s = toys.robot.n_joints, toys.robot.joint_index("j"), toys.robot.joint_index("s")
    for b in range(len(toys.q)):
        q = toys.value(b, "j")
        th_b, th_c = -q + 0.3, -2 * q + 0.35
        expected_d = np.zeros((6, n))
        expected_d[:3, i_j] = (
            np.array([-math.sin(q), math.cos(q), 0])
            - np.array([-math.sin(th_b), math.cos(th_b), 0])  # d th_b / dq = -1
            - 2 * np.array([-math.sin(th_c), math.cos(th_c), 0])  # d th_c / dq = -2
        )
        expected_d[5, i_j] = -2.0
        np.testing.assert_allclose(toys.jacobian(b, "D"), expected_d, atol=1e-5)
        expected_s2 = np.zeros((6, n))
        expected_s2[:3, i_s] = [1.0, 3.0, 0.0]
        np.testing.assert_allclose(toys.jacobian(b, "S2"), expected_s2, atol=1e-6)


def test_rpy_composition(toys):
    t1 = homogeneous(rpy(*R1), A1)
    t2 = t1 @ homogeneous(rpy(*R2), A2)
    for b in range(len(toys.q)):
        t3 = t2 @ homogeneous(rpy(*R3)) @ homogeneous(rz(toys.value(b, "c")))
        np.testing.assert_allclose(toys.pose(b, "L1"), t1, atol=2e-6)
        np.testing.assert_allclose(toys.pose(b, "L2"), t2, atol=2e-6)
        np.testing.assert_allclose(toys.pose(b, "L3"), t3, atol=2e-6)


@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_shipped_robots_match_reference(name, request):
    ev = request.getfixturevalue(name)
    for b, q in enumerate(ev.q):
        ref = reference_fk(urdf_path(name), q, ev.robot.joint_names)
        assert set(ref) == set(ev.robot.link_names)
        for link in ev.robot.link_names:
            np.testing.assert_allclose(ev.pose(b, link), ref[link], atol=1e-5, err_msg=link)


# --------------------------------------------------------------------------------------------
# Batch shapes, jit, vmap, grad
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("batch", [(), (6,), (2, 3)])
def test_batch_shapes_match_per_sample(toys, batch):
    robot, link = toys.robot, "D"
    if batch == (6,):  # from `evaluate`
        q, poses, jacobians = toys.q, toys.poses, toys.jacobian(slice(None), link)
    else:
        q = robot.random_configurations(jax.random.PRNGKey(len(batch)), batch)
        poses, jacobians = fk_and_jac(robot, q, link)
        assert poses.dtype == jnp.float32 and jacobians.dtype == jnp.float32
    assert poses.shape == (*batch, robot.n_links, 7)
    assert jacobians.shape == (*batch, 6, robot.n_joints)
    flat_q = np.asarray(q).reshape(-1, robot.n_joints)
    flat_poses = np.asarray(poses).reshape(-1, robot.n_links, 7)
    flat_jac = np.asarray(jacobians).reshape(-1, 6, robot.n_joints)
    for qi, pi, ji in zip(flat_q, flat_poses, flat_jac):
        single_poses, single_jac = fk_and_jac(robot, jnp.asarray(qi, jnp.float32), link)
        np.testing.assert_allclose(pi, single_poses, atol=1e-6)
        np.testing.assert_allclose(ji, single_jac, atol=1e-5)


@pytest.mark.parametrize("name", ALL)
def test_vmap_matches_batch(name, request):
    ev = request.getfixturevalue(name)
    np.testing.assert_allclose(ev.vmapped_poses, ev.poses, atol=1e-6)


def test_robot_is_a_pytree(toys):
    # The robot's arrays are leaves: stack two robots and vmap over them. (Position limits are
    # static metadata, JointLimits: per-solve limits reach the solver as arrays instead.)
    stacked = jax.tree_util.tree_map(lambda x: jnp.stack([x, 2 * x]), toys.robot)
    offsets = jax.vmap(lambda r: r.origins[:, 4:])(stacked)
    np.testing.assert_allclose(offsets[1], 2 * np.asarray(toys.robot.origins[:, 4:]))


def test_grad_is_finite_and_matches_finite_differences():
    """Gradient of a scalar FK function vs central differences, in float64."""
    with jax.enable_x64(True):
        robot = Robot.from_urdf(urdf_path("panda"), dtype=jnp.float64)
        n = robot.n_joints
        hand = robot.link_index("panda_hand_tcp")
        finger = robot.link_index("panda_rightfinger")  # moved by the mimic joint
        weights = jnp.array([0.3, -1.1, 0.7])

        def scalar(q):
            poses = forward_kinematics(robot, q)
            rot = poses.rotation().as_matrix()
            return (
                poses.translation()[hand] @ weights
                + rot[hand, 0, 2]
                + 2.0 * poses.translation()[finger, 1]
            )

        value_and_grad = _jit(jax.vmap(jax.value_and_grad(scalar)))
        h = 1e-6
        bases = np.stack(
            [
                np.asarray(robot.random_configurations(jax.random.PRNGKey(11)), np.float64),
                np.zeros(n),
                np.asarray(robot.upper, np.float64),
            ]
        )
        # Rows: each base configuration, then its +h and -h steps along every joint.
        steps = h * np.eye(n)
        points = np.concatenate(
            [
                bases,
                (bases[:, None] + steps).reshape(-1, n),
                (bases[:, None] - steps).reshape(-1, n),
            ]
        )
        values, grads = (np.asarray(x) for x in value_and_grad(jnp.asarray(points)))
        assert grads.dtype == np.float64
        assert np.all(np.isfinite(grads))
        k = len(bases)
        plus = values[k : k + k * n].reshape(k, n)
        minus = values[k + k * n :].reshape(k, n)
        fd = (plus - minus) / (2 * h)
        np.testing.assert_allclose(grads[:k], fd, atol=1e-7)
        assert np.abs(grads[:k]).max() > 0.1  # not trivially zero


# --------------------------------------------------------------------------------------------
# Analytic Jacobian vs autodiff of the poses
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
def test_link_jacobian_matches_autodiff(name, request):
    ev = request.getfixturevalue(name)
    largest = 0.0
    for b in range(len(ev.q)):
        for k, link in enumerate(ev.links):
            i = ev.robot.link_index(link)
            expected, asymmetry = geometric_from_pose_derivative(ev.poses[b, i], ev.d_poses[b, i])
            assert asymmetry < 1e-5, f"{link}: dR R^T is not skew"
            np.testing.assert_allclose(ev.jac[b, k], expected, atol=1e-4, err_msg=f"{link} #{b}")
            largest = max(largest, np.abs(expected).max())
    assert largest > 0.1


def test_first_joint_turns_about_base_z(panda):
    # Joint 1 turns about the base z axis: angular column 0 of every moving link.
    for link in panda.links:
        for b in range(len(panda.q)):
            np.testing.assert_allclose(panda.jacobian(b, link)[3:, 0], [0, 0, 1], atol=1e-6)


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (7,), (9,), (4, 7), (2, 3, 1)])
def test_wrong_q_shape_raises(panda, shape):
    with pytest.raises(ValueError, match=r"q must have shape .*8"):
        forward_kinematics(panda.robot, jnp.zeros(shape))
    with pytest.raises(ValueError, match=r"q must have shape"):
        link_jacobian(panda.robot, jnp.zeros(shape), "panda_hand")


def test_float64_without_x64_raises():
    with jax.enable_x64(False), pytest.raises(ValueError, match="jax_enable_x64"):
        Robot.from_urdf(TOYS, dtype=jnp.float64)


# --------------------------------------------------------------------------------------------
# Edge cases: robots with nothing to move, integer link indices.
# --------------------------------------------------------------------------------------------

MOUNT = (
    '<robot name="mount"><link name="a"/><link name="b"/>'
    '<joint name="f" type="fixed"><parent link="a"/><child link="b"/><origin xyz="1 2 3"/></joint>'
    "</robot>"
)


def test_robot_without_actuated_joints():
    robot = Robot.from_urdf(MOUNT)
    assert robot.n_joints == 0
    poses, jacobian = fk_and_jac(robot, jnp.zeros((0,)), "b")
    np.testing.assert_allclose(poses[1], [1, 0, 0, 0, 1, 2, 3], atol=1e-7)
    assert jacobian.shape == (6, 0)


def test_link_jacobian_rejects_out_of_range_link_index(toys):
    n = toys.robot.n_links
    for bad in (n, -n - 1):
        with pytest.raises(ValueError, match=str(bad)):
            link_jacobian(toys.robot, jnp.zeros(toys.robot.n_joints), bad)
