"""The node shares the GPU: it turns JAX's preallocation off unless the user chose a setting."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

ROOT = Path(__file__).resolve().parents[1]
CODE = (
    "import os, pyroki_ros.ros.node as node\n"
    "print(os.environ.get('XLA_PYTHON_CLIENT_PREALLOCATE'), node.GPU_MEMORY_VARIABLES)\n"
)


def _imported_with(**variables: str) -> str:
    env = {k: v for k, v in os.environ.items() if "XLA_" not in k or k == "XLA_FLAGS"}
    env.update(variables)
    done = subprocess.run(
        [sys.executable, "-c", CODE],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split(" ", 1)[0]


def test_preallocation_off_by_default():
    assert _imported_with() == "false"


def test_a_user_setting_wins():
    assert _imported_with(XLA_PYTHON_CLIENT_PREALLOCATE="true") == "true"
    assert _imported_with(XLA_PYTHON_CLIENT_MEM_FRACTION=".5") == "None"
    assert _imported_with(XLA_CLIENT_MEM_FRACTION=".5") == "None"
