"""Boxes fixed to robot links (pyroki_ros.collision.boxes): the conservative box-obstacle
distance against an independent numpy reference (exact point-to-shape distances of densely
sampled box surfaces; analytic gaps for face contacts), the planner's rate of a box row
against finite differences, the contact rules on box rows, and the bundled fine Panda set's
finger boxes against the original URDF's collision boxes."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import jax.numpy as jnp
import numpy as np
import pytest
from reference_fk import rpy_to_matrix

from pyroki_ros import Robot
from pyroki_ros import collision as col
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path

# --- numpy reference ---------------------------------------------------------------------


def _rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _wxyz(m: np.ndarray) -> list[float]:
    """A unit quaternion (w, x, y, z) of a rotation matrix (Shepperd's method)."""
    t = np.trace(m)
    if t > 0:
        s = 2 * np.sqrt(1 + t)
        return [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    i = int(np.argmax(np.diag(m)))
    j, k = (i + 1) % 3, (i + 2) % 3
    s = 2 * np.sqrt(1 + m[i, i] - m[j, j] - m[k, k])
    q = np.zeros(4)
    q[0] = (m[k, j] - m[j, k]) / s
    q[1 + i] = 0.25 * s
    q[1 + j] = (m[j, i] + m[i, j]) / s
    q[1 + k] = (m[k, i] + m[i, k]) / s
    return q.tolist()


def _surface(center, rot, half, per_side: int = 31) -> np.ndarray:
    """Points on a box's surface, a grid of ``per_side`` x ``per_side`` on each face."""
    g = np.linspace(-1.0, 1.0, per_side)
    a, b = (x.ravel() for x in np.meshgrid(g, g))
    faces = []
    for axis in range(3):
        others = [i for i in range(3) if i != axis]
        for sign in (-1.0, 1.0):
            local = np.zeros((a.size, 3))
            local[:, axis], local[:, others[0]], local[:, others[1]] = sign, a, b
            faces.append(local * half)
    return center + np.concatenate(faces) @ rot.T


def _sdf_box(p, center, rot, half):
    local = (p - center) @ rot
    excess = np.abs(local) - half
    outside = np.linalg.norm(np.maximum(excess, 0.0), axis=-1)
    return outside + np.minimum(excess.max(-1), 0.0)


def _sdf_cylinder(p, center, rot, radius, half_height):
    local = (p - center) @ rot
    radial = np.linalg.norm(local[:, :2], axis=-1) - radius
    axial = np.abs(local[:, 2]) - half_height
    outside = np.hypot(np.maximum(radial, 0), np.maximum(axial, 0))
    return outside + np.minimum(np.maximum(radial, axial), 0.0)


def _sdf_capsule(p, a, b, radius):
    ab = b - a
    t = np.clip((p - a) @ ab / (ab @ ab), 0, 1)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=-1) - radius


def _terms(center, rot, half, world: World):
    d, normal, witness = col.box_obstacle_terms(
        jnp.asarray(center[None], jnp.float32),
        jnp.asarray(rot[None], jnp.float32),
        jnp.asarray(half[None], jnp.float32),
        world,
    )
    return float(d[0, 0]), np.asarray(normal[0, 0]), np.asarray(witness[0, 0])


def random_obstacle(rng, kind: str, at: np.ndarray, rot: np.ndarray):
    """One obstacle of ``kind`` (box, cylinder, capsule or sphere) centred at ``at``, turned
    by ``rot``, its sizes drawn from ``rng``, and its numpy signed distance function."""
    if kind == "box":
        half = rng.uniform(0.01, 0.15, 3)
        world = World.create(box_poses=[_wxyz(rot) + list(at)], box_half_extents=[half])
        return world, lambda p: _sdf_box(p, at, rot, half)
    if kind == "cylinder":
        radius, height = rng.uniform(0.01, 0.1), rng.uniform(0.01, 0.15)
        world = World.create(
            cylinder_poses=[_wxyz(rot) + list(at)],
            cylinder_radii=[radius],
            cylinder_half_heights=[height],
        )
        return world, lambda p: _sdf_cylinder(p, at, rot, radius, height)
    if kind == "capsule":
        a, b = at - rot[:, 2] * 0.08, at + rot[:, 2] * 0.08
        radius = rng.uniform(0.005, 0.05)
        world = World.create(capsule_a=[a], capsule_b=[b], capsule_radii=[radius])
        return world, lambda p: _sdf_capsule(p, a, b, radius)
    radius = rng.uniform(0.005, 0.1)
    world = World.create(sphere_centers=[at], sphere_radii=[radius])
    return world, lambda p: np.linalg.norm(p - at, axis=-1) - radius


def _random_case(rng, kind: str):
    """A robot box at the origin and one obstacle of ``kind`` around it, with the reference
    signed distance of the box's surface samples (exact per sample) and whether the
    obstacle's centre is inside the robot box (then the samples say nothing)."""
    rot, half = _rotation(rng), rng.uniform(0.01, 0.05, 3)
    direction = rng.normal(size=3)
    at = direction / np.linalg.norm(direction) * rng.uniform(0.03, 0.3)
    o_rot = _rotation(rng)
    if kind == "half-space":  # through ``at``
        n = direction / np.linalg.norm(direction)
        world = World.create(halfspace_normals=[-n], halfspace_offsets=[float(n @ at)])
        sdf = lambda p: -(p @ n) + n @ at
    else:
        world, sdf = random_obstacle(rng, kind, at, o_rot)
    surface = _surface(np.zeros(3), rot, half)
    covered = _sdf_box(at[None], np.zeros(3), rot, half)[0] < 0
    return rot, half, world, float(sdf(surface).min()), covered


@pytest.mark.parametrize("kind", ["box", "cylinder", "capsule", "sphere", "half-space"])
def test_box_distance_is_a_lower_bound_tight_within_millimetres(kind):
    """Over 300 random poses: never more than the reference (samples of the box's surface
    can only overestimate a positive distance), never positive when they overlap, and
    within a few millimetres of the reference when apart (corner-to-corner gaps are where
    separating axes fall short)."""
    rng = np.random.default_rng(["box", "cylinder", "capsule", "sphere", "half-space"].index(kind))
    slack = []
    for _ in range(300):
        rot, half, world, reference, covered = _random_case(rng, kind)
        if covered:
            continue
        d = _terms(np.zeros(3), rot, half, world)[0]
        if reference > 0:
            assert d <= reference + 1e-5, (d, reference)
            slack.append(reference - d)
        else:
            assert d <= 1e-5, (d, reference)  # overlapping: never called clear
    assert len(slack) > 100
    assert np.median(slack) < 2e-3 and np.max(slack) < 0.03, (np.median(slack), np.max(slack))


def test_face_contacts_are_exact():
    """A box 1 cm above a table top, beside a can's side, against a wall: the analytic gaps,
    and minus the depth when pushed in."""
    half = np.array([0.011, 0.0075, 0.01])
    eye = np.eye(3)
    table = World.create(
        box_poses=[[1, 0, 0, 0, 0.0, 0.0, -0.1]], box_half_extents=[[0.5, 0.5, 0.1]]
    )
    for gap in (0.01, 0.001, -0.002):
        center = np.array([0.05, -0.02, half[2] + gap])
        d, normal, witness = _terms(center, eye, half, table)
        assert d == pytest.approx(gap, abs=1e-6)
        np.testing.assert_allclose(normal, [0, 0, 1], atol=1e-6)
        assert witness[2] == pytest.approx(gap, abs=1e-6)  # a bottom corner
    can = World.create(
        cylinder_poses=[[1, 0, 0, 0, 0.0, 0.0, 0.0]],
        cylinder_radii=[0.04],
        cylinder_half_heights=[0.06],
    )
    for gap in (0.005, 0.0005):
        center = np.array([0.04 + gap + half[0], 0.0, 0.0])
        assert _terms(center, eye, half, can)[0] == pytest.approx(gap, abs=1e-6)
    wall = World.create(halfspace_normals=[[-1, 0, 0]], halfspace_offsets=[0.3])
    tilted = rpy_to_matrix([0.3, -0.2, 0.5])
    corner = (np.abs(tilted) @ half)[0]  # reach of the tilted box along x: sum h_i |u_i,x|
    center = np.array([0.2, 0.0, 0.0])
    assert _terms(center, tilted, half, wall)[0] == pytest.approx(0.1 - corner, abs=1e-6)


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    return robot, RobotSpheres.embedded("panda", robot, fine=True)


def _collision_boxes(link: str) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(rotation, centre, half size) of the <box> collision elements of ``link`` in the
    original example-robot-data URDF (test/data/mbm/panda_collision)."""
    import mbm_mesh

    root = ET.parse(mbm_mesh.URDF_PATH).getroot()
    out = []
    for element in root.find(f"link[@name='{link}']").findall("collision"):
        shape = element.find("geometry")[0]
        if shape.tag != "box":
            continue
        origin = element.find("origin")
        rpy = [float(v) for v in origin.get("rpy", "0 0 0").split()]
        xyz = [float(v) for v in origin.get("xyz", "0 0 0").split()]
        size = [float(v) for v in shape.get("size").split()]
        out.append((rpy_to_matrix(rpy), np.array(xyz), 0.5 * np.array(size)))
    return out


def test_fine_panda_fingers_are_their_urdf_boxes(panda):
    """The fine set checks the fingers against obstacles as the original URDF's boxes, and
    keeps no obstacle sphere on them (self-collision keeps the default set's spheres)."""
    _, spheres = panda
    for link in ("panda_leftfinger", "panda_rightfinger"):
        expected = _collision_boxes(link)
        mine = [i for i, name in enumerate(spheres.box_link_names) if name == link]
        assert len(mine) == len(expected) == 4
        poses = np.asarray(spheres.box_poses)[mine]
        halves = np.asarray(spheres.box_half_extents)[mine]
        for (rot, xyz, half), pose, h in zip(expected, poses, halves):
            w, x, y, z = pose[:4]
            got = np.array(
                [
                    [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                    [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                    [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
                ]
            )
            np.testing.assert_allclose(got, rot, atol=1e-5)
            np.testing.assert_allclose(pose[4:], xyz, atol=1e-6)
            np.testing.assert_allclose(h, half, atol=1e-6)
        on_link = np.array([n == link for n in spheres.link_names])
        assert not (on_link & spheres.world_mask).any()
        assert (on_link & ~spheres.world_mask).any()


def _hand_over_table(robot, spheres, lift: float):
    """A configuration and a table top ``lift`` m below the fingers' lowest box corner
    (reference: the boxes at the forward kinematics of that configuration)."""
    q = np.array([0.0, 0.2, 0.0, -2.2, 0.3, 2.6, 0.6, 0.04])  # no face parallel to the top
    centers, axes = col.box_frames_at(robot, spheres, jnp.asarray(q, jnp.float32))
    corners = np.abs(np.asarray(axes)[:, 2, :]) @ np.asarray(spheres.box_half_extents).T
    lowest = np.min(np.asarray(centers)[:, 2] - np.diag(corners))
    top = lowest - lift
    table = World.create(
        box_poses=[[1, 0, 0, 0, 0.5, 0.0, top - 0.05]], box_half_extents=[[0.3, 0.4, 0.05]],
        names=["table"],
    )  # fmt: skip
    return q, table


def test_box_rows_rate_matches_finite_differences(panda):
    """The planner's box rows (CollisionTerms.rows_t): a row per box with its nearest
    obstacle, residual max(0, margin - d), and a Jacobian whose product with a joint step
    matches the residual's change (the table's face normal is the axis: exact)."""
    robot, spheres = panda
    q, table = _hand_over_table(robot, spheres, 0.005)
    terms = col.CollisionTerms(robot, spheres)
    world = table.padded()
    checked = col.checked_pairs(robot, spheres, table)
    pad = np.ones((checked[0].shape[0], world.n_obstacles - table.n_obstacles), bool)
    checked = (jnp.asarray(np.concatenate([checked[0], pad], 1)), jnp.asarray(checked[1]))
    margin = jnp.asarray([0.02], jnp.float32)

    def rows(x):
        r, j, clearance = terms.rows_t(
            jnp.asarray(x, jnp.float32)[:, None], world, checked, margin, 1.0, 1.0
        )
        return (
            np.asarray(r[:, 0], np.float64),
            np.asarray(j[:, :, 0], np.float64),
            float(clearance[0]),
        )

    r, jac, clearance = rows(q)
    world_rows = int(spheres.world_mask.sum())
    box = slice(world_rows, world_rows + spheres.n_boxes)
    assert clearance == pytest.approx(0.005, abs=2e-4)
    assert np.max(r[box]) == pytest.approx(0.02 - 0.005, abs=2e-4)  # the lowest finger box
    for joint in (1, 3, 5):
        step = np.zeros_like(q)
        step[joint] = 2e-3
        change = (rows(q + step)[0][box] - rows(q - step)[0][box]) / 2
        predicted = jac[box] @ step
        active = r[box] > 1e-4
        np.testing.assert_allclose(predicted[active], change[active], atol=1e-4, rtol=0.05)


def test_contact_rules_and_names_cover_boxes(panda):
    """A finger box on the table: the deepest contact names the finger and the table; an
    allowed (finger, table) pair leaves the box rows of that finger unchecked, the hand's
    boxes still checked."""
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    robot, spheres = panda
    q, table = _hand_over_table(robot, spheres, -0.002)  # 2 mm into the table
    planner = TrajectoryOptimizer(robot, spheres)
    d, link, other = planner.deepest_contact(q, table)
    assert d == pytest.approx(-0.002, abs=3e-4)
    assert link in ("panda_leftfinger", "panda_rightfinger") and other == "table"
    world_ok, _ = col.checked_pairs(robot, spheres, table)
    assert world_ok.shape == (spheres.n_spheres + spheres.n_boxes, 1)
    rules = col.ContactRules(
        allowed=(("panda_leftfinger", "table"), ("panda_rightfinger", "table"))
    )
    world_ok, _ = col.checked_pairs(robot, spheres, table, rules)
    fingers = np.isin(spheres.box_link_names, ("panda_leftfinger", "panda_rightfinger"))
    np.testing.assert_array_equal(world_ok[spheres.n_spheres :, 0], ~fingers)
    d_allowed = planner.deepest_contact(q, table, rules)[0]
    assert d_allowed > 0  # the hand's own spheres clear the table by the fingers' length
    # The public distance vector: spheres x obstacles, then boxes x obstacles, then pairs.
    vector = col.collision_distances(robot, spheres, jnp.asarray(q, jnp.float32), table)
    assert vector.shape == (spheres.n_spheres + spheres.n_boxes + spheres.n_pairs,)
    assert float(jnp.min(vector)) == pytest.approx(-0.002, abs=3e-4)


def test_bad_boxes_are_refused_by_name(panda):
    """with_boxes: an unknown link, a row that is not 10 numbers, a non-finite value, a zero
    quaternion or a half size <= 0 is a ValueError naming the link; a good row is kept with
    its quaternion normalised, and survives boxes_config()."""
    robot, _ = panda
    base = RobotSpheres.embedded("panda", robot)
    good = [2.0, 0, 0, 0, 0.0, 0.01, 0.02, 0.01, 0.01, 0.02]
    bad = {
        "no_such_link": {"no_such_link": [good]},
        "list of": {"panda_hand": [[1, 0, 0, 0, 0, 0, 0, 0.01, 0.01]]},
        "finite": {"panda_hand": [[1, 0, 0, 0, float("nan"), 0, 0, 0.01, 0.01, 0.01]]},
        "quaternion": {"panda_hand": [[0, 0, 0, 0, 0, 0, 0, 0.01, 0.01, 0.01]]},
        "half sizes": {"panda_hand": [[1, 0, 0, 0, 0, 0, 0, 0.01, 0.0, 0.01]]},
    }
    for match, mapping in bad.items():
        with pytest.raises(ValueError, match=match):
            base.with_boxes(robot, mapping)
    kept = base.with_boxes(robot, {"panda_hand": [good]})
    assert kept.n_boxes == 1 and kept.box_link_names == ("panda_hand",)
    np.testing.assert_allclose(kept.boxes_config()["panda_hand"][0][:4], [1, 0, 0, 0])
    np.testing.assert_allclose(kept.boxes_config()["panda_hand"][0][4:], good[4:], rtol=1e-6)
    assert base.with_boxes(robot, None).n_boxes == 0


def test_a_set_with_boxes_plans_without_obstacles(panda):
    """No obstacles (no world, or an empty one): the boxes have nothing to be near, so the
    clearance is the self-collision one, and a plan and the named contact work (the node's
    warm-up plans among no obstacles first)."""
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    robot, spheres = panda
    planner = TrajectoryOptimizer(robot, spheres)
    start = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])
    goal = start + np.array([0.6, 0.2, -0.3, 0.3, 0.2, -0.2, 0.3, 0.0])
    moving = np.ones(robot.n_joints, bool)
    for world in (None, World.empty()):
        clearance = planner.clearances(start[None], world, col.DEFAULT_CONTACTS, moving)
        assert np.isfinite(clearance).all() and clearance[0] > 0
        assert planner.deepest_contact(start, world)[1] != ""  # a self pair, named
    plan = planner.plan(start, goal, num_steps=16)
    assert plan.success, plan.message


def near_the_hand(robot, rng, count: int, spread: float, reach: float):
    """``count`` configurations (float32) within ``spread`` rad of the joints' centres, and
    a function giving n random points within ``reach`` m of their hands' positions."""
    from pyroki_ros.model import kinematics as k

    q = np.asarray(robot.center(), np.float32) + rng.uniform(
        -spread, spread, (count, robot.n_joints)
    )
    q = np.asarray(robot.limits.clip(q), np.float32)
    tips = np.asarray(
        k.forward_kinematics(robot, q).wxyz_xyz[:, robot.link_index("panda_hand"), 4:]
    )
    return q, lambda n: tips[rng.integers(0, len(tips), n)] + rng.uniform(-reach, reach, (n, 3))


def test_planner_search_finds_the_dense_nearest_among_padding(panda):
    """The planner's per-box search (CollisionTerms.nearest_box_t: one obstacle after the
    other, stopping where the padding starts) answers what the dense all-pairs terms
    (box_obstacle_terms) say of the nearest checked obstacle: its distance, and where it is
    the only nearest one its normal and witness; among every kind, in a padded world, with
    some pairs unchecked."""
    from pyroki_ros.model import kinematics as k

    robot, spheres = panda
    rng = np.random.default_rng(7)
    q, near = near_the_hand(robot, rng, 24, 0.6, 0.12)
    given = World.create(
        sphere_centers=near(2),
        sphere_radii=rng.uniform(0.02, 0.06, 2),
        capsule_a=near(2),
        capsule_b=near(2),
        capsule_radii=rng.uniform(0.01, 0.04, 2),
        box_poses=[_wxyz(_rotation(rng)) + list(p) for p in near(5)],
        box_half_extents=rng.uniform(0.01, 0.08, (5, 3)),
        halfspace_normals=[[0.0, 0.0, 1.0]],
        halfspace_offsets=[0.05],
        cylinder_poses=[_wxyz(_rotation(rng)) + list(p) for p in near(3)],
        cylinder_radii=rng.uniform(0.01, 0.05, 3),
        cylinder_half_heights=rng.uniform(0.02, 0.1, 3),
    )
    world = given.padded((0, 8))
    assert [int(n) for n in world.live_counts()] == list(given.counts)
    rows = spheres.n_spheres + spheres.n_boxes
    checked = rng.uniform(size=(rows, world.n_obstacles)) > 0.2

    terms = col.CollisionTerms(robot, spheres)
    d, normal, witness = terms.nearest_box_t(
        k.frames_t(robot, jnp.asarray(q.T)), world, jnp.asarray(checked)
    )
    d, normal, witness = np.asarray(d).T, np.stack(normal, -1), np.stack(witness, -1)
    normal, witness = normal.transpose(1, 0, 2), witness.transpose(1, 0, 2)  # (B, X, 3)

    centers, axes = col.box_frames_at(robot, spheres, q)
    dense, normals, witnesses = (
        np.asarray(a)
        for a in col.box_obstacle_terms(centers, axes, spheres.box_half_extents, world)
    )
    dense = np.where(checked[spheres.n_spheres :], dense, np.inf)  # (B, X, O)
    # The boxes (the hand's hull row has its own test: test_robot_hulls.py).
    plain = spheres.n_boxes - spheres.n_hulls
    d, normal, witness = d[:, :plain], normal[:, :plain], witness[:, :plain]
    dense, normals, witnesses = dense[:, :plain], normals[:, :plain], witnesses[:, :plain]
    np.testing.assert_allclose(d, dense.min(-1), atol=1e-6)
    assert (d < 0.1).mean() > 0.2  # obstacles near the hand: the comparison means something
    order = np.sort(dense, -1)
    alone = order[..., 1] - order[..., 0] > 1e-4
    best = dense.argmin(-1)[..., None, None]
    for got, every in ((normal, normals), (witness, witnesses)):
        expected = np.take_along_axis(every, best, -2)[..., 0, :]
        np.testing.assert_allclose(got[alone], expected[alone], atol=1e-5)
