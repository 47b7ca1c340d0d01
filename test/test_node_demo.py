"""``pyroki-ros demo`` (the README's one command) runs to the end by itself, exits 0, prints
every step, and leaves no node process behind. With viser installed it runs with ``--view``
(every step also drawn in the web viewer, which must not fail any step)."""

from __future__ import annotations

import importlib.util
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")


def _command() -> list[str]:
    script = Path(sys.executable).with_name("pyroki-ros")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "pyroki_ros.cli"]


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path, tmp_path_factory):
    env = dict(os.environ)
    for key in ("ROS_DOMAIN_ID", "ROS_LOCALHOST_ONLY", "ROS_STATIC_PEERS"):
        env.pop(key, None)  # the demo picks (and reserves) its own domain
    env["TMPDIR"] = str(tmp_path)  # its log folder
    env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "jax_cache")
    view = []
    if importlib.util.find_spec("viser") is not None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            view = ["--view", "--view-seconds", "0", "--port", str(s.getsockname()[1])]
    proc = subprocess.run(
        _command() + ["demo", *view],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    for section in (
        "~/compute_fk",
        "~/solve_ik: hand",
        "HINGE + PLANE",
        "~/solve_ik_batch",
        "teleop: ~/goal_pose",
        "round-trip latency",
        "demo finished",
    ):
        assert section in out, f"missing '{section}':\n{out}"
    assert out.count("success True") >= 2, out
    assert re.search(r"\d+/1000 reachable", out), out
    assert "JointTrajectory messages" in out and "time_from_start: 0.020 s" in out, out
    assert "FAILED" not in out
    pid = re.search(r"\(pid (\d+)\)", out)
    assert pid and not Path(f"/proc/{pid.group(1)}").exists(), "node process left running"
    assert "node stopped (exit code 0)" in out, out
    if view:
        assert f"viewer: http://127.0.0.1:{view[-1]}" in out, out
