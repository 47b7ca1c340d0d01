"""The JAX core must import and work without ROS (no rclpy, no rosidl, no message packages).

Runs a fresh interpreter in which a meta-path finder refuses every ROS module, so the check
holds even though this environment has the ROS wheels installed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

BLOCK_ROS = textwrap.dedent(
    """
    import importlib.abc, sys

    BLOCKED_TOP = ("rclpy", "rcl_interfaces", "builtin_interfaces", "std_msgs", "std_srvs",
                   "geometry_msgs", "sensor_msgs", "shape_msgs", "trajectory_msgs",
                   "ament_index_python")

    def blocked(name):
        top = name.partition(".")[0]
        return (top in BLOCKED_TOP or top.startswith("rosidl")
                or name in ("pyroki_ros.msg", "pyroki_ros.srv")
                or name.startswith(("pyroki_ros.msg.", "pyroki_ros.srv.")))

    class BlockRos(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if blocked(name):
                raise ImportError(f"{name} is blocked: the pyroki_ros core must not need ROS")
            return None

    sys.meta_path.insert(0, BlockRos())
    """
)


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_ROS + textwrap.dedent(code)],
        check=False,
        cwd=REPO,  # the source tree, also when the editable install is missing
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_blocker_works():
    proc = _run("import rclpy")
    assert proc.returncode != 0 and "blocked" in proc.stderr


def test_core_imports_without_ros():
    # robot.py is the acceptance criterion; the others are checked when present.
    pkg = REPO / "pyroki_ros"
    modules = [
        name
        for name in ("robot", "urdf", "kinematics", "robots")
        if (pkg / f"{name}.py").is_file() or (pkg / name / "__init__.py").is_file()
    ]
    code = f"""
        import pyroki_ros
        import importlib
        for name in {modules!r}:
            importlib.import_module("pyroki_ros." + name)
        leaked = sorted(m for m in sys.modules if blocked(m))
        assert not leaked, leaked
        print("CORE-OK", {modules!r})
    """
    proc = _run(code)
    assert proc.returncode == 0 and "CORE-OK" in proc.stdout, proc.stderr[-4000:]
