"""The independent MotionBenchMaker checker (test/mbm_check.py): exact sphere-box and
sphere-cylinder distances against brute-force sampling of the shapes' surfaces, its batched FK
against reference_fk, the Franka sphere file against the URDF, known collisions flagged (also
between knots), and robometrics' demo problems as the checker sees them."""

from __future__ import annotations

import math

import mbm_check as mc
import numpy as np
import pytest
import yaml
from reference_fk import quat_wxyz_to_matrix, reference_fk, reference_jacobian_fd

READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])


def _random_pose(rng: np.random.Generator) -> tuple[float, ...]:
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    return (*q, *rng.uniform(-0.5, 0.5, 3))


def _demo() -> list[dict]:
    return yaml.safe_load((mc.DATA / "demo_set.yaml").read_text())["bookshelf_small_panda"]


def _goal(entry: dict) -> np.ndarray:
    g = entry["goal_pose"]
    return np.array([*g["quaternion_wxyz"], *g["position_xyz"]])


# -- exact distances against brute force -----------------------------------------------------


def _box_surface(half: np.ndarray, n: int) -> np.ndarray:
    """(6 n^2, 3) grid points on the six faces of a box (local frame)."""
    u = np.linspace(-1.0, 1.0, n)
    a, b = (g.ravel() for g in np.meshgrid(u, u))
    faces = []
    for axis in range(3):
        i, j = [k for k in range(3) if k != axis]
        for sign in (-1.0, 1.0):
            p = np.zeros((a.size, 3))
            p[:, axis] = sign * half[axis]
            p[:, i], p[:, j] = a * half[i], b * half[j]
            faces.append(p)
    return np.concatenate(faces)


def _cylinder_surface(radius: float, half_height: float, n: int) -> np.ndarray:
    """Points on the side and both caps of a cylinder along z (local frame)."""
    angle = np.linspace(0.0, 2.0 * np.pi, 4 * n, endpoint=False)
    z = np.linspace(-half_height, half_height, n)
    aa, zz = np.meshgrid(angle, z)
    side = np.stack([radius * np.cos(aa), radius * np.sin(aa), zz], -1).reshape(-1, 3)
    rr, aa = np.meshgrid(np.linspace(0.0, radius, n), angle)
    disc = np.stack([rr * np.cos(aa), rr * np.sin(aa)], -1).reshape(-1, 2)
    caps = [np.column_stack([disc, np.full(len(disc), s * half_height)]) for s in (-1, 1)]
    return np.concatenate([side, *caps])


def _brute(points: np.ndarray, surface: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Signed distance from sampled surface points: an upper bound of the true unsigned one."""
    # |p - s|^2 = |p|^2 - 2 p.s + |s|^2 as one matrix product (fast; rounding ~1e-8 m).
    sq = (points**2).sum(1)[:, None] - 2.0 * points @ surface.T + (surface**2).sum(1)[None]
    d = np.sqrt(np.maximum(sq.min(axis=1), 0.0))
    return np.where(inside, -d, d)


@pytest.mark.parametrize("seed", range(4))
def test_sphere_box_distance_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    pose = _random_pose(rng)
    dims = rng.uniform(0.04, 0.6, 3)
    rot, pos = mc.pose_frame(pose)
    half = dims / 2
    n = 61
    spacing = float(np.max(dims)) / (n - 1)
    # Points inside, near the surface and farther away (local frame, then the root frame).
    local = rng.uniform(-1.6, 1.6, (300, 3)) * half + rng.normal(0, 0.02, (300, 3))
    points = local @ rot.T + pos
    inside = np.all(np.abs(local) <= half, axis=1)
    brute = _brute(local, _box_surface(half, n), inside)
    exact = mc.box_signed_distance(points, rot[None], pos[None], half[None])[:, 0]
    assert np.all(
        np.sign(exact[np.abs(brute) > spacing]) == np.sign(brute[np.abs(brute) > spacing])
    )
    # Sampling only overestimates |distance|, by at most half a grid diagonal.
    assert np.all(np.abs(exact) <= np.abs(brute) + 1e-7)
    assert np.max(np.abs(exact - brute)) <= spacing * math.sqrt(2) / 2 + 1e-7
    # Through a Scene: the sphere's radius comes off.
    radii = rng.uniform(0.01, 0.05, len(points))
    scene = mc.Scene([mc.Cuboid("b", tuple(dims), pose)])
    np.testing.assert_allclose(scene.distances(points, radii)[:, 0], exact - radii, atol=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_sphere_cylinder_distance_matches_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    pose = _random_pose(rng)
    radius, height = rng.uniform(0.01, 0.2), rng.uniform(0.05, 0.5)
    rot, pos = mc.pose_frame(pose)
    n = 61
    spacing = max(2 * np.pi * radius / (4 * n), height / (n - 1), radius / (n - 1))
    box = np.array([radius, radius, height / 2])
    local = rng.uniform(-1.8, 1.8, (300, 3)) * box + rng.normal(0, 0.02, (300, 3))
    points = local @ rot.T + pos
    inside = (np.hypot(local[:, 0], local[:, 1]) <= radius) & (np.abs(local[:, 2]) <= height / 2)
    brute = _brute(local, _cylinder_surface(radius, height / 2, n), inside)
    exact = mc.cylinder_signed_distance(
        points, rot[None], pos[None], np.array([radius]), np.array([height / 2])
    )[:, 0]
    far = np.abs(brute) > spacing
    assert np.all(np.sign(exact[far]) == np.sign(brute[far]))
    assert np.all(np.abs(exact) <= np.abs(brute) + 1e-7)
    assert np.max(np.abs(exact - brute)) <= spacing * math.sqrt(2) + 1e-7
    scene = mc.Scene(cylinders=[mc.Cylinder("c", radius, height, pose)])
    np.testing.assert_allclose(scene.distances(points, np.zeros(len(points)))[:, 0], exact)


def test_cylinder_is_not_a_capsule():
    """Above the flat cap the distance is the height excess, not minus the radius (as a
    capsule over the axis would have it); past the rim it is the distance to the rim."""
    identity = (1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    scene = mc.Scene(cylinders=[mc.Cylinder("c", 0.05, 0.2, identity)])
    points = np.array([[0.0, 0.0, 0.12], [0.06, 0.0, 0.11], [0.0, 0.0, 0.05], [0.0, 0.03, 0.0]])
    d = scene.distances(points, np.zeros(4))[:, 0]
    np.testing.assert_allclose(d, [0.02, math.hypot(0.01, 0.01), -0.05, -0.02], atol=1e-15)


# -- kinematics and the sphere file ----------------------------------------------------------


def test_batched_fk_and_jacobian_match_reference():
    rng = np.random.default_rng(0)
    q = rng.uniform(mc.PANDA.lower, mc.PANDA.upper, (8, len(mc.PANDA.joint_names)))
    poses = mc.PANDA.poses(q)
    for b in range(len(q)):
        ref = reference_fk(mc.PANDA.model, q[b], mc.PANDA.joint_names)
        for link, pose in ref.items():
            np.testing.assert_allclose(poses[link][b], pose, atol=1e-12)
    for link in ("panda_hand", "panda_rightfinger"):
        _, jac = mc.PANDA.jacobian(q[:3], link)
        for b in range(3):
            fd = reference_jacobian_fd(mc.PANDA.model, q[b], link, mc.PANDA.joint_names)
            np.testing.assert_allclose(jac[b], fd, atol=1e-7)
    # 7 arm values: fingers open.
    np.testing.assert_array_equal(mc.PANDA.full(READY)[7:], [mc.FINGER_OPEN])


def test_sphere_file_links_are_urdf_links(tmp_path):
    assert set(mc.FRANKA.links) <= set(mc.PANDA.links)
    assert "panda_link8" not in mc.FRANKA.links  # robometrics puts the hand's on panda_hand
    assert len(mc.FRANKA.links) == 61 and np.all(mc.FRANKA.radii > 0)
    data = yaml.safe_load(mc.SPHERES_PATH.read_text())
    data["collision_spheres"]["panda_gripper"] = [{"center": [0, 0, 0], "radius": 0.01}]
    bad = tmp_path / "spheres.yml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ValueError, match="panda_gripper"):
        mc.SphereModel.from_yaml(bad)


def test_hand_spheres_are_in_the_panda_hand_frame():
    """The hand's spheres lie along panda_hand's y axis, the axis the fingers slide along
    (panda_hand is panda_link8 turned by -45 degrees: in panda_link8's frame they would cross
    the fingers), and the open fingers' spheres sit at the row's ends."""
    hand = np.array([link == "panda_hand" for link in mc.FRANKA.links])
    centers = mc.FRANKA.centers[hand]
    np.testing.assert_allclose(centers[:, 0], 0.0)
    assert np.ptp(centers[:, 1]) >= 0.15
    poses = mc.PANDA.poses(READY)
    world = mc.FRANKA.world_centers(poses)[0]
    to_hand = np.linalg.inv(poses["panda_hand"][0])
    fingers = np.array([link.endswith("finger") for link in mc.FRANKA.links])
    local = world[fingers] @ to_hand[:3, :3].T + to_hand[:3, 3]
    np.testing.assert_allclose(local[:, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.abs(local[:, 1]), mc.FINGER_OPEN + 0.01, atol=1e-12)
    assert np.all(np.abs(local[:, 1]) <= np.max(np.abs(centers[:, 1])))
    link8 = poses["panda_link8"][0][:3, :3].T @ poses["panda_hand"][0][:3, :3]
    np.testing.assert_allclose(
        link8,
        quat_wxyz_to_matrix([math.cos(-math.pi / 8), 0, 0, math.sin(-math.pi / 8)]),
        atol=1e-12,
    )


# -- verdicts ----------------------------------------------------------------------------------


def _hand_box_scene(q: np.ndarray, size: float = 0.04) -> mc.Scene:
    """A small cube around the hand's origin at ``q``."""
    hand = mc.PANDA.poses(q)["panda_hand"][0]
    return mc.Scene([mc.Cuboid("cube", (size,) * 3, (1.0, 0.0, 0.0, 0.0, *hand[:3, 3]))])


def test_colliding_configuration_flagged():
    scene = _hand_box_scene(READY)
    goal = mc.PANDA.poses(READY)["panda_hand"][0]
    goal_pose = (*_quat(goal[:3, :3]), *goal[:3, 3])
    verdict = mc.check_path(np.array([READY, READY]), goal_pose, scene)
    assert not verdict.ok and verdict.world_clearance < 0
    assert "collision panda_hand-cube" in verdict.reason
    assert verdict.position_error < 1e-12  # only the collision is wrong
    assert not mc.configuration_valid(READY, scene)[0]
    assert mc.configuration_valid(READY, mc.Scene())[0]


def test_collision_between_knots_flagged():
    """Both knots are clear; the straight segment between them sweeps the hand through a cube
    placed where it passes halfway."""
    a, b = READY.copy(), READY.copy()
    a[0], b[0] = -0.8, 0.8
    scene = _hand_box_scene(READY, 0.02)
    assert mc.configuration_valid(np.array([a, b]), scene).all()
    goal = mc.PANDA.poses(b)["panda_hand"][0]
    verdict = mc.check_path(np.array([a, b]), (*_quat(goal[:3, :3]), *goal[:3, 3]), scene)
    assert not verdict.ok and "collision" in verdict.reason
    dense = mc.densify(np.array([a, b]), samples=20, max_step=0.005)
    assert len(dense) == 1 + math.ceil(1.6 / 0.005)
    np.testing.assert_allclose(dense[[0, -1]], [a, b])


def test_goal_limits_and_link0_rules():
    demo = _demo()[0]
    scene = mc.Scene.from_yaml(demo["obstacles"])
    goal_q = np.array(demo["goal_ik"][0])
    ok = mc.check_path(np.array([goal_q, goal_q]), _goal(demo), scene)
    assert ok.ok, ok.reason
    # panda_link0 touches the stand: not a collision unless asked.
    strict = mc.check_path(np.array([goal_q]), _goal(demo), scene, skip_links=())
    assert not strict.ok and "panda_link0-cube_robot_stand" in strict.reason
    off = goal_q.copy()
    off[6] += 0.05
    missed = mc.check_path(np.array([goal_q, off]), _goal(demo), scene)
    assert not missed.ok and missed.reason.startswith("goal")
    outside = goal_q.copy()
    outside[3] = mc.PANDA.upper[3] + 0.01
    assert not mc.check_path(np.array([outside, goal_q]), _goal(demo), scene).within_limits


def _quat(rot: np.ndarray) -> np.ndarray:
    """wxyz of a rotation matrix (for building goals in these tests)."""
    w = math.sqrt(max(0.0, 1.0 + np.trace(rot))) / 2
    x = math.copysign(
        math.sqrt(max(0.0, 1 + rot[0, 0] - rot[1, 1] - rot[2, 2])) / 2, rot[2, 1] - rot[1, 2]
    )
    y = math.copysign(
        math.sqrt(max(0.0, 1 - rot[0, 0] + rot[1, 1] - rot[2, 2])) / 2, rot[0, 2] - rot[2, 0]
    )
    z = math.copysign(
        math.sqrt(max(0.0, 1 - rot[0, 0] - rot[1, 1] + rot[2, 2])) / 2, rot[1, 0] - rot[0, 1]
    )
    q = np.array([w, x, y, z])
    np.testing.assert_allclose(quat_wxyz_to_matrix(q), rot, atol=1e-9)
    return q


# -- robometrics' demo problems ------------------------------------------------------------------


@pytest.mark.parametrize("index", range(5))
def test_demo_goal_ik_reaches_goal(index):
    """The first goal configuration of every demo problem reaches its goal pose (it is the
    pose's source: 0.000 mm here, so our URDF's FK agrees with the Franka model robometrics
    used) and is valid; the others are only near it (up to ~12 mm / 5.3 deg, a few slightly
    in collision), examples from a tolerance region, not answers."""
    entry = _demo()[index]
    scene = mc.Scene.from_yaml(entry["obstacles"])
    goal_ik = np.array(entry["goal_ik"])
    p_err, r_err = mc.goal_errors(goal_ik[0], _goal(entry))
    assert p_err < 1e-5 and r_err < 1e-5
    assert mc.configuration_valid(goal_ik[0], scene)[0]
    assert mc.configuration_valid(entry["start"], scene)[0]
    errors = np.array([mc.goal_errors(q, _goal(entry)) for q in goal_ik])
    assert np.all(errors[:, 0] < 0.015) and np.all(errors[:, 1] < math.radians(6))
