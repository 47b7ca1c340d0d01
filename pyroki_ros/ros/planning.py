"""~/plan_trajectory and ~/retarget_motion: ROS messages <-> the trajectory optimiser.

Thin: requests are validated and turned into core objects (objectives, a World in the robot's
root frame, start/goal configurations), the core plans, and the answer becomes a
trajectory_msgs/JointTrajectory timed within the scaled velocity and acceleration limits.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from pathlib import Path

import numpy as np
from shape_msgs.msg import SolidPrimitive
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from pyroki_ros import collision as col
from pyroki_ros.msg import ErrorCode
from pyroki_ros.planning import timing
from pyroki_ros.planning.trajopt import (
    START_IN_COLLISION,
    TIMED_OUT,
    PlanResult,
    TrajectoryOptimizer,
    retarget,
)
from pyroki_ros.robots import AVAILABLE
from pyroki_ros.ros.conversions import (
    RequestError,
    duration_seconds,
    pose_compose,
    pose_to_wxyz_xyz,
    quat_rotate,
    seconds_to_duration,
    vector,
)
from pyroki_ros.ros.model import LoadedModel
from pyroki_ros.ros.scene import check_primitive


@dataclasses.dataclass(frozen=True)
class PlanSettings:
    """Node defaults for planning requests (parameters)."""

    num_steps: int = 64
    velocity_scaling: float = 0.5
    acceleration_scaling: float = 0.5
    acceleration_limit: float = 5.0  # rad/s^2 (m/s^2), URDFs carry none
    safety_margin: float = 0.02
    collision_spheres: str = "auto"
    allowed_contacts: tuple[tuple[str, str], ...] = ()  # (link, obstacle or link) pairs
    timeout: float = 5.0  # s, budget of a plan whose request gives none


def contact_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """The ``allowed_contacts`` parameter, "link:other, link:other", as pairs.

    Raises:
        ValueError: an entry that is not two non-empty names joined by one colon.
    """
    pairs = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        names = [n.strip() for n in entry.split(":")]
        if len(names) != 2 or not all(names):
            raise ValueError(f"allowed_contacts entry '{entry}' is not 'link:other'")
        pairs.append((names[0], names[1]))
    return tuple(pairs)


def load_spheres(model: LoadedModel, source: str) -> tuple[col.RobotSpheres | None, str]:
    """The robot's collision spheres: ``auto`` = the bundled set for an embedded robot of
    the same name, else fitted to the URDF's collision geometry; a YAML path; or ``""`` =
    no collision checking. Returns the spheres and a line for the log."""
    robot = model.robot
    if not source:
        return None, "collision checking off (collision_spheres is empty)"
    if source == "auto":
        if robot.name in AVAILABLE:
            try:
                spheres = col.RobotSpheres.embedded(robot.name, robot)
                return spheres, f"bundled collision spheres for '{robot.name}'"
            except ValueError:
                pass  # same name, other links: fit this URDF instead
        spheres = col.RobotSpheres.from_urdf(robot, model.urdf)
        if spheres.n_spheres == 0:
            return None, "no collision geometry in the URDF: collision checking off"
        return spheres, f"{spheres.n_spheres} spheres from the URDF collision geometry"
    spheres = col.RobotSpheres.from_yaml(robot, Path(source))
    return spheres, f"collision spheres from {source}"


class Planner:
    """The trajectory optimiser of one loaded model (created on first use, then kept)."""

    def __init__(self, model: LoadedModel, settings: PlanSettings):
        self.model = model
        spheres, self.note = load_spheres(model, settings.collision_spheres)
        self.optimizer = TrajectoryOptimizer(
            model.robot, spheres, device=model.device.platform, max_programs=model.max_programs
        )
        self.lock = threading.Lock()  # one plan at a time per model: plans are CPU-bound

    # --- request translation ------------------------------------------------------------------

    def world(self, request, frames: np.ndarray, scene=()) -> col.World:
        """Obstacles of a PlanTrajectory request and of the planning scene ``scene`` ((id,
        SolidPrimitive, PoseStamped) triples) in the robot's root frame."""
        model = self.model
        if len(request.obstacles) != len(request.obstacle_poses):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{len(request.obstacles)} obstacles but {len(request.obstacle_poses)} "
                "obstacle_poses (one pose per obstacle)",
            )
        count = len(request.obstacles) + len(request.half_spaces)
        given = list(request.obstacle_names)
        if given and len(given) != count:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{len(given)} obstacle_names for {len(request.obstacles)} obstacles and "
                f"{len(request.half_spaces)} half_spaces (one name each, or none)",
            )
        names = given or [f"obstacles[{i}]" for i in range(len(request.obstacles))] + [
            f"half_spaces[{i}]" for i in range(len(request.half_spaces))
        ]
        items = [(f"planning scene object '{n}'", n, shape, pose) for n, shape, pose in scene] + [
            (f"obstacles[{i}]", names[i], shape, pose)
            for i, (shape, pose) in enumerate(zip(request.obstacles, request.obstacle_poses))
        ]
        spheres, capsules, boxes = [], [], []  # (name, geometry...)
        for what, name, shape, stamped in items:
            pose = pose_to_wxyz_xyz(stamped.pose, f"{what} pose")
            frame = model.frame_index(stamped.header.frame_id, f"{what} pose")
            pose = pose_compose(frames[frame], pose)  # into the root frame
            check_primitive(shape, what)
            dims = np.asarray(shape.dimensions, np.float64)
            if shape.type == SolidPrimitive.SPHERE:
                spheres.append((name, pose[4:], dims[0]))
            elif shape.type == SolidPrimitive.BOX:
                boxes.append((name, pose, dims / 2))
            else:  # a cylinder, covered by the capsule around it (conservative)
                height = dims[SolidPrimitive.CYLINDER_HEIGHT]
                radius = dims[SolidPrimitive.CYLINDER_RADIUS]
                axis = quat_rotate(pose[:4], np.array([0.0, 0.0, height / 2]))
                capsules.append((name, pose[4:] - axis, pose[4:] + axis, radius))
        normals, offsets = [], []
        base = frames[model.link_names.index(model.base_frame)]
        for i, plane in enumerate(request.half_spaces):
            coef = np.asarray(plane.coef, np.float64)
            norm = np.linalg.norm(coef[:3])
            if not np.all(np.isfinite(coef)) or norm < 1e-9:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"half_spaces[{i}]: coefficients must be finite with a non-zero normal, "
                    f"got {coef.tolist()}",
                )
            # Base frame -> root frame: n_root = R n, d_root = d - n_root . t
            n_root = quat_rotate(base[:4], coef[:3])
            normals.append(n_root)
            offsets.append(coef[3] - float(n_root @ base[4:]))
        dtype = self.model.robot.dtype
        kwargs = {}
        if spheres:
            kwargs |= {
                "sphere_centers": [s[1] for s in spheres],
                "sphere_radii": [s[2] for s in spheres],
            }
        if capsules:
            kwargs |= {
                "capsule_a": [c[1] for c in capsules],
                "capsule_b": [c[2] for c in capsules],
                "capsule_radii": [c[3] for c in capsules],
            }
        if boxes:
            kwargs |= {
                "box_poses": [b[1] for b in boxes],
                "box_half_extents": [b[2] for b in boxes],
            }
        if normals:
            kwargs |= {"halfspace_normals": normals, "halfspace_offsets": offsets}
        # The world's order: spheres, capsules, boxes, half-spaces.
        ordered = [g[0] for g in (*spheres, *capsules, *boxes)] + names[len(request.obstacles) :]
        try:
            return col.World.create(dtype=dtype, names=ordered, **kwargs)
        except ValueError as e:
            raise RequestError(ErrorCode.INVALID_REQUEST, f"obstacles: {e}") from None

    def limits(self, velocity_scaling: float, acceleration_scaling: float, settings: PlanSettings):
        """Scaled (velocity, acceleration) limits per joint."""
        scales = []
        for name, value, default in (
            ("velocity_scaling", velocity_scaling, settings.velocity_scaling),
            ("acceleration_scaling", acceleration_scaling, settings.acceleration_scaling),
        ):
            value = float(value)
            if value == 0:
                value = default
            if not (math.isfinite(value) and 0 < value <= 1):
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"{name} must be in (0, 1] (0 = default), got {value}",
                )
            scales.append(value)
        velocity = self.model.velocity_limits * scales[0]
        acceleration = np.full_like(velocity, settings.acceleration_limit * scales[1])
        return velocity, acceleration


def trajectory_message(
    joint_names, timed: timing.TimedPath, frame_id: str, stamp
) -> JointTrajectory:
    msg = JointTrajectory(joint_names=list(joint_names))
    msg.header.frame_id = frame_id
    msg.header.stamp = stamp
    for t, q, v, a in zip(timed.times, timed.positions, timed.velocities, timed.accelerations):
        msg.points.append(
            JointTrajectoryPoint(
                positions=q.tolist(),
                velocities=v.tolist(),
                accelerations=a.tolist(),
                time_from_start=seconds_to_duration(float(t)),
            )
        )
    return msg


def plan_request(
    planner: Planner, request, start: np.ndarray, settings: PlanSettings, log, scene=()
):
    """Solves a PlanTrajectory request among the planning scene's objects ``scene`` ((id,
    SolidPrimitive, PoseStamped) triples); returns (PlanResult, TimedPath)."""
    model = planner.model
    frames = model.fk(start)
    if len(request.goal_state.name) or len(request.goal_state.position):
        start_values = dict(zip(model.joint_names, start.tolist()))
        goal = model.seed(request.goal_state, start_values, "goal_state")
        if request.goal_objectives:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                "give goal_state or goal_objectives, not both",
            )
    elif request.goal_objectives:
        goal = tuple(
            model.objective(o, f"goal_objectives[{i}]", frames)
            for i, o in enumerate(request.goal_objectives)
        )
    else:
        raise RequestError(ErrorCode.INVALID_REQUEST, "no goal: set goal_state or goal_objectives")
    waypoints = []
    for w, group in enumerate(request.waypoints):
        if not group.objectives:
            raise RequestError(ErrorCode.INVALID_REQUEST, f"waypoints[{w}] has no objectives")
        waypoints.append(
            tuple(
                model.objective(o, f"waypoints[{w}].objectives[{i}]", frames, group.header.frame_id)
                for i, o in enumerate(group.objectives)
            )
        )
    world = planner.world(request, frames, scene)
    margin = float(request.safety_margin) or settings.safety_margin
    if not (math.isfinite(margin) and margin >= 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"safety_margin must be >= 0, got {margin}")
    steps = int(request.num_steps) or settings.num_steps
    if steps < 2:  # the upper bound: the node's max_trajectory_steps
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"num_steps must be >= 2 (0 = default), got {steps}"
        )
    duration = duration_seconds(request.duration)
    if not (math.isfinite(duration) and duration >= 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"duration must be >= 0, got {duration}")
    timeout = duration_seconds(request.timeout)
    if not (math.isfinite(timeout) and timeout >= 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"timeout must be >= 0, got {timeout}")
    velocity, acceleration = planner.limits(
        request.velocity_scaling, request.acceleration_scaling, settings
    )
    objectives = goal if isinstance(goal, tuple) else ()
    active = (
        model.active_joints(request.active_joints, objectives)
        if objectives
        else (model.active_joints(request.active_joints) if request.active_joints else None)
    )
    log(
        f"plan_trajectory: {steps} steps, {world.n_obstacles} obstacles, "
        + ("joint goal" if not objectives else f"{len(objectives)} goal objectives")
        + (f", {len(waypoints)} waypoints" if waypoints else "")
    )
    contacts = contact_rules(request, settings)
    if planner.optimizer.spheres is not None:  # names checked here: a clear code, not FAILURE
        try:
            col.checked_pairs(model.robot, planner.optimizer.spheres, world, contacts)
        except ValueError as e:
            raise RequestError(ErrorCode.INVALID_REQUEST, str(e)) from None
    with planner.lock:
        result = planner.optimizer.plan(
            start,
            goal if objectives else np.asarray(goal),
            waypoints=tuple(waypoints),
            world=world,
            num_steps=steps,
            active_joints=None if active is None else tuple(active),
            margin=margin,
            progress=log,
            contacts=contacts,
            timeout=timeout or settings.timeout,
        )
    timed = timing.parameterize(result.path, velocity, acceleration, duration=duration)
    return result, timed


def contact_rules(request, settings: PlanSettings) -> col.ContactRules:
    """The node's allowed contacts and the request's (names are checked by the planner)."""
    links, others = request.allowed_contact_links, request.allowed_contact_others
    if len(links) != len(others):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"{len(links)} allowed_contact_links but {len(others)} allowed_contact_others "
            "(one pair each)",
        )
    pairs = settings.allowed_contacts + tuple(zip(links, others))
    try:
        return col.ContactRules(allowed=pairs, check_fixed_links=request.check_fixed_links)
    except ValueError as e:
        raise RequestError(ErrorCode.INVALID_REQUEST, str(e)) from None


def outcome_code(result: PlanResult) -> int:
    if result.success:
        return ErrorCode.SUCCESS
    if result.reason == START_IN_COLLISION:
        return ErrorCode.START_IN_COLLISION
    if result.reason == TIMED_OUT:
        return ErrorCode.TIMEOUT
    if min(result.min_distance, result.min_self_distance) < 0:
        return ErrorCode.COLLISION
    return ErrorCode.PLANNING_FAILED


def retarget_request(
    planner: Planner, request, seed: np.ndarray, frames, log, default_timeout: float
):
    """Solves a RetargetMotion request within its budget (``default_timeout`` s when the
    request gives none); returns (PlanResult, per-step errors, dt)."""
    model = planner.model
    links = list(request.link_names)
    if not links:
        raise RequestError(ErrorCode.INVALID_REQUEST, "link_names is empty")
    for link in links:
        model.check_link(link, "link_names:")
    if len(request.steps) < 2:
        raise RequestError(ErrorCode.INVALID_REQUEST, "need at least 2 steps")
    dt = float(request.dt)
    if not (math.isfinite(dt) and dt > 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"dt must be > 0, got {dt}")
    timeout = duration_seconds(request.timeout)
    if not (math.isfinite(timeout) and timeout >= 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"timeout must be >= 0, got {timeout}")
    timeout = timeout or default_timeout
    frame = frames[model.frame_index(request.header.frame_id, "header")]
    points = np.empty((len(request.steps), len(links), 3))
    for t, step in enumerate(request.steps):
        if len(step.points) != len(links):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"steps[{t}] has {len(step.points)} points for {len(links)} link_names",
            )
        for k, point in enumerate(step.points):
            points[t, k] = vector(point, f"steps[{t}].points[{k}]")
    scale = float(request.scale)
    if not (math.isfinite(scale) and scale > 0):
        raise RequestError(ErrorCode.INVALID_REQUEST, f"scale must be > 0, got {scale}")
    # Scale about the keypoint frame's origin, then move into the root frame.
    scaled = points * scale
    rotated = np.stack([quat_rotate(frame[:4], p) for p in scaled.reshape(-1, 3)])
    in_root = rotated.reshape(scaled.shape) + frame[4:]
    weights = np.asarray(request.link_weights, np.float64) if len(request.link_weights) else None
    if weights is not None and (
        weights.shape != (len(links),) or not np.all(np.isfinite(weights)) or np.any(weights < 0)
    ):
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"link_weights must be {len(links)} finite values >= 0"
        )
    pairs, vector_weight = vector_pairs(model, request, links)
    if not pairs and weights is not None and not np.any(weights > 0):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            "link_weights are all 0 and there are no vectors (vector_from_links / "
            "vector_to_links): nothing to follow",
        )
    smoothness = float(request.smoothness_weight) or 1.0
    if not (math.isfinite(smoothness) and smoothness > 0):
        raise RequestError(
            ErrorCode.INVALID_REQUEST, f"smoothness_weight must be > 0, got {smoothness}"
        )
    active = model.active_joints(request.active_joints) if request.active_joints else None
    log(
        f"retarget_motion: {len(request.steps)} steps x {len(links)} links"
        + (f", {len(pairs)} link-to-link vectors" if pairs else "")
    )
    with planner.lock:
        result, errors = retarget(
            planner.optimizer,
            tuple(links),
            in_root,
            seed=seed,
            link_weights=weights,
            smoothness=smoothness,
            active_joints=None if active is None else tuple(active),
            vector_pairs=pairs,
            vector_weight=vector_weight,
            timeout=timeout,
        )
    return result, errors, dt


def vector_pairs(model: LoadedModel, request, links: list[str]):
    """The link-to-link vectors of a RetargetMotion request as index pairs into ``links``
    (from, to), and their weight (0 = 1.0)."""
    sources, targets = list(request.vector_from_links), list(request.vector_to_links)
    if len(sources) != len(targets):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"{len(sources)} vector_from_links but {len(targets)} vector_to_links "
            "(one pair of links per vector)",
        )
    pairs = []
    for v, (source, target) in enumerate(zip(sources, targets)):
        for field, link in (("vector_from_links", source), ("vector_to_links", target)):
            model.check_link(link, f"{field}[{v}]")
            if link not in links:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"{field}[{v}] '{link}' is not one of link_names ({', '.join(links)}): "
                    "vectors join keypoint links",
                )
        if source == target:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"vector {v} goes from '{source}' to itself: give two different links",
            )
        pairs.append((links.index(source), links.index(target)))
    weight = float(request.vector_weight) or 1.0
    if not (math.isfinite(weight) and weight > 0):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"vector_weight must be finite and >= 0 (0 = 1.0), got {request.vector_weight}",
        )
    return tuple(pairs), weight


def timed_at(path: np.ndarray, dt: float) -> timing.TimedPath:
    """A path sampled every ``dt`` s: central-difference velocities and accelerations."""
    times = dt * np.arange(path.shape[0], dtype=np.float64)
    velocities = np.gradient(path, dt, axis=0)
    accelerations = np.gradient(velocities, dt, axis=0)
    return timing.TimedPath(times, path, velocities, accelerations)
