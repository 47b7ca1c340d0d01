"""The generated ROS interfaces (msg/, srv/): importable as pyroki_ros.msg / pyroki_ros.srv,
with the fields, defaults and constants the node and its clients rely on, and serialisable.

Needs the environment built by ./setup.sh (rclpy + interfaces compiled into .venv). Skipped only
when rclpy itself is missing; if rclpy is there, the generated code must be too.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

from rclpy.serialization import deserialize_message, serialize_message

from pyroki_ros import msg as pmsg
from pyroki_ros import srv as psrv

REPO = Path(__file__).resolve().parents[1]


def _fields(msg_type) -> dict[str, str]:
    return dict(msg_type.get_fields_and_field_types())


def test_every_interface_file_is_generated():
    for kind, module in (("msg", pmsg), ("srv", psrv)):
        names = sorted(p.stem for p in (REPO / kind).glob(f"*.{kind}"))
        assert names, f"no {kind}/*.{kind} files"
        for name in names:
            assert hasattr(module, name), f"pyroki_ros.{kind}.{name} was not generated/installed"


def test_cmakelists_lists_every_interface_file():
    cmake = (REPO / "CMakeLists.txt").read_text()
    for path in sorted([*REPO.glob("msg/*.msg"), *REPO.glob("srv/*.srv")]):
        rel = path.relative_to(REPO).as_posix()
        assert f'"{rel}"' in cmake, f"{rel} is not listed in CMakeLists.txt"


def test_error_code_constants():
    ec = pmsg.ErrorCode
    assert ec.SUCCESS == 1
    assert pmsg.ErrorCode().val == 0  # unset != SUCCESS
    codes = [
        "NO_SOLUTION",
        "TIMEOUT",
        "INVALID_REQUEST",
        "UNKNOWN_LINK",
        "UNKNOWN_JOINT",
        "UNKNOWN_FRAME",
        "INVALID_POSE",
        "INVALID_JOINT_STATE",
        "REQUEST_TOO_LARGE",
        "NO_ROBOT_MODEL",
        "NO_JOINT_STATE",
        "BUSY",
        "COLLISION",
        "PLANNING_FAILED",
        "EXECUTION_FAILED",
        "FAILURE",
    ]
    values = [getattr(ec, c) for c in codes]
    assert len(set(values)) == len(values), "error codes must be distinct"
    assert ec.SUCCESS not in values and 0 not in values


def test_ik_objective_fields_and_defaults():
    o = pmsg.IKObjective()
    types = [o.POSE, o.POSITION, o.ORIENTATION, o.POINT, o.HINGE, o.PLANE, o.LINE]
    assert len(set(types)) == 7
    assert o.type == o.POSE
    assert o.position_weight == 1.0 and o.orientation_weight == 1.0
    assert _fields(pmsg.IKObjective) == {
        "type": "uint8",
        "link": "string",
        "reference_link": "string",
        "target": "geometry_msgs/PoseStamped",
        "local_point": "geometry_msgs/Point",
        "axis": "geometry_msgs/Vector3",
        "local_axis": "geometry_msgs/Vector3",
        "position_weight": "double",
        "orientation_weight": "double",
    }
    goal = pmsg.MultiLinkGoal(objectives=[o, pmsg.IKObjective(link="panda_hand")])
    assert goal.objectives[1].link == "panda_hand" and hasattr(goal.header, "frame_id")


def test_solve_ik_fields():
    req = psrv.SolveIK.Request()
    assert set(_fields(psrv.SolveIK.Request)) == {
        "objectives",
        "seed",
        "active_joints",
        "max_deviation",
        "position_tolerance",
        "orientation_tolerance",
        "max_restarts",
        "timeout",
        "limit_joints",
        "limit_lower",
        "limit_upper",
        "avoid_collisions",
    }
    assert req.max_restarts == -1  # node default
    assert _fields(psrv.SolveIK.Request)["limit_lower"] == "sequence<double>"
    assert _fields(psrv.SolveIK.Request)["seed"] == "sensor_msgs/JointState"
    assert _fields(psrv.SolveIK.Request)["timeout"] == "builtin_interfaces/Duration"
    assert _fields(psrv.SolveIK.Response) == {
        "solution": "sensor_msgs/JointState",
        "success": "boolean",
        "error_code": "pyroki_ros/ErrorCode",
        "message": "string",
        "position_errors": "sequence<double>",
        "orientation_errors": "sequence<double>",
        "iterations": "int32",
        "solve_time": "double",
    }


def test_batch_fk_plan_retarget_fields():
    assert _fields(psrv.SolveIKBatch.Request) == {
        "link": "string",
        "targets": "sequence<geometry_msgs/PoseStamped, 16384>",
        "packed_frame_id": "string",
        "packed_poses": "sequence<double>",
        "local_point": "geometry_msgs/Point",
        "orientation_weight": "double",
        "seed": "sensor_msgs/JointState",
        "active_joints": "sequence<string>",
        "position_tolerance": "double",
        "orientation_tolerance": "double",
        "timeout": "builtin_interfaces/Duration",
        # per-solve joint limits and the feasibility check, as SolveIK's
        "limit_joints": "sequence<string>",
        "limit_lower": "sequence<double>",
        "limit_upper": "sequence<double>",
        "avoid_collisions": "boolean",
    }
    assert (
        _fields(psrv.SolveIKBatch.Request)["targets"]
        == "sequence<geometry_msgs/PoseStamped, 16384>"
    )
    assert {
        "solutions",
        "success",
        "position_errors",
        "orientation_errors",
        "error_code",
        "message",
        "solve_time",
    } <= set(_fields(psrv.SolveIKBatch.Response))

    assert _fields(psrv.ComputeFK.Request) == {
        "robot_state": "sensor_msgs/JointState",
        "link_names": "sequence<string>",
        "frame_id": "string",
    }
    assert _fields(psrv.ComputeFK.Response) == {
        "poses": "sequence<geometry_msgs/PoseStamped>",
        "link_names": "sequence<string>",
        "within_limits": "boolean",
        "error_code": "pyroki_ros/ErrorCode",
        "message": "string",
    }

    plan = _fields(psrv.PlanTrajectory.Request)
    assert plan["obstacles"] == "sequence<shape_msgs/SolidPrimitive, 4096>"
    assert plan["goal_objectives"] == "sequence<pyroki_ros/IKObjective, 64>"
    assert {
        "start_state",
        "goal_state",
        "waypoints",
        "obstacle_poses",
        "half_spaces",
        "num_steps",
        "duration",
        "velocity_scaling",
        "acceleration_scaling",
        "execute",
    } <= set(plan)
    plan_res = _fields(psrv.PlanTrajectory.Response)
    assert plan_res["trajectory"] == "trajectory_msgs/JointTrajectory"
    assert {
        "success",
        "error_code",
        "message",
        "goal_position_errors",
        "goal_orientation_errors",
        "min_obstacle_distance",
        "solve_time",
    } <= set(plan_res)

    rt = psrv.RetargetMotion.Request()
    assert rt.scale == 1.0
    assert _fields(psrv.RetargetMotion.Request)["steps"] == "sequence<pyroki_ros/Keypoints, 16384>"
    assert rt.vector_weight == 0.0  # 0 = the default weight 1.0
    assert {
        "vector_from_links": "sequence<string>",
        "vector_to_links": "sequence<string>",
        "vector_weight": "double",
    }.items() <= _fields(psrv.RetargetMotion.Request).items()
    assert _fields(psrv.RetargetMotion.Response)["trajectory"] == "trajectory_msgs/JointTrajectory"


def test_round_trip_serialisation():
    """Exercises the compiled C type support, not only the Python classes."""
    from geometry_msgs.msg import Point, PoseStamped
    from shape_msgs.msg import SolidPrimitive

    o = pmsg.IKObjective(type=pmsg.IKObjective.HINGE, link="panda_hand", orientation_weight=0.1)
    o.target.header.frame_id = "panda_link0"
    o.target.pose.position.x = 0.4
    o.axis.z = 1.0
    req = psrv.SolveIK.Request(objectives=[o], active_joints=["panda_joint1"], max_deviation=0.2)
    req.seed.name = ["panda_joint1", "panda_joint2"]
    req.seed.position = [0.1, -0.2]
    req.timeout.nanosec = 50_000_000
    back = deserialize_message(serialize_message(req), psrv.SolveIK.Request)
    assert back == req
    assert back.objectives[0].target.pose.position.x == 0.4

    res = psrv.SolveIK.Response(success=True, position_errors=[1e-4], solve_time=0.002)
    res.error_code.val = pmsg.ErrorCode.SUCCESS
    assert deserialize_message(serialize_message(res), psrv.SolveIK.Response) == res

    plan = psrv.PlanTrajectory.Request(
        obstacles=[SolidPrimitive(type=SolidPrimitive.SPHERE, dimensions=[0.1])],
        num_steps=30,
    )
    plan.obstacle_poses = [PoseStamped()]
    back = deserialize_message(serialize_message(plan), psrv.PlanTrajectory.Request)
    assert back.obstacles[0].dimensions.tolist() == [0.1]

    rt = psrv.RetargetMotion.Request(
        link_names=["panda_hand"],
        steps=[pmsg.Keypoints(points=[Point(x=0.1)])],
        dt=1 / 30,
        vector_from_links=["panda_link4"],
        vector_to_links=["panda_hand"],
        vector_weight=2.5,
    )
    back = deserialize_message(serialize_message(rt), psrv.RetargetMotion.Request)
    assert math.isclose(back.dt, 1 / 30) and back.steps[0].points[0].x == 0.1
    assert list(back.vector_from_links) == ["panda_link4"] and back.vector_weight == 2.5
