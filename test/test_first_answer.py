"""A first IK answer by the routes the README documents, over DDS.

* The venv node: the README's `.venv/bin/pyroki_ros_node ...` command, taken from the README
  and run as written from the repository root, without activating the venv (no
  AMENT_PREFIX_PATH, LD_LIBRARY_PATH or VIRTUAL_ENV), answers ~/compute_fk and ~/solve_ik.
* A node given `urdf_file` (a bundled robot's name) with `publish_robot_description` latches
  that URDF on /robot_description for late joiners, as robot_state_publisher would.
* The launch file (use_robot_state_publisher:=false, a namespace), found through the ament
  index and run by launch's LaunchService: only where launch_ros is importable. It is not on
  PyPI (no ros-kilted-launch-ros wheel), so in the venv of ./setup.sh that test is skipped;
  a ROS 2 install with launch_ros (colcon workspace, apt) runs it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

from harness import RosSession, reserve_domain_id, ros_environment, wait_until
from node_helpers import LATCHED, start_node
from pyroki_ros.msg import ErrorCode, IKObjective
from pyroki_ros.srv import ComputeFK, SolveIK
from sensor_msgs.msg import JointState
from std_msgs.msg import String

from pyroki_ros.robots import urdf_path

REPO = Path(__file__).resolve().parents[1]
PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]
Q = [0.0, -0.5, 0.0, -2.0, 0.0, 1.5, 0.8]
# What activating the venv or a sourced ROS install would set: the node must not need it.
ACTIVATION = (
    "AMENT_PREFIX_PATH",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
)


def readme_node_command() -> str:
    """The README's command line that starts the venv node (its comment dropped)."""
    for block in re.findall(r"```bash\n(.*?)```", (REPO / "README.md").read_text(), re.DOTALL):
        for line in block.splitlines():
            if line.startswith(".venv/bin/pyroki_ros_node "):
                return line
    raise AssertionError("the README has no `.venv/bin/pyroki_ros_node ...` command")


def first_answers(
    session: RosSession, prefix: str, node_alive, start: float, timeout: float = 300.0
):
    """Polls ~/compute_fk until SUCCESS, then solves IK for that pose; returns (fk, ik, fk
    seconds, ik seconds), seconds counted from ``start`` (time.monotonic())."""
    fk_client = session.client(ComputeFK, f"{prefix}/compute_fk", wait=timeout)
    request = ComputeFK.Request(
        link_names=["panda_hand"], robot_state=JointState(name=PANDA_ARM, position=Q)
    )
    while True:
        assert node_alive(), "the node exited"
        fk = session.call(fk_client, request, timeout=timeout)
        if fk.error_code.val == ErrorCode.SUCCESS:
            break
        assert fk.error_code.val == ErrorCode.NO_ROBOT_MODEL, fk.message  # loading
        assert time.monotonic() - start < timeout, fk.message
        time.sleep(0.2)
    fk_seconds = time.monotonic() - start
    ik_client = session.client(SolveIK, f"{prefix}/solve_ik", wait=timeout)
    objective = IKObjective(type=IKObjective.POSE, link="panda_hand", target=fk.poses[0])
    seed = JointState(name=PANDA_ARM, position=[0.0, -0.3, 0.0, -1.8, 0.0, 1.6, 0.7])
    ik = session.call(
        ik_client,
        SolveIK.Request(objectives=[objective], seed=seed, active_joints=PANDA_ARM),
        timeout=timeout,
    )
    return fk, ik, fk_seconds, time.monotonic() - start


def _stop(proc: subprocess.Popen, group: bool = False) -> None:
    """SIGINT, as Ctrl-C would send it: to the whole process group for a launch (launch
    leaves its children alone on SIGINT, expecting them to have got it from the terminal)."""
    if proc.poll() is None:
        if group:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait()


@pytest.fixture
def ros_domain(tmp_path, monkeypatch):
    """A reserved domain and loopback discovery for this process and its children."""
    reservation = reserve_domain_id(tmp_path.name)
    env = ros_environment(reservation.domain_id, tmp_path / "ros_log")
    for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "ROS_LOG_DIR"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("ROS_LOCALHOST_ONLY", raising=False)
    monkeypatch.delenv("ROS_STATIC_PEERS", raising=False)
    try:
        yield env
    finally:
        reservation.release()


@pytest.mark.slow
def test_readme_node_command_answers(ros_domain, tmp_path):
    command = readme_node_command()
    args = shlex.split(command, comments=True)
    if not (REPO / args[0]).is_file():
        pytest.skip(f"{args[0]} missing: run ./setup.sh")
    env = {k: v for k, v in ros_domain.items() if k not in ACTIVATION}
    env["PYROKI_ROS_EXIT_WITH_PARENT"] = str(os.getpid())
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        started = time.monotonic()
        node = subprocess.Popen(
            args, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )
    session = RosSession("readme_client", int(ros_domain["ROS_DOMAIN_ID"]))
    try:
        fk, ik, fk_s, ik_s = first_answers(
            session, "/pyroki_ros_node", lambda: node.poll() is None, started
        )
        # (not latched by default: robot_description belongs to robot_state_publisher)
        publishers = session.node.count_publishers("/robot_description")
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        session.close()
        _stop(node)
    assert fk.within_limits and fk.link_names == ["panda_hand"]
    assert ik.success, (ik.error_code.val, ik.message)
    assert ik.position_errors[0] <= 1e-3 and ik.orientation_errors[0] <= 0.01745
    assert publishers == 0
    print(
        f"README command `{command}`: first FK after {fk_s:.1f} s, "
        f"first IK after {ik_s:.1f} s (client side, from the node's start)"
    )


@pytest.mark.slow
def test_urdf_file_is_published_latched(tmp_path_factory):
    env = start_node(
        tmp_path_factory,
        "test_first_answer_publish",
        params=("urdf_file:=panda", "publish_robot_description:=true"),
    )
    try:
        env.wait_ready("panda_hand", joint="panda_joint1")
        received: list[str] = []
        # a late joiner (after the model loaded) still gets it: transient local
        env.session.node.create_subscription(
            String, "/robot_description", lambda msg: received.append(msg.data), LATCHED
        )
        wait_until(lambda: received, 30.0, what="a latched /robot_description")
        assert received[0] == urdf_path("panda").read_text()
        assert env.session.node.count_publishers("/robot_description") == 1
    finally:
        env.close()


LAUNCH = r"""
import sys
from launch import LaunchDescription, LaunchService
from launch.actions import IncludeLaunchDescription
from launch.launch_description_sources import PythonLaunchDescriptionSource

path, *args = sys.argv[1:]
service = LaunchService()
service.include_launch_description(LaunchDescription([IncludeLaunchDescription(
    PythonLaunchDescriptionSource(path),
    launch_arguments=[tuple(arg.split(":=", 1)) for arg in args],
)]))
sys.exit(service.run())
"""


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("launch_ros") is None,
    reason="launch_ros is not importable: it is not on PyPI (no ros-kilted-launch-ros wheel), "
    "so the ./setup.sh venv cannot run launch files; runs where ROS 2 provides launch_ros",
)
def test_launch_file_without_robot_state_publisher(ros_domain, tmp_path):
    from ament_index_python.packages import get_package_share_directory

    path = Path(get_package_share_directory("pyroki_ros")) / "launch" / "pyroki_ros.launch.py"
    log = tmp_path / "launch.log"
    with open(log, "w") as out:
        started = time.monotonic()
        launch = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCH,
                str(path),
                "use_robot_state_publisher:=false",
                "namespace:=first_answer",
                "log_level:=info",
            ],
            env={k: v for k, v in os.environ.items() if k != "PYROKI_ROS_EXIT_WITH_PARENT"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # its own process group, stopped as a whole
        )
    session = RosSession("launch_client", int(ros_domain["ROS_DOMAIN_ID"]))
    received: list[str] = []
    try:
        _, ik, fk_s, ik_s = first_answers(
            session, "/first_answer/pyroki_ros_node", lambda: launch.poll() is None, started
        )
        session.node.create_subscription(
            String, "/first_answer/robot_description", lambda m: received.append(m.data), LATCHED
        )
        wait_until(lambda: received, 30.0, what="a latched /first_answer/robot_description")
    except BaseException:
        print(log.read_text()[-4000:])
        raise
    finally:
        session.close()
        _stop(launch, group=True)
    assert ik.success, (ik.error_code.val, ik.message)
    assert received[0] == urdf_path("panda").read_text()
    assert "escalating" not in log.read_text(), log.read_text()[-3000:]  # ended on SIGINT
    print(f"launch file: first FK after {fk_s:.1f} s, first IK after {ik_s:.1f} s")
