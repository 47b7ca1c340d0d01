"""`colcon build` of the repository as a ROS 2 package, from PyPI tools only (slow, opt-in).

    PYROKI_TEST_COLCON=1 .venv/bin/python -m pytest -q test/test_packaging_colcon.py

Creates a venv with colcon + the pinned requirements (reuse one with
PYROKI_TEST_COLCON_VENV=/path/to/venv), copies the repo into <tmp>/ws/src/pyroki_ros, runs a plain
`colcon build`, then checks the install tree: the Python package with the generated interfaces,
install/setup.bash, and the executables started without sourcing anything.
Measured on 2 busy cores: ~2 min for the venv, ~4 min for the build.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("PYROKI_TEST_COLCON") != "1",
    reason="opt-in: set PYROKI_TEST_COLCON=1 (colcon build, several minutes)",
)

REPO = Path(__file__).resolve().parents[1]
COLCON = ["colcon-core==0.19.0", "colcon-ros==0.5.0", "colcon-cmake==0.2.30", "colcon-bash==0.5.0"]
IGNORE = shutil.ignore_patterns(
    ".venv",
    "build",
    "install",
    "log",
    ".git",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".benchmarks",
    "*.egg-info",
)
# variables that would make the build or the checks see another environment
LEAKY = (
    "AMENT_PREFIX_PATH",
    "CMAKE_PREFIX_PATH",
    "COLCON_PREFIX_PATH",
    "PYTHONPATH",
    "LD_LIBRARY_PATH",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
    "VIRTUAL_ENV",
    "PYTHONHOME",
)


def _run(cmd, *, timeout, **kwargs):
    proc = subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=timeout, **kwargs
    )
    assert proc.returncode == 0, (
        f"{cmd} -> {proc.returncode}\n--- stdout (tail)\n{proc.stdout[-6000:]}\n"
        f"--- stderr (tail)\n{proc.stderr[-6000:]}"
    )
    return proc


def _clean_env(tmp_path: Path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in LEAKY}
    env.update(ROS_LOG_DIR=str(tmp_path / "ros_log"), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def colcon_venv(tmp_path_factory) -> Path:
    given = os.environ.get("PYROKI_TEST_COLCON_VENV")
    venv = Path(given) if given else tmp_path_factory.mktemp("colcon") / "venv"
    if not (venv / "bin" / "colcon").exists():
        base_python = getattr(sys, "_base_executable", sys.executable)
        _run([base_python, "-m", "venv", str(venv)], timeout=300)
        _run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "-q",
                "-r",
                str(REPO / "requirements.txt"),
                *COLCON,
            ],
            timeout=1800,
        )
    return venv


def test_colcon_build(colcon_venv, tmp_path):
    ws = tmp_path / "ws"
    shutil.copytree(REPO, ws / "src" / "pyroki_ros", ignore=IGNORE)
    env = _clean_env(
        tmp_path,
        VIRTUAL_ENV=str(colcon_venv),
        PATH=f"{colcon_venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
    )
    _run([str(colcon_venv / "bin" / "colcon"), "build"], cwd=ws, env=env, timeout=3000)

    prefix = ws / "install" / "pyroki_ros"
    python_dir = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = prefix / "lib" / python_dir / "site-packages"
    # our sources over the generated code, data files, generated interfaces, executables
    assert (site / "pyroki_ros" / "__init__.py").read_text() == (
        REPO / "pyroki_ros" / "__init__.py"
    ).read_text()
    for rel in (
        "pyroki_ros/srv/__init__.py",
        "pyroki_ros/msg/__init__.py",
        "pyroki_ros/cli.py",
        "pyroki_ros/robots/panda.urdf",
        "pyroki_ros/sampler/models/panda.npz",
        "pyroki_ros/sampler/models/panda.json",
    ):
        assert (site / rel).is_file(), rel
    for rel in ("lib/pyroki_ros/pyroki_ros_node", "bin/pyroki-ros"):
        assert os.access(prefix / rel, os.X_OK), rel
    for rel in (
        "launch/pyroki_ros.launch.py",
        "config/panda.yaml",
        "config/ur5.yaml",
        "package.xml",
    ):
        assert (prefix / "share" / "pyroki_ros" / rel).is_file(), rel
    assert (prefix / "share/ament_index/resource_index/packages/pyroki_ros").is_file()

    # 1. the usual way: source install/setup.bash, then import (from an unrelated cwd)
    check = (
        "import pyroki_ros, pyroki_ros.srv, pyroki_ros.msg;"
        "from rclpy.serialization import serialize_message as s;"
        "assert s(pyroki_ros.srv.SolveIK.Request(active_joints=['j']));"
        "from ament_index_python.packages import get_package_share_directory as g;"
        "print(pyroki_ros.__file__, pyroki_ros.srv.__file__, g('pyroki_ros'))"
    )
    bare = _clean_env(tmp_path, PATH="/usr/bin:/bin")
    out = _run(
        [
            "bash",
            "-c",
            f'source "{ws}/install/setup.bash" && "{colcon_venv}/bin/python" -c "{check}"',
        ],
        cwd=tmp_path,
        env=bare,
        timeout=300,
    ).stdout
    assert out.split() == [
        str(site / "pyroki_ros" / "__init__.py"),
        str(site / "pyroki_ros" / "srv" / "__init__.py"),
        str(prefix / "share" / "pyroki_ros"),
    ]

    # 2. without sourcing: the launchers find their prefix themselves
    out = _run(
        [str(prefix / "bin" / "pyroki-ros"), "--help"], cwd=tmp_path, env=bare, timeout=300
    ).stdout
    assert "usage" in out
    if (REPO / "pyroki_ros" / "ros" / "node.py").is_file():
        _check_installed_node(prefix, site, ws, colcon_venv, tmp_path)


FK_CLIENT = """
import sys, time
import rclpy
from pyroki_ros.msg import ErrorCode
from pyroki_ros.srv import ComputeFK

rclpy.init()
node = rclpy.create_node("colcon_check_client")
client = node.create_client(ComputeFK, "/pyroki_ros_node/compute_fk")
deadline = time.monotonic() + float(sys.argv[1])
while time.monotonic() < deadline:
    if not client.wait_for_service(timeout_sec=1.0):
        continue
    request = ComputeFK.Request(link_names=["panda_hand"])
    request.robot_state.name = [f"panda_joint{i}" for i in range(1, 8)]
    request.robot_state.position = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]
    future = client.call_async(request)
    rclpy.spin_until_future_complete(node, future, timeout_sec=30)
    response = future.result()
    if response is not None and response.error_code.val == ErrorCode.SUCCESS:
        p = response.poses[0].pose.position
        print("FK-OK", response.link_names[0], round(p.x, 3), round(p.z, 3))
        sys.exit(0)
    print("not yet:", response and (response.error_code.val, response.message), flush=True)
    time.sleep(1.0)
sys.exit("no successful ComputeFK answer from the installed node")
"""


def _check_installed_node(prefix, site, ws, colcon_venv, tmp_path):
    """Start install/.../lib/pyroki_ros/pyroki_ros_node WITHOUT sourcing anything (as
    `ros2 run` would, with the bundled Panda), and call its ComputeFK service from a client that
    sourced install/setup.bash: the installed node, its launcher and the interfaces end to end."""
    import random

    ros = {
        "ROS_DOMAIN_ID": str(random.SystemRandom().randint(1, 101)),
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    }
    bare = _clean_env(tmp_path, PATH="/usr/bin:/bin", **ros)
    node_env = {**bare, "PYROKI_ROS_EXIT_WITH_PARENT": str(os.getpid())}
    node = subprocess.Popen(
        [
            str(prefix / "lib" / "pyroki_ros" / "pyroki_ros_node"),
            "--ros-args",
            "--params-file",
            str(prefix / "share" / "pyroki_ros" / "config" / "panda.yaml"),
            "-p",
            f"urdf_file:={site / 'pyroki_ros' / 'robots' / 'panda.urdf'}",
        ],
        cwd=tmp_path,
        env=node_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        script = tmp_path / "fk_client.py"
        script.write_text(FK_CLIENT)
        client = subprocess.run(
            [
                "bash",
                "-c",
                f'source "{ws}/install/setup.bash" && "{colcon_venv}/bin/python" "{script}" 240',
            ],
            check=False,
            cwd=tmp_path,
            env=bare,
            capture_output=True,
            text=True,
            timeout=400,
        )
    finally:
        if node.poll() is None:
            node.terminate()
            try:
                node.wait(timeout=20)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
        node_log = node.stdout.read()
    assert client.returncode == 0 and "FK-OK panda_hand" in client.stdout, (
        f"client:\n{client.stdout[-3000:]}\n{client.stderr[-3000:]}\nnode:\n{node_log[-5000:]}"
    )
