"""Shared by the test_node_*.py files: an independent rotation -> quaternion conversion and
pose messages (numpy only, not the node's own conversions), and the node under test started
as a subprocess with a compile cache shared by the whole test run."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import reference_fk as ref
from geometry_msgs.msg import PoseStamped
from harness import IsolatedNode
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from pyroki_ros.robots import urdf_path

CONFIG = pathlib.Path(__file__).resolve().parents[1] / "config" / "panda.yaml"
# The Panda the node tests publish, read by the independent reference (reference_fk.py).
URDF = urdf_path("panda").read_text()
MODEL = ref.parse_urdf(URDF)
JOINTS = ref.actuated_joint_names(MODEL)
LOWER, UPPER = ref.actuated_joint_limits(MODEL)
# What the tests publish on /joint_states (actuated joints + the mimic finger).
STATE = np.array([0.1, -0.6, 0.2, -2.2, 0.1, 1.7, 0.6, 0.02])
LATCHED = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)  # how robot_state_publisher publishes robot_description


def matrix_to_xyzw(rot: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion (ROS order x, y, z, w) of a rotation matrix."""
    w = math.sqrt(max(0.0, 1 + rot[0, 0] + rot[1, 1] + rot[2, 2])) / 2
    x = math.copysign(
        math.sqrt(max(0.0, 1 + rot[0, 0] - rot[1, 1] - rot[2, 2])) / 2, rot[2, 1] - rot[1, 2]
    )
    y = math.copysign(
        math.sqrt(max(0.0, 1 - rot[0, 0] + rot[1, 1] - rot[2, 2])) / 2, rot[0, 2] - rot[2, 0]
    )
    z = math.copysign(
        math.sqrt(max(0.0, 1 - rot[0, 0] - rot[1, 1] + rot[2, 2])) / 2, rot[1, 0] - rot[0, 1]
    )
    return x, y, z, w


def pose_stamped(t: np.ndarray, frame: str = "") -> PoseStamped:
    """A 4x4 transform as a PoseStamped in ``frame``."""
    msg = PoseStamped()
    msg.header.frame_id = frame
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z = (float(v) for v in t[:3, 3])
    o.x, o.y, o.z, o.w = matrix_to_xyzw(t[:3, :3])
    return msg


def start_node(
    tmp_path_factory, name: str, warmup_batch_sizes: str = "[]", params: tuple[str, ...] = ()
) -> IsolatedNode:
    """The real node entry point with config/panda.yaml, in its own ROS domain; ``params``:
    more ``name:=value`` parameters."""
    cache = tmp_path_factory.getbasetemp() / "jax_cache"
    extra = [arg for param in params for arg in ("-p", param)]
    return IsolatedNode(
        name,
        tmp_path_factory.mktemp(name),
        [
            "--params-file",
            str(CONFIG),
            "-p",
            f"compilation_cache_dir:={cache}",
            "-p",
            f"warmup_batch_sizes:={warmup_batch_sizes}",
            *extra,
        ],
    )


def publish_robot(session, urdf: str, names: list[str], positions: list[float]):
    """robot_description (latched) once and /joint_states at 20 Hz, from the test's session
    node. Returns the description publisher."""
    description = session.create_publisher(String, "/robot_description", LATCHED)
    description.publish(String(data=urdf))
    states = session.create_publisher(JointState, "/joint_states", 10)
    session.create_timer(0.05, lambda: states.publish(JointState(name=names, position=positions)))
    return description
