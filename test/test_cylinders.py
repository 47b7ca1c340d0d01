"""Cylinder obstacles (``World.create(cylinder_poses=..., cylinder_radii=...,
cylinder_half_heights=...)``): exact signed distances against the float64 numpy reference of
``test/batched_reference.py`` (``cylinder_signed_distance``) for points inside, outside, on the
axis and near the rims; gradients against its central finite differences; the grasp over a
can that a capsule would refuse; validation, padding and the order of the kinds; a Panda plan
around cans checked by ``test/plan_check.py`` (``collision_reference.sphere_cylinder``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import plan_check as check
import pytest
import scenes  # bench/scenes.py
from batched_reference import cylinder_signed_distance
from reference_fk import quat_wxyz_to_matrix

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.collision import (
    FAR,
    KINDS,
    RobotSpheres,
    World,
    checked_pairs,
    nearest_obstacle_t,
    world_distances,
)
from pyroki_ros.planning.trajopt import TrajectoryOptimizer
from pyroki_ros.robots import urdf_path
from pyroki_ros.viz import display


def _cans(rng, n: int) -> dict:
    """``n`` cylinders with random orientations (quaternions not normalised), (n, 7) poses."""
    quats = rng.normal(size=(n, 4))
    return {
        "cylinder_poses": np.concatenate([quats, rng.uniform(-0.3, 0.3, (n, 3))], axis=1),
        "cylinder_radii": rng.uniform(0.02, 0.1, n),
        "cylinder_half_heights": rng.uniform(0.03, 0.2, n),
    }


def _reference(points: np.ndarray, cans: dict) -> np.ndarray:
    """(..., N) reference signed distances of ``points`` (..., 3) to the cans."""
    poses = np.asarray(cans["cylinder_poses"], np.float64)
    quats = poses[:, :4] / np.linalg.norm(poses[:, :4], axis=1, keepdims=True)
    rot = np.stack([quat_wxyz_to_matrix(q) for q in quats])
    return cylinder_signed_distance(
        points, rot, poses[:, 4:], cans["cylinder_radii"], cans["cylinder_half_heights"]
    )


def _points_around(rng, cans: dict, per_can: int) -> tuple[np.ndarray, np.ndarray]:
    """Points (n, 3) around each can, in its frame: inside, on the axis, near the side, near
    a cap, near a rim (within 2 mm) and further out; and each point's can index (n,)."""
    poses = np.asarray(cans["cylinder_poses"], np.float64)
    out, owner = [], []
    for i, (pose, r, h) in enumerate(
        zip(poses, cans["cylinder_radii"], cans["cylinder_half_heights"])
    ):
        angle = rng.uniform(0, 2 * np.pi, per_can)
        k = per_can // 6
        rho = np.concatenate(
            [
                rng.uniform(0, r, k),  # inside
                np.zeros(k),  # on the axis
                r + rng.uniform(-0.02, 0.02, k),  # near the side
                rng.uniform(0, r, k),  # near a cap
                r + rng.uniform(-0.002, 0.002, k),  # near a rim
                rng.uniform(0, 3 * r, per_can - 5 * k),  # anywhere near
            ]
        )
        z = np.concatenate(
            [
                rng.uniform(-h, h, k),
                rng.uniform(-2 * h, 2 * h, k),
                rng.uniform(-h, h, k),
                rng.choice([-1, 1], k) * (h + rng.uniform(-0.02, 0.02, k)),
                rng.choice([-1, 1], k) * (h + rng.uniform(-0.002, 0.002, k)),
                rng.uniform(-3 * h, 3 * h, per_can - 5 * k),
            ]
        )
        local = np.stack([rho * np.cos(angle), rho * np.sin(angle), z], axis=1)
        rot = quat_wxyz_to_matrix(pose[:4] / np.linalg.norm(pose[:4]))
        out.append(local @ rot.T + pose[4:])
        owner.append(np.full(per_can, i))
    return np.concatenate(out), np.concatenate(owner)


def _central_differences(f, points: np.ndarray, h: float = 1e-6) -> np.ndarray:
    """(n, 3) d f / d point of a per-point function f (n, 3) -> (n,)."""
    return np.stack([(f(points + h * e) - f(points - h * e)) / (2 * h) for e in np.eye(3)], axis=1)


# --- distances ------------------------------------------------------------------------------


def test_distances_match_reference_inside_outside_and_near_rims_float64():
    rng = np.random.default_rng(0)
    cans = _cans(rng, 4)
    points, _ = _points_around(rng, cans, 120)
    radii = rng.uniform(0.0, 0.05, len(points))
    expected = _reference(points, cans) - radii[:, None]
    assert np.sum(expected + radii[:, None] < 0) > 100  # many centres inside
    with jax.enable_x64(True):
        world = World.create(**cans, dtype=jnp.float64)
        d = np.asarray(jax.jit(world_distances)(jnp.asarray(points), jnp.asarray(radii), world))
        nearest, _ = jax.jit(nearest_obstacle_t)(tuple(jnp.asarray(points.T)), world.padded())
    assert d.shape == (len(points), 4)
    np.testing.assert_allclose(d, expected, atol=1e-12)
    np.testing.assert_allclose(nearest, _reference(points, cans).min(axis=1), atol=1e-12)


def test_float32_padded_distances_match_reference():
    rng = np.random.default_rng(1)
    cans = _cans(rng, 3)
    points, _ = _points_around(rng, cans, 60)
    world = World.create(**cans).padded()
    assert world.counts == (0, 0, 0, 0, 4)
    d = np.asarray(
        jax.jit(world_distances)(jnp.asarray(points, jnp.float32), jnp.zeros(len(points)), world)
    )
    np.testing.assert_allclose(d[:, :3], _reference(points, cans), atol=2e-6)
    assert np.all(d[:, 3] > 0.5 * FAR)  # the dummy is inert


# --- gradients ------------------------------------------------------------------------------


def test_gradients_match_finite_differences_of_the_reference():
    """Autodiff of the distances and the planner's analytic gradient of the nearest one,
    against central differences of the reference away from its kinks (the rim, the axis,
    inside points equally deep under the side and a cap, the mid-plane inside)."""
    rng = np.random.default_rng(2)
    cans = _cans(rng, 1)
    points, _ = _points_around(rng, cans, 300)
    f = lambda p: _reference(p, cans)[:, 0]
    fd = _central_differences(f, points)
    pose = np.asarray(cans["cylinder_poses"][0])
    rot = quat_wxyz_to_matrix(pose[:4] / np.linalg.norm(pose[:4]))
    local = (points - pose[4:]) @ rot
    r, h = cans["cylinder_radii"][0], cans["cylinder_half_heights"][0]
    radial = np.hypot(local[:, 0], local[:, 1]) - r
    axial = np.abs(local[:, 2]) - h
    # (Central differences with h = 1e-6 lose digits within 1 mm of a curved rim or axis.)
    smooth = (
        (np.hypot(radial, axial) > 1e-3)  # not on the rim
        & (np.hypot(local[:, 0], local[:, 1]) > 1e-3)  # not on the axis
        & ((np.maximum(radial, axial) > 0) | (np.abs(radial - axial) > 1e-4))
        & ((np.maximum(radial, axial) > 0) | (np.abs(local[:, 2]) > 1e-4))
    )
    assert smooth.sum() > 200
    with jax.enable_x64(True):
        world = World.create(**cans, dtype=jnp.float64)
        auto = jax.jit(jax.grad(lambda p: jnp.sum(world_distances(p, jnp.zeros(len(p)), world))))(
            jnp.asarray(points)
        )
        _, analytic = jax.jit(nearest_obstacle_t)(tuple(jnp.asarray(points.T)), world.padded())
    analytic = np.stack([np.asarray(g) for g in analytic], axis=1)
    np.testing.assert_allclose(np.asarray(auto)[smooth], fd[smooth], atol=1e-6)
    np.testing.assert_allclose(analytic[smooth], fd[smooth], atol=1e-6)
    # Everywhere (kinks too) the analytic gradient is a unit vector: it always pushes.
    np.testing.assert_allclose(np.linalg.norm(analytic, axis=1), 1.0, atol=1e-9)


def test_gradients_are_finite_on_the_axis_the_rim_and_the_centre():
    can = {"cylinder_poses": [1, 0, 0, 0, 0, 0, 0], "cylinder_radii": 0.1}
    world = World.create(**can, cylinder_half_heights=0.2).padded()
    points = jnp.array(
        [
            [0.0, 0.0, 0.0],  # the centre
            [0.0, 0.0, 0.1],  # on the axis, inside
            [0.0, 0.0, 0.5],  # on the axis, above the top cap
            [0.1, 0.0, 0.2],  # on the rim
            [0.0, 0.1, -0.2],  # on the bottom rim
            [0.1, 0.0, 0.0],  # on the side
        ]
    )
    g = jax.jit(jax.grad(lambda p: jnp.sum(world_distances(p, jnp.zeros(len(p)), world))))(points)
    assert np.all(np.isfinite(np.asarray(g)))
    rows = world_distances(points, jnp.zeros(len(points)), world)[:, 0]
    np.testing.assert_allclose(rows, [-0.1, -0.1, 0.3, 0.0, 0.0, 0.0], atol=1e-7)
    _, analytic = jax.jit(nearest_obstacle_t)(tuple(points.T), world)
    analytic = np.stack([np.asarray(a) for a in analytic], axis=1)
    assert np.all(np.isfinite(analytic))
    # Above the cap: straight up; on the axis inside: out through the nearer side.
    np.testing.assert_allclose(analytic[2], [0, 0, 1], atol=1e-7)
    np.testing.assert_allclose(np.linalg.norm(analytic[[0, 1, 2, 5]], axis=1), 1.0, atol=1e-6)


# --- the grasp a capsule refuses ------------------------------------------------------------


def test_a_grasp_over_a_can_is_clear_of_the_cylinder_and_not_of_its_capsule():
    """A 3 cm-radius can 12 cm tall on a table; a fingertip sphere (r = 1 cm) 1.5 cm above its
    top face, 2 cm off the axis: 5 mm clear of the can, 1.5 cm deep in the capsule around it
    (which reaches 3 cm past each cap)."""
    r, half = 0.03, 0.06
    center = np.array([0.5, 0.0, half])
    tip = center + [0.02, 0.0, half + 0.015]
    as_cylinder = World.create(
        cylinder_poses=[1, 0, 0, 0, *center], cylinder_radii=r, cylinder_half_heights=half
    )
    as_capsule = World.create(
        capsule_a=center - [0, 0, half], capsule_b=center + [0, 0, half], capsule_radii=r
    )
    d_cyl = float(world_distances(jnp.asarray([tip]), jnp.array([0.01]), as_cylinder)[0, 0])
    d_cap = float(world_distances(jnp.asarray([tip]), jnp.array([0.01]), as_capsule)[0, 0])
    can = {
        "cylinder_poses": [[1, 0, 0, 0, *center]],
        "cylinder_radii": [r],
        "cylinder_half_heights": [half],
    }
    reference = float(_reference(tip, can)[0]) - 0.01
    assert np.isclose(reference, 0.005)
    assert np.isclose(d_cyl, reference, atol=1e-6)
    assert d_cyl > 0 > d_cap
    assert np.isclose(d_cap, np.hypot(0.02, 0.015) - r - 0.01, atol=1e-6)


# --- validation, padding, order -------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"cylinder_poses": [[1, 0, 0, 0, 0, 0, np.nan]]}, "not finite"),
        ({"cylinder_radii": [0.0]}, r"cylinder_radii\[0\] must be > 0"),
        ({"cylinder_half_heights": [-1.0]}, r"cylinder_half_heights\[0\] must be > 0"),
        ({"cylinder_poses": [[0, 0, 0, 0, 0, 0, 0]]}, r"cylinder_poses\[0\].*quaternion"),
        ({"cylinder_poses": [[1, 0, 0, 0, 0, 0]]}, "shape"),
        ({"cylinder_radii": [0.1, 0.2]}, "different counts"),
        ({"cylinder_half_heights": None}, "without cylinder_half_heights"),
    ],
)
def test_cylinder_validation(kwargs, match):
    good = {
        "cylinder_poses": [[1, 0, 0, 0, 0, 0, 0]],
        "cylinder_radii": [0.1],
        "cylinder_half_heights": [0.2],
    }
    with pytest.raises(ValueError, match=match):
        World.create(**(good | kwargs))


def test_quaternions_are_normalised():
    world = World.create(
        cylinder_poses=[0, 0, 0, 2.0, 1, 2, 3], cylinder_radii=0.1, cylinder_half_heights=0.2
    )
    np.testing.assert_allclose(world.cylinder_poses, [[0, 0, 0, 1, 1, 2, 3]])


def test_cylinders_come_last_in_counts_names_distances_and_shapes():
    world = World.create(
        sphere_centers=[0.0, 0.0, 1.0],
        sphere_radii=0.1,
        capsule_a=[0.0, 1.0, 0.0],
        capsule_b=[0.0, 1.0, 0.2],
        capsule_radii=0.05,
        box_poses=[1, 0, 0, 0, 1.0, 0.0, 0.0],
        box_half_extents=[0.1, 0.1, 0.1],
        halfspace_normals=[0, 0, 1],
        halfspace_offsets=1.0,
        cylinder_poses=[[1, 0, 0, 0, -1.0, 0.0, 0.0], [1, 0, 0, 0, 0.0, -1.0, 0.0]],
        cylinder_radii=[0.05, 0.1],
        cylinder_half_heights=[0.2, 0.3],
        names=["ball", "pipe", "crate", "floor", "can", "mug"],
    )
    assert KINDS == ("sphere", "capsule", "box", "half-space", "cylinder")
    assert world.counts == (1, 1, 1, 1, 2) and world.n_obstacles == 6
    unnamed = World.create(**{f: getattr(world, f) for f in _fields(world)})
    assert [unnamed.name(i) for i in range(6)][-2:] == ["cylinder 0", "cylinder 1"]
    # One column per obstacle: the point (-1, 0, 0.5) is 0.3 above the first can's top; in
    # the second's frame it is at (-1, 1, 0.5): off its rim.
    d = np.asarray(world_distances(jnp.array([[-1.0, 0.0, 0.5]]), jnp.zeros(1), world))[0]
    assert np.isclose(d[4], 0.3, atol=1e-6)
    assert np.isclose(d[5], np.hypot(np.sqrt(2) - 0.1, 0.2), atol=1e-6)
    np.testing.assert_allclose(d[3], 1.5)  # the half-space z > -1
    padded = world.padded((0, 4))
    assert padded.counts == (4, 4, 4, 4, 4)
    d_pad = np.asarray(world_distances(jnp.array([[-1.0, 0.0, 0.5]]), jnp.zeros(1), padded))[0]
    np.testing.assert_allclose(d_pad[[0, 4, 8, 12, 16, 17]], d, atol=1e-6)
    # Shapes in the same order, the cylinders drawn as cylinders (height 2 h).
    shapes = display.world_shapes(world)
    assert [s.label for s in shapes][-2:] == ["can", "mug"]
    assert shapes[-1].kind == "cylinder"
    np.testing.assert_allclose(shapes[-1].scale, [0.2, 0.2, 0.6])


def _fields(world: World) -> list[str]:
    return [f for f in World.__dataclass_fields__ if f != "names"]


def test_an_allowed_contact_with_a_can_frees_its_column_only():
    from pyroki_ros.collision import ContactRules

    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    world = World.create(
        box_poses=[1, 0, 0, 0, 0.5, 0.0, 0.0],
        box_half_extents=[0.1, 0.1, 0.1],
        cylinder_poses=[1, 0, 0, 0, 0.5, 0.3, 0.1],
        cylinder_radii=0.03,
        cylinder_half_heights=0.06,
        names=["table", "can"],
    )
    rules = ContactRules(allowed=(("panda_hand", "can"),))
    world_ok, _ = checked_pairs(robot, spheres, world, rules)
    hand = np.asarray(spheres.link_names) == "panda_hand"
    assert hand.any()
    assert not world_ok[hand, 1].any() and world_ok[hand, 0].all()


# --- a plan around cans, checked independently -----------------------------------------------


def test_panda_plans_around_cans_are_collision_free_between_knots():
    """Tall cans in the workspace; start / goal pairs whose straight joint-space line goes
    through a can (by the reference); the plan passes the independent dense check."""
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    model = check.SphereModel(spheres)
    rng = np.random.default_rng(3)
    n = 5
    upright = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    positions = np.stack(
        [rng.uniform(0.3, 0.6, n), rng.uniform(-0.4, 0.4, n), rng.uniform(0.2, 0.5, n)], 1
    )
    obstacles = {
        "cylinder_poses": np.concatenate([upright, positions], 1),
        "cylinder_radii": rng.uniform(0.03, 0.05, n),
        "cylinder_half_heights": rng.uniform(0.1, 0.2, n),
    }
    world = World.create(**obstacles)
    # 1 cm clear at both ends (the default 3 cm is more than some sphere sets' fingers
    # have from each other)
    cases = scenes.feasible_cases(robot, spheres, world, "panda_hand", 40, rng, clearance=0.01)
    blocked = [
        c
        for c in cases
        if check.path_clearance(model, np.stack([c.start, c.goal]), obstacles, samples=20)[0] < 0
    ]
    assert len(blocked) >= 2
    planner = TrajectoryOptimizer(robot, spheres)
    for case in blocked[:2]:
        plan = planner.plan(
            case.start, [O.pose("panda_hand", case.goal_pose)], world=world, num_steps=64
        )
        assert plan.success, plan.message
        assert check.within_limits(plan.path)
        world_min, self_min = check.path_clearance(model, plan.path, obstacles, samples=10)
        assert world_min > 0, f"penetrates a can by {-world_min:.4f} m between knots"
        assert self_min > 0, f"self collision by {-self_min:.4f} m"


# --- the ROS request: SolidPrimitive CYLINDER -> the cylinder kind --------------------------


def test_a_solid_primitive_cylinder_becomes_an_exact_cylinder():
    """PlanTrajectory's obstacles in the root frame (``requests._world``, the one translation):
    a CYLINDER (dimensions [height, radius], axis along its pose's z) is a cylinder, named in
    the World's order; a fingertip 1.5 cm over its top face is clear."""
    pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")
    from node_helpers import pose_stamped
    from pyroki_ros.srv import PlanTrajectory
    from reference_fk import make_transform, rot_x
    from shape_msgs.msg import Plane, SolidPrimitive

    from pyroki_ros.ros import requests
    from pyroki_ros.ros.model import LoadedModel

    model = LoadedModel(
        urdf_path("panda").read_text(), base_frame="panda_link0", tip_link="panda_hand"
    )
    ball = SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.05])
    can = SolidPrimitive(type=SolidPrimitive.CYLINDER)
    can.dimensions = [0.12, 0.03]  # height, radius
    can_pose = make_transform(rot_x(0.3), [0.5, 0.1, 0.2])
    request = PlanTrajectory.Request(
        obstacles=[can, ball],
        obstacle_poses=[pose_stamped(can_pose), pose_stamped(make_transform(np.eye(3), [0, 1, 1]))],
        half_spaces=[Plane(coef=[0.0, 0.0, 1.0, 0.0])],
        obstacle_names=["can", "ball", "floor"],
    )
    q = np.asarray(model.robot.limits.center())
    world = requests._world(model, request, model.fk(q))
    assert world.counts == (1, 0, 0, 1, 1)
    assert world.names == ("ball", "floor", "can")
    np.testing.assert_allclose(world.cylinder_radii, [0.03])
    np.testing.assert_allclose(world.cylinder_half_heights, [0.06])
    pose = np.asarray(world.cylinder_poses[0], np.float64)
    np.testing.assert_allclose(quat_wxyz_to_matrix(pose[:4]), can_pose[:3, :3], atol=1e-6)
    np.testing.assert_allclose(pose[4:], can_pose[:3, 3], atol=1e-6)
    # 1.5 cm over the top face along the can's axis, 2 cm off it: clear by 5 mm.
    tip = can_pose[:3, :3] @ [0.02, 0.0, 0.06 + 0.015] + can_pose[:3, 3]
    d = world_distances(jnp.asarray([tip], jnp.float32), jnp.array([0.01]), world)[0]
    assert np.isclose(float(d[world.names.index("can")]), 0.005, atol=1e-5)
