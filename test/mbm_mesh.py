"""The Panda's real collision geometry, for judging start and goal configurations the way
MotionBenchMaker does (MoveIt checks them against the URDF's collision meshes), numpy float64
only: no pyroki_ros, no JAX, no mesh library.

Why beside the sphere check (``mbm_check``): robometrics' Franka spheres are an evaluation
model, not a cover of the robot. They leave part of ``panda_link5`` (the forearm between the
elbow and the wrist) uncovered, so a configuration they call clear can have the forearm 2 cm
inside a wall (measured on the cage family). MotionBenchMaker keeps only problems whose start
and goal are valid for the real geometry; ``bench/mbm_problems.py`` asks both.

Geometry: the collision elements of example-robot-data 6.0.0's ``panda.urdf`` (Apache-2.0,
``test/data/mbm/panda_collision/``: its URDF, collision STLs and LICENSE, unchanged): meshes
for the links and the hand, boxes for the fingers. Each element's surface is sampled on a
barycentric grid per triangle with at most ``SPACING`` between neighbours, plus the vertices,
and a configuration is clear when no sample lies inside an obstacle (signed distance >= 0).
A penetration shallower than about half the spacing between samples can go unseen.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import mbm_check as mc
import numpy as np
from reference_fk import make_transform, rpy_to_matrix

GEOMETRY = mc.DATA / "panda_collision"
URDF_PATH = GEOMETRY / "panda.urdf"
SPACING = 0.005  # m between surface samples


def read_stl(path: Path) -> np.ndarray:
    """(F, 3, 3) triangles of a binary STL file."""
    data = path.read_bytes()
    count = int(np.frombuffer(data, "<u4", 1, 80)[0])
    if len(data) != 84 + 50 * count:
        raise ValueError(f"{path}: not a binary STL")
    record = np.dtype([("normal", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    return np.frombuffer(data, record, count, 84)["v"].astype(np.float64)


def box_triangles(size: Sequence[float]) -> np.ndarray:
    """(12, 3, 3) triangles of a box of full extents ``size`` centred at the origin."""
    half = np.asarray(size, np.float64) / 2
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * half
    faces = []
    for axis in range(3):
        for side in (-1, 1):
            quad = [i for i in range(8) if np.sign(corners[i, axis]) == side]
            a, b, c, d = sorted(quad, key=lambda i: tuple(corners[i]))
            faces += [(a, b, d), (a, d, c)]
    return corners[np.array(faces)]


def surface_points(triangles: np.ndarray, spacing: float = SPACING) -> np.ndarray:
    """(P, 3) points on the triangles (a, b, c): a grid a + u (b - a) + v (c - a) per triangle
    with steps of at most ``spacing`` along both edges from ``a``, vertices included."""
    out = [triangles.reshape(-1, 3)]
    for a, b, c in triangles:
        m = max(1, math.ceil(np.linalg.norm(b - a) / spacing))
        k = max(1, math.ceil(np.linalg.norm(c - a) / spacing))
        i, j = np.meshgrid(np.arange(m + 1) / m, np.arange(k + 1) / k, indexing="ij")
        keep = i + j <= 1 + 1e-9
        out.append(a + i[keep][:, None] * (b - a) + j[keep][:, None] * (c - a))
    return np.unique(np.concatenate(out).round(6), axis=0)


def _origin(element) -> np.ndarray:
    """The 4x4 ``<origin>`` of a URDF element (identity without one)."""
    origin = element.find("origin")
    attributes = {} if origin is None else origin.attrib
    values = lambda key: [float(v) for v in attributes.get(key, "0 0 0").split()]
    return make_transform(rpy_to_matrix(values("rpy")), values("xyz"))


def load_geometry(urdf_path: Path = URDF_PATH, spacing: float = SPACING) -> dict[str, np.ndarray]:
    """{link: (P, 3) surface samples in the link frame} for every link with collision
    elements (meshes are looked up by file name next to the URDF)."""
    points = {}
    for link in ET.parse(urdf_path).getroot().findall("link"):
        parts = []
        for collision in link.findall("collision"):
            shape = collision.find("geometry")[0]
            if shape.tag == "mesh":
                triangles = read_stl(urdf_path.parent / Path(shape.get("filename")).name)
            elif shape.tag == "box":
                triangles = box_triangles([float(v) for v in shape.get("size").split()])
            else:
                raise ValueError(f"{link.get('name')}: unsupported collision {shape.tag}")
            p = surface_points(triangles, spacing)
            t = _origin(collision)
            parts.append(p @ t[:3, :3].T + t[:3, 3])
        if parts:
            points[link.get("name")] = np.concatenate(parts)
    return points


POINTS = load_geometry()


def mesh_clearances(
    q: np.ndarray, scene: mc.Scene, skip_links: Sequence[str] = mc.SKIP_LINKS
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Smallest signed distance (m, negative: a sample inside an obstacle) of the collision
    geometry to the scene, (B,), and which link and obstacle, for configurations ``q``
    (B, 7 or 8)."""
    q = np.atleast_2d(np.asarray(q, np.float64))
    best = np.full(len(q), np.inf)
    where = [""] * len(q)
    if not len(scene.names):
        return best, tuple(where)
    poses = mc.PANDA.poses(q)
    for link, p in POINTS.items():
        if link in skip_links:
            continue
        t = poses[link]
        world = np.einsum("bij,pj->bpi", t[:, :3, :3], p) + t[:, None, :3, 3]
        d = scene.distances(world, np.zeros(world.shape[:2])).min(axis=1)  # (B, N)
        closest = d.min(axis=1)
        for b in np.nonzero(closest < best)[0]:
            where[b] = f"{link}-{scene.names[int(d[b].argmin())]}"
        best = np.minimum(best, closest)
    return best, tuple(where)


def mesh_valid(q: np.ndarray, scene: mc.Scene) -> np.ndarray:
    """(B,) bool: no surface sample of a checked link inside an obstacle."""
    return mesh_clearances(q, scene)[0] >= 0
