"""~/plan_trajectory and ~/retarget_motion: the trajectory optimiser of a loaded model.

requests.py turns a request into a :class:`~pyroki_ros.ros.requests.PlanProblem` /
:class:`~pyroki_ros.ros.requests.RetargetProblem`; this module runs it on the model's
:class:`Planner` (one plan at a time per model) and times the path; responses.py answers.

Retargeting compiles programs per structure (:func:`retarget_key`: links, weighted links,
vectors, motion length), seconds (the node logs each; docs/benchmarks/hostile_input.md,
case 2g, reports a 4,096-step motion's), which the core's budget cannot cut short. The node asks
:meth:`Planner.retarget_ready` first and runs a new structure's :func:`compile_retarget` on
a compile thread, so that the request's budget counts it.

A request's budget also counts its wait for the planner (one plan or retargeting at a time
per model, the start-up warm-up included: :func:`_turn`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.planning import timing
from pyroki_ros.planning.trajopt import PlanResult, TrajectoryOptimizer
from pyroki_ros.planning.trajopt import retarget as retarget_motion
from pyroki_ros.ros import responses
from pyroki_ros.ros.deferred import core_budget
from pyroki_ros.ros.model import LoadedModel
from pyroki_ros.ros.requests import PlanProblem, RetargetProblem


def load_spheres(model: LoadedModel, source: str) -> tuple[col.RobotSpheres | None, str]:
    """The robot's collision spheres: ``auto`` = the bundled set for an embedded robot of
    the same name (``fine``: its fine set), else fitted to the URDF's collision geometry; a YAML path; or ``""`` =
    no collision checking. Returns the spheres and a line for the log."""
    spheres, _, note = _load_models(model, source)
    return spheres, note


def _load_models(
    model: LoadedModel, source: str
) -> tuple[col.RobotSpheres | None, col.RobotSpheres | None, str]:
    """:func:`load_spheres` and the file's exact model (None without one: the planner's
    fallback, :class:`TrajectoryOptimizer`'s ``exact``)."""
    robot = model.robot
    if not source:
        return None, None, "collision checking off (collision_spheres is empty)"
    if source not in ("auto", "fine"):
        path, note = Path(source), f"collision spheres from {source}"
        spheres = col.RobotSpheres.from_yaml(robot, path)
    else:
        try:  # the bundled set; an embedded robot's name with other links: fit this URDF
            path = col.embedded_path(robot.name, fine=source == "fine")
            spheres = col.RobotSpheres.from_yaml(robot, path)
            note = f"bundled {source} collision spheres for '{robot.name}'"
        except ValueError:
            spheres = col.RobotSpheres.from_urdf(robot, model.urdf)
            if spheres.n_spheres == 0:
                return None, None, "no collision geometry in the URDF: collision checking off"
            return spheres, None, f"{spheres.n_spheres} spheres from the URDF collision geometry"
    exact = None
    if links := col.exact_hull_links(path):
        exact = col.RobotSpheres.from_yaml(robot, path, exact=True)
        note += f" (exact model: {', '.join(links)} as mesh hulls, the plans' fallback)"
    return spheres, exact, note


class Turns:
    """One plan at a time (plans are CPU-bound), requests before the background: a request
    waits for the plan or compile under way; the warm-up's later steps wait until no request
    does (a plain lock may hand itself back to the thread that released it)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self._waiting = 0  # requests waiting for a turn

    def request(self, timeout: float | None = None) -> contextlib.AbstractContextManager:
        """The next turn, within ``timeout`` s (None: no limit); TimeoutError past it."""
        return self._take(lambda: not self._busy, timeout, request=True)

    def background(self) -> contextlib.AbstractContextManager:
        """A turn when no request is waiting for one."""
        return self._take(lambda: not self._busy and self._waiting == 0, None, request=False)

    @contextlib.contextmanager
    def _take(
        self, ready: Callable[[], bool], timeout: float | None, request: bool
    ) -> Iterator[None]:
        with self._changed:
            self._waiting += request
            try:
                if not self._changed.wait_for(ready, timeout):
                    raise TimeoutError(f"no turn within {timeout} s")
            finally:
                self._waiting -= request
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()


class Planner:
    """The trajectory optimiser of one loaded model."""

    def __init__(self, model: LoadedModel, collision_spheres: str):
        self.model = model
        spheres, exact, self.note = _load_models(model, collision_spheres)
        # Coarse obstacle buckets: a node serves a planning scene that changes, and every
        # scene of up to 16 boxes and cylinders then plans with the programs its warm-up
        # compiled (:func:`warm_up`) instead of compiling for a new count.
        self.optimizer = TrajectoryOptimizer(
            model.robot,
            spheres,
            device=model.device.platform,
            max_programs=model.max_programs,
            obstacle_buckets=col.COARSE_WORLD_BUCKETS,
            exact=exact,
        )
        self.turns = Turns()  # one plan at a time per model, requests first
        # Retargeting structures compiled (retarget_key), least recently used first; as many
        # as the optimiser keeps programs (past that it may have dropped one: then its next
        # use compiles on the request's thread again, uncounted, as before).
        self._retargets: OrderedDict[tuple, None] = OrderedDict()
        self._retargets_lock = threading.Lock()

    def retarget_ready(self, key: tuple) -> bool:
        """Whether retargeting of structure ``key`` (:func:`retarget_key`) has compiled."""
        with self._retargets_lock:
            if key not in self._retargets:
                return False
            self._retargets.move_to_end(key)
            return True

    def retarget_compiled(self, key: tuple) -> None:
        with self._retargets_lock:
            self._retargets[key] = None
            self._retargets.move_to_end(key)
            while len(self._retargets) > self.model.max_programs:
                self._retargets.popitem(last=False)


class Planners:
    """The planner of the current model, created on its first plan (a new model, a new one:
    the old model's goes)."""

    def __init__(self, collision_spheres: str, log: Callable[[str], None]):
        self._source = collision_spheres
        self._log = log
        self._planner: Planner | None = None
        self._lock = threading.Lock()

    def get(self, model: LoadedModel) -> Planner:
        """Raises ValueError / OSError when the collision model does not load."""
        with self._lock:
            planner = self._planner
            if planner is None or planner.model is not model:
                planner = self._planner = Planner(model, self._source)
                self._log(f"planning for robot '{model.name}': {planner.note}")
        return planner


def warm_up(planner: Planner, num_steps: int, margin: float) -> float:
    """Compiles what the first plans of this model need, before any request (node parameter
    ``warmup_plan``): a pose goal for the model's tip with ``num_steps`` knots, without
    obstacles, among boxes and cylinders and among boxes alone (the planning scene's usual
    kinds, up to 16 of each: :data:`COARSE_WORLD_BUCKETS`; other kinds and more obstacles
    compile on their first use), then the optimiser's exact model among obstacles, if it has
    one. Returns seconds.

    Holds the planner throughout the model's own programs: a plan that took it first would
    compile them itself, unbounded by its budget; waiting, it answers TIMEOUT within its
    budget (:func:`_turn`). The exact model's scenes then take background turns, one at a
    time: a plan that waits goes first (:class:`Turns`)."""
    import time

    from pyroki_ros import objectives as O
    from pyroki_ros.model.kinematics import forward_kinematics

    clock = time.perf_counter()
    with planner.turns.request():  # a first plan waits for the model's own programs
        model, optimizer = planner.model, planner.optimizer
        robot = model.robot
        center = np.asarray(robot.center(), np.float64)
        start = robot.limits.clip(center + 0.2 * (robot.limits.upper - center))
        tip = robot.link_index(model.tip_link)
        goal = np.asarray(forward_kinematics(robot, center).wxyz_xyz[tip], np.float64)
        far = [1.0, 0.0, 0.0, 0.0, 5.0, 5.0, 5.0]  # out of reach: the programs, not the path
        scenes = (
            None,
            col.World.create(
                box_poses=[far],
                box_half_extents=[[0.1, 0.1, 0.1]],
                cylinder_poses=[far],
                cylinder_radii=[0.05],
                cylinder_half_heights=[0.1],
            ),
            col.World.create(box_poses=[far], box_half_extents=[[0.1, 0.1, 0.1]]),
        )
        objectives = (O.pose(model.tip_link, goal),)
        for world in scenes:
            optimizer.warm_up(
                start, objectives, world=world, num_steps=num_steps, margin=margin, exact=False
            )
    # The exact model (the fallback for goals the spheres rule out) after the model's own
    # programs, one scene per turn of the planner: a first plan waits at most one of these.
    for world in scenes[1:] if optimizer.exact is not None else ():
        with planner.turns.background():  # a waiting plan goes first
            optimizer.exact.warm_up(
                start, objectives, world=world, num_steps=num_steps, margin=margin
            )
    return time.perf_counter() - clock


@contextlib.contextmanager
def _turn(planner: Planner, budget: float, start: float) -> Iterator[float]:
    """Holds ``planner`` (one plan or retargeting at a time: they are CPU-bound) for a
    request with ``budget`` (s; 0: none) that started at ``start`` (``time.perf_counter()``),
    and yields what the core may spend of it after the wait (:func:`core_budget`). A wait
    past the budget (the start-up warm-up compiling, a long plan) raises TIMEOUT."""
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(
                planner.turns.request(core_budget(budget, start) if budget > 0 else None)
            )
        except TimeoutError:
            raise responses.planner_busy(budget) from None
        yield core_budget(budget, start)


def plan(
    problem: PlanProblem, log: Callable[[str], None], start: float
) -> tuple[PlanResult, timing.TimedPath]:
    """Plans a PlanTrajectory problem that came at ``start`` (``time.perf_counter()``, its
    budget counted from there) and times the path within its scaled limits."""
    planner = problem.planner
    goal = problem.goal
    log(
        f"plan_trajectory: {problem.num_steps} steps, {problem.world.n_obstacles} obstacles, "
        + ("joint goal" if isinstance(goal, np.ndarray) else f"{len(goal)} goal objectives")
        + (f", {len(problem.waypoints)} waypoints" if problem.waypoints else "")
    )
    with _turn(planner, problem.timeout, start) as budget:
        result = planner.optimizer.plan(
            problem.start,
            goal,
            waypoints=problem.waypoints,
            world=problem.world,
            num_steps=problem.num_steps,
            active_joints=problem.active,
            margin=problem.margin,
            progress=log,
            contacts=problem.contacts,
            start_collision=problem.start_collision,
            timeout=budget,
        )
    timed = timing.parameterize(
        result.path, problem.velocity, problem.acceleration, duration=problem.duration
    )
    return result, timed


def retarget_key(problem: RetargetProblem) -> tuple:
    """What retargeting compiles for: the optimiser's program per (links, vectors, knot
    bucket of the length), the start configuration's IK per weighted links, FK of the path
    per exact length (~0.5 s here: so the key holds the exact number of steps)."""
    weights = problem.link_weights
    weighted = tuple(
        True if weights is None else bool(weights[k] > 0) for k in range(len(problem.links))
    )
    return (problem.links, weighted, problem.vector_pairs, len(problem.keypoints))


def compile_retarget(problem: RetargetProblem) -> None:
    """Compiles what retargeting of ``problem``'s structure needs (the same call with one
    iteration and no budget; not under the planner's lock, so plans go on meanwhile), and
    marks it ready (:meth:`Planner.retarget_ready`). The call runs twice: the second,
    compiling nothing, measures the pace of an iteration, by which the first chunk of a
    budgeted retargeting is cut (with a first chunk of 5 iterations, a 4,096-step
    retargeting with a 2 s budget was answered after 2.27 s here: bench/hostile_input.py,
    case 2g)."""
    planner = problem.planner
    for _ in range(2):
        _run(planner, dataclasses.replace(problem, timeout=0.0), max_iterations=1)
    planner.retarget_compiled(retarget_key(problem))


def _run(planner: Planner, problem: RetargetProblem, **options) -> tuple[PlanResult, np.ndarray]:
    """The core's retarget of ``problem`` (``options``: more of its keyword arguments)."""
    return retarget_motion(
        planner.optimizer,
        problem.links,
        problem.keypoints,
        seed=problem.seed,
        link_weights=problem.link_weights,
        smoothness=problem.smoothness,
        active_joints=problem.active,
        vector_pairs=problem.vector_pairs,
        vector_weight=problem.vector_weight,
        timeout=problem.timeout,
        **options,
    )


def retarget(
    problem: RetargetProblem, log: Callable[[str], None], start: float
) -> tuple[PlanResult, np.ndarray, timing.TimedPath]:
    """Retargets a RetargetMotion problem that came at ``start`` (``time.perf_counter()``,
    its budget counted from there); returns the result, per-step errors and the path sampled
    every ``dt`` s."""
    planner = problem.planner
    log(
        f"retarget_motion: {len(problem.keypoints)} steps x {len(problem.links)} links"
        + (f", {len(problem.vector_pairs)} link-to-link vectors" if problem.vector_pairs else "")
    )
    with _turn(planner, problem.timeout, start) as budget:
        result, errors = _run(planner, dataclasses.replace(problem, timeout=budget))
    planner.retarget_compiled(retarget_key(problem))
    return result, errors, timed_at(result.path, problem.dt)


def timed_at(path: np.ndarray, dt: float) -> timing.TimedPath:
    """A path (T, n) sampled every ``dt`` s: central-difference velocities and
    accelerations."""
    times = dt * np.arange(path.shape[0], dtype=np.float64)
    velocities = np.gradient(path, dt, axis=0)
    accelerations = np.gradient(velocities, dt, axis=0)
    return timing.TimedPath(times, path, velocities, accelerations)
