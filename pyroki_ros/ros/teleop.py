"""Teleoperation: the newest goal tracked by velocity-limited IK steps at a fixed rate.

Goals arrive on ``~/goal_pose`` (PoseStamped for the tip link) and ``~/goal`` (MultiLinkGoal),
depth 1: the newest wins. A timer at ``teleop_rate_hz`` (paused while no goal is pending)
solves the newest goal, seeded with the previous output (or /joint_states after
:data:`TELEOP_RESYNC_SECONDS` without one), every joint's step limited to
``velocity_scaling`` x its URDF velocity limit x the step duration, and publishes a one-point
JointTrajectory. A goal is translated once, when first processed: targets given in a link's
frame use that link's pose at that step's start and stay put while the robot moves. A goal
whose solver program is not compiled waits (compiled off this thread); a goal reached, or one
the robot cannot move towards any more, is done.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from pyroki_ros.ros import requests
from pyroki_ros.ros.conversions import seconds_to_duration
from pyroki_ros.ros.model import LoadedModel
from pyroki_ros.ros.params import Settings

# After this long without a teleop output, the next goal starts again from /joint_states.
TELEOP_RESYNC_SECONDS = 1.0
# Largest joint motion (rad or m) of a step that still counts as moving (else: stuck).
STUCK = 1e-7


def step(model: LoadedModel, objectives, start: np.ndarray, step_limit: np.ndarray, settings):
    """One velocity-limited step from ``start`` (n,) towards the objectives: the solve stays in
    the box ``|q - start| <= step_limit`` (n,), and the answer is clamped to it and into the
    limits again. Returns (q, reached, IKResult)."""
    cfg = settings.solve
    result = model.solve(
        objectives,
        start,
        active=model.moving_joints(objectives),
        max_deviation=step_limit,
        tolerances=(cfg.position_tolerance, cfg.orientation_tolerance),
        iterations=cfg.max_iterations,
        restarts=0,
    )
    q = start + np.clip(result.q - start, -step_limit, step_limit)
    return model.robot.limits.clip(q), bool(result.success), result


class Teleop:
    """The teleop state machine of a node.

    Args:
        node: the rclpy node (its timer, clock-free logging).
        current: () -> (model or None, model generation), read under the node's model lock.
        settings: () -> the node's Settings now.
        latest: () -> the latest /joint_states positions {name: value}.
        compile: (model, objectives, seed) -> None: compiles their program off this thread.
        publish: sends a JointTrajectory on the trajectory topic.
        markers: the node's markers (``teleop_step``).
        callback_group: the timer's.
    """

    def __init__(
        self,
        node,
        current: Callable[[], tuple[LoadedModel | None, int]],
        settings: Callable[[], Settings],
        latest: Callable[[], dict[str, float]],
        compile: Callable,
        publish: Callable[[JointTrajectory], None],
        markers,
        callback_group=None,
    ):
        self._logger = node.get_logger()
        self._current, self._settings, self._latest = current, settings, latest
        self._compile, self._publish, self._markers = compile, publish, markers
        self._lock = threading.Lock()
        self._goal = None  # PoseStamped | MultiLinkGoal
        self._seq = 0  # goals received
        self._done_seq = 0  # goals up to this one are finished
        self._command: tuple[np.ndarray, float, int] | None = None  # q, time, model generation
        self._translated: tuple | None = None  # (goal seq, model generation, objectives)
        self._timer = node.create_timer(
            1.0 / settings().teleop_rate_hz, self.tick, callback_group=callback_group
        )

    def on_goal(self, msg) -> None:
        """A new goal (the newest wins); wakes the paused timer."""
        with self._lock:
            self._goal = msg
            self._seq += 1
            if self._timer.is_canceled():  # paused while there was nothing to do
                self._timer.reset()

    def reset(self) -> None:
        """A new model: goals for the old robot are void."""
        with self._lock:
            self._goal, self._done_seq, self._command = None, self._seq, None

    def tick(self) -> None:
        try:
            self._tick()
        except Exception:  # noqa: BLE001 -- an exception would stop the executor: log, go on
            import traceback

            self._logger.error(f"teleop: internal error: {traceback.format_exc()}")

    def _warn(self, text: str) -> None:
        self._logger.warning(text, throttle_duration_sec=5.0)

    def _finish(self, seq: int) -> None:
        with self._lock:
            self._done_seq = max(self._done_seq, seq)

    def _tick(self) -> None:
        with self._lock:
            goal, seq, command = self._goal, self._seq, self._command
            if goal is None or seq == self._done_seq:
                # Nothing to track: pause the timer (an idle tick costs ~2 ms of executor
                # work, competing with service requests); the next goal restarts it.
                self._timer.cancel()
                return
        model, generation = self._current()
        if model is None:
            self._warn("teleop goal waits: no robot model loaded yet")
            return
        settings = self._settings()
        start = self._start(model, generation, command, settings)
        if start is None:
            return
        objectives = self._objectives(model, generation, goal, seq, start, settings)
        if objectives is None:
            return
        if not model.is_compiled(objectives, start):
            # Never compile on this thread: the goal waits (ticks go on) until it is done.
            self._compile(model, objectives, start)
            self._warn("teleop goal waits: compiling the solver for it")
            return
        dt = 1.0 / settings.teleop_rate_hz
        step_limit = settings.velocity_scaling * model.velocity_limits * dt
        try:
            q, reached, result = step(model, objectives, start, step_limit, settings)
        except Exception as e:  # noqa: BLE001
            self._logger.error(f"teleop step failed, goal dropped: {e!r}")
            self._finish(seq)
            return
        moved = float(np.max(np.abs(q - start))) if len(q) else 0.0
        trajectory = JointTrajectory(joint_names=list(model.joint_names))
        trajectory.points = [
            JointTrajectoryPoint(positions=q.tolist(), time_from_start=seconds_to_duration(dt))
        ]
        # header.stamp stays zero: "start now" for joint_trajectory_controller.
        self._publish(trajectory)
        self._markers.teleop_step(model, objectives, q)
        with self._lock:
            if self._current()[1] == generation:
                self._command = (q, time.monotonic(), generation)
        if reached:
            self._finish(seq)
        elif moved < STUCK:
            self._logger.warning(
                "teleop goal not reachable from here (stuck); best errors: position "
                f"{np.round(result.position_error, 4).tolist()} m, orientation "
                f"{np.round(result.orientation_error, 4).tolist()} rad",
                throttle_duration_sec=2.0,
            )
            self._finish(seq)

    def _start(self, model, generation: int, command, settings: Settings) -> np.ndarray | None:
        """Where this step starts: the last output, or /joint_states after a pause."""
        now = time.monotonic()
        if (
            command is not None
            and command[2] == generation
            and now - command[1] < (TELEOP_RESYNC_SECONDS)
        ):
            return command[0]
        latest = self._latest()
        if not latest:
            self._warn(f"teleop goal waits for the first message on {settings.joint_states_topic}")
            return None
        return requests.seed(model, None, latest, "joint_states")

    def _objectives(self, model, generation: int, goal, seq: int, start, settings: Settings):
        """The goal's objectives, translated when first processed (None: dropped)."""
        cached = self._translated
        if cached is not None and cached[0] == seq and cached[1] == generation:
            return cached[2]
        try:
            objectives = requests.goal(model, goal, model.frames_at(start), settings.limits)
        except requests.RequestError as e:
            self._logger.warning(f"teleop goal dropped: {e.message}")
            self._finish(seq)
            return None
        self._translated = (seq, generation, objectives)
        return objectives
