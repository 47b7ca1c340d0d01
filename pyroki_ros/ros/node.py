"""``pyroki_ros_node``: inverse / forward kinematics services and IK teleoperation over ROS 2.

    pyroki_ros_node --ros-args --params-file config/panda.yaml -p urdf_file:=panda

Interfaces (``~`` = the node's name, ``/pyroki_ros_node`` by default):

* subscribes ``robot_description`` (std_msgs/String, transient local, depth 1, reliable:
  what robot_state_publisher publishes), or loads ``urdf_file`` (then publishes it there,
  latched, with ``publish_robot_description``: no robot_state_publisher needed); a new
  description rebuilds the model and warms it up; an invalid one is logged and the last good
  model stays in use.
* subscribes ``joint_states`` (sensor_msgs/JointState): the current configuration, default seed.
* services ``~/solve_ik`` (pyroki_ros/srv/SolveIK), ``~/solve_ik_batch``
  (pyroki_ros/srv/SolveIKBatch), ``~/compute_fk`` (pyroki_ros/srv/ComputeFK),
  ``~/plan_trajectory`` (pyroki_ros/srv/PlanTrajectory: collision-aware trajectory
  optimisation, timed within the scaled limits, optionally published) and
  ``~/retarget_motion`` (pyroki_ros/srv/RetargetMotion). Every refused request gets
  ``success = false``, an ErrorCode and a message; the node keeps serving.
* teleop: ``~/goal_pose`` (geometry_msgs/PoseStamped for ``tip_link``) and ``~/goal``
  (pyroki_ros/MultiLinkGoal), depth 1: the newest goal wins. A timer at ``teleop_rate_hz``
  (paused while no goal is pending) solves the newest goal, seeded with the previous output,
  every joint's step limited to ``velocity_scaling`` x its URDF velocity limit x the step
  duration, and publishes a one-point trajectory_msgs/JointTrajectory on ``trajectory_topic``.
* publishes ``~/markers`` (visualization_msgs/MarkerArray, transient local, with
  ``publish_markers``): goals, objectives, the planned path, obstacles and collision spheres
  for RViz (markers.py).

Target frames: ``header.frame_id`` empty / the base frame / any robot link; a link's frame is
taken at the seed configuration and held fixed during the solve (teleop: at the configuration
where the goal is first processed, and held for that goal).
For goals relative to a link that moves with the solution, use IKObjective.reference_link.

Threads: the request path (IK, FK, teleop, /joint_states) is spun by a SingleThreadedExecutor
in the main thread: rclpy's MultiThreadedExecutor made IK round trips about twice as slow
here (docs/benchmarks/node.md). Slow work runs on a second node of
the same process, ``<name>_worker``, spun by its own executor threads: model (re)loading (so
requests keep using the previous model until the new one is warmed up), ``~/solve_ik_batch``,
``~/plan_trajectory`` and ``~/retarget_motion`` (served under this node's names, so a long
batch or plan never delays IK). A ``~/solve_ik`` that needs a new program is compiled on a
compile thread and answered from there (deferred.py), within the request's budget. The model
swap is guarded by a lock; requests take a reference to the model at their start.

Hostile input: every request size is bounded by a parameter (limits.py) and checked before
any work that grows with it.
"""

from __future__ import annotations

import array
import dataclasses
import gc
import math
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import rclpy
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import (
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from pyroki_ros.msg import CollisionObject, ErrorCode, IKObjective, MultiLinkGoal
from pyroki_ros.ros import markers, planning
from pyroki_ros.ros.conversions import (
    RequestError,
    fixed_frame_table,
    joint_state_positions,
    pose_compose,
    pose_inverse,
    pose_rows,
    pose_rows_to_wxyz_xyz,
    seconds_to_duration,
    wxyz_xyz_to_pose,
)
from pyroki_ros.ros.deferred import BackgroundWork, Deferred, allow_deferred, answer_within
from pyroki_ros.ros.limits import RequestLimits
from pyroki_ros.ros.model import MAX_RESTARTS, LoadedModel, SolveSettings
from pyroki_ros.ros.scene import PlanningScene
from pyroki_ros.srv import (
    ApplyPlanningScene,
    ComputeFK,
    PlanTrajectory,
    RetargetMotion,
    SolveIK,
    SolveIKBatch,
)

# Share the GPU with other processes: by default JAX takes 75 % of its memory at its first
# operation (backends start then, not at import, so this still applies). A user's own
# preallocation, memory fraction or allocator setting wins.
GPU_MEMORY_VARIABLES = (
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
)
if not any(name in os.environ for name in GPU_MEMORY_VARIABLES):
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

NODE_NAME = "pyroki_ros_node"
# After this long without a teleop output, the next goal starts again from /joint_states.
TELEOP_RESYNC_SECONDS = 1.0
# Samples the learned IK sampler (sampler_checkpoint) draws per ~/solve_ik request.
SAMPLER_SEEDS = 8
# Requests that may wait for one program's compile (beyond: BUSY).
WAITERS_PER_COMPILE = 64
# Memory one ~/retarget_motion may need (trajopt.retarget_memory_bytes): the node stays
# under ~2 GB with one running.
RETARGET_MEMORY_BYTES = 1 << 30
# Until a first robot_description arrives, check this often why not (see _check_description).
DESCRIPTION_WATCHDOG_SECONDS = 5.0

DESCRIPTION_QOS = QoSProfile(
    depth=1,
    history=HistoryPolicy.KEEP_LAST,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)
GOAL_QOS = QoSProfile(
    depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE
)


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
        1e-3,
        "m; a solution succeeds when every position error is within this (request 0 = this).",
        float_range=(1e-9, 1.0),
    ),
    Param(
        "orientation_tolerance",
        math.radians(1.0),
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
        "geometry; a YAML file path ({spheres: {link: [[x, y, z, r], ...]}, ignore: "
        "[[link, link], ...]}); empty = no collision checking.",
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
        "checked between start paths: past it the answer is TIMEOUT with the best path so far "
        "(compiling a new problem structure, its first plan, is not counted).",
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
        "sampler_checkpoint",
        "",
        "Learned IK sampler checkpoint (.npz from `pyroki-ros train-sampler`) for this robot: "
        "~/solve_ik requests with one objective on the sampler's tip (no max_deviation, no "
        "active_joints) start from the best of its samples when that is closer to the "
        "target than the seed. Empty = off; a checkpoint for another robot is logged and "
        "ignored.",
        read_only=True,
    ),
    # --- request limits (pyroki_ros/ros/limits.py): over one -> REQUEST_TOO_LARGE at once
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
        "compilation_cache_dir",
        "auto",
        "Folder of the persistent compilation cache: compiled solvers are reused across "
        "restarts (auto = $XDG_CACHE_HOME/pyroki_ros/xla, shared with the pyroki-ros CLI; "
        "empty = off; ignored when JAX_COMPILATION_CACHE_DIR is set).",
        read_only=True,
    ),
)


# The GIL switch interval (s). A thread that wants the GIL waits up to this long for the
# holder to let go; the request thread takes it ~20 times per request while a worker thread
# turns a huge message into Python objects or traces a new program: Python's default of 5 ms
# made a compute_fk beside a 100,000-obstacle plan request take 130-185 ms
# (bench/hostile_input.py); 0.5 ms keeps it near its idle latency.
GIL_SWITCH_INTERVAL = 0.0005


class PyrokiRosNode(Node):
    def __init__(self, **kwargs):
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        super().__init__(NODE_NAME, **kwargs)
        self._declare_parameters()
        self._configure_jax()

        self._model: LoadedModel | None = None
        self._model_lock = threading.Lock()
        self._model_generation = 0
        self._stop = threading.Event()
        self._closing = threading.Event()  # set at shutdown: long work ends early
        self._warm_thread: threading.Thread | None = None
        self._loading = False
        self._joint_positions: dict[str, float] = {}
        self._joint_state_lock = threading.Lock()
        self._last_failed_description: str | None = None
        self._sampler = None  # (model, IKSampler) when sampler_checkpoint is set

        # Slow work (model loads, planning) on a second node, spun by its own executor thread
        # (see main): the request path keeps a cheap single-threaded executor. Its entities get
        # names resolved by this node (remappings included), so it takes no global arguments
        # (a __node:= remap would otherwise rename it to this node's name).
        self.worker = rclpy.create_node(
            f"{self.get_name()}_worker",
            namespace=self.get_namespace(),
            context=self.context,
            use_global_arguments=False,
            start_parameter_services=False,
        )
        self._model_group = MutuallyExclusiveCallbackGroup()
        self._input_group = MutuallyExclusiveCallbackGroup()
        self._service_group = ReentrantCallbackGroup()
        self._teleop_group = MutuallyExclusiveCallbackGroup()

        # Teleop state: newest goal (and a counter), last output.
        self._teleop_lock = threading.Lock()
        self._goal: PoseStamped | MultiLinkGoal | None = None
        self._goal_seq = 0
        self._goal_done_seq = 0
        self._command: tuple[np.ndarray, float, int] | None = None  # q, time, model generation
        self._goal_cache: tuple | None = None  # (goal seq, model generation, objectives)

        p = self.get_parameter
        self._trajectory_pub = self.create_publisher(
            JointTrajectory, p("trajectory_topic").value, 10
        )
        # ~/markers for RViz: handlers hand over what they computed, markers.py's own thread
        # builds and publishes after the answer went out.
        self._markers = (
            markers.NodeMarkers(self, p("collision_spheres").value, self._closing)
            if p("publish_markers").value
            else markers.OFF
        )
        self.create_subscription(
            JointState,
            p("joint_states_topic").value,
            self._on_joint_state,
            10,
            callback_group=self._input_group,
        )
        self.create_subscription(
            PoseStamped, "~/goal_pose", self._on_goal, GOAL_QOS, callback_group=self._input_group
        )
        self.create_subscription(
            MultiLinkGoal, "~/goal", self._on_goal, GOAL_QOS, callback_group=self._input_group
        )
        service_qos = QoSProfile(
            depth=p("service_queue_depth").value,
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
        )
        solve_ik = self.create_service(
            SolveIK,
            "~/solve_ik",
            self._solve_ik,
            qos_profile=service_qos,
            callback_group=self._service_group,
        )
        allow_deferred(solve_ik)  # first-time compiles answer from the compile thread
        self._compiles = BackgroundWork(1, p("max_pending_compiles").value, "pyroki_compile")
        self._compiling: dict[tuple, list] = {}  # program key -> requests waiting for it
        self._compiling_lock = threading.Lock()
        self.create_service(
            ComputeFK,
            "~/compute_fk",
            self._compute_fk,
            qos_profile=service_qos,
            callback_group=self._service_group,
        )
        # Long work on the worker node (its own executor threads): a big batch, a plan or a
        # retargeting never delays IK / FK. Batches run beside plans, not behind them.
        self._batch_group = MutuallyExclusiveCallbackGroup()
        self.worker.create_service(
            SolveIKBatch,
            self.resolve_service_name("~/solve_ik_batch"),
            self._solve_ik_batch,
            qos_profile=service_qos,
            callback_group=self._batch_group,
        )
        self._planning_group = MutuallyExclusiveCallbackGroup()  # plans queue, IK stays free
        self._planners: dict[int, planning.Planner] = {}
        self._planner_lock = threading.Lock()
        self.worker.create_service(
            PlanTrajectory,
            self.resolve_service_name("~/plan_trajectory"),
            self._plan_trajectory,
            qos_profile=service_qos,
            callback_group=self._planning_group,
        )
        self.worker.create_service(
            RetargetMotion,
            self.resolve_service_name("~/retarget_motion"),
            self._retarget_motion,
            qos_profile=service_qos,
            callback_group=self._planning_group,
        )
        # The planning scene: changes on the worker, beside plans (a plan copies it first).
        self._scene = PlanningScene(self._limits.max_obstacles)
        self._scene_group = MutuallyExclusiveCallbackGroup()
        self.worker.create_subscription(
            CollisionObject,
            self.resolve_topic_name("~/collision_objects"),
            self._on_collision_object,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
            callback_group=self._scene_group,
        )
        self.worker.create_service(
            ApplyPlanningScene,
            self.resolve_service_name("~/apply_planning_scene"),
            self._apply_planning_scene,
            qos_profile=service_qos,
            callback_group=self._scene_group,
        )
        self._teleop_timer = self.create_timer(
            1.0 / p("teleop_rate_hz").value, self._teleop_tick, callback_group=self._teleop_group
        )

        urdf_file = p("urdf_file").value
        if urdf_file:
            self._description_pub = None
            if p("publish_robot_description").value:  # opt-in: SROS2 policies must grant it
                self._description_pub = self.create_publisher(
                    String, self.resolve_topic_name(self._description_topic()), DESCRIPTION_QOS
                )
            self._load_timer = self.worker.create_timer(
                0.0, self._load_urdf_file, callback_group=self._model_group
            )
        else:
            self._description_seen = False
            self._subscribe_description()
            self._description_watchdog = self.worker.create_timer(
                DESCRIPTION_WATCHDOG_SECONDS,
                self._check_description,
                callback_group=self._model_group,
            )
            self.get_logger().info(
                f"waiting for a URDF on {self.resolve_topic_name(self._description_topic())}"
            )

    # --- parameters --------------------------------------------------------------------------

    def _declare_parameters(self) -> None:
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
                self.declare_parameter(spec.name, spec.default, descriptor)
            except Exception as e:  # noqa: BLE001 -- wrong type / out of range in a params file
                raise SystemExit(
                    f"{NODE_NAME}: parameter '{spec.name}' (default {spec.default!r}): {e}"
                ) from None
        declared = {spec.name for spec in PARAMETERS} | {"use_sim_time"}
        for name in sorted(set(self._parameter_overrides) - declared):
            if not name.startswith("qos_overrides."):
                self.get_logger().warning(f"unknown parameter '{name}' ignored (typo?)")
        device = self.get_parameter("device").value
        if device not in ("auto", "cpu", "gpu"):
            raise SystemExit(
                f"{NODE_NAME}: parameter 'device' must be auto, cpu or gpu, got '{device}'"
            )
        try:
            self._allowed_contacts = planning.contact_pairs(
                self.get_parameter("allowed_contacts").value
            )
            self._fixed_frames = fixed_frame_table(self.get_parameter("fixed_frames").value)
        except ValueError as e:
            raise SystemExit(f"{NODE_NAME}: {e}") from None
        self._settings = self._read_settings({})
        self._limits = self._read_limits({})
        self.add_on_set_parameters_callback(self._on_set_parameters)

    def _read_settings(self, changed: dict) -> SolveSettings:
        def value(name):
            return changed[name] if name in changed else self.get_parameter(name).value

        return SolveSettings(
            position_tolerance=float(value("position_tolerance")),
            orientation_tolerance=float(value("orientation_tolerance")),
            max_iterations=int(value("max_iterations")),
            restarts=int(value("restarts")),
            timeout=float(value("timeout")),
        )

    def _read_limits(self, changed: dict) -> RequestLimits:
        return RequestLimits(
            **{
                f.name: int(changed.get(f.name, self.get_parameter(f.name).value))
                for f in dataclasses.fields(RequestLimits)
            }
        )

    def _on_set_parameters(self, parameters: list[Parameter]) -> SetParametersResult:
        changed = {p.name: p.value for p in parameters}
        model = self._current_model()
        if model is not None and ("base_frame" in changed or "tip_link" in changed):
            base = changed.get("base_frame", self.get_parameter("base_frame").value)
            tip = changed.get("tip_link", self.get_parameter("tip_link").value)
            for what, name in (("base_frame", base), ("tip_link", tip)):
                if name and name not in model.link_names:
                    return SetParametersResult(
                        successful=False,
                        reason=f"{what} '{name}' is not a link of robot '{model.name}'",
                    )
            with self._model_lock:
                model.set_frames(base, tip)
        self._settings = self._read_settings(changed)
        self._limits = self._read_limits(changed)
        return SetParametersResult(successful=True)

    def _configure_jax(self) -> None:
        import jax

        jax.config.update("jax_cpu_enable_async_dispatch", False)  # small solves: less latency
        wanted = self.get_parameter("device").value
        self._device = None if wanted == "auto" else wanted
        if self._device is not None:
            try:
                jax.devices(self._device)
            except RuntimeError as e:
                self.get_logger().error(
                    f"device '{wanted}' is not available here ({e}); solving on the CPU"
                )
                self._device = "cpu"
        cache = self.get_parameter("compilation_cache_dir").value
        if cache and not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
            from pyroki_ros.ik import enable_compilation_cache

            try:
                enable_compilation_cache(None if cache == "auto" else os.path.expanduser(cache))
            except OSError as e:
                self.get_logger().warning(f"no compilation cache at '{cache}': {e}")

    # --- model ---------------------------------------------------------------------------------

    def _current_model(self) -> LoadedModel | None:
        with self._model_lock:
            return self._model

    def _require_model(self) -> LoadedModel:
        model = self._current_model()
        if model is None:
            source = self.get_parameter("urdf_file").value or self.resolve_topic_name(
                self.get_parameter("robot_description_topic").value
            )
            raise RequestError(
                ErrorCode.NO_ROBOT_MODEL,
                f"no robot model loaded yet (waiting for a valid URDF from {source})",
            )
        return model

    def _load_urdf_file(self) -> None:
        self._load_timer.cancel()
        try:
            self._load_urdf_file_unsafe()
        except Exception:  # noqa: BLE001
            self._log_exception("urdf_file")

    def _load_urdf_file_unsafe(self) -> None:
        from pyroki_ros.robots import AVAILABLE, urdf_path

        value = self.get_parameter("urdf_file").value
        # A bundled robot's name works from any directory and install (README's command).
        path = str(urdf_path(value)) if value in AVAILABLE else os.path.expanduser(value)
        try:
            urdf = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            self.get_logger().error(f"cannot read urdf_file '{path}': {e}; no robot model")
            return
        self._load_model(urdf, f"file {path}")
        self._publish_description(urdf)

    def _publish_description(self, urdf: str) -> None:
        """Latch the URDF of the model just loaded from urdf_file for others (RViz, tools),
        when there is no robot_state_publisher to do it (publish_robot_description)."""
        model = self._current_model()
        if self._description_pub is not None and model is not None and model.urdf == urdf:
            self._description_pub.publish(String(data=urdf))

    def _description_topic(self) -> str:
        return self.get_parameter("robot_description_topic").value

    def _subscribe_description(self) -> None:
        self._description_sub = self.worker.create_subscription(
            String,
            self.resolve_topic_name(self._description_topic()),
            self._on_robot_description,
            DESCRIPTION_QOS,
            callback_group=self._model_group,
        )

    def _check_description(self) -> None:
        """Until a first description arrives: say why, and re-subscribe when a publisher is
        there. (Fast DDS can fail to deliver a transient-local sample to a late-joining reader,
        eProsima/Fast-DDS#3822; a new reader gets it again.)"""
        if self._description_seen:
            self._description_watchdog.cancel()
            return
        topic = self.resolve_topic_name(self._description_topic())
        if self.count_publishers(topic) == 0:
            self.get_logger().warning(
                f"no robot model yet: nothing publishes {topic} (is robot_state_publisher "
                "running?)",
                throttle_duration_sec=30.0,
            )
            return
        self.get_logger().warning(
            f"{topic} has a publisher but no description arrived yet: subscribing again"
        )
        self.worker.destroy_subscription(self._description_sub)
        self._subscribe_description()

    def _on_robot_description(self, msg: String) -> None:
        self._description_seen = True
        try:
            self._on_robot_description_unsafe(msg)
        except Exception:  # noqa: BLE001 -- an exception would stop the executor: log, serve on
            self._log_exception("robot_description")

    def _log_exception(self, where: str) -> None:
        import traceback

        self.get_logger().error(f"{where}: internal error: {traceback.format_exc()}")

    def _on_robot_description_unsafe(self, msg: String) -> None:
        current = self._current_model()
        if current is not None and msg.data == current.urdf:
            self.get_logger().debug("robot_description unchanged: model kept")
            return
        if current is not None and self.get_parameter("accept_robot_description_once").value:
            self.get_logger().warning(
                f"robot_description ignored: accept_robot_description_once is set and robot "
                f"'{current.name}' is loaded",
                throttle_duration_sec=10.0,
            )
            return
        if msg.data == self._last_failed_description:
            return
        if not msg.data.lstrip().startswith("<"):
            # Never read a file named by a topic: robot_description is the XML itself.
            self._last_failed_description = msg.data
            kept = self._current_model()
            self.get_logger().error(
                f"invalid URDF from robot_description: not XML (starts with "
                f"{msg.data.lstrip()[:40]!r}); "
                + (f"still using robot '{kept.name}'" if kept else "no robot model loaded")
            )
            return
        self._load_model(msg.data, "robot_description")

    def _load_model(self, urdf: str, source: str) -> None:
        self._loading = True
        try:
            self._load_model_unsafe(urdf, source)
        finally:
            self._loading = False

    def busy_compiling(self) -> bool:
        """A model load or a background warm-up is running (neither can be interrupted)."""
        thread = self._warm_thread
        return self._loading or (thread is not None and thread.is_alive())

    def _load_model_unsafe(self, urdf: str, source: str) -> None:
        logger = self.get_logger()
        start = time.perf_counter()
        try:
            limits = self._limits
            limits.check(len(urdf), "max_urdf_bytes", "URDF size in characters")
            # A cheap upper bound before parsing: every link element opens with "<link".
            limits.check(urdf.count("<link"), "max_urdf_links", "URDF link elements")
            model = LoadedModel(
                urdf,
                base_frame=self.get_parameter("base_frame").value,
                tip_link=self.get_parameter("tip_link").value,
                device=self._device,
                source=source,
                max_programs=self.get_parameter("max_compiled_programs").value,
                fixed_frames=self._fixed_frames,
            )
        except RequestError as e:
            self._last_failed_description = urdf
            kept = self._current_model()
            logger.error(
                f"URDF from {source} refused: {e.message}; "
                + (f"still using robot '{kept.name}'" if kept else "no robot model loaded")
            )
            return
        except Exception as e:  # noqa: BLE001 -- URDFError (ValueError) or anything as bad
            self._last_failed_description = urdf
            kept = self._current_model()
            logger.error(
                f"invalid URDF from {source}: {e}; "
                + (f"still using robot '{kept.name}'" if kept else "no robot model loaded")
            )
            return
        for note in model.notes:
            logger.warning(note)
        logger.info(f"compiling for {model.describe()} ...")
        try:
            model.warm_up()
        except Exception as e:  # noqa: BLE001
            self._last_failed_description = urdf
            logger.error(f"warm-up of robot '{model.name}' failed: {e!r}; model not used")
            return
        self._last_failed_description = None
        self._load_sampler(model)
        self._stop_warm_thread()
        with self._model_lock:
            self._model = model
            self._model_generation += 1
        with self._teleop_lock:  # goals for the old robot are void
            self._goal, self._goal_done_seq, self._command = None, self._goal_seq, None
        # The ~200,000 objects alive now (JAX, the model, its programs) stay: move them out of
        # the garbage collector's sight. Otherwise a request that allocates many objects (a
        # big message) triggers full collections over all of them, 120 ms each here with the
        # GIL held (0.01 ms frozen), and every other request waits (bench/gc_pause.py).
        gc.freeze()
        logger.info(
            f"ready: {model.describe()} (load {time.perf_counter() - start:.2f} s, of which "
            f"warm-up {model.warm_up_seconds:.2f} s)"
        )
        sizes = self._warmup_batch_sizes()
        if sizes and self.context.ok():
            self._stop = threading.Event()
            self._warm_thread = threading.Thread(
                target=self._warm_batches,
                args=(model, sizes, self._stop),
                name="pyroki_warm_up",
                daemon=True,
            )
            self._warm_thread.start()

    def _load_sampler(self, model: LoadedModel) -> None:
        """The learned IK sampler for this model, if configured and matching."""
        self._sampler = None
        path = self.get_parameter("sampler_checkpoint").value
        if not path:
            return
        from pyroki_ros.sampler import IKSampler

        try:
            sampler = IKSampler.load(os.path.expanduser(path), model.robot)
            if sampler.spec.base != model.root_link:
                raise ValueError(f"its base '{sampler.spec.base}' is not the root link")
            from pyroki_ros.sampler.seeding import best_samples

            target = np.zeros(3) if sampler.spec.mode == "position" else np.eye(1, 7)[0]
            best_samples(sampler, target, SAMPLER_SEEDS, incumbent=sampler.rest)  # compile
        except (ValueError, OSError, KeyError) as e:
            self.get_logger().error(f"sampler_checkpoint '{path}' not used: {e}")
            return
        self._sampler = (model, sampler)
        self.get_logger().info(
            f"learned IK sampler from '{path}' seeds ~/solve_ik for '{sampler.spec.tip}' "
            f"({sampler.spec.mode} targets)"
        )

    def _sampler_seed(self, model, objectives, seed, request) -> np.ndarray:
        """The best of the sampler's samples when it is closer to the target than ``seed``."""
        held = self._sampler
        if held is None or held[0] is not model or len(objectives) != 1:
            return seed
        sampler = held[1]
        o = objectives[0]
        spec = sampler.spec
        if (
            o.link != spec.tip
            or o.reference is not None
            or request.max_deviation > 0
            or len(request.active_joints)
            or o.kind not in (("pose", "position") if spec.mode == "position" else ("pose",))
        ):
            return seed
        from pyroki_ros.sampler.seeding import best_samples

        target = np.asarray(o.target, np.float64)
        target = target[4:] if spec.mode == "position" else target
        # One compiled program draws, ranks (the seed among them) and picks.
        best, _ = best_samples(sampler, target, k=SAMPLER_SEEDS, incumbent=seed)
        if np.array_equal(best, seed):  # no sample is closer than the seed
            return seed
        q = seed.copy()
        chain = list(spec.chain)
        q[chain] = best[chain]
        return model.clip(q)

    def _warmup_batch_sizes(self) -> list[int]:
        parameter = self.get_parameter_or("warmup_batch_sizes", None)
        values = parameter.value if parameter is not None else None
        if values is None or isinstance(values, str):  # `[]` on the command line has no type
            return []
        return [int(v) for v in values if int(v) > 1]

    def _warm_batches(self, model: LoadedModel, sizes: list[int], stop: threading.Event) -> None:
        try:
            seconds = model.warm_up_batches(sizes, stop=stop)
            if not stop.is_set():
                self.get_logger().info(
                    f"batch programs for {sizes} compiled in the background ({seconds:.2f} s)"
                )
        except Exception as e:  # noqa: BLE001 -- never kill the node for a warm-up
            self.get_logger().error(f"background warm-up failed: {e!r}")

    def _stop_warm_thread(self) -> None:
        self._stop.set()

    # --- inputs --------------------------------------------------------------------------------

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            self._limits.check_state(msg, "a /joint_states message")
            positions = joint_state_positions(msg, "a /joint_states message")
        except RequestError as e:
            self.get_logger().warning(f"ignored: {e.message}", throttle_duration_sec=5.0)
            return
        with self._joint_state_lock:
            self._joint_positions.update(positions)

    def _latest_joint_positions(self) -> dict[str, float]:
        with self._joint_state_lock:
            return dict(self._joint_positions)

    def _on_goal(self, msg) -> None:
        with self._teleop_lock:
            self._goal = msg
            self._goal_seq += 1
            if self._teleop_timer.is_canceled():  # paused while there was nothing to do
                self._teleop_timer.reset()

    # --- services ------------------------------------------------------------------------------

    def _solve_ik(self, request: SolveIK.Request, response: SolveIK.Response):
        start = time.perf_counter()
        try:
            model = self._require_model()
            problem = self._ik_problem(model, request)
            if not model.is_compiled(problem["objectives"], problem["seed"]):
                return self._solve_ik_deferred(model, problem, start)
            outcome = model.solve(**problem)
        except RequestError as e:
            return self._refuse(response, e, "solve_ik")
        except Exception as e:  # noqa: BLE001 -- a bug, not the caller's: answer, serve on
            return self._failure(response, e, "solve_ik")
        self._ik_answer(response, model, outcome)
        self._markers.ik_solved(model, problem["objectives"], outcome.q)
        self.get_logger().debug(
            f"solve_ik: {'ok' if outcome.success else outcome.code} in "
            f"{(time.perf_counter() - start) * 1e3:.1f} ms"
        )
        return response

    def _ik_problem(self, model: LoadedModel, request: SolveIK.Request) -> dict:
        """The keyword arguments of LoadedModel.solve for a SolveIK request (every check)."""
        cfg = self._settings
        limits = self._limits
        limits.check_state(request.seed, "seed")
        limits.check(len(request.objectives), "max_objectives", "objectives")
        limits.check(len(request.active_joints), "max_names", "active_joints")
        seed = model.seed(request.seed, self._latest_joint_positions(), "seed")
        if not request.objectives:
            raise RequestError(
                ErrorCode.INVALID_REQUEST, "no objectives: give at least one IKObjective"
            )
        frames = model.frames_at(seed)
        objectives = [
            model.objective(o, f"objectives[{i}]", frames) for i, o in enumerate(request.objectives)
        ]
        seed = self._sampler_seed(model, objectives, seed, request)
        active = model.active_joints(request.active_joints, objectives)
        deviation = float(request.max_deviation)
        if not math.isfinite(deviation) or deviation < 0:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"max_deviation must be >= 0 (0 = unlimited), got {deviation}",
            )
        tolerances = model.tolerances(
            request.position_tolerance, request.orientation_tolerance, cfg
        )
        restarts = request.max_restarts
        if restarts < -1:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"max_restarts must be >= -1 (-1 = node default), got {restarts}",
            )
        restarts = cfg.restarts if restarts == -1 else min(restarts, MAX_RESTARTS)
        return {
            "objectives": objectives,
            "seed": seed,
            "active": active,
            "max_deviation": deviation,
            "tolerances": tolerances,
            "iterations": cfg.max_iterations,
            "restarts": restarts,
            "timeout": model.timeout(request.timeout, cfg.timeout),
        }

    def _solve_ik_deferred(self, model: LoadedModel, problem: dict, start: float) -> Deferred:
        """A request whose program is not compiled yet: compiled and solved on the compile
        thread, answered from there; the request's budget counts the compile, and when it
        runs out first the answer is TIMEOUT (the compile goes on, for the next request)."""
        deferred = Deferred()
        budget = problem["timeout"]

        def work() -> None:
            response = SolveIK.Response()
            try:
                outcome = model.solve(**problem)
                self._ik_answer(response, model, outcome)
                self._markers.ik_solved(model, problem["objectives"], outcome.q)
            except Exception as e:  # noqa: BLE001
                self._failure(response, e, "solve_ik")
            if not deferred.resolve(response):
                self.get_logger().info(
                    f"solve_ik: compiled a new program in {time.perf_counter() - start:.2f} s "
                    "(after its request's budget)"
                )

        def too_late() -> SolveIK.Response:
            return self._refuse(
                SolveIK.Response(),
                RequestError(
                    ErrorCode.TIMEOUT,
                    f"the {budget:.3g} s budget ran out while the solver for this objective "
                    "combination compiles (its first use; the compile goes on in the "
                    "background): retry shortly, or give a longer timeout",
                ),
                "solve_ik",
            )

        key = (id(model), model.program_key(problem["objectives"], problem["seed"]))
        with self._compiling_lock:
            waiters = self._compiling.get(key)
            if waiters is not None and len(waiters) < WAITERS_PER_COMPILE:
                waiters.append(work)  # solved right after the compile it waits for
            elif waiters is not None or not self._compiles.submit(
                lambda: self._compile_then(key, work)
            ):
                return self._refuse(
                    SolveIK.Response(),
                    RequestError(
                        ErrorCode.BUSY,
                        "too many requests are waiting for new solver programs to compile "
                        "(max_pending_compiles = "
                        f"{self.get_parameter('max_pending_compiles').value}): retry shortly",
                    ),
                    "solve_ik",
                )
            else:
                self._compiling[key] = []
        if budget > 0:
            answer_within(deferred, budget - (time.perf_counter() - start), too_late)
        return deferred

    def _compile_in_background(self, model: LoadedModel, objectives, seed) -> None:
        """Compiles the program for ``objectives`` from ``seed`` on the compile thread,
        unless it is compiling already (or the compile queue is full: a later call retries)."""
        key = (id(model), model.program_key(objectives, seed))

        def work() -> None:
            try:
                model.solve(objectives, seed, iterations=1, restarts=0)
            except Exception:  # noqa: BLE001 -- the request that needs it reports errors
                self._log_exception("background compile")

        with self._compiling_lock:
            if key not in self._compiling and self._compiles.submit(
                lambda: self._compile_then(key, work)
            ):
                self._compiling[key] = []

    def _compile_then(self, key: tuple, work) -> None:
        """Runs ``work`` (its first solve compiles the program ``key``), then the requests
        that came for the same program meanwhile."""
        try:
            work()
        finally:
            while True:
                with self._compiling_lock:
                    waiters = self._compiling.get(key)
                    if not waiters:
                        self._compiling.pop(key, None)
                        break
                    ready, waiters[:] = list(waiters), []
                for waiting in ready:
                    waiting()

    def _ik_answer(self, response: SolveIK.Response, model: LoadedModel, outcome) -> None:
        solution = response.solution  # filled in place: no second JointState to build
        solution.header.stamp = self.get_clock().now().to_msg()
        solution.name = list(model.joint_names)
        solution.position = outcome.q.tolist()
        response.success = bool(outcome.success)
        response.error_code.val = outcome.code
        response.message = outcome.message
        response.position_errors = outcome.position_error.astype(float).tolist()
        response.orientation_errors = outcome.orientation_error.astype(float).tolist()
        response.iterations = int(outcome.iterations)
        response.solve_time = float(outcome.solve_seconds)

    def _solve_ik_batch(self, request: SolveIKBatch.Request, response: SolveIKBatch.Response):
        start = time.perf_counter()
        try:
            model = self._require_model()
            cfg = self._settings
            limits = self._limits
            limits.check(
                max(len(request.targets), len(request.packed_poses) // 7),
                "max_batch_targets",
                "targets",
            )
            limits.check_state(request.seed, "seed")
            limits.check(len(request.active_joints), "max_names", "active_joints")
            if not request.link:
                raise RequestError(ErrorCode.INVALID_REQUEST, "link is empty (required)")
            model.check_link(request.link, "link")
            seed = model.seed(request.seed, self._latest_joint_positions(), "seed")
            weight = float(request.orientation_weight)
            if not math.isfinite(weight) or weight < 0:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"orientation_weight must be finite and >= 0, got {weight}",
                )
            position_only = weight == 0
            targets = _batch_targets(model, request, seed, orientation=not position_only)
            objective = _batch_objective(model, request, targets, position_only, weight)
            active = model.active_joints(request.active_joints, [objective])
            tolerances = model.tolerances(
                request.position_tolerance, request.orientation_tolerance, cfg
            )
            timeout = model.timeout(request.timeout, 0.0)
            result = model.solve_batch(
                objective,
                seed,
                active=active,
                tolerances=tolerances,
                iterations=cfg.max_iterations,
                restarts=cfg.restarts,
                timeout=timeout,
                stop=self._closing,
            )
        except RequestError as e:
            return self._refuse(response, e, "solve_ik_batch")
        except Exception as e:  # noqa: BLE001
            return self._failure(response, e, "solve_ik_batch")
        names = list(model.joint_names)
        q = np.ascontiguousarray(result.q, np.float64)
        response.joint_names = names
        response.positions = array.array("d", q.tobytes())
        if request.targets:  # packed requests get packed answers only
            stamp = self.get_clock().now().to_msg()
            response.solutions = [
                JointState(header=Header(stamp=stamp), name=names, position=array.array("d", row))
                for row in q
            ]
        response.success = result.success.tolist()
        response.position_errors = result.position_error[:, 0].astype(float).tolist()
        response.orientation_errors = result.orientation_error[:, 0].astype(float).tolist()
        response.solve_time = float(result.solve_seconds)
        elapsed = time.perf_counter() - start
        solved = int(result.success.sum())
        if result.timed_out or (timeout > 0 and elapsed > timeout):
            response.error_code.val = ErrorCode.TIMEOUT
            response.message = (
                f"the {timeout:.3g} s budget ran out after {elapsed:.3g} s: "
                f"{solved}/{len(result.success)} targets within tolerance (targets not "
                "reached in time keep the seed, with success false and infinite errors)"
            )
        else:
            response.error_code.val = ErrorCode.SUCCESS
            response.message = (
                ""
                if solved == len(result.success)
                else f"{solved}/{len(result.success)} targets within tolerance"
            )
        return response

    def _compute_fk(self, request: ComputeFK.Request, response: ComputeFK.Response):
        try:
            model = self._require_model()
            latest = self._latest_joint_positions()
            state = request.robot_state
            if not (len(state.name) or len(state.position)) and not latest:
                raise RequestError(
                    ErrorCode.NO_JOINT_STATE,
                    "robot_state is empty and nothing was received on "
                    f"{self.get_parameter('joint_states_topic').value} yet",
                )
            self._limits.check_state(state, "robot_state")
            self._limits.check(len(request.link_names), "max_names", "link_names")
            q, outside = model.configuration(state, latest, "robot_state")
            links = list(request.link_names) or list(model.link_names)
            for link in links:
                model.check_link(link, "link_names:")
            frames = model.fk(q)
            frame_name = request.frame_id.lstrip("/") or model.base_frame
            frame = frames[model.frame_index(request.frame_id, "frame_id")]
            to_frame = pose_inverse(frame)
        except RequestError as e:
            return self._refuse(response, e, "compute_fk")
        except Exception as e:  # noqa: BLE001
            return self._failure(response, e, "compute_fk")
        stamp = self.get_clock().now().to_msg()
        for link in links:
            pose = PoseStamped(
                pose=wxyz_xyz_to_pose(pose_compose(to_frame, frames[model.link_names.index(link)]))
            )
            pose.header.frame_id = frame_name
            pose.header.stamp = stamp
            response.poses.append(pose)
        response.link_names = links
        response.within_limits = not outside
        if outside:
            response.message = (
                f"robot_state is outside the joint limits of {', '.join(outside[:10])}"
                + (f" and {len(outside) - 10} more" if len(outside) > 10 else "")
                + ": the poses are those of exactly this state"
            )
        response.error_code.val = ErrorCode.SUCCESS
        return response

    # --- planning ------------------------------------------------------------------------------

    def _plan_settings(self) -> planning.PlanSettings:
        p = self.get_parameter
        return planning.PlanSettings(
            num_steps=int(p("trajectory_num_steps").value),
            velocity_scaling=float(p("velocity_scaling").value),
            acceleration_scaling=float(p("acceleration_scaling").value),
            acceleration_limit=float(p("acceleration_limit").value),
            safety_margin=float(p("safety_margin").value),
            collision_spheres=str(p("collision_spheres").value),
            allowed_contacts=self._allowed_contacts,
            timeout=float(p("planning_timeout").value),
        )

    def _planner(self, model: LoadedModel) -> planning.Planner:
        """The model's trajectory optimiser, created on first use (a new model, a new one)."""
        with self._planner_lock:
            planner = self._planners.get(id(model))
            if planner is None or planner.model is not model:
                try:
                    planner = planning.Planner(model, self._plan_settings())
                except (ValueError, OSError) as e:
                    raise RequestError(
                        ErrorCode.INVALID_REQUEST, f"collision model for planning: {e}"
                    ) from None
                self.get_logger().info(f"planning for robot '{model.name}': {planner.note}")
                self._planners = {id(model): planner}  # the old model's planner goes
        return planner

    def _start_state(self, model: LoadedModel, state, what: str) -> np.ndarray:
        latest = self._latest_joint_positions()
        if not (len(state.name) or len(state.position)) and not latest:
            raise RequestError(
                ErrorCode.NO_JOINT_STATE,
                f"{what} is empty and nothing was received on "
                f"{self.get_parameter('joint_states_topic').value} yet",
            )
        return model.seed(state, latest, what)

    # --- planning scene ------------------------------------------------------------------------

    def _scene_shown(self) -> None:
        """The scene's markers, placed at the latest joint states (or the middle of the
        limits)."""
        model = self._current_model()
        if model is not None:
            q = model.seed(None, self._latest_joint_positions(), "joint_states")
            self._markers.scene_changed(model, self._scene.objects(), q)

    def _scene_frame_check(self):
        """Frames of scene objects are checked against the model loaded now (if any)."""
        model = self._current_model()
        return None if model is None else model.frame_index

    def _on_collision_object(self, msg: CollisionObject) -> None:
        try:
            ids = self._scene.apply([msg], self._scene_frame_check())
            self.get_logger().info(f"planning scene: {len(ids)} objects after '{msg.id}'")
            self._scene_shown()
        except RequestError as e:
            self.get_logger().warning(f"collision object refused: {e.message}")

    def _apply_planning_scene(self, request: ApplyPlanningScene.Request, response):
        try:
            self._limits.check(len(request.objects), "max_obstacles", "objects")
            response.object_ids = self._scene.apply(
                list(request.objects), self._scene_frame_check()
            )
        except RequestError as e:
            response.object_ids = [name for name, _, _ in self._scene.objects()]
            return self._refuse(response, e, "apply_planning_scene")
        response.success = True
        response.error_code.val = ErrorCode.SUCCESS
        response.message = ""
        self._scene_shown()
        return response

    def _plan_trajectory(self, request: PlanTrajectory.Request, response):
        start_time = time.perf_counter()
        logger = self.get_logger()
        try:
            model = self._require_model()
            self._check_execute(request.execute)
            self._check_plan_sizes(request)
            settings = self._plan_settings()
            start = self._start_state(model, request.start_state, "start_state")
            planner = self._planner(model)
            result, timed = planning.plan_request(
                planner, request, start, settings, logger.info, self._scene.objects()
            )
        except RequestError as e:
            return self._refuse(response, e, "plan_trajectory")
        except Exception as e:  # noqa: BLE001
            return self._failure(response, e, "plan_trajectory")
        stamp = self.get_clock().now().to_msg()
        response.trajectory = planning.trajectory_message(
            model.joint_names, timed, model.base_frame, stamp
        )
        response.success = bool(result.success)
        response.error_code.val = planning.outcome_code(result)
        response.message = (
            result.message if result.success else f"no valid trajectory: {result.message}"
        )
        response.goal_position_errors = result.position_errors.astype(float).tolist()
        response.goal_orientation_errors = result.orientation_errors.astype(float).tolist()
        response.min_obstacle_distance = float(result.min_distance)
        response.executed = False
        if request.execute and result.success:
            self._trajectory_pub.publish(response.trajectory)
            response.executed = True
        response.solve_time = time.perf_counter() - start_time
        self._markers.planned(model, request, start, timed.positions, self._scene.objects())
        logger.info(
            f"plan_trajectory: {'ok' if result.success else result.message}, "
            f"{len(timed.times)} points over {timed.duration:.2f} s, clearance "
            f"{result.min_distance:.3f} m, planned in {response.solve_time:.3f} s"
            + (", published" if response.executed else "")
        )
        return response

    def _retarget_motion(self, request: RetargetMotion.Request, response):
        start_time = time.perf_counter()
        try:
            model = self._require_model()
            self._check_execute(request.execute)
            self._check_retarget_sizes(model, request)
            seed = model.seed(request.seed, self._latest_joint_positions(), "seed")
            planner = self._planner(model)
            result, errors, dt = planning.retarget_request(
                planner,
                request,
                seed,
                model.fk(seed),
                self.get_logger().info,
                float(self.get_parameter("retarget_timeout").value),
            )
        except RequestError as e:
            return self._refuse(response, e, "retarget_motion")
        except Exception as e:  # noqa: BLE001
            return self._failure(response, e, "retarget_motion")
        timed = planning.timed_at(result.path, dt)
        stamp = self.get_clock().now().to_msg()
        response.trajectory = planning.trajectory_message(
            model.joint_names, timed, model.base_frame, stamp
        )
        response.step_errors = errors.astype(float).tolist()
        over = np.abs(timed.velocities) > model.velocity_limits
        response.success = bool(result.success and not over.any())
        response.error_code.val = (
            ErrorCode.SUCCESS
            if response.success
            else (planning.outcome_code(result) if result.reason else ErrorCode.PLANNING_FAILED)
        )
        if over.any():
            joints = sorted({model.joint_names[j] for j in np.nonzero(over)[1]})
            response.message = (
                f"the motion needs more than the URDF velocity limits of {', '.join(joints)} "
                "at this dt (slow the keypoints down or raise dt)"
            )
        else:
            response.message = result.message
        response.executed = False
        if request.execute and response.success:
            self._trajectory_pub.publish(response.trajectory)
            response.executed = True
        response.solve_time = time.perf_counter() - start_time
        return response

    def _check_execute(self, execute: bool) -> None:
        if execute and not self.get_parameter("allow_execute").value:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                "execute = true, but this node may not publish to the controller "
                "(parameter allow_execute is false); plan without execute, or set it",
            )

    def _check_plan_sizes(self, request: PlanTrajectory.Request) -> None:
        limits = self._limits
        limits.check_state(request.start_state, "start_state")
        limits.check_state(request.goal_state, "goal_state")
        limits.check(len(request.active_joints), "max_names", "active_joints")
        limits.check(len(request.goal_objectives), "max_objectives", "goal_objectives")
        limits.check(len(request.waypoints), "max_waypoints", "waypoints")
        for w, group in enumerate(request.waypoints):
            limits.check(len(group.objectives), "max_objectives", f"waypoints[{w}].objectives")
        limits.check(
            max(len(request.obstacles), len(request.obstacle_poses)) + len(request.half_spaces),
            "max_obstacles",
            "obstacles + half_spaces",
        )
        limits.check(int(request.num_steps), "max_trajectory_steps", "num_steps")
        for field in ("obstacle_names", "allowed_contact_links", "allowed_contact_others"):
            limits.check(len(getattr(request, field)), "max_names", field)

    def _check_retarget_sizes(self, model: LoadedModel, request: RetargetMotion.Request) -> None:
        limits = self._limits
        limits.check_state(request.seed, "seed")
        for field in ("link_names", "active_joints", "vector_from_links", "vector_to_links"):
            limits.check(len(getattr(request, field)), "max_names", field)
        steps = len(request.steps)
        limits.check(steps, "max_retarget_steps", "steps")
        limits.check(steps * max(len(request.link_names), 1), "max_keypoints", "steps x links")
        for t, step in enumerate(request.steps):  # each step's own size, before it is read
            if len(step.points) > len(request.link_names):
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"steps[{t}] has {len(step.points)} points for "
                    f"{len(request.link_names)} link_names",
                )
        from pyroki_ros.planning.trajopt import retarget_memory_bytes

        need = retarget_memory_bytes(steps, len(model.joint_names), len(request.link_names))
        if need > RETARGET_MEMORY_BYTES:
            raise RequestError(
                ErrorCode.REQUEST_TOO_LARGE,
                f"retargeting {steps} steps x {len(request.link_names)} links would need about "
                f"{need / 2**30:.1f} GiB, over the node's {RETARGET_MEMORY_BYTES / 2**30:.1f} GiB",
            )

    def _refuse(self, response, error: RequestError, service: str):
        response.error_code.val = error.code
        response.message = error.message
        if hasattr(response, "success") and isinstance(response.success, bool):
            response.success = False
        self.get_logger().warning(f"{service}: refused: {error.message}", throttle_duration_sec=1.0)
        return response

    def _failure(self, response, error: Exception, service: str):
        import traceback

        self.get_logger().error(f"{service}: internal error: {traceback.format_exc()}")
        return self._refuse(
            response, RequestError(ErrorCode.FAILURE, f"internal error: {error!r}"), service
        )

    # --- teleop ----------------------------------------------------------------------------------

    def _teleop_warn(self, key: str, text: str) -> None:
        self.get_logger().warning(text, throttle_duration_sec=5.0)

    def _teleop_tick(self) -> None:
        try:
            self._teleop_tick_unsafe()
        except Exception:  # noqa: BLE001
            self._log_exception("teleop")

    def _teleop_tick_unsafe(self) -> None:
        with self._teleop_lock:
            goal, seq, command = self._goal, self._goal_seq, self._command
            if goal is None or seq == self._goal_done_seq:
                # Nothing to track: pause the timer (an idle tick costs ~2 ms of executor
                # work, competing with service requests); the next goal restarts it.
                self._teleop_timer.cancel()
                return
        with self._model_lock:
            model, generation = self._model, self._model_generation
        if model is None:
            self._teleop_warn("model", "teleop goal waits: no robot model loaded yet")
            return
        now = time.monotonic()
        if (
            command is not None
            and command[2] == generation
            and (now - command[1] < TELEOP_RESYNC_SECONDS)
        ):
            start = command[0]
        else:
            latest = self._latest_joint_positions()
            if not latest:
                self._teleop_warn(
                    "joint_states",
                    "teleop goal waits for the first message on "
                    f"{self.get_parameter('joint_states_topic').value}",
                )
                return
            start = model.seed(None, latest, "joint_states")
        cfg = self._settings
        # A goal is translated once, when first processed: targets given in a link's frame
        # use that link's pose at this step's start and stay put while the robot moves.
        cached = self._goal_cache
        if cached is not None and cached[0] == seq and cached[1] == generation:
            objectives = cached[2]
        else:
            try:
                objectives = self._goal_objectives(model, goal, model.frames_at(start))
            except RequestError as e:
                self.get_logger().warning(f"teleop goal dropped: {e.message}")
                self._finish_goal(seq)
                return
            self._goal_cache = (seq, generation, objectives)
        if not model.is_compiled(objectives, start):
            # Never compile on this thread: the goal waits (ticks go on) until it is done.
            self._compile_in_background(model, objectives, start)
            self._teleop_warn("compile", "teleop goal waits: compiling the solver for it")
            return
        dt = 1.0 / self.get_parameter("teleop_rate_hz").value
        step_limit = self.get_parameter("velocity_scaling").value * model.velocity_limits * dt
        try:
            q, reached, result = model.teleop_step(
                objectives,
                start,
                step_limit,
                tolerances=(cfg.position_tolerance, cfg.orientation_tolerance),
                iterations=cfg.max_iterations,
            )
        except Exception as e:  # noqa: BLE001
            self.get_logger().error(f"teleop step failed, goal dropped: {e!r}")
            self._finish_goal(seq)
            return
        moved = float(np.max(np.abs(q - start))) if len(q) else 0.0
        trajectory = JointTrajectory(joint_names=list(model.joint_names))
        trajectory.points = [
            JointTrajectoryPoint(positions=q.tolist(), time_from_start=seconds_to_duration(dt))
        ]
        # header.stamp stays zero: "start now" for joint_trajectory_controller.
        self._trajectory_pub.publish(trajectory)
        self._markers.teleop_step(model, objectives, q)
        with self._teleop_lock:
            if self._model_generation == generation:
                self._command = (q, time.monotonic(), generation)
        if reached:
            self._finish_goal(seq)
        elif moved < 1e-7:
            self.get_logger().warning(
                "teleop goal not reachable from here (stuck); best errors: position "
                f"{np.round(result.position_error, 4).tolist()} m, orientation "
                f"{np.round(result.orientation_error, 4).tolist()} rad",
                throttle_duration_sec=2.0,
            )
            self._finish_goal(seq)

    def _finish_goal(self, seq: int) -> None:
        with self._teleop_lock:
            self._goal_done_seq = max(self._goal_done_seq, seq)

    def _goal_objectives(self, model: LoadedModel, goal, frames):
        if isinstance(goal, PoseStamped):
            objective = IKObjective(type=IKObjective.POSE, link=model.tip_link, target=goal)
            return [model.objective(objective, "goal_pose", frames)]
        if not goal.objectives:
            raise RequestError(ErrorCode.INVALID_REQUEST, "MultiLinkGoal has no objectives")
        self._limits.check(len(goal.objectives), "max_objectives", "MultiLinkGoal objectives")
        return [
            model.objective(o, f"goal.objectives[{i}]", frames, default_frame=goal.header.frame_id)
            for i, o in enumerate(goal.objectives)
        ]

    def destroy_node(self):
        self._closing.set()
        self._stop_warm_thread()
        self._compiles.shutdown()
        self.worker.destroy_node()
        return super().destroy_node()


def _batch_targets(model, request, seed: np.ndarray, *, orientation: bool) -> np.ndarray:
    """(N, 7) wxyz_xyz targets in the root frame from a SolveIKBatch request: its PoseStamped
    ``targets``, else its ``packed_poses``; targets in a link's frame are placed with FK at the
    seed (once per distinct frame)."""
    if request.targets and len(request.packed_poses):
        raise RequestError(
            ErrorCode.INVALID_REQUEST,
            f"both targets ({len(request.targets)}) and packed_poses "
            f"({len(request.packed_poses)} numbers) given: use one of them",
        )
    if request.targets:
        rows = pose_rows([t.pose for t in request.targets])
        frame_ids = [t.header.frame_id for t in request.targets]
        what = "targets"
    else:
        flat = np.frombuffer(request.packed_poses, np.float64)
        if flat.size == 0:
            raise RequestError(
                ErrorCode.INVALID_REQUEST, "no targets: give targets or packed_poses"
            )
        if flat.size % 7:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"packed_poses holds {flat.size} numbers, not a multiple of 7 "
                "([x, y, z, qx, qy, qz, qw] per target)",
            )
        rows = flat.reshape(-1, 7)
        frame_ids = None
        what = "packed_poses"
    targets = pose_rows_to_wxyz_xyz(rows, what, orientation=orientation)
    if frame_ids is None:
        groups = {request.packed_frame_id: slice(None)}
    else:
        groups = {}
        for i, frame in enumerate(frame_ids):
            groups.setdefault(frame, []).append(i)
    frames = model.frames_at(seed)
    for frame, rows_in_frame in groups.items():
        first = 0 if isinstance(rows_in_frame, slice) else rows_in_frame[0]
        index = model.frame_index(frame, f"{what}[{first}]")
        if index != 0:
            targets[rows_in_frame] = pose_compose(frames[index], targets[rows_in_frame])
    return targets


def _batch_objective(model, request, targets, position_only, weight):
    from pyroki_ros import objectives as O
    from pyroki_ros.ros.conversions import vector

    local_point = vector(request.local_point, "local_point")
    if position_only:
        return O.point(request.link, local_point, targets[:, 4:])
    objective = O.pose(request.link, targets, orientation_weight=weight)
    if np.any(local_point != 0):
        objective = dataclasses.replace(
            objective, local_point=np.broadcast_to(local_point, (len(targets), 3)).copy()
        )
    return objective


# --- shutdown on SIGINT / SIGTERM ----------------------------------------------------------------
# rclpy's own handlers (what rclpy.init installs by default) lose the wake-up now and then: its
# signal thread triggers the executors' guard conditions *before* it shuts the context down
# (rclpy 9.1.2, src/rclpy/signal_handler.cpp), so an executor that wakes in between still sees a
# valid context, waits again without a timeout, and nothing is left to wake it (that thread's
# rcl_shutdown bypasses the Python on_shutdown callbacks that would wake the executor). SIGINT
# hid it: the wake-up alone lets Python raise KeyboardInterrupt in the main thread. SIGTERM
# left the node spinning for good, more often on a loaded machine. Instead the node handles
# both signals itself (_SignalShutdown) and ends within SHUTDOWN_HARD_LIMIT_S.
SHUTDOWN_SIGNALS = ("SIGINT", "SIGTERM")
# Work still running this long after the signal is not waited for (the process ends without
# finalising the interpreter: JAX compilations and plans cannot be interrupted).
SHUTDOWN_GRACE_S = 0.8
# The watchdog: whatever still runs then, the process ends (console and log file flushed).
SHUTDOWN_WATCHDOG_S = 1.5
# If even the watchdog thread cannot run (native code holding the GIL, e.g. in interpreter
# finalisation): SIGALRM's default action ends the process (status -14), armed at the signal.
SHUTDOWN_HARD_LIMIT_S = 1.9


def _flush_output() -> None:
    """Python's and C's buffered console output (rcutils writes with C stdio)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (AttributeError, OSError):
        pass


def _exit_now(reason: str) -> None:
    """Ends the process at once, output flushed. An error-level message also makes rcl's
    spdlog file sink flush what it holds (it flushes on errors, otherwise every 5 s)."""
    try:
        rclpy.logging.get_logger(NODE_NAME).error(f"{reason}: exiting now")
    except Exception:  # noqa: BLE001, S110 -- logging may be shut down already
        pass
    _flush_output()
    os._exit(0)


class _SignalShutdown:
    """SIGINT / SIGTERM as a shutdown request that is never lost.

    The Python-level handlers do nothing; what counts is ``signal.set_wakeup_fd``: the
    interpreter's C handler writes the signal number to a socket the moment the signal arrives,
    and a helper thread acts on it, whatever the main thread is doing (waiting inside rcl,
    running a callback). The first signal completes :attr:`stopped` (a done future wakes the
    executor spinning until it: its flag is set before the wake-up, so it cannot be missed),
    arms the watchdog (:data:`SHUTDOWN_WATCHDOG_S`, then SIGALRM at
    :data:`SHUTDOWN_HARD_LIMIT_S`); a second signal ends the process at once."""

    def __init__(self) -> None:
        import signal
        import socket

        from rclpy.task import Future

        self.stopped = Future()
        self._signal_time: float | None = None
        self._numbers = {int(getattr(signal, name)) for name in SHUTDOWN_SIGNALS}
        self._receive, self._send = socket.socketpair()
        self._send.setblocking(False)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # the hard limit's action
        for number in self._numbers:
            signal.signal(number, _ignore_signal)
        signal.set_wakeup_fd(self._send.fileno(), warn_on_full_buffer=False)
        threading.Thread(target=self._listen, name="pyroki_ros_signals", daemon=True).start()

    @classmethod
    def install(cls) -> _SignalShutdown | None:
        """Only the main thread can install signal handlers; elsewhere rclpy's are used."""
        if threading.current_thread() is not threading.main_thread():
            return None
        return cls()

    def deadline(self, seconds: float) -> float:
        """time.monotonic() ``seconds`` after the signal (after now if none came)."""
        start = self._signal_time
        return (time.monotonic() if start is None else start) + seconds

    def _listen(self) -> None:
        import signal

        watchdog: float | None = None
        while True:
            if watchdog is not None:
                left = watchdog - time.monotonic()
                if left <= 0:
                    _exit_now(
                        f"shutdown watchdog: not finished {SHUTDOWN_WATCHDOG_S} s after "
                        f"the signal (threads: {', '.join(_running_threads()) or 'none'})"
                    )
                self._receive.settimeout(left)
            try:
                data = self._receive.recv(64)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            for number in data:
                if number not in self._numbers:
                    continue
                name = signal.Signals(number).name
                if watchdog is not None:
                    _exit_now(f"second signal ({name}) during shutdown")
                self._signal_time = time.monotonic()
                watchdog = self._signal_time + SHUTDOWN_WATCHDOG_S
                signal.setitimer(signal.ITIMER_REAL, SHUTDOWN_HARD_LIMIT_S)
                try:  # first: the process may end right after set_result
                    rclpy.logging.get_logger(NODE_NAME).info(f"{name}: shutting down")
                except Exception:  # noqa: BLE001, S110 -- before rclpy.init
                    pass
                self.stopped.set_result(number)


def _ignore_signal(number, frame) -> None:
    """Python-level handler of SIGINT / SIGTERM: _SignalShutdown acts on the wake-up fd."""


def _running_threads() -> list[str]:
    """Threads still alive besides the main thread and the signal thread. Daemon or not, each
    can hold up the exit: the interpreter joins non-daemon threads and every thread pool's
    workers (the executors' pools are daemon threads, made by a daemon thread), and one that
    runs JAX code while the interpreter finalises can crash it."""
    me = threading.current_thread()
    return [
        t.name
        for t in threading.enumerate()
        if t is not me
        and t is not threading.main_thread()
        and t.name != "pyroki_ros_signals"
        and t.is_alive()
    ]


def _shut_down(node, executor, worker, signals: _SignalShutdown | None, code: int) -> None:
    """Stops the executors, destroys the node and shuts ROS down without waiting for running
    work; when work still runs at the grace deadline (a JAX compilation or a plan cannot be
    interrupted, and finalising the interpreter under it crashes or waits for it), leaves at
    once with os._exit."""
    closing = getattr(node, "_closing", None)
    if closing is not None:
        closing.set()  # batches stop between chunks
    if worker is not None:  # no new work; running callbacks are not waited for
        worker.shutdown(timeout_sec=0, wait_for_threads=False)
    if executor is not None:
        executor.shutdown(timeout_sec=0)
    busy = node is not None and node.busy_compiling()
    try:
        if node is not None and not busy:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
    deadline = (
        signals.deadline(SHUTDOWN_GRACE_S) if signals else time.monotonic() + SHUTDOWN_GRACE_S
    )
    while (running := _running_threads()) and time.monotonic() < deadline:
        if node is not None and node.busy_compiling():  # no use waiting
            break
        time.sleep(0.01)
    busy = node is not None and node.busy_compiling()
    if busy or running:
        what = ", ".join(running + (["a model compilation"] if busy else []))
        try:
            rclpy.logging.get_logger(NODE_NAME).info(f"shut down; not waiting for {what}")
        except Exception:  # noqa: BLE001, S110 -- logging is shut down
            pass
        _flush_output()
        os._exit(code)


def exit_with_parent() -> None:
    """With PYROKI_ROS_EXIT_WITH_PARENT=<pid of the parent> (set by pyroki_ros.ros.harness for
    the demo and tests), ask Linux for a SIGTERM when the parent dies, so that a crashed test
    run leaves no node behind (the SIGTERM ends the node like any other: main)."""
    parent = os.environ.get("PYROKI_ROS_EXIT_WITH_PARENT")
    if not parent or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(parent):  # the parent is already gone
        sys.exit(0)


def main(args: list[str] | None = None) -> int:
    """Entry point of ``pyroki_ros_node``; ``args`` default to sys.argv (ROS arguments after
    ``--ros-args``).

    SIGINT and SIGTERM end the node within SHUTDOWN_HARD_LIMIT_S (2 s) in every state, exit
    status 0: the request path stops at once, running work is given until SHUTDOWN_GRACE_S
    after the signal, then the process leaves without waiting for it; a watchdog ends the
    process if that has not happened by SHUTDOWN_WATCHDOG_S, a second signal at once."""
    exit_with_parent()
    signals = _SignalShutdown.install()
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(
        args=sys.argv if args is None else args,
        signal_handler_options=SignalHandlerOptions.NO if signals else None,
    )
    node = None
    executor = None
    worker = None
    code = 0
    try:
        node = PyrokiRosNode()
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        # Three threads: a model load, a batch and a plan may run at the same time.
        worker = MultiThreadedExecutor(num_threads=3)
        worker.add_node(node.worker)
        threading.Thread(target=worker.spin, name="pyroki_ros_worker", daemon=True).start()
        if signals is None:
            executor.spin()
        else:  # until the signal, or the context is shut down
            executor.spin_until_future_complete(signals.stopped)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: BLE001 -- reported, then the same clean shutdown
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        _shut_down(node, executor, worker, signals, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
