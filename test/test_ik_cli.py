"""The ``ik`` command line contract (npz in, npz out), run as a subprocess from the repo root
and checked with the independent float64 FK (test/reference_fk.py).

All the subprocesses start at once (module fixture) so that their start-up and compilation
overlap; each test then reads its own process's result.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from ik_reference import RefRobot, pose7, rotation_angle

REPO = Path(__file__).resolve().parents[1]
PANDA = REPO / "pyroki_ros" / "robots" / "panda.urdf"
N = 20
FINGER = 7
F32_SLACK = 2e-5


@pytest.fixture(scope="module")
def ref() -> RefRobot:
    return RefRobot(PANDA)


def _targets(ref, rng):
    q_star = ref.random(rng, N)
    poses = ref.poses(q_star)
    return q_star, poses


@pytest.fixture(scope="module")
def runs(ref, tmp_path_factory):
    """Starts every CLI run; returns name -> (CompletedProcess-like, out path, inputs)."""
    tmp = tmp_path_factory.mktemp("ik_cli")
    rng = np.random.default_rng(21)
    _, poses = _targets(ref, rng)
    root_poses = pose7(poses["panda_hand"])
    seeds = ref.random(rng, N, margin=0.0)
    _, poses2 = _targets(ref, rng)
    link2_poses = pose7(np.linalg.inv(poses2["panda_link2"]) @ poses2["panda_hand"])
    nan_poses = root_poses.copy()
    nan_poses[3, 5] = np.nan

    inputs = {
        "seeded": {"poses": root_poses, "seeds": seeds},
        "base_link2": {"poses": link2_poses},
        "missing_poses": {"targets": root_poses},
        "wrong_shape": {"poses": root_poses[:, :6]},
        "nan_poses": {"poses": nan_poses},
        "bad_seeds": {"poses": root_poses, "seeds": seeds[:, :7]},
        "unknown_tip": {"poses": root_poses},
        "gpu": {"poses": root_poses},
        "unknown_urdf": {"poses": root_poses},
    }
    extra = {
        "base_link2": ["--base", "panda_link2"],
        "unknown_tip": [],
        "gpu": ["--device", "gpu"],
    }
    # the CLI keeps compiled programs in $XDG_CACHE_HOME/pyroki_ros/xla: not in the user's home
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))
    started = {}
    for name, arrays in inputs.items():
        path_in, path_out = tmp / f"{name}.npz", tmp / f"{name}_out.npz"
        np.savez(path_in, **arrays)
        urdf = str(tmp / "no_such_robot.urdf") if name == "unknown_urdf" else str(PANDA)
        tip = "panda_nope" if name == "unknown_tip" else "panda_hand"
        command = [
            sys.executable,
            "-m",
            "pyroki_ros.cli",
            "ik",
            "--urdf",
            urdf,
            "--tip",
            tip,
            "--targets",
            str(path_in),
            "--out",
            str(path_out),
            *extra.get(name, []),
        ]
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        started[name] = (process, path_out, arrays)
    done = {}
    for name, (process, path_out, arrays) in started.items():
        stdout, stderr = process.communicate(timeout=600)
        done[name] = (process.returncode, stdout, stderr, path_out, arrays)
    return done


def _load(runs, name):
    code, _stdout, stderr, path_out, arrays = runs[name]
    assert code == 0, stderr
    with np.load(path_out, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}, arrays


def _check_contract(out, ref):
    assert list(out["joint_names"]) == ref.joint_names
    assert out["q"].dtype == np.float64 and out["q"].shape == (N, ref.n)
    assert out["success"].dtype == np.bool_ and out["success"].shape == (N,)
    for key in ("compile_seconds", "solve_seconds"):
        assert out[key].shape == () and np.isfinite(out[key]) and out[key] > 0
    q = out["q"]
    assert np.all(q >= ref.lower - 1e-6) and np.all(q <= ref.upper + 1e-6)
    assert out["success"].mean() >= 0.9


def _pose_errors(t_target_7, transforms):
    pos = np.linalg.norm(transforms[:, :3, 3] - t_target_7[:, 4:], axis=-1)
    rot = []
    for target, t in zip(t_target_7, transforms):
        w, x, y, z = target[:4]
        r = np.array(
            [
                [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
            ]
        )
        rot.append(rotation_angle(r.T @ t[:3, :3]))
    return pos, np.array(rot)


def test_cli_ik_with_seeds(runs, ref):
    out, inputs = _load(runs, "seeded")
    _check_contract(out, ref)
    q, ok = out["q"], out["success"]
    pos, rot = _pose_errors(inputs["poses"], ref.poses(q)["panda_hand"])
    assert np.all(pos[ok] <= 1e-3 + F32_SLACK) and np.all(rot[ok] <= math.radians(1) + 1e-4)
    if "position_error" in out:
        np.testing.assert_allclose(out["position_error"], pos, atol=F32_SLACK)
    # the finger is not between base and tip: it stays at its (float32) seed
    np.testing.assert_array_equal(q[:, FINGER], inputs["seeds"][:, FINGER].astype(np.float32))


def test_cli_ik_relative_to_base_link(runs, ref):
    """--base panda_link2: poses of the hand in panda_link2; joints 1-2 (above the base) and
    the finger stay at the default seed, the middle of their limits."""
    out, inputs = _load(runs, "base_link2")
    _check_contract(out, ref)
    q, ok = out["q"], out["success"]
    poses = ref.poses(q)
    relative = np.linalg.inv(poses["panda_link2"]) @ poses["panda_hand"]
    pos, rot = _pose_errors(inputs["poses"], relative)
    assert np.all(pos[ok] <= 1e-3 + F32_SLACK) and np.all(rot[ok] <= math.radians(1) + 1e-4)
    middle = ((ref.lower + ref.upper) / 2).astype(np.float32)
    for j in (0, 1, FINGER):
        assert np.all(q[:, j] == middle[j]), ref.joint_names[j]
    # in the root frame the hand is elsewhere than the relative targets: the base mattered
    root_pos, _ = _pose_errors(inputs["poses"], poses["panda_hand"])
    assert np.all(root_pos > 0.05)


@pytest.mark.parametrize(
    "name, message",
    [
        ("missing_poses", "no array 'poses'"),
        ("wrong_shape", r"poses must have shape \(N, 7\)"),
        ("nan_poses", "NaN"),
        ("bad_seeds", "seeds must have shape"),
        ("unknown_tip", "unknown link 'panda_nope'"),
        ("gpu", "device 'gpu' is not available"),
        ("unknown_urdf", "neither a file nor"),
    ],
)
def test_cli_ik_bad_input(runs, name, message):
    import re

    code, _stdout, stderr, path_out, _ = runs[name]
    assert code != 0
    assert "Traceback" not in stderr, stderr
    assert re.search(message, stderr), stderr
    assert stderr.strip().startswith("error:"), stderr
    assert not Path(path_out).exists()
