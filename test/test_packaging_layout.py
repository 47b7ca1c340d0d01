"""Package layout: manifest, parameter files, launch file, entry points, editable install."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENV = REPO / ".venv"
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


def _fake_launch_modules(monkeypatch, installed=("pyroki_ros", "robot_state_publisher")):
    """Just enough of launch / launch_ros / ament_index_python to evaluate the launch file;
    ``installed``: the packages the fake ament index knows (share folder: this checkout)."""

    class Action:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class LaunchConfiguration:
        def __init__(self, name):
            self.name = name

        def perform(self, context):
            return context[self.name]

    def share(package: str) -> str:
        if package not in installed:
            raise KeyError(package)  # as ament_index_python's PackageNotFoundError
        return str(REPO)

    fakes = {
        "launch": {"LaunchDescription": lambda actions: list(actions)},
        "launch.actions": {"DeclareLaunchArgument": Action, "OpaqueFunction": Action},
        "launch.substitutions": {"LaunchConfiguration": LaunchConfiguration},
        "launch_ros": {},
        "launch_ros.actions": {"Node": Action},
        "ament_index_python": {},
        "ament_index_python.packages": {"get_package_share_directory": share},
    }
    for name, attrs in fakes.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)


def _launch_setup(monkeypatch, **fake_kwargs):
    """The launch file's setup function (given a context dict) and its argument defaults."""
    _fake_launch_modules(monkeypatch, **fake_kwargs)
    spec = importlib.util.spec_from_file_location(
        "pyroki_launch", REPO / "launch" / "pyroki_ros.launch.py"
    )
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)

    actions = launch_file.generate_launch_description()
    defaults = {a.args[0]: a.kwargs["default_value"] for a in actions if a.args}
    opaque = [a for a in actions if "function" in a.kwargs]
    assert len(opaque) == 1
    return opaque[0].kwargs["function"], defaults


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_launch_file(monkeypatch, robot):
    setup, defaults = _launch_setup(monkeypatch)
    assert {"robot", "urdf_file", "config_file", "namespace", "log_level"} <= set(defaults)
    assert defaults["use_robot_state_publisher"] == "auto"  # installed here: used

    context = {**defaults, "robot": robot}
    rsp, node = setup(context)
    assert rsp.kwargs["package"] == "robot_state_publisher"
    description = rsp.kwargs["parameters"][0]["robot_description"]
    assert "<robot" in description and ROBOTS[robot][1] in description
    assert node.kwargs["package"] == "pyroki_ros"
    assert node.kwargs["executable"] == "pyroki_ros_node"
    assert node.kwargs["name"] == "pyroki_ros_node"  # matches the yaml's top-level key
    assert Path(node.kwargs["parameters"][0]) == REPO / "config" / f"{robot}.yaml"

    assert node.kwargs["parameters"][1] == {"use_sim_time": False}  # the topic, not a file
    assert node.kwargs["namespace"] is None and not node.kwargs["remappings"]
    assert node.kwargs["ros_arguments"] == ["--log-level", "info"]

    urdf = REPO / "pyroki_ros" / "robots" / "ur5.urdf"
    context.update(urdf_file=str(urdf), config_file="/tmp/custom.yaml")
    rsp, node = setup(context)
    assert rsp.kwargs["parameters"][0]["robot_description"] == urdf.read_text()
    assert node.kwargs["parameters"][0] == "/tmp/custom.yaml"


def test_launch_file_without_robot_state_publisher(monkeypatch):
    # not installed (the venv: not on PyPI): auto runs the node alone, which loads the URDF
    # and publishes robot_description in robot_state_publisher's place
    setup, defaults = _launch_setup(monkeypatch, installed=("pyroki_ros",))
    (node,) = setup({**defaults, "robot": "ur5"})
    assert node.kwargs["executable"] == "pyroki_ros_node"
    config, overrides = node.kwargs["parameters"]
    assert Path(config) == REPO / "config" / "ur5.yaml"
    assert Path(overrides.pop("urdf_file")) == REPO / "pyroki_ros" / "robots" / "ur5.urdf"
    assert overrides == {"use_sim_time": False, "publish_robot_description": True}
    with pytest.raises(RuntimeError, match="not installed"):
        setup({**defaults, "use_robot_state_publisher": "true"})
    with pytest.raises(ValueError, match="auto, true or false"):
        setup({**defaults, "use_robot_state_publisher": "maybe"})

    # installed but not wanted
    setup, defaults = _launch_setup(monkeypatch)
    (node,) = setup({**defaults, "use_robot_state_publisher": "False"})
    assert node.kwargs["parameters"][1]["publish_robot_description"] is True


def test_launch_file_namespace_and_log_level(monkeypatch):
    yaml = pytest.importorskip("yaml")
    setup, defaults = _launch_setup(monkeypatch)
    rsp, node = setup({**defaults, "namespace": "/arm1/", "log_level": "debug"})
    for action in (rsp, node):
        assert action.kwargs["namespace"] == "arm1"
        assert action.kwargs["ros_arguments"] == ["--log-level", "debug"]
    # the file's `pyroki_ros_node:` key would not match /arm1/pyroki_ros_node: a dict instead
    config = yaml.safe_load((REPO / "config" / "panda.yaml").read_text())
    assert node.kwargs["parameters"][0] == config["pyroki_ros_node"]["ros__parameters"]
    # the configs' absolute topics follow robot_state_publisher's relative ones into arm1
    remapped = dict(node.kwargs["remappings"])
    for topic in ("robot_description_topic", "joint_states_topic", "trajectory_topic"):
        name = config["pyroki_ros_node"]["ros__parameters"][topic]
        assert remapped[name] == name.lstrip("/"), topic


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


def _setup_venv() -> Path:
    if Path(sys.prefix).resolve() != VENV.resolve():
        pytest.skip("not running in the venv of ./setup.sh")
    return VENV


def test_venv_is_an_ament_prefix():
    """./setup.sh step 5: what launch_ros and ament_index_python look for, as colcon lays it out
    (test_packaging_colcon.py checks the colcon install)."""
    venv = _setup_venv()
    assert (venv / "share/ament_index/resource_index/packages/pyroki_ros").is_file()
    share = venv / "share" / "pyroki_ros"
    assert (share / "package.xml").read_text() == (REPO / "package.xml").read_text()
    for rel in ("launch/pyroki_ros.launch.py", "config/panda.yaml", "config/ur5.yaml"):
        assert (share / rel).read_text() == (REPO / rel).read_text(), rel  # this checkout's
    # `ros2 launch pyroki_ros pyroki_ros.launch.py` finds the file by os.walk over the share
    # folder (ros2launch), which does not enter linked folders.
    walked = {name for _, _, names in os.walk(share) for name in names}
    assert {"pyroki_ros.launch.py", "panda.yaml", "ur5.yaml"} <= walked
    # launch_ros' Node(package=, executable=): <prefix>/lib/<package>/<executable>
    executable = venv / "lib" / "pyroki_ros" / "pyroki_ros_node"
    assert executable.is_file() and os.access(executable, os.X_OK)
    assert executable.resolve() == (venv / "bin" / "pyroki_ros_node").resolve()

    check = (
        "from ament_index_python.packages import get_package_prefix as p, "
        "get_package_share_directory as s; print(p('pyroki_ros'), s('pyroki_ros'))"
    )
    clean = {k: v for k, v in os.environ.items() if k not in ("AMENT_PREFIX_PATH", "VIRTUAL_ENV")}
    # as bin/activate sets it, and with none at all (the venv's .pth sets it)
    for env in ({**clean, "AMENT_PREFIX_PATH": str(venv)}, clean):
        out = subprocess.run(
            [sys.executable, "-c", check],
            env=env,
            cwd="/",
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        assert out.split() == [str(venv), str(share)], env.get("AMENT_PREFIX_PATH")


def test_venv_activation_sets_ament_prefix_path():
    venv = _setup_venv()
    script = (
        'echo "[${AMENT_PREFIX_PATH-unset}]"; . "$1/bin/activate"; echo "[$AMENT_PREFIX_PATH]"; '
        '. "$1/bin/activate"; echo "[$AMENT_PREFIX_PATH]"; '
        'deactivate; echo "[${AMENT_PREFIX_PATH-unset}]"'
    )
    for before in (None, "/opt/ros/kilted"):
        env = {"PATH": "/usr/bin:/bin", **({"AMENT_PREFIX_PATH": before} if before else {})}
        out = subprocess.run(
            ["bash", "-c", script, "bash", str(venv)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
        active = f"[{venv}:{before}]" if before else f"[{venv}]"
        restored = f"[{before or 'unset'}]"
        assert out == [restored, active, active, restored]  # twice: not added twice
