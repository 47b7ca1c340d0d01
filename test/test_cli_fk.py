"""The ``fk`` sub-command's file contract, run as ``python -m pyroki_ros.cli`` subprocesses.

Poses are checked against independent references: ``test/reference_fk.py`` (numpy, written from
the URDF spec) for the Panda, and a closed form for a planar toy arm.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

TEST_DIR = Path(__file__).resolve().parent
REPO = TEST_DIR.parent
from reference_fk import reference_fk

PANDA = REPO / "pyroki_ros" / "robots" / "panda.urdf"
PANDA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)] + ["panda_finger_joint1"]
PANDA_LIMITS = np.array(
    [
        [-2.8973, 2.8973],
        [-1.7628, 1.7628],
        [-2.8973, 2.8973],
        [-3.0718, -0.0698],
        [-2.8973, 2.8973],
        [-0.0175, 3.7525],
        [-2.8973, 2.8973],
        [0.0, 0.04],
    ]
)

L1, L2 = 0.6, 0.35
PLANAR_URDF = f"""<robot name="planar">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="tip"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.2"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" velocity="1" effort="1"/>
  </joint>
  <joint name="elbow" type="revolute"><parent link="l1"/><child link="l2"/>
    <origin xyz="{L1} 0 0"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" velocity="1" effort="1"/>
  </joint>
  <joint name="flange" type="fixed"><parent link="l2"/><child link="tip"/>
    <origin xyz="{L2} 0 0"/>
  </joint>
</robot>
"""


def quat_matrix(wxyz) -> np.ndarray:
    w, x, y, z = np.asarray(wxyz) / np.linalg.norm(wxyz)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def start_fk(urdf: str | Path, q_file: Path, out_file: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "pyroki_ros.cli", "fk", "--urdf", str(urdf)]
    command += ["--q", str(q_file), "--out", str(out_file)]
    return subprocess.Popen(
        command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=300)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _check_against_reference(out: dict, q: np.ndarray):
    assert out["joint_names"].tolist() == PANDA_JOINTS
    links = out["link_names"].tolist()
    poses = out["poses"]
    assert poses.shape == (len(q), len(links), 7)
    assert poses.dtype == np.float64
    assert out["joint_names"].dtype.kind == "U" and out["link_names"].dtype.kind == "U"
    for b, qb in enumerate(q):
        reference = reference_fk(PANDA, qb, PANDA_JOINTS)
        assert set(links) == set(reference)
        for i, link in enumerate(links):
            np.testing.assert_allclose(poses[b, i, 4:], reference[link][:3, 3], atol=1e-10)
            np.testing.assert_allclose(
                quat_matrix(poses[b, i, :4]), reference[link][:3, :3], atol=1e-10
            )
            assert abs(np.linalg.norm(poses[b, i, :4]) - 1) < 1e-12


def test_fk_panda_path(runs):
    assert "4 configurations" in runs["results"]["path"].stdout
    _check_against_reference(runs["out"]["path"], runs["q"])


def test_fk_embedded_name_with_permuted_joint_names(runs):
    # The output is in the robot's joint order whatever order the input columns had.
    _check_against_reference(runs["out"]["embedded"], runs["q"])
    np.testing.assert_allclose(
        runs["out"]["embedded"]["poses"], runs["out"]["path"]["poses"], atol=1e-12
    )


def test_fk_planar_closed_form(runs):
    out = runs["out"]["planar"]
    assert out["joint_names"].tolist() == ["shoulder", "elbow"]
    links = out["link_names"].tolist()
    assert links == ["base", "l1", "l2", "tip"]
    poses = out["poses"]
    assert poses.shape == (5, 4, 7) and poses.dtype == np.float64
    for b, (q1, q2) in enumerate(runs["planar_q"]):
        expected_tip = [
            L1 * math.cos(q1) + L2 * math.cos(q1 + q2),
            L1 * math.sin(q1) + L2 * math.sin(q1 + q2),
            0.2,
        ]
        np.testing.assert_allclose(poses[b, 3, 4:], expected_tip, atol=1e-12)
        c, s = math.cos(q1 + q2), math.sin(q1 + q2)
        np.testing.assert_allclose(
            quat_matrix(poses[b, 3, :4]), [[c, -s, 0], [s, c, 0], [0, 0, 1]], atol=1e-12
        )
        np.testing.assert_allclose(poses[b, 0], [1, 0, 0, 0, 0, 0, 0], atol=0)


# --------------------------------------------------------------------------------------------
# Bad inputs: a non-zero exit status and a message on stderr that names the problem.
# --------------------------------------------------------------------------------------------


def _bad_cases(tmp: Path) -> dict[str, tuple[list[str], list[str]]]:
    good_q = np.zeros((2, 8))
    cases = {}

    def case(name, arrays, fragments, urdf="panda"):
        path = tmp / f"{name}.npz"
        if arrays is not None:
            np.savez(path, **arrays)
        cases[name] = (
            ["fk", "--urdf", str(urdf), "--q", str(path), "--out", str(tmp / f"{name}_out.npz")],
            fragments,
        )

    names = np.array(PANDA_JOINTS)
    case(
        "unknown_joint",
        {"q": good_q, "joint_names": np.array(PANDA_JOINTS[:7] + ["ghost_joint"])},
        ["ghost_joint"],
    )
    case(
        "fixed_joint_name",
        {"q": np.zeros((2, 9)), "joint_names": np.append(names, "panda_hand_joint")},
        ["panda_hand_joint", "fixed"],
    )
    case("wrong_columns", {"q": np.zeros((2, 7))}, ["7 columns", "8"])
    case(
        "names_length_mismatch", {"q": good_q, "joint_names": names[:7]}, ["7 entries", "8 columns"]
    )
    case(
        "missing_actuated_name",
        {"q": np.zeros((2, 8)), "joint_names": np.append(names[:7], "panda_finger_joint2")},
        ["lacks", "panda_finger_joint1"],
    )
    case(
        "duplicate_names",
        {"q": good_q, "joint_names": np.append(names[:7], "panda_joint1")},
        ["duplicate"],
    )
    case("nan_q", {"q": np.where(np.eye(2, 8, k=3) > 0, np.nan, 0.0)}, ["NaN"])
    case("inf_q", {"q": np.full((1, 8), np.inf)}, ["infinite"])
    case("q_1d", {"q": np.zeros(8)}, ["shape", "(8,)"])
    case("no_q_array", {"x": good_q}, ["no array 'q'"])
    case("missing_q_file", None, ["missing_q_file.npz"])
    case(
        "missing_urdf",
        {"q": good_q},
        ["/no/such/robot.urdf", "neither a file nor"],
        urdf="/no/such/robot.urdf",
    )
    bad_urdf = tmp / "bad.urdf"
    bad_urdf.write_text("<robot name='x'><link name='a'/><link name='b'/></robot>")
    case("bad_urdf", {"q": good_q}, ["root links"], urdf=bad_urdf)
    return cases


# Runs inside one subprocess: each case through cli.main, as `python -m pyroki_ros.cli` does
# (sys.exit(main())), recording the exit status and stderr. One process for all the cases keeps
# this test fast; test_bad_input_process_exit_status checks a real `python -m` invocation.
_DRIVER = r"""
import contextlib, io, json, sys
from pyroki_ros import cli
report = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as e:  # what sys.exit / the interpreter would do with it
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
                status = 1
            else:
                status = e.code
    report[name] = [status, err.getvalue()]
print(json.dumps(report))
"""


def test_bad_inputs(runs):
    driver = runs["driver"]
    assert driver.returncode == 0, driver.stderr
    report = json.loads(driver.stdout.strip().splitlines()[-1])
    for name, (_, fragments) in runs["bad_cases"].items():
        status, stderr = report[name]
        assert status not in (0, None), f"{name}: exit status {status}"
        for fragment in fragments:
            assert fragment in stderr, f"{name}: {fragment!r} not in stderr {stderr!r}"
        assert "Traceback" not in stderr, f"{name}: {stderr}"
        assert not (runs["bad_dir"] / f"{name}_out.npz").exists(), f"{name}: wrote an output"


def test_bad_input_process_exit_status(runs):
    result = runs["bad_process"]
    assert result.returncode != 0
    assert "5 columns" in result.stderr and "Traceback" not in result.stderr
    assert not runs["bad_out"].exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Starts every subprocess of this file at once: they are independent, and most of their
    time is spent importing JAX and compiling, which overlaps well."""
    tmp = tmp_path_factory.mktemp("cli_fk")
    rng = np.random.default_rng(7)
    q = rng.uniform(PANDA_LIMITS[:, 0], PANDA_LIMITS[:, 1], size=(4, 8))
    np.savez(tmp / "panda_q.npz", q=q)
    # Same configurations, columns permuted, with the names saying which column is which.
    perm = np.array([7, 3, 0, 5, 1, 6, 2, 4])
    np.savez(tmp / "panda_q_perm.npz", q=q[:, perm], joint_names=np.array(PANDA_JOINTS)[perm])
    planar_q = np.array([[0.0, 0.0], [0.5, -1.2], [-2.0, 2.5], [1.0, 0.3], [3.0, -3.0]])
    (tmp / "planar.urdf").write_text(PLANAR_URDF)
    np.savez(tmp / "planar_q.npz", q=planar_q)

    np.savez(tmp / "q_5_columns.npz", q=np.zeros((3, 5)))
    bad_dir = tmp / "bad"
    bad_dir.mkdir()
    bad_cases = _bad_cases(bad_dir)
    argvs = {name: argv for name, (argv, _) in bad_cases.items()}

    good = {
        "path": start_fk(PANDA, tmp / "panda_q.npz", tmp / "path.npz"),
        "embedded": start_fk("panda", tmp / "panda_q_perm.npz", tmp / "embedded.npz"),
        "planar": start_fk(tmp / "planar.urdf", tmp / "planar_q.npz", tmp / "planar.npz"),
    }
    bad_process = start_fk("panda", tmp / "q_5_columns.npz", tmp / "bad_out.npz")
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, json.dumps(argvs)],
        cwd=REPO,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    results = {name: finish(p) for name, p in good.items()}
    bad_result, driver_result = finish(bad_process), finish(driver)  # all reaped before asserting
    for name, result in results.items():
        assert result.returncode == 0, f"{name}: {result.stderr}"
    return {
        "q": q,
        "planar_q": planar_q,
        "results": results,
        "out": {name: dict(np.load(tmp / f"{name}.npz")) for name in good},
        "bad_process": bad_result,
        "bad_out": tmp / "bad_out.npz",
        "driver": driver_result,
        "bad_cases": bad_cases,
        "bad_dir": bad_dir,
    }
