"""``pyroki_ros_node``: inverse / forward kinematics, planning and IK teleoperation over ROS 2.

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
  optimisation, timed within the scaled limits, optionally published),
  ``~/retarget_motion`` (pyroki_ros/srv/RetargetMotion) and ``~/apply_planning_scene``
  (pyroki_ros/srv/ApplyPlanningScene; also the topic ``~/collision_objects``). Every refused
  request gets ``success = false``, an ErrorCode and a message; the node keeps serving.
* teleop: ``~/goal_pose`` (geometry_msgs/PoseStamped for ``tip_link``) and ``~/goal``
  (pyroki_ros/MultiLinkGoal), depth 1: the newest goal wins (teleop.py); one-point
  trajectory_msgs/JointTrajectory on ``trajectory_topic``.
* publishes ``~/markers`` (visualization_msgs/MarkerArray, transient local, with
  ``publish_markers``): what the node did, for RViz (markers.py).

This module only wires: parameters (params.py), topics, services, executors and the model
swap (loading.py builds and warms models). It is ~740 lines because it wires seven services,
four topics and two executors, one short handler each; no check or answer is decided here.
Every request takes the same few stops: its handler here -> requests.py (every check,
the core problem) -> the core (model.py, planning.py) -> responses.py (the answer and its
outcome code).

Threads: the request path (IK, FK, teleop) is spun by a SingleThreadedExecutor in the main
thread: rclpy's MultiThreadedExecutor made IK round trips about twice as slow here
(docs/benchmarks/node.md). Every topic the node subscribes to (/joint_states, teleop goals,
collision objects, robot_description) is taken by a process of its own (``<name>_inputs``,
inputs.py), which hands over only what fits the node's limits; their callbacks run on the
thread that reads from it, a new robot_description's load and warm-up on a thread of its
own. Slow work runs on a second node of the same process,
``<name>_worker``, spun by its own executor threads: loading ``urdf_file``,
``~/solve_ik_batch``, ``~/plan_trajectory``, ``~/retarget_motion`` and the planning scene
(served under this node's names, so a long batch or plan never delays IK); requests keep
using the previous model until a new one is warmed up. A ``~/solve_ik`` that needs a new
program is compiled on a compile thread and answered from there (deferred.py), within the
request's budget; so is a ``~/retarget_motion`` of a new motion length (its own compile
thread). The model swap is guarded by a lock; requests take a reference to the model at their
start. SIGINT / SIGTERM end the process within 2 s (shutdown.py).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time

import rclpy
from geometry_msgs.msg import PoseStamped
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import (
    ExternalShutdownException,
    MultiThreadedExecutor,
    SingleThreadedExecutor,
)
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from pyroki_ros.msg import CollisionObject, MultiLinkGoal
from pyroki_ros.ros import bounded, loading, markers, params, planning, requests, responses
from pyroki_ros.ros.deferred import (
    BackgroundWork,
    CompileQueue,
    Deferred,
    allow_deferred,
    answer_in_background,
    run_after_compile,
)
from pyroki_ros.ros.description import DescriptionSource
from pyroki_ros.ros.inputs import Inputs
from pyroki_ros.ros.model import (
    LoadedModel,
    cache_write_threshold,
    cache_writes,
    configure_jax,
    release_freed_memory,
)
from pyroki_ros.ros.params import NODE_NAME
from pyroki_ros.ros.requests import RequestError
from pyroki_ros.ros.scene import PlanningScene
from pyroki_ros.ros.shutdown import SignalShutdown, exit_with_parent, shut_down
from pyroki_ros.ros.teleop import Teleop
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

# The GIL switch interval (s). A thread that wants the GIL waits up to this long for the
# holder to let go; the request thread takes it ~20 times per request while a worker thread
# turns a huge message into Python objects or traces a new program: Python's default of 5 ms
# made a compute_fk beside a 100,000-obstacle plan request take 130-185 ms
# (bench/hostile_input.py); 0.5 ms keeps it near its idle latency.
GIL_SWITCH_INTERVAL = 0.0005

# The garbage collector's thresholds (gc.set_threshold): the young generations as Python's
# default, a full (generation-2) collection only after 1,000 generation-1 ones instead of 10.
# A full collection holds the GIL throughout and scans every object not frozen; while a
# compile on a background thread (a new IK objective combination, the planner warm-up, a
# retarget length) grows the heap, they came every few hundred ms and a compute_fk waited for
# each. bench/hostile_input.py: compute_fk max 51-175 ms (docs/benchmarks/hostile_input.md
# at 4630b9d) during its compile-heavy cases with the defaults, under 50 ms with these. Cyclic
# garbage that reached the oldest generation waits longer for its collection.
GC_THRESHOLDS = (700, 10, 1000)

# Plans queued for the plan thread (more: BUSY); each waits at most its budget (TIMEOUT).
PLANS_QUEUED = 64
# A plan keeps its budget itself (answering TIMEOUT with its best path); one still running
# this long after its budget is compiling (not counted, and not cut short): the node then
# answers TIMEOUT for it and the plan compiles on for the next request.
PLAN_COMPILE_GRACE_S = 0.25
GOAL_QOS = QoSProfile(
    depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE
)


class PyrokiRosNode(Node):
    """The node: see the module docstring. ``settings`` is the parameters' snapshot now,
    ``worker`` the second node of slow work, ``closing`` is set at shutdown."""

    def __init__(self, ros_args: list[str] | None = None, **kwargs):
        """``ros_args``: the process's ROS arguments (default sys.argv), for the topic
        process (inputs.py: the same domain and enclave)."""
        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        gc.set_threshold(*GC_THRESHOLDS)
        super().__init__(NODE_NAME, **kwargs)
        params.declare(self)
        self.settings = params.read(self)
        self._fixed_frames = params.fixed_frames(self)
        self.add_on_set_parameters_callback(self._on_set_parameters)
        p = self.get_parameter
        self._device = configure_jax(
            p("device").value, p("compilation_cache_dir").value, self.get_logger()
        )
        # Loads and warm-ups write their programs to the compilation cache; compiles while
        # serving only with cache_serving_compiles (model.cache_writes says why).
        self._cache_serving = bool(p("cache_serving_compiles").value)
        self._cache_threshold = cache_write_threshold()
        self._cache_holders = 0
        self._cache_lock = threading.Lock()

        self._model: LoadedModel | None = None
        self._model_lock = threading.Lock()
        self._model_generation = 0
        self._stop = threading.Event()
        self.closing = threading.Event()  # set at shutdown: long work ends early
        self._warm_thread: threading.Thread | None = None
        self._loading = False
        self._joint_positions: dict[str, float] = {}
        self._joint_state_lock = threading.Lock()

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
        # Every topic taken by a process of its own (inputs.py): a huge message never reaches
        # this process. Its subscriptions are wired below, by resolved names.
        self.inputs = Inputs(
            f"{self.get_name()}_inputs",
            self.get_namespace(),
            ros_args,
            self.context.get_domain_id(),
            self.get_logger(),
        )
        self._trajectory_pub = self.create_publisher(
            JointTrajectory, p("trajectory_topic").value, 10
        )
        # ~/markers for RViz: handlers hand over what they computed, markers.py's own thread
        # builds and publishes after the answer went out.
        self._markers = (
            markers.NodeMarkers(self, p("collision_spheres").value, self.closing)
            if p("publish_markers").value
            else markers.OFF
        )
        self._wire_request_path()
        self._wire_worker()
        self._description = DescriptionSource(self, self._load_model, lambda: self._current()[0])

    def _wire_request_path(self) -> None:
        """~/solve_ik and ~/compute_fk on this node's executor; /joint_states and teleop goals
        from the topic process."""
        # Every topic through the topic process (inputs.py): a message over its byte budget
        # never reaches this process (a raw 96 MB one held the request path 1-26 s, bounded.py).
        limits = lambda: self.settings.limits  # read at each message (parameters change)
        joint_states = self.resolve_topic_name(self.settings.joint_states_topic)
        self.inputs.subscribe(
            JointState,
            joint_states,
            self._on_joint_state,
            QoSProfile(depth=10),
            lambda: bounded.joint_state_bytes(limits()),
            f"ignored: a {joint_states} message",
        )
        self._teleop = Teleop(
            self,
            current=self._current,
            settings=lambda: self.settings,
            latest=self._latest,
            compile=self._compile_in_background,
            publish=self._trajectory_pub.publish,
            markers=self._markers,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        for kind, topic in ((PoseStamped, "~/goal_pose"), (MultiLinkGoal, "~/goal")):
            self.inputs.subscribe(
                kind,
                self.resolve_topic_name(topic),
                self._teleop.on_goal,
                GOAL_QOS,
                lambda: bounded.goal_bytes(limits()),
                f"teleop goal dropped: a {topic} message",
            )
        self._service_qos = QoSProfile(
            depth=self.get_parameter("service_queue_depth").value,
            history=HistoryPolicy.KEEP_LAST,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=DurabilityPolicy.VOLATILE,
        )
        services = ReentrantCallbackGroup()
        solve_ik = self.create_service(
            SolveIK,
            "~/solve_ik",
            self._solve_ik,
            qos_profile=self._service_qos,
            callback_group=services,
        )
        allow_deferred(solve_ik)  # first-time compiles answer from the compile thread
        self._compiles = CompileQueue(
            self.settings.max_pending_compiles, after=release_freed_memory
        )
        self.create_service(
            ComputeFK,
            "~/compute_fk",
            self._compute_fk,
            qos_profile=self._service_qos,
            callback_group=services,
        )

    def _wire_worker(self) -> None:
        """Long work on the worker node (its own executor threads): a big batch, a plan or a
        retargeting never delays IK / FK. Batches run beside plans, not behind them; scene
        changes beside plans (a plan copies the scene first)."""
        worker, qos = self.worker, self._service_qos
        self._planners = planning.Planners(
            self.settings.plan.collision_spheres, self.get_logger().info
        )
        self._scene = PlanningScene()
        batches, plans, scene = (MutuallyExclusiveCallbackGroup() for _ in range(3))
        for kind, name, handler, group in (
            (SolveIKBatch, "~/solve_ik_batch", self._solve_ik_batch, batches),
            (PlanTrajectory, "~/plan_trajectory", self._plan_trajectory, plans),
            (RetargetMotion, "~/retarget_motion", self._retarget_motion, plans),
            (ApplyPlanningScene, "~/apply_planning_scene", self._apply_planning_scene, scene),
        ):
            service = worker.create_service(
                kind,
                self.resolve_service_name(name),
                handler,
                qos_profile=qos,
                callback_group=group,
            )
            if kind in (RetargetMotion, PlanTrajectory):  # they may answer from other threads
                allow_deferred(service)
        # Plans run here, one at a time (the planner's lock), answered within their budgets.
        self._plan_work = BackgroundWork(1, PLANS_QUEUED, name="pyroki_plan")
        # Its own compile thread: a retargeting compile (seconds) never queues IK's.
        self._retarget_compiles = CompileQueue(
            self.settings.max_pending_compiles,
            name="pyroki_retarget_compile",
            after=release_freed_memory,
        )
        self.inputs.subscribe(
            CollisionObject,
            self.resolve_topic_name("~/collision_objects"),
            self._on_collision_object,
            QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE),
            lambda: bounded.collision_object_bytes(self.settings.limits),
            "collision object refused: a ~/collision_objects message",
        )

    # --- parameters ---------------------------------------------------------------------

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        changed = {p.name: p.value for p in parameters}
        model = self._current()[0]
        if model is not None and ("base_frame" in changed or "tip_link" in changed):
            base = changed.get("base_frame", self.get_parameter("base_frame").value)
            tip = changed.get("tip_link", self.get_parameter("tip_link").value)
            for what, name in (("base_frame", base), ("tip_link", tip)):
                if name and name not in model.link_index:
                    return SetParametersResult(
                        successful=False,
                        reason=f"{what} '{name}' is not a link of robot '{model.name}'",
                    )
            with self._model_lock:
                model.set_frames(base, tip)
        self.settings = params.read(self, changed)
        self.inputs.budgets_changed()
        return SetParametersResult(successful=True)

    # --- the model: loading and swapping ------------------------------------------------------------

    def _current(self) -> tuple[LoadedModel | None, int]:
        """The model requests use now, and its generation (one per swap)."""
        with self._model_lock:
            return self._model, self._model_generation

    def _require_model(self) -> LoadedModel:
        return requests.require_model(self._current()[0], self._description.source)

    def busy_compiling(self) -> bool:
        """A model load or a background warm-up is running (neither can be interrupted)."""
        thread = self._warm_thread
        return self._loading or (thread is not None and thread.is_alive())

    def _load_model(self, urdf: str, source: str) -> bool:
        """Builds and warms up a model for ``urdf``, then swaps it in; a failure is logged and
        the model in use stays (False)."""
        self._loading = True
        self._hold_cache_writes(1)
        start = time.perf_counter()
        try:
            model = self._new_model(urdf, source)
            if model is not None:
                self._swap(model, start)
            return model is not None
        finally:
            self._hold_cache_writes(-1)
            self._loading = False
            release_freed_memory()  # the load's compiles

    def _hold_cache_writes(self, change: int) -> None:
        """A load or warm-up starts (+1) or ends (-1): the cache takes new programs while one
        runs, or always with cache_serving_compiles."""
        with self._cache_lock:
            self._cache_holders += change
            cache_writes(self._cache_holders > 0 or self._cache_serving, self._cache_threshold)

    def _new_model(self, urdf: str, source: str) -> LoadedModel | None:
        p = self.get_parameter
        return loading.new_model(
            urdf,
            source,
            limits=self.settings.limits,
            base_frame=p("base_frame").value,
            tip_link=p("tip_link").value,
            device=self._device,
            max_programs=p("max_compiled_programs").value,
            fixed_frames=self._fixed_frames,
            sampler_checkpoint=p("sampler_checkpoint").value,
            description=self._description,
            log=self.get_logger(),
        )

    def _swap(self, model: LoadedModel, start: float) -> None:
        """Requests use ``model`` from now on; its batch programs compile in the background."""
        self._stop.set()  # the old model's background warm-up
        with self._model_lock:
            self._model = model
            self._model_generation += 1
        self._teleop.reset()
        # The ~200,000 objects alive now (JAX, the model, its programs) stay: move them out of
        # the garbage collector's sight. Otherwise a request that allocates many objects (a
        # big message) triggers full collections over all of them, 120 ms each here with the
        # GIL held (0.01 ms frozen), and every other request waits (bench/gc_pause.py).
        gc.freeze()
        self.get_logger().info(
            f"ready: {model.describe()} (load {time.perf_counter() - start:.2f} s, of which "
            f"warm-up {model.warm_up_seconds:.2f} s)"
        )
        sizes = params.warmup_batch_sizes(self)
        plans = bool(self.get_parameter("warmup_plan").value)
        if (sizes or plans) and self.context.ok():
            self._stop = threading.Event()
            self._hold_cache_writes(1)  # released when the warm-up ends
            self._warm_thread = threading.Thread(
                target=self._warm_in_background,
                args=(model, sizes, plans, self._stop),
                name="pyroki_warm_up",
                daemon=True,
            )
            self._warm_thread.start()

    def _warm_in_background(
        self, model: LoadedModel, sizes: list[int], plans: bool, stop: threading.Event
    ) -> None:
        planner = (lambda: self._planners.get(model)) if plans else None
        try:
            loading.warm_up(model, sizes, planner, self.settings.plan, stop, self.get_logger())
        finally:
            self._hold_cache_writes(-1)

    # --- inputs --------------------------------------------------------------------------------

    def _on_joint_state(self, msg: JointState) -> None:
        try:
            positions = requests.joint_states(self.settings.limits, msg)
        except RequestError as e:
            self.get_logger().warning(f"ignored: {e.message}", throttle_duration_sec=5.0)
            return
        with self._joint_state_lock:
            self._joint_positions.update(positions)

    def _latest(self) -> dict[str, float]:
        """The latest /joint_states positions, {name: value} (a copy)."""
        with self._joint_state_lock:
            return dict(self._joint_positions)

    # --- services: handler -> requests -> core -> responses ---------------------------------------

    def _answer(self, service: str, response, error: Exception):
        """``response`` refused with ``error`` (RequestError: the caller's; else a bug: FAILURE,
        logged with its traceback)."""
        if not isinstance(error, RequestError):
            import traceback

            self.get_logger().error(f"{service}: internal error: {traceback.format_exc()}")
            error = responses.failure(error)
        self.get_logger().warning(f"{service}: refused: {error.message}", throttle_duration_sec=1.0)
        return responses.refuse(response, error)

    def _stamp(self):
        return self.get_clock().now().to_msg()

    def _solve_ik(self, request: SolveIK.Request, response: SolveIK.Response):
        start = time.perf_counter()
        try:
            model = self._require_model()
            problem = requests.ik(model, request, self.settings, self._latest())
            if problem.avoid_collisions:
                problem.feasible = requests.collision_free(
                    model, self._planners, self.settings, self._scene.objects(), problem
                )
            if not model.is_compiled(problem.objectives, problem.seed):
                return self._solve_ik_later(model, problem, start)
            response = self._ik_response(model, problem, response)
        except Exception as e:  # noqa: BLE001 -- answered, the node serves on
            return self._answer("solve_ik", response, e)
        self.get_logger().debug(
            f"solve_ik: {'ok' if response.success else response.error_code.val} in "
            f"{(time.perf_counter() - start) * 1e3:.1f} ms"
        )
        return response

    def _ik_response(self, model, problem, response: SolveIK.Response) -> SolveIK.Response:
        start = time.perf_counter()
        result = model.solve(**problem.kwargs())
        elapsed = time.perf_counter() - start
        responses.solve_ik(response, model, problem, result, elapsed, self._stamp())
        self._markers.ik_solved(model, problem.objectives, result.q)
        return response

    def _solve_ik_later(self, model, problem, start: float) -> Deferred | SolveIK.Response:
        """A request whose program is not compiled yet: compiled and solved on the compile
        thread, answered from there within the request's budget (deferred.py)."""

        def work(deferred: Deferred) -> None:
            try:
                response = self._ik_response(model, problem, SolveIK.Response())
            except Exception as e:  # noqa: BLE001
                response = self._answer("solve_ik", SolveIK.Response(), e)
            if not deferred.resolve(response):
                self.get_logger().info(
                    f"solve_ik: compiled a new program in {time.perf_counter() - start:.2f} s "
                    "(after its request's budget)"
                )

        key = (id(model), model.program_key(problem.objectives, problem.seed))
        limit, budget = self.settings.max_pending_compiles, problem.timeout
        return run_after_compile(
            self._compiles, key, work, budget, start,
            busy=lambda: self._answer("solve_ik", SolveIK.Response(), responses.busy(limit)),
            late=lambda: self._answer(
                "solve_ik", SolveIK.Response(), responses.compile_timeout(budget)
            ),
        )  # fmt: skip

    def _compile_in_background(self, model: LoadedModel, objectives, seed) -> None:
        """Compiles the program for ``objectives`` from ``seed`` on the compile thread (teleop
        goals), unless it is compiling already."""

        def work() -> None:
            try:
                model.solve(objectives, seed, iterations=1, restarts=0)
            except Exception:  # noqa: BLE001 -- the request that needs it reports errors
                import traceback

                self.get_logger().error(f"background compile: {traceback.format_exc()}")

        self._compiles.compile((id(model), model.program_key(objectives, seed)), work)

    def _solve_ik_batch(self, request: SolveIKBatch.Request, response: SolveIKBatch.Response):
        start = time.perf_counter()
        try:
            model = self._require_model()
            problem = requests.ik_batch(model, request, self.settings, self._latest())
            if problem.avoid_collisions:
                problem.feasible = requests.collision_free(
                    model, self._planners, self.settings, self._scene.objects(), problem
                )
            result = model.solve_batch(
                problem.objective,
                problem.seed,
                active=problem.active,
                tolerances=problem.tolerances,
                iterations=problem.iterations,
                restarts=problem.restarts,
                timeout=problem.timeout,
                stop=self.closing,
                limits=problem.limits,
                feasible=problem.feasible,
            )
        except Exception as e:  # noqa: BLE001
            return self._answer("solve_ik_batch", response, e)
        elapsed = time.perf_counter() - start
        stamp = self._stamp()
        return responses.solve_ik_batch(
            response, model, request, result, problem.timeout, elapsed, stamp
        )

    def _compute_fk(self, request: ComputeFK.Request, response: ComputeFK.Response):
        try:
            model = self._require_model()
            problem = requests.fk(model, request, self.settings, self._latest())
            poses = model.fk(problem.q)
        except Exception as e:  # noqa: BLE001
            return self._answer("compute_fk", response, e)
        return responses.compute_fk(response, model, problem, poses, self._stamp())

    def _plan_trajectory(self, request: PlanTrajectory.Request, response):
        """Checks the request here; the plan runs on the plan thread and answers from there,
        or TIMEOUT once its budget and PLAN_COMPILE_GRACE_S have passed: a plan among a new
        kind or count of obstacles compiles for seconds, which the core cannot cut short
        (deferred.py); the plan goes on, so that the next one finds its programs compiled."""
        start_time = time.perf_counter()
        try:
            model = self._require_model()
            scene = self._scene.objects()
            problem = requests.plan(
                model, self._planners, request, self.settings, self._latest(), scene
            )
        except Exception as e:  # noqa: BLE001
            return self._answer("plan_trajectory", response, e)

        def work(deferred: Deferred) -> None:
            try:
                if not deferred.resolved:  # else: answered TIMEOUT while waiting in the queue
                    planned = self._plan_response(
                        model, request, problem, scene, PlanTrajectory.Response(), start_time
                    )
                    deferred.resolve(planned)
            except Exception as e:  # noqa: BLE001
                deferred.resolve(self._answer("plan_trajectory", PlanTrajectory.Response(), e))

        budget = problem.timeout
        elapsed = time.perf_counter() - start_time
        answer = lambda e: self._answer("plan_trajectory", PlanTrajectory.Response(), e)
        return answer_in_background(
            self._plan_work.submit, work,
            budget + PLAN_COMPILE_GRACE_S - elapsed if budget > 0 else None,
            busy=lambda: answer(responses.plans_queued(PLANS_QUEUED)),
            late=lambda: answer(responses.plan_timeout(budget)),
        )  # fmt: skip

    def _plan_response(self, model, request, problem, scene, response, start_time: float):
        log = self.get_logger().info
        result, timed = planning.plan(problem, log, start_time)
        responses.plan(response, model, result, timed, self._stamp())
        self._execute(request, response)
        response.solve_time = time.perf_counter() - start_time
        self._markers.planned(model, request, problem.start, timed.positions, scene)
        log(
            f"plan_trajectory: {'ok' if result.success else result.message}, "
            f"{len(timed.times)} points over {timed.duration:.2f} s, clearance "
            f"{result.min_distance:.3f} m, planned in {response.solve_time:.3f} s"
            + (", published" if response.executed else "")
        )
        return response

    def _retarget_motion(self, request: RetargetMotion.Request, response):
        start = time.perf_counter()
        try:
            model = self._require_model()
            problem = requests.retarget(
                model, self._planners, request, self.settings, self._latest()
            )
            if not problem.planner.retarget_ready(planning.retarget_key(problem)):
                return self._retarget_later(model, request, problem, start)
            return self._retarget_response(model, request, problem, response, start)
        except Exception as e:  # noqa: BLE001
            return self._answer("retarget_motion", response, e)

    def _retarget_response(self, model, request, problem, response, start: float):
        result, errors, timed = planning.retarget(problem, self.get_logger().info, start)
        responses.retarget(response, model, result, errors, timed, self._stamp())
        self._execute(request, response)
        response.solve_time = time.perf_counter() - start
        return response

    def _retarget_later(self, model, request, problem, start: float):
        """A retargeting whose programs are not compiled yet (a new motion length or links):
        compiled on the retarget compile thread, then solved there within what is left of
        the budget (deferred.py, as a new IK program)."""
        budget = problem.timeout
        structure = planning.retarget_key(problem)

        def work(deferred: Deferred) -> None:
            try:
                if not problem.planner.retarget_ready(structure):  # else: compiled meanwhile
                    planning.compile_retarget(problem)
                    self.get_logger().info(
                        f"retarget_motion: compiled for {len(problem.keypoints)} steps in "
                        f"{time.perf_counter() - start:.2f} s"
                    )
                if deferred.resolved:
                    return  # answered TIMEOUT: the next request finds the programs compiled
                response = self._retarget_response(
                    model, request, problem, RetargetMotion.Response(), start
                )
            except Exception as e:  # noqa: BLE001
                response = self._answer("retarget_motion", RetargetMotion.Response(), e)
            deferred.resolve(response)

        limit, steps = self.settings.max_pending_compiles, len(problem.keypoints)
        answer = lambda e: self._answer("retarget_motion", RetargetMotion.Response(), e)
        return run_after_compile(
            self._retarget_compiles, (id(model), structure), work, budget, start,
            busy=lambda: answer(responses.busy(limit)),
            late=lambda: answer(responses.retarget_compile_timeout(budget, steps)),
        )  # fmt: skip

    def _execute(self, request, response) -> None:
        """A successful trajectory asked for with ``execute`` goes to the controller (requests
        checked that ``allow_execute`` permits it)."""
        if request.execute and response.success:
            self._trajectory_pub.publish(response.trajectory)
            response.executed = True

    # --- the planning scene --------------------------------------------------------------------

    def _on_collision_object(self, msg: CollisionObject) -> None:
        model, limits = self._current()[0], self.settings.limits
        try:
            ids = self._scene.edit(
                lambda objects: requests.scene_changes(objects, [msg], limits, model)
            )
        except RequestError as e:
            self.get_logger().warning(f"collision object refused: {e.message}")
            return
        self.get_logger().info(f"planning scene: {len(ids)} objects after '{msg.id}'")
        self._scene_shown(model)

    def _apply_planning_scene(self, request: ApplyPlanningScene.Request, response):
        model, limits = self._current()[0], self.settings.limits
        try:
            response.object_ids = self._scene.edit(
                lambda objects: requests.apply_planning_scene(objects, request, limits, model)
            )
        except Exception as e:  # noqa: BLE001
            response.object_ids = [name for name, _, _ in self._scene.objects()]
            return self._answer("apply_planning_scene", response, e)
        self._scene_shown(model)
        return responses.planning_scene(response)

    def _scene_shown(self, model: LoadedModel | None) -> None:
        """The scene's markers, placed at the latest joint states (or mid-range)."""
        if model is not None:
            q = requests.seed(model, None, self._latest(), "joint_states")
            self._markers.scene_changed(model, self._scene.objects(), q)

    def destroy_node(self):
        self.closing.set()
        self._stop.set()
        self._compiles.shutdown()
        self._retarget_compiles.shutdown()
        self._plan_work.shutdown()
        self.inputs.close()
        self.worker.destroy_node()
        return super().destroy_node()


def main(args: list[str] | None = None) -> int:
    """Entry point of ``pyroki_ros_node``; ``args`` default to sys.argv (ROS arguments after
    ``--ros-args``).

    SIGINT and SIGTERM end the node within SHUTDOWN_HARD_LIMIT_S (2 s) in every state, exit
    status 0: the request path stops at once, running work is given until SHUTDOWN_GRACE_S
    after the signal, then the process leaves without waiting for it; a watchdog ends the
    process if that has not happened by SHUTDOWN_WATCHDOG_S, a second signal at once
    (shutdown.py)."""
    exit_with_parent()
    signals = SignalShutdown.install()
    from rclpy.signals import SignalHandlerOptions

    args = sys.argv if args is None else args
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO if signals else None)
    node = None
    executor = None
    worker = None
    code = 0
    try:
        node = PyrokiRosNode(ros_args=args)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        # Three threads: a model load, a batch and a plan may run at the same time.
        worker = MultiThreadedExecutor(num_threads=3)
        worker.add_node(node.worker)
        threading.Thread(target=worker.spin, name="pyroki_ros_worker", daemon=True).start()
        node.inputs.start()
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
        shut_down(node, executor, worker, signals, code)
    return code


if __name__ == "__main__":
    sys.exit(main())
