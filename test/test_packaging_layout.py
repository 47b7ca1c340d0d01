"""Package layout: manifest, parameter files, launch file, entry points, editable install."""

from __future__ import annotations

import importlib.util
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROBOTS = {"panda": ("panda_link0", "panda_hand"), "ur5": ("base_link", "tool0")}


def _urdf_links(robot: str) -> set[str]:
    root = ET.parse(REPO / "pyroki_ros" / "robots" / f"{robot}.urdf").getroot()
    return {link.get("name") for link in root.iter("link")}


def test_package_xml():
    root = ET.parse(REPO / "package.xml").getroot()
    assert root.get("format") == "3"
    assert root.findtext("name") == "pyroki_ros"
    assert root.find("export").findtext("build_type") == "ament_cmake"
    assert root.findtext("member_of_group") == "rosidl_interface_packages"
    deps = {e.text for e in root if e.tag.endswith("depend")}
    for dep in (
        "rclpy",
        "std_msgs",
        "geometry_msgs",
        "sensor_msgs",
        "trajectory_msgs",
        "shape_msgs",
        "builtin_interfaces",
        "rosidl_default_generators",
        "rosidl_default_runtime",
    ):
        assert dep in deps, dep
    assert (REPO / "resource" / "pyroki_ros").is_file()  # ament index marker for setup.py


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_config_files(robot):
    path = REPO / "config" / f"{robot}.yaml"
    rclpy_parameter = pytest.importorskip("rclpy.parameter")
    # the same parser the node uses for --params-file (rcl_yaml_param_parser rules)
    params = rclpy_parameter.parameter_dict_from_yaml_file(
        str(path), target_nodes=["/pyroki_ros_node"]
    )
    values = {
        name: rclpy_parameter.parameter_value_to_python(p.value) for name, p in params.items()
    }
    base, tip = ROBOTS[robot]
    assert values["base_frame"] == base and values["tip_link"] == tip
    if (REPO / "pyroki_ros" / "robots" / f"{robot}.urdf").is_file():
        assert {base, tip} <= _urdf_links(robot)
    assert values["position_tolerance"] == pytest.approx(1e-3)
    assert values["orientation_tolerance"] == pytest.approx(0.01745)
    assert values["trajectory_topic"] == "/joint_trajectory_controller/joint_trajectory"
    assert values["device"] == "auto"
    # ROS parameters are typed: a float written as "1" would be declared as an integer
    for key in (
        "position_tolerance",
        "orientation_tolerance",
        "teleop_rate_hz",
        "velocity_scaling",
    ):
        assert isinstance(values[key], float), key
    assert isinstance(values["max_iterations"], int) and isinstance(values["restarts"], int)
    for key in (
        "robot_description_topic",
        "max_iterations",
        "restarts",
        "teleop_rate_hz",
        "velocity_scaling",
    ):
        assert key in values, key


def _fake_launch_modules(monkeypatch):
    """Just enough of launch / launch_ros / ament_index_python to evaluate the launch file."""

    class Action:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return context[self.name]

    fakes = {
        "launch": {"LaunchDescription": lambda actions: list(actions)},
        "launch.actions": {"DeclareLaunchArgument": Action, "OpaqueFunction": Action},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Action},
        "ament_index_python": {},
        "ament_index_python.packages": {"get_package_share_directory": lambda pkg: str(REPO)},
    }
    for name, attrs in fakes.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_launch_file(monkeypatch, robot):
    _fake_launch_modules(monkeypatch)
    spec = importlib.util.spec_from_file_location(
        "pyroki_launch", REPO / "launch" / "pyroki_ros.launch.py"
    )
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)

    actions = launch_file.generate_launch_description()
    defaults = {a.args[0]: a.kwargs["default_value"] for a in actions if a.args}
    assert {"robot", "urdf_file", "config_file"} <= set(defaults)
    opaque = [a for a in actions if "function" in a.kwargs]
    assert len(opaque) == 1

    context = {**defaults, "robot": robot}
    rsp, node = opaque[0].kwargs["function"](context)
    assert rsp.kwargs["package"] == "robot_state_publisher"
    description = rsp.kwargs["parameters"][0]["robot_description"]
    assert "<robot" in description and ROBOTS[robot][1] in description
    assert node.kwargs["package"] == "pyroki_ros"
    assert node.kwargs["executable"] == "pyroki_ros_node"
    assert node.kwargs["name"] == "pyroki_ros_node"  # matches the yaml's top-level key
    assert Path(node.kwargs["parameters"][0]) == REPO / "config" / f"{robot}.yaml"

    urdf = REPO / "pyroki_ros" / "robots" / "ur5.urdf"
    context.update(urdf_file=str(urdf), config_file="/tmp/custom.yaml")
    rsp, node = opaque[0].kwargs["function"](context)
    assert rsp.kwargs["parameters"][0]["robot_description"] == urdf.read_text()
    assert node.kwargs["parameters"][0] == "/tmp/custom.yaml"


def test_entry_points():
    from importlib import metadata

    try:
        dist = metadata.distribution("pyroki_ros")
    except metadata.PackageNotFoundError:
        pytest.skip("pyroki_ros is not pip-installed (run ./setup.sh)")
    scripts = {ep.name: ep.value for ep in dist.entry_points if ep.group == "console_scripts"}
    assert scripts == {
        "pyroki-ros": "pyroki_ros.cli:main",
        "pyroki_ros_node": "pyroki_ros.ros.node:main",
    }
    core = [r for r in dist.requires or [] if "extra ==" not in r]
    assert core and not [r for r in core if "ros" in r.lower()], core  # core needs no ROS


def test_editable_install_uses_the_source_tree():
    """./setup.sh: the source package wins over the generated code's site-packages folder."""
    import pyroki_ros

    assert Path(pyroki_ros.__file__).resolve() == REPO / "pyroki_ros" / "__init__.py"
    try:
        import pyroki_ros.srv
    except ImportError:
        pytest.skip("generated interfaces not installed (run ./setup.sh)")
    generated = Path(pyroki_ros.srv.__file__).resolve().parents[1]
    assert generated != REPO / "pyroki_ros"
    assert str(generated) in [str(Path(p).resolve()) for p in pyroki_ros.__path__]
    # PYROKI_ROS_INSTALL_PYTHON=OFF removed the generated __init__.py (namespace portion)
    assert not (generated / "__init__.py").exists()
