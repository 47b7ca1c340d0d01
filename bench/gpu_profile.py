#!/usr/bin/env python3
"""Which kernels a batched IK solve spends its device time in: one traced call per batch size
(``jax.profiler.trace`` with a Perfetto trace), events summed by name.

Usage (repository root; needs only the core's dependencies)::

    python bench/gpu_profile.py --batches 1,1000,16384 --out /tmp/profile.md

For each batch: wall time of the traced call, the loop's trips (the largest LM iteration
count of a target bounds them), and the 15 event names with the most total time (count,
total, mean).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import REPO


def hand_targets(robot, count: int, rng) -> np.ndarray:
    """(count, 7) reachable hand poses wxyz_xyz: FK of random configurations in the limits."""
    import jax.numpy as jnp

    from pyroki_ros import forward_kinematics

    lower, upper = np.asarray(robot.limits.bounds).reshape(-1, 2).T
    q = rng.uniform(lower, upper, (count, robot.n_joints))
    poses = np.asarray(forward_kinematics(robot, jnp.asarray(q, robot.dtype)).wxyz_xyz)
    return poses[:, robot.link_index("panda_hand")]


def events(trace_dir: Path) -> list[dict]:
    files = sorted(trace_dir.rglob("perfetto_trace.json.gz"))
    if not files:
        return []
    with gzip.open(files[-1], "rt") as f:
        data = json.load(f)
    return [e for e in data.get("traceEvents", data) if e.get("ph") == "X" and "dur" in e]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="1,1000,16384")
    parser.add_argument("--out")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    import jax

    from pyroki_ros import Robot
    from pyroki_ros import objectives as O
    from pyroki_ros.ik import IKSolver

    robot = Robot.from_urdf(str(REPO / "pyroki_ros/robots/panda.urdf"))
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    solver = IKSolver(robot)
    rng = np.random.default_rng(0)
    lines = [f"device: {jax.devices()}", ""]
    for batch in (int(b) for b in args.batches.split(",")):
        objective = O.pose("panda_hand", hand_targets(robot, batch, rng))
        solver.solve(objective, active_joints=arm)  # compiles
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            with jax.profiler.trace(tmp, create_perfetto_trace=True):
                result = solver.solve(objective, active_joints=arm)
            wall = time.perf_counter() - start
            found = events(Path(tmp))
        totals: dict[str, list[float]] = collections.defaultdict(list)
        for e in found:
            totals[e["name"]].append(float(e["dur"]))
        lines += [
            (
                f"## batch {batch}: {wall * 1e3:.1f} ms traced (solve_seconds "
                f"{result.solve_seconds * 1e3:.1f} ms), success {int(result.success.sum())}/{batch}, "
                f"LM iterations max {int(result.iterations.max())}, {len(found)} events"
            ),
            "",
            "| event | count | total ms | mean us |",
            "|---|---|---|---|",
        ]
        ranked = sorted(totals.items(), key=lambda kv: -sum(kv[1]))[: args.top]
        for name, durations in ranked:
            lines.append(
                f"| {name[:90]} | {len(durations)} | {sum(durations) / 1e3:.2f} | "
                f"{np.mean(durations):.1f} |"
            )
        lines.append("")
        print("\n".join(lines[-(len(ranked) + 5) :]), flush=True)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
