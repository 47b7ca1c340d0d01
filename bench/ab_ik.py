#!/usr/bin/env python3
"""A/B of inverse kinematics: one commit ("before") against another or this checkout.

Each side runs its *own* ``bench/ik_benchmark.py`` on the Panda (``--robots panda``) with the
two figures the restructure's goal names: ``pyroki_ros-stream`` (``IKSolver.pose_solver``, one
target per call: the median latency) and ``pyroki_ros-batch`` (all targets in one call: the
throughput), in a fresh process with ``PYTHONPATH`` at its own tree, a commit checked out in a
temporary worktree (:class:`ab_trajopt.Side`, removed at the end). Protocol:

* same targets on both sides: the benchmark draws them from its seed (``--seed``, default 0)
  with the reference FK; each run's success (by the benchmark's own check) is printed, so a
  side that solved its problems differently would show;
* runs interleaved A, B, A, B, ... for ``--rounds``, each a fresh process (the benchmark's
  own warm-up and best-of-passes rule for the latency apply to both sides alike);
* per side: the median over rounds of each figure, with its range; the ratio after / before
  of the latency medians and of the throughputs (> 1: the after side is slower, resp.
  faster);
* recorded: machine, load average at the start and end, date, both commits.

Usage (repository root; ~1-2 min per run on 2 shared CPU cores)::

    .venv/bin/python bench/ab_ik.py --before 629dcc7 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from common import host, loadavg, utc_now

import numpy as np
from ab_trajopt import WORKTREE, Side

SOLVERS = ("pyroki_ros-stream", "pyroki_ros-batch")


def run(side: Side, args, out: Path) -> dict:
    """One run of the side's IK benchmark: {solver: row} (rows as the benchmark writes them)."""
    command = [sys.executable, "bench/ik_benchmark.py", "--robots", "panda"]
    command += ["--solvers", ",".join(SOLVERS), "--n", str(args.n), "--seed", str(args.seed)]
    done = side.run(command + ["--json", str(out)], args.timeout)
    if done.returncode or not out.exists():
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise RuntimeError(f"{side.label} ({side.name}) failed: {tail}")
    rows = json.loads(out.read_text())["rows"]
    return {r["solver"]: r for r in rows if r.get("solver") in SOLVERS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="commit of the before side")
    parser.add_argument("--after", default=WORKTREE, help="commit, or this checkout (default)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--n", type=int, default=1000, help="targets (default 1000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    args = parser.parse_args(argv)

    sides = [Side("before", args.before), Side("after", args.after)]
    start_load, start = loadavg(), utc_now()
    results: dict[str, list[dict]] = {s.label: [] for s in sides}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                for side in sides:
                    row = run(side, args, Path(tmp) / f"{side.label}_{r}.json")
                    results[side.label].append(row)
                    stream, batch = row["pyroki_ros-stream"], row["pyroki_ros-batch"]
                    print(
                        f"round {r + 1} {side.label} ({side.name}): pose_solver median "
                        f"{stream['median_ms']:.4f} ms ({100 * stream['success']:.1f} %), batch "
                        f"{batch['throughput']:,.0f} /s ({100 * batch['success']:.1f} %)",
                        flush=True,
                    )
    finally:
        for side in sides:
            side.remove()

    def summary(label: str) -> tuple[float, float]:
        latency = [r["pyroki_ros-stream"]["median_ms"] for r in results[label]]
        rate = [r["pyroki_ros-batch"]["throughput"] for r in results[label]]
        print(
            f"{label}: pose_solver median {np.median(latency):.4f} ms "
            f"({min(latency):.4f}-{max(latency):.4f}), batch {np.median(rate):,.0f} /s "
            f"({min(rate):,.0f}-{max(rate):,.0f})"
        )
        return float(np.median(latency)), float(np.median(rate))

    print(f"{start} -> {utc_now()} on {host()}; load {start_load} -> {loadavg()}")
    for side in sides:
        print(f"{side.label}: {side.describe()}")
    (lat_b, rate_b), (lat_a, rate_a) = summary("before"), summary("after")
    print(
        f"after / before: pose_solver median {lat_a / lat_b:.3f} (> 1: slower), "
        f"batch throughput {rate_a / rate_b:.3f} (< 1: slower)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
