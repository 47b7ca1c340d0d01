"""Float64 accuracy of the JAX forward kinematics and Jacobians against the numpy reference.

float64 needs ``jax_enable_x64``, a process-wide switch: turning it on inside this pytest process
would silently promote the float32 tests (test_fk_accuracy.py and others) to float64. So all
float64 measurements run in ONE subprocess (this file executed as a script, which enables x64
before importing anything from JAX) that prints a JSON report; the tests below assert on it.

Run with ``-rP`` (or ``-s``) to see the measured maximum errors per robot.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent

from robot_cases import JACOBIAN_CASES, ROBOT_PATHS

POS_TOL = 1e-10  # m
ROT_TOL = 1e-10  # rad
# Central differences with h = 1e-6 in float64: truncation ~h^2, round-off ~1e-16/h = 1e-10.
JAC_TOL = 1e-6
BATCH_ROBOTS = ("panda", "pr2")


def _worker() -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import fk_check

    report: dict = {"fk": {}, "jacobian": [], "batch": {}, "errors": {}}
    for name in ROBOT_PATHS:
        try:
            report["fk"][name] = fk_check.fk_errors(name, "float64")
        except Exception as exc:  # noqa: BLE001 - one robot's failure must not hide the others
            report["errors"][f"fk:{name}"] = f"{type(exc).__name__}: {exc}"
    for name, link in JACOBIAN_CASES:
        try:
            report["jacobian"].append(fk_check.jacobian_errors(name, link, "float64"))
        except Exception as exc:  # noqa: BLE001
            report["errors"][f"jacobian:{name}:{link}"] = f"{type(exc).__name__}: {exc}"
    for name in BATCH_ROBOTS:
        try:
            report["batch"][name] = fk_check.batch_shape_errors(name, "float64")
        except Exception as exc:  # noqa: BLE001
            report["errors"][f"batch:{name}"] = f"{type(exc).__name__}: {exc}"
    return report


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    print("FK_F64_REPORT " + json.dumps(_worker()))
    sys.exit(0)


import pytest

pytest.importorskip("jax")
try:
    import pyroki_ros.model.kinematics
    import pyroki_ros.model.robot  # noqa: F401
except ImportError as exc:
    pytest.skip(f"pyroki_ros JAX core not importable: {exc}", allow_module_level=True)

# One subprocess measures everything: about 1.5-2 minutes on 2 CPU cores.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report() -> dict:
    env = dict(os.environ)
    env["JAX_ENABLE_X64"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO), str(HERE)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    proc = subprocess.run(
        [sys.executable, str(pathlib.Path(__file__).resolve())],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        cwd=str(REPO),
    )
    lines = [l for l in proc.stdout.splitlines() if l.startswith("FK_F64_REPORT ")]
    if proc.returncode != 0 or not lines:
        pytest.fail(
            f"float64 worker failed (rc={proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}"
        )
    return json.loads(lines[-1][len("FK_F64_REPORT ") :])


@pytest.mark.parametrize("robot", list(ROBOT_PATHS))
def test_fk_float64_matches_reference(report, robot):
    import fk_check

    assert f"fk:{robot}" not in report["errors"], report["errors"][f"fk:{robot}"]
    r = report["fk"][robot]
    print(fk_check.format_fk_row(r))
    assert not r["problems"], r["problems"]
    assert r["max_pos_err"] < POS_TOL, fk_check.format_fk_row(r)
    assert r["max_rot_err"] < ROT_TOL, fk_check.format_fk_row(r)
    assert r["max_quat_norm_dev"] < 1e-12, fk_check.format_fk_row(r)


@pytest.mark.parametrize(("robot", "link"), JACOBIAN_CASES)
def test_jacobian_float64_matches_finite_differences(report, robot, link):
    key = f"jacobian:{robot}:{link}"
    assert key not in report["errors"], report["errors"][key]
    (r,) = [j for j in report["jacobian"] if j["robot"] == robot and j["link"] == link]
    print(r)
    assert r["max_err"] < JAC_TOL, r


@pytest.mark.parametrize("robot", BATCH_ROBOTS)
def test_batch_shapes_float64(report, robot):
    assert f"batch:{robot}" not in report["errors"], report["errors"][f"batch:{robot}"]
    for r in report["batch"][robot]:
        print(r)
        assert r["fk_shape"] == r["fk_expected"], r
        assert r["jac_shape"] == r["jac_expected"], r
        assert r["fk_dtype"] == "float64", r
        assert r["max_err"] < POS_TOL, r
