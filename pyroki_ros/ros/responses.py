"""Core results -> response messages: the outcome codes, each decided here.

requests.py refuses what cannot be solved; after the core ran, this module decides how the
answer reads:

* ``SUCCESS`` / ``NO_SOLUTION`` / ``TIMEOUT``: an IK solve (:func:`solve_ik`; NO_SOLUTION at
  once for a target out of the robot's reach), a batch (:func:`solve_ik_batch`: TIMEOUT when
  its budget ran out between chunks), a first-time compile past the request's budget
  (:func:`compile_timeout`; retargeting: :func:`retarget_compile_timeout`), a plan or
  retargeting that waited for the planner past its budget (:func:`planner_busy`).
* ``COLLISION`` / ``START_IN_COLLISION`` / ``GOAL_IN_COLLISION`` / ``NO_SOLUTION`` (a pose
  goal no IK solution reaches) / ``PLANNING_FAILED`` / ``TIMEOUT``: a plan or a retargeting
  (:func:`plan_code`; retargeting also PLANNING_FAILED past the URDF velocity limits).
* ``BUSY``: too many requests waiting for compiles (:func:`busy`); ``FAILURE``: a bug
  (:func:`failure`).
"""

from __future__ import annotations

import array

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from pyroki_ros.ik import IKResult
from pyroki_ros.msg import ErrorCode
from pyroki_ros.planning import timing
from pyroki_ros.planning.trajopt import (
    GOAL_IN_COLLISION,
    GOAL_UNREACHABLE,
    START_IN_COLLISION,
    TIMED_OUT,
    PlanResult,
)
from pyroki_ros.ros import frames as F
from pyroki_ros.ros.conversions import seconds_to_duration, wxyz_xyz_to_pose
from pyroki_ros.ros.requests import FKProblem, IKProblem, RequestError


def refuse(response, error: RequestError):
    """``response`` carrying ``error`` (success false where the response has it)."""
    response.error_code.val = error.code
    response.message = error.message
    if hasattr(response, "success") and isinstance(response.success, bool):
        response.success = False
    return response


def failure(error: Exception) -> RequestError:
    return RequestError(ErrorCode.FAILURE, f"internal error: {error!r}")


def busy(max_pending_compiles: int) -> RequestError:
    return RequestError(
        ErrorCode.BUSY,
        "too many requests are waiting for new solver programs to compile "
        f"(max_pending_compiles = {max_pending_compiles}): retry shortly",
    )


def compile_timeout(budget: float) -> RequestError:
    return RequestError(
        ErrorCode.TIMEOUT,
        f"the {budget:.3g} s budget ran out while the solver for this objective "
        "combination compiles (its first use; the compile goes on in the "
        "background): retry shortly, or give a longer timeout",
    )


def retarget_compile_timeout(budget: float, steps: int) -> RequestError:
    return RequestError(
        ErrorCode.TIMEOUT,
        f"the {budget:.3g} s budget ran out while the retargeting program for motions of "
        f"{steps} steps with these links compiles (its first use; the compile goes on in the "
        "background): retry shortly, or give a longer timeout",
    )


def plan_timeout(budget: float) -> RequestError:
    return RequestError(
        ErrorCode.TIMEOUT,
        f"the {budget:.3g} s budget ran out before the plan was done: it waited for the "
        "planner (other plans, the start-up warm-up) or compiles (a first plan among a new "
        "kind or number of obstacles compiles for seconds; that goes on in the background): "
        "retry shortly, or give a longer timeout",
    )


def plans_queued(max_pending: int) -> RequestError:
    return RequestError(
        ErrorCode.BUSY,
        f"{max_pending} plans are waiting for the planner already: retry shortly",
    )


def planner_busy(budget: float) -> RequestError:
    return RequestError(
        ErrorCode.TIMEOUT,
        f"the {budget:.3g} s budget ran out while waiting for the planner (one plan or "
        "retargeting at a time; after the node starts, its warm-up compiles the first plans' "
        "programs): retry shortly, or give a longer timeout",
    )


def planning_scene(response):
    """An ApplyPlanningScene response for changes applied (``object_ids`` set)."""
    response.success = True
    response.error_code.val = ErrorCode.SUCCESS
    response.message = ""
    return response


# --- IK and FK -----------------------------------------------------------------------------------


def ik_outcome(model, problem: IKProblem, result: IKResult, elapsed: float) -> tuple[int, str]:
    """(code, message) of one solve that took ``elapsed`` s (its compile included)."""
    if result.success:
        return ErrorCode.SUCCESS, ""
    iterations, timeout = int(result.iterations), problem.timeout
    out_of_reach = model.out_of_reach(problem.objectives, problem.tolerances[0])
    if out_of_reach:  # no time would have helped
        code, message = ErrorCode.NO_SOLUTION, out_of_reach
    elif result.timed_out or (timeout > 0 and elapsed > timeout):
        code = ErrorCode.TIMEOUT
        message = (
            f"no solution within the tolerances in the {timeout:.3g} s budget "
            f"({iterations} iterations); the best configuration found is returned"
        )
    else:
        code = ErrorCode.NO_SOLUTION
        message = (
            f"no solution within the tolerances after {iterations} iterations "
            f"({problem.restarts} restarts allowed); the best configuration found is returned"
        )
    return code, message + (
        f"; errors: position {np.round(result.position_error, 5).tolist()} m, "
        f"orientation {np.round(result.orientation_error, 5).tolist()} rad"
    )


def solve_ik(response, model, problem: IKProblem, result: IKResult, elapsed: float, stamp):
    """Fills a SolveIK response: the solution (the best found, also on failure)."""
    solution = response.solution  # filled in place: no second JointState to build
    solution.header.stamp = stamp
    solution.name = list(model.joint_names)
    solution.position = result.q.tolist()
    response.success = bool(result.success)
    response.error_code.val, response.message = ik_outcome(model, problem, result, elapsed)
    response.position_errors = result.position_error.astype(float).tolist()
    response.orientation_errors = result.orientation_error.astype(float).tolist()
    response.iterations = int(result.iterations)
    response.solve_time = float(result.solve_seconds)
    return response


def solve_ik_batch(response, model, request, result: IKResult, timeout: float, elapsed, stamp):
    """Fills a SolveIKBatch response: packed positions (N x n), plus one JointState per target
    for PoseStamped requests; TIMEOUT when the budget ran out before every target."""
    names = list(model.joint_names)
    q = np.ascontiguousarray(result.q, np.float64)
    response.joint_names = names
    response.positions = array.array("d", q.tobytes())
    if request.targets:  # packed requests get packed answers only
        response.solutions = [
            JointState(header=Header(stamp=stamp), name=names, position=array.array("d", row))
            for row in q
        ]
    response.success = result.success.tolist()
    response.position_errors = result.position_error[:, 0].astype(float).tolist()
    response.orientation_errors = result.orientation_error[:, 0].astype(float).tolist()
    response.solve_time = float(result.solve_seconds)
    solved, count = int(result.success.sum()), len(result.success)
    if result.timed_out or (timeout > 0 and elapsed > timeout):
        response.error_code.val = ErrorCode.TIMEOUT
        response.message = (
            f"the {timeout:.3g} s budget ran out after {elapsed:.3g} s: "
            f"{solved}/{count} targets within tolerance (targets not "
            "reached in time keep the seed, with success false and infinite errors)"
        )
    else:
        response.error_code.val = ErrorCode.SUCCESS
        response.message = "" if solved == count else f"{solved}/{count} targets within tolerance"
    return response


def compute_fk(response, model, problem: FKProblem, poses: np.ndarray, stamp):
    """Fills a ComputeFK response from the frame poses at the state (LoadedModel.fk rows)."""
    to_frame = F.inverse(poses[problem.frame_row])
    for link in problem.links:
        answer = PoseStamped(
            pose=wxyz_xyz_to_pose(F.compose(to_frame, poses[model.link_index[link]]))
        )
        answer.header.frame_id = problem.frame_name
        answer.header.stamp = stamp
        response.poses.append(answer)
    response.link_names = problem.links
    outside = problem.outside
    response.within_limits = not outside
    if outside:
        response.message = (
            f"robot_state is outside the joint limits of {', '.join(outside[:10])}"
            + (f" and {len(outside) - 10} more" if len(outside) > 10 else "")
            + ": the poses are those of exactly this state"
        )
    response.error_code.val = ErrorCode.SUCCESS
    return response


# --- trajectories ------------------------------------------------------------------------------------


def trajectory_message(joint_names, timed: timing.TimedPath, frame_id: str, stamp):
    """A timed path (positions, velocities, accelerations per point) as a JointTrajectory."""
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


def plan_code(result: PlanResult) -> int:
    if result.success:
        return ErrorCode.SUCCESS
    if result.reason == START_IN_COLLISION:
        return ErrorCode.START_IN_COLLISION
    if result.reason == GOAL_IN_COLLISION:
        return ErrorCode.GOAL_IN_COLLISION
    if result.reason == GOAL_UNREACHABLE:
        return ErrorCode.NO_SOLUTION
    if result.reason == TIMED_OUT:
        return ErrorCode.TIMEOUT
    if min(result.min_distance, result.min_self_distance) < 0:
        return ErrorCode.COLLISION
    return ErrorCode.PLANNING_FAILED


def plan(response, model, result: PlanResult, timed: timing.TimedPath, stamp):
    """Fills a PlanTrajectory response (not ``executed`` nor ``solve_time``)."""
    response.trajectory = trajectory_message(model.joint_names, timed, model.base_frame, stamp)
    response.success = bool(result.success)
    response.error_code.val = plan_code(result)
    response.message = (
        result.message if result.success else f"no valid trajectory: {result.message}"
    )
    response.goal_position_errors = result.position_errors.astype(float).tolist()
    response.goal_orientation_errors = result.orientation_errors.astype(float).tolist()
    response.min_obstacle_distance = float(result.min_distance)
    response.executed = False
    return response


def retarget(response, model, result: PlanResult, errors, timed: timing.TimedPath, stamp):
    """Fills a RetargetMotion response (not ``executed`` nor ``solve_time``): a motion past
    the URDF velocity limits at its dt is no success."""
    response.trajectory = trajectory_message(model.joint_names, timed, model.base_frame, stamp)
    response.step_errors = np.asarray(errors).astype(float).tolist()
    over = np.abs(timed.velocities) > model.velocity_limits
    response.success = bool(result.success and not over.any())
    if response.success:
        response.error_code.val = ErrorCode.SUCCESS
    else:
        response.error_code.val = plan_code(result) if result.reason else ErrorCode.PLANNING_FAILED
    if over.any():
        joints = sorted({model.joint_names[j] for j in np.nonzero(over)[1]})
        response.message = (
            f"the motion needs more than the URDF velocity limits of {', '.join(joints)} "
            "at this dt (slow the keypoints down or raise dt)"
        )
    else:
        response.message = result.message
    response.executed = False
    return response
