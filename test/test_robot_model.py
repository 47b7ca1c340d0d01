"""Robot model construction from URDF: structure, names, limits, and every kind of bad input.

The expected values below are read off the hand-written URDF strings, not computed by the code
under test.
"""

from __future__ import annotations

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pyroki_ros import Robot, URDFError, forward_kinematics, link_jacobian
from pyroki_ros.robots import urdf_path

# --------------------------------------------------------------------------------------------
# A tree with several branches and every supported joint type. Links are declared in a
# scrambled order, the root ("base") is not first, and the joints are not in tree order.
#
#   base ─ j_rev (revolute) ─ upper ─ j_pri (prismatic, axis 0 2 2) ─ slider ─ j_tool ─ tool
#        ├ j_wheel (continuous) ─ wheel
#        ├ j_m1 (revolute, mimic j_rev x2 +0.1) ─ arm_b ─ j_m2 (mimic j_m1 x-0.5 +0.3) ─ arm_c
#        └ j_cam (fixed) ─ camera
# --------------------------------------------------------------------------------------------

TREE_URDF = """<?xml version="1.0"?>
<robot name="toy_tree">
  <link name="slider"/>
  <link name="tool"/>
  <link name="base">
    <visual>
      <geometry><mesh filename="package://no_such_package/meshes/base.dae"/></geometry>
    </visual>
    <collision>
      <geometry><mesh filename="package://no_such_package/meshes/base.stl"/></geometry>
    </collision>
  </link>
  <link name="arm_c"/>
  <link name="upper"/>
  <link name="wheel">
    <visual><geometry><mesh filename="file:///definitely/not/here/wheel.obj"/></geometry></visual>
  </link>
  <link name="camera"/>
  <link name="arm_b"/>

  <joint name="j_pri" type="prismatic">
    <parent link="upper"/><child link="slider"/>
    <origin xyz="0.2 0 0" rpy="0.1 0.2 0.3"/>
    <axis xyz="0 2 2"/>
    <limit lower="0" upper="0.5" velocity="0.3" effort="20"/>
  </joint>
  <joint name="j_rev" type="revolute">
    <parent link="base"/><child link="upper"/>
    <origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/>
    <limit lower="-1" upper="2" velocity="1.5" effort="10"/>
  </joint>
  <joint name="j_wheel" type="continuous">
    <parent link="base"/><child link="wheel"/>
    <origin xyz="0 0.3 0" rpy="1.5707963267948966 0 0"/>
    <axis xyz="1 0 0"/>
    <limit velocity="7" effort="5"/>
  </joint>
  <joint name="j_m1" type="revolute">
    <parent link="base"/><child link="arm_b"/>
    <origin xyz="-0.2 0 0"/>
    <axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" velocity="1" effort="1"/>
    <mimic joint="j_rev" multiplier="2" offset="0.1"/>
  </joint>
  <joint name="j_tool" type="fixed">
    <parent link="slider"/><child link="tool"/>
    <origin xyz="0 0 0.05"/>
  </joint>
  <joint name="j_m2" type="revolute">
    <parent link="arm_b"/><child link="arm_c"/>
    <origin xyz="0.4 0 0"/>
    <axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" velocity="1" effort="1"/>
    <mimic joint="j_m1" multiplier="-0.5" offset="0.3"/>
  </joint>
  <joint name="j_cam" type="fixed">
    <parent link="base"/><child link="camera"/>
    <origin xyz="0 0 1" rpy="0 0.5 0"/>
  </joint>
</robot>
"""

# Breadth-first from the root; siblings in the document order of their joints.
TREE_LINKS = ("base", "upper", "wheel", "arm_b", "camera", "slider", "arm_c", "tool")
TREE_PARENT = {
    "base": None,
    "upper": "base",
    "wheel": "base",
    "arm_b": "base",
    "camera": "base",
    "slider": "upper",
    "arm_c": "arm_b",
    "tool": "slider",
}


@pytest.fixture(scope="module")
def tree() -> Robot:
    return Robot.from_urdf(TREE_URDF)


def test_tree_names_and_order(tree):
    assert tree.name == "toy_tree"
    # Actuated joints: movable, not mimic, in document order.
    assert tree.joint_names == ("j_pri", "j_rev", "j_wheel")
    assert tree.n_joints == 3
    assert tree.mimic_joint_names == ("j_m1", "j_m2")
    assert tree.link_names == TREE_LINKS
    assert tree.n_links == 8
    assert tree.root_link == "base"
    assert tree.continuous == (False, False, True)
    for joint in tree.joint_names:
        assert tree.joint_names[tree.joint_index(joint)] == joint


def test_tree_parents(tree):
    for i, link in enumerate(tree.link_names):
        parent = TREE_PARENT[link]
        if parent is None:
            assert tree.parent_index[i] == -1
        else:
            assert tree.link_names[tree.parent_index[i]] == parent
            assert tree.parent_index[i] < i  # breadth-first: parents come first
        assert tree.link_index(link) == i


def test_tree_limits(tree):
    np.testing.assert_allclose(tree.lower, [0.0, -1.0, -math.pi], rtol=1e-6)
    np.testing.assert_allclose(tree.upper, [0.5, 2.0, math.pi], rtol=1e-6)
    np.testing.assert_allclose(tree.velocity_limits, [0.3, 1.5, 7.0], rtol=1e-6)
    np.testing.assert_allclose(tree.effort_limits, [20.0, 10.0, 5.0], rtol=1e-6)
    np.testing.assert_allclose(tree.center(), [0.25, 0.5, 0.0], atol=1e-6)
    assert tree.lower.dtype == jnp.float32


def test_axis_is_normalised(tree):
    np.testing.assert_allclose(
        tree.axes[tree.link_index("slider")], [0.0, 1 / math.sqrt(2), 1 / math.sqrt(2)], atol=1e-6
    )
    np.testing.assert_allclose(tree.axes[tree.link_index("wheel")], [1.0, 0.0, 0.0], atol=1e-7)


def test_origin_translation_and_rotation(tree):
    # origins are wxyz_xyz; compare the rotation with Rz(y) Ry(p) Rx(r) built by hand.
    def rot(axis, a):
        c, s = math.cos(a), math.sin(a)
        return {
            "x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
            "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
            "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
        }[axis]

    origin = np.asarray(tree.origins[tree.link_index("slider")], np.float64)
    np.testing.assert_allclose(origin[4:], [0.2, 0.0, 0.0], atol=1e-7)
    w, x, y, z = origin[:4]
    from_quat = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    expected = rot("z", 0.3) @ rot("y", 0.2) @ rot("x", 0.1)
    np.testing.assert_allclose(from_quat, expected, atol=1e-6)


def test_chain_joints(tree):
    idx = tree.joint_index
    assert tree.chain_joints("base", "tool") == tuple(sorted((idx("j_pri"), idx("j_rev"))))
    assert tree.chain_joints("base", "camera") == ()
    assert tree.chain_joints("base", "wheel") == (idx("j_wheel"),)
    # Mimic joints on the path are driven by j_rev.
    assert tree.chain_joints("base", "arm_c") == (idx("j_rev"),)
    assert tree.chain_joints("slider", "tool") == ()
    assert tree.chain_joints("wheel", "tool") == tuple(
        sorted((idx("j_pri"), idx("j_rev"), idx("j_wheel")))
    )


def test_clip_and_random_configurations(tree):
    q = jnp.array([[-0.1, 2.5, 3.5], [0.7, -1.5, -3.5], [0.2, 0.3, 0.4]])
    clipped = np.asarray(jax.jit(Robot.clip)(tree, q))
    np.testing.assert_allclose(clipped[0], [0.0, 2.0, 3.5 - 2 * math.pi], atol=1e-5)
    np.testing.assert_allclose(clipped[1], [0.5, -1.0, -3.5 + 2 * math.pi], atol=1e-5)
    np.testing.assert_allclose(clipped[2], [0.2, 0.3, 0.4], atol=1e-6)

    sample = jax.jit(Robot.random_configurations, static_argnums=2)
    samples = np.asarray(sample(tree, jax.random.PRNGKey(0), (4, 500)))
    assert samples.shape == (4, 500, 3)
    lower, upper = np.asarray(tree.lower), np.asarray(tree.upper)
    assert np.all(samples >= lower) and np.all(samples <= upper)
    # Uniform: every joint's samples spread over most of its range.
    spread = (samples.max(axis=(0, 1)) - samples.min(axis=(0, 1))) / (upper - lower)
    assert np.all(spread > 0.9)


def test_loads_from_path_str_path_and_xml(tmp_path, tree):
    path = tmp_path / "toy.urdf"
    path.write_text(TREE_URDF)
    for source in (path, str(path), "\n   " + TREE_URDF.split("?>", 1)[1]):
        robot = Robot.from_urdf(source)
        assert robot.link_names == tree.link_names
        assert robot.joint_names == tree.joint_names
        np.testing.assert_array_equal(robot.origins, tree.origins)


def test_missing_meshes_are_not_loaded(tree):
    # TREE_URDF names package:// and file:// meshes that do not exist: the model still loads
    # and its kinematics works.
    poses = jax.jit(forward_kinematics)(tree, jnp.zeros(3))
    assert np.all(np.isfinite(np.asarray(poses.wxyz_xyz)))


def test_float64_robot():
    with jax.enable_x64(True):
        robot = Robot.from_urdf(TREE_URDF, dtype=jnp.float64)
        assert robot.dtype == jnp.float64
        assert robot.lower.dtype == jnp.float64
        np.testing.assert_allclose(robot.upper, [0.5, 2.0, math.pi], rtol=0, atol=1e-15)


def test_unknown_lookups_raise_value_error_naming_them(tree):
    with pytest.raises(ValueError, match="ghost_link"):
        tree.link_index("ghost_link")
    with pytest.raises(ValueError, match="ghost_joint"):
        tree.joint_index("ghost_joint")
    with pytest.raises(ValueError, match="j_m1.*mimic"):
        tree.joint_index("j_m1")
    with pytest.raises(ValueError, match="j_cam.*fixed"):
        tree.joint_index("j_cam")
    with pytest.raises(ValueError, match="nowhere"):
        tree.chain_joints("base", "nowhere")
    with pytest.raises(ValueError, match="nowhere"):
        jax.jit(link_jacobian, static_argnums=2)(tree, jnp.zeros(3), "nowhere")


def test_joint_without_limits_defaults():
    # Revolute without <limit>: URDF defaults lower = upper = 0; velocity/effort unknown -> inf.
    robot = Robot.from_urdf(
        '<robot name="r"><link name="a"/><link name="b"/>'
        '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
        '<axis xyz="0 0 1"/></joint></robot>'
    )
    np.testing.assert_array_equal(robot.lower, [0.0])
    np.testing.assert_array_equal(robot.upper, [0.0])
    assert np.isinf(robot.velocity_limits[0]) and np.isinf(robot.effort_limits[0])


def test_fixed_joint_with_mimic_tag_is_ignored():
    robot = Robot.from_urdf(
        '<robot name="r"><link name="a"/><link name="b"/><link name="c"/>'
        '<joint name="j" type="revolute"><parent link="a"/><child link="b"/>'
        '<limit lower="-1" upper="1"/></joint>'
        '<joint name="f" type="fixed"><parent link="b"/><child link="c"/>'
        '<mimic joint="j" multiplier="3"/></joint></robot>'
    )
    assert robot.joint_names == ("j",)
    assert robot.mimic_joint_names == ()


# --------------------------------------------------------------------------------------------
# Bad input: every case raises URDFError, and the message names the problem.
# --------------------------------------------------------------------------------------------


def _links(*names: str) -> str:
    return "".join(f'<link name="{n}"/>' for n in names)


def _joint(name: str, jtype: str, parent: str | None, child: str | None, extra: str = "") -> str:
    p = "" if parent is None else f'<parent link="{parent}"/>'
    c = "" if child is None else f'<child link="{child}"/>'
    return f'<joint name="{name}" type="{jtype}">{p}{c}{extra}</joint>'


def _robot(*parts: str) -> str:
    return '<robot name="bad">' + "".join(parts) + "</robot>"


_LIM = '<limit lower="-1" upper="1" velocity="1" effort="1"/>'


def _arm(extra: str = _LIM, jtype: str = "revolute") -> str:
    return _robot(_links("a", "b"), _joint("j1", jtype, "a", "b", extra))


BAD_URDFS = {
    "not_xml": ("<robot><link name='a'></robot>", ["not well-formed XML"]),
    "truncated": ('<robot name="x"><link name="a"/>', ["not well-formed XML"]),
    "root_not_robot": ('<model name="x"><link name="a"/></model>', ["<robot>", "model"]),
    "no_links": ('<robot name="x"/>', ["no <link>"]),
    "only_joints": (_robot(_joint("j", "fixed", "a", "b")), ["no <link>"]),
    "link_without_name": (_robot("<link/>"), ["<link>", "name"]),
    "joint_without_name": (
        _robot(_links("a", "b"), '<joint type="fixed"><parent link="a"/><child link="b"/></joint>'),
        ["<joint>", "name"],
    ),
    "missing_parent": (
        _robot(_links("a", "b"), _joint("j1", "fixed", None, "b")),
        ["j1", "parent"],
    ),
    "missing_child": (_robot(_links("a", "b"), _joint("j1", "fixed", "a", None)), ["j1", "child"]),
    "unknown_parent": (
        _robot(_links("a", "b"), _joint("j1", "fixed", "ghost", "b")),
        ["j1", "ghost", "does not exist"],
    ),
    "unknown_child": (
        _robot(_links("a", "b"), _joint("j1", "fixed", "a", "ghost")),
        ["j1", "ghost", "does not exist"],
    ),
    "two_parents": (
        _robot(
            _links("a", "b", "c"), _joint("j1", "fixed", "a", "c"), _joint("j2", "fixed", "b", "c")
        ),
        ["'c'", "two joints"],
    ),
    "self_loop": (_robot(_links("a"), _joint("j1", "fixed", "a", "a")), ["j1", "itself"]),
    "cycle_without_root": (
        _robot(_links("a", "b"), _joint("j1", "fixed", "a", "b"), _joint("j2", "fixed", "b", "a")),
        ["no root", "loop"],
    ),
    "cycle_detached_from_root": (
        _robot(
            _links("r", "a", "b", "c"),
            _joint("j1", "fixed", "a", "b"),
            _joint("j2", "fixed", "b", "c"),
            _joint("j3", "fixed", "c", "a"),
        ),
        ["a, b, c", "loop"],
    ),
    "multiple_roots": (
        _robot(_links("a", "b", "c"), _joint("j1", "fixed", "a", "b")),
        ["2 root links", "a, c"],
    ),
    "disconnected_links": (_robot(_links("a", "b")), ["2 root links", "a, b"]),
    "duplicate_link": (
        _robot(_links("a", "b", "a"), _joint("j1", "fixed", "a", "b")),
        ["duplicate link", "'a'"],
    ),
    "duplicate_joint": (
        _robot(
            _links("a", "b", "c"), _joint("j1", "fixed", "a", "b"), _joint("j1", "fixed", "b", "c")
        ),
        ["duplicate joint", "'j1'"],
    ),
    "floating_joint": (_arm(jtype="floating"), ["j1", "floating", "supported"]),
    "planar_joint": (_arm(jtype="planar"), ["j1", "planar", "supported"]),
    "banana_joint": (_arm(jtype="banana"), ["j1", "banana", "supported"]),
    "joint_without_type": (
        _robot(_links("a", "b"), '<joint name="j1"><parent link="a"/><child link="b"/></joint>'),
        ["j1", "supported"],
    ),
    "mimic_unknown_joint": (
        _robot(
            _links("a", "b", "c"),
            _joint("j1", "revolute", "a", "b", _LIM),
            _joint("j2", "revolute", "b", "c", _LIM + '<mimic joint="ghost"/>'),
        ),
        ["j2", "unknown joint 'ghost'"],
    ),
    "mimic_without_joint": (
        _robot(
            _links("a", "b", "c"),
            _joint("j1", "revolute", "a", "b", _LIM),
            _joint("j2", "revolute", "b", "c", _LIM + '<mimic multiplier="2"/>'),
        ),
        ["j2", "mimic"],
    ),
    "mimic_of_fixed": (
        _robot(
            _links("a", "b", "c"),
            _joint("f", "fixed", "a", "b"),
            _joint("j2", "revolute", "b", "c", _LIM + '<mimic joint="f"/>'),
        ),
        ["j2", "fixed joint 'f'"],
    ),
    "mimic_cycle": (
        _robot(
            _links("a", "b", "c", "d"),
            _joint("j1", "revolute", "a", "b", _LIM),
            _joint("j2", "revolute", "b", "c", _LIM + '<mimic joint="j3"/>'),
            _joint("j3", "revolute", "c", "d", _LIM + '<mimic joint="j2"/>'),
        ),
        ["mimic", "cycle"],
    ),
    "mimic_self": (_arm(_LIM + '<mimic joint="j1"/>'), ["mimic", "cycle", "j1"]),
    "non_numeric_xyz": (
        _arm(_LIM + '<origin xyz="0 zero 0"/>'),
        ["j1", "xyz", "0 zero 0", "not numeric"],
    ),
    "non_numeric_rpy": (
        _arm(_LIM + '<origin rpy="0 0 half_pi"/>'),
        ["j1", "rpy", "half_pi", "not numeric"],
    ),
    "wrong_count_xyz": (_arm(_LIM + '<origin xyz="1 2"/>'), ["j1", "xyz", "3 numbers"]),
    "non_numeric_axis": (_arm(_LIM + '<axis xyz="x y z"/>'), ["j1", "axis", "not numeric"]),
    "non_numeric_limit": (
        _arm('<limit lower="-1" upper="one" velocity="1" effort="1"/>'),
        ["j1", "upper", "one", "not numeric"],
    ),
    "non_numeric_velocity": (
        _arm('<limit lower="-1" upper="1" velocity="fast" effort="1"/>'),
        ["j1", "velocity", "fast"],
    ),
    "non_numeric_mimic": (
        _robot(
            _links("a", "b", "c"),
            _joint("j1", "revolute", "a", "b", _LIM),
            _joint("j2", "revolute", "b", "c", _LIM + '<mimic joint="j1" multiplier="two"/>'),
        ),
        ["j2", "multiplier", "two"],
    ),
    "nan_xyz": (_arm(_LIM + '<origin xyz="0 nan 0"/>'), ["j1", "xyz", "not finite"]),
    "nan_rpy": (_arm(_LIM + '<origin rpy="NaN 0 0"/>'), ["j1", "rpy", "not finite"]),
    "inf_xyz": (_arm(_LIM + '<origin xyz="inf 0 0"/>'), ["j1", "xyz", "not finite"]),
    "nan_axis": (_arm(_LIM + '<axis xyz="0 0 nan"/>'), ["j1", "axis", "not finite"]),
    "nan_limit": (
        _arm('<limit lower="nan" upper="1" velocity="1" effort="1"/>'),
        ["j1", "lower", "not finite"],
    ),
    "zero_axis": (_arm(_LIM + '<axis xyz="0 0 0"/>'), ["j1", "zero", "axis"]),
    "zero_axis_prismatic": (
        _arm(_LIM + '<axis xyz="0 0 0"/>', "prismatic"),
        ["j1", "zero", "axis"],
    ),
    "lower_above_upper": (
        _arm('<limit lower="2" upper="1" velocity="1" effort="1"/>'),
        ["j1", "lower", "2", "above", "upper", "1"],
    ),
    "missing_file": ("/no/such/dir/robot.urdf", ["not found", "/no/such/dir/robot.urdf"]),
    "plain_text": ("this is not a urdf", ["not found"]),
}


@pytest.mark.parametrize("case", sorted(BAD_URDFS))
def test_bad_urdf_raises_urdf_error(case):
    source, fragments = BAD_URDFS[case]
    with pytest.raises(URDFError) as info:
        Robot.from_urdf(source)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{case}: {fragment!r} not in {message!r}"


def test_urdf_error_is_value_error():
    assert issubclass(URDFError, ValueError)


def test_missing_path_object(tmp_path):
    missing = tmp_path / "absent.urdf"
    with pytest.raises(URDFError, match="absent.urdf"):
        Robot.from_urdf(missing)
    with pytest.raises(URDFError, match="not found"):
        Robot.from_urdf(pathlib.Path(tmp_path))  # a directory is not a URDF file


def test_bad_file_contents(tmp_path):
    path = tmp_path / "broken.urdf"
    path.write_text("<robot name='x'><link name='a'>")
    with pytest.raises(URDFError, match="not well-formed"):
        Robot.from_urdf(path)


def test_bad_dtype():
    with pytest.raises(ValueError, match="float32 or float64"):
        Robot.from_urdf(TREE_URDF, dtype=jnp.int32)


@pytest.mark.parametrize(
    "robot_name, links",
    [
        ("panda", ("panda_hand",)),
        ("panda", ("panda_hand", "panda_leftfinger")),
        ("ur5", ("tool0",)),
        ("ur5", ("wrist_2_link", "base_link")),
        ("toy_tree", ("tool", "arm_c", "camera")),
        ("toy_tree", ("tool",)),
    ],
)
def test_subtree_places_its_links_like_the_reference_fk(robot_name, links):
    """The solver's reduced robot (ancestors only, fixed links merged away) puts every
    requested link where the independent float64 FK of the whole URDF does."""
    from reference_fk import quat_wxyz_to_matrix, reference_fk

    from pyroki_ros.robots import urdf_path

    urdf = TREE_URDF if robot_name == "toy_tree" else urdf_path(robot_name).read_text()
    robot = Robot.from_urdf(urdf)
    reduced = robot.subtree(links)
    for link in links:
        assert link in reduced.link_names  # requested links are kept, even fixed ones
    needed = {robot.link_names[a] for link in links for a in robot.ancestors(link)}
    assert set(reduced.link_names) <= needed
    for name in needed - set(reduced.link_names):  # merged away: only fixed-joint links
        assert robot.joint_type[robot.link_index(name)] == 0, name
    if links == ("panda_hand",):  # link8 (fixed, between link7 and the hand) is merged
        assert "panda_link8" not in reduced.link_names
    q = robot.random_configurations(jax.random.PRNGKey(3), (6,))
    poses = np.asarray(forward_kinematics(reduced, q).wxyz_xyz, np.float64)
    for b in range(6):
        expected = reference_fk(urdf, np.asarray(q[b], np.float64), robot.joint_names)
        for link in links:
            pose = poses[b, reduced.link_index(link)]
            np.testing.assert_allclose(pose[4:], expected[link][:3, 3], atol=2e-6)
            np.testing.assert_allclose(
                quat_wxyz_to_matrix(pose[:4]), expected[link][:3, :3], atol=2e-6
            )


@pytest.mark.parametrize("robot_name,link", [("panda", "panda_hand"), ("ur5", "tool0")])
def test_reach_ball_holds_every_sampled_configuration_and_is_not_loose(robot_name, link):
    """Robot.reach against the independent reference FK at random configurations: the link
    origin never leaves the ball, and the farthest sample comes within 30 % of its radius."""
    import reference_fk as ref

    urdf_text = urdf_path(robot_name).read_text()
    model = ref.parse_urdf(urdf_text)
    robot = Robot.from_urdf(urdf_text)
    center, radius = robot.reach(link)
    lower, upper = (np.asarray(x) for x in ref.actuated_joint_limits(model))
    names = ref.actuated_joint_names(model)
    rng = np.random.default_rng(3)
    distances = [
        np.linalg.norm(ref.reference_fk(model, q, names)[link][:3, 3] - center)
        for q in rng.uniform(lower, upper, (300, len(names)))
    ]
    assert max(distances) <= radius + 1e-6
    assert max(distances) >= 0.7 * radius
