"""End to end: the node with ``sampler_checkpoint`` (a learned IK sampler trained here by the
real CLI, tiny and briefly) loads it for the Panda, and ~/solve_ik still answers correctly
(checked with the independent reference FK) whether or not the sampler's seed is used. The
model shipped for the Panda, named instead of a path (``sampler_checkpoint:=panda``), loads
too and seeds requests on its tip (panda_hand_tcp, the node's tip_link there, so that its
program is compiled at start). A checkpoint for another robot is refused
with a log line, and the node serves on."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 (rclpy) not installed: run ./setup.sh")

import plan_check as check
from harness import IsolatedNode
from node_helpers import CONFIG, pose_stamped, publish_robot
from pyroki_ros.msg import IKObjective
from pyroki_ros.srv import SolveIK
from reference_fk import pose_errors

STATE = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])


def train_tiny(out: pathlib.Path) -> pathlib.Path:
    command = [
        sys.executable, "-m", "pyroki_ros.cli", "train-sampler", "--urdf", "panda",
        "--tip", "panda_hand", "--out", str(out), "--steps", "30", "--hyper-hidden", "32",
        "32", "--joint-hidden", "16", "--components", "2", "--batch-size", "256",
    ]  # fmt: skip
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.mark.slow
def test_node_seeds_ik_from_a_sampler_checkpoint(tmp_path_factory):
    work = tmp_path_factory.mktemp("sampler_node")
    checkpoint = train_tiny(work / "panda_sampler.npz")
    # A copy that claims another robot: must be refused.
    other = work / "other.npz"
    other.write_bytes(checkpoint.read_bytes())
    meta = json.loads(checkpoint.with_suffix(".json").read_text())
    meta["robot_name"] = "not_a_panda"
    other.with_suffix(".json").write_text(json.dumps(meta))

    cases = ((checkpoint, True, "panda_hand"), (other, False, "panda_hand"))
    cases += (("panda", True, "panda_hand_tcp"),)  # the shipped model, by name
    for index, (path, used, link) in enumerate(cases):
        env = IsolatedNode(
            f"sampler_{index}",
            work / f"node_{index}",
            [
                "--params-file", str(CONFIG), "-p", "warmup_batch_sizes:=[]", "-p", "warmup_plan:=false",
                "-p", f"sampler_checkpoint:={path}", "-p", f"tip_link:={link}",
                "-p", f"compilation_cache_dir:={work / 'cache'}",
            ],
        )  # fmt: skip
        try:
            names = [*check.JOINTS, "panda_finger_joint2"]
            publish_robot(env.session.node, check.PANDA_URDF, names, [*STATE, STATE[-1]])
            env.wait_ready("panda_hand")
            log = env.node.log()
            if used:
                assert "learned IK sampler" in log and f"'{path}'" in log, log[-2000:]
            else:
                assert "not used" in log and "not_a_panda" in log, log[-2000:]
            rng = np.random.default_rng(4)
            solved, answers = 0, []
            for _ in range(5):
                margin = 0.1 * (check.UPPER - check.LOWER)
                q = rng.uniform(check.LOWER + margin, check.UPPER - margin)
                q[-1] = 0.02
                target = check.link_pose(q, link)
                objective = IKObjective(
                    type=IKObjective.POSE, link=link, target=pose_stamped(target)
                )
                response = env.call(SolveIK, "solve_ik", SolveIK.Request(objectives=[objective]))
                answers.append((response.error_code.val, response.message))
                if response.success:
                    solved += 1
                    result = np.asarray(response.solution.position)
                    p_err, r_err = pose_errors(target, check.link_pose(result, link))
                    assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3
                    assert check.within_limits(result)
            assert solved >= 4, f"case {index} ({path}, {link}): {answers}"
            assert env.node.alive()
        finally:
            env.close()
