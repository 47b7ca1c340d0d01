"""Spheres fitted to URDF collision geometry (boxes, cylinders, capsules, meshes): the cover_*
functions and :func:`fit_spheres`, used by :meth:`RobotSpheres.from_urdf`."""

from __future__ import annotations

import math
import pathlib
import warnings
from collections.abc import Sequence

import jaxlie
import numpy as np


def _origin_matrix(origin) -> np.ndarray:
    xyz = [
        float(v) for v in (origin.get("xyz", "0 0 0") if origin is not None else "0 0 0").split()
    ]
    rpy = [
        float(v) for v in (origin.get("rpy", "0 0 0") if origin is not None else "0 0 0").split()
    ]
    t = np.eye(4)
    t[:3, :3] = np.asarray(jaxlie.SO3.from_rpy_radians(*rpy).as_matrix(), np.float64)
    t[:3, 3] = xyz
    return t


def _float_attr(shape, attribute: str, link: str) -> np.ndarray:
    text = shape.get(attribute)
    if text is None:
        raise ValueError(f"link '{link}': <{shape.tag}> has no {attribute} attribute")
    values = np.asarray([float(v) for v in text.split()], np.float64)
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"link '{link}': <{shape.tag} {attribute}='{text}'> is invalid")
    return values


def cover_box(
    size: Sequence[float], max_spheres: int = 8, tolerance: float = 0.01
) -> tuple[np.ndarray, np.ndarray]:
    """Spheres whose union contains the axis-aligned box of full ``size`` centred at 0.

    The box is split into a grid of equal cells, each covered by its circumscribed sphere;
    the longest cell dimension gets one more cell while a sphere reaches more than
    ``tolerance`` beyond the box's thinnest half-size and the count stays <= ``max_spheres``.
    Returns centres (n, 3) and radii (n,).
    """
    size = np.asarray(size, np.float64)
    counts = np.ones(3, int)
    while True:
        cell = size / counts
        if 0.5 * np.linalg.norm(cell) - 0.5 * size.min() <= tolerance:
            break
        axis = int(np.argmax(cell))
        trial = counts.copy()
        trial[axis] += 1
        if np.prod(trial) > max_spheres:
            break
        counts = trial
    cell = size / counts
    axes = [(np.arange(n) + 0.5) * c - s / 2 for n, c, s in zip(counts, cell, size)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, 3)
    return grid, np.full(len(grid), 0.5 * np.linalg.norm(cell))


def cover_cylinder(
    radius: float, length: float, max_spheres: int = 8, tolerance: float = 0.01
) -> tuple[np.ndarray, np.ndarray]:
    """Spheres containing a cylinder along z centred at 0: equal slabs along the axis, each
    covered by its circumscribed sphere ``sqrt(radius^2 + (slab / 2)^2)``."""
    n = 1
    while (
        n < max_spheres
        and math.hypot(radius, length / (2 * n)) - min(radius, length / 2) > tolerance
    ):
        n += 1
    z = (np.arange(n) + 0.5) * length / n - length / 2
    centers = np.stack([np.zeros(n), np.zeros(n), z], axis=1)
    return centers, np.full(n, math.hypot(radius, length / (2 * n)))


def cover_capsule(
    radius: float, length: float, max_spheres: int = 8, tolerance: float = 0.01
) -> tuple[np.ndarray, np.ndarray]:
    """Spheres containing a capsule along z (cylinder part ``length``, caps of ``radius``):
    ``n`` centres evenly spaced on the axis segment from -length/2 to length/2, radius
    ``sqrt(radius^2 + (spacing / 2)^2)`` (every point within ``radius`` of the segment is then
    inside one of them)."""
    n = 1
    while n < max_spheres and math.hypot(radius, length / (2 * max(n - 1, 1))) - radius > tolerance:
        n += 1
    if n == 1:  # one sphere at the middle must reach the cap ends
        return np.zeros((1, 3)), np.asarray([radius + length / 2])
    z = np.linspace(-length / 2, length / 2, n)
    centers = np.stack([np.zeros(n), np.zeros(n), z], axis=1)
    return centers, np.full(n, math.hypot(radius, length / (2 * (n - 1))))


def fit_spheres(
    points: np.ndarray, n_spheres: int, padding: float = 0.0, rounds: int = 20
) -> tuple[np.ndarray, np.ndarray]:
    """At most ``n_spheres`` spheres whose union contains ``points`` (m, 3); deterministic.

    Starts from k-means seeded at quantiles along the principal axis. Then, for ``rounds``
    rounds, every point goes to the sphere whose surface it is deepest inside, and each
    sphere moves to the (approximate) smallest ball around its points; the set with the
    smallest total volume wins. Radii reach the farthest assigned point, plus ``padding``.
    Returns centres (k, 3) and radii (k,).
    """
    points = np.asarray(points, np.float64)
    mean = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - mean, full_matrices=False)
    order = np.argsort((points - mean) @ vt[0])
    seeds = order[((np.arange(n_spheres) + 0.5) / n_spheres * len(points)).astype(int)]
    centers = points[seeds]
    for _ in range(50):  # k-means
        assign = np.argmin(_distances(points, centers), axis=1)
        new = np.asarray(
            [
                points[assign == j].mean(0) if np.any(assign == j) else c
                for j, c in enumerate(centers)
            ]
        )
        if np.allclose(new, centers):
            break
        centers = new
    radii = _cover_radii(points, centers, np.zeros(len(centers)))
    best = (np.sum(radii**3), centers, radii)
    for _ in range(rounds):
        assign = np.argmin(_distances(points, centers) - radii, axis=1)
        centers = np.asarray(
            [_small_ball(points[assign == j]) for j in range(len(centers)) if np.any(assign == j)]
        )
        radii = _cover_radii(points, centers, _cover_radii(points, centers, np.zeros(len(centers))))
        if np.sum(radii**3) < best[0]:
            best = (np.sum(radii**3), centers, radii)
    _, centers, radii = best
    keep = radii > 0
    return centers[keep], radii[keep] + padding


def _distances(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    return np.linalg.norm(points[:, None] - centers[None], axis=2)


def _cover_radii(points: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Radii so that every point is inside the sphere it is deepest in (by current radii)."""
    d = _distances(points, centers)
    assign = np.argmin(d - radii, axis=1)
    return np.asarray(
        [d[assign == j, j].max() if np.any(assign == j) else 0.0 for j in range(len(centers))]
    )


def _small_ball(points: np.ndarray, iterations: int = 200) -> np.ndarray:
    """Centre of an approximate minimum enclosing ball (Badoiu-Clarkson iteration)."""
    c = points.mean(axis=0)
    for i in range(iterations):
        far = points[np.argmax(np.sum((points - c) ** 2, axis=1))]
        c = c + (far - c) / (i + 2)
    return c


def mesh_surface_points(mesh, count: int = 4000, seed: int = 0) -> np.ndarray:
    """Vertices plus ``count`` area-uniform surface samples of a trimesh mesh (deterministic)."""
    rng = np.random.default_rng(seed)
    triangles = np.asarray(mesh.triangles, np.float64)
    areas = np.asarray(mesh.area_faces, np.float64)
    face = rng.choice(len(triangles), size=count, p=areas / areas.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1
    u, v = np.where(flip, 1 - u, u), np.where(flip, 1 - v, v)
    tri = triangles[face]
    samples = (
        tri[:, 0] + u[:, None] * (tri[:, 1] - tri[:, 0]) + v[:, None] * (tri[:, 2] - tri[:, 0])
    )
    return np.concatenate([np.asarray(mesh.vertices, np.float64), samples])


def _resolve_mesh(filename: str, dirs: Sequence[pathlib.Path]) -> pathlib.Path | None:
    candidates = []
    if filename.startswith("package://"):
        rest = filename[len("package://") :]
        tail = rest.partition("/")[2]
        for d in dirs:
            candidates += [d / rest, d / tail]
    else:
        path = filename.removeprefix("file://")
        candidates.append(pathlib.Path(path))
        candidates += [d / path for d in dirs if not pathlib.Path(path).is_absolute()]
    return next((c for c in candidates if c.is_file()), None)


def _cover_geometry(shape, link, dirs, *, spheres_per_mesh, max_spheres, tolerance, padding):
    tag = shape.tag
    if tag == "sphere":
        r = _float_attr(shape, "radius", link)[0]
        return np.zeros((1, 3)), np.asarray([r])
    if tag == "box":
        return cover_box(_float_attr(shape, "size", link), max_spheres, tolerance)
    if tag == "cylinder":
        r, length = _float_attr(shape, "radius", link)[0], _float_attr(shape, "length", link)[0]
        return cover_cylinder(r, length, max_spheres, tolerance)
    if tag == "capsule":
        r, length = _float_attr(shape, "radius", link)[0], _float_attr(shape, "length", link)[0]
        return cover_capsule(r, length, max_spheres, tolerance)
    if tag == "mesh":
        filename = shape.get("filename", "")
        path = _resolve_mesh(filename, dirs)
        if path is None:
            warnings.warn(
                f"link '{link}': collision mesh '{filename}' not found; its geometry is skipped",
                stacklevel=3,
            )
            return np.zeros((0, 3)), np.zeros((0,))
        import trimesh

        mesh = trimesh.load(path, force="mesh")
        scale = shape.get("scale")
        if scale:
            mesh.apply_scale([float(s) for s in scale.split()])
        return fit_spheres(mesh_surface_points(mesh), spheres_per_mesh, padding)
    warnings.warn(f"link '{link}': unsupported collision geometry <{tag}> skipped", stacklevel=3)
    return np.zeros((0, 3)), np.zeros((0,))
