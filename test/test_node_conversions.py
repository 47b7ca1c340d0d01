"""The ROS boundary without DDS: quaternion order (conversions.py), host rigid transforms
(frames.py), request checks and the translation of IKObjective messages into core objectives
(requests.py), the loaded model's program cache (model.py), parameters (params.py).

Transforms are checked against test/reference_fk.py's independent matrix code.
"""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import reference_fk as ref
from geometry_msgs.msg import Point, Pose, Quaternion, Vector3
from pyroki_ros.msg import ErrorCode, IKObjective
from sensor_msgs.msg import JointState

from pyroki_ros.ros import conversions as C
from pyroki_ros.ros import frames as F
from pyroki_ros.ros import requests as R


def random_wxyz_xyz(rng, n=None):
    shape = () if n is None else (n,)
    q = rng.normal(size=(*shape, 4))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return np.concatenate([q, rng.uniform(-1, 1, size=(*shape, 3))], axis=-1)


def matrix(a):
    return ref.make_transform(ref.quat_wxyz_to_matrix(a[:4]), a[4:])


def test_quaternion_order_round_trip():
    xyzw = np.array([0.1, 0.2, 0.3, 0.9])
    wxyz = C.xyzw_to_wxyz(xyzw)
    assert wxyz.tolist() == [0.9, 0.1, 0.2, 0.3]
    assert C.wxyz_to_xyzw(wxyz).tolist() == xyzw.tolist()
    batch = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(C.wxyz_to_xyzw(C.xyzw_to_wxyz(batch)), batch)


def test_pose_message_round_trip_keeps_ros_order():
    pose = Pose(
        position=Point(x=1.0, y=2.0, z=3.0),
        orientation=Quaternion(x=0.0, y=0.0, z=math.sin(0.25), w=math.cos(0.25)),
    )
    a = R.pose(pose, "p")
    np.testing.assert_allclose(a, [math.cos(0.25), 0, 0, math.sin(0.25), 1, 2, 3])
    np.testing.assert_array_equal(C.pose_to_wxyz_xyz(pose), a)
    back = C.wxyz_xyz_to_pose(a)
    assert (back.orientation.z, back.orientation.w) == pytest.approx(
        (math.sin(0.25), math.cos(0.25))
    )
    assert (back.position.x, back.position.y, back.position.z) == (1.0, 2.0, 3.0)


def test_quaternion_is_normalised():
    pose = Pose(orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=2.0))
    np.testing.assert_allclose(R.pose(pose, "p")[:4], [1, 0, 0, 0])


def test_transforms_match_reference_matrices():
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = random_wxyz_xyz(rng), random_wxyz_xyz(rng)
        np.testing.assert_allclose(matrix(F.compose(a, b)), matrix(a) @ matrix(b), atol=1e-12)
        np.testing.assert_allclose(matrix(F.inverse(a)), np.linalg.inv(matrix(a)), atol=1e-12)
        v = rng.normal(size=3)
        np.testing.assert_allclose(F.rotate(a[:4], v), matrix(a)[:3, :3] @ v, atol=1e-12)
        np.testing.assert_allclose(F.apply(a, v), (matrix(a) @ [*v, 1.0])[:3], atol=1e-12)
    batch_a, batch_b = random_wxyz_xyz(rng, 5), random_wxyz_xyz(rng, 5)
    out = F.compose(batch_a, batch_b)
    for i in range(5):
        np.testing.assert_allclose(out[i], F.compose(batch_a[i], batch_b[i]), atol=1e-15)
    assert out.dtype == np.float64  # host maths: no float32 round trip through JAX


@pytest.mark.parametrize(
    "pose, orientation",
    [
        (Pose(position=Point(x=math.nan)), True),
        (Pose(position=Point(z=math.inf)), False),
        (Pose(orientation=Quaternion(x=math.nan, w=1.0)), True),
        (Pose(orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=math.inf)), False),
        (Pose(orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=0.0)), True),
    ],
)
def test_bad_poses_are_invalid_pose(pose, orientation):
    with pytest.raises(R.RequestError) as info:
        R.pose(pose, "target", orientation=orientation)
    assert info.value.code == ErrorCode.INVALID_POSE
    assert "target" in info.value.message


def test_zero_quaternion_is_fine_where_orientation_is_unused():
    pose = Pose(orientation=Quaternion(x=0.0, y=0.0, z=0.0, w=0.0))
    np.testing.assert_allclose(R.pose(pose, "t", orientation=False)[:4], [1, 0, 0, 0])


def test_vectors():
    np.testing.assert_allclose(R.unit_vector(Vector3(x=0.0, y=3.0, z=4.0), "a"), [0, 0.6, 0.8])
    np.testing.assert_allclose(R.unit_vector(Vector3(), "a", default=(0, 0, 1)), [0, 0, 1])
    with pytest.raises(R.RequestError) as info:
        R.unit_vector(Vector3(), "axis")
    assert info.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    "state, message",
    [
        (JointState(name=["a", "b"], position=[1.0]), "2 names but 1 positions"),
        (JointState(name=["a"], position=[math.nan]), "NaN"),
        (JointState(name=["a", "a"], position=[1.0, 2.0]), "twice"),
    ],
)
def test_bad_joint_states(state, message):
    with pytest.raises(R.RequestError) as info:
        R.joint_state_positions(state, "seed")
    assert info.value.code == ErrorCode.INVALID_JOINT_STATE
    assert message in info.value.message


def test_durations():
    d = C.seconds_to_duration(1.25)
    assert (d.sec, d.nanosec) == (1, 250_000_000)
    assert C.duration_seconds(d) == pytest.approx(1.25)


# --- IKObjective -> core objective (needs the core, not DDS) --------------------------------


@pytest.fixture(scope="module")
def panda():
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.model import LoadedModel

    urdf = urdf_path("panda").read_text()
    return LoadedModel(urdf, base_frame="panda_link0", tip_link="panda_hand"), ref.parse_urdf(urdf)


def test_target_in_a_link_frame_is_placed_with_fk_at_the_seed(panda):
    model, urdf = panda
    q = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5, 0.01])
    frames = model.fk(q)
    link3 = ref.reference_fk(urdf, q, model.joint_names)["panda_link3"]
    msg = IKObjective(type=IKObjective.HINGE, link="panda_hand")
    msg.target.header.frame_id = "panda_link3"
    msg.target.pose.position = Point(x=0.1, y=0.2, z=0.3)
    msg.axis = Vector3(x=1.0, y=0.0, z=0.0)
    objective = R.objective(model, msg, "o", frames)
    assert objective.kind == "hinge" and objective.reference is None
    expected = link3 @ np.array([0.1, 0.2, 0.3, 1.0])
    np.testing.assert_allclose(np.asarray(objective.target)[4:], expected[:3], atol=1e-5)
    np.testing.assert_allclose(np.asarray(objective.axis), link3[:3, 0], atol=1e-5)


def test_relative_objective_keeps_the_reference(panda):
    model, _ = panda
    frames = model.fk(model.robot.limits.center())
    msg = IKObjective(type=IKObjective.POSE, link="panda_hand", reference_link="panda_link3")
    msg.target.pose.position.z = 0.4
    objective = R.objective(model, msg, "o", frames)
    assert objective.reference == "panda_link3"
    np.testing.assert_allclose(np.asarray(objective.target), [1, 0, 0, 0, 0, 0, 0.4])
    msg.target.header.frame_id = "panda_link2"
    with pytest.raises(R.RequestError) as info:
        R.objective(model, msg, "o", frames)
    assert info.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize(
    "kind, core_kind",
    [
        (IKObjective.POSE, "pose"),
        (IKObjective.POSITION, "point"),
        (IKObjective.ORIENTATION, "orientation"),
        (IKObjective.HINGE, "hinge"),
        (IKObjective.PLANE, "plane"),
        (IKObjective.LINE, "line"),
    ],
)
def test_objective_kinds(panda, kind, core_kind):
    model, _ = panda
    msg = IKObjective(type=kind, link="panda_hand")
    msg.axis.z = 1.0
    msg.local_point.x = 0.05
    objective = R.objective(model, msg, "o", model.fk(model.robot.limits.center()))
    assert objective.kind == core_kind
    if core_kind != "orientation":
        np.testing.assert_allclose(np.asarray(objective.local_point), [0.05, 0, 0])


def test_point_objective_is_aim_when_the_core_has_it(panda):
    from pyroki_ros import objectives as O

    model, _ = panda
    msg = IKObjective(type=IKObjective.POINT, link="panda_hand")
    msg.target.pose.position.x = 1.0
    assert hasattr(O, "aim")
    objective = R.objective(model, msg, "o", model.fk(model.robot.limits.center()))
    assert objective.kind == "aim"
    np.testing.assert_allclose(np.asarray(objective.local_axis), [0, 0, 1])  # zero -> +z


def test_default_active_joints_are_the_ones_that_move_the_objectives(panda):
    model, _ = panda
    msg = IKObjective(type=IKObjective.POSE, link="panda_link4")
    objective = R.objective(model, msg, "o", model.fk(model.robot.limits.center()))
    assert R.active_joints(model, [], [objective]) == [f"panda_joint{i}" for i in range(1, 5)]
    assert R.active_joints(model, ["panda_joint2"], [objective]) == ["panda_joint2"]
    with pytest.raises(R.RequestError) as info:
        R.active_joints(model, ["panda_joint9"], [objective])
    assert info.value.code == ErrorCode.UNKNOWN_JOINT


# --- parameters: config/*.yaml <-> what the node declares ------------------------------------


@pytest.mark.parametrize("robot", ["panda", "ur5"])
def test_config_files_match_the_declared_parameters(robot):
    yaml = pytest.importorskip("yaml")
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.params import NODE_NAME, PARAMETERS

    config = pathlib.Path(__file__).resolve().parents[1] / "config" / f"{robot}.yaml"
    values = yaml.safe_load(config.read_text())[NODE_NAME]["ros__parameters"]
    declared = {p.name: p for p in PARAMETERS}
    assert set(values) == set(declared), set(values) ^ set(declared)
    for name, value in values.items():
        default = declared[name].default
        assert type(value) is type(default), (name, value, default)  # rclpy types are strict
        assert declared[name].description
        if declared[name].float_range:
            low, high = declared[name].float_range
            assert low <= value <= high, name
    links = set(ref.parse_urdf(urdf_path(robot)).links)
    assert values["base_frame"] in links and values["tip_link"] in links


def test_compiled_ik_programs_are_bounded_and_an_evicted_one_solves_again():
    """Each objective structure compiles a program; past ``max_programs`` the least recently
    used goes (memory stays bounded whatever structures clients send), and a request for it
    compiles it again and is answered right (reference FK)."""
    from pyroki_ros import objectives as O
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.model import LoadedModel

    urdf = urdf_path("panda").read_text()
    model, reference = LoadedModel(urdf, max_programs=2), ref.parse_urdf(urdf)
    q_goal = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5, 0.01])
    seed = q_goal + 0.1
    frames = ref.reference_fk(reference, q_goal, model.joint_names)

    def problem(link):
        return [O.position(link, frames[link][:3, 3])]

    def solve(link):
        result = model.solve(problem(link), seed)
        assert result.success, (result.position_error, result.orientation_error)
        reached = ref.reference_fk(reference, np.asarray(result.q, np.float64), model.joint_names)
        assert np.linalg.norm(reached[link][:3, 3] - frames[link][:3, 3]) < 1.1e-3

    links = ["panda_link5", "panda_link7", "panda_hand"]
    for link in links:
        solve(link)
    assert model.compiled_programs == 2
    assert not model.is_compiled(problem(links[0]), seed)  # least recently used: dropped
    assert all(model.is_compiled(problem(link), seed) for link in links[1:])
    solve(links[0])
    assert model.is_compiled(problem(links[0]), seed)
    assert not model.is_compiled(problem(links[1]), seed)
    assert model.compiled_programs == 2


def test_a_batch_with_a_budget_runs_on_programs_compiled_already():
    """A ~/solve_ik_batch with a time budget is not held up by a first compile (2-3 s for
    1024 targets on a CPU, hostile-input case 2c): while its own size's program is not
    compiled, it runs in chunks of a smaller size that is, and answers right (reference FK);
    without a budget it compiles its size."""
    import jaxlie

    from pyroki_ros import objectives as O
    from pyroki_ros.robots import urdf_path
    from pyroki_ros.ros.model import LoadedModel

    urdf = urdf_path("panda").read_text()
    model, reference = LoadedModel(urdf), ref.parse_urdf(urdf)
    limits = model.robot.limits
    rng = np.random.default_rng(4)
    goals = rng.uniform(limits.lower, limits.upper, (200, len(model.joint_names)))
    frames = [ref.reference_fk(reference, q, model.joint_names)["panda_hand"] for q in goals]
    poses = np.stack([np.asarray(jaxlie.SE3.from_matrix(f).wxyz_xyz) for f in frames])
    seed = limits.center()

    model.solve_batch(O.pose("panda_hand", poses[:16]), seed)  # compiles the 16-target bucket
    programs = model.compiled_programs
    batch = O.pose("panda_hand", poses)
    result = model.solve_batch(batch, seed, timeout=120.0)
    assert model.compiled_programs == programs and not model.is_compiled((batch,), seed)
    assert not result.timed_out and result.success.mean() > 0.95
    for q, target in zip(result.q[result.success], np.asarray(frames)[result.success]):
        reached = ref.reference_fk(reference, np.asarray(q, np.float64), model.joint_names)
        assert np.linalg.norm(reached["panda_hand"][:3, 3] - target[:3, 3]) < 1.1e-3

    model.solve_batch(batch, seed)  # no budget: its own program
    assert model.is_compiled((batch,), seed)


def test_fixed_frame_table_reads_ros_order_and_refuses_malformed_entries():
    from pyroki_ros.ros.params import fixed_frame_table

    table = fixed_frame_table("world panda_link0 1 2 3 0 0 0 1;  cam panda_hand 0 0 0.1 0 0 1 0 ;")
    assert set(table) == {"world", "cam"}
    parent, pose = table["cam"]
    assert parent == "panda_hand"
    np.testing.assert_allclose(pose, [0, 0, 0, 1, 0, 0, 0.1])  # xyzw (0, 0, 1, 0) -> wxyz
    np.testing.assert_allclose(table["world"][1], [1, 0, 0, 0, 1, 2, 3])
    assert fixed_frame_table("") == {}
    for bad in (
        "world panda_link0 0 0 0",
        "world panda_link0 0 0 0 0 0 0 x",
        "world panda_link0 0 0 nan 0 0 0 1",
        "world panda_link0 0 0 0 0 0 0 0",
        "a b 0 0 0 0 0 0 1; a b 0 0 0 0 0 0 1",
    ):
        with pytest.raises(ValueError, match="fixed_frames"):
            fixed_frame_table(bad)
