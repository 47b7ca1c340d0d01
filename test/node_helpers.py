"""Shared by the test_node_*.py files: the Panda they publish (read by the independent
reference), pose messages from transforms (ik_reference's rotation -> quaternion in ROS order,
not the node's own conversions), and the node under test started as a subprocess with a
compile cache shared by the whole test run."""

from __future__ import annotations

import contextlib
import pathlib
from collections.abc import Iterator

import numpy as np
import reference_fk as ref
from geometry_msgs.msg import PoseStamped
from harness import IsolatedNode
from ik_reference import matrix_to_wxyz
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
    """Unit quaternion (ROS order x, y, z, w) of a rotation matrix (ik_reference's)."""
    w, x, y, z = (float(v) for v in matrix_to_wxyz(rot))
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
    more ``name:=value`` parameters. The planner's background warm-up is off unless a
    ``warmup_plan`` parameter is given (30 s of CPU per node here, beside the test's own work);
    without it a test's first plans compile (seconds to tens of seconds here), so the default
    plan budget is 120 s unless a ``planning_timeout`` is given (a plan past its budget answers
    TIMEOUT while it compiles on). The test nodes share one compilation cache, written also
    while serving (``cache_serving_compiles``, off by default) unless the parameter is given,
    so that a later node loads what an earlier one compiled."""
    cache = tmp_path_factory.getbasetemp() / "jax_cache"
    if not any(param.startswith("warmup_plan:=") for param in params):
        params = (*params, "warmup_plan:=false")
    if not any(param.startswith("planning_timeout:=") for param in params):
        params = (*params, "planning_timeout:=120.0")
    if not any(param.startswith("cache_serving_compiles:=") for param in params):
        params = (*params, "cache_serving_compiles:=true")
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


@contextlib.contextmanager
def panda_node(
    tmp_path_factory,
    name: str,
    *,
    state=STATE,
    mimic: bool = True,
    ready_joint: str | None = None,
    **options,
) -> Iterator[IsolatedNode]:
    """:func:`start_node` (``options`` passed on) with this Panda published: its URDF on
    robot_description and ``state`` on /joint_states (with the mimic finger joint too, as real
    drivers send, when ``mimic``); entered once the node answers ~/compute_fk for panda_hand
    (``ready_joint``: with an explicit state, needing no /joint_states). Closed on exit."""
    env = start_node(tmp_path_factory, name, **options)
    try:
        names, positions = list(JOINTS), [float(v) for v in state]
        if mimic:
            names, positions = [*names, "panda_finger_joint2"], [*positions, positions[-1]]
        publish_robot(env.session.node, URDF, names, positions)
        env.wait_ready("panda_hand", joint=ready_joint)
        yield env
    finally:
        env.close()
