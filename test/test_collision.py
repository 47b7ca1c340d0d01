"""Collision model: JAX distances vs an independent numpy reference, gradients vs finite
differences, padding, validation, sphere generation from URDF primitives / meshes / config, and
the bundled Panda and UR5 sphere sets.

Reference: ``test/collision_reference.py`` (float64 numpy, FK from ``test/reference_fk.py``).
float64 checks use ``jax.enable_x64`` as a context, as test_kinematics.py does.
"""

from __future__ import annotations

import warnings

import collision_reference as ref
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from reference_fk import rpy_to_matrix

from pyroki_ros import Robot, forward_kinematics
from pyroki_ros.collision import (
    FAR,
    RobotSpheres,
    World,
    collision_distances,
    min_distance,
    nearest_obstacle_t,
    obstacle_clearance_t,
    self_distances,
    sphere_centers,
    world_distances,
)
from pyroki_ros.robots import urdf_path

PANDA = urdf_path("panda")
UR5 = urdf_path("ur5")


def _random_quaternions(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _random_obstacles(rng, points: np.ndarray) -> dict:
    """Obstacles of every kind near ``points`` (S, 3); boxes 0-1, sphere 0 and cylinder 0
    contain points."""
    pick = points[rng.choice(len(points), 6, replace=False)]
    boxes = np.concatenate([_random_quaternions(rng, 4), np.zeros((4, 3))], axis=1)
    boxes[:2, 4:] = pick[:2] + rng.normal(scale=0.01, size=(2, 3))  # centres inside these
    boxes[2:, 4:] = pick[2:4] + rng.normal(scale=0.2, size=(2, 3))
    boxes[0, :4] *= 2.5  # not normalised: World.create and the reference normalise
    capsule_a = pick[4:6] + rng.normal(scale=0.15, size=(2, 3))
    capsule_b = capsule_a + rng.normal(scale=0.2, size=(2, 3))
    capsule_a = np.concatenate([capsule_a, capsule_a[:1]])  # the third is degenerate: a == b
    capsule_b = np.concatenate([capsule_b, capsule_a[:1]])
    return {
        "sphere_centers": np.concatenate([pick[:1] + 0.02, rng.uniform(-0.6, 0.6, size=(2, 3))]),
        "sphere_radii": rng.uniform(0.02, 0.2, size=3),
        "capsule_a": capsule_a,
        "capsule_b": capsule_b,
        "capsule_radii": rng.uniform(0.01, 0.1, size=3),
        "box_poses": boxes,
        "box_half_extents": rng.uniform(0.05, 0.25, size=(4, 3)),
        "halfspace_normals": np.array([[0.0, 0.0, 2.0], [0.3, -1.0, 0.2]]),
        "halfspace_offsets": np.array([0.1, 0.4]),
        # Drawn last: the other kinds keep the values they had before cylinders existed.
        "cylinder_poses": np.concatenate(
            [
                _random_quaternions(rng, 3) * [[1.7], [1], [1]],  # the first not normalised
                points[rng.choice(len(points), 3, replace=False)]
                + rng.normal(scale=[[0.005], [0.1], [0.1]], size=(3, 3)),
            ],
            axis=1,
        ),
        "cylinder_radii": rng.uniform(0.03, 0.12, size=3),
        "cylinder_half_heights": rng.uniform(0.05, 0.2, size=3),
    }


# --- distances against the numpy reference, float64 --------------------------------------------


def test_distances_and_gradients_match_reference_float64():
    rng = np.random.default_rng(0)
    with jax.enable_x64(True):
        robot = Robot.from_urdf(PANDA, dtype=jnp.float64)
        spheres = RobotSpheres.embedded("panda", robot)
        qs = np.asarray(robot.random_configurations(jax.random.PRNGKey(1), (3,)))

        @jax.jit
        def evaluate(q, world):
            c = sphere_centers(robot, spheres, q)
            return (
                c,
                world_distances(c, spheres.radii, world),
                self_distances(c, spheres),
            )

        links = spheres.link_names
        local = np.asarray(spheres.centers)
        radii = np.asarray(spheres.radii)
        pairs = [tuple(p) for p in np.asarray(spheres.self_pairs)]
        assert set(pairs) == ref.self_pairs(PANDA, links, spheres.ignore)
        inside_boxes = inside_cylinders = 0
        for q in qs:
            c_ref = ref.sphere_centers(PANDA, links, local, q)
            obstacles = _random_obstacles(rng, c_ref)
            world = World.create(**obstacles, dtype=jnp.float64)
            c, d_world, d_self = evaluate(q, world)
            np.testing.assert_allclose(c, c_ref, atol=1e-12)
            d_ref = ref.world_distances(c_ref, radii, obstacles)
            assert d_world.shape == d_ref.shape == (spheres.n_spheres, world.n_obstacles)
            np.testing.assert_allclose(d_world, d_ref, atol=1e-12)
            np.testing.assert_allclose(d_self, ref.self_distances(c_ref, radii, pairs), atol=1e-12)
            # some sphere centres really are inside boxes (the inside branch is exercised)
            box = slice(6, 10)
            inside_boxes += int(np.sum(d_ref[:, box] + radii[:, None] < 0))
            cylinders = slice(12, 15)  # the last kind
            inside_cylinders += int(np.sum(d_ref[:, cylinders] + radii[:, None] < 0))

        assert inside_boxes >= 2
        assert inside_cylinders >= 2

        # Jacobian of all distances vs central differences of the reference.
        q = qs[0]
        obstacles = _random_obstacles(rng, ref.sphere_centers(PANDA, links, local, q))
        world = World.create(**obstacles, dtype=jnp.float64)

        def reference_all(qq):
            c_ref = ref.sphere_centers(PANDA, links, local, qq)
            return np.concatenate(
                [
                    ref.world_distances(c_ref, radii, obstacles).ravel(),
                    ref.self_distances(c_ref, radii, pairs),
                ]
            )

        jac = jax.jit(jax.jacfwd(lambda qq: collision_distances(robot, spheres, qq, world)))(q)
        h = 1e-6
        fd = np.stack(
            [
                (reference_all(q + h * e) - reference_all(q - h * e)) / (2 * h)
                for e in np.eye(robot.n_joints)
            ],
            axis=1,
        )
        np.testing.assert_allclose(jac, fd, atol=1e-6)
        assert np.isclose(
            float(min_distance(robot, spheres, q, world)), reference_all(q).min(), atol=1e-12
        )


def test_nearest_obstacle_and_its_gradient_match_reference_float64():
    """The planner's inner loop: per point the nearest obstacle's distance (all kinds, boxes
    with points inside) and the gradient of that distance, against the numpy reference and
    its central finite differences."""
    rng = np.random.default_rng(4)
    points = rng.uniform(-0.5, 0.5, size=(60, 3))
    obstacles = _random_obstacles(rng, points)
    d_ref = ref.world_distances(points, np.zeros(len(points)), obstacles).min(axis=1)
    h = 1e-6
    fd = np.stack(
        [
            (
                ref.world_distances(points + h * e, np.zeros(len(points)), obstacles).min(axis=1)
                - ref.world_distances(points - h * e, np.zeros(len(points)), obstacles).min(axis=1)
            )
            / (2 * h)
            for e in np.eye(3)
        ],
        axis=1,
    )
    with jax.enable_x64(True):
        world = World.create(**obstacles, dtype=jnp.float64).padded((0, 4, 8))
        d, grad = jax.jit(nearest_obstacle_t)(tuple(points.T[:, None, :]), world)
    np.testing.assert_allclose(np.asarray(d)[0], d_ref, atol=1e-12)
    grad = np.stack([np.asarray(g)[0] for g in grad], axis=1)
    # Away from kinks (two obstacles equally near, box edges) the gradient is the reference's.
    smooth = np.all(np.abs(fd) < 1 + 1e-6, axis=1) & np.isclose(np.linalg.norm(fd, axis=1), 1)
    assert smooth.sum() > 40
    np.testing.assert_allclose(grad[smooth], fd[smooth], atol=1e-5)
    assert np.all(np.asarray(d)[0] - d_ref > -1e-12)


def test_obstacle_clearance_is_the_reference_minimum_over_checked_obstacles():
    """The check's distance alone (no nearest obstacle carried): per point the smallest
    reference distance over the obstacles its mask checks, FAR where it checks none; the
    padded world's dummies change nothing."""
    rng = np.random.default_rng(5)
    points = rng.uniform(-0.5, 0.5, size=(60, 3))
    obstacles = _random_obstacles(rng, points)
    d_ref = ref.world_distances(points, np.zeros(len(points)), obstacles)  # (60, N)
    checked = rng.random(d_ref.shape) < 0.5
    checked[0] = False  # a point that may touch everything
    expected = np.where(checked, d_ref, np.inf).min(axis=1)
    expected[0] = FAR
    with jax.enable_x64(True):
        world = World.create(**obstacles, dtype=jnp.float64)
        clearance = jax.jit(obstacle_clearance_t)
        d = np.asarray(clearance(tuple(points.T), world, jnp.asarray(checked)))
        padded = np.asarray(clearance(tuple(points.T), world.padded((0, 4, 8))))
    np.testing.assert_allclose(d, expected, atol=1e-12)
    np.testing.assert_allclose(padded, d_ref.min(axis=1), atol=1e-12)


def test_float32_batched_jit_matches_reference():
    rng = np.random.default_rng(3)
    robot = Robot.from_urdf(UR5)
    spheres = RobotSpheres.embedded("ur5", robot)
    qs = np.asarray(robot.random_configurations(jax.random.PRNGKey(2), (2, 3)))
    links, local = spheres.link_names, np.asarray(spheres.centers, np.float64)
    radii = np.asarray(spheres.radii, np.float64)
    obstacles = _random_obstacles(rng, ref.sphere_centers(UR5, links, local, qs[0, 0]))
    world = World.create(**obstacles).padded((0, 4, 16, 64))
    d = jax.jit(collision_distances)(robot, spheres, qs, world)
    n = world.n_obstacles
    assert d.shape == (2, 3, spheres.n_spheres * n + spheres.n_pairs)
    pairs = [tuple(p) for p in np.asarray(spheres.self_pairs)]
    real = np.r_[0:3, 4:7, 8:12, 12:14, 16:19]  # the given obstacles inside the padded world
    for idx in np.ndindex(2, 3):
        c_ref = ref.sphere_centers(UR5, links, local, qs[idx])
        got = np.asarray(d[idx][: spheres.n_spheres * n]).reshape(spheres.n_spheres, n)
        np.testing.assert_allclose(
            got[:, real], ref.world_distances(c_ref, radii, obstacles), atol=2e-5
        )
        np.testing.assert_allclose(
            d[idx][spheres.n_spheres * n :], ref.self_distances(c_ref, radii, pairs), atol=2e-5
        )


# --- padding, zero distance ------------------------------------------------------------------


def test_padding_dummies_are_inert_and_bucketed():
    world = World.create(
        sphere_centers=[0.3, 0.0, 0.5],
        sphere_radii=0.1,
        box_poses=[[1, 0, 0, 0, 0.5, 0.2, 0.3]] * 5,
        box_half_extents=[[0.1, 0.1, 0.1]] * 5,
        halfspace_normals=[0, 0, 1],
        halfspace_offsets=0.0,
    )
    assert world.counts == (1, 0, 5, 1, 0)
    padded = world.padded((0, 4, 16, 64))
    assert padded.counts == (4, 0, 16, 4, 0)
    many = World.create(sphere_centers=np.zeros((70, 3)), sphere_radii=np.ones(70))
    assert many.padded((0, 4, 16, 64)).counts[0] == 128  # past the last: its multiples
    assert world.padded().counts == (2, 0, 6, 2, 0)  # the default, WORLD_BUCKETS: small steps
    assert world.padded((0, 8)).counts == (8, 0, 8, 8, 0)

    # robot spheres around the obstacles, some penetrating
    rng = np.random.default_rng(5)
    centers = jnp.asarray(rng.uniform([0, -0.3, 0], [0.8, 0.5, 0.8], size=(4, 30, 3)), jnp.float32)
    radii = jnp.asarray(rng.uniform(0.02, 0.1, size=30), jnp.float32)
    margin = 0.05

    @jax.jit
    def evaluate(c, w):
        def cost(c):
            d = world_distances(c, radii, w)
            return jnp.sum(jnp.maximum(margin - d, 0.0) ** 2), d

        (value, d), grad = jax.value_and_grad(cost, has_aux=True)(c)
        return d, value, grad

    d, cost_plain, g = evaluate(centers, world)
    d_pad, cost_pad, g_pad = evaluate(centers, padded)
    assert float(cost_plain) > 0
    keep = np.r_[0:1, 4:9, 20:21]
    np.testing.assert_allclose(d_pad[..., keep], d, atol=1e-5)
    dummy = np.setdiff1d(np.arange(padded.n_obstacles), keep)
    assert np.all(np.asarray(d_pad[..., dummy]) > 0.5 * FAR)
    np.testing.assert_allclose(cost_pad, cost_plain, rtol=1e-5)
    assert np.all(np.isfinite(g_pad))
    np.testing.assert_allclose(g_pad, g, atol=1e-5)


def test_gradient_is_finite_at_zero_distance():
    # A robot sphere centre exactly on an obstacle centre, a capsule axis and a box centre.
    centers = jnp.zeros((1, 3))
    world = World.create(
        sphere_centers=[0.0, 0.0, 0.0],
        sphere_radii=0.1,
        capsule_a=[-1.0, 0.0, 0.0],
        capsule_b=[1.0, 0.0, 0.0],
        capsule_radii=0.1,
        box_poses=[1, 0, 0, 0, 0, 0, 0],
        box_half_extents=[0.1, 0.2, 0.3],
    ).padded((0, 4, 16, 64))  # one real obstacle and three dummies per kind
    radii = jnp.array([0.05])

    @jax.jit
    def evaluate(c):
        d = world_distances(c, radii, world)
        return d, jax.grad(lambda x: jnp.sum(world_distances(x, radii, world)))(c)

    d, g = evaluate(centers)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(d[0, [0, 4, 8]], [-0.15, -0.15, -0.15], atol=1e-7)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sphere_centers": [[0, 0, np.nan]], "sphere_radii": [0.1]}, "not finite"),
        ({"sphere_centers": [[0, 0, 0]], "sphere_radii": [-0.1]}, "sphere_radii.*> 0"),
        ({"sphere_centers": [[0, 0, 0]], "sphere_radii": [0.0]}, "> 0"),
        ({"sphere_centers": [[0, 0]], "sphere_radii": [0.1]}, "shape"),
        ({"sphere_centers": [[0, 0, 0]] * 2, "sphere_radii": [0.1]}, "different counts"),
        ({"sphere_centers": [[0, 0, 0]]}, "without sphere_radii"),
        ({"capsule_a": [0, 0, 0], "capsule_b": [0, 0, np.inf], "capsule_radii": 1}, "finite"),
        ({"box_poses": [[0, 0, 0, 0, 0, 0, 0]], "box_half_extents": [[1, 1, 1]]}, "quaternion"),
        ({"box_poses": [[1, 0, 0, 0, 0, 0, 0]], "box_half_extents": [[1, 0, 1]]}, "> 0"),
        ({"halfspace_normals": [[0, 0, 0]], "halfspace_offsets": [0]}, "zero"),
    ],
)
def test_world_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        World.create(**kwargs)


def test_halfspace_normals_are_normalised():
    world = World.create(halfspace_normals=[0, 0, 2.0], halfspace_offsets=1.0)
    np.testing.assert_allclose(world.halfspace_normals, [[0, 0, 1]])
    np.testing.assert_allclose(world.halfspace_offsets, [0.5])


def test_from_config_and_errors():
    robot = Robot.from_urdf(PANDA)
    spheres = RobotSpheres.from_config(
        robot,
        {"panda_link3": [[0, 0, 0, 0.05]], "panda_link5": [[0, 0, -0.1, 0.06]]},
        ignore=[("panda_link3", "panda_link5")],
    )
    assert spheres.n_spheres == 2 and spheres.n_pairs == 0
    assert RobotSpheres.from_config(robot, spheres.to_config()).n_pairs == 1
    with pytest.raises(ValueError, match="panda_link99"):
        RobotSpheres.from_config(robot, {"panda_link99": [[0, 0, 0, 0.1]]})
    for bad in ([[0, 0, 0, 0.0]], [[0, 0, 0, -1.0]], [[0, 0, 0, np.nan]], [[0, 0, np.inf, 1.0]]):
        with pytest.raises(ValueError, match="panda_link1"):
            RobotSpheres.from_config(robot, {"panda_link1": bad})
    with pytest.raises(ValueError, match=r"\[x, y, z, r\]"):
        RobotSpheres.from_config(robot, {"panda_link1": [[0, 0, 0.1]]})
    with pytest.raises(ValueError, match="nope"):
        RobotSpheres.from_config(robot, {"panda_link1": [[0, 0, 0, 0.1]]}, ignore=[("nope", "x")])


# --- spheres from URDF geometry -------------------------------------------------------------

TOY_URDF = """<robot name="toy">
  <link name="base"><collision><origin xyz="0 0 0.05"/><geometry><box size="0.3 0.2 0.1"/></geometry></collision></link>
  <link name="arm">
    <collision><origin xyz="0 0 0.2" rpy="0.3 0.2 0.1"/><geometry><cylinder radius="0.04" length="0.4"/></geometry></collision>
    <collision><origin xyz="0.05 0 0.4"/><geometry><sphere radius="0.06"/></geometry></collision>
  </link>
  <link name="flange"/>
  <link name="tool">
    <collision><origin xyz="0 0 0.1" rpy="1.5707963 0 0"/><geometry><capsule radius="0.03" length="0.2"/></geometry></collision>
    <collision><geometry><box size="0.5 0.02 0.01"/></geometry></collision>
    <collision><geometry><mesh filename="package://nowhere/missing.stl"/></geometry></collision>
  </link>
  <joint name="j1" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="fix" type="fixed"><parent link="arm"/><child link="flange"/><origin xyz="0 0 0.5"/></joint>
  <joint name="j2" type="revolute"><parent link="flange"/><child link="tool"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
</robot>"""


# yourdfpy (and so Robot.from_urdf) does not know <capsule>; RobotSpheres.from_urdf does.
TOY_ROBOT = TOY_URDF.replace("capsule", "cylinder")


def _surface_samples(shape: str, dims, rng, n=3000) -> np.ndarray:
    """Points on the surface of a primitive in its own frame."""
    if shape == "box":
        half = np.asarray(dims) / 2
        p = rng.uniform(-1, 1, size=(n, 3)) * half
        axis = rng.integers(0, 3, n)
        p[np.arange(n), axis] = np.sign(rng.uniform(-1, 1, n)) * half[axis]
        corners = np.stack(np.meshgrid(*[[-h, h] for h in half], indexing="ij"), -1).reshape(-1, 3)
        return np.concatenate([p, corners])
    if shape == "sphere":
        v = rng.normal(size=(n, 3))
        return dims[0] * v / np.linalg.norm(v, axis=1, keepdims=True)
    radius, length = dims
    angle = rng.uniform(0, 2 * np.pi, n)
    ring = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    if shape == "cylinder":  # side, rims and caps
        z = rng.uniform(-length / 2, length / 2, n)
        z[: n // 10] = length / 2
        z[n // 10 : n // 5] = -length / 2
        scale = np.where(np.abs(z) == length / 2, np.sqrt(rng.uniform(0, 1, n)), 1.0)
        scale[: n // 20] = 1.0
        return np.concatenate([ring * scale[:, None], z[:, None]], axis=1)
    v = rng.normal(size=(n, 3))  # capsule: side plus two hemispheres
    v = radius * v / np.linalg.norm(v, axis=1, keepdims=True)
    v[:, 2] += np.where(v[:, 2] > 0, length / 2, -length / 2)
    side = np.concatenate([ring, rng.uniform(-length / 2, length / 2, (n, 1))], axis=1)
    return np.concatenate([v, side])


def _transform(xyz, rpy):
    t = np.eye(4)
    t[:3, :3] = rpy_to_matrix(rpy)
    t[:3, 3] = xyz
    return t


def test_from_urdf_primitives_are_covered_and_missing_mesh_warns():
    robot = Robot.from_urdf(TOY_ROBOT)
    with pytest.warns(UserWarning, match="link 'tool'.*missing.stl"):
        spheres = RobotSpheres.from_urdf(robot, TOY_URDF)
    rng = np.random.default_rng(0)
    primitives = [
        ("base", "box", (0.3, 0.2, 0.1), (0, 0, 0.05), (0, 0, 0)),
        ("arm", "cylinder", (0.04, 0.4), (0, 0, 0.2), (0.3, 0.2, 0.1)),
        ("arm", "sphere", (0.06,), (0.05, 0, 0.4), (0, 0, 0)),
        ("tool", "capsule", (0.03, 0.2), (0, 0, 0.1), (1.5707963, 0, 0)),
        ("tool", "box", (0.5, 0.02, 0.01), (0, 0, 0), (0, 0, 0)),
    ]
    centers, radii = np.asarray(spheres.centers, np.float64), np.asarray(spheres.radii, np.float64)
    links = np.asarray(spheres.link_names)
    for link, shape, dims, xyz, rpy in primitives:
        t = _transform(xyz, rpy)
        points = _surface_samples(shape, dims, rng) @ t[:3, :3].T + t[:3, 3]
        mine = links == link
        gap = np.linalg.norm(points[:, None] - centers[mine][None], axis=2) - radii[mine]
        assert np.all(gap.min(axis=1) <= 1e-6), (link, shape, gap.min(axis=1).max())
    counts = {n: int(np.sum(links == n)) for n in ("base", "arm", "tool")}
    assert all(1 <= c <= 16 for c in counts.values()), counts
    # base-arm adjacent, arm+flange one body adjacent to tool: only base-tool is checked
    pairs = {tuple(sorted((links[i], links[j]))) for i, j in np.asarray(spheres.self_pairs)}
    assert pairs == {("base", "tool")}
    with pytest.warns(UserWarning):
        ignored = RobotSpheres.from_urdf(robot, TOY_URDF, ignore=[("base", "tool")])
    assert ignored.ignore == (("base", "tool"),) and ignored.n_pairs == 0


def test_from_urdf_fits_a_mesh(tmp_path):
    trimesh = pytest.importorskip("trimesh")
    mesh = trimesh.creation.box(extents=(0.4, 0.1, 0.1))
    mesh.export(tmp_path / "bar.stl")
    urdf = TOY_URDF.replace("package://nowhere/missing.stl", "bar.stl").replace(
        '<mesh filename="bar.stl"/>', '<mesh filename="bar.stl" scale="1 1 2"/>'
    )
    (tmp_path / "toy.urdf").write_text(urdf)
    robot = Robot.from_urdf(TOY_ROBOT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spheres = RobotSpheres.from_urdf(robot, tmp_path / "toy.urdf", spheres_per_mesh=3)
    links = np.asarray(spheres.link_names)
    mesh.apply_scale([1, 1, 2])
    corners = mesh.vertices
    c = np.asarray(spheres.centers)[links == "tool"]
    r = np.asarray(spheres.radii)[links == "tool"]
    gap = np.linalg.norm(corners[:, None] - c[None], axis=2) - r
    assert np.all(gap.min(axis=1) <= 0)
    assert r.max() < 0.2  # fitted, not one sphere around everything


def test_collision_mesh_points_lie_on_the_placed_mesh_and_covering_radii_contain_them(tmp_path):
    """A link's collision mesh points (scale and <origin> applied) lie on the surface of the
    placed box, checked by undoing the placement by hand; radii grown by covering_radii
    contain every point with the padding, never shrink, and grow no more than needed."""
    trimesh = pytest.importorskip("trimesh")
    from pyroki_ros.collision.fitting import collision_mesh_points, covering_radii

    trimesh.creation.box(extents=(0.2, 0.1, 0.05)).export(tmp_path / "box.stl")
    urdf = (
        '<robot name="r"><link name="a"><collision><origin xyz="0.1 0 0.3" rpy="0 0 1.5707963"/>'
        '<geometry><mesh filename="{}" scale="1 1 2"/></geometry></collision></link></robot>'
    )
    (tmp_path / "r.urdf").write_text(urdf.format("box.stl"))
    points = collision_mesh_points(tmp_path / "r.urdf", "a", count=2000)
    assert len(points) == 2000 + 8  # the samples and the box's vertices
    yaw = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # rpy 0 0 pi/2
    local = (points - [0.1, 0.0, 0.3]) @ yaw  # R^T (p - t), row-wise
    half = np.array([0.1, 0.05, 0.05])  # z scaled by 2
    assert np.all(np.abs(local) <= half + 1e-6)
    assert np.all(np.min(half - np.abs(local), axis=1) <= 1e-6)  # on a face
    (tmp_path / "missing.urdf").write_text(urdf.format("nowhere.stl"))
    with pytest.raises(ValueError, match="not found"):
        collision_mesh_points(tmp_path / "missing.urdf", "a")

    centers = np.array([[0.1, -0.05, 0.3], [0.1, 0.05, 0.3]])
    radii = np.array([0.01, 0.3])
    grown = covering_radii(points, centers, radii, padding=1e-3)
    np.testing.assert_array_equal(grown, radii)  # the big sphere holds every point already
    radii = np.array([0.01, 0.02])
    grown = covering_radii(points, centers, radii, padding=1e-3)
    assert np.all(grown >= radii)
    gap = np.linalg.norm(points[:, None] - centers[None], axis=2) - grown
    assert gap.min(axis=1).max() == pytest.approx(-1e-3, abs=1e-12)  # the farthest: padding in


def test_fit_mesh_spheres_covers_a_capsule_and_overshoots_by_at_most_the_tolerance():
    trimesh = pytest.importorskip("trimesh")
    from pyroki_ros.collision.fitting import fit_mesh_spheres, mesh_overshoot, mesh_surface_points

    radius, length, tolerance, padding = 0.05, 0.2, 0.006, 1e-3
    mesh = trimesh.creation.capsule(height=length, radius=radius, count=[32, 32])  # along z
    centers, radii = fit_mesh_spheres(mesh, 10, tolerance, padding, steps=200)
    assert 1 <= len(radii) <= 10
    # conservative: fresh surface samples (not the ones fitted) are inside some sphere
    points = mesh_surface_points(mesh, 20000, seed=7)
    gap = np.linalg.norm(points[:, None] - centers[None], axis=2) - radii
    assert gap.min(axis=1).max() <= 0
    # tight: the polygonal mesh lies inside the exact capsule, whose signed distance is
    # |c - axis segment| - radius, so r + sdf(c) bounds how far each sphere pokes out of it
    axis_point = np.stack(
        [0 * centers[:, 0], 0 * centers[:, 0], np.clip(centers[:, 2], -0.1, 0.1)], 1
    )
    overshoot = radii + np.linalg.norm(centers - axis_point, axis=1) - radius
    assert overshoot.max() <= tolerance + padding + 1e-4, overshoot.max()
    assert np.all(mesh_overshoot(mesh, centers, radii) <= tolerance + padding + 1e-4)


def test_self_pairs_skip_fixed_and_adjacent_bodies():
    urdf = TOY_ROBOT.replace("</robot>", "") + (
        '<link name="tip"/><joint name="j3" type="revolute"><parent link="tool"/>'
        '<child link="tip"/><axis xyz="1 0 0"/><limit lower="-1" upper="1" effort="1" '
        'velocity="1"/></joint></robot>'
    )
    robot = Robot.from_urdf(urdf)
    config = {n: [[0, 0, 0, 0.01]] for n in ("base", "arm", "flange", "tool", "tip")}
    spheres = RobotSpheres.from_config(robot, config)
    names = spheres.link_names
    got = {tuple(sorted((names[i], names[j]))) for i, j in np.asarray(spheres.self_pairs)}
    assert got == {("base", "tool"), ("base", "tip"), ("arm", "tip"), ("flange", "tip")}
    assert {tuple(p) for p in np.asarray(spheres.self_pairs)} == ref.self_pairs(urdf, names)


# --- the bundled sphere sets ----------------------------------------------------------------


def test_embedded_panda_covers_links_and_is_free_at_center():
    robot = Robot.from_urdf(PANDA)
    spheres = RobotSpheres.embedded("panda", robot)
    assert spheres.n_spheres == len(spheres.link_names) > 20
    with_geometry = {f"panda_link{i}" for i in range(8)} | {
        "panda_hand",
        "panda_leftfinger",
        "panda_rightfinger",
    }
    assert set(spheres.link_names) == with_geometry
    radii = np.asarray(spheres.radii)
    assert np.all((radii > 0.005) & (radii < 0.12))
    # every arm joint sits inside the robot: the link frame origins of link1..7 lie in a
    # sphere of that link or of its parent link
    centers = np.asarray(sphere_centers(robot, spheres, robot.center()))
    poses = np.asarray(forward_kinematics(robot, robot.center()).wxyz_xyz)
    names = np.asarray(spheres.link_names)
    for i in range(1, 8):
        near = np.isin(names, [f"panda_link{i}", f"panda_link{i - 1}"])
        origin = poses[robot.link_index(f"panda_link{i}"), 4:]
        gap = np.linalg.norm(centers[near] - origin, axis=1) - radii[near]
        assert gap.min() < 0, f"panda_link{i}"
    assert ("panda_leftfinger", "panda_rightfinger") in spheres.ignore
    d_self = self_distances(jnp.asarray(centers), spheres)
    assert float(d_self.min()) > 0
    # and the arm is not folded into itself at a typical "ready" pose either
    ready = jnp.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02])
    assert float(min_distance(robot, spheres, ready)) > 0


def test_embedded_ur5_loads_and_unknown_robot_fails():
    robot = Robot.from_urdf(UR5)
    spheres = RobotSpheres.embedded("ur5", robot)
    assert spheres.n_spheres > 6 and spheres.n_pairs > 0
    assert float(min_distance(robot, spheres, robot.center())) > 0
    with pytest.raises(ValueError, match="unknown robot"):
        RobotSpheres.embedded("nosuchbot")
