"""A loaded robot model for the node: robot, IK solver, FK, warm-up, request translation.

Nothing here creates ROS entities; the node (``node.py``) owns the rclpy side. Request
messages come in, core objectives and numpy arrays go to the solver, and :class:`RequestError`
(``conversions.py``) comes out for anything the node must refuse.

Frames. The core solves in the URDF root frame. A target whose ``header.frame_id`` is a robot
link (the base frame included) is moved into the root frame with that link's pose *at the seed
configuration*, held fixed during the solve (as documented in msg/IKObjective.msg). For a goal
relative to a link that moves with the solution, use ``reference_link`` instead: the core then
solves the relative objective exactly.

Compilation. The solver compiles once per (objective structure, batch-size bucket). A model
compiles FK and the default tip pose objective at bucket 1 before it serves anything
(:meth:`LoadedModel.warm_up`), and the SolveIKBatch buckets in the background afterwards
(:meth:`LoadedModel.warm_up_batches`); a request for a program being compiled waits for it
instead of compiling it a second time. Other structures compile on their first use.

Thread safety. Requests may solve concurrently from several executor threads (the core's
options cache and program table are thread-safe). A program not yet known to be compiled is compiled by one caller at a
time (a lock per program); the others wait for it instead of compiling it again.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections import OrderedDict

import jax
import numpy as np

from pyroki_ros import Robot, forward_kinematics
from pyroki_ros import objectives as O
from pyroki_ros.ik import BUCKETS, IKResult, IKSolver, PoseSolver
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.ros.conversions import (
    RequestError,
    duration_seconds,
    joint_state_positions,
    pose_compose,
    pose_to_wxyz_xyz,
    quat_rotate,
    quoted,
    unit_vector,
    vector,
)

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
# A seed this far outside a joint's limits is refused (INVALID_JOINT_STATE); closer, clipped.
LIMIT_MARGIN = 1e-3
MAX_RESTARTS = 1000
DEFAULT_TOLERANCES = (1e-3, math.radians(1.0))  # m, rad


@dataclasses.dataclass(frozen=True)
class SolveSettings:
    """Node defaults a request falls back to (0 / -1 / empty fields)."""

    position_tolerance: float = 1e-3
    orientation_tolerance: float = math.radians(1.0)
    max_iterations: int = 100  # per attempt
    restarts: int = 8
    timeout: float = 0.1  # s, single solves; 0 = no limit


@dataclasses.dataclass
class SolveOutcome:
    q: np.ndarray  # (*batch, n)
    success: np.ndarray  # (*batch,)
    position_error: np.ndarray  # (*batch, k)
    orientation_error: np.ndarray  # (*batch, k)
    iterations: int
    solve_seconds: float
    code: int
    message: str


def bucket(count: int) -> int:
    """The solver's batch-size bucket for ``count`` problems (see pyroki_ros.ik.BUCKETS)."""
    for size in BUCKETS:
        if count <= size:
            return size
    return int(math.ceil(count / BUCKETS[-1]) * BUCKETS[-1])


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


def objective_structure(objective: O.Objective) -> tuple:
    """What the solver compiles for (kind, link, reference, align_axis)."""
    return (objective.kind, objective.link, objective.reference, objective.align_axis)


class SeedFrames:
    """``frames[i]``: link i's pose (7,) wxyz_xyz at a configuration; FK runs at the first
    lookup, so a request whose targets are all in the root frame pays none."""

    def __init__(self, model: LoadedModel, q: np.ndarray):
        self._model, self._q, self._poses = model, q, None

    def __getitem__(self, index):
        if self._poses is None:
            self._poses = self._model.fk(self._q)
        return self._poses[index]


class LoadedModel:
    """One robot model and everything the node needs to answer requests for it."""

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
        self._link_set = set(self.link_names)
        self._joint_index = {name: i for i, name in enumerate(self.joint_names)}
        self.lower = np.asarray(robot.lower, np.float64)
        self.upper = np.asarray(robot.upper, np.float64)
        self.continuous = np.asarray(robot.continuous, bool)
        velocity = np.asarray(robot.velocity_limits, np.float64)
        self.velocity_limits = np.where(np.isfinite(velocity) & (velocity > 0), velocity, np.inf)
        self.middle = (self.lower + self.upper) / 2
        self.notes: list[str] = []
        if not np.all(np.isfinite(velocity) & (velocity > 0)):
            unlimited = [j for j, v in zip(self.joint_names, velocity) if not 0 < v < np.inf]
            self.notes.append(
                f"no usable velocity limit in the URDF for {', '.join(unlimited)}: teleop steps "
                "of these joints are not limited"
            )
        self._fixed: list[tuple[str, int, np.ndarray]] = []  # (name, parent index, pose)
        for name, (parent, pose) in (fixed_frames or {}).items():
            if name in self._link_set or parent not in self._link_set:
                why = "is a link" if name in self._link_set else f"parent '{parent}' is no link"
                self.notes.append(f"fixed frame '{name}' left out: {why} of robot '{robot.name}'")
                continue
            self._fixed.append((name, self.link_names.index(parent), np.asarray(pose)))
        self.frame_names = self.link_names + tuple(name for name, _, _ in self._fixed)
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
        self.warm_up_seconds = 0.0
        self.batch_warm_up_seconds = 0.0
        self._reaches: dict[str, tuple[np.ndarray, float]] = {}

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
            elif wanted in self._link_set:
                setattr(self, attribute, wanted)
            elif notes is None:
                raise ValueError(f"{what} '{wanted}' is not a link of robot '{self.name}'")
            else:
                notes.append(
                    f"{what} '{wanted}' is not a link of robot '{self.name}'; using '{fallback}'"
                )
                setattr(self, attribute, fallback)

    def check_link(self, link: str, what: str) -> None:
        if link not in self._link_set:
            raise RequestError(
                ErrorCode.UNKNOWN_LINK,
                f"{what} '{link}' is not a link of robot '{self.name}'; links: "
                f"{', '.join(self.link_names)}",
            )

    def frame_index(self, frame: str, what: str) -> int:
        """Row of ``frame`` in :meth:`fk`'s poses: a link, or a fixed frame after them."""
        name = frame.lstrip("/") or self.base_frame
        if name not in self.frame_names:
            fixed = [n for n, _, _ in self._fixed]
            raise RequestError(
                ErrorCode.UNKNOWN_FRAME,
                f"{what} frame '{frame}' is neither the base frame '{self.base_frame}', a link "
                f"of robot '{self.name}' nor a fixed frame"
                + (f" ({', '.join(fixed)})" if fixed else " (parameter fixed_frames: none)"),
            )
        return self.frame_names.index(name)

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
        fixed = [pose_compose(poses[parent], pose) for _, parent, pose in self._fixed]
        return np.concatenate([poses, np.stack(fixed)])

    def frames_at(self, q) -> SeedFrames:
        """Link poses at ``q``, computed on first use (most targets are in the base frame)."""
        return SeedFrames(self, q)

    def seed(
        self,
        state,
        latest: dict[str, float] | None,
        what: str,
        *,
        check_limits: bool = True,
    ) -> np.ndarray:
        """Configuration (n,) from a JointState ``state`` (may be empty), completed with the
        latest /joint_states and then the middle of the limits, clipped into the limits. Raises
        INVALID_JOINT_STATE / UNKNOWN_JOINT for bad input."""
        return self.clip(self._state(state, latest, what, check_limits))

    def _state(self, state, latest: dict[str, float] | None, what: str, check_limits: bool):
        """The unclipped configuration (n,) of :meth:`seed`: names checked, values as given."""
        q = self.middle.copy()
        if latest:
            self._apply(q, latest, strict=False)
        if state is not None and (len(state.name) or len(state.position)):
            given = joint_state_positions(state, what)
            unknown = [
                n
                for n in given
                if n not in self._joint_index and n not in self.robot.mimic_joint_names
            ]
            if unknown:
                raise RequestError(
                    ErrorCode.UNKNOWN_JOINT,
                    f"{what} names joints that are not actuated joints of robot '{self.name}': "
                    f"{quoted(unknown)}; actuated: {', '.join(self.joint_names)}",
                )
            if check_limits:
                self._check_limits(given, what)
            self._apply(q, given, strict=True)
        return q

    def _apply(self, q: np.ndarray, values: dict[str, float], strict: bool) -> None:
        for name, value in values.items():
            i = self._joint_index.get(name)
            if i is not None and (strict or math.isfinite(value)):
                q[i] = value

    def _check_limits(self, values: dict[str, float], what: str) -> None:
        bad = []
        for name, value in values.items():
            i = self._joint_index.get(name)
            if i is None or self.continuous[i]:
                continue
            if value < self.lower[i] - LIMIT_MARGIN or value > self.upper[i] + LIMIT_MARGIN:
                bad.append(
                    f"{name} = {value:.4g} not in [{self.lower[i]:.4g}, {self.upper[i]:.4g}]"
                )
        if bad:
            raise RequestError(
                ErrorCode.INVALID_JOINT_STATE,
                f"{what} is outside the joint limits: {quoted(bad)}",
            )

    def configuration(self, state, latest: dict[str, float] | None, what: str):
        """Exactly the configuration (n,) a JointState ``state`` gives (completed as
        :meth:`seed` does), never clipped, and the names of its joints outside their limits
        (FK of a state past a limit is still that state's FK)."""
        q = self._state(state, latest, what, check_limits=False)
        outside = (q < self.lower) | (q > self.upper)
        outside &= ~self.continuous
        return q, [self.joint_names[i] for i in np.flatnonzero(outside)]

    def clip(self, q: np.ndarray) -> np.ndarray:
        """Inside the exact (float64) limits, continuous joints wrapped: the solver's rule."""
        return self.solver.into_limits(q)

    # --- request translation -------------------------------------------------------------------

    def objective(
        self, msg: IKObjective, what: str, frames: np.ndarray, default_frame: str = ""
    ) -> O.Objective:
        """A core objective (in the root frame, or relative) from an IKObjective message.

        ``frames``: link poses at the seed (an (n_links, 7) array or :class:`SeedFrames`), to
        place targets given in a link's frame.
        """
        kind = OBJECTIVE_TYPES.get(msg.type)
        if kind is None:
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{what}: unknown objective type {msg.type}; expected one of "
                + ", ".join(f"{v} ({k})" for k, v in OBJECTIVE_TYPES.items()),
            )
        if not msg.link:
            raise RequestError(ErrorCode.INVALID_REQUEST, f"{what}: link is empty (required)")
        what = f"{what} ({kind} on '{msg.link}')"
        self.check_link(msg.link, f"{what}: link")
        if kind == "POINT" and not hasattr(O, "aim"):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{what}: POINT (aim / look-at) objectives are not supported by the solver core "
                "yet; use POSITION for a point-to-point goal",
            )
        pw, ow = msg.position_weight, msg.orientation_weight
        if not (math.isfinite(pw) and math.isfinite(ow) and pw >= 0 and ow >= 0):
            raise RequestError(
                ErrorCode.INVALID_REQUEST,
                f"{what}: position_weight and orientation_weight must be finite and >= 0, got "
                f"{[pw, ow]}",
            )
        uses_orientation = kind in ("POSE", "ORIENTATION")
        target = pose_to_wxyz_xyz(msg.target.pose, f"{what}: target", orientation=uses_orientation)
        axis = None
        if kind in ("HINGE", "PLANE", "LINE", "AXIS"):
            axis = unit_vector(msg.axis, f"{what}: axis")
        local_point = vector(msg.local_point, f"{what}: local_point")
        local_axis = unit_vector(msg.local_axis, f"{what}: local_axis", default=(0.0, 0.0, 1.0))

        reference = None
        if msg.reference_link:
            self.check_link(msg.reference_link, f"{what}: reference_link")
            frame_id = msg.target.header.frame_id.lstrip("/")
            if frame_id and frame_id != msg.reference_link:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"{what}: with reference_link '{msg.reference_link}' the target is in that "
                    f"link's frame; target.header.frame_id must be empty or the same, got "
                    f"'{msg.target.header.frame_id}'",
                )
            if msg.reference_link != self.root_link:
                reference = msg.reference_link
        else:
            # Move the target (and its axis) into the root frame with FK at the seed.
            frame = msg.target.header.frame_id or default_frame
            index = self.frame_index(frame, f"{what}: target")
            if index != 0:
                placement = frames[index]
                target = pose_compose(placement, target)
                if axis is not None:
                    axis = quat_rotate(placement[:4], axis)

        position, wxyz = target[4:], target[:4]
        link = msg.link
        if kind == "POSE":
            made = O.pose(
                link, target, reference=reference, position_weight=pw, orientation_weight=ow
            )
            if any(local_point.tolist()):
                made = dataclasses.replace(made, local_point=local_point)
            return made
        if kind == "POSITION":
            return O.point(link, local_point, position, reference=reference, weight=pw)
        if kind == "ORIENTATION":
            return O.orientation(link, wxyz, reference=reference, weight=ow)
        if kind == "POINT":  # the ray from local_point along local_axis through the target
            return O.aim(link, local_point, local_axis, position, reference=reference, weight=ow)
        if kind == "AXIS":
            return O.axis(link, local_axis, axis, reference=reference, weight=ow)
        if kind == "HINGE":
            return O.hinge(
                link,
                local_point,
                local_axis,
                position,
                axis,
                reference=reference,
                position_weight=pw,
                orientation_weight=ow,
            )
        on_set = O.plane if kind == "PLANE" else O.line  # same arguments
        return on_set(
            link,
            local_point,
            position,
            axis,
            reference=reference,
            position_weight=pw,
            orientation_weight=ow,
        )

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

    def active_joints(self, names, objectives=()) -> list[str] | None:
        """Requested active joints (UNKNOWN_JOINT if not actuated); empty = the joints that
        move the objectives (:meth:`moving_joints`)."""
        names = list(names)
        if not names:
            return self.moving_joints(objectives) if objectives else None
        unknown = [n for n in names if n not in self._joint_index]
        if unknown:
            raise RequestError(
                ErrorCode.UNKNOWN_JOINT,
                f"active_joints: {quoted([repr(n) for n in unknown])} not actuated joints of "
                f"robot '{self.name}'; actuated: {', '.join(self.joint_names)}",
            )
        return names

    @staticmethod
    def tolerances(position: float, orientation: float, defaults: SolveSettings):
        out = []
        for name, value, default in (
            ("position_tolerance", position, defaults.position_tolerance),
            ("orientation_tolerance", orientation, defaults.orientation_tolerance),
        ):
            if not math.isfinite(value) or value < 0:
                raise RequestError(
                    ErrorCode.INVALID_REQUEST,
                    f"{name} must be >= 0 (0 = node default), got {value}",
                )
            out.append(value if value > 0 else default)
        return out

    @staticmethod
    def timeout(msg, default: float) -> float:
        value = duration_seconds(msg)
        if not math.isfinite(value) or value < 0:
            raise RequestError(ErrorCode.INVALID_REQUEST, f"timeout must be >= 0, got {value} s")
        return value if value > 0 else default

    # --- solving -------------------------------------------------------------------------------

    @staticmethod
    def program_key(objectives, seed) -> tuple:
        """What a solve compiles for: (objective structures, batch bucket)."""
        shapes = {np.shape(seed)[:-1], *(o.batch_shape for o in objectives)}
        count = math.prod(shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes))
        return (tuple(objective_structure(o) for o in objectives), bucket(max(count, 1)))

    def is_compiled(self, objectives, seed) -> bool:
        """Whether a solve of these objectives from ``seed`` runs a program compiled already
        (False: its first call compiles, ~1-2 s on a CPU)."""
        return self.program_key(objectives, seed) in self._compiled

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
        if len(objectives) != 1 or np.ndim(seed) != 1:
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

    def _options(self, active, max_deviation, tolerances, iterations, max_iterations):
        # A tuple, not an array: hashable, so the core checks these options once, not per call.
        if np.ndim(max_deviation) == 0:  # one bound for every joint (every node request)
            deviation = (float(max_deviation),) * len(self.joint_names)
        else:
            per_joint = np.broadcast_to(np.asarray(max_deviation, np.float64), self.lower.shape)
            deviation = tuple(per_joint.tolist())
        return {
            "active_joints": active,
            "max_deviation": deviation,
            "position_tolerance": float(tolerances[0]),
            "orientation_tolerance": float(tolerances[1]),
            "iterations_per_restart": int(iterations),
            "max_iterations": int(max_iterations),
        }

    def solve(
        self,
        objectives: list[O.Objective],
        seed: np.ndarray,
        *,
        active=None,
        max_deviation: float = 0.0,
        tolerances=DEFAULT_TOLERANCES,
        iterations: int = 100,
        restarts: int = 8,
        timeout: float = 0.0,
    ) -> SolveOutcome:
        """One IK problem: an attempt from the seed, then up to ``restarts`` restarts (the
        core's, inside the limits and the max_deviation box) within what is left of
        ``timeout`` (s, 0 = none; see :meth:`IKSolver.solve`)."""
        start = time.perf_counter()
        deviation = max_deviation if max_deviation > 0 else np.inf
        result = self._solve(
            objectives,
            seed,
            timeout=timeout,
            **self._options(active, deviation, tolerances, iterations, iterations * (1 + restarts)),
        )
        iterations_done = int(result.iterations)
        elapsed = time.perf_counter() - start
        out_of_reach = None if result.success else self.out_of_reach(objectives, tolerances)
        if result.success:
            code, message = ErrorCode.SUCCESS, ""
        elif out_of_reach:  # no time would have helped
            code, message = ErrorCode.NO_SOLUTION, out_of_reach
        elif result.timed_out or (timeout > 0 and elapsed > timeout):
            code = ErrorCode.TIMEOUT
            message = (
                f"no solution within the tolerances in the {timeout:.3g} s budget "
                f"({iterations_done} iterations); the best configuration found is returned"
            )
        else:
            code = ErrorCode.NO_SOLUTION
            message = (
                f"no solution within the tolerances after {iterations_done} iterations "
                f"({restarts} restarts allowed); the best configuration found is returned"
            )
        if code != ErrorCode.SUCCESS:
            message += (
                f"; errors: position {np.round(result.position_error, 5).tolist()} m, "
                f"orientation {np.round(result.orientation_error, 5).tolist()} rad"
            )
        return SolveOutcome(
            q=result.q,
            success=result.success,
            position_error=result.position_error,
            orientation_error=result.orientation_error,
            iterations=iterations_done,
            solve_seconds=result.solve_seconds,
            code=code,
            message=message,
        )

    def out_of_reach(self, objectives, tolerances) -> str | None:
        """Why an objective cannot be met in any configuration, or None: a position target
        farther from its link's reach ball (:meth:`Robot.reach`) than the ball's radius, the
        offset of the point on the link and the position tolerance."""
        for o in objectives:
            if not o.constrains_position or o.reference is not None or o.kind in ("plane", "line"):
                continue
            center, radius = self._reach(o.link)
            target = np.asarray(o.target, np.float64).reshape(-1, 7)[:, 4:]
            extent = radius + float(np.linalg.norm(np.asarray(o.local_point, np.float64)))
            distance = float(np.max(np.linalg.norm(target - center, axis=-1)))
            if distance > extent + tolerances[0] + 1e-4:
                return (
                    f"the target of '{o.link}' is out of reach: {distance:.3f} m from the first "
                    f"joint that moves it, which it can reach within {extent:.3f} m"
                )
        return None

    def _reach(self, link: str) -> tuple[np.ndarray, float]:
        if link not in self._reaches:
            self._reaches[link] = self.robot.reach(link)
        return self._reaches[link]

    def batch_chunk(self) -> int:
        """Targets per solver call of a large batch: the time budget is checked between
        calls. A CPU solves ~10^4 Panda targets per second, so 1024 keeps a check every
        ~0.1 s; a GPU solves a whole bucket in parallel."""
        return 1024 if self.device.platform == "cpu" else BUCKETS[-1]

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
    ) -> IKResult:
        """Every target of ``objective`` (batch shape (N,)), in chunks of
        :meth:`batch_chunk` targets; each problem gets ``iterations * (1 + restarts)``.
        Between chunks, a spent ``timeout`` (s, 0 = none) or a set ``stop`` ends the work:
        the targets left keep the seed, fail, and have infinite errors;
        ``IKResult.timed_out`` says so."""
        options = self._options(active, np.inf, tolerances, iterations, iterations * (1 + restarts))
        count = objective.batch_shape[0]
        chunk = self.batch_chunk()
        if count <= chunk:
            return self._solve((objective,), seed, **options)
        start = time.perf_counter()
        n = len(self.joint_names)
        q = np.broadcast_to(self.clip(np.asarray(seed, np.float64)), (count, n)).copy()
        success = np.zeros(count, bool)
        position_error = np.full((count, 1), np.inf)
        orientation_error = np.full((count, 1), np.inf)
        iterations_done = np.zeros(count, np.int64)
        timed_out = False
        for begin in range(0, count, chunk):
            late = timeout > 0 and time.perf_counter() - start > timeout
            if late or (stop is not None and stop.is_set()):
                timed_out = True
                break
            part = slice(begin, min(begin + chunk, count))
            fields = {f.name: getattr(objective, f.name) for f in dataclasses.fields(objective)}
            batched = {
                name: value[part]
                for name, value in fields.items()
                if np.ndim(value) >= 2 and np.shape(value)[0] == count
            }
            sub = dataclasses.replace(objective, **batched)
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

    def teleop_step(
        self,
        objectives: list[O.Objective],
        start: np.ndarray,
        step_limit: np.ndarray,
        *,
        tolerances,
        iterations: int,
    ) -> tuple[np.ndarray, bool, IKResult]:
        """One velocity-limited step towards the goal: the solve stays in the box
        ``|q - start| <= step_limit`` (max_deviation), and the answer is clamped to it again."""
        result = self._solve(
            objectives,
            start,
            **self._options(
                self.moving_joints(objectives), step_limit, tolerances, iterations, iterations
            ),
        )
        q = start + np.clip(result.q - start, -step_limit, step_limit)
        q = np.clip(q, self.lower, self.upper)
        return q, bool(result.success), result

    # --- warm-up -------------------------------------------------------------------------------

    def warm_up(self) -> float:
        """Compiles FK and the default tip pose objective at bucket 1; returns the seconds."""
        start = time.perf_counter()
        frames = self.fk(self.middle)
        tip = frames[self.link_names.index(self.tip_link)]
        self._solve(
            (O.pose(self.tip_link, tip),),
            self.middle,
            **self._options(None, np.inf, (1e-3, 0.02), 1, 1),
        )
        self.warm_up_seconds = time.perf_counter() - start
        return self.warm_up_seconds

    def warm_up_batches(self, sizes, link: str | None = None, stop: threading.Event | None = None):
        """Compiles the pose objective of ``link`` (default the tip) for the batch buckets of
        ``sizes`` (targets = FK at the seed, so the solves themselves take one iteration)."""
        start = time.perf_counter()
        link = link or self.tip_link
        tip = self.fk(self.middle)[self.link_names.index(link)]
        for size in sorted({bucket(int(s)) for s in sizes if int(s) > 1}):
            if stop is not None and stop.is_set():
                break
            targets = np.broadcast_to(tip, (size, 7))
            self._solve(
                (O.pose(link, targets),),
                self.middle,
                **self._options(None, np.inf, (1e-3, 0.02), 1, 1),
            )
        self.batch_warm_up_seconds = time.perf_counter() - start
        return self.batch_warm_up_seconds
