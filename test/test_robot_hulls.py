"""Convex hulls fixed to robot links (RobotSpheres.with_boxes' hulls; pyroki_ros.collision.boxes):
the distance of the Panda hand's real collision hull (example-robot-data's hand.stl, read with
numpy) against an independent numpy reference (exact signed distances of its densely sampled
surface; analytic gaps for walls and half spaces), never more than the truth and never less
than its bounding box's; the bundled fine set's hand against its mesh; the planner's search
and rate; and the MotionBenchMaker grasps that the hand's former boxes ruled out."""

from __future__ import annotations

from pathlib import Path

import jax.numpy as jnp
import mbm_mesh
import numpy as np
import pytest
from reference_fk import quat_wxyz_to_matrix
from test_robot_boxes import (
    _rotation,
    _wxyz,
    near_the_hand,
    random_obstacle,
)

from pyroki_ros import Robot
from pyroki_ros import collision as col
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path

HAND = mbm_mesh.read_stl(mbm_mesh.GEOMETRY / "hand.stl")  # (F, 3, 3), the hand frame
VERTICES = np.unique(HAND.reshape(-1, 3), axis=0)
SURFACE = mbm_mesh.surface_points(HAND, 0.002)


def _hull_terms(rotation, at, world: World, hull: bool = True):
    """Distance, normal and witness of the hand's hull at ``at`` turned by ``rotation`` (the
    bounding box alone with ``hull`` False)."""
    low, high = VERTICES.min(0), VERTICES.max(0)
    middle, half = (low + high) / 2, (high - low) / 2
    d, normal, witness = col.box_obstacle_terms(
        jnp.asarray((at + rotation @ middle)[None], jnp.float32),
        jnp.asarray(rotation[None], jnp.float32),
        jnp.asarray(half[None], jnp.float32),
        world,
        jnp.asarray((VERTICES - middle)[None], jnp.float32) if hull else None,
    )
    return float(d[0, 0]), np.asarray(normal[0, 0]), np.asarray(witness[0, 0])


def _random_obstacle(rng, kind: str, near: np.ndarray):
    """One obstacle of ``kind`` around the point ``near`` and its numpy signed distance."""
    rot = _rotation(rng)
    return random_obstacle(rng, kind, near + rng.normal(size=3) * 0.05, rot)


@pytest.mark.parametrize("kind", ["box", "cylinder", "capsule", "sphere"])
def test_hull_distance_is_conservative_and_no_worse_than_its_box(kind):
    """Against every obstacle kind in random poses: never more than the signed distance of
    the hull's surface samples (which is at least the true one), never less than the
    bounding box's distance, and the witness a vertex of the hull."""
    rng = np.random.default_rng({"box": 1, "cylinder": 2, "capsule": 3, "sphere": 4}[kind])
    tighter = 0
    for _ in range(40):
        rotation, at = _rotation(rng), rng.uniform(-0.2, 0.2, 3)
        surface = SURFACE @ rotation.T + at
        world, sdf = _random_obstacle(rng, kind, surface[rng.integers(len(surface))])
        reference = float(sdf(surface).min())
        d, normal, witness = _hull_terms(rotation, at, world)
        box = _hull_terms(rotation, at, world, hull=False)[0]
        assert d <= reference + 1e-5
        assert d >= box - 1e-5
        tighter += d > box + 1e-3
        assert np.linalg.norm(normal) == pytest.approx(1.0, abs=1e-4)
        corners = VERTICES @ rotation.T + at
        assert np.min(np.linalg.norm(corners - witness, axis=1)) < 1e-5
    assert tighter >= 5  # the hull's own candidates matter


def _polytope_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Distance between the convex hulls of the points a (N, 3) and b (M, 3), an independent
    reference: the smallest |a^T x - b^T y| over convex weights x, y, by non-negative least
    squares with the weights' sums held to 1 by heavy rows (then normalised: two points of
    the hulls, so never less than their distance)."""
    from scipy.optimize import nnls

    heavy, n = 1e3, len(a)
    m = np.zeros((5, n + len(b)))
    m[:3, :n], m[:3, n:], m[3, :n], m[4, n:] = a.T, -b.T, heavy, heavy
    z, _ = nnls(m, np.array([0.0, 0.0, 0.0, heavy, heavy]), maxiter=10_000)
    x, y = z[:n] / z[:n].sum(), z[n:] / z[n:].sum()
    return float(np.linalg.norm(a.T @ x - b.T @ y))


def _obstacle_polytopes(world: World) -> tuple[np.ndarray, np.ndarray, float]:
    """Points whose hulls lie inside and around the obstacle (equal for a box, a segment
    or a point), and the radius to take off distances to them."""
    if world.counts[2]:
        pose, half = np.asarray(world.box_poses[0]), np.asarray(world.box_half_extents[0])
        corners = np.stack(np.meshgrid(*([[-1, 1]] * 3)), -1).reshape(-1, 3) * half
        points = corners @ quat_wxyz_to_matrix(pose[:4]).T + pose[4:]
        return points, points, 0.0
    if world.counts[4]:  # prisms of 64 sides inscribed in and circumscribed about it
        pose = np.asarray(world.cylinder_poses[0])
        r, hh = float(world.cylinder_radii[0]), float(world.cylinder_half_heights[0])
        angle = np.linspace(0, 2 * np.pi, 64, endpoint=False)
        ring = np.stack([np.cos(angle), np.sin(angle), np.zeros(64)], -1)
        ends = np.array([[0, 0, -hh], [0, 0, hh]])
        prism = (ends[:, None] + r * ring[None]).reshape(-1, 3)
        out = (ends[:, None] + r / np.cos(np.pi / 64) * ring[None]).reshape(-1, 3)
        rot = quat_wxyz_to_matrix(pose[:4])
        return prism @ rot.T + pose[4:], out @ rot.T + pose[4:], 0.0
    if world.counts[1]:
        points = np.stack([np.asarray(world.capsule_a[0]), np.asarray(world.capsule_b[0])])
        return points, points, float(world.capsule_radii[0])
    points = np.asarray(world.sphere_centers)[:1]
    return points, points, float(world.sphere_radii[0])


@pytest.mark.parametrize("kind", ["box", "cylinder", "capsule", "sphere"])
def test_hull_distance_is_the_convex_distance_when_apart(kind):
    """Apart, the hull's distance is the true distance of two convex shapes (within 0.1
    mm; to a cylinder, whose curved rim GJK approaches more slowly, 0.5 mm in these seeded
    poses and up to 2.6 mm in others, always below: docs/benchmarks/gjk_rounds.md),
    checked against a convex program over the hull's vertices and the
    obstacle's (a cylinder between prisms of 64 sides inside and around it), in random
    poses from touching to a few centimetres apart (where margins act), whatever the
    nearest features (vertex, edge, face)."""
    rng = np.random.default_rng({"box": 11, "cylinder": 12, "capsule": 13, "sphere": 14}[kind])
    apart = 0
    for _ in range(80):
        rotation, at = _rotation(rng), rng.uniform(-0.2, 0.2, 3)
        corners = VERTICES @ rotation.T + at
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        near = corners[np.argmax(corners @ direction)] + direction * rng.uniform(0.0, 0.03)
        world, _ = _random_obstacle(rng, kind, near)
        inner, outer, radius = _obstacle_polytopes(world)
        low = _polytope_distance(corners, outer) - radius
        high = _polytope_distance(corners, inner) - radius
        if low < 1e-3:  # touching or overlapping: the separating-axis answer (other tests)
            continue
        apart += 1
        d = _hull_terms(rotation, at, world)[0]
        slack = 5e-4 if kind == "cylinder" else 1e-4
        assert low - slack <= d <= high + 1e-5, (d, low, high)
    assert apart >= 15


def test_hull_distance_is_exact_against_walls_and_half_spaces():
    """A wall (a large box) or a half space facing the hull along a random direction, at a
    gap between -5 and 20 mm from the hull's furthest vertex along it (the analytic
    answer): the distance is that gap, the normal the wall's, the witness that vertex."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        rotation, at = _rotation(rng), rng.uniform(-0.2, 0.2, 3)
        corners = VERTICES @ rotation.T + at
        n = rng.normal(size=3)
        n /= np.linalg.norm(n)
        reach = float(np.max(corners @ n))
        gap = rng.uniform(-0.005, 0.02)
        wall_rot = _rotation(rng)
        wall_rot[:, 2] = n  # the wall's z faces the hull
        wall_rot[:, 0] -= n * (wall_rot[:, 0] @ n)
        wall_rot[:, 0] /= np.linalg.norm(wall_rot[:, 0])
        wall_rot[:, 1] = np.cross(n, wall_rot[:, 0])
        centre = n * (reach + gap + 0.5) + (np.eye(3) - np.outer(n, n)) @ at
        wall = World.create(
            box_poses=[_wxyz(wall_rot) + list(centre)], box_half_extents=[[1, 1, 0.5]]
        )
        half_space = World.create(halfspace_normals=[-n], halfspace_offsets=[reach + gap])
        for world in (wall, half_space):
            d, normal, witness = _hull_terms(rotation, at, world)
            assert d == pytest.approx(gap, abs=1e-5)
            np.testing.assert_allclose(normal, -n, atol=1e-4)
            assert float(witness @ n) == pytest.approx(reach, abs=1e-5)


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    return robot, RobotSpheres.embedded("panda", robot, fine=True)


def test_fine_panda_hand_is_its_mesh_hull(panda):
    """The bundled fine set checks the hand against obstacles as the convex hull of the
    original hand.stl (the same support in every direction), with no obstacle sphere or
    other box on it; self-collision keeps the default set's spheres."""
    _, spheres = panda
    assert spheres.n_hulls == 1 and spheres.box_link_names[-1] == "panda_hand"
    assert spheres.box_link_names.count("panda_hand") == 1
    middle = np.asarray(spheres.box_poses)[-1, 4:]
    np.testing.assert_array_equal(np.asarray(spheres.box_poses)[-1, :4], [1, 0, 0, 0])
    mine = np.asarray(spheres.hull_vertices[0], np.float64) + middle
    directions = np.random.default_rng(0).normal(size=(4000, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    np.testing.assert_allclose(
        (directions @ mine.T).max(1), (directions @ VERTICES.T).max(1), atol=2e-6
    )
    on_hand = np.array([n == "panda_hand" for n in spheres.link_names])
    assert not (on_hand & spheres.world_mask).any() and (on_hand & ~spheres.world_mask).any()


def test_bounding_model_checks_each_hull_as_its_bounding_box(panda):
    """RobotSpheres.bounding (the global step's cheaper check): the hand's row stays, as the
    box of the mesh's extent (numpy, from hand.stl) without vertices; near obstacles around
    the hand, a planner's bounding clearance is never above its clearance with the hull,
    and below it where the box's corners reach past the hull."""
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    robot, spheres = panda
    box = spheres.bounding()
    assert box.n_hulls == 0 and box.n_boxes == spheres.n_boxes
    low, high = VERTICES.min(0), VERTICES.max(0)
    np.testing.assert_allclose(np.asarray(box.box_half_extents)[-1], (high - low) / 2, atol=1e-6)
    np.testing.assert_allclose(
        np.asarray(box.box_poses)[-1], [1, 0, 0, 0, *((low + high) / 2)], atol=1e-6
    )
    q, near = near_the_hand(robot, np.random.default_rng(21), 64, 0.5, 0.08)
    rng = np.random.default_rng(22)
    world = World.create(
        box_poses=[_wxyz(_rotation(rng)) + list(p) for p in near(6)],
        box_half_extents=rng.uniform(0.01, 0.05, (6, 3)),
    )
    planner = TrajectoryOptimizer(robot, spheres)
    moving = robot.active_mask(None)
    full = planner.clearances(q, world, col.DEFAULT_CONTACTS, moving)
    bounding = planner.clearance_function(world, col.DEFAULT_CONTACTS, moving, bounding=True)(q)
    assert np.all(bounding <= full + 1e-6)
    assert np.sum(bounding < full - 1e-3) >= 3


def test_hulls_checked_and_kept_as_given(panda):
    """with_boxes' hulls: a wrong form, a non-finite point or a flat hull are refused with
    the link named; hulls_config gives the points back; the boxes stay before the hulls."""
    robot, _ = panda
    base = RobotSpheres.from_config(robot, {"panda_link1": [[0, 0, 0, 0.05]]})
    cube = [[x, y, z] for x in (0, 0.02) for y in (0, 0.03) for z in (0, 0.04)]
    for bad in ([[0, 0]], [[0, 0, float("nan")]] + cube, [[x, y, 0.0] for x, y, _ in cube]):
        with pytest.raises(ValueError, match="panda_hand"):
            base.with_boxes(robot, None, {"panda_hand": bad})
    with pytest.raises(ValueError, match="not_a_link"):
        base.with_boxes(robot, None, {"not_a_link": cube})
    box = [1, 0, 0, 0, 0, 0, 0, 0.01, 0.01, 0.01]
    kept = base.with_boxes(robot, {"panda_link7": [box]}, {"panda_hand": cube + cube[:2]})
    assert kept.n_boxes == 2 and kept.n_hulls == 1
    assert kept.box_link_names == ("panda_link7", "panda_hand")
    np.testing.assert_allclose(kept.hulls_config()["panda_hand"], sorted(cube), atol=1e-7)
    np.testing.assert_allclose(kept.boxes_config()["panda_link7"], [box], atol=1e-7)
    np.testing.assert_allclose(np.asarray(kept.box_half_extents)[1], [0.01, 0.015, 0.02], atol=1e-7)


def _clutter_by_the_hand(robot, seed: int, count: int, boxes: int, cylinders: int):
    """``count`` configurations (:func:`near_the_hand`) and a world of random boxes and
    cylinders within 10 cm of their hands."""
    q, near = near_the_hand(robot, np.random.default_rng(seed), count, 0.5, 0.1)
    rng = np.random.default_rng(seed + 1)
    return q, World.create(
        box_poses=[_wxyz(_rotation(rng)) + list(p) for p in near(boxes)],
        box_half_extents=rng.uniform(0.01, 0.06, (boxes, 3)),
        cylinder_poses=[_wxyz(_rotation(rng)) + list(p) for p in near(cylinders)],
        cylinder_radii=rng.uniform(0.01, 0.04, cylinders),
        cylinder_half_heights=rng.uniform(0.02, 0.08, cylinders),
    )


def test_planner_search_measures_hulls_against_their_nearest_obstacles(panda):
    """The planner's search (CollisionTerms.nearest_box_t) measures a hull against its
    nearest obstacles by the bounding box: never more than the dense terms' nearest
    (box_obstacle_terms), equal to it wherever that obstacle is also nearest by the box."""
    from pyroki_ros.model import kinematics as k

    robot, spheres = panda
    q, given = _clutter_by_the_hand(robot, 11, 32, 6, 3)
    world = given.padded((0, 8))
    rows = spheres.n_spheres + spheres.n_boxes
    checked = np.ones((rows, world.n_obstacles), bool)
    terms = col.CollisionTerms(robot, spheres)
    d = np.asarray(
        terms.nearest_box_t(k.frames_t(robot, jnp.asarray(q.T)), world, jnp.asarray(checked))[0]
    ).T[:, -1]  # (B,) the hull's row
    centers, axes = col.box_frames_at(robot, spheres, q)
    dense = np.asarray(
        col.box_obstacle_terms(
            centers, axes, spheres.box_half_extents, world, spheres.hull_vertices
        )[0]
    )[:, -1, : given.n_obstacles]
    assert np.all(d <= dense.min(-1) + 1e-6)
    close = dense.min(-1) < 0.05
    assert close.sum() >= 5
    assert np.mean(np.abs(d - dense.min(-1))[close] < 1e-6) >= 0.8


def test_optimiser_measures_hulls_where_their_boxes_come_near(panda):
    """The optimiser's rows (CollisionTerms.nearest_box_t with hull_columns=K, as
    boxes.HULL_COLUMNS): a hull measured as such only in the K configurations nearest by its
    bounding box, the box elsewhere. Never more than the full answer; where at most K
    configurations' boxes are within a margin, the same hinge max(0, margin - d) as the
    full answer (only those rows act); the other boxes' rows unchanged."""
    from pyroki_ros.model import kinematics as k

    robot, spheres = panda
    q, given = _clutter_by_the_hand(robot, 31, 64, 5, 2)
    world = given.padded((0, 8))
    checked = jnp.ones((spheres.n_spheres + spheres.n_boxes, world.n_obstacles), bool)
    frames = k.frames_t(robot, jnp.asarray(q.T))
    full = col.CollisionTerms(robot, spheres).nearest_box_t(frames, world, checked)
    some = col.CollisionTerms(robot, spheres).nearest_box_t(frames, world, checked, 16)
    box = col.CollisionTerms(robot, spheres.bounding()).nearest_box_t(frames, world, checked)
    d_full, d_some = np.asarray(full[0]), np.asarray(some[0])
    np.testing.assert_array_equal(d_some[:-1], d_full[:-1])
    assert np.all(d_some[-1] <= d_full[-1] + 5e-5)
    assert np.any(d_some[-1] < d_full[-1] - 1e-3)  # measured as a box somewhere
    margin = np.sort(np.asarray(box[0])[-1])[15]  # 16 configurations' boxes within it
    hinge = lambda d: np.maximum(margin - d, 0.0)
    np.testing.assert_allclose(hinge(d_some[-1]), hinge(d_full[-1]), atol=5e-5)


def test_hull_row_rate_matches_finite_differences(panda):
    """The planner's row of the hand's hull over a table 5 mm below its lowest vertex (the
    table's normal is the separating axis: exact): residual max(0, margin - d), and its
    Jacobian's product with a joint step matches the residual's change."""
    from pyroki_ros.model import kinematics as k

    robot, spheres = panda
    q = np.array([0.0, 0.2, 0.0, -2.2, 0.3, 2.6, 0.6, 0.04])
    pose = np.asarray(k.forward_kinematics(robot, q).wxyz_xyz)[robot.link_index("panda_hand")]
    w, x, y, z = pose[:4]
    rotation = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )
    lowest = float(np.min((VERTICES @ rotation.T + pose[4:])[:, 2]))
    table = World.create(
        box_poses=[[1, 0, 0, 0, 0.5, 0.0, lowest - 0.005 - 0.05]],
        box_half_extents=[[0.6, 0.6, 0.05]],
        names=["table"],
    )
    fingers = (("panda_leftfinger", "table"), ("panda_rightfinger", "table"))
    rules = col.ContactRules(allowed=fingers)  # the fingers reach below the hand
    world = table.padded()
    checked = col.checked_pairs(robot, spheres, table, rules)
    pad = np.ones((checked[0].shape[0], world.n_obstacles - table.n_obstacles), bool)
    checked = (jnp.asarray(np.concatenate([checked[0], pad], 1)), jnp.asarray(checked[1]))
    terms = col.CollisionTerms(robot, spheres)
    margin = jnp.asarray([0.02], jnp.float32)
    row = int(spheres.world_mask.sum()) + spheres.n_boxes - 1  # the hull's

    def residual(x):
        r, j, _ = terms.rows_t(
            jnp.asarray(x, jnp.float32)[:, None], world, checked, margin, 1.0, 1.0
        )
        return float(r[row, 0]), np.asarray(j[row, :, 0], np.float64)

    r, jac = residual(q)
    assert r == pytest.approx(0.02 - 0.005, abs=2e-4)
    for joint in (1, 3, 5):
        step = np.zeros_like(q)
        step[joint] = 2e-3
        change = (residual(q + step)[0] - residual(q - step)[0]) / 2
        assert jac @ step == pytest.approx(change, abs=1e-4, rel=0.05)


@pytest.mark.parametrize(
    ("problems", "name", "boxes"),
    [
        ("generated_seed1.yaml", "table_pick/5", -0.0012),
        ("generated_seed2.yaml", "table_pick/9", -0.0054),
    ],
)
def test_grasps_the_hand_boxes_ruled_out(problems, name, boxes):
    """MotionBenchMaker grasps whose real hand passes 0.3-1.9 mm from an object, where the
    hand's former four boxes overlapped it by ``boxes`` (1.2 and 5.4 mm: every goal
    configuration in collision, the plans failed; docs/benchmarks/mbm_fine_tuning.md and
    mbm_fine_seed2.md at commit 7733759): at the problems' own goal configurations the
    hull's clearance is never more than the real mesh's (test/mbm_mesh.py, numpy), and
    clear (table_pick/9: 0.32 mm, a face contact, exact; table_pick/5: 0.7 mm where the
    mesh's samples say 1.9 mm)."""
    import mbm_benchmark as mb
    import mbm_goal_clearance
    import mbm_problems as mp

    (problem,) = [p for p in mp.load_problems(Path(mb.mc.DATA) / problems) if p.name == name]
    planner = mb.make_planner(fine=True)
    arm = np.asarray(problem.goal_ik, np.float64).reshape(-1, 7)
    hand = mbm_goal_clearance.link_clearances(planner, problem, mb.configurations(planner, arm))
    hand = np.asarray(hand["panda_hand"], np.float64)
    mesh, where = mbm_mesh.mesh_clearances(arm, problem.scene)
    assert all(w.startswith("panda_hand") for w in where)  # the hand is what comes nearest
    assert np.all(hand <= mesh + 1e-5)
    assert np.all(hand >= 0) and np.all(hand > boxes)


@pytest.mark.parametrize(
    ("problems", "name"),
    [
        ("generated_seed1.yaml", "cage/7"),
        ("generated_seed1.yaml", "cage/8"),
        ("generated_seed2.yaml", "cage/0"),
        ("generated_seed2.yaml", "cage/5"),
    ],
)
def test_cage_goals_the_forearm_spheres_ruled_out(problems, name):
    """MotionBenchMaker cage goals whose real geometry is 1.3-2.9 mm clear of a wall, where
    the fine set's forearm spheres overlap the wall by 2.2-6.6 mm (every goal configuration
    in collision: docs/benchmarks/mbm_fine_tuning.md, mbm_fine_seed2.md). The bundled
    file's exact model, the plans' fallback, has the forearm (panda_link5) as the hull of
    its collision mesh: the hull of test/data's link5.stl (scipy), and GJK measures it never
    nearer than the real mesh says (test/mbm_mesh.py, numpy) where the mesh's nearest link
    is the forearm; some own goal configuration of each problem is clear for the whole
    exact model, as none is for the spheres."""
    import dataclasses

    import mbm_benchmark as mb
    import mbm_goal_clearance
    import mbm_problems as mp
    from scipy.spatial import ConvexHull

    (problem,) = [p for p in mp.load_problems(Path(mb.mc.DATA) / problems) if p.name == name]
    bundled = mb.make_planner(fine=True)
    assert mb.own_goals_clear(bundled, problem).startswith("0/")
    exact = bundled.optimizer.exact
    forearm_mesh = mbm_mesh.read_stl(mbm_mesh.GEOMETRY / "link5.stl").reshape(-1, 3)
    hull = forearm_mesh[ConvexHull(forearm_mesh).vertices]
    bundled_hull = np.asarray(exact.spheres.hulls_config()["panda_link5"])
    assert len(bundled_hull) == len(hull)
    gaps = np.linalg.norm(bundled_hull[:, None] - hull[None], axis=-1).min(1)
    assert gaps.max() < 1e-5  # the same points (the file rounds to 1 um)
    planner = dataclasses.replace(bundled, optimizer=exact, spheres=exact.spheres)
    arm = np.asarray(problem.goal_ik, np.float64).reshape(-1, 7)
    links = mbm_goal_clearance.link_clearances(planner, problem, mb.configurations(planner, arm))
    forearm = np.asarray(links["panda_link5"], np.float64)
    mesh, where = mbm_mesh.mesh_clearances(arm, problem.scene)
    by_forearm = np.array([w.startswith("panda_link5") for w in where])
    assert np.all(forearm[by_forearm] <= mesh[by_forearm] + 1e-5)
    clear = int(mb.own_goals_clear(planner, problem).split("/")[0])
    assert clear > 0, (forearm, mesh)


def test_a_sphere_file_s_exact_model_swaps_its_links_spheres_for_their_hulls(tmp_path):
    """``exact_hulls`` in a sphere file: the default model keeps the links' spheres, the
    exact model (from_yaml(exact=True)) has those links' hulls instead and everything else
    the same; a file without them names none and has no exact model."""
    robot = Robot.from_urdf(urdf_path("panda"))
    path = col.embedded_path("panda", fine=True)
    assert col.exact_hull_links(path) == ("panda_link5",)
    spheres = RobotSpheres.from_yaml(robot, path)
    exact = RobotSpheres.from_yaml(robot, path, exact=True)
    assert RobotSpheres.embedded("panda", robot, fine=True, exact=True).n_hulls == exact.n_hulls
    world = np.array([r == "world" for r in spheres.roles])
    on_forearm = np.array([n == "panda_link5" for n in spheres.link_names])
    assert np.any(world & on_forearm)
    assert not any(
        n == "panda_link5" and r == "world" for n, r in zip(exact.link_names, exact.roles)
    )
    assert exact.n_spheres == spheres.n_spheres - int(np.sum(world & on_forearm))
    assert exact.n_hulls == spheres.n_hulls + 1
    assert exact.box_link_names == (*spheres.box_link_names, "panda_link5")
    assert exact.self_pairs.shape == spheres.self_pairs.shape  # self-collision unchanged
    plain = fine_file_without_exact(tmp_path)
    assert col.exact_hull_links(plain) == ()
    with pytest.raises(ValueError, match="no exact_hulls"):
        RobotSpheres.from_yaml(robot, plain, exact=True)


def fine_file_without_exact(folder: Path) -> Path:
    """The bundled fine Panda file without its ``exact_hulls``, written into ``folder``."""
    import json

    text = col.embedded_path("panda", fine=True).read_text()
    config = json.loads("\n".join(x for x in text.splitlines() if not x.startswith("#")))
    config.pop("exact_hulls")
    (folder / "spheres.yaml").write_text(json.dumps(config))
    return folder / "spheres.yaml"
