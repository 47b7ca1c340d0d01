"""display.py (what the markers and the viewer draw) and markers.py's Shape <-> Marker
translation, without DDS: geometry checked against plain rotation matrices
(reference_fk.quat_wxyz_to_matrix), every objective kind drawn as its Klampt-style picture."""

from __future__ import annotations

import numpy as np
import pytest
from reference_fk import quat_wxyz_to_matrix, reference_fk

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path
from pyroki_ros.viz import display

RNG = np.random.default_rng(7)


def random_pose() -> np.ndarray:
    q = RNG.normal(size=4)
    return np.concatenate([q / np.linalg.norm(q), RNG.uniform(-1, 1, 3)])


def matrix(pose: np.ndarray) -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = quat_wxyz_to_matrix(pose[:4])
    out[:3, 3] = pose[4:]
    return out


def test_pose_algebra_matches_matrices():
    # jaxlie does the algebra, in float32 (enough to draw): checked against 4x4 matrices
    a, b = random_pose(), random_pose()
    np.testing.assert_allclose(matrix(display.compose(a, b)), matrix(a) @ matrix(b), atol=1e-5)
    np.testing.assert_allclose(matrix(display.inverse(a)), np.linalg.inv(matrix(a)), atol=1e-5)
    p = RNG.normal(size=(5, 3))
    expected = (matrix(a) @ np.c_[p, np.ones(5)].T).T[:, :3]
    np.testing.assert_allclose(display.transform_points(a, p), expected, atol=1e-5)
    for d in (RNG.normal(size=3), [0, 0, 1.0], [0, 0, -2.0], [1e-3, 0, -1]):
        z = quat_wxyz_to_matrix(display.quat_z_to(np.asarray(d, float)))[:, 2]
        np.testing.assert_allclose(z, np.asarray(d) / np.linalg.norm(d), atol=1e-12)


def test_halfspace_plate_lies_on_the_solid_side_of_its_plane():
    normal, offset = np.array([0.0, 0.0, 2.0]), 0.2  # 2z + 0.2 < 0: below z = -0.1
    plate = display.halfspace(normal, offset, display.OBSTACLE_COLOR)
    assert plate.kind == "box" and plate.scale[0] >= 1.0
    z_axis = quat_wxyz_to_matrix(plate.pose[:4])[:, 2]
    np.testing.assert_allclose(z_axis, [0, 0, 1], atol=1e-12)
    top = plate.pose[4:] + z_axis * plate.scale[2] / 2
    np.testing.assert_allclose(top, [0, 0, -0.1], atol=1e-12)


def test_sphere_lists_cover_every_sphere():
    centers, radii = RNG.normal(size=(40, 3)), RNG.uniform(0.004, 0.09, 40)
    lists = display.sphere_lists(centers, radii, display.ROBOT_COLOR)
    assert sum(len(s.points) for s in lists) == 40
    diameters = [s.scale[0] for s in lists]
    assert diameters == sorted(diameters)
    for c, r in zip(centers, radii):
        (found,) = [s for s in lists if np.any(np.all(s.points == c, axis=1))]
        assert 2 * r <= found.scale[0] <= 2 * r + 2 * display.SPHERE_RADIUS_STEP + 1e-12


def test_robot_sphere_centres_follow_the_reference_fk():
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4, 0.02])
    from pyroki_ros import forward_kinematics

    poses = np.asarray(forward_kinematics(robot, q).wxyz_xyz, np.float64)
    centers = display.sphere_centers(spheres, poses)
    frames = reference_fk(urdf_path("panda").read_text(), q, robot.joint_names)
    local = np.asarray(spheres.centers, np.float64)
    for i, link in enumerate(spheres.link_names):
        expected = frames[link] @ np.r_[local[i], 1.0]
        np.testing.assert_allclose(centers[i], expected[:3], atol=2e-5)


def test_robot_boxes_follow_the_reference_fk():
    """The fine Panda set's boxes (the fingers', and the hand's hull's bounding box): drawn as
    boxes of their full size at their link's reference-FK pose composed with the box's pose
    in the link."""
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot, fine=True)
    q = np.array([0.3, -0.5, 0.2, -2.0, 0.1, 1.6, 0.4, 0.02])
    from pyroki_ros import forward_kinematics

    poses = np.asarray(forward_kinematics(robot, q).wxyz_xyz, np.float64)
    shapes = display.robot_boxes(spheres, poses, display.ROBOT_COLOR)
    assert len(shapes) == spheres.n_boxes == 9
    frames = reference_fk(urdf_path("panda").read_text(), q, robot.joint_names)
    local = np.asarray(spheres.box_poses, np.float64)
    halves = np.asarray(spheres.box_half_extents, np.float64)
    for shape, link, pose, half in zip(shapes, spheres.box_link_names, local, halves):
        assert shape.kind == "box"
        np.testing.assert_allclose(matrix(shape.pose), frames[link] @ matrix(pose), atol=2e-5)
        np.testing.assert_allclose(shape.scale, 2 * half)
    assert display.robot_boxes(RobotSpheres.embedded("panda", robot), poses, (1, 1, 1, 1)) == []


def test_every_objective_kind_gets_its_picture():
    names = ("base", "hand", "elbow")
    poses = np.stack([display.IDENTITY, random_pose(), random_pose()])
    target, point = random_pose(), np.array([0.3, 0.1, 0.4])
    axis = np.array([0.0, 0.6, 0.8])
    objectives = [
        O.pose("hand", target),
        O.point("hand", [0, 0, 0.1], point),
        O.orientation("hand", target[:4]),
        O.aim("hand", [0, 0, 0.1], [0, 0, 1], point),
        O.hinge("hand", [0, 0, 0], [0, 0, 1], point, axis),
        O.plane("elbow", [0, 0, 0], point, axis),
        O.line("elbow", [0, 0, 0], point, axis),
        O.pose("hand", target, reference="elbow"),
    ]
    if hasattr(O, "axis"):  # axis-only goals (issue 18, item 3)
        objectives.append(O.axis("hand", [0, 0, 1], axis))
    shapes = display.objective_shapes(objectives, names, poses, display.OBJECTIVE_COLOR)
    by_label: dict[int, list] = {}
    for s in shapes:
        by_label.setdefault(int(s.label.split("[")[1].split("]")[0]), []).append(s)
    kinds = {k: sorted(s.kind for s in v) for k, v in by_label.items()}
    assert kinds == {
        0: ["axes"],
        1: ["sphere"],
        2: ["axes"],
        3: ["line_strip", "sphere"],
        4: ["arrow", "sphere"],
        5: ["box", "sphere"],
        6: ["line_strip", "sphere"],
        7: ["axes"],
        **({8: ["arrow"]} if len(objectives) > 8 else {}),
    }
    np.testing.assert_allclose(by_label[0][0].pose, target)
    np.testing.assert_allclose(by_label[1][0].pose[4:], point)
    # orientation: the target rotation where the link is
    np.testing.assert_allclose(by_label[2][0].pose, np.r_[target[:4], poses[1][4:]])
    # aim: from the link's point to the target
    line = next(s for s in by_label[3] if s.kind == "line_strip")
    np.testing.assert_allclose(line.points[0], display.transform_points(poses[1], [0, 0, 0.1]))
    np.testing.assert_allclose(line.points[-1], point)
    arrow = next(s for s in by_label[4] if s.kind == "arrow")
    direction = arrow.points[1] - arrow.points[0]
    np.testing.assert_allclose(direction / np.linalg.norm(direction), axis, atol=1e-5)
    plate = next(s for s in by_label[5] if s.kind == "box")
    np.testing.assert_allclose(quat_wxyz_to_matrix(plate.pose[:4])[:, 2], axis, atol=1e-5)
    strip = next(s for s in by_label[6] if s.kind == "line_strip")
    np.testing.assert_allclose(np.cross(strip.points[1] - strip.points[0], axis), 0, atol=1e-6)
    if len(objectives) > 8:  # axis: from the link's origin along the target axis
        tail, tip = by_label[8][0].points
        np.testing.assert_allclose(tail, poses[1][4:])
        np.testing.assert_allclose((tip - tail) / np.linalg.norm(tip - tail), axis, atol=1e-5)
    # relative: placed with the reference link's pose
    np.testing.assert_allclose(
        matrix(by_label[7][0].pose), matrix(poses[2]) @ matrix(target), atol=1e-5
    )


def test_world_shapes():
    world = World.create(
        sphere_centers=[[0.5, 0, 0.2]],
        sphere_radii=[0.05],
        capsule_a=[[0, 0.5, 0]],
        capsule_b=[[0, 0.5, 0.4]],
        capsule_radii=[0.03],
        box_poses=[[1, 0, 0, 0, 0.3, -0.3, 0.1]],
        box_half_extents=[[0.1, 0.05, 0.02]],
        halfspace_normals=[[0, 0, 1]],
        halfspace_offsets=[0.0],
        names=["ball", "pole", "crate", "floor"],
    )
    shapes = display.world_shapes(world)
    assert [s.kind for s in shapes] == ["sphere", "cylinder", "sphere", "sphere", "box", "box"]
    assert [s.label for s in shapes] == ["ball", "pole", "pole", "pole", "crate", "floor"]
    np.testing.assert_allclose(shapes[0].scale, 0.1)
    np.testing.assert_allclose(shapes[1].scale, [0.06, 0.06, 0.4])
    np.testing.assert_allclose(shapes[4].scale, [0.2, 0.1, 0.04])


def test_shapes_round_trip_through_markers():
    markers = pytest.importorskip("pyroki_ros.ros.markers", reason="ROS 2 messages not installed")
    from std_msgs.msg import Header

    shapes = [
        display.axes(random_pose(), "goal"),
        display.sphere([0.1, 0.2, 0.3], 0.05, display.GOAL_COLOR, "point"),
        display.box(random_pose(), [0.1, 0.2, 0.3], display.OBSTACLE_COLOR, "crate"),
        display.cylinder(random_pose(), 0.05, 0.3, display.OBSTACLE_COLOR, "pole"),
        display.arrow(np.zeros(3), np.array([0, 0, 0.2]), display.GOAL_COLOR, "hinge"),
        display.line_strip(RNG.normal(size=(5, 3)), display.PATH_COLOR, "path"),
        *display.sphere_lists(
            RNG.normal(size=(6, 3)), [0.02] * 3 + [0.05] * 3, display.ROBOT_COLOR
        ),
    ]
    header = Header(frame_id="base")
    message = markers.markers_message({"objectives": shapes}, "base")
    deletes = [m for m in message.markers if m.action == m.DELETEALL]
    assert [m.ns for m in deletes] == list(markers.NAMESPACES)
    added = [m for m in message.markers if m.action == m.ADD]
    assert [m.id for m in added] == list(range(len(shapes)))
    assert all(m.header.frame_id == "base" for m in message.markers)
    for shape in shapes:
        back = markers.marker_shape(markers.shape_marker(shape, "ns", 0, header))
        np.testing.assert_allclose(back.pose, shape.pose, atol=1e-12)
        np.testing.assert_allclose(back.points, shape.points, atol=1e-12)
        assert back.label == shape.label
        if shape.kind == "axes":  # drawn as coloured lines
            assert back.kind == "line_list" and back.scale[0] == shape.scale[1]
            np.testing.assert_allclose(back.colors, shape.colors)
        else:
            assert back.kind == shape.kind
            np.testing.assert_allclose(back.scale, shape.scale, atol=1e-12)
