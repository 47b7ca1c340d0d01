"""Requests -> core problems: every check a request goes through, each error code decided here.

The node's handlers call one function of this module per request (:func:`ik`,
:func:`ik_batch`, :func:`fk`, :func:`plan`, :func:`retarget`, :func:`apply_planning_scene`;
the topics :func:`scene_changes`, :func:`goal` (teleop), :func:`joint_states`; a new URDF
:func:`urdf`), get back a problem
for the core (objectives, seeds, a World in the robot's root frame, as numpy float64 /
core objects), or :class:`RequestError` with the code and a message for a person. Nothing is
solved here. The codes of refused requests are decided in this module only:

* ``REQUEST_TOO_LARGE``: a size over a node limit (params.RequestLimits), checked before
  any work that grows with it; retargeting memory.
* ``INVALID_POSE``: non-finite or huge numbers, a zero quaternion (:func:`pose`, :func:`vector`).
* ``INVALID_JOINT_STATE``: inconsistent JointStates, NaN, seeds outside the limits.
* ``UNKNOWN_LINK`` / ``UNKNOWN_FRAME`` / ``UNKNOWN_JOINT``: names the model does not have.
* ``NO_ROBOT_MODEL`` / ``NO_JOINT_STATE``: the node is not ready for this request.
* ``INVALID_REQUEST``: anything else inconsistent (sizes that disagree, a bad scaling ...).

Outcome codes (after the core ran: SUCCESS, NO_SOLUTION, TIMEOUT, COLLISION, ...) are
decided in responses.py.

Frames. The core solves in the URDF root frame. A target whose ``header.frame_id`` is a robot
link (the base frame included) or a fixed frame is moved into the root frame with that
frame's pose *at the seed configuration*, held fixed during the solve (msg/IKObjective.msg).
For a goal relative to a link that moves with the solution, ``reference_link`` gives the core
a relative objective instead.

This module is over ~600 lines because it is the one home of every request check (issue 15):
split, the checks would be spread again. Sections follow the services.
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
from geometry_msgs.msg import Point, Pose, PoseStamped, Vector3
from shape_msgs.msg import SolidPrimitive

from pyroki_ros import collision as col
from pyroki_ros import objectives as O
from pyroki_ros.model.limits import MEASURED_SLACK, JointLimits
from pyroki_ros.msg import CollisionObject, ErrorCode, IKObjective
from pyroki_ros.ros import conversions as C
from pyroki_ros.ros import frames as F
from pyroki_ros.ros.params import MAX_RESTARTS, PlanSettings, RequestLimits, Settings

# Below this norm a quaternion / axis cannot be normalised meaningfully.
MIN_NORM = 1e-6
# Largest coordinate (m), quaternion component or joint position accepted: finite numbers
# beyond it (1e300) would overflow into inf / NaN inside the solver. 1e6 m is far past any
# robot's workspace, yet squares and products of it stay far from float64 overflow.
MAX_COORDINATE = 1e6
# Names quoted in one error message; the rest are counted ("... and N more").
MAX_QUOTED = 10
# Memory one ~/retarget_motion may need (trajopt.retarget_memory_bytes): the node stays
# under ~2 GB with one running.
RETARGET_MEMORY_BYTES = 1 << 30
# IKObjective.type -> name, for messages.
OBJECTIVE_TYPES = {
    IKObjective.POSE: "POSE",
    IKObjective.POSITION: "POSITION",
    IKObjective.ORIENTATION: "ORIENTATION",
    IKObjective.POINT: "POINT",
    IKObjective.HINGE: "HINGE",
    IKObjective.PLANE: "PLANE",
    IKObjective.LINE: "LINE",
    IKObjective.AXIS: "AXIS",
}
# Dimensions each supported SolidPrimitive needs (SolidPrimitive's own layout).
DIMENSIONS = {SolidPrimitive.SPHERE: 1, SolidPrimitive.BOX: 3, SolidPrimitive.CYLINDER: 2}


class RequestError(Exception):
    """A request the node refuses: ``code`` is an ErrorCode value, ``message`` says why."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)
        self.message = message


def _invalid(message: str) -> RequestError:
    return RequestError(ErrorCode.INVALID_REQUEST, message)


def quoted(names: Sequence[str]) -> str:
    """At most MAX_QUOTED names for a message, then how many more."""
    shown = ", ".join(str(n)[:100] for n in names[:MAX_QUOTED])
    more = len(names) - MAX_QUOTED
    return shown + (f" ... and {more} more" if more > 0 else "")


# --- sizes (REQUEST_TOO_LARGE) -------------------------------------------------------------------


def size(limits: RequestLimits, count: int, limit: str, what: str) -> None:
    """REQUEST_TOO_LARGE when ``count`` exceeds the limit named ``limit``."""
    bound = getattr(limits, limit)
    if count > bound:
        raise RequestError(
            ErrorCode.REQUEST_TOO_LARGE,
            f"{what}: {count} is over the node's limit {limit} = {bound} (a node parameter)",
        )


def state_size(limits: RequestLimits, state, what: str) -> None:
    """A JointState's names and positions within max_names."""
    size(
        limits, max(len(state.name), len(state.position)), "max_names", f"{what} names / positions"
    )


def urdf(limits: RequestLimits, text: str) -> None:
    """A robot description within max_urdf_bytes and (a cheap upper bound before parsing:
    every link element opens with "<link") max_urdf_links."""
    size(limits, len(text), "max_urdf_bytes", "URDF size in characters")
    size(limits, text.count("<link"), "max_urdf_links", "URDF link elements")


# --- values (INVALID_POSE, INVALID_JOINT_STATE) ------------------------------------------------


def _numbers(values: Sequence[float], what: str, code: int = ErrorCode.INVALID_POSE) -> None:
    """``code`` unless every value is finite and within MAX_COORDINATE."""
    if not all(map(math.isfinite, values)):
        raise RequestError(code, f"{what} contains NaN or infinite values: {list(values)}")
    if not all(abs(v) <= MAX_COORDINATE for v in values):
        raise RequestError(code, f"{what} has values beyond +-{MAX_COORDINATE:g}: {list(values)}")


def vector(msg: Point | Vector3, what: str) -> np.ndarray:
    """(3,) float64 from a Point / Vector3; INVALID_POSE if not finite or beyond
    MAX_COORDINATE."""
    values = C.xyz(msg)
    _numbers(values, what)
    return np.array(values, np.float64)


def unit_vector(msg: Vector3, what: str, default: Sequence[float] | None = None) -> np.ndarray:
    """Normalised (3,) vector. A zero vector is ``default`` if given, else INVALID_REQUEST."""
    v = vector(msg, what)
    norm = math.sqrt(msg.x * msg.x + msg.y * msg.y + msg.z * msg.z)
    if norm < MIN_NORM:
        if default is not None:
            return np.asarray(default, np.float64)
        raise _invalid(f"{what} must be a non-zero vector")
    return v / norm


def pose(msg: Pose, what: str, *, orientation: bool = True) -> np.ndarray:
    """wxyz_xyz (7,) float64 from a Pose; INVALID_POSE for NaN / inf / huge values or a zero
    quaternion. With ``orientation=False`` (objectives that ignore the target orientation)
    the quaternion only has to be finite, and the result carries the identity rotation."""
    numbers = C.pose_numbers(msg)
    _numbers(numbers[:3], f"{what} position")
    _numbers(numbers[3:], f"{what} orientation")
    qx, qy, qz, qw = numbers[3:]
    if orientation and math.sqrt(qx * qx + qy * qy + qz * qz + qw * qw) < MIN_NORM:
        raise RequestError(
            ErrorCode.INVALID_POSE,
            f"{what} orientation is a zero quaternion (x y z w = {list(numbers[3:])}); "
            "give a unit quaternion, e.g. w = 1 for no rotation",
        )
    return C.wxyz_xyz(numbers, orientation=orientation)


def pose_rows(rows, what: str, *, orientation: bool = True) -> np.ndarray:
    """(N, 7) wxyz_xyz from rows [x, y, z, qx, qy, qz, qw], checked as :func:`pose` checks one
    pose, in a few array operations. Errors name the first bad row as ``what[i]``."""
    rows = np.asarray(rows, np.float64).reshape(-1, 7)
    finite = np.isfinite(rows)
    bounded = np.abs(rows) <= MAX_COORDINATE  # False for NaN too
    for columns, part in ((slice(0, 3), "position"), (slice(3, 7), "orientation")):
        for good, problem in (
            (finite, "contains NaN or infinite values"),
            (bounded, f"has values beyond +-{MAX_COORDINATE:g}"),
        ):
            bad = np.flatnonzero(~good[:, columns].all(axis=1))
            if len(bad):
                raise RequestError(
                    ErrorCode.INVALID_POSE,
                    f"{what}[{bad[0]}] {part} {problem} ({len(bad)} target(s) affected)",
                )
    if orientation:
        bad = np.flatnonzero(np.sqrt(np.sum(rows[:, 3:] ** 2, axis=1)) < MIN_NORM)
        if len(bad):
            raise RequestError(
                ErrorCode.INVALID_POSE,
                f"{what}[{bad[0]}] orientation is a zero quaternion; give a unit quaternion, "
                "e.g. w = 1 for no rotation",
            )
    return C.rows_to_wxyz_xyz(rows, orientation=orientation)


def joint_state_positions(msg, what: str) -> dict[str, float]:
    """{name: position} from a JointState; INVALID_JOINT_STATE for inconsistent / NaN values."""
    names, positions = list(msg.name), list(msg.position)
    if len(names) != len(positions):
        raise RequestError(
            ErrorCode.INVALID_JOINT_STATE,
            f"{what} has {len(names)} names but {len(positions)} positions",
        )
    positions_of = dict(zip(names, positions))
    if len(positions_of) != len(names):  # linear: a dict, not a count per name
        duplicates = sorted(n for n, k in Counter(names).items() if k > 1)
        raise RequestError(
            ErrorCode.INVALID_JOINT_STATE, f"{what} names joints twice: {quoted(duplicates)}"
        )
    values = np.asarray(positions, np.float64)
    for bad, problem in (
        (~np.isfinite(values), "NaN or infinite positions"),
        (np.abs(values) > MAX_COORDINATE, f"positions beyond +-{MAX_COORDINATE:g}"),
    ):
        if bad.any():
            listed = [f"{names[i]} = {values[i]}" for i in np.flatnonzero(bad)]
            raise RequestError(
                ErrorCode.INVALID_JOINT_STATE, f"{what} has {problem}: {quoted(listed)}"
            )
    return positions_of


def joint_states(limits: RequestLimits, msg) -> dict[str, float]:
    """A /joint_states message's positions (the node ignores a refused one)."""
    state_size(limits, msg, "a /joint_states message")
    return joint_state_positions(msg, "a /joint_states message")


def _non_negative(value: float, what: str, zero: str = "") -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0):
        raise _invalid(f"{what} must be >= 0{zero}, got {value}")
    return value


def seconds(msg, what: str) -> float:
    """A Duration field in seconds; INVALID_REQUEST when negative or not finite."""
    value = C.duration_seconds(msg)
    if not (math.isfinite(value) and value >= 0):
        raise _invalid(f"{what} must be >= 0, got {value} s")
    return value


# --- names and states against the model -------------------------------------------------------


def require_model(model, source: str):
    """NO_ROBOT_MODEL while none is loaded (``source``: where the URDF comes from)."""
    if model is None:
        raise RequestError(
            ErrorCode.NO_ROBOT_MODEL,
            f"no robot model loaded yet (waiting for a valid URDF from {source})",
        )
    return model


def link(model, name: str, what: str) -> None:
    if name not in model.link_index:
        raise RequestError(
            ErrorCode.UNKNOWN_LINK,
            f"{what} '{name}' is not a link of robot '{model.name}'; links: "
            f"{', '.join(model.link_names)}",
        )


def frame(model, frame_id: str, what: str) -> int:
    """Row of ``frame_id`` in :meth:`LoadedModel.fk`'s poses (empty = the base frame)."""
    row = model.frame_row(frame_id)
    if row is None:
        fixed = model.fixed_frame_names
        raise RequestError(
            ErrorCode.UNKNOWN_FRAME,
            f"{what} frame '{frame_id}' is neither the base frame '{model.base_frame}', a link "
            f"of robot '{model.name}' nor a fixed frame"
            + (f" ({', '.join(fixed)})" if fixed else " (parameter fixed_frames: none)"),
        )
    return row


def _state(model, msg, latest: dict[str, float] | None, what: str, check_limits: bool):
    """The configuration (n,) a JointState ``msg`` (may be empty) gives, completed with the
    latest /joint_states and then the middle of the limits; unclipped."""
    limits = model.robot.limits
    index = model.joint_index
    q = limits.center()
    if latest:
        for name, value in latest.items():
            i = index.get(name)
            if i is not None and math.isfinite(value):
                q[i] = value
    if msg is None or not (len(msg.name) or len(msg.position)):
        return q
    given = joint_state_positions(msg, what)
    unknown = [n for n in given if n not in index and n not in model.robot.mimic_joint_names]
    if unknown:
        raise RequestError(
            ErrorCode.UNKNOWN_JOINT,
            f"{what} names joints that are not actuated joints of robot '{model.name}': "
            f"{quoted(unknown)}; actuated: {', '.join(model.joint_names)}",
        )
    rows = [(index[n], v) for n, v in given.items() if n in index]
    for i, value in rows:
        q[i] = value
    if check_limits and rows:
        # A measured state may sit MEASURED_SLACK past a limit (then clipped); farther: refused.
        picked = np.array([i for i, _ in rows])
        outside = limits.outside(q, MEASURED_SLACK)[picked]
        if outside.any():
            bad = [
                f"{model.joint_names[i]} = {q[i]:.4g} not in "
                f"[{limits.lower[i]:.4g}, {limits.upper[i]:.4g}]"
                for i in picked[outside]
            ]
            raise RequestError(
                ErrorCode.INVALID_JOINT_STATE, f"{what} is outside the joint limits: {quoted(bad)}"
            )
    return q


def seed(model, msg, latest: dict[str, float] | None, what: str) -> np.ndarray:
    """Configuration (n,) from a JointState (may be empty), completed with the latest
    /joint_states and then the middle of the limits, inside the limits (robot.limits.clip)."""
    return model.robot.limits.clip(_state(model, msg, latest, what, check_limits=True))


def _given_or_measured(msg, latest: dict[str, float], what: str, topic: str) -> None:
    """NO_JOINT_STATE when a state that defaults to /joint_states (on ``topic``) is empty
    and nothing came there yet."""
    if not (len(msg.name) or len(msg.position)) and not latest:
        raise RequestError(
            ErrorCode.NO_JOINT_STATE, f"{what} is empty and nothing was received on {topic} yet"
        )


def start_state(model, msg, latest: dict[str, float], what: str, topic: str) -> np.ndarray:
    """:func:`seed` of a state that may default to /joint_states only."""
    _given_or_measured(msg, latest, what, topic)
    return seed(model, msg, latest, what)


def configuration(model, msg, latest: dict[str, float] | None, what: str):
    """Exactly the configuration (n,) a JointState gives (completed as :func:`seed` does),
    never clipped, and the names of its joints outside their limits."""
    q = _state(model, msg, latest, what, check_limits=False)
    outside = model.robot.limits.outside(q)
    return q, [model.joint_names[i] for i in np.flatnonzero(outside)]


def active_joints(model, names, objectives=()) -> list[str] | None:
    """Requested active joints (UNKNOWN_JOINT if not actuated); empty = the joints that
    move the objectives (:meth:`LoadedModel.moving_joints`)."""
    names = list(names)
    if not names:
        return model.moving_joints(objectives) if objectives else None
    unknown = [n for n in names if n not in model.joint_index]
    if unknown:
        raise RequestError(
            ErrorCode.UNKNOWN_JOINT,
            f"active_joints: {quoted([repr(n) for n in unknown])} not actuated joints of "
            f"robot '{model.name}'; actuated: {', '.join(model.joint_names)}",
        )
    return names


def joint_limits(model, names, lower, upper) -> JointLimits | None:
    """Per-solve joint limits of a SolveIK or SolveIKBatch request (``limit_joints``,
    ``limit_lower``, ``limit_upper``; empty = None, the URDF's): UNKNOWN_JOINT for a name
    that is not an actuated joint, INVALID_REQUEST for lists of different lengths, a
    repeated name, or a bound outside the URDF's range (NaN keeps one, -inf / +inf turns
    one off)."""
    names, lower, upper = list(names), list(lower), list(upper)
    if not names and not lower and not upper:
        return None
    if not len(names) == len(lower) == len(upper):
        raise _invalid(
            f"limit_joints, limit_lower and limit_upper need one entry per joint: got "
            f"{len(names)}, {len(lower)} and {len(upper)}"
        )
    index = {}
    for name in names:
        if name not in model.joint_index:
            raise RequestError(
                ErrorCode.UNKNOWN_JOINT,
                f"limit_joints: {name!r} is not an actuated joint of robot '{model.name}'; "
                f"actuated: {', '.join(model.joint_names)}",
            )
        if name in index:
            raise _invalid(f"limit_joints: {name!r} given twice")
        index[name] = model.joint_index[name]
    low = np.full(len(model.joint_names), np.nan)
    high = np.full(len(model.joint_names), np.nan)
    low[list(index.values())], high[list(index.values())] = lower, upper
    try:
        return model.robot.limits.narrowed(
            low, high, name="limit_joints", joint_names=model.joint_names
        )
    except ValueError as error:
        raise _invalid(str(error)) from None


def tolerances(position: float, orientation: float, defaults) -> tuple[float, float]:
    """(m, rad) of a request, 0 = the node's ``defaults`` (SolveSettings)."""
    out = []
    for name, value, default in (
        ("position_tolerance", position, defaults.position_tolerance),
        ("orientation_tolerance", orientation, defaults.orientation_tolerance),
    ):
        value = _non_negative(value, name, " (0 = node default)")
        out.append(value if value > 0 else default)
    return out[0], out[1]


# --- objectives ------------------------------------------------------------------------------------


def objective(model, msg: IKObjective, what: str, frames, default_frame: str = "") -> O.Objective:
    """A core objective (in the root frame, or relative) from an IKObjective message.

    ``frames``: frame poses at the seed (:meth:`LoadedModel.fk` rows or
    :class:`~pyroki_ros.ros.model.SeedFrames`), to place targets given in another frame.
    """
    kind = OBJECTIVE_TYPES.get(msg.type)
    if kind is None:
        raise _invalid(
            f"{what}: unknown objective type {msg.type}; expected one of "
            + ", ".join(f"{v} ({k})" for k, v in OBJECTIVE_TYPES.items())
        )
    if not msg.link:
        raise _invalid(f"{what}: link is empty (required)")
    what = f"{what} ({kind} on '{msg.link}')"
    link(model, msg.link, f"{what}: link")
    pw, ow = msg.position_weight, msg.orientation_weight
    if not (math.isfinite(pw) and math.isfinite(ow) and pw >= 0 and ow >= 0):
        raise _invalid(
            f"{what}: position_weight and orientation_weight must be finite and >= 0, got "
            f"{[pw, ow]}"
        )
    target = pose(msg.target.pose, f"{what}: target", orientation=kind in ("POSE", "ORIENTATION"))
    axis = None
    if kind in ("HINGE", "PLANE", "LINE", "AXIS"):
        axis = unit_vector(msg.axis, f"{what}: axis")
    local_point = vector(msg.local_point, f"{what}: local_point")
    local_axis = unit_vector(msg.local_axis, f"{what}: local_axis", default=(0.0, 0.0, 1.0))

    reference = None
    if msg.reference_link:
        link(model, msg.reference_link, f"{what}: reference_link")
        frame_id = msg.target.header.frame_id.lstrip("/")
        if frame_id and frame_id != msg.reference_link:
            raise _invalid(
                f"{what}: with reference_link '{msg.reference_link}' the target is in that "
                f"link's frame; target.header.frame_id must be empty or the same, got "
                f"'{msg.target.header.frame_id}'"
            )
        if msg.reference_link != model.root_link:
            reference = msg.reference_link
    else:  # the target (and its axis) into the root frame, with FK at the seed
        row = frame(model, msg.target.header.frame_id or default_frame, f"{what}: target")
        if row != 0:
            placement = frames[row]
            target = F.compose(placement, target)
            if axis is not None:
                axis = F.rotate(placement[:4], axis)
    return _objective(kind, msg.link, target, axis, local_point, local_axis, reference, pw, ow)


def _objective(kind, link_name, target, axis, local_point, local_axis, reference, pw, ow):
    position, wxyz = target[4:], target[:4]
    if kind == "POSE":
        made = O.pose(
            link_name, target, reference=reference, position_weight=pw, orientation_weight=ow
        )
        if any(local_point.tolist()):
            made = dataclasses.replace(made, local_point=local_point)
        return made
    if kind == "POSITION":
        return O.point(link_name, local_point, position, reference=reference, weight=pw)
    if kind == "ORIENTATION":
        return O.orientation(link_name, wxyz, reference=reference, weight=ow)
    if kind == "POINT":  # the ray from local_point along local_axis through the target
        return O.aim(link_name, local_point, local_axis, position, reference=reference, weight=ow)
    if kind == "AXIS":
        return O.axis(link_name, local_axis, axis, reference=reference, weight=ow)
    two_weights = {"reference": reference, "position_weight": pw, "orientation_weight": ow}
    if kind == "HINGE":
        return O.hinge(link_name, local_point, local_axis, position, axis, **two_weights)
    on_set = O.plane if kind == "PLANE" else O.line  # same arguments
    return on_set(link_name, local_point, position, axis, **two_weights)


def goal(model, msg, frames, limits: RequestLimits) -> list[O.Objective]:
    """A teleop goal (PoseStamped for the tip link, or MultiLinkGoal) as core objectives."""
    if isinstance(msg, PoseStamped):
        o = IKObjective(type=IKObjective.POSE, link=model.tip_link, target=msg)
        return [objective(model, o, "goal_pose", frames)]
    if not msg.objectives:
        raise _invalid("MultiLinkGoal has no objectives")
    size(limits, len(msg.objectives), "max_objectives", "MultiLinkGoal objectives")
    return [
        objective(model, o, f"goal.objectives[{i}]", frames, default_frame=msg.header.frame_id)
        for i, o in enumerate(msg.objectives)
    ]


# --- ~/solve_ik, ~/solve_ik_batch, ~/compute_fk ---------------------------------------------------


@dataclasses.dataclass
class IKProblem:
    """One IK problem for :meth:`LoadedModel.solve` (its keyword arguments: :meth:`kwargs`)."""

    objectives: list[O.Objective]
    seed: np.ndarray  # (n,)
    active: list[str] | None
    max_deviation: float  # rad or m from the seed, 0 = unlimited
    tolerances: tuple[float, float]
    iterations: int  # per attempt
    restarts: int
    timeout: float  # s, 0 = none
    limits: JointLimits | None = None  # per-solve limits (None: the URDF's)
    avoid_collisions: bool = False  # answers clear of the planning scene and of self-collision
    feasible: Callable[[np.ndarray], np.ndarray] | None = None  # set by :func:`collision_free`

    def kwargs(self) -> dict:
        out = self.__dict__.copy()  # the fields (dataclasses.fields costs microseconds)
        del out["avoid_collisions"]  # a request field; the solver takes ``feasible``
        return out


def ik(model, request, settings: Settings, latest: dict[str, float]) -> IKProblem:
    """A SolveIK request as an IK problem (the sampler, if any, may pick the seed)."""
    cfg, limits = settings.solve, settings.limits
    state_size(limits, request.seed, "seed")
    size(limits, len(request.objectives), "max_objectives", "objectives")
    size(limits, len(request.active_joints), "max_names", "active_joints")
    size(limits, len(request.limit_joints), "max_names", "limit_joints")
    q = seed(model, request.seed, latest, "seed")
    joint_box = joint_limits(model, request.limit_joints, request.limit_lower, request.limit_upper)
    if not request.objectives:
        raise _invalid("no objectives: give at least one IKObjective")
    frames = model.frames_at(q)
    objectives = [
        objective(model, o, f"objectives[{i}]", frames) for i, o in enumerate(request.objectives)
    ]
    constrained = request.max_deviation > 0 or len(request.active_joints) > 0
    q = model.sampled_seed(objectives, q, constrained)
    active = active_joints(model, request.active_joints, objectives)
    deviation = _non_negative(request.max_deviation, "max_deviation", " (0 = unlimited)")
    tol = tolerances(request.position_tolerance, request.orientation_tolerance, cfg)
    restarts = request.max_restarts
    if restarts < -1:
        raise _invalid(f"max_restarts must be >= -1 (-1 = node default), got {restarts}")
    timeout = seconds(request.timeout, "timeout")
    return IKProblem(
        objectives=objectives,
        seed=q,
        active=active,
        max_deviation=deviation,
        tolerances=tol,
        iterations=cfg.max_iterations,
        restarts=cfg.restarts if restarts == -1 else min(restarts, MAX_RESTARTS),
        timeout=timeout if timeout > 0 else cfg.timeout,
        limits=joint_box,
        avoid_collisions=bool(request.avoid_collisions),
    )


def collision_free(model, planners, settings: Settings, scene, problem: IKProblem | BatchProblem):
    """``avoid_collisions`` of SolveIK / SolveIKBatch as the feasibility predicate of the
    global solve (the problem's seed places the scene's frames, its active joints move):
    configurations (N, n) -> (N,) bool, their collision spheres clear of the planning scene's
    ``scene`` objects and of each other (the node's ``allowed_contacts`` apply; the planner's
    sphere model and rule, :meth:`TrajectoryOptimizer.clearances`)."""
    try:
        optimizer = planners.get(model).optimizer
    except (OSError, ValueError) as e:
        raise _invalid(f"avoid_collisions: the collision model does not load: {e}") from None
    if optimizer.spheres is None:
        raise _invalid("avoid_collisions: collision checking is off (collision_spheres is empty)")
    nothing = types.SimpleNamespace(
        obstacles=[], obstacle_poses=[], obstacle_names=[], half_spaces=[]
    )
    world = _world(model, nothing, model.fk(problem.seed), scene)
    contacts = _contact_rules(
        types.SimpleNamespace(
            allowed_contact_links=[], allowed_contact_others=[], check_fixed_links=False
        ),
        settings.plan,
    )
    moving = np.ones(len(model.joint_names), bool)
    if problem.active is not None:
        moving[:] = False
        moving[[model.joint_index[n] for n in problem.active]] = True
    return lambda q: optimizer.clearances(q, world, contacts, moving) >= 0.0


@dataclasses.dataclass
class BatchProblem:
    """One objective with a batch of N targets for :meth:`LoadedModel.solve_batch`."""

    objective: O.Objective  # batch shape (N,)
    seed: np.ndarray  # (n,)
    active: list[str] | None
    tolerances: tuple[float, float]
    iterations: int
    restarts: int
    timeout: float  # s, 0 = none (batches have no default budget)
    limits: JointLimits | None = None  # per-solve limits of every target (None: the URDF's)
    avoid_collisions: bool = False  # answers clear of the planning scene and of self-collision
    feasible: Callable[[np.ndarray], np.ndarray] | None = None  # set by :func:`collision_free`


def ik_batch(model, request, settings: Settings, latest: dict[str, float]) -> BatchProblem:
    """A SolveIKBatch request: its PoseStamped ``targets`` or ``packed_poses`` (N x 7)."""
    cfg, limits = settings.solve, settings.limits
    count = max(len(request.targets), len(request.packed_poses) // 7)
    size(limits, count, "max_batch_targets", "targets")
    state_size(limits, request.seed, "seed")
    size(limits, len(request.active_joints), "max_names", "active_joints")
    size(limits, len(request.limit_joints), "max_names", "limit_joints")
    if not request.link:
        raise _invalid("link is empty (required)")
    link(model, request.link, "link")
    q = seed(model, request.seed, latest, "seed")
    joint_box = joint_limits(model, request.limit_joints, request.limit_lower, request.limit_upper)
    weight = float(request.orientation_weight)
    if not math.isfinite(weight) or weight < 0:
        raise _invalid(f"orientation_weight must be finite and >= 0, got {weight}")
    targets = _batch_targets(model, request, q, orientation=weight != 0)
    local_point = vector(request.local_point, "local_point")
    if weight == 0:  # position only
        made = O.point(request.link, local_point, targets[:, 4:])
    else:
        made = O.pose(request.link, targets, orientation_weight=weight)
        if np.any(local_point != 0):
            points = np.broadcast_to(local_point, (len(targets), 3)).copy()
            made = dataclasses.replace(made, local_point=points)
    return BatchProblem(
        objective=made,
        seed=q,
        active=active_joints(model, request.active_joints, [made]),
        tolerances=tolerances(request.position_tolerance, request.orientation_tolerance, cfg),
        iterations=cfg.max_iterations,
        restarts=cfg.restarts,
        timeout=seconds(request.timeout, "timeout"),
        limits=joint_box,
        avoid_collisions=bool(request.avoid_collisions),
    )


def _batch_targets(model, request, q: np.ndarray, *, orientation: bool) -> np.ndarray:
    """(N, 7) wxyz_xyz targets in the root frame; targets in another frame are placed with FK
    at the seed ``q`` (once per distinct frame)."""
    if request.targets and len(request.packed_poses):
        raise _invalid(
            f"both targets ({len(request.targets)}) and packed_poses "
            f"({len(request.packed_poses)} numbers) given: use one of them"
        )
    if request.targets:
        rows = C.pose_rows([t.pose for t in request.targets])
        groups: dict[str, list[int] | slice] = {}
        for i, t in enumerate(request.targets):
            groups.setdefault(t.header.frame_id, []).append(i)
        what = "targets"
    else:
        flat = np.frombuffer(request.packed_poses, np.float64)
        if flat.size == 0:
            raise _invalid("no targets: give targets or packed_poses")
        if flat.size % 7:
            raise _invalid(
                f"packed_poses holds {flat.size} numbers, not a multiple of 7 "
                "([x, y, z, qx, qy, qz, qw] per target)"
            )
        rows = flat.reshape(-1, 7)
        groups = {request.packed_frame_id: slice(None)}
        what = "packed_poses"
    targets = pose_rows(rows, what, orientation=orientation)
    poses = model.frames_at(q)
    for frame_id, rows_in_frame in groups.items():
        first = 0 if isinstance(rows_in_frame, slice) else rows_in_frame[0]
        row = frame(model, frame_id, f"{what}[{first}]")
        if row != 0:
            targets[rows_in_frame] = F.compose(poses[row], targets[rows_in_frame])
    return targets


@dataclasses.dataclass
class FKProblem:
    """The state and links of a ComputeFK request."""

    q: np.ndarray  # (n,) exactly as given
    outside: list[str]  # joints of q outside their limits
    links: list[str]
    frame_name: str  # the answer's header.frame_id
    frame_row: int  # of frame_name in LoadedModel.fk's rows


def fk(model, request, settings: Settings, latest: dict[str, float]) -> FKProblem:
    limits = settings.limits
    state = request.robot_state
    _given_or_measured(state, latest, "robot_state", settings.joint_states_topic)
    state_size(limits, state, "robot_state")
    size(limits, len(request.link_names), "max_names", "link_names")
    q, outside = configuration(model, state, latest, "robot_state")
    links = list(request.link_names) or list(model.link_names)
    for name in links:
        link(model, name, "link_names:")
    return FKProblem(
        q=q,
        outside=outside,
        links=links,
        frame_name=request.frame_id.lstrip("/") or model.base_frame,
        frame_row=frame(model, request.frame_id, "frame_id"),
    )


# --- ~/plan_trajectory, ~/retarget_motion -------------------------------------------------------


def _execute(execute: bool, settings: Settings) -> None:
    if execute and not settings.allow_execute:
        raise _invalid(
            "execute = true, but this node may not publish to the controller "
            "(parameter allow_execute is false); plan without execute, or set it"
        )


def _planner(planners, model):
    """The model's planner (planning.Planners.get); a collision model that does not load is
    INVALID_REQUEST."""
    try:
        return planners.get(model)
    except (ValueError, OSError) as e:
        raise _invalid(f"collision model for planning: {e}") from None


@dataclasses.dataclass
class PlanProblem:
    """A PlanTrajectory request for :func:`pyroki_ros.ros.planning.plan`."""

    planner: object  # planning.Planner
    start: np.ndarray  # (n,)
    goal: tuple[O.Objective, ...] | np.ndarray  # objectives, or a joint goal (n,)
    waypoints: tuple[tuple[O.Objective, ...], ...]
    world: col.World
    num_steps: int
    margin: float
    duration: float  # s, 0 = as fast as the limits allow
    timeout: float  # s
    velocity: np.ndarray  # (n,) scaled limits
    acceleration: np.ndarray  # (n,)
    active: tuple[str, ...] | None
    contacts: col.ContactRules
    start_collision: str  # "refuse" or "escape" (TrajectoryOptimizer.plan)


def plan(model, planners, request, settings: Settings, latest, scene=()) -> PlanProblem:
    """A PlanTrajectory request among the planning scene's objects ``scene`` ((id,
    SolidPrimitive, PoseStamped) triples)."""
    _execute(request.execute, settings)
    _plan_sizes(settings.limits, request)
    cfg = settings.plan
    start = start_state(
        model, request.start_state, latest, "start_state", settings.joint_states_topic
    )
    planner = _planner(planners, model)
    poses = model.fk(start)
    if len(request.goal_state.name) or len(request.goal_state.position):
        start_values = dict(zip(model.joint_names, start.tolist()))
        goal_q = seed(model, request.goal_state, start_values, "goal_state")
        if request.goal_objectives:
            raise _invalid("give goal_state or goal_objectives, not both")
        objectives: tuple = ()
    elif request.goal_objectives:
        objectives = tuple(
            objective(model, o, f"goal_objectives[{i}]", poses)
            for i, o in enumerate(request.goal_objectives)
        )
    else:
        raise _invalid("no goal: set goal_state or goal_objectives")
    waypoints = []
    for w, group in enumerate(request.waypoints):
        if not group.objectives:
            raise _invalid(f"waypoints[{w}] has no objectives")
        waypoints.append(
            tuple(
                objective(model, o, f"waypoints[{w}].objectives[{i}]", poses, group.header.frame_id)
                for i, o in enumerate(group.objectives)
            )
        )
    world = _world(model, request, poses, scene)
    margin = _non_negative(request.safety_margin, "safety_margin") or cfg.safety_margin
    steps = int(request.num_steps) or cfg.num_steps
    if steps < 2:  # the upper bound: the node's max_trajectory_steps
        raise _invalid(f"num_steps must be >= 2 (0 = default), got {steps}")
    duration = _non_negative(C.duration_seconds(request.duration), "duration")
    timeout = seconds(request.timeout, "timeout")
    velocity, acceleration = _scaled_limits(
        model, request.velocity_scaling, request.acceleration_scaling, cfg
    )
    if objectives:
        active = active_joints(model, request.active_joints, objectives)
    else:
        active = active_joints(model, request.active_joints) if request.active_joints else None
    contacts = _contact_rules(request, cfg)
    if planner.optimizer.spheres is not None:  # names checked here: a clear code, not FAILURE
        try:
            col.checked_pairs(model.robot, planner.optimizer.spheres, world, contacts)
        except ValueError as e:
            raise _invalid(str(e)) from None
    return PlanProblem(
        planner=planner,
        start=start,
        goal=objectives or np.asarray(goal_q),
        waypoints=tuple(waypoints),
        world=world,
        num_steps=steps,
        margin=margin,
        duration=duration,
        timeout=timeout or cfg.timeout,
        velocity=velocity,
        acceleration=acceleration,
        active=None if active is None else tuple(active),
        contacts=contacts,
        start_collision=cfg.start_collision,
    )


def _plan_sizes(limits: RequestLimits, request) -> None:
    state_size(limits, request.start_state, "start_state")
    state_size(limits, request.goal_state, "goal_state")
    size(limits, len(request.active_joints), "max_names", "active_joints")
    size(limits, len(request.goal_objectives), "max_objectives", "goal_objectives")
    size(limits, len(request.waypoints), "max_waypoints", "waypoints")
    for w, group in enumerate(request.waypoints):
        size(limits, len(group.objectives), "max_objectives", f"waypoints[{w}].objectives")
    size(
        limits,
        max(len(request.obstacles), len(request.obstacle_poses)) + len(request.half_spaces),
        "max_obstacles",
        "obstacles + half_spaces",
    )
    size(limits, int(request.num_steps), "max_trajectory_steps", "num_steps")
    for field in ("obstacle_names", "allowed_contact_links", "allowed_contact_others"):
        size(limits, len(getattr(request, field)), "max_names", field)


def primitive(shape: SolidPrimitive, what: str) -> None:
    """INVALID_REQUEST unless ``shape`` is a supported primitive with positive dimensions."""
    if shape.type not in DIMENSIONS:
        raise _invalid(f"{what}: shape type {shape.type} is not supported (SPHERE, BOX, CYLINDER)")
    dims = np.asarray(shape.dimensions, np.float64)
    if dims.shape != (DIMENSIONS[shape.type],):
        raise _invalid(f"{what}: needs {DIMENSIONS[shape.type]} dimensions, got {len(dims)}")
    if not np.all(np.isfinite(dims)) or np.any(dims <= 0):
        raise _invalid(f"{what}: dimensions must be finite and > 0, got {dims.tolist()}")


def _world(model, request, poses: np.ndarray, scene=()) -> col.World:
    """Obstacles of a PlanTrajectory request and of the planning scene in the root frame."""
    if len(request.obstacles) != len(request.obstacle_poses):
        raise _invalid(
            f"{len(request.obstacles)} obstacles but {len(request.obstacle_poses)} "
            "obstacle_poses (one pose per obstacle)"
        )
    count = len(request.obstacles) + len(request.half_spaces)
    given = list(request.obstacle_names)
    if given and len(given) != count:
        raise _invalid(
            f"{len(given)} obstacle_names for {len(request.obstacles)} obstacles and "
            f"{len(request.half_spaces)} half_spaces (one name each, or none)"
        )
    names = given or [f"obstacles[{i}]" for i in range(len(request.obstacles))] + [
        f"half_spaces[{i}]" for i in range(len(request.half_spaces))
    ]
    items = [(f"planning scene object '{n}'", n, shape, at) for n, shape, at in scene] + [
        (f"obstacles[{i}]", names[i], shape, at)
        for i, (shape, at) in enumerate(zip(request.obstacles, request.obstacle_poses))
    ]
    spheres, boxes, cylinders = [], [], []  # (name, geometry...)
    for what, name, shape, stamped in items:
        placed = pose(stamped.pose, f"{what} pose")
        row = frame(model, stamped.header.frame_id, f"{what} pose")
        placed = F.compose(poses[row], placed)  # into the root frame
        primitive(shape, what)
        dims = np.asarray(shape.dimensions, np.float64)
        if shape.type == SolidPrimitive.SPHERE:
            spheres.append((name, placed[4:], dims[0]))
        elif shape.type == SolidPrimitive.BOX:
            boxes.append((name, placed, dims / 2))
        else:  # a cylinder, exact: centred at its pose, its axis along the pose's z
            radius = dims[SolidPrimitive.CYLINDER_RADIUS]
            half_height = dims[SolidPrimitive.CYLINDER_HEIGHT] / 2
            cylinders.append((name, placed, radius, half_height))
    normals, offsets = [], []
    base = poses[model.link_index[model.base_frame]]
    for i, plane in enumerate(request.half_spaces):
        coef = np.asarray(plane.coef, np.float64)
        if not np.all(np.isfinite(coef)) or np.linalg.norm(coef[:3]) < 1e-9:
            raise _invalid(
                f"half_spaces[{i}]: coefficients must be finite with a non-zero normal, "
                f"got {coef.tolist()}"
            )
        # Base frame -> root frame: n_root = R n, d_root = d - n_root . t
        n_root = F.rotate(base[:4], coef[:3])
        normals.append(n_root)
        offsets.append(coef[3] - float(n_root @ base[4:]))
    kwargs = {}
    if spheres:
        kwargs |= {
            "sphere_centers": [s[1] for s in spheres],
            "sphere_radii": [s[2] for s in spheres],
        }
    if boxes:
        kwargs |= {"box_poses": [b[1] for b in boxes], "box_half_extents": [b[2] for b in boxes]}
    if normals:
        kwargs |= {"halfspace_normals": normals, "halfspace_offsets": offsets}
    if cylinders:
        kwargs |= {
            "cylinder_poses": [c[1] for c in cylinders],
            "cylinder_radii": [c[2] for c in cylinders],
            "cylinder_half_heights": [c[3] for c in cylinders],
        }
    # The world's order (col.KINDS): spheres, capsules (none here), boxes, half-spaces,
    # cylinders.
    ordered = (
        [g[0] for g in (*spheres, *boxes)]
        + names[len(request.obstacles) :]
        + [g[0] for g in cylinders]
    )
    try:
        return col.World.create(dtype=model.robot.dtype, names=ordered, **kwargs)
    except ValueError as e:
        raise _invalid(f"obstacles: {e}") from None


def _scaled_limits(model, velocity_scaling, acceleration_scaling, cfg: PlanSettings):
    """Scaled (velocity, acceleration) limits per joint, (n,) each."""
    scales = []
    for name, value, default in (
        ("velocity_scaling", velocity_scaling, cfg.velocity_scaling),
        ("acceleration_scaling", acceleration_scaling, cfg.acceleration_scaling),
    ):
        value = float(value) or default
        if not (math.isfinite(value) and 0 < value <= 1):
            raise _invalid(f"{name} must be in (0, 1] (0 = default), got {value}")
        scales.append(value)
    velocity = model.velocity_limits * scales[0]
    return velocity, np.full_like(velocity, cfg.acceleration_limit * scales[1])


def _contact_rules(request, cfg: PlanSettings) -> col.ContactRules:
    """The node's allowed contacts and the request's (names are checked against the world)."""
    links, others = request.allowed_contact_links, request.allowed_contact_others
    if len(links) != len(others):
        raise _invalid(
            f"{len(links)} allowed_contact_links but {len(others)} allowed_contact_others "
            "(one pair each)"
        )
    pairs = cfg.allowed_contacts + tuple(zip(links, others))
    try:
        return col.ContactRules(allowed=pairs, check_fixed_links=request.check_fixed_links)
    except ValueError as e:
        raise _invalid(str(e)) from None


@dataclasses.dataclass
class RetargetProblem:
    """A RetargetMotion request for :func:`pyroki_ros.ros.planning.retarget`."""

    planner: object  # planning.Planner
    links: tuple[str, ...]
    keypoints: np.ndarray  # (T, K, 3), scaled, in the root frame
    seed: np.ndarray  # (n,)
    dt: float
    link_weights: np.ndarray | None  # (K,)
    smoothness: float
    active: tuple[str, ...] | None
    vector_pairs: tuple[tuple[int, int], ...]  # (from, to) indices into links
    vector_weight: float
    timeout: float  # s


def retarget(model, planners, request, settings: Settings, latest) -> RetargetProblem:
    _execute(request.execute, settings)
    _retarget_sizes(model, settings.limits, request)
    q = seed(model, request.seed, latest, "seed")
    planner = _planner(planners, model)
    links = list(request.link_names)
    if not links:
        raise _invalid("link_names is empty")
    for name in links:
        link(model, name, "link_names:")
    if len(request.steps) < 2:
        raise _invalid("need at least 2 steps")
    dt = float(request.dt)
    if not (math.isfinite(dt) and dt > 0):
        raise _invalid(f"dt must be > 0, got {dt}")
    timeout = seconds(request.timeout, "timeout") or settings.plan.retarget_timeout
    placement = model.fk(q)[frame(model, request.header.frame_id, "header")]
    points = np.empty((len(request.steps), len(links), 3))
    for t, step in enumerate(request.steps):
        if len(step.points) != len(links):
            raise _invalid(f"steps[{t}] has {len(step.points)} points for {len(links)} link_names")
        for k, point in enumerate(step.points):
            points[t, k] = vector(point, f"steps[{t}].points[{k}]")
    scale = float(request.scale)
    if not (math.isfinite(scale) and scale > 0):
        raise _invalid(f"scale must be > 0, got {scale}")
    weights = np.asarray(request.link_weights, np.float64) if len(request.link_weights) else None
    if weights is not None and (
        weights.shape != (len(links),) or not np.all(np.isfinite(weights)) or np.any(weights < 0)
    ):
        raise _invalid(f"link_weights must be {len(links)} finite values >= 0")
    pairs, vector_weight = _vector_pairs(model, request, links)
    if not pairs and weights is not None and not np.any(weights > 0):
        raise _invalid(
            "link_weights are all 0 and there are no vectors (vector_from_links / "
            "vector_to_links): nothing to follow"
        )
    smoothness = float(request.smoothness_weight) or 1.0
    if not (math.isfinite(smoothness) and smoothness > 0):
        raise _invalid(f"smoothness_weight must be > 0, got {smoothness}")
    active = active_joints(model, request.active_joints) if request.active_joints else None
    return RetargetProblem(
        planner=planner,
        links=tuple(links),
        # Scaled about the keypoint frame's origin, then placed in the root frame.
        keypoints=F.apply(placement, points * scale),
        seed=q,
        dt=dt,
        link_weights=weights,
        smoothness=smoothness,
        active=None if active is None else tuple(active),
        vector_pairs=pairs,
        vector_weight=vector_weight,
        timeout=timeout,
    )


def _retarget_sizes(model, limits: RequestLimits, request) -> None:
    state_size(limits, request.seed, "seed")
    for field in ("link_names", "active_joints", "vector_from_links", "vector_to_links"):
        size(limits, len(getattr(request, field)), "max_names", field)
    steps, links = len(request.steps), len(request.link_names)
    size(limits, steps, "max_retarget_steps", "steps")
    size(limits, steps * max(links, 1), "max_keypoints", "steps x links")
    for t, step in enumerate(request.steps):  # each step's own size, before it is read
        if len(step.points) > links:
            raise _invalid(f"steps[{t}] has {len(step.points)} points for {links} link_names")
    from pyroki_ros.planning.trajopt import retarget_memory_bytes

    need = retarget_memory_bytes(steps, len(model.joint_names), links)
    if need > RETARGET_MEMORY_BYTES:
        raise RequestError(
            ErrorCode.REQUEST_TOO_LARGE,
            f"retargeting {steps} steps x {links} links would need about "
            f"{need / 2**30:.1f} GiB, over the node's {RETARGET_MEMORY_BYTES / 2**30:.1f} GiB",
        )


def _vector_pairs(model, request, links: list[str]):
    """The link-to-link vectors as index pairs into ``links`` (from, to), and their weight
    (0 = 1.0)."""
    sources, targets = list(request.vector_from_links), list(request.vector_to_links)
    if len(sources) != len(targets):
        raise _invalid(
            f"{len(sources)} vector_from_links but {len(targets)} vector_to_links "
            "(one pair of links per vector)"
        )
    pairs = []
    for v, (source, target) in enumerate(zip(sources, targets)):
        for field, name in (("vector_from_links", source), ("vector_to_links", target)):
            link(model, name, f"{field}[{v}]")
            if name not in links:
                raise _invalid(
                    f"{field}[{v}] '{name}' is not one of link_names ({', '.join(links)}): "
                    "vectors join keypoint links"
                )
        if source == target:
            raise _invalid(f"vector {v} goes from '{source}' to itself: give two different links")
        pairs.append((links.index(source), links.index(target)))
    weight = float(request.vector_weight) or 1.0
    if not (math.isfinite(weight) and weight > 0):
        raise _invalid(
            f"vector_weight must be finite and >= 0 (0 = 1.0), got {request.vector_weight}"
        )
    return tuple(pairs), weight


# --- the planning scene -----------------------------------------------------------------------------


def apply_planning_scene(objects: dict, request, limits: RequestLimits, model=None) -> dict:
    """:func:`scene_changes` of an ApplyPlanningScene request (its size checked first)."""
    size(limits, len(request.objects), "max_obstacles", "objects")
    return scene_changes(objects, list(request.objects), limits, model)


def scene_changes(objects: dict, changes, limits: RequestLimits, model=None) -> dict:
    """``objects`` ({id: (SolidPrimitive, PoseStamped)}) after ``changes`` (CollisionObject
    list), all or none; frames are checked against ``model`` when one is loaded.

    Raises:
        RequestError: an unknown operation, an empty id, MOVE / REMOVE of an id the scene does
            not hold, a bad shape (INVALID_REQUEST), pose (INVALID_POSE) or frame
            (UNKNOWN_FRAME), more objects than max_obstacles (REQUEST_TOO_LARGE).
    """
    objects = dict(objects)
    for i, change in enumerate(changes):
        what = f"objects[{i}] ('{change.id}')"
        if change.operation == CollisionObject.REMOVE and not change.id:
            objects.clear()
            continue
        if not change.id:
            raise _invalid(f"objects[{i}]: id is empty")
        if change.operation == CollisionObject.REMOVE:
            _held(objects, change.id, what)
            del objects[change.id]
            continue
        pose(change.pose, f"{what} pose")
        if model is not None:
            frame(model, change.header.frame_id, f"{what} pose")
        stamped = PoseStamped(header=change.header, pose=change.pose)
        if change.operation == CollisionObject.MOVE:
            _held(objects, change.id, what)
            objects[change.id] = (objects[change.id][0], stamped)
        elif change.operation == CollisionObject.ADD:
            primitive(change.primitive, what)
            objects[change.id] = (change.primitive, stamped)
        else:
            raise _invalid(
                f"{what}: unknown operation {change.operation} (ADD 0, REMOVE 1, MOVE 2)"
            )
    if len(objects) > limits.max_obstacles:
        raise RequestError(
            ErrorCode.REQUEST_TOO_LARGE,
            f"the scene would hold {len(objects)} objects, over the node's limit "
            f"max_obstacles = {limits.max_obstacles} (a node parameter)",
        )
    return objects


def _held(objects: dict, name: str, what: str) -> None:
    if name not in objects:
        raise _invalid(
            f"{what}: no such object in the planning scene (it holds "
            f"{quoted(sorted(objects)) or 'none'})"
        )
