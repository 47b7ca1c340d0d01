"""robot_state_publisher + pyroki_ros_node, for a regular ROS 2 install (launch, launch_ros).

    ros2 launch pyroki_ros pyroki_ros.launch.py                       # bundled Panda
    ros2 launch pyroki_ros pyroki_ros.launch.py robot:=ur5            # bundled UR5
    ros2 launch pyroki_ros pyroki_ros.launch.py urdf_file:=/path/my_robot.urdf \\
        config_file:=/path/my_robot.yaml

robot_state_publisher publishes the URDF on /robot_description (transient local), which the node
subscribes to (parameter robot_description_topic), and the link TFs from /joint_states.
Without launch_ros (e.g. the pip-only venv) start the node the same way by hand:
    pyroki_ros_node --ros-args --params-file config/panda.yaml
"""

import importlib.util
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "pyroki_ros"


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


def _launch_setup(context, *args, **kwargs):
    robot = LaunchConfiguration("robot").perform(context)
    urdf_file = LaunchConfiguration("urdf_file").perform(context) or bundled_urdf(robot)
    config_file = LaunchConfiguration("config_file").perform(context) or os.path.join(
        get_package_share_directory(PACKAGE), "config", f"{robot}.yaml"
    )
    use_sim_time = LaunchConfiguration("use_sim_time").perform(context).lower() in ("1", "true")
    with open(urdf_file, encoding="utf-8") as f:
        robot_description = f.read()

    return [
        Node(
            package="robot_state_publisher",
            executable="robot_state_publisher",
            name="robot_state_publisher",
            output="screen",
            parameters=[{"robot_description": robot_description, "use_sim_time": use_sim_time}],
        ),
        Node(
            package=PACKAGE,
            executable="pyroki_ros_node",
            name="pyroki_ros_node",
            output="screen",
            parameters=[config_file, {"use_sim_time": use_sim_time}],
        ),
    ]


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
                description="URDF file for robot_state_publisher (empty: bundled <robot>.urdf)",
            ),
            DeclareLaunchArgument(
                "config_file",
                default_value="",
                description="node parameters file (empty: share/pyroki_ros/config/<robot>.yaml)",
            ),
            DeclareLaunchArgument("use_sim_time", default_value="false", description="use /clock"),
            OpaqueFunction(function=_launch_setup),
        ]
    )
