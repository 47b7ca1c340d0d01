"""The Panda's real collision geometry (test/mbm_mesh.py), which the MotionBenchMaker problem
generator asks beside robometrics' spheres. References: trimesh (an independent STL reader
and surface sampler) and hand-placed boxes."""

from __future__ import annotations

import mbm_check as mc
import mbm_mesh as mm
import numpy as np
import pytest

trimesh = pytest.importorskip("trimesh")


def test_stl_reader_agrees_with_trimesh():
    for path in sorted(mm.GEOMETRY.glob("*.stl")):
        ours = mm.read_stl(path)
        theirs = trimesh.load(path, force="mesh", process=False)
        assert ours.shape == (len(theirs.faces), 3, 3), path.name
        np.testing.assert_allclose(ours, theirs.triangles, atol=1e-7)


def test_box_triangles_make_the_box():
    size = (0.02, 0.03, 0.05)
    tri = mm.box_triangles(size)
    assert tri.shape == (12, 3, 3)
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    a, b, c = size
    assert np.isclose(area.sum(), 2 * (a * b + b * c + a * c))
    np.testing.assert_allclose(np.abs(tri).max(axis=(0, 1)), np.array(size) / 2)


def test_surface_samples_cover_every_link_within_the_spacing():
    """Random points of trimesh's surface sampler lie within the spacing of our samples, and
    our samples lie on the surface."""
    for path in sorted(mm.GEOMETRY.glob("link*.stl"))[:3]:
        mesh = trimesh.load(path, force="mesh")
        ours = mm.surface_points(mm.read_stl(path))
        probe, _ = trimesh.sample.sample_surface(mesh, 300, seed=1)
        gap = np.linalg.norm(probe[:, None] - ours[None], axis=-1).min(axis=1)
        assert gap.max() <= mm.SPACING, path.name
        _, distance, _ = trimesh.proximity.closest_point(mesh, ours[::50])
        assert distance.max() < 1e-6, path.name


def _hand_box(q, offset, half):
    """A cuboid obstacle centred at ``offset`` in panda_hand's frame (its axes)."""
    t = mc.PANDA.poses(np.atleast_2d(q), ["panda_hand"])["panda_hand"][0]
    centre = t[:3, :3] @ offset + t[:3, 3]
    w, x, y, z = trimesh.transformations.quaternion_from_matrix(t)
    return mc.Cuboid("probe", tuple(2 * np.asarray(half)), (w, x, y, z, *centre))


def test_clearance_sees_a_box_through_the_hand_and_not_one_beside_it():
    q = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    # A rod through the hand along its x axis (the hand is about 6 cm thick there): its
    # walls cut the rod, so samples of the surface lie up to the rod's half width inside.
    rod = mc.Scene([_hand_box(q, np.array([0.0, 0.0, 0.03]), (0.1, 0.015, 0.015))])
    d, where = mm.mesh_clearances(q, rod)
    assert -0.016 < d[0] < -0.01 and where[0] == "panda_hand-probe"
    # 20 cm beside the hand along its x axis, the hand alone checked: the distance is the
    # nearest sample's to that box, computed here in the hand's frame (no FK).
    others = [link for link in mm.POINTS if link != "panda_hand"]
    beside = mc.Scene([_hand_box(q, np.array([0.2, 0.0, 0.03]), (0.01, 0.01, 0.01))])
    d, where = mm.mesh_clearances(q, beside, skip_links=others)
    outside = np.maximum(np.abs(mm.POINTS["panda_hand"] - [0.2, 0.0, 0.03]) - 0.01, 0.0)
    expected = np.linalg.norm(outside, axis=1).min()
    assert 0.15 < expected < 0.19
    np.testing.assert_allclose(d[0], expected, atol=1e-9)
    assert where[0] == "panda_hand-probe"


def test_spheres_can_call_clear_what_the_real_forearm_hits():
    """Why the generator asks both: the first goal of cage/0 in the set made with robometrics'
    spheres alone (before the rule) is clear by them, but the real forearm (panda_link5) is
    about 2 cm inside the cage's front bar."""
    q = np.array(
        [0.10684529226907945, 1.057012897430717, -0.9678987263725901, -1.0053910369542163,
         2.886012685845836, 2.8154563134156074, -1.3159382788277438]
    )  # fmt: skip
    bar = mc.Cuboid(
        "side_frontA",
        (0.04, 0.7, 0.04),
        (0.9807444276758687, 0.0, 0.0, -0.19529559027979335,
         0.4902799093100135, -0.2592640183786257, 0.43591557912786494),
    )  # fmt: skip
    scene = mc.Scene([bar])
    assert mc.configuration_valid(q, scene)[0]
    d, where = mm.mesh_clearances(q, scene)
    assert -0.025 < d[0] < -0.015 and where[0] == "panda_link5-side_frontA"
    assert not mm.mesh_valid(q, scene)[0]
