"""The node's parameters: the PARAMETERS table (name, default, description, range), declaring
them on the node, and reading them into the settings the request path uses.

Every parameter is documented here once; config/panda.yaml and config/ur5.yaml set each of
them (test_node_conversions checks the two agree). Parameters that are not read-only can be set
while the node runs: :func:`read` makes a new :class:`Settings` from the parameters as they
will be, which the node swaps in (requests take the settings object current at their start).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor

from pyroki_ros.ik import DEFAULT_ORIENTATION_TOLERANCE, DEFAULT_POSITION_TOLERANCE
from pyroki_ros.planning.pipeline import ESCAPE_REACH, START_COLLISION
from pyroki_ros.ros.conversions import xyzw_to_wxyz

NODE_NAME = "pyroki_ros_node"
# Largest SolveIK.max_restarts honoured (larger values are clamped to it).
MAX_RESTARTS = 1000


# --- settings: what the request path reads ----------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SolveSettings:
    """IK defaults a request falls back to (its 0 / -1 / empty fields)."""

    position_tolerance: float = DEFAULT_POSITION_TOLERANCE  # m
    orientation_tolerance: float = DEFAULT_ORIENTATION_TOLERANCE  # rad
    max_iterations: int = 100  # per attempt
    restarts: int = 8
    timeout: float = 0.1  # s, single solves; 0 = no limit


@dataclasses.dataclass(frozen=True)
class PlanSettings:
    """Defaults of planning requests (~/plan_trajectory, ~/retarget_motion)."""

    num_steps: int = 64
    velocity_scaling: float = 0.5
    acceleration_scaling: float = 0.5
    acceleration_limit: float = 5.0  # rad/s^2 (m/s^2), URDFs carry none
    safety_margin: float = 0.02
    collision_spheres: str = "auto"
    allowed_contacts: tuple[tuple[str, str], ...] = ()  # (link, obstacle or link) pairs
    start_collision: str = "refuse"  # TrajectoryOptimizer.plan's start_collision
    timeout: float = 5.0  # s, budget of a plan whose request gives none
    retarget_timeout: float = 2.0  # s, budget of a retargeting whose request gives none


@dataclasses.dataclass(frozen=True)
class RequestLimits:
    """Upper bounds on request sizes; each field is the node parameter of the same name.

    A client on the DDS domain can send a message of any size. Each size the node would spend
    time or memory on (objectives, targets, obstacles, steps, names, URDF text) has a limit
    with a safe default; a request over one is refused at once with REQUEST_TOO_LARGE
    (requests.py) and a message naming the parameter, before any parsing that grows with the
    size. The defaults keep one request's work in the seconds and the node's memory under
    ~2 GB (docs/benchmarks/hostile_input.md measures both).

    The interfaces add a ceiling of their own: the sequences of nested messages are bounded in
    msg/ and srv/ (objectives and waypoints 64, obstacles and half-spaces 4096, message-form
    batch targets and retarget steps 16384, points per step 64), because rclpy turns every
    nested message into a Python object before any node code runs (~30 us per obstacle here,
    bench/deserialize_cost.py: 100,000 obstacles would take ~3 s). A standard client cannot
    even serialise a request past a ceiling; a parameter above a ceiling has no effect beyond
    it.
    """

    max_objectives: int = 16  # per IK problem (solve_ik, a goal, a plan's goal or waypoint)
    max_waypoints: int = 16  # waypoint groups of one plan
    max_batch_targets: int = 100_000  # targets of one solve_ik_batch
    max_obstacles: int = 1024  # obstacles + half-spaces of one plan
    max_trajectory_steps: int = 4096  # knots of one plan
    max_retarget_steps: int = 4096  # steps of one retarget_motion
    max_keypoints: int = 200_000  # steps x links of one retarget_motion
    max_names: int = 1024  # names (joint, link) in any one list of a message
    max_urdf_bytes: int = 10_000_000  # a robot_description / urdf_file
    max_urdf_links: int = 1000  # links of a robot model


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a request or a teleop step reads from the parameters, as one snapshot."""

    solve: SolveSettings
    plan: PlanSettings
    limits: RequestLimits
    teleop_rate_hz: float
    velocity_scaling: float  # teleop steps and plans
    allow_execute: bool
    joint_states_topic: str
    max_pending_compiles: int


# --- the table ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    default: object
    description: str
    read_only: bool = False
    float_range: tuple[float, float] | None = None
    int_range: tuple[int, int] | None = None


PARAMETERS = (
    # --- robot model
    Param(
        "robot_description_topic",
        "/robot_description",
        "Topic with the URDF (std_msgs/String, transient local, as robot_state_publisher "
        "publishes it). A new description rebuilds the model. Ignored if urdf_file is set.",
        read_only=True,
    ),
    Param(
        "urdf_file",
        "",
        "Path of a URDF file, or a bundled robot's name (panda, ur5), to load at start instead "
        "of subscribing to robot_description_topic (empty = use the topic).",
        read_only=True,
    ),
    Param(
        "publish_robot_description",
        False,
        "With urdf_file: publish the loaded URDF on robot_description_topic (transient local) "
        "for others, as robot_state_publisher would (the launch file's "
        "use_robot_state_publisher:=false).",
        read_only=True,
    ),
    Param(
        "joint_states_topic",
        "/joint_states",
        "sensor_msgs/JointState topic with the current configuration (default IK seed, FK "
        "state, teleop start).",
        read_only=True,
    ),
    Param(
        "base_frame",
        "",
        "Frame of targets and FK poses whose frame_id is empty (a robot link; empty = the URDF "
        "root link). If a new robot lacks it, the root link is used.",
    ),
    Param(
        "tip_link",
        "",
        "Default link for ~/goal_pose teleop and the compiled-at-load pose objective (empty = "
        "the end of the longest revolute chain). If a new robot lacks it, that default is "
        "used.",
    ),
    # --- IK solver
    Param(
        "position_tolerance",
        DEFAULT_POSITION_TOLERANCE,
        "m; a solution succeeds when every position error is within this (request 0 = this).",
        float_range=(1e-9, 1.0),
    ),
    Param(
        "orientation_tolerance",
        DEFAULT_ORIENTATION_TOLERANCE,
        "rad; a solution succeeds when every orientation error is within this.",
        float_range=(1e-9, math.pi),
    ),
    Param(
        "max_iterations",
        100,
        "Levenberg-Marquardt iterations per attempt (the seed attempt and each restart; also "
        "per teleop step).",
        int_range=(1, 100000),
    ),
    Param(
        "restarts",
        8,
        "Extra attempts from other start points when the seed attempt misses the tolerances "
        "(SolveIK.max_restarts -1 = this; batches: per target).",
        int_range=(0, MAX_RESTARTS),
    ),
    Param(
        "timeout",
        0.1,
        "s; default wall-clock budget of one ~/solve_ik request (0 = no limit). Checked "
        "between solver calls; batches have no default budget.",
        float_range=(0.0, 3600.0),
    ),
    # --- trajectories and teleoperation
    Param(
        "trajectory_topic",
        "/joint_trajectory_controller/joint_trajectory",
        "trajectory_msgs/JointTrajectory output of teleop (one point per step).",
        read_only=True,
    ),
    Param(
        "trajectory_num_steps",
        64,
        "Knots of a ~/plan_trajectory path, start and goal included (request num_steps 0 = this).",
        int_range=(2, 4096),
    ),
    Param(
        "teleop_rate_hz",
        50.0,
        "Rate of the teleop solve loop; each output point is 1/rate s ahead.",
        read_only=True,
        float_range=(0.1, 1000.0),
    ),
    Param(
        "velocity_scaling",
        0.5,
        "Fraction of the URDF velocity limits a teleop step may use.",
        float_range=(1e-6, 1.0),
    ),
    Param(
        "acceleration_scaling",
        0.5,
        "Fraction of acceleration_limit a ~/plan_trajectory trajectory may use (request 0 = this).",
        float_range=(1e-6, 1.0),
    ),
    Param(
        "acceleration_limit",
        5.0,
        "rad/s^2 (m/s^2 for prismatic joints) for every joint: URDFs carry no acceleration "
        "limits. ~/plan_trajectory times its paths within acceleration_scaling x this and "
        "velocity_scaling x the URDF velocity limits.",
        float_range=(1e-6, 1e6),
    ),
    Param(
        "safety_margin",
        0.02,
        "m; default clearance of ~/plan_trajectory paths from obstacles and between the "
        "robot's own links (request safety_margin 0 = this).",
        float_range=(0.0, 1.0),
    ),
    Param(
        "collision_spheres",
        "auto",
        "Robot collision model for planning: auto = the bundled sphere set of an embedded "
        "robot with the same name (panda, ur5), else spheres fitted to the URDF collision "
        "geometry; fine = the embedded robot's fine set (tight spheres for obstacles, the "
        "default ones for self-collision, the Panda's fingers and hand as boxes: more grasps "
        "in clutter, a longer planner warm-up); a YAML "
        "file path ({spheres: {link: [[x, y, z, r], ...]}, optional self_spheres of the same "
        "form (then spheres are for obstacles only, self_spheres for self-collision only), "
        "ignore: [[link, link], ...]}); empty = no collision checking.",
        read_only=True,
    ),
    Param(
        "fixed_frames",
        "",
        "Frames requests may name beside the robot's links (until tf2 is available here): "
        "'name parent x y z qx qy qz qw; ...', each the frame's pose in a link of the robot "
        "(m, ROS quaternion order), e.g. 'world panda_link0 0 0 0 0 0 0 1'.",
        read_only=True,
    ),
    Param(
        "planning_timeout",
        5.0,
        "s; wall-clock budget of a ~/plan_trajectory whose request gives none (its timeout 0), "
        "checked between start paths: past it the answer is TIMEOUT with the best path so far; "
        "a first plan among a new kind or number of obstacles that is still compiling then "
        "answers TIMEOUT and compiles on for the next request.",
        float_range=(0.01, 3600.0),
    ),
    Param(
        "retarget_timeout",
        2.0,
        "s; wall-clock budget of a ~/retarget_motion whose request gives none (its timeout 0), "
        "checked every few solver iterations: past it the answer is TIMEOUT with the path so far "
        "(compiling the program of a new motion length, its first use, is not counted).",
        float_range=(0.01, 3600.0),
    ),
    Param(
        "allowed_contacts",
        "",
        "Contacts that are not collisions in every ~/plan_trajectory, as 'link:other' pairs "
        "separated by commas; other = an obstacle's name (obstacle_names) or a link "
        "(e.g. 'panda_hand:grasped_box'). Links no active joint moves are never checked against "
        "obstacles unless a request sets check_fixed_links.",
        read_only=True,
    ),
    Param(
        "start_collision",
        "refuse",
        "What ~/plan_trajectory does with a start state the collision model calls a "
        "collision: refuse = answer START_IN_COLLISION naming both sides; escape = plan from "
        f"a clear configuration within {ESCAPE_REACH[-1]:g} rad per active joint (as MoveIt's "
        "FixStartStateCollision adapter does), the first segment never overlapping deeper than "
        "the start, and say so in the answer's message (a measured state is where the robot "
        "is; spheres reach past its surface).",
        read_only=True,
    ),
    Param(
        "sampler_checkpoint",
        "",
        "Learned IK sampler for this robot: the name of a model shipped in the package "
        "('panda', 'ur5': the bundled robots, tips panda_hand_tcp and tool0, position "
        "targets) or the path of a checkpoint (.npz from `pyroki-ros train-sampler`; write "
        "./panda.npz for a local file named like a shipped model): "
        "~/solve_ik requests with one objective on the sampler's tip (no max_deviation, no "
        "active_joints) start from the best of its samples when that is closer to the "
        "target than the seed. Empty = off; a checkpoint for another robot is logged and "
        "ignored.",
        read_only=True,
    ),
    # --- request limits (RequestLimits): over one -> REQUEST_TOO_LARGE at once (requests.py)
    Param(
        "max_objectives",
        RequestLimits.max_objectives,
        "Objectives of one IK problem (~/solve_ik, a teleop goal, a plan's goal or waypoint): "
        "each new combination compiles a program whose size grows with this.",
        int_range=(1, 256),
    ),
    Param(
        "max_waypoints", RequestLimits.max_waypoints, "Waypoints of one plan.", int_range=(0, 256)
    ),
    Param(
        "max_batch_targets",
        RequestLimits.max_batch_targets,
        "Targets of one ~/solve_ik_batch.",
        int_range=(1, 10_000_000),
    ),
    Param(
        "max_obstacles",
        RequestLimits.max_obstacles,
        "Obstacles plus half-spaces of one ~/plan_trajectory.",
        int_range=(0, 1_000_000),
    ),
    Param(
        "max_trajectory_steps",
        RequestLimits.max_trajectory_steps,
        "Knots of one ~/plan_trajectory (num_steps).",
        int_range=(2, 1_000_000),
    ),
    Param(
        "max_retarget_steps",
        RequestLimits.max_retarget_steps,
        "Steps of one ~/retarget_motion.",
        int_range=(2, 10_000_000),
    ),
    Param(
        "max_keypoints",
        RequestLimits.max_keypoints,
        "Keypoints (steps x links) of one ~/retarget_motion.",
        int_range=(2, 100_000_000),
    ),
    Param(
        "max_names",
        RequestLimits.max_names,
        "Names (or positions) in any one list of a message: a JointState on /joint_states or "
        "in a request, active_joints, link_names.",
        int_range=(1, 1_000_000),
    ),
    Param(
        "max_urdf_bytes",
        RequestLimits.max_urdf_bytes,
        "Size of a robot_description (or urdf_file); a larger one is refused, the model kept.",
        int_range=(1, 1_000_000_000),
    ),
    Param(
        "max_urdf_links",
        RequestLimits.max_urdf_links,
        "Links of a robot model; a URDF with more is refused, the model kept.",
        int_range=(1, 1_000_000),
    ),
    Param(
        "max_compiled_programs",
        32,
        "Compiled IK programs kept per model, and planner programs likewise (memory grows with "
        "each); the least recently used is dropped beyond this, and recompiled on its next use.",
        read_only=True,
        int_range=(4, 4096),
    ),
    Param(
        "max_pending_compiles",
        4,
        "~/solve_ik requests waiting for a first-time compile (off the request thread); "
        "beyond this, BUSY.",
        read_only=True,
        int_range=(1, 1000),
    ),
    Param(
        "service_queue_depth",
        1000,
        "Requests each service keeps queued (QoS history depth). DDS drops requests beyond "
        "it silently: a client sending bursts needs this (and its own response depth) large.",
        read_only=True,
        int_range=(1, 100_000),
    ),
    # --- permissions
    Param(
        "allow_execute",
        False,
        "Whether a request's execute = true may publish a trajectory to trajectory_topic (the "
        "robot's controller). Off: such requests are refused (INVALID_REQUEST). Teleop goals "
        "always publish. Read-only: nobody on the DDS domain can switch it on at run time.",
        read_only=True,
    ),
    Param(
        "accept_robot_description_once",
        False,
        "Keep the first valid robot model: later robot_description messages are logged and "
        "ignored (nobody on the DDS domain can swap the robot afterwards).",
        read_only=True,
    ),
    # --- visualisation
    Param(
        "publish_markers",
        True,
        "Publish RViz markers on ~/markers (visualization_msgs/MarkerArray, transient local) "
        "after each solve_ik, plan_trajectory and teleop step: goals, objectives, the planned "
        "path, obstacles, collision spheres (markers.py; built off the request path, <= 10 Hz).",
        read_only=True,
    ),
    # --- compute
    Param("device", "auto", "JAX device for the solver: auto, cpu or gpu.", read_only=True),
    Param(
        "warmup_batch_sizes",
        [16, 128, 1024],
        "~/solve_ik_batch sizes whose programs (tip pose objective) are compiled in the "
        "background after a model loads (rounded up to the solver's buckets).",
        read_only=True,
    ),
    Param(
        "warmup_plan",
        False,
        "Compile the planner's programs in the background after a model loads (a pose goal "
        "for tip_link with trajectory_num_steps knots, without obstacles, among boxes and "
        "cylinders and among boxes alone, up to 16 of each), so that the first "
        "~/plan_trajectory does not wait for those compiles.",
        read_only=True,
    ),
    Param(
        "compilation_cache_dir",
        "auto",
        "Folder of the persistent compilation cache: compiled solvers are reused across "
        "restarts (auto = $XDG_CACHE_HOME/pyroki_ros/xla, shared with the pyroki-ros CLI; "
        "empty = off; ignored when JAX_COMPILATION_CACHE_DIR is set).",
        read_only=True,
    ),
    Param(
        "cache_serving_compiles",
        False,
        "Also write programs first compiled while serving (after a model's load and "
        "background warm-up) to the compilation cache. Off: only the load's and warm-up's "
        "programs are kept, because a write holds Python's lock ~0.1 s and every other "
        "request waits meanwhile.",
        read_only=True,
    ),
)


# --- declaring and reading ------------------------------------------------------------------------


def declare(node) -> None:
    """Declares every parameter on ``node`` (SystemExit for a value of the wrong type or out of
    range in a params file) and warns about unknown ones (typos)."""
    for spec in PARAMETERS:
        descriptor = ParameterDescriptor(description=spec.description, read_only=spec.read_only)
        if spec.float_range:
            descriptor.floating_point_range = [
                FloatingPointRange(from_value=spec.float_range[0], to_value=spec.float_range[1])
            ]
        if spec.int_range:
            descriptor.integer_range = [
                IntegerRange(from_value=spec.int_range[0], to_value=spec.int_range[1], step=1)
            ]
        try:
            node.declare_parameter(spec.name, spec.default, descriptor)
        except Exception as e:  # noqa: BLE001 -- wrong type / out of range in a params file
            raise SystemExit(
                f"{NODE_NAME}: parameter '{spec.name}' (default {spec.default!r}): {e}"
            ) from None
    declared = {spec.name for spec in PARAMETERS} | {"use_sim_time"}
    for name in sorted(set(node._parameter_overrides) - declared):  # rclpy has no public API
        if not name.startswith("qos_overrides."):
            node.get_logger().warning(f"unknown parameter '{name}' ignored (typo?)")
    device = node.get_parameter("device").value
    if device not in ("auto", "cpu", "gpu"):
        raise SystemExit(
            f"{NODE_NAME}: parameter 'device' must be auto, cpu or gpu, got '{device}'"
        )


def read(node, changed: dict | None = None) -> Settings:
    """The settings from ``node``'s parameters, with ``changed`` ({name: value}, a set about to
    take effect) applied. SystemExit for a malformed read-only text parameter (at start)."""
    changed = changed or {}

    def value(name):
        return changed[name] if name in changed else node.get_parameter(name).value

    try:
        contacts = contact_pairs(value("allowed_contacts"))
    except ValueError as e:
        raise SystemExit(f"{NODE_NAME}: {e}") from None
    start_collision = str(value("start_collision"))
    if start_collision not in START_COLLISION:
        raise SystemExit(
            f"{NODE_NAME}: parameter 'start_collision' must be one of "
            f"{', '.join(START_COLLISION)}, got '{start_collision}'"
        )
    return Settings(
        solve=SolveSettings(
            position_tolerance=float(value("position_tolerance")),
            orientation_tolerance=float(value("orientation_tolerance")),
            max_iterations=int(value("max_iterations")),
            restarts=int(value("restarts")),
            timeout=float(value("timeout")),
        ),
        plan=PlanSettings(
            num_steps=int(value("trajectory_num_steps")),
            velocity_scaling=float(value("velocity_scaling")),
            acceleration_scaling=float(value("acceleration_scaling")),
            acceleration_limit=float(value("acceleration_limit")),
            safety_margin=float(value("safety_margin")),
            collision_spheres=str(value("collision_spheres")),
            allowed_contacts=contacts,
            start_collision=start_collision,
            timeout=float(value("planning_timeout")),
            retarget_timeout=float(value("retarget_timeout")),
        ),
        limits=RequestLimits(
            **{f.name: int(value(f.name)) for f in dataclasses.fields(RequestLimits)}
        ),
        teleop_rate_hz=float(value("teleop_rate_hz")),
        velocity_scaling=float(value("velocity_scaling")),
        allow_execute=bool(value("allow_execute")),
        joint_states_topic=str(value("joint_states_topic")),
        max_pending_compiles=int(value("max_pending_compiles")),
    )


def fixed_frames(node) -> dict[str, tuple[str, np.ndarray]]:
    """The ``fixed_frames`` parameter as a table (SystemExit if malformed)."""
    try:
        return fixed_frame_table(node.get_parameter("fixed_frames").value)
    except ValueError as e:
        raise SystemExit(f"{NODE_NAME}: {e}") from None


def warmup_batch_sizes(node) -> list[int]:
    """The ``warmup_batch_sizes`` parameter: sizes > 1 (`[]` on the command line has no type)."""
    parameter = node.get_parameter_or("warmup_batch_sizes", None)
    values = parameter.value if parameter is not None else None
    if values is None or isinstance(values, str):
        return []
    return [int(v) for v in values if int(v) > 1]


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


def fixed_frame_table(text: str) -> dict[str, tuple[str, np.ndarray]]:
    """The ``fixed_frames`` parameter: "name parent x y z qx qy qz qw; ..." (ROS order, the
    frame's pose in its parent link's frame, m) -> {name: (parent, wxyz_xyz (7,))}.

    Raises:
        ValueError: a malformed entry, non-finite numbers, a zero quaternion, a name twice.
    """
    table: dict[str, tuple[str, np.ndarray]] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        name, *fields = entry.split()
        if len(fields) != 8:
            raise ValueError(f"fixed_frames entry '{entry}' is not 'name parent x y z qx qy qz qw'")
        try:
            numbers = np.array([float(v) for v in fields[1:]])
        except ValueError:
            raise ValueError(f"fixed_frames entry '{entry}': a value is not a number") from None
        quat = xyzw_to_wxyz(numbers[3:])
        if not np.all(np.isfinite(numbers)) or np.linalg.norm(quat) < 1e-9:
            raise ValueError(f"fixed_frames entry '{entry}': non-finite value or zero quaternion")
        if name in table:
            raise ValueError(f"fixed_frames names '{name}' twice")
        table[name] = (fields[0], np.concatenate([quat / np.linalg.norm(quat), numbers[:3]]))
    return table
