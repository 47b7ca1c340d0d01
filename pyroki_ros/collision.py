"""Collision model: the robot as spheres fixed to its links, the world as primitive obstacles.

Everything is expressed in the robot's root frame (REP-103: x forward, y left, z up, metres).
The robot is approximated by a union of spheres per link (from URDF collision geometry, from a
config mapping, or from a bundled set fitted offline); obstacles are spheres, capsules,
oriented boxes and half-spaces. All distances are *signed*: positive is clearance between
the two surfaces, negative is penetration depth (exact for sphere-sphere, sphere-capsule,
sphere-half-space; for boxes the exact signed distance of the sphere centre minus its radius).

The distance functions are pure JAX, batch over leading dimensions and are safe under
``jit``, ``vmap``, ``grad`` and ``jacfwd``: norms use a double ``where`` so a zero distance
gives a zero gradient instead of NaN.

Compile once: :meth:`World.padded` rounds the obstacle count of every kind up to a bucket
with inert dummies (far away, zero size), so a jitted planner sees the same shapes for
different scenes.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import os
import pathlib
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.model import kinematics as k
from pyroki_ros.model.robot import FIXED, Robot

# Obstacle-count buckets of World.padded; above the last, counts round up to its multiples.
DEFAULT_BUCKETS = (0, 4, 16, 64)
# One field per obstacle kind whose length is that kind's count.
_COUNT_FIELDS = ("sphere_radii", "capsule_radii", "box_half_extents", "halfspace_offsets")
# Where dummy obstacles live (m). Far enough that no robot sphere reaches them, small enough
# that squares stay finite in float32.
FAR = 1.0e6


def _static(**kwargs):
    return dataclasses.field(metadata={"static": True}, **kwargs)


# --------------------------------------------------------------------------------------------
# The robot
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RobotSpheres:
    """``S`` spheres fixed to the robot's links, and the ``P`` sphere pairs checked for
    self-collision.

    Attributes:
        centers: (S, 3) sphere centres in the frame of their link, m.
        radii: (S,) radii, m, > 0.
        self_pairs: (P, 2) int32 sphere indices ``(i, j)``, ``i < j``: spheres on links of
            different bodies that are not adjacent and not ignored (see
            :func:`self_collision_pairs`). An array, not metadata, so sphere sets with the
            same number of pairs share a compiled function.
        link_indices: (S,) static, index in ``robot.link_names`` of each sphere's link.
        link_names: (S,) static, each sphere's link name.
        ignore: static, the link-name pairs excluded from self-collision, sorted.
    """

    centers: jax.Array
    radii: jax.Array
    self_pairs: jax.Array
    link_indices: tuple[int, ...] = _static()
    link_names: tuple[str, ...] = _static()
    ignore: tuple[tuple[str, str], ...] = _static(default=())

    @property
    def n_spheres(self) -> int:
        return self.centers.shape[0]

    @property
    def n_pairs(self) -> int:
        return self.self_pairs.shape[0]

    # --- constructors ----------------------------------------------------------------------

    @staticmethod
    def create(
        robot: Robot,
        link_names: Sequence[str],
        centers: Any,
        radii: Any,
        ignore: Iterable[Sequence[str]] = (),
    ) -> RobotSpheres:
        """Spheres from per-sphere link names, centres (S, 3) in the link frame and radii (S,).

        Raises:
            ValueError: unknown link (named), wrong shapes, non-finite values, radius <= 0,
                or an ignore entry that is not a pair of known links.
        """
        link_names = tuple(str(n) for n in link_names)
        centers = np.asarray(centers, np.float64)
        if len(link_names) == 0:  # an empty list has no trailing axis of 3
            centers = centers.reshape(0, 3)
        radii = np.asarray(radii, np.float64)
        if centers.shape != (len(link_names), 3) or radii.shape != (len(link_names),):
            raise ValueError(
                f"need centers ({len(link_names)}, 3) and radii ({len(link_names)},) for "
                f"{len(link_names)} spheres; got {centers.shape} and {radii.shape}"
            )
        for i, name in enumerate(link_names):
            if not (np.all(np.isfinite(centers[i])) and np.isfinite(radii[i])):
                raise ValueError(f"sphere {i} on link '{name}' is not finite")
            if radii[i] <= 0:
                raise ValueError(f"sphere {i} on link '{name}' has radius {radii[i]} <= 0")
        link_indices = tuple(robot.link_index(n) for n in link_names)
        ignore = _check_ignore(robot, ignore)
        pairs = self_collision_pairs(robot, link_indices, ignore)
        return RobotSpheres(
            centers=jnp.asarray(centers, robot.dtype),
            radii=jnp.asarray(radii, robot.dtype),
            self_pairs=jnp.asarray(np.asarray(pairs, np.int32).reshape(-1, 2)),
            link_indices=link_indices,
            link_names=link_names,
            ignore=ignore,
        )

    @staticmethod
    def from_config(
        robot: Robot,
        mapping: Mapping[str, Sequence[Sequence[float]]],
        ignore: Iterable[Sequence[str]] = (),
    ) -> RobotSpheres:
        """Spheres from ``{link_name: [[x, y, z, r], ...]}`` (link frame, m), e.g. from YAML.

        Raises:
            ValueError: an unknown link (named), an entry that is not 4 numbers, a radius that
                is not finite and > 0.
        """
        names, centers, radii = [], [], []
        for link, spheres in mapping.items():
            if link not in robot.link_names:
                robot.link_index(str(link))  # raises, naming the link and the robot's links
            rows = np.asarray(spheres if len(spheres) else np.zeros((0, 4)), np.float64)
            if rows.ndim != 2 or rows.shape[1] != 4:
                raise ValueError(
                    f"link '{link}': spheres must be a list of [x, y, z, r], got {spheres!r}"
                )
            names += [link] * len(rows)
            centers.append(rows[:, :3])
            radii.append(rows[:, 3])
        centers_a = np.concatenate(centers) if centers else np.zeros((0, 3))
        radii_a = np.concatenate(radii) if radii else np.zeros((0,))
        return RobotSpheres.create(robot, names, centers_a, radii_a, ignore)

    @staticmethod
    def from_yaml(
        robot: Robot, path: str | os.PathLike, ignore: Iterable[Sequence[str]] = ()
    ) -> RobotSpheres:
        """Spheres from a file with ``spheres: {link: [[x, y, z, r], ...]}`` and an optional
        ``ignore: [[link_a, link_b], ...]``; ``ignore`` here adds to the file's list.

        Reads JSON-style (flow) YAML without PyYAML, so the core needs no YAML library.
        """
        data = _load_yaml(pathlib.Path(path))
        extra = [tuple(p) for p in ignore]
        return RobotSpheres.from_config(
            robot, data["spheres"], [tuple(p) for p in data.get("ignore", [])] + extra
        )

    @staticmethod
    def embedded(
        name: str, robot: Robot | None = None, ignore: Iterable[Sequence[str]] = ()
    ) -> RobotSpheres:
        """The sphere set bundled for an embedded robot (``pyroki_ros/robots/<name>_spheres.yaml``,
        made by ``tools/fit_collision_spheres.py``), with its default self-collision ignore
        list plus ``ignore``. ``robot`` defaults to the embedded URDF's model.
        """
        from pyroki_ros.robots import urdf_path

        path = urdf_path(name).with_name(f"{name}_spheres.yaml")
        if not path.is_file():
            raise ValueError(f"no bundled collision spheres for robot {name!r}")
        if robot is None:
            robot = Robot.from_urdf(urdf_path(name))
        return RobotSpheres.from_yaml(robot, path, ignore)

    @staticmethod
    def from_urdf(
        robot: Robot,
        urdf_source: str | os.PathLike,
        *,
        package_dirs: Sequence[str | os.PathLike] = (),
        ignore: Iterable[Sequence[str]] = (),
        spheres_per_mesh: int = 4,
        max_spheres_per_primitive: int = 8,
        tolerance: float = 0.01,
        mesh_padding: float = 1e-3,
    ) -> RobotSpheres:
        """Spheres covering the URDF's ``<collision>`` geometry, link by link.

        * sphere: itself;
        * box, cylinder, capsule: split into cells along their long dimensions, each covered by
          its circumscribed sphere, so the union *contains* the shape. Cells are split until a
          sphere over-reaches the shape's thinnest half-size by at most ``tolerance`` (m), or
          ``max_spheres_per_primitive`` is reached;
        * mesh (needs trimesh): ``spheres_per_mesh`` spheres fitted to the surface (k-means
          seeded along the principal axis, radius = farthest assigned surface sample plus
          ``mesh_padding``). A mesh file that cannot be found is skipped with a warning naming
          the link. ``package://pkg/rest`` is looked up as ``<dir>/pkg/rest`` and
          ``<dir>/rest`` for each of ``package_dirs``; relative paths and ``file://`` also
          relative to the URDF's folder.

        Links of ``urdf_source`` missing from ``robot`` are skipped (``robot`` may be a
        subtree); the link frames are the URDF link frames.
        """
        import xml.etree.ElementTree as ET

        if isinstance(urdf_source, os.PathLike) or not str(urdf_source).lstrip().startswith("<"):
            base = pathlib.Path(urdf_source).resolve().parent
            root = ET.fromstring(pathlib.Path(urdf_source).read_text())
        else:
            base, root = None, ET.fromstring(str(urdf_source))
        dirs = [pathlib.Path(d) for d in package_dirs] + ([base] if base else [])
        names: list[str] = []
        centers: list[np.ndarray] = []
        radii: list[np.ndarray] = []
        for link in root.findall("link"):
            link_name = link.get("name")
            if link_name not in robot.link_names:
                continue
            for collision in link.findall("collision"):
                geometry = collision.find("geometry")
                shape = None if geometry is None or len(geometry) == 0 else geometry[0]
                if shape is None:
                    continue
                origin = _origin_matrix(collision.find("origin"))
                c, r = _cover_geometry(
                    shape,
                    link_name,
                    dirs,
                    spheres_per_mesh=spheres_per_mesh,
                    max_spheres=max_spheres_per_primitive,
                    tolerance=tolerance,
                    padding=mesh_padding,
                )
                if len(r) == 0:
                    continue
                names += [link_name] * len(r)
                centers.append(c @ origin[:3, :3].T + origin[:3, 3])
                radii.append(r)
        return RobotSpheres.create(
            robot,
            names,
            np.concatenate(centers) if centers else np.zeros((0, 3)),
            np.concatenate(radii) if radii else np.zeros((0,)),
            ignore,
        )

    def to_config(self) -> dict[str, list[list[float]]]:
        """The inverse of :meth:`from_config`: ``{link: [[x, y, z, r], ...]}``."""
        out: dict[str, list[list[float]]] = {}
        rows = np.concatenate([np.asarray(self.centers), np.asarray(self.radii)[:, None]], axis=1)
        for name, row in zip(self.link_names, rows):
            out.setdefault(name, []).append([float(v) for v in row])
        return out


def bodies(robot: Robot) -> tuple[int, ...]:
    """Body id of every link: links joined by fixed joints form one rigid body, whose id is
    the index of its top link (the one moved by a non-fixed joint, or the root)."""
    body: list[int] = []
    for i, parent in enumerate(robot.parent_index):  # breadth-first: parents come first
        fixed_to_parent = parent >= 0 and robot.joint_type[i] == FIXED
        body.append(body[parent] if fixed_to_parent else i)
    return tuple(body)


def self_collision_pairs(
    robot: Robot, link_indices: Sequence[int], ignore: Iterable[Sequence[str]] = ()
) -> list[tuple[int, int]]:
    """Sphere pairs ``(i, j)``, ``i < j``, to check for self-collision.

    A pair is checked when its spheres are on different rigid bodies (see :func:`bodies`), the
    bodies are not adjacent (neither body's top link is moved by a joint whose parent link is
    on the other body) and the link pair is not in ``ignore``.
    """
    body = bodies(robot)
    adjacent = set()
    for i, parent in enumerate(robot.parent_index):
        if parent >= 0 and body[i] == i:
            adjacent.add(frozenset((i, body[parent])))
    ignored = {frozenset((robot.link_index(a), robot.link_index(b))) for a, b in ignore}
    pairs = []
    for i, li in enumerate(link_indices):
        for j in range(i + 1, len(link_indices)):
            lj = link_indices[j]
            bi, bj = body[li], body[lj]
            if bi == bj or frozenset((bi, bj)) in adjacent or frozenset((li, lj)) in ignored:
                continue
            pairs.append((i, j))
    return pairs


def _check_ignore(robot: Robot, ignore: Iterable[Sequence[str]]) -> tuple[tuple[str, str], ...]:
    out = set()
    for entry in ignore:
        entry = tuple(entry)
        if len(entry) != 2 or not all(isinstance(n, str) for n in entry):
            raise ValueError(f"an ignore entry must be a pair of link names, got {entry!r}")
        for n in entry:
            robot.link_index(n)  # ValueError naming an unknown link
        out.add(tuple(sorted(entry)))
    return tuple(sorted(out))


@dataclasses.dataclass(frozen=True)
class ContactRules:
    """Contacts that are not collisions (applied by :func:`checked_pairs`).

    Attributes:
        allowed: (link, obstacle name) or (link, link) pairs, either order, that may touch
            (a gripper and the object it holds, a link and the table it rests on).
        check_fixed_links: also check links that cannot move against the world (by default
            they are not: a robot mounted on a stand always touches it).
    """

    allowed: tuple[tuple[str, str], ...] = ()
    check_fixed_links: bool = False

    def __post_init__(self):
        pairs = tuple(tuple(entry) for entry in self.allowed)
        for entry in pairs:
            if len(entry) != 2 or not all(isinstance(n, str) and n for n in entry):
                raise ValueError(f"an allowed contact must be a pair of names, got {entry!r}")
        object.__setattr__(self, "allowed", pairs)


# The default rules: nothing allowed but the contacts of links that cannot move.
DEFAULT_CONTACTS = ContactRules()


def checked_pairs(
    robot: Robot,
    spheres: RobotSpheres,
    world: World,
    rules: ContactRules = DEFAULT_CONTACTS,
    moving: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Which contacts count as collisions: the one rule for planning, goal IK and checks.

    Not checked: (1) spheres on links that cannot move (no ``moving`` joint between them and
    the root: the root, links fixed to it, links whose joints are all held in this problem)
    against the world, unless ``rules.check_fixed_links`` (a robot standing on a table
    touches it, whatever the plan); pairs of two such spheres for self-collision (their
    distance cannot change); (2) the ``rules.allowed`` pairs.

    Args:
        moving: (n_joints,) bool, joints that may move; default all.

    Returns:
        world (S, O) bool over ``world``'s obstacles in its order, and self (P,) bool over
        ``spheres.self_pairs``: True where the pair is checked.

    Raises:
        ValueError: an allowed name that is neither a link nor an obstacle (or is both), or a
            pair of two obstacles.
    """
    links = np.asarray(spheres.link_indices, int)
    moving = np.ones(robot.n_joints, bool) if moving is None else np.asarray(moving, bool)
    q_index = np.asarray(robot.q_index)
    movable_link = np.array(
        [
            any(q_index[a] >= 0 and moving[q_index[a]] for a in robot.ancestors(i))
            for i in range(robot.n_links)
        ],
        bool,
    )
    movable = movable_link[links] if len(links) else np.zeros(0, bool)
    world_ok = np.ones((len(links), world.n_obstacles), bool)
    pairs = np.asarray(spheres.self_pairs, int).reshape(-1, 2)
    self_ok = np.ones(len(pairs), bool)
    if not rules.check_fixed_links:
        world_ok[~movable] = False
        self_ok &= movable[pairs[:, 0]] | movable[pairs[:, 1]]
    obstacle = {name: i for i, name in enumerate(world.names)}
    link_set = set(robot.link_names)
    for entry in rules.allowed:
        for name in entry:
            if name in link_set and name in obstacle:
                raise ValueError(f"allowed contact: '{name}' is both a link and an obstacle")
            if name not in link_set and name not in obstacle:
                raise ValueError(
                    f"allowed contact: '{name}' is neither a link of robot '{robot.name}' "
                    f"nor a named obstacle"
                )
        a, b = entry
        if a in obstacle and b in obstacle:
            raise ValueError(f"allowed contact ({a}, {b}) names two obstacles, no link")
        if a in obstacle:
            a, b = b, a
        on_a = links == robot.link_index(a)
        if b in obstacle:
            world_ok[on_a, obstacle[b]] = False
        else:
            on_b = links == robot.link_index(b)
            self_ok &= ~(
                (on_a[pairs[:, 0]] & on_b[pairs[:, 1]]) | (on_b[pairs[:, 0]] & on_a[pairs[:, 1]])
            )
    return world_ok, self_ok


def _load_yaml(path: pathlib.Path) -> dict:
    text = path.read_text()
    try:
        import yaml
    except ImportError:  # the bundled files are JSON-style YAML with '#' comment lines
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        return json.loads(body)
    return yaml.safe_load(text)


# --- covering URDF geometry -------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# The world
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class World:
    """Obstacles in the robot's root frame (m). Build with :meth:`create` (validates).

    Attributes:
        sphere_centers: (Ns, 3); sphere_radii: (Ns,).
        capsule_a, capsule_b: (Nc, 3) segment end points; capsule_radii: (Nc,).
        box_poses: (Nb, 7) wxyz_xyz, box frame in the root frame (unit quaternion);
        box_half_extents: (Nb, 3) half-sizes along the box axes.
        halfspace_normals: (Nh, 3) unit outward normals; halfspace_offsets: (Nh,). The
            obstacle is ``{x : n . x + d < 0}`` (a floor at z = 0: n = (0, 0, 1), d = 0).

    Distances come in this order along the obstacle axis: spheres, capsules, boxes,
    half-spaces (see :func:`world_distances`). ``names``: static, one per obstacle in that
    order (empty: unnamed), for allowed collisions and messages; :meth:`padded` drops them
    (the compiled programs never see names).
    """

    sphere_centers: jax.Array
    sphere_radii: jax.Array
    capsule_a: jax.Array
    capsule_b: jax.Array
    capsule_radii: jax.Array
    box_poses: jax.Array
    box_half_extents: jax.Array
    halfspace_normals: jax.Array
    halfspace_offsets: jax.Array
    names: tuple[str, ...] = _static(default=())

    @property
    def counts(self) -> tuple[int, int, int, int]:
        """(spheres, capsules, boxes, half-spaces), dummies included."""
        return (
            self.sphere_radii.shape[0],
            self.capsule_radii.shape[0],
            self.box_poses.shape[0],
            self.halfspace_offsets.shape[0],
        )

    @property
    def n_obstacles(self) -> int:
        return sum(self.counts)

    @staticmethod
    def create(
        *,
        sphere_centers: Any = None,
        sphere_radii: Any = None,
        capsule_a: Any = None,
        capsule_b: Any = None,
        capsule_radii: Any = None,
        box_poses: Any = None,
        box_half_extents: Any = None,
        halfspace_normals: Any = None,
        halfspace_offsets: Any = None,
        names: Sequence[str] | None = None,
        dtype: jnp.dtype = jnp.float32,
    ) -> World:
        """Validated obstacles; any kind may be left out. Half-space normals are normalised
        (``d`` scaled with them); box quaternions are normalised. ``names``: one distinct,
        non-empty name per obstacle, in the order spheres, capsules, boxes, half-spaces.

        Raises:
            ValueError: a kind given only in part, wrong shapes, NaN/inf, radii or half-extents
                <= 0, a zero normal or quaternion, names of the wrong count or repeated. The
                message names the field and index.
        """

        def get(name, value, tail):
            a = np.zeros((0, *tail)) if value is None else np.asarray(value, np.float64)
            if a.ndim == len(tail):  # a single obstacle
                a = a[None]
            if a.ndim != 1 + len(tail) or a.shape[1:] != tail:
                raise ValueError(
                    f"{name} must have shape (N, {', '.join(map(str, tail))}) "
                    f"or ({', '.join(map(str, tail))}); got {np.shape(value)}"
                    if tail
                    else f"{name} must have shape (N,); got {np.shape(value)}"
                )
            bad = np.flatnonzero(
                ~np.all(np.isfinite(a.reshape(len(a), int(np.prod(a.shape[1:])))), axis=1)
            )
            if len(bad):
                raise ValueError(f"{name}[{bad[0]}] is not finite (NaN or inf): {a[bad[0]]}")
            return a

        def group(kind, **fields):
            given = [n for n, (v, _) in fields.items() if v is not None]
            if given and len(given) != len(fields):
                missing = [n for n in fields if n not in given]
                raise ValueError(f"{kind}: {', '.join(given)} given without {', '.join(missing)}")
            arrays = {n: get(n, v, tail) for n, (v, tail) in fields.items()}
            sizes = {n: len(a) for n, a in arrays.items()}
            if len(set(sizes.values())) > 1:
                raise ValueError(f"{kind}: different counts {sizes}")
            return arrays

        def positive(name, a):
            bad = np.flatnonzero(~np.all(a.reshape(len(a), int(np.prod(a.shape[1:]))) > 0, axis=1))
            if len(bad):
                raise ValueError(f"{name}[{bad[0]}] must be > 0, got {a[bad[0]]}")

        s = group("spheres", sphere_centers=(sphere_centers, (3,)), sphere_radii=(sphere_radii, ()))
        c = group(
            "capsules",
            capsule_a=(capsule_a, (3,)),
            capsule_b=(capsule_b, (3,)),
            capsule_radii=(capsule_radii, ()),
        )
        b = group("boxes", box_poses=(box_poses, (7,)), box_half_extents=(box_half_extents, (3,)))
        h = group(
            "half-spaces",
            halfspace_normals=(halfspace_normals, (3,)),
            halfspace_offsets=(halfspace_offsets, ()),
        )
        positive("sphere_radii", s["sphere_radii"])
        positive("capsule_radii", c["capsule_radii"])
        positive("box_half_extents", b["box_half_extents"])
        poses = b["box_poses"].copy()
        qn = np.linalg.norm(poses[:, :4], axis=1)
        if np.any(qn < 1e-9):
            raise ValueError(f"box_poses[{np.argmax(qn < 1e-9)}] has a zero quaternion")
        poses[:, :4] /= qn[:, None] if len(qn) else 1.0
        nn = np.linalg.norm(h["halfspace_normals"], axis=1)
        if np.any(nn < 1e-9):
            raise ValueError(f"halfspace_normals[{np.argmax(nn < 1e-9)}] is zero")
        a = {**s, **c, **b, **h, "box_poses": poses}
        a["halfspace_normals"] = (
            h["halfspace_normals"] / nn[:, None] if len(nn) else a["halfspace_normals"]
        )
        a["halfspace_offsets"] = h["halfspace_offsets"] / nn if len(nn) else a["halfspace_offsets"]
        total = sum(len(v) for n, v in a.items() if n in _COUNT_FIELDS)
        names = () if names is None else tuple(names)
        if names:
            if len(names) != total:
                raise ValueError(f"names: {len(names)} given for {total} obstacles")
            if not all(isinstance(n, str) and n for n in names):
                raise ValueError("names must be non-empty strings")
            repeated = sorted(n for n, c in collections.Counter(names).items() if c > 1)
            if repeated:
                raise ValueError(f"names repeated: {', '.join(repeated[:10])}")
        return World(**{n: jnp.asarray(v, dtype) for n, v in a.items()}, names=names)

    def name(self, i: int) -> str:
        """Obstacle ``i``'s name (its kind and index within the kind when unnamed)."""
        if self.names:
            return self.names[i]
        for kind, count in zip(("sphere", "capsule", "box", "half-space"), self.counts):
            if i < count:
                return f"{kind} {i}"
            i -= count
        raise IndexError(i)

    @staticmethod
    def empty(dtype: jnp.dtype = jnp.float32) -> World:
        return World.create(dtype=dtype)

    def padded(self, buckets: Sequence[int] = DEFAULT_BUCKETS) -> World:
        """The same world with each kind's count rounded up to the next bucket (above the last
        bucket: to a multiple of it), filled with inert dummies that are ``FAR`` away with zero
        size, so their distance to any robot sphere is ~1e6 m and never penalised.
        """
        buckets = sorted({int(b) for b in buckets})
        if not buckets or buckets[0] < 0 or buckets[-1] <= 0:
            raise ValueError(f"buckets must be >= 0 with a positive largest one, got {buckets}")

        def size(n):
            fit = [b for b in buckets if b >= n]
            return fit[0] if fit else -(-n // buckets[-1]) * buckets[-1]

        def pad(a, n, fill):
            extra = jnp.broadcast_to(jnp.asarray(fill, a.dtype), (n - a.shape[0], *a.shape[1:]))
            return jnp.concatenate([a, extra], axis=0)

        ns, nc, nb, nh = (size(n) for n in self.counts)
        far3 = [FAR, FAR, FAR]
        return World(
            sphere_centers=pad(self.sphere_centers, ns, far3),
            sphere_radii=pad(self.sphere_radii, ns, 0.0),
            capsule_a=pad(self.capsule_a, nc, far3),
            capsule_b=pad(self.capsule_b, nc, far3),
            capsule_radii=pad(self.capsule_radii, nc, 0.0),
            box_poses=pad(self.box_poses, nb, [1.0, 0.0, 0.0, 0.0, FAR, FAR, FAR]),
            box_half_extents=pad(self.box_half_extents, nb, [0.0, 0.0, 0.0]),
            # n . x + d with d = FAR is positive everywhere the robot can be.
            halfspace_normals=pad(self.halfspace_normals, nh, [0.0, 0.0, 1.0]),
            halfspace_offsets=pad(self.halfspace_offsets, nh, FAR),
        )


# --------------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------------


def sphere_centers(robot: Robot, spheres: RobotSpheres, q: jax.Array) -> jax.Array:
    """World (root-frame) sphere centres, (*batch, S, 3), for configurations q
    (*batch, n_joints)."""
    poses = k.forward_kinematics(robot, q).wxyz_xyz[..., np.asarray(spheres.link_indices, int), :]
    quat = tuple(poses[..., i] for i in range(4))
    local = tuple(spheres.centers[:, i].astype(poses.dtype) for i in range(3))
    rotated = k.rotate(quat, local)
    return jnp.stack([rotated[i] + poses[..., 4 + i] for i in range(3)], axis=-1)


def safe_norm3(x: jax.Array, y: jax.Array, z: jax.Array) -> jax.Array:
    """|(x, y, z)| of component arrays, with gradient 0 (not NaN) at 0."""
    sq = x * x + y * y + z * z
    positive = sq > 0
    return jnp.where(positive, jnp.sqrt(jnp.where(positive, sq, 1.0)), 0.0)


def _along(a: jax.Array, ndim: int, axis: int) -> jax.Array:
    """(N,) -> broadcastable against points of ``ndim`` dimensions, N on ``axis``."""
    shape = [1] * ndim
    shape[axis] = a.shape[0]
    return a.reshape(shape)


def _sphere_part(centers, world: World, along) -> jax.Array:
    o = world.sphere_centers
    d = safe_norm3(*(c - along(o[:, i]) for i, c in enumerate(centers)))
    return d - along(world.sphere_radii)


def _capsule_part(centers, world: World, along) -> jax.Array:
    a, ab = world.capsule_a, world.capsule_b - world.capsule_a
    length2 = jnp.sum(ab * ab, axis=-1)
    rel = tuple(c - along(a[:, i]) for i, c in enumerate(centers))
    along_ab = sum(r * along(ab[:, i]) for i, r in enumerate(rel))
    t = jnp.clip(along_ab / along(jnp.where(length2 > 0, length2, 1.0)), 0.0, 1.0)
    d = safe_norm3(*(r - t * along(ab[:, i]) for i, r in enumerate(rel)))
    return d - along(world.capsule_radii)


def _box_rotations(poses: jax.Array) -> jax.Array:
    """(N, 3, 3) rotation matrices of wxyz quaternions (N, 4+): one matrix product per point
    instead of a quaternion rotation (half the arithmetic in the inner loop)."""
    w, x, y, z = (poses[:, i] for i in range(4))
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def _box_part(centers, world: World, along) -> jax.Array:
    pose = world.box_poses
    rot = _box_rotations(pose)
    rel = tuple(c - along(pose[:, 4 + i]) for i, c in enumerate(centers))
    local = tuple(sum(along(rot[:, j, i]) * rel[j] for j in range(3)) for i in range(3))  # R^T
    excess = tuple(jnp.abs(x) - along(world.box_half_extents[:, i]) for i, x in enumerate(local))
    outside = safe_norm3(*(jnp.maximum(e, 0.0) for e in excess))
    inside = jnp.minimum(jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2]), 0.0)
    return outside + inside


def _halfspace_part(centers, world: World, along) -> jax.Array:
    n = world.halfspace_normals
    d = sum(c * along(n[:, i]) for i, c in enumerate(centers))
    return d + along(world.halfspace_offsets)


_PARTS = (_sphere_part, _capsule_part, _box_part, _halfspace_part)


def obstacle_distances_t(centers: tuple[jax.Array, ...], world: World, axis: int) -> jax.Array:
    """Signed distances from points to every obstacle's surface, component form (m).

    Element-wise over separate x, y, z arrays, so the whole computation fuses (the form the
    trajectory optimiser's inner loop needs); :func:`world_distances` is this in (..., 3)
    layout.

    Args:
        centers: three arrays of one shape with a size-1 obstacle axis at ``axis``.
        world: the obstacles.
        axis: where the obstacle axis is.

    Returns:
        the centres' shape with ``axis`` of size Ns + Nc + Nb + Nh: spheres, capsules, boxes,
        half-spaces in that order.
    """
    along = lambda a: _along(a, centers[0].ndim, axis)
    # Every part has the centres' shape with its own count on the obstacle axis.
    return jnp.concatenate([part(centers, world, along) for part in _PARTS], axis=axis)


def unit3(v) -> tuple[jax.Array, ...]:
    """v / |v| of a component triple (zero stays zero)."""
    length = jnp.maximum(safe_norm3(*v), 1e-12)
    return tuple(x / length for x in v)


def _sphere_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    o = world.sphere_centers[index]  # (*shape, 3)
    return unit3(tuple(p - o[..., i] for i, p in enumerate(points)))


def _capsule_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    a = world.capsule_a[index]
    ab = world.capsule_b[index] - a
    length2 = jnp.sum(ab * ab, axis=-1)
    rel = tuple(p - a[..., i] for i, p in enumerate(points))
    t = sum(r * ab[..., i] for i, r in enumerate(rel)) / jnp.where(length2 > 0, length2, 1.0)
    t = jnp.clip(t, 0.0, 1.0)
    # The closest point is optimal along the segment: only the offset from it counts.
    return unit3(tuple(r - t * ab[..., i] for i, r in enumerate(rel)))


def _box_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    pose = world.box_poses[index]
    half = world.box_half_extents[index]
    quat = tuple(pose[..., i] for i in range(4))
    rel = tuple(p - pose[..., 4 + i] for i, p in enumerate(points))
    local = k.rotate(k.qconj(quat), rel)
    sign = tuple(jnp.where(x >= 0, 1.0, -1.0).astype(x.dtype) for x in local)
    excess = tuple(jnp.abs(x) - half[..., i] for i, x in enumerate(local))
    # Outside: away from the nearest surface point; inside: out through the nearest face.
    out = unit3(tuple(s * jnp.maximum(e, 0.0) for s, e in zip(sign, excess)))
    first = (excess[0] >= excess[1]) & (excess[0] >= excess[2])
    second = ~first & (excess[1] >= excess[2])
    face = (first, second, ~first & ~second)
    is_out = jnp.maximum(jnp.maximum(excess[0], excess[1]), excess[2]) > 0
    g = tuple(jnp.where(is_out, o, jnp.where(f, s, 0.0)) for o, f, s in zip(out, face, sign))
    return k.rotate(quat, g)


def _halfspace_gradient(points, world: World, index) -> tuple[jax.Array, ...]:
    n = world.halfspace_normals[index]
    return tuple(n[..., i] for i in range(3))


_GRADIENTS = (_sphere_gradient, _capsule_gradient, _box_gradient, _halfspace_gradient)


def nearest_obstacle_t(
    points: tuple[jax.Array, jax.Array, jax.Array],
    world: World,
    checked: jax.Array | None = None,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array, jax.Array]]:
    """Signed distance from each point to its nearest obstacle surface, and that distance's
    gradient with respect to the point (a unit vector pointing away from the obstacle).

    The distances to all obstacles are computed forward only, one obstacle after the other
    with a running minimum (one fused loop on a CPU: a reduction over an obstacle axis and an
    argmin cost twice as much); the gradient is worked out analytically for the nearest
    obstacle alone (a reverse pass over all of them cost twice the forward pass).

    Args:
        points: three component arrays of one shape (*shape).
        world: the obstacles (at least one).
        checked: optional, broadcastable to (*shape, N): False where a point and an obstacle
            may touch (:func:`checked_pairs`); such an obstacle is ``FAR`` away for it.

    Returns:
        distance (*shape), gradient: three arrays (*shape).
    """
    axis = points[0].ndim  # obstacles on a new last axis
    expanded = tuple(p[..., None] for p in points)
    along = lambda a: _along(a, axis + 1, axis)
    best = None
    offset = 0
    for part, gradient, count in zip(_PARTS, _GRADIENTS, world.counts):
        if count == 0:
            continue
        d_all = part(expanded, world, along)  # (*shape, N)
        if checked is not None:
            d_all = jnp.where(checked[..., offset : offset + count], d_all, FAR)
        offset += count
        index = jnp.argmin(d_all, axis=axis)
        d = jnp.take_along_axis(d_all, index[..., None], axis=axis)[..., 0]
        g = gradient(points, world, index)
        if best is None:
            best = (d, g)
        else:
            closer = d < best[0]
            best = (
                jnp.where(closer, d, best[0]),
                tuple(jnp.where(closer, a, b) for a, b in zip(g, best[1])),
            )
    if best is None:
        raise ValueError("nearest_obstacle_t needs at least one obstacle")
    d, *g = k.materialize((best[0], *best[1]))
    return d, tuple(g)


def world_distances(
    centers: jax.Array, radii: jax.Array, world: World, checked: jax.Array | None = None
) -> jax.Array:
    """Signed distances between robot spheres and every obstacle, m (negative: penetration).

    Args:
        centers: (*batch, S, 3) sphere centres in the root frame.
        radii: (S,) (or broadcastable to (*batch, S)) sphere radii.
        world: the obstacles.
        checked: optional (S, N) bool (:func:`checked_pairs`): inf where False.

    Returns:
        (*batch, S, Ns + Nc + Nb + Nh): spheres, capsules, boxes, half-spaces in that order.
    """
    components = tuple(centers[..., :, None, i] for i in range(3))  # (*batch, S, 1)
    d = obstacle_distances_t(components, world, axis=-1) - jnp.asarray(radii)[..., :, None]
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def self_distances(
    centers: jax.Array, radii: jax.Array, spheres: RobotSpheres, checked: jax.Array | None = None
) -> jax.Array:
    """Signed distances of the self-collision pairs, (*batch, P), m.

    Args:
        centers: (*batch, S, 3) root-frame sphere centres (from :func:`sphere_centers`).
        radii: (S,) radii.
        spheres: gives the pairs ``spheres.self_pairs`` (P, 2).
        checked: optional (P,) bool (:func:`checked_pairs`): inf where False.
    """
    i, j = spheres.self_pairs[:, 0], spheres.self_pairs[:, 1]
    radii = jnp.asarray(radii)
    gap = centers[..., i, :] - centers[..., j, :]
    d = safe_norm3(gap[..., 0], gap[..., 1], gap[..., 2]) - radii[..., i] - radii[..., j]
    return d if checked is None else jnp.where(checked, d, jnp.inf)


def collision_distances(
    robot: Robot,
    spheres: RobotSpheres,
    q: jax.Array,
    world: World | None = None,
    self_collision: bool = True,
    checked: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """All signed distances as one vector per configuration: (*batch, S * N + P) with the
    world distances (row-major over (S, N)) first, then the self pairs. A residual
    ``max(0, margin - d)`` of it is zero exactly when every clearance exceeds ``margin``.
    ``checked``: (world (S, N), self (P,)) from :func:`checked_pairs`; unchecked pairs are inf.
    """
    centers = sphere_centers(robot, spheres, q)
    checked_world, checked_self = (None, None) if checked is None else checked
    parts = []
    if world is not None:
        d = world_distances(centers, spheres.radii, world, checked_world)
        parts.append(d.reshape(*d.shape[:-2], -1))
    if self_collision:
        parts.append(self_distances(centers, spheres.radii, spheres, checked_self))
    if not parts:
        return jnp.zeros((*centers.shape[:-2], 0), centers.dtype)
    return jnp.concatenate(parts, axis=-1)


def min_distance(
    robot: Robot,
    spheres: RobotSpheres,
    q: jax.Array,
    world: World | None = None,
    self_collision: bool = True,
    checked: tuple[jax.Array, jax.Array] | None = None,
) -> jax.Array:
    """Smallest signed distance (world and/or self), (*batch,), m; +inf if nothing is checked."""
    d = collision_distances(robot, spheres, q, world, self_collision, checked)
    return jnp.min(d, axis=-1, initial=jnp.inf)
