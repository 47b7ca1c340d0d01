"""Spheres fitted to URDF collision geometry (boxes, cylinders, capsules, meshes): the cover_*
functions and :func:`fit_mesh_spheres`, used by :meth:`RobotSpheres.from_urdf`."""

from __future__ import annotations

import math
import pathlib
import warnings
from collections.abc import Sequence
from functools import partial

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np


def _origin_matrix(origin) -> np.ndarray:
    attrib = {} if origin is None else origin.attrib
    xyz, rpy = ([float(v) for v in attrib.get(key, "0 0 0").split()] for key in ("xyz", "rpy"))
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


def fit_mesh_spheres(
    mesh,
    max_spheres: int = 12,
    tolerance: float = 0.01,
    padding: float = 1e-3,
    *,
    n_samples: int = 4000,
    steps: int = 400,
) -> tuple[np.ndarray, np.ndarray]:
    """Few spheres that contain a closed trimesh ``mesh`` and reach little beyond it.

    A sphere (c, r) reaches at most ``r + sdf(c)`` beyond the mesh (``sdf``: signed distance,
    negative inside; 1-Lipschitz), so the fit minimises the *overshoot bound*
    ``t = max_p min_k |p - c_k| + sdf(c_k)`` over surface samples ``p``: every sample then lies
    in a sphere reaching at most ``t`` outside. Spheres centred near the surface (a k-means
    fit of the surface points) bulge out by about their radius; these sit deep inside instead.

    1. ``sdf`` on a grid (distance to 40k surface samples, sign from the nearest sample's normal).
    2. Greedy set cover: interior grid points as candidate centres, the smallest ``t`` (bisection)
       for which greedily picking the candidate covering most uncovered samples needs <= k;
       three starts from differently thinned candidate sets, the best result is kept.
    3. Gradient descent (Adam, trilinear ``sdf``) on the centres, minimising a soft max-min of
       the bound with a sharpening temperature; the best iterate is kept.
    4. Radii: each sample (vertices, ``n_samples`` and the 40k sdf samples) goes to the sphere
       with the smallest bound term; a radius is its farthest sample plus ``padding`` (the
       samples are covered exactly, ``padding`` bridges the ~2 mm gaps between them). The bound
       is re-measured with the exact ``sdf`` (trimesh).

    k grows from the smallest count whose greedy bound is within 1.5 ``tolerance`` until the
    bound is <= ``tolerance`` (every sphere then reaches at most ``tolerance + padding`` out) or
    k = ``max_spheres`` (then the lowest bound found wins). Sharp rims cost many spheres (one
    with overshoot t covers about 2.8 t of a right-angled edge), so on the Panda's links the
    bound is 1.2-1.9 cm with 11-12 spheres (2.6 cm on link0; see :func:`mesh_overshoot`).

    Args:
        mesh: a watertight ``trimesh.Trimesh`` (outward normals).
        max_spheres: most spheres to use.
        tolerance: overshoot bound (m) at which fewer spheres are enough.
        padding: added to every radius (m), also to the bound.
        n_samples: surface samples (plus the vertices) that must be covered.
        steps: gradient steps per sphere count.

    Returns:
        centres (k, 3) and radii (k,), deterministic.
    """
    points = mesh_surface_points(mesh, n_samples)
    fit = _MeshFit(mesh, points)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    k = min(fit.count_for(1.5 * tolerance), max_spheres)
    while True:
        centers, radii, bound = fit.solve(k, steps)
        if best is None or bound < best[0]:
            best = (bound, centers, radii)
        if bound <= tolerance or k >= max_spheres:
            break
        k += 1
    _, centers, radii = best
    return centers, radii + padding


def mesh_overshoot(mesh, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Per sphere (k,): how far it may reach beyond ``mesh``, ``r + sdf(c)`` (exact sdf)."""
    return np.asarray(radii) + _exact_sdf(mesh, np.asarray(centers, np.float64))


def _exact_sdf(mesh, x: np.ndarray) -> np.ndarray:
    import trimesh

    return -trimesh.proximity.signed_distance(mesh, x)  # trimesh: positive inside


def _area_samples(mesh, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` area-uniform surface samples (count, 3) and their face normals (count, 3)."""
    rng = np.random.default_rng(seed)
    triangles = np.asarray(mesh.triangles, np.float64)
    areas = np.asarray(mesh.area_faces, np.float64)
    face = rng.choice(len(triangles), size=count, p=areas / areas.sum())
    u, v = rng.random(count), rng.random(count)
    flip = u + v > 1
    u, v = np.where(flip, 1 - u, u), np.where(flip, 1 - v, v)
    tri = triangles[face]
    p = tri[:, 0] + u[:, None] * (tri[:, 1] - tri[:, 0]) + v[:, None] * (tri[:, 2] - tri[:, 0])
    return p, np.asarray(mesh.face_normals, np.float64)[face]


LR = 5e-3


class _MeshFit:
    """State shared by the sphere counts tried for one mesh: sdf grid, candidates, samples."""

    def __init__(self, mesh, points: np.ndarray, starts: int = 3, grid_cells: float = 2e5) -> None:
        from scipy.spatial import cKDTree

        self.mesh, self.points = mesh, points
        dense, normals = _area_samples(mesh, 40000, 1)
        lo, hi = mesh.bounds[0], mesh.bounds[1]
        step = max(float(np.prod(hi - lo + 0.02) / grid_cells) ** (1 / 3), 5e-4)
        margin = 0.01 + 2 * step  # centres may drift a little outside
        lo, hi = lo - margin, hi + margin
        shape = np.ceil((hi - lo) / step).astype(int) + 1
        axes = [lo[i] + step * np.arange(shape[i]) for i in range(3)]
        grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
        dist, near = cKDTree(dense).query(grid)
        outside = np.sum((grid - dense[near]) * normals[near], axis=1) >= 0
        sdf = np.where(outside, dist, -dist)
        self.lo, self.step, self.sdf = lo, step, sdf.reshape(shape)
        self.dense = dense  # radii also cover these, so padding only bridges ~2 mm gaps
        self._grid, self._grid_sdf = grid, sdf
        self._inside = np.flatnonzero(sdf < 0)
        self._few = points[:: max(1, len(points) // 2500)]
        self.starts = starts
        self._terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def terms(self, offset: int) -> tuple[np.ndarray, np.ndarray]:
        """Candidate centres (C, 3): every few-th interior grid point from ``offset``, and
        their bound terms ``|p - c| + sdf(c)`` (C, P') against thinned samples."""
        if offset not in self._terms:
            stride = max(1, len(self._inside) // 4000)
            inside = self._inside[offset % stride :: stride]
            cand = self._grid[inside]
            d = np.linalg.norm(self._few[None] - cand[:, None], axis=2)
            self._terms[offset] = (cand, (d + self._grid_sdf[inside][:, None]).astype(np.float32))
        return self._terms[offset]

    @staticmethod
    def _greedy(terms: np.ndarray, t: float, k: int) -> list[int] | None:
        """Greedy cover of the thinned samples by <= k candidates at bound t, or None."""
        cover = terms <= t
        count = cover.sum(axis=1)
        uncovered = np.ones(cover.shape[1], bool)
        chosen: list[int] = []
        while uncovered.any() and len(chosen) < k:
            j = int(np.argmax(count))
            chosen.append(j)
            new = cover[j] & uncovered
            count -= cover[:, new].sum(axis=1)
            uncovered &= ~new
        return None if uncovered.any() else chosen

    def count_for(self, t: float) -> int:
        cand, terms = self.terms(0)
        chosen = self._greedy(terms, t, len(cand))
        return len(chosen) if chosen is not None else len(cand)

    def solve(self, k: int, steps: int) -> tuple[np.ndarray, np.ndarray, float]:
        """Best of ``starts`` greedy + descent fits with <= k spheres: centres, radii, bound."""
        fits = (self._solve_from(k, steps, offset) for offset in range(self.starts))
        return min(fits, key=lambda fit: fit[2])

    def _solve_from(self, k: int, steps: int, offset: int):
        cand, g = self.terms(offset)
        lo, hi = float(g.min(axis=0).max()), float(g.max(axis=1).min())
        chosen = [int(np.argmin(g.max(axis=1)))]  # one sphere always works at hi
        for _ in range(14):  # bisection on t
            t = 0.5 * (lo + hi)
            found = self._greedy(g, t, k)
            if found is None:
                lo = t
            else:
                hi, chosen = t, found
        centers = _descend(cand[chosen], self.points, self.sdf, self.lo, self.step, steps, LR)
        centers = np.asarray(centers, np.float64)
        sdf = _exact_sdf(self.mesh, centers)
        covered = np.concatenate([self.points, self.dense])
        dist = np.linalg.norm(covered[:, None] - centers[None], axis=2)  # (P, k)
        owner = np.argmin(dist + sdf[None], axis=1)
        keep = np.unique(owner)
        radii = np.asarray([dist[owner == j, j].max() for j in keep])
        return centers[keep], radii, float(np.max(radii + sdf[keep]))


@partial(jax.jit, static_argnames=("step", "steps"))
def _descend(
    centers: jax.Array,
    points: jax.Array,
    sdf: jax.Array,
    lo: jax.Array,
    step: float,
    steps: int,
    lr: float = 2e-3,
) -> jax.Array:
    """Adam on centres (k, 3) minimising the soft max over points (P, 3) of the soft min over
    spheres of ``|p - c| + sdf(c)``; returns the centres with the lowest hard bound."""

    def sdf_at(c):
        u = (c - lo) / step
        return jax.scipy.ndimage.map_coordinates(sdf, list(u.T), order=1, mode="nearest")

    def terms(c):
        return jnp.linalg.norm(points[:, None] - c[None], axis=2) + sdf_at(c)[None]

    def soft(c, beta):
        inner = -jax.nn.logsumexp(-beta * terms(c), axis=1) / beta
        return jax.nn.logsumexp(beta * inner) / beta

    def body(carry, i):
        c, m, v, best_c, best_t = carry
        frac = i / steps
        beta = 300.0 * 30.0**frac  # 1/m: from ~3 mm to ~0.1 mm smoothing
        rate = lr * (0.02 + 0.98 * 0.5 * (1 + jnp.cos(jnp.pi * frac)))
        grad = jax.grad(soft)(c, beta)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        n = i + 1.0
        c = c - rate * (m / (1 - 0.9**n)) / (jnp.sqrt(v / (1 - 0.999**n)) + 1e-12)
        t = terms(c).min(axis=1).max()
        better = t < best_t
        return (c, m, v, jnp.where(better, c, best_c), jnp.where(better, t, best_t)), None

    zeros = jnp.zeros_like(centers)
    start = (centers, zeros, zeros, centers, terms(centers).min(axis=1).max())
    (_, _, _, best, _), _ = jax.lax.scan(body, start, jnp.arange(steps, dtype=centers.dtype))
    return best


def _cover_radii(points: np.ndarray, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
    """Radii so that every point is inside the sphere it is deepest in (by current radii)."""
    d = np.linalg.norm(points[:, None] - centers[None], axis=2)
    assign = np.argmin(d - radii, axis=1)
    return np.asarray(
        [d[assign == j, j].max() if np.any(assign == j) else 0.0 for j in range(len(centers))]
    )


def mesh_surface_points(mesh, count: int = 4000, seed: int = 0) -> np.ndarray:
    """Vertices plus ``count`` area-uniform surface samples of a trimesh mesh (deterministic)."""
    samples, _ = _area_samples(mesh, count, seed)
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


def _load_mesh(shape, dirs: Sequence[pathlib.Path]):
    """The trimesh of a URDF ``<mesh>`` element (its ``scale`` applied), None when its file is
    not found in ``dirs`` (see :func:`_resolve_mesh`)."""
    path = _resolve_mesh(shape.get("filename", ""), dirs)
    if path is None:
        return None
    import trimesh

    mesh = trimesh.load(path, force="mesh")
    scale = shape.get("scale")
    if scale:
        mesh.apply_scale([float(s) for s in scale.split()])
    return mesh


def collision_mesh_points(
    urdf_path: str | pathlib.Path,
    link: str,
    package_dirs: Sequence[str | pathlib.Path] = (),
    count: int = 4000,
) -> np.ndarray:
    """(P, 3) points of ``link``'s collision meshes in the link frame: each mesh's vertices
    and ``count`` area-uniform surface samples (:func:`mesh_surface_points`), the
    ``<collision>`` origins applied; meshes looked up as for
    :meth:`~pyroki_ros.collision.RobotSpheres.from_urdf`. ValueError for a mesh not found."""
    import xml.etree.ElementTree as ET

    urdf_path = pathlib.Path(urdf_path)
    dirs = [pathlib.Path(d) for d in package_dirs] + [urdf_path.resolve().parent]
    out = [np.zeros((0, 3))]
    for element in ET.fromstring(urdf_path.read_text()).findall(f"link[@name='{link}']/collision"):
        shape = element.find("geometry/mesh")
        if shape is None:
            continue
        mesh = _load_mesh(shape, dirs)
        if mesh is None:
            raise ValueError(f"link '{link}': collision mesh '{shape.get('filename')}' not found")
        origin = _origin_matrix(element.find("origin"))
        out.append(mesh_surface_points(mesh, count) @ origin[:3, :3].T + origin[:3, 3])
    return np.concatenate(out)


def covering_radii(
    points: np.ndarray, centers: np.ndarray, radii: np.ndarray, padding: float = 0.0
) -> np.ndarray:
    """(k,) radii at least ``radii`` so that every point of ``points`` (P, 3) lies ``padding``
    inside the sphere it is deepest in (spheres ``centers`` (k, 3), ``radii`` (k,)): the
    fits' own rule for their radii, applied to a given set of spheres."""
    radii = np.asarray(radii, np.float64)
    cover = _cover_radii(np.asarray(points, np.float64), np.asarray(centers, np.float64), radii)
    return np.where(cover > 0, np.maximum(radii, cover + padding), radii)


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
        mesh = _load_mesh(shape, dirs)
        if mesh is None:
            warnings.warn(
                f"link '{link}': collision mesh '{shape.get('filename', '')}' not found; its "
                "geometry is skipped",
                stacklevel=3,
            )
            return np.zeros((0, 3)), np.zeros((0,))
        return fit_mesh_spheres(mesh, spheres_per_mesh, tolerance, padding)
    warnings.warn(f"link '{link}': unsupported collision geometry <{tag}> skipped", stacklevel=3)
    return np.zeros((0, 3)), np.zeros((0,))
