"""bench/gpu_report.py on the CPU at tiny sizes: every row, consistent verification, no ROS.

Runs in a fresh interpreter where ``import rclpy`` fails (``sys.modules['rclpy'] = None``), so
the report's whole import chain is proven free of ROS; the report's own last note says rclpy
was not imported either.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

TINY = [
    "--quick",
    "--fk-batches=1,8",
    "--ik-batches=1,16",
    "--latency=5",
    "--plans=1",
    "--plan-batches=2",
    "--steps=8",
    "--mbm-problems=1",
    "--train-seconds=1",
    "--train-batch=32",
    "--train-chunk=2",
    "--sample-k=2",
    "--segment-samples=2",
    "--repeat-budget=1",
]
RUN = (
    "import runpy, sys\n"
    "sys.modules['rclpy'] = None  # any import of rclpy now fails\n"
    "sys.argv = sys.argv[1:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[str, str]:
    out = tmp_path_factory.mktemp("gpu_report") / "gpu.md"
    out.write_text("# GPU report\n\nHand-written text that must survive.\n")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(
        [sys.executable, "-c", RUN, str(ROOT / "bench/gpu_report.py"), *TINY, f"--out={out}"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout, out.read_text()


def _rows(text: str) -> list[list[str]]:
    """The report table's body rows, as cells."""
    rows = [line.strip("|").split(" | ") for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in r] for r in rows[1:]]  # without the header


def test_every_row_is_there(report):
    _, text = report
    rows = _rows(text)
    names = [r[0] for r in rows]
    sizes = {(r[0], r[1]) for r in rows}
    assert names[0] == "device" and "cpu" in rows[0][-1]
    assert {("FK, all 13 Panda links", f"{b} configurations") for b in (1, 8)} <= sizes
    ik = "IK, Panda hand pose, 1 mm / 1 deg"
    assert {(ik, "1 targets"), (ik, "16 targets")} <= sizes
    assert any(n.startswith("IK single-target latency") for n in names)
    assert "plan, random scenes (10 obstacles), one pair per call" in names
    assert (
        "plan_batch(batched=True), random scenes (10 obstacles), one call",
        "2 plans, T = 8",
    ) in sizes
    mbm = [r for r in rows if "MotionBenchMaker" in r[0]]
    if any("skipped" in r[-1] for r in mbm):  # the demo problems are not in this checkout
        assert len(mbm) == 1
    else:
        assert len(mbm) == 2 and all(r[1].startswith("1 ") for r in mbm), mbm
    assert any(n.startswith("sampler training") for n in names)
    assert any(n.startswith("sampler sampling") for n in names)


def test_successes_agree_with_the_independent_check(report):
    _, text = report
    checked = 0
    for row in _rows(text):
        success, verified = row[4], row[5]
        if not success:
            continue
        solved, total = map(int, re.match(r"(\d+)/(\d+)", success).groups())
        good, of = map(int, re.match(r"(\d+)/(\d+)", verified).groups())
        assert of == solved and good <= solved <= total, row
        if row[0].startswith("IK"):  # IK: every reported success holds in float64
            assert good == solved == total, row
        checked += 1
    assert checked >= 5


def test_no_ros_and_the_file_keeps_its_text(report):
    stdout, text = report
    assert "rclpy imported: no" in text and "[gpu-report] written to" in stdout
    assert text.startswith("# GPU report\n\nHand-written text that must survive.\n")
    assert "<!-- gpu-report:cpu-quick:begin -->" in text and "## CPU, quick sizes" in text


def test_numpy_fk_matches_the_reference_fk():
    """The report's vectorised float64 FK against test/reference_fk.py, on the embedded robots
    and the test robots (mimic, prismatic and continuous joints)."""
    import numpy as np
    from gpu_report import NumpyFK, matrix_to_wxyz_xyz, pose_errors
    from reference_fk import actuated_joint_limits, actuated_joint_names, reference_fk

    from pyroki_ros.robots import AVAILABLE, urdf_path

    files = [urdf_path(name) for name in AVAILABLE] + sorted(
        (ROOT / "test/data/robots").glob("*.urdf")
    )
    rng = np.random.default_rng(1)
    for path in files:
        text = path.read_text()
        joints = actuated_joint_names(text)
        lower, upper = actuated_joint_limits(text)
        q = rng.uniform(lower, upper, (3, len(joints)))
        poses = NumpyFK(text, joints).poses(q)
        for i, row in enumerate(q):
            for link, expected in reference_fk(text, row, joints).items():
                np.testing.assert_allclose(poses[link][i], expected, atol=1e-12, err_msg=str(path))
        for link, pose in poses.items():  # the error measure: zero against itself
            position, rotation = pose_errors(pose, matrix_to_wxyz_xyz(pose))
            assert position.max() < 1e-12 and rotation.max() < 1e-6, (path, link)
