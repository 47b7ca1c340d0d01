"""A loaded robot model for the node: robot, IK solver, FK, warm-up, compiled programs.

Nothing here creates ROS entities or reads request messages: requests.py turns requests into
the core problems this model solves, responses.py turns the results into answers.

Compilation. The solver compiles once per (objective structure, batch-size bucket). A model
compiles FK and the default tip pose objective at bucket 1 before it serves anything
(:meth:`LoadedModel.warm_up`), and the SolveIKBatch buckets in the background afterwards
(:meth:`LoadedModel.warm_up_batches`). Other structures compile on their first use; the node
answers such a request from a compile thread (deferred.py), asking :meth:`is_compiled` first.
At most ``max_programs`` programs are kept (least recently used dropped).

Size. About 600 lines because the model is what every IK and FK request reaches: the JAX
set-up of the process, the frames and the default tip, the single solve (with its fast pose
path and the compiled-program table), the chunked batch solve and the warm-ups, and the
learned seeds. Each is a few methods around one :class:`LoadedModel`; splitting it would
pass the same state between modules.

Thread safety. Requests may solve concurrently from several executor threads (the core's
options cache and program table are thread-safe). A program not yet known to be compiled is
compiled by one caller at a time (a lock per program); the others wait for it instead of
compiling it again.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

import jax
import numpy as np

from pyroki_ros import Robot, forward_kinematics
from pyroki_ros import objectives as O
from pyroki_ros.ik import (
    BUCKETS,
    DEFAULT_ORIENTATION_TOLERANCE,
    DEFAULT_POSITION_TOLERANCE,
    IKResult,
    IKSolver,
    PoseSolver,
    bucket,
)
from pyroki_ros.ik import structure as objective_structure
from pyroki_ros.model.limits import JointLimits
from pyroki_ros.ros import frames as F

DEFAULT_TOLERANCES = (DEFAULT_POSITION_TOLERANCE, DEFAULT_ORIENTATION_TOLERANCE)  # m, rad
# Samples the learned IK sampler (sampler_checkpoint) draws per ~/solve_ik request.
SAMPLER_SEEDS = 8


def configure_jax(device: str, cache: str, logger) -> str | None:
    """JAX for the node: synchronous CPU dispatch (small solves: less latency), the persistent
    compilation cache in ``cache`` ("auto": the default folder, "": off; JAX_COMPILATION_CACHE_DIR
    wins). Returns the solver's device: None for ``device`` "auto", "cpu" when the one asked
    for is not available (logged)."""
    import os

    jax.config.update("jax_cpu_enable_async_dispatch", False)
    wanted = None if device == "auto" else device
    if wanted is not None:
        try:
            jax.devices(wanted)
        except RuntimeError as e:
            logger.error(f"device '{device}' is not available here ({e}); solving on the CPU")
            wanted = "cpu"
    if cache and not os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        from pyroki_ros.ik import enable_compilation_cache

        try:
            enable_compilation_cache(None if cache == "auto" else os.path.expanduser(cache))
        except OSError as e:
            logger.warning(f"no compilation cache at '{cache}': {e}")
    return wanted


# Writing a program to the persistent compilation cache serialises it with Python's lock
# held (~0.1 s for a plan's programs here): every other request waits meanwhile. Measured by
# bench/hostile_input.py, case 2h (a plan that compiles), compute_fk's max: 101.7 ms with
# `--cases report --node-param cache_serving_compiles:=true`, 43.2 ms without the writes
# (the default: docs/benchmarks/hostile_input.md); README, "Hostile input".
_NO_WRITES_S = 1e9  # a compile-time threshold no compile reaches


def release_freed_memory() -> None:
    """Hands freed memory back to the operating system (glibc's ``malloc_trim``; a no-op
    where there is none). XLA's compiles allocate and free hundreds of MB, which glibc keeps
    for reuse. Measured (``bench/hostile_input.py``, docs/benchmarks/hostile_input.md as
    committed in cb02262, without, and c98bfab, with these calls; 2026-11-28, this 2-core VM):
    the warmed-up node (row "idle") 1,439 -> 973 MiB, the run's peak 1,696 -> 1,509 MiB.
    Called after a model load, its background warm-up and each background compile, never
    on the request path (it walks the heap)."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def cache_write_threshold() -> float:
    """The configured shortest compile (s) the persistent cache keeps (configure_jax's)."""
    return float(jax.config.jax_persistent_cache_min_compile_time_secs)


def cache_writes(enabled: bool, threshold: float) -> None:
    """Whether programs compiled from now on are written to the persistent compilation cache
    (when there is one), those compiled in at least ``threshold`` s; reading goes on either
    way."""
    jax.config.update(
        "jax_persistent_cache_min_compile_time_secs", threshold if enabled else _NO_WRITES_S
    )


def default_tip(robot: Robot) -> str:
    """A sensible end effector when none is configured: the leaf link at the end of the longest
    chain of revolute joints (ties: fewest other actuated joints, then last in tree order)."""
    from pyroki_ros.model.robot import REVOLUTE

    children = {p for p in robot.parent_index if p >= 0}
    best, best_key = robot.root_link, None
    for i, name in enumerate(robot.link_names):
        if i in children:
            continue
        chain = robot.ancestors(i)
        actuated = {robot.q_index[j] for j in chain if robot.q_index[j] >= 0}
        revolute = {
            robot.q_index[j]
            for j in chain
            if robot.q_index[j] >= 0 and robot.joint_type[j] == REVOLUTE
        }
        key = (len(revolute), -(len(actuated) - len(revolute)), i)
        if best_key is None or key > best_key:
            best, best_key = name, key
    return best


class SeedFrames:
    """``frames[i]``: frame i's pose (7,) wxyz_xyz at a configuration (rows of
    :meth:`LoadedModel.fk`); FK runs at the first lookup, so a request whose targets are all
    in the root frame pays none."""

    def __init__(self, model: LoadedModel, q: np.ndarray):
        self._model, self._q, self._poses = model, q, None

    def __getitem__(self, index):
        if self._poses is None:
            self._poses = self._model.fk(self._q)
        return self._poses[index]


class LoadedModel:
    """One robot model and everything the node needs to answer requests for it.

    Joint limits are the robot's (``robot.limits``, :class:`~pyroki_ros.model.limits.
    JointLimits`): every clip and check goes through them.
    """

    def __init__(
        self,
        urdf: str,
        *,
        base_frame: str = "",
        tip_link: str = "",
        device: str | None = None,
        source: str = "",
        max_programs: int = 32,
        fixed_frames: dict[str, tuple[str, np.ndarray]] | None = None,
    ):
        """Parses the URDF (URDFError / ValueError on bad input) and creates the solver.

        ``base_frame`` / ``tip_link``: configured names; empty or absent from this model ->
        the root link / :func:`default_tip`, with a note in :attr:`notes`.
        ``max_programs``: compiled IK programs kept (least recently used ones are dropped,
        so that memory stays bounded whatever objective structures requests bring).
        ``fixed_frames``: {name: (parent link, pose wxyz_xyz in it)}, frames requests may name
        beside the links (``world``, a camera); entries whose parent is not a link of this
        robot, or whose name is a link, are left out with a note.
        """
        self.urdf = urdf
        self.source = source
        self.robot = robot = Robot.from_urdf(urdf)
        if robot.n_joints == 0:
            raise ValueError(f"robot '{robot.name}' has no actuated joint: nothing to solve for")
        self.solver = IKSolver(robot, device=device)
        self.device = self.solver.device
        self.joint_names: tuple[str, ...] = robot.joint_names
        self.link_names: tuple[str, ...] = robot.link_names
        self.joint_index = {name: i for i, name in enumerate(self.joint_names)}
        self.link_index = {name: i for i, name in enumerate(self.link_names)}
        velocity = np.asarray(robot.velocity_limits, np.float64)
        usable = np.isfinite(velocity) & (velocity > 0)
        self.velocity_limits = np.where(usable, velocity, np.inf)  # (n,) rad/s or m/s
        self.notes: list[str] = []
        if not np.all(usable):
            unlimited = [j for j, ok in zip(self.joint_names, usable) if not ok]
            self.notes.append(
                f"no usable velocity limit in the URDF for {', '.join(unlimited)}: teleop steps "
                "of these joints are not limited"
            )
        self._fixed: list[tuple[str, int, np.ndarray]] = []  # (name, parent index, pose)
        for name, (parent, pose) in (fixed_frames or {}).items():
            if name in self.link_index or parent not in self.link_index:
                why = "is a link" if name in self.link_index else f"parent '{parent}' is no link"
                self.notes.append(f"fixed frame '{name}' left out: {why} of robot '{robot.name}'")
                continue
            self._fixed.append((name, self.link_index[parent], np.asarray(pose)))
        self.fixed_frame_names = tuple(name for name, _, _ in self._fixed)
        self.frame_names = self.link_names + self.fixed_frame_names
        self._frame_rows = {name: i for i, name in enumerate(self.frame_names)}
        self.base_frame = self.root_link
        self.tip_link = default_tip(robot)
        self.set_frames(base_frame, tip_link, notes=self.notes)
        self._fk = jax.jit(forward_kinematics)
        self.max_programs = max_programs
        self._compiled: OrderedDict[tuple, None] = OrderedDict()  # LRU, see _remember
        self._moving: dict[tuple, list[str] | None] = {}
        self._pose_solvers: dict[tuple, PoseSolver] = {}
        self._compile_lock = threading.Lock()
        self._key_locks: dict[tuple, threading.Lock] = {}
        self._reaches: dict[str, tuple[np.ndarray, float]] = {}
        self.sampler = None  # the learned IK sampler (load_sampler), or None
        self.warm_up_seconds = 0.0
        self.batch_warm_up_seconds = 0.0

    # --- names ------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.robot.name

    @property
    def root_link(self) -> str:
        return self.robot.root_link

    def set_frames(self, base_frame: str, tip_link: str, notes: list[str] | None = None) -> None:
        """Applies configured base frame / tip link names, falling back where this model lacks
        them (reasons appended to ``notes``; without ``notes`` an unknown name raises)."""
        for attribute, wanted, fallback, what in (
            ("base_frame", base_frame, self.root_link, "base_frame"),
            ("tip_link", tip_link, default_tip(self.robot), "tip_link"),
        ):
            if not wanted:
                setattr(self, attribute, fallback)
            elif wanted in self.link_index:
                setattr(self, attribute, wanted)
            elif notes is None:
                raise ValueError(f"{what} '{wanted}' is not a link of robot '{self.name}'")
            else:
                notes.append(
                    f"{what} '{wanted}' is not a link of robot '{self.name}'; using '{fallback}'"
                )
                setattr(self, attribute, fallback)

    def frame_row(self, frame_id: str) -> int | None:
        """Row of a frame in :meth:`fk`'s poses (a link, or a fixed frame after them; empty =
        the base frame), None for an unknown one."""
        return self._frame_rows.get(frame_id.lstrip("/") or self.base_frame)

    def describe(self) -> str:
        return (
            f"robot '{self.name}' ({self.source}): {len(self.link_names)} links, "
            f"{len(self.joint_names)} actuated joints ({', '.join(self.joint_names)}), "
            f"base frame '{self.base_frame}', tip link '{self.tip_link}', device {self.device}"
        )

    # --- kinematics --------------------------------------------------------------------------

    def fk(self, q) -> np.ndarray:
        """Poses in the root frame at ``q`` (n,) of every link, then of every fixed frame:
        (len(frame_names), 7) wxyz_xyz float64."""
        q = np.asarray(q, np.dtype(self.robot.dtype))
        poses = np.asarray(self._fk(self.robot, q).wxyz_xyz, np.float64)
        if not self._fixed:
            return poses
        fixed = [F.compose(poses[parent], pose) for _, parent, pose in self._fixed]
        return np.concatenate([poses, np.stack(fixed)])

    def frames_at(self, q) -> SeedFrames:
        """Frame poses at ``q``, computed on first use (most targets are in the base frame)."""
        return SeedFrames(self, q)

    def moving_joints(self, objectives) -> list[str] | None:
        """Actuated joints that move any objective's link or reference (None: all). The
        default set of active joints: the others could only wander, so they keep their seed."""
        key = tuple((o.link, o.reference) for o in objectives)
        cached = self._moving.get(key)
        if cached is None:
            indices = set()
            for o in objectives:
                for link in (o.link, o.reference):
                    if link:
                        indices.update(self.robot.chain_joints(self.root_link, link))
            cached = [self.joint_names[i] for i in sorted(indices)] or None
            if len(self._moving) > 256:
                self._moving.clear()
            self._moving[key] = cached
        return cached

    # --- compiled programs ------------------------------------------------------------------------

    @staticmethod
    def program_key(objectives, seed) -> tuple:
        """What a solve compiles for: (objective structures, batch bucket)."""
        shapes = {np.shape(seed)[:-1], *(o.batch_shape for o in objectives)}
        count = math.prod(shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes))
        return LoadedModel._key(objectives, count)

    @staticmethod
    def _key(objectives, count: int) -> tuple:
        return (tuple(objective_structure(o) for o in objectives), bucket(max(count, 1)))

    def is_compiled(self, objectives, seed) -> bool:
        """Whether a solve of these objectives from ``seed`` runs a program compiled already
        (False: its first call compiles, ~1-2 s on a CPU)."""
        return self.program_key(objectives, seed) in self._compiled

    @property
    def compiled_programs(self) -> int:
        """IK programs compiled and kept now (at most ``max_programs``)."""
        return len(self._compiled)

    def _remember(self, key: tuple) -> None:
        """Marks ``key`` compiled (most recently used); past :attr:`max_programs`, the least
        recently used program is dropped from the solver, and with it its memory."""
        with self._compile_lock:
            self._compiled[key] = None
            self._compiled.move_to_end(key)
            while len(self._compiled) > self.max_programs:
                old, _ = self._compiled.popitem(last=False)
                self._key_locks.pop(old, None)
                if not any(k[0] == old[0] for k in self._compiled):
                    self.solver.forget(old[0])
                    self._pose_solvers.clear()  # they hold their programs

    def _solve(self, objectives, seed, timeout: float = 0.0, **options) -> IKResult:
        """solver.solve, compiling each (structure, bucket) program at most once at a time."""
        key = self.program_key(objectives, seed)
        if key in self._compiled:
            try:
                self._compiled.move_to_end(key)  # least recently used goes first
            except KeyError:  # just dropped by another thread: this call compiles it again
                pass
            prepared = self._pose_solver(objectives, seed, options)
            if prepared is not None:
                return prepared(objectives[0].target, seed=seed, timeout=timeout)
            return self.solver.solve(objectives, seed=seed, timeout=timeout, **options)
        with self._compile_lock:  # one lock per program: unrelated compilations run in parallel
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            result = self.solver.solve(objectives, seed=seed, timeout=timeout, **options)
            self._remember(key)
            return result

    def _pose_solver(self, objectives, seed, options: dict) -> PoseSolver | None:
        """The prepared solver (:class:`~pyroki_ros.ik.PoseSolver`, a cheaper call) for the
        commonest request, one pose objective from one seed; None for anything else."""
        if (
            len(objectives) != 1
            or np.ndim(seed) != 1
            or "limits" in options
            or "feasible" in options
        ):
            return None
        o = objectives[0]
        if o.kind != "pose" or o.batch_shape != () or any(o.local_point.tolist()):
            return None
        weights = tuple(o.weights.tolist())
        key = (o.link, o.reference, weights) + tuple(
            (k, tuple(v) if isinstance(v, list) else v) for k, v in options.items()
        )
        prepared = self._pose_solvers.get(key)
        if prepared is None:
            if len(self._pose_solvers) > 64:
                self._pose_solvers.clear()
            prepared = self._pose_solvers[key] = self.solver.pose_solver(
                o.link,
                reference=o.reference,
                position_weight=weights[0],
                orientation_weight=weights[1],
                **options,
            )
        return prepared

    def _options(self, active, max_deviation, tolerances, iterations, max_iterations) -> dict:
        # A tuple, not an array: hashable, so the core checks these options once, not per call.
        n = self.robot.n_joints
        if np.ndim(max_deviation) == 0:  # one bound for every joint (every service request)
            deviation = (float(max_deviation),) * n
        else:
            deviation = tuple(np.broadcast_to(np.asarray(max_deviation, np.float64), (n,)).tolist())
        return {
            "active_joints": active,
            "max_deviation": deviation,
            "position_tolerance": float(tolerances[0]),
            "orientation_tolerance": float(tolerances[1]),
            "iterations_per_restart": int(iterations),
            "max_iterations": int(max_iterations),
        }

    # --- solving -------------------------------------------------------------------------------

    def solve(
        self,
        objectives: list[O.Objective],
        seed: np.ndarray,
        *,
        active=None,
        max_deviation=0.0,
        tolerances=DEFAULT_TOLERANCES,
        iterations: int = 100,
        restarts: int = 8,
        timeout: float = 0.0,
        limits: JointLimits | None = None,
        feasible: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> IKResult:
        """One IK problem: an attempt from the seed (n,), then up to ``restarts`` restarts (the
        core's, inside the limits and the max_deviation box: one number or (n,), rad or m
        from the seed, 0 = unlimited) within what is left of ``timeout`` (s, 0 = none; see
        :meth:`IKSolver.solve`). ``limits``: per-solve joint limits (the same program);
        ``feasible``: a batched predicate every answer must also meet (the global solve goes
        on past answers that fail it)."""
        if np.ndim(max_deviation) == 0:
            deviation = max_deviation if max_deviation > 0 else np.inf
        else:
            deviation = np.where(np.asarray(max_deviation) > 0, max_deviation, np.inf)
        options = self._options(
            active, deviation, tolerances, iterations, iterations * (1 + restarts)
        )
        if limits is not None:
            options["limits"] = limits
        if feasible is not None:
            options["feasible"] = feasible
        return self._solve(objectives, seed, timeout=timeout, **options)

    def out_of_reach(self, objectives, position_tolerance: float) -> str | None:
        """Why an objective cannot be met in any configuration, or None: a position target
        farther from its link's reach ball (:meth:`Robot.reach`) than the ball's radius, the
        offset of the point on the link and the position tolerance."""
        for o in objectives:
            if not o.constrains_position or o.reference is not None or o.kind in ("plane", "line"):
                continue
            if o.link not in self._reaches:
                self._reaches[o.link] = self.robot.reach(o.link)
            center, radius = self._reaches[o.link]
            target = np.asarray(o.target, np.float64).reshape(-1, 7)[:, 4:]
            extent = radius + float(np.linalg.norm(np.asarray(o.local_point, np.float64)))
            distance = float(np.max(np.linalg.norm(target - center, axis=-1)))
            if distance > extent + position_tolerance + 1e-4:
                return (
                    f"the target of '{o.link}' is out of reach: {distance:.3f} m from the first "
                    f"joint that moves it, which it can reach within {extent:.3f} m"
                )
        return None

    def batch_chunk(self) -> int:
        """Targets per solver call of a large batch: the time budget is checked between
        calls. A CPU solves ~10^4 Panda targets per second, so 1024 keeps a check every
        ~0.1 s; a GPU solves a whole bucket in parallel."""
        return 1024 if self.device.platform == "cpu" else BUCKETS[-1]

    def _ready_chunk(self, objective: O.Objective, size: int) -> int:
        """Targets per call for a batch with a budget: ``size``, or fewer when its program
        is not compiled yet but a smaller bucket's is (a first compile, seconds: the node
        logs its warm-up's, would spend the budget before a target is solved; the node's warm-up
        compiles the buckets of ``warmup_batch_sizes`` in the background meanwhile)."""
        if self._key((objective,), size) in self._compiled:
            return size
        ready = [b for b in BUCKETS if b < size and self._key((objective,), b) in self._compiled]
        return ready[-1] if ready else size

    def solve_batch(
        self,
        objective: O.Objective,
        seed: np.ndarray,
        *,
        active=None,
        tolerances=DEFAULT_TOLERANCES,
        iterations: int = 100,
        restarts: int = 8,
        timeout: float = 0.0,
        stop: threading.Event | None = None,
        limits: JointLimits | None = None,
        feasible: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> IKResult:
        """Every target of ``objective`` (batch shape (N,)), in chunks of
        :meth:`batch_chunk` targets; each problem gets ``iterations * (1 + restarts)``.
        Between chunks, a spent ``timeout`` (s, 0 = none) or a set ``stop`` ends the work:
        the targets left keep the seed, fail, and have infinite errors;
        ``IKResult.timed_out`` says so. ``limits`` and ``feasible`` as for :meth:`solve`,
        for every target (``IKSolver.solve`` takes them for a batch too)."""
        options = self._options(active, np.inf, tolerances, iterations, iterations * (1 + restarts))
        if limits is not None:
            options["limits"] = limits
        if feasible is not None:
            options["feasible"] = feasible
        count = objective.batch_shape[0]
        chunk = self.batch_chunk()
        if timeout > 0:
            chunk = self._ready_chunk(objective, min(count, chunk))
        if count <= chunk:
            return self._solve((objective,), seed, **options)
        start = time.perf_counter()
        n = len(self.joint_names)
        box = self.robot.limits if limits is None else limits
        q = np.broadcast_to(box.clip(seed), (count, n)).copy()
        success = np.zeros(count, bool)
        position_error = np.full((count, 1), np.inf)
        orientation_error = np.full((count, 1), np.inf)
        iterations_done = np.zeros(count, np.int64)
        timed_out = False
        fields = {f.name: getattr(objective, f.name) for f in dataclasses.fields(objective)}
        batched = [
            name
            for name, value in fields.items()
            if np.ndim(value) >= 2 and np.shape(value)[0] == count
        ]
        for begin in range(0, count, chunk):
            late = timeout > 0 and time.perf_counter() - start > timeout
            if late or (stop is not None and stop.is_set()):
                timed_out = True
                break
            part = slice(begin, min(begin + chunk, count))
            sub = dataclasses.replace(objective, **{name: fields[name][part] for name in batched})
            result = self._solve((sub,), seed, **options)
            q[part] = result.q
            success[part] = result.success
            position_error[part] = result.position_error
            orientation_error[part] = result.orientation_error
            iterations_done[part] = result.iterations
        return IKResult(
            q=q,
            success=success,
            position_error=position_error,
            orientation_error=orientation_error,
            iterations=iterations_done,
            solve_seconds=time.perf_counter() - start,
            timed_out=timed_out,
        )

    # --- warm-up -------------------------------------------------------------------------------

    def warm_up(self) -> float:
        """Compiles FK and the default tip pose objective at bucket 1; returns the seconds."""
        start = time.perf_counter()
        middle = self.robot.limits.center()
        tip = self.fk(middle)[self.link_index[self.tip_link]]
        self._solve(
            (O.pose(self.tip_link, tip),),
            middle,
            **self._options(None, np.inf, DEFAULT_TOLERANCES, 1, 1),
        )
        self.warm_up_seconds = time.perf_counter() - start
        return self.warm_up_seconds

    def warm_up_batches(self, sizes, link: str | None = None, stop: threading.Event | None = None):
        """Compiles the pose objective of ``link`` (default the tip) for the batch buckets of
        ``sizes`` (targets = FK at the seed, so the solves themselves take one iteration)."""
        start = time.perf_counter()
        link = link or self.tip_link
        middle = self.robot.limits.center()
        tip = self.fk(middle)[self.link_index[link]]
        for size in sorted({bucket(int(s)) for s in sizes if int(s) > 1}):
            if stop is not None and stop.is_set():
                break
            targets = np.broadcast_to(tip, (size, 7))
            self._solve(
                (O.pose(link, targets),),
                middle,
                **self._options(None, np.inf, DEFAULT_TOLERANCES, 1, 1),
            )
        self.batch_warm_up_seconds = time.perf_counter() - start
        return self.batch_warm_up_seconds

    # --- the learned IK sampler ------------------------------------------------------------------

    def load_sampler(self, path: str) -> None:
        """The learned IK sampler checkpoint at ``path`` for this model, its program compiled.
        ``path`` may also name a model shipped in the package ("panda", "ur5":
        :func:`pyroki_ros.sampler.checkpoint_path`).

        Raises:
            ValueError, OSError, KeyError: not a checkpoint, or one for another robot.
        """
        from pyroki_ros.sampler import IKSampler, checkpoint_path
        from pyroki_ros.sampler.seeding import best_samples

        sampler = IKSampler.load(checkpoint_path(path), self.robot)
        if sampler.spec.base != self.root_link:
            raise ValueError(f"its base '{sampler.spec.base}' is not the root link")
        target = np.zeros(3) if sampler.spec.mode == "position" else np.eye(1, 7)[0]
        best_samples(sampler, target, SAMPLER_SEEDS, incumbent=sampler.rest)  # compile
        self.sampler = sampler

    def sampled_seed(self, objectives, seed: np.ndarray, constrained: bool) -> np.ndarray:
        """The best of the sampler's samples when it is closer to the target than ``seed``
        (n,); ``seed`` itself without a sampler, for other problems than one objective on the
        sampler's tip, or when ``constrained`` (max_deviation or active joints given)."""
        sampler = self.sampler
        if sampler is None or len(objectives) != 1 or constrained:
            return seed
        o = objectives[0]
        spec = sampler.spec
        kinds = ("pose", "position") if spec.mode == "position" else ("pose",)
        if o.link != spec.tip or o.reference is not None or o.kind not in kinds:
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
        return self.robot.limits.clip(q)
