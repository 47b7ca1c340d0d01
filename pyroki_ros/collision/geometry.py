"""The collision geometry: the robot's spheres and boxes (:class:`RobotSpheres`) and the
obstacles of a scene (:class:`World`), with the padding that lets one compiled program serve
many scenes.

Over ~600 lines because it holds the two data types every collision path reads, each with
its validating constructors (arrays, mappings, YAML files, URDFs) and its inverse; the
distances, contact rules and fitting live apart (distance, boxes, rules, fitting)."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.collision.fitting import _cover_geometry, _origin_matrix
from pyroki_ros.collision.rules import _check_ignore, self_collision_pairs
from pyroki_ros.model.robot import Robot

# Obstacle-count buckets of World.padded (per kind; above the last, counts round up to its
# multiples): every new bucket is a compile (seconds: bench/mbm_benchmark.py reports its
# warm-up's). The planner's searches (each sphere's and box's nearest obstacle, the
# clearance check) stop where the padding starts (World.live_counts), so a padded slot
# costs them nothing; the dense distances (collision_distances, the named contact) still
# pay one distance per sphere and slot. WORLD_BUCKETS, the default: small steps, the least
# padding. COARSE_WORLD_BUCKETS: few structures for scenes that vary (the node; the
# MotionBenchMaker sets in two: bench/mbm_benchmark.py --obstacle-buckets).
WORLD_BUCKETS = (0, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)
COARSE_WORLD_BUCKETS = (0, 16, 64)
# Each kind's arrays, in ``counts`` order (World.take).
_KIND_FIELDS = (
    ("sphere_centers", "sphere_radii"),
    ("capsule_a", "capsule_b", "capsule_radii"),
    ("box_poses", "box_half_extents"),
    ("halfspace_normals", "halfspace_offsets"),
    ("cylinder_poses", "cylinder_radii", "cylinder_half_heights"),
)
# The kinds in the order of the obstacle axis (distances, names, ``counts``). Cylinders came
# last so that the first four keep their places.
KINDS = ("sphere", "capsule", "box", "half-space", "cylinder")
# What a robot sphere is checked against (RobotSpheres.roles).
ROLES = ("both", "world", "self")
# Where dummy obstacles live (m). Far enough that no robot sphere reaches them, small enough
# that squares stay finite in float32.
FAR = 1.0e6


def pose_rotations(poses: jax.Array) -> jax.Array:
    """(..., 3, 3) rotation matrices (columns: the frame's axes) of wxyz_xyz poses (..., 7)
    (obstacle and robot-box frames): a matrix product per point costs half a quaternion
    rotation in the distance loops."""
    return jaxlie.SO3(poses[..., :4]).as_matrix()


def _static(**kwargs):
    return dataclasses.field(metadata={"static": True}, **kwargs)


# --------------------------------------------------------------------------------------------
# The robot
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RobotSpheres:
    """``S`` spheres fixed to the robot's links, the ``P`` sphere pairs checked for
    self-collision, and ``X`` boxes fixed to links (optional, obstacles only).

    A sphere's role says what it is checked against: ``"both"`` (the world and the robot
    itself, the usual case), ``"world"`` (obstacles only) or ``"self"`` (self-collision
    only). Two roles let one set pair a tight model for obstacles, where every millimetre
    past the real surface can turn a feasible grasp into a collision, with a coarse one for
    self-collision, whose cost grows with the square of the sphere count (see
    :meth:`embedded`).

    Attributes:
        centers: (S, 3) sphere centres in the frame of their link, m.
        radii: (S,) radii, m, > 0.
        self_pairs: (P, 2) int32 sphere indices ``(i, j)``, ``i < j``: spheres on links of
            different bodies that are not adjacent and not ignored (see
            :func:`self_collision_pairs`). An array, not metadata, so sphere sets with the
            same number of pairs share a compiled function.
        self_reach: (P,) the centre distance below which a self pair collides: both radii,
            both links' ``self_buffer`` and the links' ``self_pair_buffer``,
            ``r_i + b_i + r_j + b_j + b_ij``.
        link_indices: (S,) static, index in ``robot.link_names`` of each sphere's link.
        link_names: (S,) static, each sphere's link name.
        ignore: static, the link-name pairs excluded from self-collision, sorted.
        self_buffer: static, ``(link, m)`` pairs, sorted: extra self-collision clearance
            per link (e.g. to keep the arm off its base by more than its spheres say).
        self_pair_buffer: static, ``(link_a, link_b, m)``, sorted, ``link_a < link_b``: extra
            clearance between two links (where one link's buffer would also push it off
            links it may come close to).
        roles: (S,) static, each sphere's role: "both", "world" or "self".
        box_poses: (X, 7) wxyz_xyz, each box's frame in its link's frame (unit quaternion).
        box_half_extents: (X, 3) half sizes, m, > 0.
        box_link_indices, box_link_names: (X,) static, each box's link.
        hull_vertices: (H, V, 3) the vertices of the last H boxes' convex hulls, in their
            box's frame (the box is the hull's bounding box): links whose real geometry is
            a convex mesh (the Panda's hand), checked as that hull
            (:mod:`pyroki_ros.collision.boxes`); a hull with fewer than V vertices repeats
            its first.

    Boxes are exact link geometry (a URDF's ``<box>``, e.g. the Panda's fingers) checked
    against obstacles in place of spheres that would reach past their faces
    (:mod:`pyroki_ros.collision.boxes`: a conservative distance); their rows follow the
    spheres' in every world distance (S + X), by the same contact rules.
    """

    centers: jax.Array
    radii: jax.Array
    self_pairs: jax.Array
    self_reach: jax.Array
    link_indices: tuple[int, ...] = _static()
    link_names: tuple[str, ...] = _static()
    ignore: tuple[tuple[str, str], ...] = _static(default=())
    self_buffer: tuple[tuple[str, float], ...] = _static(default=())
    self_pair_buffer: tuple[tuple[str, str, float], ...] = _static(default=())
    roles: tuple[str, ...] = _static(default=())
    box_poses: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((0, 7)))
    box_half_extents: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((0, 3)))
    box_link_indices: tuple[int, ...] = _static(default=())
    box_link_names: tuple[str, ...] = _static(default=())
    hull_vertices: jax.Array = dataclasses.field(default_factory=lambda: jnp.zeros((0, 1, 3)))

    @property
    def n_hulls(self) -> int:
        return self.hull_vertices.shape[0]

    @property
    def n_spheres(self) -> int:
        return self.centers.shape[0]

    @property
    def n_boxes(self) -> int:
        return len(self.box_link_indices)

    def with_boxes(
        self,
        robot: Robot,
        mapping: Mapping[str, Sequence[Sequence[float]]] | None,
        hulls: Mapping[str, Sequence[Sequence[float]]] | None = None,
    ) -> RobotSpheres:
        """These spheres and the boxes ``{link: [[qw, qx, qy, qz, x, y, z, hx, hy, hz],
        ...]}`` (pose in the link frame, half sizes; m), checked against obstacles, then
        the convex hulls ``{link: [[x, y, z], ...]}`` (each the hull of these points, in the
        link frame; m), each as a box row of its own (its bounding box) with
        :attr:`hull_vertices`.

        Raises:
            ValueError: an unknown link (named), an entry that is not 10 numbers (a box) or
                3 (a hull vertex), a non-finite value, a half size <= 0, a zero quaternion
                or a hull with no extent along some axis.
        """
        names, rows = [], []
        for link, values in (mapping or {}).items():
            values = _link_rows(
                robot, link, values, "boxes", "[qw, qx, qy, qz, x, y, z, hx, hy, hz]"
            )
            for row in values:
                norm = np.linalg.norm(row[:4])
                if not np.all(np.isfinite(row)) or norm < 1e-9 or np.any(row[7:] <= 0):
                    raise ValueError(
                        f"link '{link}': box {row.tolist()} needs finite values, a non-zero "
                        "quaternion and half sizes > 0"
                    )
                rows.append(np.concatenate([row[:4] / norm, row[4:]]))
                names.append(str(link))
        vertices = []
        for link, points in (hulls or {}).items():
            points = _link_rows(robot, link, points, "hulls", "[x, y, z]")
            low, high = points.min(0, initial=np.inf), points.max(0, initial=-np.inf)
            if not np.all(np.isfinite(points)) or not np.all(high - low > 0):
                raise ValueError(f"link '{link}': a hull needs finite points spanning 3-D")
            middle = (low + high) / 2
            rows.append(np.concatenate([[1.0, 0.0, 0.0, 0.0], middle, (high - low) / 2]))
            names.append(str(link))
            vertices.append(points - middle)
        table = np.asarray(rows, np.float64).reshape(-1, 10)
        count = max((len(v) for v in vertices), default=1)
        padded = [np.concatenate([v, np.repeat(v[:1], count - len(v), 0)]) for v in vertices]
        return dataclasses.replace(
            self,
            box_poses=jnp.asarray(table[:, :7], robot.dtype),
            box_half_extents=jnp.asarray(table[:, 7:], robot.dtype),
            box_link_indices=tuple(robot.link_index(n) for n in names),
            box_link_names=tuple(names),
            hull_vertices=jnp.asarray(np.asarray(padded).reshape(-1, count, 3), robot.dtype),
        )

    def boxes_config(self) -> dict[str, list[list[float]]]:
        """The boxes of :meth:`with_boxes` (hulls' rows not included): ``{link: [[qw, ...,
        hz], ...]}``."""
        table = np.concatenate([np.asarray(self.box_poses), np.asarray(self.box_half_extents)], 1)
        plain = self.n_boxes - self.n_hulls
        return _by_link(zip(self.box_link_names[:plain], table[:plain]))

    def bounding(self) -> RobotSpheres:
        """These spheres and boxes with every hull checked as its bounding box: never nearer
        an obstacle than the hull, and measured without GJK's rounds (the global step's many
        checks: :mod:`pyroki_ros.planning.rrt`, where its cost is measured)."""
        return dataclasses.replace(self, hull_vertices=self.hull_vertices[:0])

    def hulls_config(self) -> dict[str, list[list[float]]]:
        """The hulls of :meth:`with_boxes`: ``{link: [[x, y, z], ...]}`` (link frame)."""
        out: dict[str, list[list[float]]] = {}
        plain = self.n_boxes - self.n_hulls
        middles = np.asarray(self.box_poses)[plain:, 4:]
        for name, middle, points in zip(
            self.box_link_names[plain:], middles, np.asarray(self.hull_vertices)
        ):
            unique = np.unique(points + middle, axis=0)
            out[name] = [[float(v) for v in p] for p in unique]
        return out

    @property
    def n_pairs(self) -> int:
        return self.self_pairs.shape[0]

    @property
    def world_mask(self) -> np.ndarray:
        """(S,) bool: the spheres checked against obstacles (role "both" or "world"; every
        sphere when no roles are given)."""
        if not self.roles:
            return np.ones(self.n_spheres, bool)
        return np.array([role != "self" for role in self.roles], bool)

    # --- constructors ----------------------------------------------------------------------

    @staticmethod
    def create(
        robot: Robot,
        link_names: Sequence[str],
        centers: Any,
        radii: Any,
        ignore: Iterable[Sequence[str]] = (),
        roles: Sequence[str] | None = None,
        self_buffer: Mapping[str, float] | None = None,
        self_pair_buffer: Iterable[Sequence] = (),
    ) -> RobotSpheres:
        """Spheres from per-sphere link names, centres (S, 3) in the link frame and radii (S,),
        their roles (S,) ("both", "world" or "self"; default all "both"), an optional
        ``self_buffer`` ``{link: m}``, extra clearance of that link's spheres in
        self-collision pairs (the convention of robometrics' and cuRobo's robot files), and
        ``self_pair_buffer`` ``[(link_a, link_b, m), ...]``, extra clearance between the
        spheres of two links only (added to their links' buffers).

        Raises:
            ValueError: unknown link (named), wrong shapes, non-finite values, radius <= 0,
                an unknown role, an ignore entry that is not a pair of known links, or a
                buffer that is not finite and >= 0 (or a pair buffer not of two distinct links).
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
        roles = ("both",) * len(link_names) if roles is None else tuple(str(r) for r in roles)
        if len(roles) != len(link_names) or not set(roles) <= set(ROLES):
            raise ValueError(
                f"need one role of {ROLES} per sphere ({len(link_names)}), got {roles!r}"
            )
        link_indices = tuple(robot.link_index(n) for n in link_names)
        ignore = _check_ignore(robot, ignore)
        buffer = _check_buffer(robot, self_buffer)
        in_self = [role != "world" for role in roles]
        pairs = self_collision_pairs(robot, link_indices, ignore, in_self)
        pair_buffer = _check_pair_buffer(robot, self_pair_buffer)
        per_link = dict(buffer)
        per_pair = {(a, b): m for a, b, m in pair_buffer}
        pairs = np.asarray(pairs, np.int32).reshape(-1, 2)
        grown = radii + np.array([per_link.get(n, 0.0) for n in link_names], np.float64)
        between = [
            per_pair.get(tuple(sorted((link_names[i], link_names[j]))), 0.0) for i, j in pairs
        ]
        reach = grown[pairs[:, 0]] + grown[pairs[:, 1]] + np.asarray(between, np.float64)
        return RobotSpheres(
            centers=jnp.asarray(centers, robot.dtype),
            radii=jnp.asarray(radii, robot.dtype),
            self_pairs=jnp.asarray(pairs),
            self_reach=jnp.asarray(reach, robot.dtype),
            link_indices=link_indices,
            link_names=link_names,
            ignore=ignore,
            self_buffer=buffer,
            self_pair_buffer=pair_buffer,
            roles=roles,
        )

    @staticmethod
    def from_config(
        robot: Robot,
        mapping: Mapping[str, Sequence[Sequence[float]]],
        ignore: Iterable[Sequence[str]] = (),
        self_mapping: Mapping[str, Sequence[Sequence[float]]] | None = None,
        self_buffer: Mapping[str, float] | None = None,
        self_pair_buffer: Iterable[Sequence] = (),
    ) -> RobotSpheres:
        """Spheres from ``{link_name: [[x, y, z, r], ...]}`` (link frame, m), e.g. from YAML.
        With ``self_mapping`` (the same form), ``mapping``'s spheres are checked against
        obstacles only and ``self_mapping``'s for self-collision only (roles "world" and
        "self"); without it every sphere does both. ``self_buffer``, ``self_pair_buffer``:
        see :meth:`create`.

        Raises:
            ValueError: an unknown link (named), an entry that is not 4 numbers, a radius that
                is not finite and > 0.
        """
        names, rows, roles = [], [np.zeros((0, 4))], []
        parts = [(mapping, "both")]
        if self_mapping is not None:
            parts = [(mapping, "world"), (self_mapping, "self")]
        for part, role in parts:
            for link, spheres in part.items():
                rows.append(_link_rows(robot, link, spheres, "spheres", "[x, y, z, r]"))
                names += [link] * len(rows[-1])
                roles += [role] * len(rows[-1])
        rows = np.concatenate(rows)
        return RobotSpheres.create(
            robot, names, rows[:, :3], rows[:, 3], ignore, roles, self_buffer, self_pair_buffer
        )

    @staticmethod
    def from_yaml(
        robot: Robot,
        path: str | os.PathLike,
        ignore: Iterable[Sequence[str]] = (),
        *,
        exact: bool = False,
    ) -> RobotSpheres:
        """Spheres from a file with ``spheres: {link: [[x, y, z, r], ...]}``, an optional
        ``self_spheres`` of the same form (see :meth:`from_config`), optional ``boxes``
        and ``hulls`` (:meth:`with_boxes`), optional ``self_buffer: {link: m}`` and
        ``self_pair_buffer: [[link_a, link_b, m], ...]`` (:meth:`create`) and an optional
        ``ignore: [[link_a, link_b], ...]``; ``ignore`` here adds to the file's list.

        An optional ``exact_hulls: {link: [[x, y, z], ...]}`` holds the real shapes (convex
        hulls of their collision meshes) of links that the spheres cover conservatively.
        With ``exact`` the file's *exact model* comes back: those hulls in place of the
        links' obstacle spheres (self-collision unchanged). A planner falls back to it when
        the spheres put every goal configuration in collision
        (``TrajectoryOptimizer(exact=...)``; :func:`exact_hull_links` names the links).

        Reads JSON-style (flow) YAML without PyYAML, so the core needs no YAML library.

        Raises:
            ValueError: as :meth:`from_config` and :meth:`with_boxes`; ``exact`` with a file
                that has no ``exact_hulls``.
        """
        data = _load_yaml(pathlib.Path(path))
        spheres, hulls = dict(data["spheres"]), dict(data.get("hulls") or {})
        if exact:
            closer = data.get("exact_hulls") or {}
            if not closer:
                raise ValueError(f"{path} has no exact_hulls: no exact model")
            spheres = {link: rows for link, rows in spheres.items() if link not in closer}
            hulls.update(closer)
        extra = [tuple(p) for p in ignore]
        return RobotSpheres.from_config(
            robot,
            spheres,
            [tuple(p) for p in data.get("ignore", [])] + extra,
            data.get("self_spheres"),
            data.get("self_buffer"),
            data.get("self_pair_buffer") or (),
        ).with_boxes(robot, data.get("boxes"), hulls)

    @staticmethod
    def embedded(
        name: str,
        robot: Robot | None = None,
        ignore: Iterable[Sequence[str]] = (),
        *,
        fine: bool = False,
        exact: bool = False,
    ) -> RobotSpheres:
        """The sphere set bundled for an embedded robot, with its default self-collision
        ignore list plus ``ignore``. ``robot`` defaults to the embedded URDF's model.

        Two sets per robot (``pyroki_ros/robots/``): ``<name>_spheres.yaml``, the default,
        4 spheres per link mesh (Panda: 48, centred near the surface, so they bulge past the
        mesh by centimetres), and with ``fine`` ``<name>_spheres_fine.yaml`` from
        ``tools/fit_collision_spheres.py``: up to 24 spheres per mesh for obstacles, centred
        inside and fitted to a 5 mm overshoot target, on the links that reach into clutter
        (Panda: 92, panda_link5 to panda_link7; panda_link0..4 keep the default set's; the
        fingers are their 8 URDF boxes and the hand the convex hull of its mesh,
        :meth:`with_boxes`) and the default set for self-collision (role "self"). Grasps
        in clutter that the default set sees as collisions become feasible
        (docs/benchmarks/mbm.md and mbm_fine.md). ``exact``: the set's exact model
        (:meth:`from_yaml`; the fine Panda set's: the forearm, panda_link5, as its mesh hull).
        """
        path = embedded_path(name, fine=fine)
        if robot is None:
            from pyroki_ros.robots import urdf_path

            robot = Robot.from_urdf(urdf_path(name))
        return RobotSpheres.from_yaml(robot, path, ignore, exact=exact)

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
        box_links: Sequence[str] = (),
    ) -> RobotSpheres:
        """Spheres covering the URDF's ``<collision>`` geometry, link by link; the ``<box>``
        elements of the links in ``box_links`` stay boxes (:meth:`with_boxes`).

        * sphere: itself;
        * box, cylinder, capsule: split into cells along their long dimensions, each covered by
          its circumscribed sphere, so the union *contains* the shape. Cells are split until a
          sphere over-reaches the shape's thinnest half-size by at most ``tolerance`` (m), or
          ``max_spheres_per_primitive`` is reached;
        * mesh (needs trimesh): at most ``spheres_per_mesh`` spheres containing the surface
          samples, centred inside so they reach little beyond the mesh (fewer when that
          overshoot is <= ``tolerance``; see :func:`.fitting.fit_mesh_spheres`), radii plus
          ``mesh_padding``. A mesh file that cannot be found is skipped with a warning naming
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
        centers, radii = [np.zeros((0, 3))], [np.zeros((0,))]
        boxes: dict[str, list[list[float]]] = {}
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
                if shape.tag == "box" and link_name in box_links:
                    half = [0.5 * float(v) for v in shape.get("size").split()]
                    wxyz = jaxlie.SO3.from_matrix(origin[:3, :3]).wxyz
                    pose = [float(v) for v in (*np.asarray(wxyz), *origin[:3, 3])]
                    boxes.setdefault(link_name, []).append(pose + half)
                    continue
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
            np.concatenate(centers),
            np.concatenate(radii),
            ignore,
        ).with_boxes(robot, boxes)

    def to_config(self, role: str = "world") -> dict[str, list[list[float]]]:
        """The inverse of :meth:`from_config`: ``{link: [[x, y, z, r], ...]}`` of the spheres
        checked against obstacles (``role="world"``: :meth:`from_config`'s ``mapping``) or
        of the self-collision-only ones (``role="self"``: its ``self_mapping``)."""
        rows = np.concatenate([np.asarray(self.centers), np.asarray(self.radii)[:, None]], axis=1)
        chosen = self.world_mask if role == "world" else ~self.world_mask
        return _by_link((n, row) for n, row, keep in zip(self.link_names, rows, chosen) if keep)


def _by_link(rows) -> dict[str, list[list[float]]]:
    """``{link: [row, ...]}`` of (link, row) pairs, in their order."""
    out: dict[str, list[list[float]]] = {}
    for name, row in rows:
        out.setdefault(name, []).append([float(v) for v in row])
    return out


def _link_rows(robot: Robot, link: str, rows, what: str, form: str) -> np.ndarray:
    """A link's rows of a sphere or box mapping as an (N, len(form)) float array.

    Raises:
        ValueError: an unknown link (named, with the robot's links), or rows not of the form.
    """
    if link not in robot.link_names:
        robot.link_index(str(link))  # raises, naming the link and the robot's links
    width = form.count(",") + 1
    values = np.asarray(rows if len(rows) else np.zeros((0, width)), np.float64)
    if values.ndim != 2 or values.shape[1] != width:
        raise ValueError(f"link '{link}': {what} must be a list of {form}, got {rows!r}")
    return values


def _buffer_value(value, what: str) -> float:
    """A buffer in m: finite and >= 0, else ValueError naming ``what``."""
    value = float(value)
    if not (np.isfinite(value) and value >= 0.0):
        raise ValueError(f"{what} must be finite and >= 0, got {value}")
    return value


def _check_buffer(
    robot: Robot, buffer: Mapping[str, float] | None
) -> tuple[tuple[str, float], ...]:
    out = []
    for link, value in (buffer or {}).items():
        robot.link_index(str(link))  # ValueError naming an unknown link
        value = _buffer_value(value, f"link '{link}': self_buffer")
        if value > 0.0:
            out.append((str(link), value))
    return tuple(sorted(out))


def _check_pair_buffer(
    robot: Robot, entries: Iterable[Sequence]
) -> tuple[tuple[str, str, float], ...]:
    """``[link_a, link_b, m]`` entries as sorted ``(link_a, link_b, m)``, ``link_a < link_b``
    (the ignore list's rule for a pair of links), zeros left out."""
    out = {}
    for entry in entries:
        entry = tuple(entry)
        names = entry[:2]
        if len(entry) != 3 or not all(isinstance(n, str) for n in names) or names[0] == names[1]:
            raise ValueError(f"self_pair_buffer entry {entry!r} is not [link_a, link_b, m]")
        (pair,) = _check_ignore(robot, [names])  # unknown links: ValueError naming them
        value = _buffer_value(entry[2], f"self_pair_buffer {pair}")
        if value > 0.0:
            out[pair] = value
    return tuple(sorted((a, b, m) for (a, b), m in out.items()))


def embedded_path(name: str, *, fine: bool = False) -> pathlib.Path:
    """The bundled sphere file of embedded robot ``name`` (:meth:`RobotSpheres.embedded`)."""
    from pyroki_ros.robots import urdf_path

    suffix = "_spheres_fine.yaml" if fine else "_spheres.yaml"
    path = urdf_path(name).with_name(f"{name}{suffix}")
    if not path.is_file():
        raise ValueError(f"no bundled collision spheres for robot {name!r}")
    return path


def exact_hull_links(path: str | os.PathLike) -> tuple[str, ...]:
    """The links a sphere file gives an exact model for (its ``exact_hulls``; () if none):
    :meth:`RobotSpheres.from_yaml` with ``exact``."""
    return tuple(_load_yaml(pathlib.Path(path)).get("exact_hulls") or ())


def _load_yaml(path: pathlib.Path) -> dict:
    text = path.read_text()
    try:
        import yaml
    except ImportError:  # the bundled files are JSON-style YAML with '#' comment lines
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        return json.loads(body)
    return yaml.safe_load(text)


# --- covering URDF geometry -------------------------------------------------------------------


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
        cylinder_poses: (Ny, 7) wxyz_xyz, frame of the cylinder's centre, its axis along the
            local z (unit quaternion); cylinder_radii: (Ny,); cylinder_half_heights: (Ny,):
            a finite solid cylinder with flat caps (exact, unlike the capsule around it,
            which reaches a radius past each cap).

    Distances come in this order along the obstacle axis (:data:`KINDS`): spheres, capsules,
    boxes, half-spaces, cylinders (see :func:`world_distances`). ``names``: static, one per
    obstacle in that order (empty: unnamed), for allowed collisions and messages;
    :meth:`padded` drops them (the compiled programs never see names).
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
    cylinder_poses: jax.Array
    cylinder_radii: jax.Array
    cylinder_half_heights: jax.Array
    names: tuple[str, ...] = _static(default=())

    @property
    def counts(self) -> tuple[int, int, int, int, int]:
        """(spheres, capsules, boxes, half-spaces, cylinders), dummies included."""
        return tuple(getattr(self, fields[0]).shape[0] for fields in _KIND_FIELDS)

    @property
    def n_obstacles(self) -> int:
        return sum(self.counts)

    def live_counts(self) -> tuple[jax.Array, ...]:
        """Per kind (``counts`` order), how many leading obstacles a search must visit: up
        to the last one that is not padding (traced: :meth:`padded` appends its dummies
        ``FAR`` away). Searches that stop there cost what the scene has, not its bucket."""
        where = (
            self.sphere_centers[:, 0],
            self.capsule_a[:, 0],
            self.box_poses[:, 4],
            self.halfspace_offsets,
            self.cylinder_poses[:, 4],
        )
        return tuple(
            jnp.max(jnp.where(x < 0.5 * FAR, jnp.arange(1, x.shape[0] + 1), 0), initial=0)
            for x in where
        )

    def take(self, kind: int, index: jax.Array) -> World:
        """This world with the arrays of ``kind`` (``counts`` order) indexed by ``index``
        (int array of any shape: theirs become (*index.shape, ...)); only that kind may be
        read from it."""
        fields = {name: getattr(self, name)[index] for name in _KIND_FIELDS[kind]}
        return dataclasses.replace(self, **fields)

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
        cylinder_poses: Any = None,
        cylinder_radii: Any = None,
        cylinder_half_heights: Any = None,
        names: Sequence[str] | None = None,
        dtype: jnp.dtype = jnp.float32,
    ) -> World:
        """Validated obstacles; any kind may be left out. Half-space normals are normalised
        (``d`` scaled with them); box and cylinder quaternions are normalised. ``names``: one
        distinct, non-empty name per obstacle, in the order spheres, capsules, boxes,
        half-spaces, cylinders.

        Raises:
            ValueError: a kind given only in part, wrong shapes, NaN/inf, radii, half-extents
                or half-heights <= 0, a zero normal or quaternion, names of the wrong count or
                repeated. The message names the field and index.
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
        y = group(
            "cylinders",
            cylinder_poses=(cylinder_poses, (7,)),
            cylinder_radii=(cylinder_radii, ()),
            cylinder_half_heights=(cylinder_half_heights, ()),
        )
        a = {**s, **c, **b, **h, **y}
        for name in ("sphere_radii", "capsule_radii", "box_half_extents", "cylinder_radii",
                     "cylinder_half_heights"):  # fmt: skip
            positive(name, a[name])

        def norms(name, x, what):
            n = np.linalg.norm(x, axis=1)
            if np.any(n < 1e-9):
                raise ValueError(f"{name}[{np.argmax(n < 1e-9)}] {what}")
            return n

        nn = norms("halfspace_normals", a["halfspace_normals"], "is zero")
        for name in ("box_poses", "cylinder_poses"):
            q = a[name][:, :4]
            a[name] = np.concatenate(
                [q / norms(name, q, "has a zero quaternion")[:, None], a[name][:, 4:]], 1
            )
        a["halfspace_normals"] = a["halfspace_normals"] / nn[:, None]
        a["halfspace_offsets"] = a["halfspace_offsets"] / nn
        total = sum(len(a[fields[0]]) for fields in _KIND_FIELDS)
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
        for kind, count in zip(KINDS, self.counts):
            if i < count:
                return f"{kind} {i}"
            i -= count
        raise IndexError(i)

    @staticmethod
    def empty(dtype: jnp.dtype = jnp.float32) -> World:
        return World.create(dtype=dtype)

    def padded_counts(self, buckets: Sequence[int] = WORLD_BUCKETS) -> tuple[int, ...]:
        """:attr:`counts` of :meth:`padded`: each kind's count rounded up to the next bucket
        (above the last bucket: to a multiple of it)."""
        buckets = sorted({int(b) for b in buckets})
        if not buckets or buckets[0] < 0 or buckets[-1] <= 0:
            raise ValueError(f"buckets must be >= 0 with a positive largest one, got {buckets}")

        def size(n):
            fit = [b for b in buckets if b >= n]
            return fit[0] if fit else -(-n // buckets[-1]) * buckets[-1]

        return tuple(size(n) for n in self.counts)

    def padded(self, buckets: Sequence[int] = WORLD_BUCKETS) -> World:
        """The same world with each kind's count rounded up to the next bucket
        (:meth:`padded_counts`), filled with inert dummies that are ``FAR`` away with zero
        size, so their distance to any robot sphere is ~1e6 m and never penalised.
        """

        def pad(a, n, fill):  # on the host: no program to compile per obstacle count
            a = np.asarray(a)
            extra = np.broadcast_to(np.asarray(fill, a.dtype), (n - a.shape[0], *a.shape[1:]))
            return jnp.asarray(np.concatenate([a, extra], axis=0))

        far_pose = [1.0, 0.0, 0.0, 0.0, FAR, FAR, FAR]
        # Sizes 0; n . x + d with d = FAR is positive everywhere the robot can be.
        fill = {n: FAR for n in ("sphere_centers", "capsule_a", "capsule_b", "halfspace_offsets")}
        fill.update(box_poses=far_pose, cylinder_poses=far_pose, halfspace_normals=[0.0, 0.0, 1.0])
        sizes = self.padded_counts(buckets)
        return World(
            **{
                name: pad(getattr(self, name), n, fill.get(name, 0.0))
                for fields, n in zip(_KIND_FIELDS, sizes)
                for name in fields
            }
        )
