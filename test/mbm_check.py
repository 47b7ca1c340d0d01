"""Independent checker of MotionBenchMaker plans, by the rules of the robometrics / cuRobo
evaluation (``test/data/mbm/README.md``), numpy float64 only: no pyroki_ros, no JAX.

A path passes when

* the final ``panda_hand`` pose is within 1 mm and 1 degree of the goal, by the reference
  forward kinematics of ``test/reference_fk.py`` on the bundled ``panda.urdf``;
* every joint of every knot is inside its URDF limits;
* every sphere of ``franka_spheres.yml`` (robometrics' Franka model; those of ``panda_link0``
  excepted, it sits on the stand) is at signed distance >= 0 from every cuboid and cylinder,
  along the path linearly interpolated in joint space (at least ``samples`` points per segment
  and no joint moving more than ``max_step`` between two points);
* no two spheres of different links collide (robometrics' self-collision rule: centre
  distance >= the sum of radius + per-link buffer of both, except the ignored link pairs).

Distances are exact: sphere to oriented box (clamping in the box frame; inside: minus the
depth to the nearest face) and sphere to finite cylinder (radial and axial excess combined;
not a capsule), each minus the sphere's radius.

The Franka spheres are given in link frames; the link names must be links of the URDF
(checked on load). ``panda_hand``'s spheres are in the ``panda_hand`` frame, which the URDF
puts at ``panda_link8`` turned by -45 degrees about z (the fingers slide along its y axis,
along which the hand's spheres are laid out): poses of the goal are ``panda_hand`` poses, not
``panda_link8`` ones.

Configurations are the 7 arm joints (a (T, 7) path gets the fingers at ``FINGER_OPEN``) or
the 8 actuated joints of the URDF (``panda_joint1..7``, ``panda_finger_joint1``); the second
finger mimics the first.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import batched_reference
import numpy as np
import yaml
from batched_reference import box_signed_distance, cylinder_signed_distance
from reference_fk import make_transform, pose_errors, quat_wxyz_to_matrix, reference_fk

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "test" / "data" / "mbm"
# The file itself, not pyroki_ros.robots.urdf_path: the checker never imports pyroki_ros.
PANDA_URDF_PATH = REPO / "pyroki_ros" / "robots" / "panda.urdf"
SPHERES_PATH = DATA / "franka_spheres.yml"

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_OPEN = 0.04  # m, panda_finger_joint1 at its upper limit: the hand open for a grasp
POSITION_TOLERANCE = 1e-3  # m
ORIENTATION_TOLERANCE = math.radians(1.0)
GOAL_LINK = "panda_hand"
SKIP_LINKS = ("panda_link0",)  # on the stand: touching it is no collision


# --------------------------------------------------------------------------------------------
# Obstacles
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cuboid:
    """A box: ``dims`` (3,) full extents (m), ``pose`` (7,) wxyz_xyz of its centre frame."""

    name: str
    dims: tuple[float, float, float]
    pose: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class Cylinder:
    """A finite cylinder along its local z: ``radius``, ``height`` (m), ``pose`` (7,)
    wxyz_xyz of its centre frame."""

    name: str
    radius: float
    height: float
    pose: tuple[float, ...]


def xyz_wxyz_to_wxyz_xyz(pose: Sequence[float]) -> tuple[float, ...]:
    """The problem files' ``[x, y, z, qw, qx, qy, qz]`` to ``[qw, qx, qy, qz, x, y, z]``."""
    p = [float(v) for v in pose]
    if len(p) != 7:
        raise ValueError(f"a pose has 7 numbers, got {len(p)}")
    return (*p[3:], *p[:3])


def wxyz_xyz_to_xyz_wxyz(pose: Sequence[float]) -> list[float]:
    p = [float(v) for v in pose]
    return [*p[4:], *p[:4]]


def obstacles_from_yaml(obstacles: Mapping) -> tuple[tuple[Cuboid, ...], tuple[Cylinder, ...]]:
    """``obstacles:`` of a problem (``cuboid: {name: {dims, pose}}``, ``cylinder: {name:
    {radius, height, pose}}``, poses xyz_wxyz) to dataclasses in file order."""
    cuboids = tuple(
        Cuboid(name, tuple(float(d) for d in o["dims"]), xyz_wxyz_to_wxyz_xyz(o["pose"]))
        for name, o in (obstacles.get("cuboid") or {}).items()
    )
    cylinders = tuple(
        Cylinder(name, float(o["radius"]), float(o["height"]), xyz_wxyz_to_wxyz_xyz(o["pose"]))
        for name, o in (obstacles.get("cylinder") or {}).items()
    )
    return cuboids, cylinders


def pose_frame(pose_wxyz_xyz: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    pose = np.asarray(pose_wxyz_xyz, np.float64)
    return quat_wxyz_to_matrix(pose[:4]), pose[4:]


class Scene:
    """Cuboids and cylinders as arrays, for distances of many spheres at once.

    Attributes:
        names: obstacle names, cuboids first, then cylinders (the columns of
            :meth:`distances`).
    """

    def __init__(self, cuboids: Iterable[Cuboid] = (), cylinders: Iterable[Cylinder] = ()):
        cuboids, cylinders = tuple(cuboids), tuple(cylinders)
        self.names = tuple(o.name for o in cuboids) + tuple(o.name for o in cylinders)
        frames = [pose_frame(o.pose) for o in cuboids]
        self.box_rot = np.array([r for r, _ in frames]).reshape(-1, 3, 3)
        self.box_pos = np.array([p for _, p in frames]).reshape(-1, 3)
        self.box_half = np.array([o.dims for o in cuboids], np.float64).reshape(-1, 3) / 2
        frames = [pose_frame(o.pose) for o in cylinders]
        self.cyl_rot = np.array([r for r, _ in frames]).reshape(-1, 3, 3)
        self.cyl_pos = np.array([p for _, p in frames]).reshape(-1, 3)
        self.cyl_radius = np.array([o.radius for o in cylinders], np.float64)
        self.cyl_half_height = np.array([o.height for o in cylinders], np.float64) / 2
        if np.any(self.box_half <= 0) or np.any(self.cyl_radius <= 0):
            raise ValueError("obstacle sizes must be > 0")
        if np.any(self.cyl_half_height <= 0):
            raise ValueError("cylinder heights must be > 0")

    @staticmethod
    def from_yaml(obstacles: Mapping) -> Scene:
        return Scene(*obstacles_from_yaml(obstacles))

    def distances(self, centers: np.ndarray, radii: np.ndarray) -> np.ndarray:
        """(..., N) signed distances of spheres ``centers`` (..., 3), ``radii`` (...) to each
        obstacle (negative: penetration depth)."""
        centers = np.asarray(centers, np.float64)
        radii = np.asarray(radii, np.float64)
        box = box_signed_distance(centers, self.box_rot, self.box_pos, self.box_half)
        cyl = cylinder_signed_distance(
            centers, self.cyl_rot, self.cyl_pos, self.cyl_radius, self.cyl_half_height
        )
        return np.concatenate([box, cyl], axis=-1) - radii[..., None]


# --------------------------------------------------------------------------------------------
# Batched forward kinematics (test/batched_reference.py), taking the arm's 7 joints alone too
# --------------------------------------------------------------------------------------------


class Chain(batched_reference.Chain):
    """:class:`batched_reference.Chain` of the Panda: configurations of its 8 actuated joints
    or of the 7 arm joints alone (the fingers then at ``FINGER_OPEN``)."""

    def __init__(self, urdf_path: Path = PANDA_URDF_PATH):
        super().__init__(Path(urdf_path))

    def full(self, q: np.ndarray) -> np.ndarray:
        """(..., n) actuated values from (..., 7) arm values (fingers at ``FINGER_OPEN``) or
        (..., n) as they are."""
        q = np.asarray(q, np.float64)
        n = len(self.joint_names)
        if q.shape[-1] == len(ARM_JOINTS) < n and self.joint_names[:7] == ARM_JOINTS:
            fingers = np.full((*q.shape[:-1], n - 7), FINGER_OPEN)
            return np.concatenate([q, fingers], axis=-1)
        return super().full(q)


# --------------------------------------------------------------------------------------------
# Sphere model
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class SphereModel:
    """robometrics' sphere file: ``links`` (S,), ``centers`` (S, 3) in the link frames,
    ``radii`` (S,); ``self_pairs`` (P, 2) sphere indices checked against each other with
    ``self_limits`` (P,) = r_i + buffer(link_i) + r_j + buffer(link_j)."""

    links: tuple[str, ...]
    centers: np.ndarray
    radii: np.ndarray
    self_pairs: np.ndarray
    self_limits: np.ndarray

    @staticmethod
    def from_yaml(path: Path = SPHERES_PATH, chain: Chain | None = None) -> SphereModel:
        """Loads the file; raises ValueError when a link is not a link of ``chain``'s URDF
        (robometrics only warns, and would silently skip the link)."""
        data = yaml.safe_load(Path(path).read_text())
        known = set((chain or PANDA).links)
        spheres = data["collision_spheres"]
        unknown = sorted(set(spheres) - known)
        ignore = data.get("self_collision_ignore") or {}
        buffers = data.get("self_collision_buffer") or {}
        unknown += sorted({n for a, bs in ignore.items() for n in [a, *bs]} - known)
        if unknown:
            raise ValueError(f"sphere file names links that the URDF lacks: {unknown}")
        links, centers, radii = [], [], []
        for link, items in spheres.items():
            for s in items:
                links.append(link)
                centers.append([float(v) for v in s["center"]])
                radii.append(float(s["radius"]))
        skip = {frozenset((a, b)) for a, bs in ignore.items() for b in bs}
        pairs, limits = [], []
        for i in range(len(links)):
            for j in range(i + 1, len(links)):
                a, b = links[i], links[j]
                if a == b or frozenset((a, b)) in skip:
                    continue
                pairs.append((i, j))
                limits.append(
                    radii[i] + float(buffers.get(a, 0.0)) + radii[j] + float(buffers.get(b, 0.0))
                )
        return SphereModel(
            tuple(links),
            np.asarray(centers, np.float64).reshape(-1, 3),
            np.asarray(radii, np.float64),
            np.asarray(pairs, int).reshape(-1, 2),
            np.asarray(limits, np.float64),
        )

    def world_centers(self, poses: Mapping[str, np.ndarray]) -> np.ndarray:
        """(B, S, 3) sphere centres from link poses {link: (B, 4, 4)}."""
        out = np.empty((next(iter(poses.values())).shape[0], len(self.links), 3))
        for link in dict.fromkeys(self.links):
            idx = [i for i, n in enumerate(self.links) if n == link]
            t = poses[link]
            out[:, idx] = (
                np.einsum("bij,sj->bsi", t[:, :3, :3], self.centers[idx]) + t[:, None, :3, 3]
            )
        return out


PANDA = Chain()
FRANKA = SphereModel.from_yaml(SPHERES_PATH, PANDA)


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Clearance:
    """Per configuration (B,): smallest signed world distance over the checked spheres, and
    smallest self margin (centre distance minus the pair's limit); ``world_at`` / ``self_at``
    say which sphere link and obstacle (or link pair)."""

    world: np.ndarray
    self_margin: np.ndarray
    world_at: tuple[str, ...]
    self_at: tuple[str, ...]


def clearances(
    q: np.ndarray,
    scene: Scene,
    *,
    spheres: SphereModel = FRANKA,
    skip_links: Sequence[str] = SKIP_LINKS,
    chain: Chain = PANDA,
) -> Clearance:
    """World and self clearances of configurations ``q`` (B, 7 or 8)."""
    q = np.atleast_2d(np.asarray(q, np.float64))
    if not len(q):
        return Clearance(np.zeros(0), np.zeros(0), (), ())
    centers = spheres.world_centers(chain.poses(q))
    keep = np.array([link not in skip_links for link in spheres.links])
    batch = len(q)
    if len(scene.names) and keep.any():
        d = scene.distances(centers[:, keep], spheres.radii[keep])  # (B, S', N)
        flat = d.reshape(batch, -1)
        arg = flat.argmin(axis=1)
        world = flat[np.arange(batch), arg]
        kept_links = [n for n, k in zip(spheres.links, keep) if k]
        n_obs = len(scene.names)
        world_at = tuple(f"{kept_links[a // n_obs]}-{scene.names[a % n_obs]}" for a in arg)
    else:
        world, world_at = np.full(batch, np.inf), ("",) * batch
    if len(spheres.self_pairs):
        i, j = spheres.self_pairs[:, 0], spheres.self_pairs[:, 1]
        gap = np.linalg.norm(centers[:, i] - centers[:, j], axis=-1) - spheres.self_limits
        arg = gap.argmin(axis=1)
        self_margin = gap[np.arange(batch), arg]
        self_at = tuple(
            f"{spheres.links[spheres.self_pairs[a, 0]]}-{spheres.links[spheres.self_pairs[a, 1]]}"
            for a in arg
        )
    else:
        self_margin, self_at = np.full(batch, np.inf), ("",) * batch
    return Clearance(world, self_margin, world_at, self_at)


def densify(path: np.ndarray, samples: int = 20, max_step: float = 0.005) -> np.ndarray:
    """(M, n) knots of ``path`` (T, n) and, in every segment, evenly spaced inner points:
    at least ``samples - 1`` of them, and enough that no joint moves more than ``max_step``
    rad (or m) between neighbours."""
    path = np.asarray(path, np.float64)
    if len(path) < 2:
        return path
    out = [path[:1]]
    for a, b in itertools.pairwise(path):
        count = max(samples, math.ceil(float(np.max(np.abs(b - a))) / max_step))
        f = np.arange(1, count + 1)[:, None] / count
        out.append(a + f * (b - a))
    return np.concatenate(out)


def goal_errors(q: np.ndarray, goal_wxyz_xyz: Sequence[float]) -> tuple[float, float]:
    """(position error m, orientation error rad) of ``panda_hand`` at ``q`` (7 or 8,) by
    :func:`reference_fk.reference_fk`."""
    goal = np.asarray(goal_wxyz_xyz, np.float64)
    target = make_transform(quat_wxyz_to_matrix(goal[:4]), goal[4:])
    pose = reference_fk(PANDA.model, PANDA.full(q), PANDA.joint_names)[GOAL_LINK]
    return pose_errors(target, pose)


def within_limits(path: np.ndarray, chain: Chain = PANDA, slack: float = 1e-9) -> bool:
    q = chain.full(np.atleast_2d(path))
    return bool(np.all(q >= chain.lower - slack) and np.all(q <= chain.upper + slack))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Result of :func:`check_path`.

    Attributes:
        ok: all of the below hold.
        position_error, orientation_error: of the last knot (m, rad).
        within_limits: every knot inside the URDF limits.
        world_clearance: smallest signed sphere-obstacle distance along the dense path (m).
        self_clearance: smallest self margin along it (m; < 0 is a self collision).
        reason: "" when ok, else what failed and where.
    """

    ok: bool
    position_error: float
    orientation_error: float
    within_limits: bool
    world_clearance: float
    self_clearance: float
    reason: str


def check_path(
    path: np.ndarray,
    goal_wxyz_xyz: Sequence[float],
    scene: Scene,
    *,
    samples: int = 20,
    max_step: float = 0.005,
    skip_links: Sequence[str] = SKIP_LINKS,
    self_collision: bool = True,
    spheres: SphereModel = FRANKA,
) -> Verdict:
    """Judges a path (T, 7 or 8) to a ``panda_hand`` goal pose (7,) wxyz_xyz."""
    path = np.atleast_2d(np.asarray(path, np.float64))
    if not np.all(np.isfinite(path)):
        return Verdict(False, math.inf, math.inf, False, -math.inf, -math.inf, "not finite")
    reasons = []
    p_err, r_err = goal_errors(path[-1], goal_wxyz_xyz)
    if p_err > POSITION_TOLERANCE or r_err > ORIENTATION_TOLERANCE:
        reasons.append(f"goal {p_err * 1e3:.2f} mm / {math.degrees(r_err):.2f} deg")
    limits = within_limits(path)
    if not limits:
        reasons.append("outside joint limits")
    dense = densify(path, samples, max_step)
    c = clearances(dense, scene, spheres=spheres, skip_links=skip_links)
    w = int(np.argmin(c.world))
    world = float(c.world[w])
    if world < 0:
        reasons.append(f"collision {c.world_at[w]} {world * 1e3:.1f} mm")
    s = int(np.argmin(c.self_margin))
    self_margin = float(c.self_margin[s])
    if self_collision and self_margin < 0:
        reasons.append(f"self collision {c.self_at[s]} {self_margin * 1e3:.1f} mm")
    return Verdict(not reasons, p_err, r_err, limits, world, self_margin, "; ".join(reasons))


def configuration_valid(
    q: np.ndarray, scene: Scene, *, buffer: float = 0.0, skip_links: Sequence[str] = SKIP_LINKS
) -> np.ndarray:
    """(B,) bool: inside the limits, every checked sphere at least ``buffer`` from the scene,
    no self collision; for configurations ``q`` (B, 7 or 8)."""
    q = np.atleast_2d(np.asarray(q, np.float64))
    full = PANDA.full(q)
    inside = np.all((full >= PANDA.lower) & (full <= PANDA.upper), axis=1)
    c = clearances(q, scene, skip_links=skip_links)
    return inside & (c.world >= buffer) & (c.self_margin >= 0)
