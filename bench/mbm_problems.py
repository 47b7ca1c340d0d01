#!/usr/bin/env python3
"""MotionBenchMaker problems for the Panda: a loader of problem files and a seeded generator.

Problem files are in the format of robometrics' / cuRobo's evaluation sets (example:
``test/data/mbm/demo_set.yaml``): ``{family}_panda: [problem, ...]``, each problem with
``obstacles`` (``cuboid``: ``dims``, ``pose``; ``cylinder``: ``radius``, ``height``,
``pose``; poses ``[x, y, z, qw, qx, qy, qz]`` in ``panda_link0``), ``start`` (7 arm joints),
``goal_pose`` (``panda_hand``: ``position_xyz``, ``quaternion_wxyz``) and ``goal_ik``.

The generator follows MotionBenchMaker (Chamzas et al., "MotionBenchMaker: A Tool to Generate
and Benchmark Motion Planning Datasets", RA-L 2022; github.com/KavrakiLab/motion_bench_maker,
BSD-3-Clause): per family a nominal scene (the sizes and poses of its ``configs/scenes/``
files, transcribed below) moved by the family's base offset, then perturbed by a "World"
variation (a uniform random translation and yaw of the whole scene about the robot) and by
per-object variations (uniform, in each object's own frame); the start is the Panda's default
state (``table_under_pick``: collision-free IK under the table) and the goal a ``panda_hand``
pose from a task query (a grasp pose offset from a randomly chosen object, within the query's
tolerances), turned into configurations by collision-free IK. As in robometrics' sets, the
robot stands on ``cube_robot_stand`` (under ``panda_link0``, which touches it).

Independence: validity (inside the limits, no sphere of robometrics' Franka model but
``panda_link0``'s inside an obstacle, no self collision) is judged by ``test/mbm_check.py``;
like MotionBenchMaker, which checks starts and goals with MoveIt against the robot's
collision meshes, the real collision geometry must also be clear of the scene
(``test/mbm_mesh.py``: robometrics' spheres leave part of the forearm uncovered, and 8 of the
70 problems of the set made before this rule had no goal configuration the real Panda could
take: its forearm 1.3-2 cm inside the cage or shelf). The IK below is damped least squares over its float64 forward kinematics: nothing of
pyroki_ros is used, and problems are never filtered by whether any planner solves them
(MotionBenchMaker keeps only problems an OMPL planner solved; that step is not reproduced,
so a problem may in principle have no collision-free path).

Usage (repository root)::

    .venv/bin/python bench/mbm_problems.py --generate --per-family 10 --seed 0 \\
        --out test/data/mbm/generated_seed0.yaml
    .venv/bin/python bench/mbm_problems.py --check test/data/mbm/generated_seed0.yaml
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import common  # noqa: F401 -- puts test/ (mbm_check, reference_fk) on sys.path

import mbm_check as mc
import mbm_mesh
import numpy as np
import yaml
from mbm_check import Cuboid, Cylinder
from reference_fk import quat_wxyz_to_matrix, rpy_to_matrix, so3_log

DEMO_SET = mc.DATA / "demo_set.yaml"
GENERATED_SET = mc.DATA / "generated_seed0.yaml"  # the evaluation set (docs/benchmarks/mbm*.md)
TUNING_SET = mc.DATA / "generated_seed1.yaml"  # planner settings are chosen on this one
# MotionBenchMaker's default Panda state (robowflex_resources), the start of its problems.
READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
STAND = Cuboid("cube_robot_stand", (0.3, 0.25, 0.8), (1.0, 0.0, 0.0, 0.0, -0.05, 0.0, -0.4))
GOAL_IK_KEEP = 8  # distinct goal configurations written per problem


# --------------------------------------------------------------------------------------------
# Problems and their files
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class Problem:
    """One planning problem (all in ``panda_link0``'s frame).

    Attributes:
        name: ``{family}/{index}`` (index in its file's list).
        family: e.g. ``bookshelf_small`` (the file key without ``_panda``).
        cuboids, cylinders: the obstacles (poses wxyz_xyz).
        start: (7,) arm joints.
        goal_pose: (7,) ``panda_hand`` pose, wxyz_xyz.
        goal_ik: (K, 7) configurations reaching the goal (robometrics' demo set: the first
            exactly, the others only within about a centimetre).
        collision_buffer_ik: margin the goal configurations were made with (m).
    """

    name: str
    family: str
    cuboids: tuple[Cuboid, ...]
    cylinders: tuple[Cylinder, ...]
    start: np.ndarray
    goal_pose: np.ndarray
    goal_ik: np.ndarray
    collision_buffer_ik: float = 0.0

    @property
    def scene(self) -> mc.Scene:
        return mc.Scene(self.cuboids, self.cylinders)

    def to_yaml(self) -> dict:
        """The problem as written in a problem file."""
        goal = [float(v) for v in self.goal_pose]
        return {
            "collision_buffer_ik": float(self.collision_buffer_ik),
            "goal_ik": [[float(v) for v in q] for q in self.goal_ik],
            "goal_pose": {
                "frame": mc.GOAL_LINK,
                "position_xyz": goal[4:],
                "quaternion_wxyz": goal[:4],
            },
            "obstacles": {
                "cuboid": {
                    o.name: {"dims": list(o.dims), "pose": mc.wxyz_xyz_to_xyz_wxyz(o.pose)}
                    for o in self.cuboids
                },
                "cylinder": {
                    o.name: {
                        "height": o.height,
                        "pose": mc.wxyz_xyz_to_xyz_wxyz(o.pose),
                        "radius": o.radius,
                    }
                    for o in self.cylinders
                },
            },
            "start": [float(v) for v in self.start],
            "world_frame": "panda_link0",
        }


def _frozen(a) -> np.ndarray:
    a = np.array(a, np.float64)
    a.flags.writeable = False
    return a


def problem_from_yaml(name: str, family: str, entry: dict) -> Problem:
    goal = entry["goal_pose"]
    if goal.get("frame", mc.GOAL_LINK) != mc.GOAL_LINK:
        raise ValueError(f"{name}: goal frame {goal['frame']!r}, expected {mc.GOAL_LINK!r}")
    if entry.get("world_frame", "panda_link0") != "panda_link0":
        raise ValueError(f"{name}: world frame {entry['world_frame']!r}, expected panda_link0")
    cuboids, cylinders = mc.obstacles_from_yaml(entry.get("obstacles") or {})
    start = _frozen(entry["start"])
    if start.shape != (7,):
        raise ValueError(f"{name}: start needs 7 joints, got {start.shape}")
    return Problem(
        name=name,
        family=family,
        cuboids=cuboids,
        cylinders=cylinders,
        start=start,
        goal_pose=_frozen([*goal["quaternion_wxyz"], *goal["position_xyz"]]),
        goal_ik=_frozen(np.reshape(entry.get("goal_ik") or [], (-1, 7))),
        collision_buffer_ik=float(entry.get("collision_buffer_ik", 0.0)),
    )


def load_problems(path: Path | str = DEMO_SET) -> list[Problem]:
    """Every problem of a file, in file order (families as keyed, ``_panda`` dropped)."""
    data = yaml.safe_load(Path(path).read_text())
    out = []
    for key, entries in data.items():
        family = key.removesuffix("_panda")
        out += [problem_from_yaml(f"{family}/{i}", family, e) for i, e in enumerate(entries)]
    return out


def dump_problems(problems: Iterable[Problem], path: Path | str, header: str = "") -> None:
    """Writes problems grouped by family (``{family}_panda`` keys, in first-seen order)."""
    groups: dict[str, list[dict]] = {}
    for p in problems:
        groups.setdefault(f"{p.family}_panda", []).append(p.to_yaml())
    text = yaml.safe_dump(groups, default_flow_style=None, sort_keys=False, width=1000)
    comment = "".join(f"# {line}\n" for line in header.splitlines())
    Path(path).write_text(comment + text)


# --------------------------------------------------------------------------------------------
# MotionBenchMaker families (sizes and poses from motion_bench_maker's configs/)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Shape:
    """A nominal object: ``size`` is ``dims`` (3,) of a box or ``(height, radius)`` of a
    cylinder; ``position`` (3,) and ``wxyz`` (4,) in the scene frame."""

    name: str
    kind: str  # "box" | "cylinder"
    size: tuple[float, ...]
    position: tuple[float, float, float]
    wxyz: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)


@dataclasses.dataclass(frozen=True)
class Variation:
    """Uniform perturbation: position in [-p, p] and roll/pitch/yaw in [-a, a] per axis."""

    names: tuple[str, ...]  # () = the whole scene (MotionBenchMaker's "World")
    position: tuple[float, float, float]
    rpy: tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class Query:
    """A hand pose relative to one of ``objects``: ``offset`` then the end-effector offset;
    ``position_tolerance`` (3,) full extents of the box the position is drawn from and
    ``orientation_tolerance`` (3,) rad, both in the query frame."""

    objects: tuple[str, ...]
    position: tuple[float, float, float]
    wxyz: tuple[float, float, float, float]
    position_tolerance: tuple[float, float, float]
    orientation_tolerance: tuple[float, float, float]


@dataclasses.dataclass(frozen=True)
class Family:
    """A scene family: nominal shapes, base offset, variations, start and goal queries, and
    the end-effector offset (``panda_link8`` -> query frame) of the problem config."""

    name: str
    shapes: tuple[Shape, ...]
    base_offset: tuple[float, float, float]
    world: Variation
    objects: tuple[Variation, ...]
    goal: Query
    start: Query | None
    ee_position: tuple[float, float, float]
    ee_wxyz: tuple[float, float, float, float]


def _box(name, dims, position, wxyz=(1.0, 0.0, 0.0, 0.0)) -> Shape:
    return Shape(name, "box", tuple(dims), tuple(position), tuple(wxyz))


def _can(name, position, height=0.14, radius=0.03) -> Shape:
    return Shape(name, "cylinder", (height, radius), tuple(position))


_FRONT = ((1.0, 0.0, 0.0, 0.0), (0.01, 0.01, 0.01), (0.01, 0.01, 0.01))
_TOP_DOWN = (0.707, 0.0, 0.707, 0.0)  # +90 deg about y: the query's x axis points down
_SHELF_EE = ((0.0, 0.0, -0.08), (0.653, -0.271, -0.653, -0.271))

_SMALL = (
    _can("Can1", (0.9, 0, 1.08)),
    _can("Can2", (0.7, 0, 1.08)),
    _can("Can3", (0.5, 0, 1.08)),
    _box("shelf_bottom", (1.2, 1, 0.04), (1, 0, 1)),
    _box("side_left", (1.2, 0.04, 0.34), (1, -0.5, 1.15)),
    _box("side_right", (1.2, 0.04, 0.34), (1, 0.5, 1.15)),
    _box("shelf_top", (1.2, 1, 0.04), (1, 0, 1.3)),
)
_TALL = tuple(
    _can(f"Can{3 * row + col + 1}", (0.9 - 0.2 * col, 0, z))
    for row, z in enumerate((1.38, 0.78, 1.08))
    for col in range(3)
) + (
    _box("shelf_bottom", (1.2, 1, 0.04), (1.0, 0, 0.7)),
    _box("shelf_middle_bottom", (1.2, 1, 0.04), (1.0, 0, 1.0)),
    _box("shelf_middle_top", (1.2, 1, 0.04), (1.0, 0, 1.3)),
    _box("shelf_top", (1.2, 1, 0.04), (1, 0, 1.6)),
    _box("side_left", (1.3, 0.04, 1.64), (1, -0.5, 0.82)),
    _box("side_right", (1.3, 0.04, 1.64), (1, 0.5, 0.82)),
)
_THIN = tuple(
    _can(f"Can{2 * level + col + 1}", (1.1 - 0.3 * col, 0.25 * (-1) ** level, z))
    for level, z in enumerate((0.44, 0.69, 0.94, 1.19, 1.44))
    for col in range(2)
) + (
    _box("shelf_bottom", (0.62, 1, 0.04), (1.0, 0.0, 0.35)),
    _box("shelf_middle_bottom", (0.62, 1, 0.04), (1.0, 0, 0.6)),
    _box("shelf_middle", (0.62, 1, 0.04), (1.0, 0, 0.85)),
    _box("shelf_middle_top", (0.62, 1, 0.04), (1, 0, 1.1)),
    _box("shelf_top", (0.62, 1, 0.04), (1, 0, 1.35)),
    _box("shelf_vert", (0.62, 0.04, 1.4), (1, 0, 0.9)),
    _box("shelf_top_top", (0.62, 1, 0.04), (1, 0, 1.6)),
    _box("leg_fr", (0.04, 0.04, 1.64), (0.7, 0.5, 0.82)),
    _box("leg_fl", (0.04, 0.04, 1.64), (0.7, -0.5, 0.82)),
    _box("leg_br", (0.04, 0.04, 1.64), (1.3, 0.5, 0.82)),
    _box("leg_bl", (0.04, 0.04, 1.64), (1.3, -0.5, 0.82)),
)
_CAGE = (
    _box("Cube1", (0.07, 0.07, 0.07), (0.8, 0, 0.52)),
    _box("base", (0.7, 0.7, 0.04), (0.8, 0, 0.44)),
    _box("side_left", (0.7, 0.04, 0.7), (0.8, -0.35, 0.8)),
    _box("side_right", (0.7, 0.04, 0.7), (0.8, 0.35, 0.8)),
    _box("side_frontB", (0.04, 0.7, 0.04), (0.45, 0, 0.9)),
    _box("side_frontA", (0.04, 0.7, 0.04), (0.45, 0, 0.6)),
    _box("side_cap", (0.65, 0.65, 0.04), (0.85, 0, 1.15)),
    _box("side_back", (0.04, 0.7, 0.7), (1.15, 0, 0.8)),
)
_BOX = (
    _can("Can1", (0.8, 0, 0.55)),
    _box("base", (0.7, 0.7, 0.04), (0.8, 0, 0.44)),
    _box("side_left", (0.7, 0.04, 0.7), (0.8, -0.35, 0.8)),
    _box("side_right", (0.7, 0.04, 0.7), (0.8, 0.35, 0.8)),
    _box("side_front", (0.04, 0.7, 0.6), (0.45, 0, 0.7)),
    _box("side_cap", (0.7, 0.7, 0.04), (0.9, 0, 1.35), (0.924, 0.0, 0.383, 0.0)),
    _box("side_back", (0.04, 0.7, 0.7), (1.15, 0, 0.8)),
)
_TABLE = (
    _can("Can1", (0.85, 0, 0.8), height=0.12),
    _box("Cube", (0.25, 0.25, 0.25), (0.75, 0.4, 0.85)),
    _box("table_leg_left_back", (0.05, 0.05, 0.7), (1.5, 0.85, 0.35)),
    _box("table_leg_left_front", (0.05, 0.05, 0.7), (0.6, 0.85, 0.35)),
    _box("table_leg_right_back", (0.05, 0.05, 0.7), (1.5, -0.85, 0.35)),
    _box("table_leg_right_front", (0.05, 0.05, 0.7), (0.6, -0.85, 0.35)),
    _box("table_top", (1.2, 2, 0.04), (1.05, 0, 0.7)),
    _can("Object1", (1.35, 0, 0.85), height=0.35, radius=0.05),
    _box("Object2", (0.2, 0.02, 0.4), (1.05, -0.2, 0.9)),
    _box("Object3", (0.02, 0.2, 0.4), (0.65, 0.2, 0.9)),
    _box("Object4", (0.2, 0.05, 0.35), (0.65, -0.2, 0.9)),
    _box("Object5", (0.2, 0.05, 0.35), (1.05, 0.2, 0.9)),
)
_TABLE_OBJECTS = (
    Variation(("Can1",), (0.05, 0.05, 0.0), (0.0, 0.0, 0.0)),
    Variation(
        ("Object1", "Object2", "Object3", "Object4", "Object5", "Cube"),
        (0.1, 0.1, 0.0),
        (0.0, 0.0, 1.57),
    ),
)
_TABLE_PICK = Query(("Can1",), (-0.2, 0.0, 0.025), (1.0, 0.0, 0.0, 0.0), (1e-4,) * 3, (3e-3,) * 3)


def _cans(shapes: Sequence[Shape]) -> tuple[str, ...]:
    return tuple(s.name for s in shapes if s.name.startswith("Can"))


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "bookshelf_small",
            _SMALL,
            (0.2, 0.0, -0.7),
            Variation((), (0.1, 0.1, 0.4), (0.0, 0.0, 1.57)),
            (Variation(_cans(_SMALL), (0.0, 0.45, 0.0), (0.0, 0.0, 0.0)),),
            Query(_cans(_SMALL), (-0.2, 0.0, 0.05), *_FRONT),
            None,
            *_SHELF_EE,
        ),
        Family(
            "bookshelf_tall",
            _TALL,
            (0.3, 0.0, -0.7),
            Variation((), (0.1, 0.1, 0.0), (0.0, 0.0, 1.57)),
            (Variation(_cans(_TALL), (0.0, 0.45, 0.0), (0.0, 0.0, 0.0)),),
            Query(_cans(_TALL), (-0.2, 0.0, 0.05), *_FRONT),
            None,
            *_SHELF_EE,
        ),
        Family(
            "bookshelf_thin",
            _THIN,
            (-0.1, 0.0, -0.7),
            Variation((), (0.1, 0.1, 0.0), (0.0, 0.0, 1.57)),
            (Variation(_cans(_THIN), (0.0, 0.2, 0.0), (0.0, 0.0, 0.0)),),
            # Goals at Can1..Can9 (Can10 has no query in MotionBenchMaker either).
            Query(_cans(_THIN)[:9], (-0.2, 0.0, 0.05), *_FRONT),
            None,
            *_SHELF_EE,
        ),
        Family(
            "cage",
            _CAGE,
            (0.0, 0.0, -0.18),
            Variation((), (0.1, 0.1, 0.1), (0.0, 0.0, 0.5)),
            (),
            Query(("Cube1",), (0.0, 0.0, 0.21), _TOP_DOWN, (0.05, 0.05, 0.01), (0.01,) * 3),
            None,
            (0.13, -0.13, 0.11),
            (0.383, 0.0, 0.0, 0.924),
        ),
        Family(
            "box",
            _BOX,
            (-0.15, 0.0, -1.02),
            Variation((), (0.1, 0.1, 0.1), (0.0, 0.0, 1.57)),
            (Variation(("Can1",), (0.0, 0.2, 0.0), (0.0, 0.0, 0.0)),),
            Query(("Can1",), (0.0, 0.0, 0.25), _TOP_DOWN, (0.01,) * 3, (0.01,) * 3),
            None,
            (0.0, 0.0, -0.08),
            (0.271, -0.653, -0.271, -0.653),
        ),
        Family(
            "table_pick",
            _TABLE,
            (0.1, 0.1, -0.5),
            Variation((), (0.1, 0.1, 0.1), (0.0, 0.0, 1.57)),
            _TABLE_OBJECTS,
            _TABLE_PICK,
            None,
            *_SHELF_EE,
        ),
        Family(
            "table_under_pick",
            _TABLE,
            (0.1, 0.1, -0.5),
            Variation((), (0.1, 0.1, 0.1), (0.0, 0.0, 1.57)),
            _TABLE_OBJECTS,
            _TABLE_PICK,
            Query(
                ("table_top",), (-0.5, 0.0, -0.3), (1.0, 0.0, 0.0, 0.0), (1e-4,) * 3, (3e-3,) * 3
            ),
            *_SHELF_EE,
        ),
    )
}
# panda_hand in panda_link8 (URDF panda_hand_joint): the queries' tip is panda_link8.
HAND_IN_LINK8 = np.eye(4)
HAND_IN_LINK8[:3, :3] = rpy_to_matrix((0.0, 0.0, -math.pi / 4))


def _transform(position: Sequence[float], rot: np.ndarray) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rot
    t[:3, 3] = position
    return t


def _quat_wxyz(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w >= 0) of a rotation matrix (Shepperd's method)."""
    m = rot
    tr = np.trace(m)
    if tr > 0:
        s = 2.0 * math.sqrt(1.0 + tr)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0] * 4
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q = np.asarray(q) / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def _pose_wxyz_xyz(t: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in (*_quat_wxyz(t[:3, :3]), *t[:3, 3]))


def _uniform_transform(rng: np.random.Generator, position, rpy) -> np.ndarray:
    p = rng.uniform(-1.0, 1.0, 3) * np.asarray(position, np.float64)
    a = rng.uniform(-1.0, 1.0, 3) * np.asarray(rpy, np.float64)
    return _transform(p, rpy_to_matrix(a))


def sample_scene(family: Family, rng: np.random.Generator) -> dict[str, tuple[Shape, np.ndarray]]:
    """{name: (nominal shape, 4x4 pose in panda_link0)} of one perturbed scene."""
    world = _uniform_transform(rng, family.world.position, family.world.rpy)
    offset = _transform(family.base_offset, np.eye(3))
    poses = {
        s.name: (s, world @ offset @ _transform(s.position, quat_wxyz_to_matrix(s.wxyz)))
        for s in family.shapes
    }
    for var in family.objects:  # each object its own draw, in its own frame
        for name in var.names:
            shape, pose = poses[name]
            poses[name] = (shape, pose @ _uniform_transform(rng, var.position, var.rpy))
    return poses


def scene_obstacles(
    poses: dict[str, tuple[Shape, np.ndarray]],
) -> tuple[tuple[Cuboid, ...], tuple[Cylinder, ...]]:
    """Cuboids (the stand first) and cylinders of a sampled scene."""
    cuboids, cylinders = [STAND], []
    for name, (shape, pose) in poses.items():
        if shape.kind == "box":
            cuboids.append(Cuboid(name, tuple(map(float, shape.size)), _pose_wxyz_xyz(pose)))
        else:
            height, radius = shape.size
            cylinders.append(Cylinder(name, float(radius), float(height), _pose_wxyz_xyz(pose)))
    return tuple(cuboids), tuple(cylinders)


def query_hand_pose(
    family: Family,
    query: Query,
    poses: dict[str, tuple[Shape, np.ndarray]],
    rng: np.random.Generator,
) -> np.ndarray:
    """4x4 ``panda_hand`` target: a random object of the query, its offset, a draw inside
    the tolerances, then the end-effector offset and panda_link8 -> panda_hand."""
    obj = query.objects[int(rng.integers(len(query.objects)))]
    base = poses[obj][1] @ _transform(query.position, quat_wxyz_to_matrix(query.wxyz))
    jitter = _uniform_transform(
        rng, np.asarray(query.position_tolerance) / 2, query.orientation_tolerance
    )
    ee = _transform(family.ee_position, quat_wxyz_to_matrix(family.ee_wxyz))
    return base @ jitter @ np.linalg.inv(ee) @ HAND_IN_LINK8


# --------------------------------------------------------------------------------------------
# Independent IK (damped least squares over mbm_check's float64 FK)
# --------------------------------------------------------------------------------------------


def _log_batch(rot: np.ndarray) -> np.ndarray:
    """(B, 3) rotation vectors of rotations (B, 3, 3); near pi by reference_fk.so3_log."""
    vee = 0.5 * np.stack(
        [rot[:, 2, 1] - rot[:, 1, 2], rot[:, 0, 2] - rot[:, 2, 0], rot[:, 1, 0] - rot[:, 0, 1]],
        axis=1,
    )
    s = np.linalg.norm(vee, axis=1)
    angle = np.arctan2(s, 0.5 * (np.trace(rot, axis1=1, axis2=2) - 1.0))
    scale = np.where(angle < 1e-6, 1.0 + angle**2 / 6.0, angle / np.maximum(s, 1e-300))
    out = vee * scale[:, None]
    for i in np.flatnonzero(math.pi - angle <= 1e-4):  # the axis is not in vee there
        out[i] = so3_log(rot[i])
    return out


def solve_ik(
    target: np.ndarray,
    rng: np.random.Generator,
    *,
    seeds: int = 48,
    iterations: int = 150,
    damping: float = 0.02,
    extra_seeds: Sequence[np.ndarray] = (),
) -> np.ndarray:
    """(K, 7) arm configurations inside the limits whose ``panda_hand`` is within 1e-6 m /
    1e-6 rad of ``target`` (4x4), from ``seeds`` random starts (plus ``extra_seeds``).
    Collisions are not looked at here."""
    lower, upper = mc.PANDA.lower[:7], mc.PANDA.upper[:7]
    q = rng.uniform(lower, upper, (seeds, 7))
    if len(extra_seeds):
        q = np.concatenate([np.asarray(extra_seeds, np.float64).reshape(-1, 7), q])
    goal_rot, goal_pos = target[:3, :3], target[:3, 3]
    eye = np.eye(6) * damping**2
    for _ in range(iterations):
        pose, jac = mc.PANDA.jacobian(q, mc.GOAL_LINK)
        jac = jac[:, :, :7]
        err = np.empty((len(q), 6))
        err[:, :3] = goal_pos - pose[:, :3, 3]
        # World-frame rotation error: R_goal = exp(e) R.
        err[:, 3:] = _log_batch(goal_rot @ pose[:, :3, :3].transpose(0, 2, 1))
        if np.all(np.linalg.norm(err, axis=1) < 1e-9):
            break
        y = np.linalg.solve(jac @ jac.transpose(0, 2, 1) + eye, err[..., None])[..., 0]
        step = np.einsum("bji,bj->bi", jac, y)  # J^T (J J^T + l^2 I)^-1 e
        norm = np.linalg.norm(step, axis=1, keepdims=True)
        step *= np.minimum(1.0, 0.5 / np.maximum(norm, 1e-12))  # trust region: 0.5 rad
        q = np.clip(q + step, lower, upper)
    pose = mc.PANDA.poses(q)[mc.GOAL_LINK]
    p_err = np.linalg.norm(pose[:, :3, 3] - goal_pos, axis=1)
    r_err = np.linalg.norm(_log_batch(goal_rot.T @ pose[:, :3, :3]), axis=1)
    return q[(p_err < 1e-6) & (r_err < 1e-6)]


def distinct(qs: np.ndarray, near: np.ndarray, tol: float = 1e-2) -> np.ndarray:
    """``qs`` (K, 7) without near-duplicates (max joint difference < ``tol``), nearest to
    ``near`` (7,) first."""
    order = np.argsort(np.linalg.norm(qs - near, axis=1), kind="stable")
    kept: list[np.ndarray] = []
    for q in qs[order]:
        if all(np.max(np.abs(q - k)) >= tol for k in kept):
            kept.append(q)
    return np.asarray(kept).reshape(-1, 7)


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


def valid(q: np.ndarray, scene: mc.Scene) -> np.ndarray:
    """(B,) bool: valid as the check judges (:func:`mbm_check.configuration_valid`: limits,
    robometrics' spheres, self collision) and as MotionBenchMaker judges (the real collision
    geometry clear of the scene: :func:`mbm_mesh.mesh_valid`), for configurations (B, 7)."""
    q = np.atleast_2d(np.asarray(q, np.float64))
    ok = mc.configuration_valid(q, scene)
    if ok.any():
        ok[ok] = mbm_mesh.mesh_valid(q[ok], scene)
    return ok


def generate_problem(
    family: Family, index: int, seed: int, max_attempts: int = 200
) -> tuple[Problem, dict[str, int]]:
    """Problem ``index`` of ``family`` for ``seed`` (its own random stream, so a problem does
    not depend on how many others are made) and why earlier scene draws were dropped
    ({reason: count}). Draws scenes until the start and at least one goal configuration are
    :func:`valid` (zero collision buffer, as robometrics' sets; the real geometry as
    MotionBenchMaker)."""
    family_index = list(FAMILIES).index(family.name)
    rng = np.random.default_rng([seed, family_index, index])
    dropped: dict[str, int] = {}
    for _ in range(max_attempts):
        poses = sample_scene(family, rng)
        cuboids, cylinders = scene_obstacles(poses)
        scene = mc.Scene(cuboids, cylinders)
        if family.start is None:
            start = READY
            if not valid(start, scene)[0]:
                dropped["start in collision"] = dropped.get("start in collision", 0) + 1
                continue
        else:
            target = query_hand_pose(family, family.start, poses, rng)
            starts = solve_ik(target, rng, extra_seeds=[READY])
            starts = starts[valid(starts, scene)]
            if not len(starts):
                dropped["no valid start IK"] = dropped.get("no valid start IK", 0) + 1
                continue
            start = distinct(starts, READY)[0]
        target = query_hand_pose(family, family.goal, poses, rng)
        goals = solve_ik(target, rng, extra_seeds=[start])
        if not len(goals):
            dropped["goal unreachable"] = dropped.get("goal unreachable", 0) + 1
            continue
        goals = distinct(goals[valid(goals, scene)], start)
        if not len(goals):
            dropped["goal IK in collision"] = dropped.get("goal IK in collision", 0) + 1
            continue
        problem = Problem(
            name=f"{family.name}/{index}",
            family=family.name,
            cuboids=cuboids,
            cylinders=cylinders,
            start=_frozen(start),
            goal_pose=_frozen(_pose_wxyz_xyz(target)),
            goal_ik=_frozen(goals[:GOAL_IK_KEEP]),
        )
        return problem, dropped
    raise RuntimeError(f"{family.name}/{index}: no valid problem in {max_attempts} scenes")


def generate(
    per_family: int, seed: int, families: Sequence[str] | None = None, log=None
) -> list[Problem]:
    """``per_family`` problems of each family (default all seven), deterministic in
    ``seed``."""
    out = []
    for name in families or list(FAMILIES):
        for i in range(per_family):
            t0 = time.perf_counter()
            problem, dropped = generate_problem(FAMILIES[name], i, seed)
            out.append(problem)
            if log:
                why = ", ".join(f"{k} {v}" for k, v in dropped.items()) or "none"
                log(
                    f"{problem.name}: {len(problem.goal_ik)} goal configurations, "
                    f"{time.perf_counter() - t0:.1f} s; scenes dropped: {why}"
                )
    return out


def validate(problem: Problem) -> list[str]:
    """What makes a problem invalid (empty when valid): start or first goal configuration
    not :func:`valid` (outside the limits, in collision by robometrics' spheres or by the
    real geometry), or that configuration not at the goal pose within 1 mm / 1 degree."""
    scene = problem.scene
    errors = []
    if not valid(problem.start, scene)[0]:
        errors.append("start invalid")
    if not len(problem.goal_ik):
        return [*errors, "no goal_ik"]
    if not valid(problem.goal_ik[0], scene)[0]:
        errors.append("goal_ik[0] invalid")
    p_err, r_err = mc.goal_errors(problem.goal_ik[0], problem.goal_pose)
    if p_err > mc.POSITION_TOLERANCE or r_err > mc.ORIENTATION_TOLERANCE:
        errors.append(f"goal_ik[0] misses the goal by {p_err * 1e3:.2f} mm")
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--generate", action="store_true", help="write a generated set")
    parser.add_argument("--per-family", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", help=f"comma-separated subset of {', '.join(FAMILIES)}")
    parser.add_argument("--out", type=Path, default=GENERATED_SET)
    parser.add_argument("--check", type=Path, nargs="*", help="validate problem files")
    args = parser.parse_args(argv)
    families = args.families.split(",") if args.families else None
    for name in families or ():
        if name not in FAMILIES:
            parser.error(f"unknown family {name!r}")
    if args.generate:
        t0 = time.perf_counter()
        problems = generate(args.per_family, args.seed, families, log=print)
        command = (
            f"python bench/mbm_problems.py --generate --per-family {args.per_family} "
            f"--seed {args.seed}" + (f" --families {args.families}" if args.families else "")
        )
        header = (
            f"MotionBenchMaker-style Panda problems made by: {command}\n"
            "(scenes and queries after MotionBenchMaker, Chamzas et al. RA-L 2022; validity by "
            "test/mbm_check.py and the real collision geometry, test/mbm_mesh.py; never filtered by any "
            "planner)"
        )
        dump_problems(problems, args.out, header)
        size = args.out.stat().st_size
        print(
            f"{len(problems)} problems -> {args.out} ({size / 1e3:.0f} kB) in "
            f"{time.perf_counter() - t0:.0f} s"
        )
    bad = 0
    for path in args.check or []:
        for p in load_problems(path):
            errors = validate(p)
            bad += bool(errors)
            if errors:
                print(f"{path}: {p.name}: {'; '.join(errors)}")
        print(f"{path}: checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
