"""pyroki_ros_node (+ robot_state_publisher where installed), for any ROS 2 install that has
launch and launch_ros: a colcon workspace, or the venv of ./setup.sh (an ament prefix).

    ros2 launch pyroki_ros pyroki_ros.launch.py                       # bundled Panda
    ros2 launch pyroki_ros pyroki_ros.launch.py robot:=ur5            # bundled UR5
    ros2 launch pyroki_ros pyroki_ros.launch.py urdf_file:=/path/my_robot.urdf \\
        config_file:=/path/my_robot.yaml
    ros2 launch pyroki_ros pyroki_ros.launch.py use_robot_state_publisher:=false \\
        namespace:=arm1 log_level:=debug

use_robot_state_publisher:
  true   robot_state_publisher publishes the URDF on robot_description (transient local), which
         the node subscribes to (parameter robot_description_topic), and the link TFs from
         joint_states;
  false  the node loads the URDF file itself and publishes robot_description (latched) for
         others; no TFs;
  auto   (default) true when robot_state_publisher is installed: it is not on PyPI, so from
         the venv of ./setup.sh this is false.
namespace: both nodes run in it, and the absolute default topics of config/*.yaml
(/robot_description, /joint_states, the trajectory topic) are remapped into it, as
robot_state_publisher's relative ones are. log_level: both nodes' (debug, info, warn, ...).

Without launch_ros, start the node the same way by hand (from this repository's root):
    .venv/bin/pyroki_ros_node --ros-args --params-file config/panda.yaml -p urdf_file:=panda
"""

import importlib.util
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "pyroki_ros"
NODE = "pyroki_ros_node"
# Absolute topic names of config/*.yaml; with a namespace they move into it.
DEFAULT_TOPICS = (
    "/robot_description",
    "/joint_states",
    "/joint_trajectory_controller/joint_trajectory",
)
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def bundled_urdf(robot: str) -> str:
    """Path of pyroki_ros/robots/<robot>.urdf, found without importing pyroki_ros (no JAX)."""
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = os.path.join(folder, "robots", f"{robot}.urdf")
        if os.path.isfile(path):
            return path
    raise RuntimeError(
        f"no bundled URDF for robot '{robot}' in {folders}; pass urdf_file:=/path/to/robot.urdf"
    )


def robot_state_publisher_installed() -> bool:
    """robot_state_publisher is in the ament index (AMENT_PREFIX_PATH)."""
    try:
        get_package_share_directory("robot_state_publisher")
    except (LookupError, OSError):  # PackageNotFoundError; OSError: no AMENT_PREFIX_PATH
        return False
    return True


def use_robot_state_publisher(value: str) -> bool:
    value = value.strip().lower()
    if value == "auto":
        return robot_state_publisher_installed()
    if value in TRUE:
        if not robot_state_publisher_installed():
            raise RuntimeError(
                "use_robot_state_publisher:=true but robot_state_publisher is not installed "
                "(it is not on PyPI); use use_robot_state_publisher:=false or auto"
            )
        return True
    if value in FALSE:
        return False
    raise ValueError(f"use_robot_state_publisher must be auto, true or false, not '{value}'")


def node_parameters(config_file: str, namespace: str) -> str | dict:
    """The config file; in a namespace its parameters as a dict, since the file's top-level
    key `pyroki_ros_node` would not match the node's name there (/<namespace>/pyroki_ros_node)."""
    if not namespace:
        return config_file
    import yaml  # a dependency of launch

    with open(config_file, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    params: dict = {}
    for key in ("/**", NODE, f"/{NODE}", f"{namespace}/{NODE}", f"/{namespace}/{NODE}"):
        params.update((data.get(key) or {}).get("ros__parameters") or {})
    return params


def _launch_setup(context, *args, **kwargs):
    robot = LaunchConfiguration("robot").perform(context)
    urdf_file = LaunchConfiguration("urdf_file").perform(context) or bundled_urdf(robot)
    config_file = LaunchConfiguration("config_file").perform(context) or os.path.join(
        get_package_share_directory(PACKAGE), "config", f"{robot}.yaml"
    )
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in TRUE
    with_rsp = use_robot_state_publisher(
        LaunchConfiguration("use_robot_state_publisher").perform(context)
    )
    namespace = LaunchConfiguration("namespace").perform(context).strip("/")
    ros_arguments = ["--log-level", LaunchConfiguration("log_level").perform(context)]
    remappings = [(topic, topic.lstrip("/")) for topic in DEFAULT_TOPICS] if namespace else []

    actions = []
    overrides: dict = {"use_sim_time": use_sim_time}
    if with_rsp:
        with open(urdf_file, encoding="utf-8") as f:
            robot_description = f.read()
        actions.append(
            Node(
                package="robot_state_publisher",
                executable="robot_state_publisher",
                name="robot_state_publisher",
                namespace=namespace or None,
                output="screen",
                parameters=[{"robot_description": robot_description, "use_sim_time": use_sim_time}],
                ros_arguments=ros_arguments,
            )
        )
    else:  # the node reads the file and publishes robot_description in its place
        overrides.update(urdf_file=urdf_file, publish_robot_description=True)
    actions.append(
        Node(
            package=PACKAGE,
            executable=NODE,
            name=NODE,
            namespace=namespace or None,
            output="screen",
            parameters=[node_parameters(config_file, namespace), overrides],
            remappings=remappings,
            ros_arguments=ros_arguments,
        )
    )
    return actions


def generate_launch_description():
    return LaunchDescription(
        [
            DeclareLaunchArgument(
                "robot",
                default_value="panda",
                description="bundled robot (panda, ur5): default URDF and config file",
            ),
            DeclareLaunchArgument(
                "urdf_file",
                default_value="",
                description="URDF file (empty: bundled <robot>.urdf)",
            ),
            DeclareLaunchArgument(
                "config_file",
                default_value="",
                description="node parameters file (empty: share/pyroki_ros/config/<robot>.yaml)",
            ),
            DeclareLaunchArgument(
                "use_robot_state_publisher",
                default_value="auto",
                description="true: robot_state_publisher publishes the URDF and TFs; false: the "
                "node loads the URDF and publishes robot_description itself; auto: true when "
                "robot_state_publisher is installed",
            ),
            DeclareLaunchArgument("namespace", default_value="", description="of both nodes"),
            DeclareLaunchArgument(
                "log_level", default_value="info", description="debug, info, warn, error, fatal"
            ),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
            OpaqueFunction(function=_launch_setup),
        ]
    )
