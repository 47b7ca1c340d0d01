"""What to draw: IK objectives, obstacles, paths and collision spheres as plain shapes.

One vocabulary for both pictures of a problem: the RViz markers of the node
(``pyroki_ros/ros/markers.py``: a :class:`Shape` becomes one ``visualization_msgs/Marker``)
and the viser web viewer (``pyroki_ros/viz/viewer.py``). Numpy only: forward kinematics is the
caller's (``link_poses``), so nothing here compiles or touches a device.

Objectives are drawn Klampt-style: a pose as an axes triad at the target, a position (point
on the link) as a sphere, an aim (look-at) as a sphere and the line from the link's point to
it, a hinge (or axis) as an arrow along the target axis, a plane as a thin square plate, a
line as a line strip. Poses are ``wxyz_xyz`` (7,) as in the core.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax.numpy as jnp
import jaxlie
import numpy as np

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
# Sizes (m): small enough beside a 1 m arm, large enough to find in a full view.
AXES_LENGTH = 0.1
AXES_WIDTH = 0.006
POINT_DIAMETER = 0.025
LINE_WIDTH = 0.005
ARROW_LENGTH = 0.15
PLANE_SIZE = 0.3
PLANE_THICKNESS = 0.002
LINE_HALF_LENGTH = 0.3
HALFSPACE_SIZE = 2.0
HALFSPACE_THICKNESS = 0.005
# Collision spheres share one diameter per drawn list (RViz's SPHERE_LIST has one scale):
# radii are rounded up to this step, so the drawing covers each sphere and never hides one.
SPHERE_RADIUS_STEP = 0.005
# Batched objectives (many targets) draw at most this many of them.
MAX_BATCH_DRAWN = 64

Color = tuple[float, float, float, float]  # rgba in [0, 1]

GOAL_COLOR: Color = (0.85, 0.2, 0.85, 1.0)  # teleop goals
OBJECTIVE_COLOR: Color = (1.0, 0.55, 0.0, 1.0)  # ~/solve_ik objectives
PLAN_GOAL_COLOR: Color = (0.1, 0.75, 0.3, 1.0)  # a plan's goal and waypoints
PATH_COLOR: Color = (0.0, 0.75, 0.9, 1.0)
OBSTACLE_COLOR: Color = (0.85, 0.25, 0.2, 0.6)
ROBOT_COLOR: Color = (0.35, 0.55, 0.95, 0.45)
AXIS_COLORS = ((1.0, 0.0, 0.0, 1.0), (0.0, 0.8, 0.0, 1.0), (0.0, 0.3, 1.0, 1.0))


@dataclasses.dataclass(frozen=True)
class Shape:
    """One drawable thing, in the frame ``pose`` is given in.

    Attributes:
        kind: axes, sphere, box, cylinder, arrow, line_strip, line_list or sphere_list; each
            maps to one Marker type (markers.py) and one viser node (viewer.py).
        pose: (7,) wxyz_xyz of the shape's own frame; ``points`` are in that frame.
        scale: (3,) m. axes: (length, line width, -); sphere: diameters; box: edge lengths;
            cylinder: (diameter, diameter, height along z); arrow: (shaft diameter, head
            diameter, head length); line_strip / line_list: (width, -, -); sphere_list:
            (diameter, diameter, diameter).
        color: rgba in [0, 1].
        points: (k, 3): line vertices (line_list: pairs), arrow (tail, tip), sphere_list
            centres; (0, 3) for the other kinds.
        colors: (k, 4) rgba per point (line_list, axes drawn as lines), or None.
        label: what it shows, e.g. ``objectives[0] pose panda_hand``.
    """

    kind: str
    pose: np.ndarray
    scale: np.ndarray
    color: Color
    points: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 3)))
    colors: np.ndarray | None = None
    label: str = ""

    def in_frame(self, frame: np.ndarray) -> Shape:
        """The same shape expressed in the parent of ``frame`` (7,): its pose composed."""
        return dataclasses.replace(self, pose=compose(frame, self.pose))


# --- poses (wxyz_xyz, through jaxlie; float32 unless x64 is on: enough to draw) -----------------------------------------------------------


def compose(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a * b`` for wxyz_xyz poses (..., 7): ``b`` given in ``a``'s frame, in ``a``'s parent."""
    product = jaxlie.SE3(jnp.asarray(a)) @ jaxlie.SE3(jnp.asarray(b))
    return np.asarray(product.wxyz_xyz, np.float64)


def inverse(a: np.ndarray) -> np.ndarray:
    """The inverse of wxyz_xyz poses (..., 7)."""
    return np.asarray(jaxlie.SE3(jnp.asarray(a)).inverse().wxyz_xyz, np.float64)


def transform_points(pose: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Points (..., 3) given in the frame(s) ``pose`` (..., 7), in the parent frame."""
    return np.asarray(jaxlie.SE3(jnp.asarray(pose)).apply(jnp.asarray(points)), np.float64)


def quat_z_to(direction: np.ndarray) -> np.ndarray:
    """A wxyz quaternion whose rotation takes the z axis onto ``direction`` (3,) (any
    non-zero length); the shortest such rotation, and a half turn about x for -z."""
    d = np.asarray(direction, np.float64)
    d = d / np.linalg.norm(d)
    w = 1.0 + d[2]
    if w < 1e-9:  # opposite to z
        return np.array([0.0, 1.0, 0.0, 0.0])
    q = np.array([w, -d[1], d[0], 0.0])  # (1 + z.d, z x d)
    return q / np.linalg.norm(q)


def at(position: np.ndarray, wxyz: np.ndarray | None = None) -> np.ndarray:
    """A wxyz_xyz pose (7,) at ``position`` (3,) (rotation identity unless ``wxyz``)."""
    rotation = np.array([1.0, 0.0, 0.0, 0.0]) if wxyz is None else np.asarray(wxyz, np.float64)
    return np.concatenate([rotation, np.asarray(position, np.float64)])


# --- primitive shapes -----------------------------------------------------------------------------


def axes(pose: np.ndarray, label: str = "", length: float = AXES_LENGTH) -> Shape:
    """An RGB axes triad (x red, y green, z blue) at ``pose`` (7,)."""
    points = np.stack([np.zeros((3, 3)), np.eye(3) * length], 1).reshape(6, 3)
    colors = np.repeat(np.asarray(AXIS_COLORS), 2, axis=0)
    scale = np.array([length, AXES_WIDTH, 0.0])
    return Shape("axes", np.asarray(pose, np.float64), scale, AXIS_COLORS[0], points, colors, label)


def sphere(center: np.ndarray, diameter: float, color: Color, label: str = "") -> Shape:
    return Shape("sphere", at(center), np.full(3, float(diameter)), color, label=label)


def box(pose: np.ndarray, size: np.ndarray, color: Color, label: str = "") -> Shape:
    """A box of edge lengths ``size`` (3,) centred at ``pose`` (7,)."""
    pose, size = np.asarray(pose, np.float64), np.asarray(size, np.float64)
    return Shape("box", pose, size, color, label=label)


def cylinder(
    pose: np.ndarray, radius: float, height: float, color: Color, label: str = ""
) -> Shape:
    """A cylinder centred at ``pose`` (7,), its axis along the pose's z."""
    scale = np.array([2 * radius, 2 * radius, height], np.float64)
    return Shape("cylinder", np.asarray(pose, np.float64), scale, color, label=label)


def arrow(tail: np.ndarray, tip: np.ndarray, color: Color, label: str = "") -> Shape:
    points = np.stack([tail, tip]).astype(float)
    scale = np.array([0.01, 0.02, min(0.04, 0.4 * np.linalg.norm(points[1] - points[0]))])
    return Shape("arrow", IDENTITY.copy(), scale, color, points, label=label)


def line_strip(
    points: np.ndarray, color: Color, label: str = "", width: float = LINE_WIDTH
) -> Shape:
    points, scale = np.asarray(points, np.float64).reshape(-1, 3), np.array([width, 0.0, 0.0])
    return Shape("line_strip", IDENTITY.copy(), scale, color, points, label=label)


def halfspace(normal: np.ndarray, offset: float, color: Color, label: str = "") -> Shape:
    """The half-space ``{x : n . x + d < 0}`` as a large thin plate on its boundary plane,
    on the solid side; ``normal`` (3,) need not be unit length (``offset`` scales with it)."""
    n = np.asarray(normal, np.float64)
    norm = float(np.linalg.norm(n))
    n, d = n / norm, float(offset) / norm
    center = -d * n - n * (HALFSPACE_THICKNESS / 2)
    size = np.array([HALFSPACE_SIZE, HALFSPACE_SIZE, HALFSPACE_THICKNESS])
    return box(at(center, quat_z_to(n)), size, color, label)


def sphere_lists(
    centers: np.ndarray, radii: np.ndarray, color: Color, label: str = "collision spheres"
) -> list[Shape]:
    """Spheres (S, 3) / (S,) as sphere lists, one per radius rounded up to
    :data:`SPHERE_RADIUS_STEP`, smallest first."""
    centers = np.asarray(centers, np.float64).reshape(-1, 3)
    steps = np.ceil(np.asarray(radii, np.float64) / SPHERE_RADIUS_STEP - 1e-9).astype(int)
    shapes = []
    for step in np.unique(steps):
        d = 2 * SPHERE_RADIUS_STEP * max(int(step), 1)
        name, group = f"{label} r <= {d / 2:.3f} m", centers[steps == step]
        shapes.append(
            Shape("sphere_list", IDENTITY.copy(), np.full(3, d), color, group, label=name)
        )
    return shapes


# --- problems -----------------------------------------------------------------------------------


def objective_shapes(
    objectives: Sequence,
    link_names: Sequence[str],
    link_poses: np.ndarray,
    color: Color,
    label: str = "objectives",
) -> list[Shape]:
    """Klampt-style pictures of core objectives (``pyroki_ros.objectives.Objective``), in the
    root frame.

    Args:
        objectives: core objectives; targets relative to a ``reference`` link are placed with
            that link's pose in ``link_poses``; batched ones draw their first
            :data:`MAX_BATCH_DRAWN` targets.
        link_names: (L,) names of the rows of ``link_poses``.
        link_poses: (L, 7) wxyz_xyz root-frame link poses at the configuration drawn (the
            solution): relative targets, orientation-only goals (drawn at the link) and aim
            lines (from the link's point) use them.
        color: of spheres, arrows, plates and lines (triads are RGB).
    """
    index = {name: i for i, name in enumerate(link_names)}
    link_poses = np.asarray(link_poses, np.float64)
    shapes: list[Shape] = []
    for k, o in enumerate(objectives):
        frame = link_poses[index[o.reference]] if o.reference else IDENTITY
        link_pose = link_poses[index[o.link]] if o.link in index else IDENTITY
        fields = [np.asarray(getattr(o, f), np.float64) for f in ("target", "axis", "local_point")]
        target, axis, local_point = (f.reshape(-1, f.shape[-1])[:MAX_BATCH_DRAWN] for f in fields)
        # Per target: the goal pose, the target axis and the link's point, in the root frame.
        goals, shape = compose(frame, target), (len(target), 3)
        directions = transform_points(at(np.zeros(3), frame[:4]), np.broadcast_to(axis, shape))
        starts = transform_points(link_pose, np.broadcast_to(local_point, shape))
        for b, (goal, direction, start) in enumerate(zip(goals, directions, starts)):
            name = f"{label}[{k}]" + (f"[{b}]" if len(target) > 1 else "") + f" {o.kind} {o.link}"
            shapes.extend(_objective(o.kind, goal, direction, start, link_pose, color, name))
    return shapes


def _objective(kind, goal, direction, start, link_pose, color, name) -> list[Shape]:
    point = goal[4:]
    dot = sphere(point, POINT_DIAMETER, color, name)
    if kind == "pose":
        return [axes(goal, name)]
    if kind == "orientation":  # the target rotation, drawn where the link is
        return [axes(at(link_pose[4:], goal[:4]), name)]
    if kind == "aim":  # the ray from the link's point through the target
        return [dot, line_strip(np.stack([start, point]), color, name)]
    if kind == "hinge":
        return [dot, arrow(point, point + ARROW_LENGTH * direction, color, name)]
    if kind == "plane":
        size, faint = [PLANE_SIZE, PLANE_SIZE, PLANE_THICKNESS], (*color[:3], min(color[3], 0.5))
        return [box(at(point, quat_z_to(direction)), size, faint, name), dot]
    if kind == "line":
        ends = point + LINE_HALF_LENGTH * np.outer([-1.0, 1.0], direction)
        return [line_strip(ends, color, name), dot]
    if kind == "axis":  # axis only: the target direction, from the link's point
        return [arrow(start, start + ARROW_LENGTH * direction, color, name)]
    return [dot]  # point / position, and a kind added later: at least its point


def world_shapes(world, color: Color = OBSTACLE_COLOR) -> list[Shape]:
    """Obstacles of a core ``pyroki_ros.collision.World`` (root frame), in its order:
    spheres, capsules (a cylinder and its two end spheres), boxes, half-spaces
    (:func:`halfspace`), cylinders."""
    shapes: list[Shape] = []
    a = lambda field: np.asarray(getattr(world, field), np.float64)
    names = iter(world.name(i) for i in range(world.n_obstacles))
    for c, r in zip(a("sphere_centers"), a("sphere_radii")):
        shapes.append(sphere(c, 2 * r, color, next(names)))
    for p, q, r in zip(a("capsule_a"), a("capsule_b"), a("capsule_radii")):
        name = next(names)
        length = float(np.linalg.norm(q - p))
        rotation = quat_z_to(q - p) if length > 1e-12 else None
        shapes.append(cylinder(at((p + q) / 2, rotation), r, length, color, name))
        shapes.extend(sphere(end, 2 * r, color, name) for end in (p, q))
    for pose, half in zip(a("box_poses"), a("box_half_extents")):
        shapes.append(box(pose, 2 * half, color, next(names)))
    for n, d in zip(a("halfspace_normals"), a("halfspace_offsets")):
        shapes.append(halfspace(n, d, color, next(names)))
    for pose, r, h in zip(a("cylinder_poses"), a("cylinder_radii"), a("cylinder_half_heights")):
        shapes.append(cylinder(pose, r, 2 * h, color, next(names)))
    return shapes


def sphere_centers(spheres, link_poses: np.ndarray) -> np.ndarray:
    """Root-frame centres (S', 3) of the spheres of a ``pyroki_ros.collision.RobotSpheres``
    that are checked against obstacles (a set's self-collision-only spheres are not drawn),
    given the root-frame link poses (L, 7) (e.g. one configuration's forward kinematics)."""
    shown = spheres.world_mask
    poses = np.asarray(link_poses, np.float64)[np.asarray(spheres.link_indices, int)[shown]]
    centers = np.asarray(spheres.centers, np.float64).reshape(-1, 3)[shown]
    return transform_points(poses, centers)


def sphere_radii(spheres) -> np.ndarray:
    """(S',) radii of the spheres :func:`sphere_centers` places."""
    return np.asarray(spheres.radii, np.float64)[spheres.world_mask]


def robot_boxes(spheres, link_poses: np.ndarray, color: Color) -> list[Shape]:
    """The boxes of a ``RobotSpheres`` (exact link geometry, e.g. the Panda's fingers; a
    hull drawn as its bounding box) at the root-frame link poses (L, 7)."""
    if not spheres.n_boxes:
        return []
    links = np.asarray(link_poses, np.float64)[np.asarray(spheres.box_link_indices, int)]
    poses = compose(links, np.asarray(spheres.box_poses, np.float64))
    sizes = 2.0 * np.asarray(spheres.box_half_extents, np.float64)
    return [box(pose, size, color) for pose, size in zip(poses, sizes)]
