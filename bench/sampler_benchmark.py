#!/usr/bin/env python3
"""Learned IK sampler benchmark: sample accuracy, diversity, throughput, and seeding the solver.

Per robot chain: train a sampler for a bounded time (or load a checkpoint from --models), then

* raw samples: K per target for N targets (the tip poses of uniform random chain
  configurations); position error mean / median, % within 1 cm and 10 cm, orientation error
  for pose samplers, at the model's sampling settings (its checkpoint's ``temperature`` and
  ``mixture_temperature``); the same at temperature 0.5, the same with the trained mixture
  as it is (both temperatures 1), and the best of the K by FK error;
* diversity: mean standard deviation of a target's K samples in joint space (rad), and the
  number of distinct solutions among its accurate (< 10 cm) samples (greedy clusters, 0.5 rad
  apart in the max-norm over the chain joints);
* sampling throughput (1000 targets x K in one call, after warm-up);
* the solver, one target per call: its own strategy (start at the middle of the limits, then
  quasi-random restarts) against the sampler's best-of-K as seed, against a batched solve
  from all K samples, and against the fallback rule (the solver's first attempt, the best of
  K samples only where it fails): success (solver tolerances 1 mm / 1 degree), median
  iterations, median latency per target (sampling included);
* hard targets (``--hard N``, 0 = skip): from a pool of random targets, those the solver's
  first attempt leaves unsolved, i.e. the ones that need its restarts. Each has a start
  configuration: the middle of the limits (``--start middle``, the solver's default seed), or
  a uniform random configuration (``--start random``: the robot's current state in the node,
  fixed seed). Plain restarts from that start, the best of K as the seed, and the fallback
  rule from that start, timed interleaved (every round times each target with each strategy,
  the order rotating) over ``--hard-rounds`` rounds: success, median iterations, median and
  p95 latency; ``--timeout 0.1`` gives every call the node's default budget (the plain
  solver then also runs its first attempt as a call of its own). The issue 20 goal:
  fallback success >= plain, median <= 0.8x plain.

Examples (repository root)::

    .venv/bin/python bench/sampler_benchmark.py --robots arm4 --train-seconds 120
    .venv/bin/python bench/sampler_benchmark.py --robots panda --train-seconds 900 \\
        --models /tmp/sampler_models --json /tmp/sampler.json
    # pose targets (position + orientation; orientation errors, % within 10 degrees)
    .venv/bin/python bench/sampler_benchmark.py --robots panda --mode pose \\
        --train-seconds 600 --models /tmp/sampler_models --json /tmp/sampler_pose.json
    # the models shipped in the package (IKSampler.pretrained), hard targets from random starts
    .venv/bin/python bench/sampler_benchmark.py --robots panda,ur5 --shipped \\
        --hard 100 --start random --json /tmp/sampler_shipped.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import time
from pathlib import Path

from common import REPO, loadavg, machine_line, time_calls

import jax
import numpy as np

from pyroki_ros import Robot
from pyroki_ros.ik import DEFAULT_ITERATIONS_PER_RESTART, IKSolver
from pyroki_ros.robots import urdf_path
from pyroki_ros.sampler import IKSampler, TrainConfig, checkpoint_path, train
from pyroki_ros.sampler.core import tip_pose
from pyroki_ros.sampler.seeding import best_samples, objective_for, seeded_solve

ROBOTS = {  # name: (URDF, tip)
    "panda": (str(urdf_path("panda")), "panda_hand_tcp"),
    "arm4": (str(REPO / "bench/robots/arm4.urdf"), "tool"),
    "ur5": (str(urdf_path("ur5")), "tool0"),
}


def targets_for(sampler: IKSampler, n: int, seed: int) -> np.ndarray:
    robot, spec = sampler.robot, sampler.spec
    q = np.tile(sampler.rest, (n, 1))
    random = np.asarray(robot.random_configurations(jax.random.PRNGKey(seed), (n,)))
    q[:, list(spec.chain)] = random[:, list(spec.chain)]
    pose = np.asarray(jax.jit(tip_pose, static_argnums=(1, 2))(robot, spec.tip, spec.base, q))
    return pose[:, 4:] if spec.mode == "position" else pose


def clusters(q: np.ndarray, threshold: float = 0.5) -> int:
    """Greedy count of solutions more than ``threshold`` apart (max-norm) among q (k, n)."""
    centers: list[np.ndarray] = []
    for qi in q:
        if all(np.abs(qi - c).max() > threshold for c in centers):
            centers.append(qi)
    return len(centers)


def error_stats(pos: np.ndarray, rot: np.ndarray) -> dict:
    """Position (m) and orientation (rad) errors of samples: means, medians, shares within."""
    return {
        "pos_mean_cm": 100 * float(pos.mean()),
        "pos_median_cm": 100 * float(np.median(pos)),
        "within_1cm": 100 * float((pos < 0.01).mean()),
        "within_10cm": 100 * float((pos < 0.1).mean()),
        "rot_mean_deg": math.degrees(float(rot.mean())),
        "rot_median_deg": math.degrees(float(np.median(rot))),
        "rot_within_10deg": 100 * float((rot < math.radians(10)).mean()),
    }


def sample_stats(
    sampler: IKSampler,
    targets,
    k: int,
    temperature: float | None = None,
    mixture_temperature: float | None = None,
) -> dict:
    """Raw-sample statistics; temperatures None: the model's own (its checkpoint's)."""
    chain = list(sampler.spec.chain)
    q = sampler.sample(
        targets, k, seed=1, temperature=temperature, mixture_temperature=mixture_temperature
    )
    pos, rot = sampler.errors(targets[:, None], q)
    accurate = pos < 0.1
    n_clusters = [clusters(q[i][accurate[i]][:, chain]) for i in range(len(targets))]
    return {
        **error_stats(pos, rot),
        "spread_rad": float(q[..., chain].std(axis=1).mean()),
        "clusters": float(np.mean(n_clusters)),
    }


def throughput(sampler: IKSampler, targets, k: int) -> float:
    batch = np.resize(targets, (1000, targets.shape[-1]))
    sampler.sample(batch, k)  # compile
    seeds = itertools.count()
    calls = time_calls(
        lambda: sampler.sample(batch, k, seed=next(seeds)), min_repeats=3, max_repeats=3
    )
    return len(calls.wall) * 1000 * k / float(calls.wall.sum())


def solver_stats(sampler: IKSampler, targets, k: int, n: int) -> dict:
    solver = IKSolver(sampler.robot)
    active = [sampler.robot.joint_names[i] for i in sampler.spec.chain]
    options = {"active_joints": active}
    runs = {
        "solver restarts": lambda t: solver.solve(objective_for(sampler, t), **options),
        f"best of {k} samples as seed": lambda t: seeded_solve(
            solver, sampler, t, k=k, strategy="best", **options
        ),
        f"all {k} samples as seeds": lambda t: seeded_solve(
            solver, sampler, t, k=k, strategy="all", **options
        ),
        f"fallback: best of {k} after a failed first attempt": lambda t: seeded_solve(
            solver, sampler, t, k=k, strategy="fallback", **options
        ),
    }
    out = {}
    for name, run in runs.items():
        run(targets[0])  # compile
        rows = []
        for t in targets[:n]:
            start = time.perf_counter()
            result = run(t)
            rows.append((time.perf_counter() - start, bool(result.success), int(result.iterations)))
        seconds, success, iterations = map(np.asarray, zip(*rows))
        out[name] = {
            "success": 100 * float(success.mean()),
            "median_iterations": float(np.median(iterations)),
            "median_ms": 1e3 * float(np.median(seconds)),
            "p95_ms": 1e3 * float(np.percentile(seconds, 95)),
        }
    return out


def hard_targets(sampler: IKSampler, solver: IKSolver, n: int, pool: int, start: str):
    """Up to ``n`` targets of a pool of ``pool`` random ones that the solver's first attempt
    (from their start) leaves unsolved, with those starts: (targets, starts, share hard)."""
    robot = sampler.robot
    targets = targets_for(sampler, pool, seed=2025)
    if start == "random":
        starts = np.asarray(robot.random_configurations(jax.random.PRNGKey(7), (pool,)), float)
    else:
        starts = np.tile(robot.limits.center(), (pool, 1))
    active = [robot.joint_names[i] for i in sampler.spec.chain]
    first = solver.solve(
        objective_for(sampler, targets),
        seed=starts,
        active_joints=active,
        max_iterations=DEFAULT_ITERATIONS_PER_RESTART,
    )
    hard = np.flatnonzero(~first.success)
    return targets[hard[:n]], starts[hard[:n]], float(len(hard) / pool)


def hard_stats(
    sampler: IKSampler, k: int, n: int, pool: int, start: str, rounds: int, timeout: float
) -> dict:
    """Plain restarts, best of ``k`` as seed and the fallback rule on hard targets, one
    target per call, timed interleaved over ``rounds`` rounds; ``timeout`` (s, 0 = none) for
    every call (with one, the plain solver also runs its first attempt as a call of its own,
    as in the node)."""
    solver = IKSolver(sampler.robot)
    targets, starts, share = hard_targets(sampler, solver, n, pool, start)
    out = {"pool": pool, "start": start, "timeout": timeout, "hard_share": 100 * share}
    out["targets"] = len(targets)
    print(f"hard targets: {len(targets)} of {pool} ({100 * share:.2f} % hard)", flush=True)
    if not len(targets):
        return out
    active = [sampler.robot.joint_names[i] for i in sampler.spec.chain]
    options = {"active_joints": active, "timeout": timeout}
    runs = {
        "solver restarts": lambda t, q0: solver.solve(
            objective_for(sampler, t), seed=q0, **options
        ),
        f"best of {k} samples as seed": lambda t, q0: seeded_solve(
            solver, sampler, t, k=k, strategy="best", **options
        ),
        f"fallback: best of {k} after a failed first attempt": lambda t, q0: seeded_solve(
            solver, sampler, t, k=k, strategy="fallback", start=q0, **options
        ),
    }
    names = list(runs)
    for run in runs.values():
        run(targets[0], starts[0])  # compile
        run(targets[-1], starts[-1])
    rows = {name: [] for name in names}
    for r in range(rounds):
        for i, (t, q0) in enumerate(zip(targets, starts)):
            shift = (r + i) % len(names)
            for name in names[shift:] + names[:shift]:
                begin = time.perf_counter()
                result = runs[name](t, q0)
                seconds = time.perf_counter() - begin
                rows[name].append((seconds, bool(result.success), int(result.iterations)))
    for name in names:
        seconds, success, iterations = map(np.asarray, zip(*rows[name]))
        out[name] = {
            "success": 100 * float(success.mean()),
            "median_iterations": float(np.median(iterations)),
            "median_ms": 1e3 * float(np.median(seconds)),
            "p95_ms": 1e3 * float(np.percentile(seconds, 95)),
        }
    plain = out["solver restarts"]["median_ms"]
    for name in names[1:]:
        out[name]["median_vs_plain"] = out[name]["median_ms"] / plain
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--robots", default="arm4,ur5,panda")
    parser.add_argument("--mode", choices=("position", "pose"), default="position")
    parser.add_argument("--train-seconds", type=float, default=300.0)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--generated", choices=("all", "film"), default="film")
    parser.add_argument("--hyper-hidden", default="256,256")
    parser.add_argument("--joint-hidden", type=int, default=64)
    parser.add_argument("--components", type=int, default=8)
    parser.add_argument("--models", help="folder of checkpoints: load <robot>_<mode>.npz if there")
    parser.add_argument(
        "--shipped",
        action="store_true",
        help="use the models shipped in the package (IKSampler.pretrained(robot)); no training",
    )
    parser.add_argument(
        "--hard", type=int, default=100, help="hard targets for the seeding rule (0 = skip)"
    )
    parser.add_argument("--hard-pool", type=int, default=4000, help="random targets to pick from")
    parser.add_argument("--hard-rounds", type=int, default=5, help="timed calls per hard target")
    parser.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="s, every hard-target call's budget (0 = none; the node's default is 0.1)",
    )
    parser.add_argument(
        "--start",
        choices=("middle", "random"),
        default="random",
        help="hard targets' start: the middle of the limits or a random configuration",
    )
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--solver-targets", type=int, default=100)
    parser.add_argument("-k", type=int, default=16)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()

    results = {
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{machine_line()}, load average at start {loadavg()}",
        "args": vars(args),
        "robots": {},
    }
    for name in args.robots.split(","):
        urdf, tip = ROBOTS[name]
        robot = Robot.from_urdf(urdf)
        path = Path(args.models) / f"{name}_{args.mode}.npz" if args.models else None
        if args.shipped:
            sampler = IKSampler.pretrained(name, robot)
            if sampler.spec.mode != args.mode:
                raise SystemExit(f"{name}: the shipped model is for {sampler.spec.mode} targets")
            print(f"{name}: shipped model {checkpoint_path(name)}")
        elif path is not None and path.exists():
            sampler = IKSampler.load(path, robot)
            print(f"{name}: loaded {path}")
        else:
            config = TrainConfig(
                steps=10**7,
                max_seconds=args.train_seconds,
                batch_size=args.batch_size,
                learning_rate=args.lr,
                chunk=20,
            )
            sampler = train(
                robot,
                tip,
                mode=args.mode,
                config=config,
                hyper_hidden=tuple(int(x) for x in args.hyper_hidden.split(",")),
                joint_hidden=args.joint_hidden,
                components=args.components,
                generated=args.generated,
                log=lambda line, name=name: print(f"{name}: {line}", flush=True),
            )
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                sampler.save(path)
        targets = targets_for(sampler, args.targets, seed=2024)
        row = {
            "training": sampler.spec.training,
            "model": sampler.spec.model.to_json(),
            "chain_joints": len(sampler.spec.chain),
            "raw": sample_stats(sampler, targets, args.k),
            "raw_t0.5": sample_stats(sampler, targets, args.k, temperature=0.5),
            # the model's sampling settings, and the trained mixture as it is (both at 1)
            "temperature": sampler.spec.temperature,
            "mixture_temperature": sampler.spec.mixture_temperature,
            "raw_as_trained": sample_stats(
                sampler, targets, args.k, temperature=1.0, mixture_temperature=1.0
            ),
            "samples_per_s": throughput(sampler, targets, args.k),
        }
        best, _ = best_samples(sampler, targets, args.k, seed=1)
        row["best_of_k"] = error_stats(*sampler.errors(targets, best))
        row["solver"] = solver_stats(sampler, targets, args.k, args.solver_targets)
        if args.hard > 0:
            row["hard"] = hard_stats(
                sampler,
                args.k,
                args.hard,
                args.hard_pool,
                args.start,
                args.hard_rounds,
                args.timeout,
            )
        results["robots"][name] = row
        print(json.dumps({name: row}, indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
