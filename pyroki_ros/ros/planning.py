"""~/plan_trajectory and ~/retarget_motion: the trajectory optimiser of a loaded model.

requests.py turns a request into a :class:`~pyroki_ros.ros.requests.PlanProblem` /
:class:`~pyroki_ros.ros.requests.RetargetProblem`; this module runs it on the model's
:class:`Planner` (one plan at a time per model) and times the path; responses.py answers.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.planning import timing
from pyroki_ros.planning.trajopt import PlanResult, TrajectoryOptimizer
from pyroki_ros.planning.trajopt import retarget as retarget_motion
from pyroki_ros.robots import AVAILABLE
from pyroki_ros.ros.model import LoadedModel
from pyroki_ros.ros.requests import PlanProblem, RetargetProblem


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
    """The trajectory optimiser of one loaded model."""

    def __init__(self, model: LoadedModel, collision_spheres: str):
        self.model = model
        spheres, self.note = load_spheres(model, collision_spheres)
        self.optimizer = TrajectoryOptimizer(
            model.robot, spheres, device=model.device.platform, max_programs=model.max_programs
        )
        self.lock = threading.Lock()  # one plan at a time per model: plans are CPU-bound


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


def plan(problem: PlanProblem, log: Callable[[str], None]) -> tuple[PlanResult, timing.TimedPath]:
    """Plans a PlanTrajectory problem and times the path within its scaled limits."""
    planner = problem.planner
    goal = problem.goal
    log(
        f"plan_trajectory: {problem.num_steps} steps, {problem.world.n_obstacles} obstacles, "
        + ("joint goal" if isinstance(goal, np.ndarray) else f"{len(goal)} goal objectives")
        + (f", {len(problem.waypoints)} waypoints" if problem.waypoints else "")
    )
    with planner.lock:
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
            timeout=problem.timeout,
        )
    timed = timing.parameterize(
        result.path, problem.velocity, problem.acceleration, duration=problem.duration
    )
    return result, timed


def retarget(
    problem: RetargetProblem, log: Callable[[str], None]
) -> tuple[PlanResult, np.ndarray, timing.TimedPath]:
    """Retargets a RetargetMotion problem; returns the result, per-step errors and the path
    sampled every ``dt`` s."""
    planner = problem.planner
    log(
        f"retarget_motion: {len(problem.keypoints)} steps x {len(problem.links)} links"
        + (f", {len(problem.vector_pairs)} link-to-link vectors" if problem.vector_pairs else "")
    )
    with planner.lock:
        result, errors = retarget_motion(
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
        )
    return result, errors, timed_at(result.path, problem.dt)


def timed_at(path: np.ndarray, dt: float) -> timing.TimedPath:
    """A path (T, n) sampled every ``dt`` s: central-difference velocities and
    accelerations."""
    times = dt * np.arange(path.shape[0], dtype=np.float64)
    velocities = np.gradient(path, dt, axis=0)
    accelerations = np.gradient(velocities, dt, axis=0)
    return timing.TimedPath(times, path, velocities, accelerations)
