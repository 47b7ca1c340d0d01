#!/usr/bin/env python3
"""One report of everything the GPU issue measures, on whatever device JAX has.

Needs only the core's dependencies (numpy, jax, jaxlie, yourdfpy; optax for the sampler rows,
PyYAML for the MotionBenchMaker rows: each group is skipped with a note when its package is
missing) and never imports rclpy. Prints a markdown table and, with ``--out`` (default
docs/benchmarks/gpu.md with ``--full``), puts it into that file between markers named after
the device and mode, so a CPU and a GPU report can stand side by side.

Rows (each success count re-checked independently, never taken from the solver alone):

* device: ``jax.devices()``, platform, kind, count (batches are split over all of them);
* FK: all Panda links for batches of configurations, configurations/s;
* IK (Panda hand, 1 mm / 1 deg): batches of random reachable targets, one call each: time of
  the best timed call after a compiling one, success; every reported success verified by a
  float64 numpy FK written from the URDF (test/batched_reference.py: test/reference_fk.py's
  parser and conventions, batched) and the joint limits;
* single-target latency: ``pose_solver`` one target per call, median / p95, verified;
* trajectory optimisation, T knots, 2 cm margin, random scenes (10 obstacles,
  bench/scenes.py): ``plan`` one pair at a time, and ``plan_batch(batched=True,
  replan_failures=False)`` (one vmapped solve: the GPU mode) per batch size. Verified: goal
  1 mm / 1 deg by the numpy FK, limits, no penetration of any obstacle or self pair at the
  knots and 10 points inside every segment (numpy distances of test/batched_reference.py,
  test/collision_reference.py's self pairs);
* the 5 MotionBenchMaker demo problems (bookshelf, ``--mbm``): ``plan`` and the batched path
  per problem (each has its own scene, and ``plan_batch`` takes one world per call); the
  planner sees the cylinders as cylinders (``mbm_benchmark.to_world``) and no spheres on
  ``panda_link0`` (it sits on the stand); verified as robometrics does: goal 1 mm / 1 deg,
  limits, every robometrics sphere but link0's clear of the exact cuboids and cylinders, 20
  points per segment;
* learned IK sampler: training steps/s for ``--train-seconds`` and the mean raw position
  error then (numpy FK), sampling throughput (1000 targets x K).

Usage (repository root)::

    .venv/bin/python bench/gpu_report.py --quick            # CPU sizes, a few minutes
    .venv/bin/python bench/gpu_report.py --full             # GPU sizes -> docs/benchmarks/gpu.md
    .venv/bin/python bench/gpu_report.py --only ik,latency  # some groups only

Without ``--quick`` / ``--full`` the sizes follow the device (quick on a CPU).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import math
import os
import platform
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/, also when run by runpy
# common first: it puts this checkout and test/ (numpy-only references) on sys.path
from common import (
    REPO,
    commit_of,
    host,
    loadavg,
    stats_ms,
    time_calls,
    version,
    write_between_markers,
)

from batched_reference import Chain, box_signed_distance, cylinder_signed_distance
from reference_fk import quat_wxyz_to_matrix

GROUPS = ("fk", "ik", "latency", "plan", "mbm", "sampler")
POS_TOL, ROT_TOL = 1e-3, math.radians(1.0)
TIP = "panda_hand"
SAMPLER_TIP = "panda_hand_tcp"  # as bench/sampler_benchmark.py


@dataclass(frozen=True)
class Sizes:
    fk: tuple[int, ...]
    ik: tuple[int, ...]
    latency: int
    plans: int  # single plans (one pair per call)
    plan_batches: tuple[int, ...]
    steps: int
    mbm_problems: int
    train_seconds: float
    train_batch: int
    train_chunk: int  # steps per jitted call (and between time checks)
    sample_k: int
    segment_samples: int  # verification points inside each segment (random scenes)


QUICK = Sizes((1, 1024, 16384), (1, 100, 1000), 200, 4, (1, 4), 64, 5, 20.0, 512, 10, 8, 10)
FULL = Sizes(
    (1, 1024, 65536),
    (1, 100, 1000, 10000, 100000),
    1000,
    16,
    (1, 16, 64, 256),
    64,
    5,
    60.0,
    1024,
    50,
    32,
    10,
)


@dataclass
class Row:
    group: str
    what: str
    size: str = ""
    time: str = ""
    rate: str = ""
    success: str = ""
    verified: str = ""
    note: str = ""


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)
        cells = [row.what, row.size, row.time, row.rate, row.success, row.verified, row.note]
        print("  " + " | ".join(c for c in cells if c), flush=True)


# --- formatting -------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    if seconds < 10:
        return f"{seconds * 1e3:,.1f} ms"
    return f"{seconds:,.1f} s"


def median_p95(seconds) -> str:
    stats = stats_ms(seconds)
    return f"median {ms(stats['p50'] / 1e3)}, p95 {ms(stats['p95'] / 1e3)}"


def per_second(count: float, seconds: float, unit: str) -> str:
    if not seconds > 0:
        return "n/a"
    rate = count / seconds
    digits = 0 if rate >= 100 else 1 if rate >= 1 else 2
    return f"{rate:,.{digits}f} {unit}/s"


def fraction(k: int, n: int) -> str:
    return f"{k}/{n} ({100.0 * k / n:.1f} %)" if n else "0/0"


# --- independent float64 kinematics and distances (numpy; no pyroki_ros code) ----------------


class NumpyFK(Chain):
    """test/batched_reference.py's float64 FK (not pyroki_ros'), configurations in the order
    of ``joint_names`` (the robot's)."""

    def __init__(self, urdf_text: str, joint_names):
        super().__init__(urdf_text)
        self._columns = [list(joint_names).index(name) for name in self.joint_names]

    def full(self, q: np.ndarray) -> np.ndarray:
        return super().full(np.asarray(q, np.float64)[..., self._columns])


def pose_errors(poses: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position (m) and rotation angle (rad) between (N, 4, 4) poses and (N, 7) wxyz_xyz."""
    position = np.linalg.norm(poses[:, :3, 3] - targets[:, 4:], axis=1)
    relative = quat_wxyz_to_matrix(targets[:, :4]).transpose(0, 2, 1) @ poses[:, :3, :3]
    cos = np.clip((np.trace(relative, axis1=1, axis2=2) - 1) / 2, -1.0, 1.0)
    return position, np.arccos(cos)


def matrix_to_wxyz_xyz(poses: np.ndarray) -> np.ndarray:
    """(N, 4, 4) -> (N, 7) wxyz_xyz (w >= 0)."""
    r = poses[:, :3, :3]
    w = np.sqrt(np.maximum(0.0, 1 + r[:, 0, 0] + r[:, 1, 1] + r[:, 2, 2])) / 2
    x = np.sqrt(np.maximum(0.0, 1 + r[:, 0, 0] - r[:, 1, 1] - r[:, 2, 2])) / 2
    y = np.sqrt(np.maximum(0.0, 1 - r[:, 0, 0] + r[:, 1, 1] - r[:, 2, 2])) / 2
    z = np.sqrt(np.maximum(0.0, 1 - r[:, 0, 0] - r[:, 1, 1] + r[:, 2, 2])) / 2
    x = np.copysign(x, r[:, 2, 1] - r[:, 1, 2])
    y = np.copysign(y, r[:, 0, 2] - r[:, 2, 0])
    z = np.copysign(z, r[:, 1, 0] - r[:, 0, 1])
    return np.concatenate([np.stack([w, x, y, z], 1), poses[:, :3, 3]], 1)


@dataclass(frozen=True)
class Obstacles:
    """Root-frame obstacles in float64: spheres, boxes and (exact, finite) cylinders."""

    sphere_centers: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    sphere_radii: np.ndarray = field(default_factory=lambda: np.zeros(0))
    box_poses: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))  # wxyz_xyz
    box_half_extents: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    cylinder_poses: np.ndarray = field(default_factory=lambda: np.zeros((0, 7)))  # axis: z
    cylinder_radii: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cylinder_half_heights: np.ndarray = field(default_factory=lambda: np.zeros(0))


def clearance(centers: np.ndarray, radii: np.ndarray, obstacles: Obstacles) -> np.ndarray:
    """Smallest signed distance between spheres (P, S, 3) / (S,) and the obstacles: (P,)."""
    p_count, s_count = centers.shape[:2]
    flat = centers.reshape(-1, 3)
    r = np.tile(radii, p_count)
    best = np.full(len(flat), np.inf)
    if len(obstacles.sphere_radii):
        d = np.linalg.norm(flat[:, None] - obstacles.sphere_centers[None], axis=2)
        best = np.minimum(best, np.min(d - obstacles.sphere_radii[None], 1))
    if len(obstacles.box_poses):
        poses = obstacles.box_poses
        rot = quat_wxyz_to_matrix(poses[:, :4])
        d = box_signed_distance(flat, rot, poses[:, 4:], obstacles.box_half_extents)
        best = np.minimum(best, np.min(d, 1))
    if len(obstacles.cylinder_poses):
        poses = obstacles.cylinder_poses
        rot = quat_wxyz_to_matrix(poses[:, :4])
        d = cylinder_signed_distance(
            flat, rot, poses[:, 4:], obstacles.cylinder_radii, obstacles.cylinder_half_heights
        )
        best = np.minimum(best, np.min(d, 1))
    return np.min((best - r).reshape(p_count, s_count), axis=1)


class SphereCheck:
    """Sphere centres of a path's configurations by :class:`NumpyFK`, their clearance to
    obstacles and (with ``pairs``) between self-collision pairs."""

    def __init__(self, fk: NumpyFK, links, centers, radii, pairs=None):
        self.fk = fk
        self.links = list(links)
        self.centers = np.asarray(centers, np.float64)
        self.radii = np.asarray(radii, np.float64)
        self.pairs = None if pairs is None else np.asarray(pairs, int).reshape(-1, 2)

    def worst(self, q: np.ndarray, obstacles: Obstacles) -> tuple[float, float]:
        """(smallest obstacle clearance, smallest self clearance) over configurations q."""
        world, own = np.inf, np.inf
        for start in range(0, len(q), 4096):  # bounded memory
            chunk = q[start : start + 4096]
            poses = self.fk.poses(chunk, set(self.links))
            centers = np.stack(
                [
                    poses[link][:, :3, :3] @ c + poses[link][:, :3, 3]
                    for link, c in zip(self.links, self.centers)
                ],
                axis=1,
            )
            world = min(world, float(clearance(centers, self.radii, obstacles).min()))
            if self.pairs is not None and len(self.pairs):
                i, j = self.pairs[:, 0], self.pairs[:, 1]
                gaps = (
                    np.linalg.norm(centers[:, i] - centers[:, j], axis=2)
                    - self.radii[i]
                    - self.radii[j]
                )
                own = min(own, float(gaps.min()))
        return world, own


# --- the parts of the report -------------------------------------------------------------------


class Context:
    """The robot, the independent checks and the options every part uses."""

    def __init__(self, args, sizes: Sizes):
        from pyroki_ros import Robot
        from pyroki_ros.robots import urdf_path

        self.args, self.sizes = args, sizes
        self.urdf_text = urdf_path("panda").read_text()
        self.robot = Robot.from_urdf(urdf_path("panda"))
        self.arm = [j for j in self.robot.joint_names if "finger" not in j]
        self.fk = NumpyFK(self.urdf_text, self.robot.joint_names)
        self.lower, self.upper = np.array(self.robot.limits.bounds, np.float64).reshape(-1, 2).T
        self.rng = np.random.default_rng(args.seed)

    def random_q(self, count: int) -> np.ndarray:
        """Uniform in the arm's limits, fingers at the middle of theirs."""
        q = np.tile((self.lower + self.upper) / 2, (count, 1))
        arm = [self.robot.joint_index(j) for j in self.arm]
        q[:, arm] = self.rng.uniform(self.lower[arm], self.upper[arm], (count, len(arm)))
        return q

    def hand_poses(self, q: np.ndarray, link: str = TIP) -> np.ndarray:
        return matrix_to_wxyz_xyz(self.fk.poses(q, {link})[link])

    def verify_ik(self, q: np.ndarray, targets: np.ndarray, success: np.ndarray) -> int:
        """Reported successes that pass the float64 check: 1 mm / 1 deg and the limits."""
        q, targets = q.reshape(-1, q.shape[-1]), targets.reshape(-1, 7)
        position, rotation = pose_errors(self.fk.poses(q, {TIP})[TIP], targets)
        inside = np.all((q >= self.lower) & (q <= self.upper), axis=1)
        ok = (position <= POS_TOL) & (rotation <= ROT_TOL) & inside
        return int(np.sum(ok & success.reshape(-1)))

    def self_check(self) -> str:
        """The vectorised FK against test/reference_fk.py's one-configuration FK."""
        from reference_fk import reference_fk

        q = self.random_q(3)
        worst = 0.0
        for row in q:
            expected = reference_fk(self.urdf_text, row, self.robot.joint_names)
            got = self.fk.poses(row[None])
            worst = max(worst, max(float(np.abs(got[k][0] - expected[k]).max()) for k in expected))
        if worst > 1e-9:
            raise AssertionError(f"numpy FK disagrees with test/reference_fk.py by {worst:.2e}")
        return f"numpy FK = test/reference_fk.py within {worst:.1e}"


def timed(fn, repeats: int, budget: float) -> tuple[float, float, object]:
    """(first call's seconds, best later call's seconds, last result); the first call
    compiles. Later calls: up to ``repeats``, fewer when they would pass ``budget`` s."""
    start = time.perf_counter()
    fn()
    first = time.perf_counter() - start
    calls = time_calls(fn, min_repeats=repeats, max_repeats=repeats, max_seconds=budget)
    return first, float(calls.wall.min()), calls.result


def device_rows(report: Report) -> None:
    import jax

    from pyroki_ros import devices

    devs = jax.devices()
    kinds = sorted({d.device_kind for d in devs})
    report.add(
        Row(
            "device",
            "device",
            size=f"{len(devs)} x {', '.join(kinds)}",
            note=f"platform {devs[0].platform}; jax.devices() = {devs}; batches split over "
            f"{devices.device_count(devs[0].platform)} local device(s)",
        )
    )


def fk_rows(ctx: Context, report: Report) -> None:
    import jax
    import jax.numpy as jnp

    from pyroki_ros import forward_kinematics

    robot = ctx.robot
    fk = jax.jit(lambda q: forward_kinematics(robot, q).wxyz_xyz)
    for batch in ctx.sizes.fk:
        q = jnp.asarray(ctx.random_q(batch), robot.dtype)
        first, best, out = timed(lambda q=q: fk(q).block_until_ready(), 20, 2.0)
        ok = np.allclose(
            np.asarray(out)[:, robot.link_index(TIP), 4:],
            ctx.hand_poses(np.asarray(q))[:, 4:],
            atol=1e-4,
        )
        report.add(
            Row(
                "fk",
                f"FK, all {robot.n_links} Panda links",
                size=f"{batch:,} configurations",
                time=ms(best),
                rate=per_second(batch, best, "configurations"),
                note=f"first call {ms(first)}; hand position = numpy FK: {'yes' if ok else 'NO'}",
            )
        )


def ik_rows(ctx: Context, report: Report) -> None:
    from pyroki_ros import objectives as O
    from pyroki_ros.ik import IKSolver

    solver = IKSolver(ctx.robot, parallel_restarts=ctx.args.parallel_restarts)
    for batch in ctx.sizes.ik:
        targets = ctx.hand_poses(ctx.random_q(batch))
        objective = O.pose(TIP, targets)
        first, best, result = timed(
            lambda o=objective: solver.solve(o, active_joints=ctx.arm), 3, ctx.args.repeat_budget
        )
        solved = int(np.sum(result.success))
        verified = ctx.verify_ik(result.q, targets, result.success)
        report.add(
            Row(
                "ik",
                "IK, Panda hand pose, 1 mm / 1 deg",
                size=f"{batch:,} targets",
                time=ms(best),
                rate=per_second(batch, best, "targets"),
                success=fraction(solved, batch),
                verified=fraction(verified, solved),
                note=f"one call; first call {ms(first)}; LM iterations per target: "
                f"max {int(result.iterations.max())}, mean {result.iterations.mean():.1f}",
            )
        )


def latency_rows(ctx: Context, report: Report) -> None:
    from pyroki_ros.ik import IKSolver

    solver = IKSolver(ctx.robot, parallel_restarts=ctx.args.parallel_restarts)
    hand = solver.pose_solver(TIP, active_joints=ctx.arm)
    count = ctx.sizes.latency
    targets = ctx.hand_poses(ctx.random_q(count))
    hand(targets[0])  # compiles
    seconds, q, success, iterations = [], [], [], []
    for target in targets:
        start = time.perf_counter()
        answer = hand(target)
        seconds.append(time.perf_counter() - start)
        q.append(answer.q)
        success.append(bool(answer.success))
        iterations.append(int(np.asarray(answer.iterations).reshape(-1)[0]))
    success = np.asarray(success)
    verified = ctx.verify_ik(np.asarray(q), targets, success)
    report.add(
        Row(
            "latency",
            "IK single-target latency (pose_solver, one target per call)",
            size=f"{count:,} targets",
            time=median_p95(seconds),
            rate=per_second(count, float(np.sum(seconds)), "targets"),
            success=fraction(int(success.sum()), count),
            verified=fraction(verified, int(success.sum())),
            note=f"LM iterations per target: median {np.median(iterations):.0f}, "
            f"max {max(iterations)}",
        )
    )


def _verify_plans(
    ctx, check: SphereCheck, results, goals, obstacles, samples, self_too=True
) -> int:
    """Reported successes that pass: goal 1 mm / 1 deg, limits, clearance >= 0 densely."""
    import plan_check  # test/plan_check.py (imports pyroki_ros.robots: not at the top)

    ok = 0
    for result, goal in zip(results, goals):
        if not result.success:
            continue
        path = np.asarray(result.path, np.float64)
        position, rotation = pose_errors(ctx.fk.poses(path[-1:], {TIP})[TIP], goal[None])
        inside = bool(np.all((path >= ctx.lower - 1e-9) & (path <= ctx.upper + 1e-9)))
        world, own = check.worst(plan_check.dense(path, samples), obstacles)
        if position[0] <= POS_TOL and rotation[0] <= ROT_TOL and inside and world >= 0:
            ok += int(own >= 0 or not self_too)
    return ok


def _plan_rows(
    ctx, report, group, label, planner, check, cases, world, obstacles, samples, self_too
):
    from pyroki_ros import objectives as O

    sizes, steps = ctx.sizes, ctx.sizes.steps
    starts = np.stack([c[0] for c in cases])
    goals = np.stack([c[1] for c in cases])
    worlds = [c[2] for c in cases] if world is None else [world] * len(cases)
    obstacle_sets = [c[3] for c in cases] if obstacles is None else [obstacles] * len(cases)

    def each_timed(calls) -> tuple[float, list[float], list]:
        """(first call's seconds, seconds of each call, results): the first call compiles, so
        it runs once more for its time."""
        first, seconds, results = None, [], []
        for call in calls:
            if first is None:
                start = time.perf_counter()
                call()
                first = time.perf_counter() - start
            start = time.perf_counter()
            results.append(call())
            seconds.append(time.perf_counter() - start)
        return first, seconds, results

    def verified_each(results) -> int:
        return sum(
            _verify_plans(ctx, check, [r], goals[i : i + 1], obstacle_sets[i], samples, self_too)
            for i, r in enumerate(results)
        )

    # plan: one pair per call (its fallbacks: other goal configurations, bent paths, ...)
    count = min(sizes.plans, len(cases)) if group == "plan" else len(cases)
    if count:  # (--plans 0: the batched rows only)
        first, seconds, results = each_timed(
            lambda i=i: planner.plan(
                starts[i], [O.pose(TIP, goals[i])], world=worlds[i], num_steps=steps
            )
            for i in range(count)
        )
        solved = sum(r.success for r in results)
        report.add(
            Row(
                group,
                f"plan, {label}, one pair per call",
                size=f"{count} plans, T = {steps}",
                time=median_p95(seconds),
                rate=per_second(count, float(np.sum(seconds)), "plans"),
                success=fraction(solved, count),
                verified=fraction(verified_each(results), solved),
                note=f"first plan {ms(first)}",
            )
        )

    # plan_batch, batched: one vmapped solve, no fallbacks
    if world is None:  # a scene per problem: one call per problem
        first, batch_seconds, batch_results = each_timed(
            lambda i=i: planner.plan_batch(
                starts[i : i + 1],
                goals[i : i + 1],
                tip=TIP,
                world=worlds[i],
                num_steps=steps,
                batched=True,
                replan_failures=False,
            )[0]
            for i in range(count)
        )
        solved = sum(r.success for r in batch_results)
        report.add(
            Row(
                group,
                f"plan_batch(batched=True), {label}, one problem per call",
                size=f"{count} x 1 plan, T = {steps}",
                time=f"median {ms(float(np.median(batch_seconds)))}",
                rate=per_second(count, float(np.sum(batch_seconds)), "plans"),
                success=fraction(solved, count),
                verified=fraction(verified_each(batch_results), solved),
                note=f"each problem its own scene; first call {ms(first)}",
            )
        )
        return
    for batch in sizes.plan_batches:
        if batch > len(cases):
            continue
        call = lambda batch=batch: planner.plan_batch(
            starts[:batch],
            goals[:batch],
            tip=TIP,
            world=world,
            num_steps=steps,
            batched=True,
            replan_failures=False,
        )
        first, best, results = timed(call, 1, ctx.args.repeat_budget)
        solved = sum(r.success for r in results)
        verified = _verify_plans(ctx, check, results, goals[:batch], obstacles, samples, self_too)
        report.add(
            Row(
                group,
                f"plan_batch(batched=True), {label}, one call",
                size=f"{batch} plans, T = {steps}",
                time=ms(best),
                rate=per_second(batch, best, "plans"),
                success=fraction(solved, batch),
                verified=fraction(verified, solved),
                note=f"first call {ms(first)}; no re-planning of failures",
            )
        )


def plan_rows(ctx: Context, report: Report) -> None:
    from collision_reference import self_pairs
    from scenes import feasible_cases, random_obstacles  # bench/scenes.py

    from pyroki_ros.collision import RobotSpheres
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    robot = ctx.robot
    spheres = RobotSpheres.embedded("panda", robot)
    rng = np.random.default_rng(ctx.args.seed)
    world = random_obstacles(rng, 10)
    wanted = max([ctx.sizes.plans, *ctx.sizes.plan_batches])
    cases = feasible_cases(robot, spheres, world, TIP, wanted, rng)
    obstacles = Obstacles(
        sphere_centers=np.asarray(world.sphere_centers, np.float64),
        sphere_radii=np.asarray(world.sphere_radii, np.float64),
        box_poses=np.asarray(world.box_poses, np.float64),
        box_half_extents=np.asarray(world.box_half_extents, np.float64),
        cylinder_poses=np.asarray(world.cylinder_poses, np.float64),
        cylinder_radii=np.asarray(world.cylinder_radii, np.float64),
        cylinder_half_heights=np.asarray(world.cylinder_half_heights, np.float64),
    )
    links = list(spheres.link_names)
    pairs = sorted(self_pairs(ctx.urdf_text, links, spheres.ignore))
    check = SphereCheck(ctx.fk, links, spheres.centers, spheres.radii, pairs)
    planner = TrajectoryOptimizer(robot, spheres)
    _plan_rows(
        ctx,
        report,
        "plan",
        "random scenes (10 obstacles)",
        planner,
        check,
        [(c.start, c.goal_pose) for c in cases],
        world,
        obstacles,
        ctx.sizes.segment_samples,
        True,
    )


def mbm_directory(args) -> Path | None:
    candidates = (
        [Path(args.mbm)] if args.mbm else [REPO / "test/data/mbm", REPO.parent / "shared/mbm"]
    )
    for path in candidates:
        if (path / "demo_set.yaml").is_file():
            return path
    return None


def mbm_rows(ctx: Context, report: Report) -> None:
    from pyroki_ros.collision import RobotSpheres
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

    where = mbm_directory(ctx.args)
    reason = None
    if importlib.util.find_spec("yaml") is None:
        reason = "PyYAML is not installed (pip install pyyaml)"
    elif where is None:
        reason = (
            "demo_set.yaml not found in test/data/mbm or ../shared/mbm (copy ../shared/mbm into "
            "the checkout and pass --mbm DIR)"
        )
    if reason:
        report.add(Row("mbm", "plan, MotionBenchMaker demo problems", note=f"skipped: {reason}"))
        return
    import mbm_problems as mp  # the one MotionBenchMaker loader (numpy + yaml, no rclpy)
    import yaml
    from mbm_benchmark import to_world

    problems = [p for p in mp.load_problems(where / "demo_set.yaml")]
    problems = problems[: ctx.sizes.mbm_problems]
    robometrics = yaml.safe_load((where / "franka_spheres.yml").read_text())["collision_spheres"]
    robot = ctx.robot
    cases = []
    finger = (ctx.lower + ctx.upper)[robot.joint_index("panda_finger_joint1")] / 2
    for problem in problems:
        cylinders = problem.cylinders
        obstacles = Obstacles(
            box_poses=np.array([c.pose for c in problem.cuboids], np.float64).reshape(-1, 7),
            box_half_extents=np.array([c.dims for c in problem.cuboids], np.float64).reshape(-1, 3)
            / 2,
            cylinder_poses=np.array([c.pose for c in cylinders], np.float64).reshape(-1, 7),
            cylinder_radii=np.array([c.radius for c in cylinders], np.float64),
            cylinder_half_heights=np.array([c.height / 2 for c in cylinders], np.float64),
        )
        start = np.array([*problem.start, finger], np.float64)
        # The planner's world: cylinders as cylinders (as the node does).
        cases.append(
            (start, np.asarray(problem.goal_pose, np.float64), to_world(problem), obstacles)
        )
    # The planner: our spheres but link0's (it stands on the stand; robometrics skips it too).
    own = RobotSpheres.embedded("panda", robot)
    keep = [i for i, link in enumerate(own.link_names) if link != "panda_link0"]
    spheres = RobotSpheres.create(
        robot,
        [own.link_names[i] for i in keep],
        np.asarray(own.centers)[keep],
        np.asarray(own.radii)[keep],
        own.ignore,
    )
    # The check: robometrics' spheres, link0's left out; links this URDF lacks are reported.
    links, centers, radii, missing = [], [], [], []
    for link, entries in robometrics.items():
        if link == "panda_link0":
            continue
        if link not in robot.link_names:
            missing.append(link)
            continue
        for entry in entries:
            links.append(link)
            centers.append(entry["center"])
            radii.append(entry["radius"])
    check = SphereCheck(ctx.fk, links, centers, radii)
    planner = TrajectoryOptimizer(robot, spheres)
    shown = os.path.relpath(where, REPO) if where.is_relative_to(REPO.parent) else where
    _plan_rows(
        ctx,
        report,
        "mbm",
        f"MotionBenchMaker bookshelf demo ({shown})",
        planner,
        check,
        cases,
        None,
        None,
        20,
        False,
    )
    if missing:
        report.notes.append(f"robometrics spheres on links this URDF lacks, not checked: {missing}")


def sampler_rows(ctx: Context, report: Report) -> None:
    if importlib.util.find_spec("optax") is None:
        report.add(Row("sampler", "sampler training", note="skipped: optax is not installed"))
        report.add(Row("sampler", "sampler sampling", note="skipped: optax is not installed"))
        return
    from pyroki_ros.sampler import TrainConfig, train

    sizes = ctx.sizes
    config = TrainConfig(
        steps=10**9,
        batch_size=sizes.train_batch,
        chunk=sizes.train_chunk,
        max_seconds=sizes.train_seconds,
        learning_rate=2e-3,
    )
    start = time.perf_counter()
    sampler = train(ctx.robot, SAMPLER_TIP, mode="position", config=config, log=None)
    wall = time.perf_counter() - start
    info = sampler.spec.training
    steps = info["steps"] - config.chunk  # the first chunk compiled
    rate = steps / max(info["seconds"], 1e-9)
    targets_q = ctx.random_q(1000)
    targets = matrix_to_wxyz_xyz(ctx.fk.poses(targets_q, {SAMPLER_TIP})[SAMPLER_TIP])[:, 4:]
    q = sampler.sample(targets, 1, seed=3)[:, 0]
    reached = ctx.fk.poses(q, {SAMPLER_TIP})[SAMPLER_TIP][:, :3, 3]
    error = np.linalg.norm(reached - targets, axis=1)
    report.add(
        Row(
            "sampler",
            "sampler training (IKNet-style, Panda hand TCP position)",
            size=f"batch {sizes.train_batch}, {info['seconds']:.0f} s",
            time=f"{wall:.0f} s in all, compile {info['compile_seconds']:.1f} s",
            rate=f"{rate:,.1f} steps/s ({rate * sizes.train_batch:,.0f} samples/s)",
            note=f"mean raw position error then {100 * error.mean():.2f} cm (numpy FK, 1000 "
            f"targets; the goal: <= 1 cm after 30 min of training on a GPU)",
        )
    )
    k = sizes.sample_k
    first, best, _ = timed(lambda: sampler.sample(targets, k, seed=5), 3, ctx.args.repeat_budget)
    report.add(
        Row(
            "sampler",
            "sampler sampling",
            size=f"1,000 targets x {k}",
            time=ms(best),
            rate=per_second(1000 * k, best, "configurations"),
            note=f"first call {ms(first)}",
        )
    )


# --- the document --------------------------------------------------------------------------------


def machine_lines(args, sizes: Sizes, mode: str) -> list[str]:
    import jax

    devs = jax.devices()
    plugins = ", ".join(
        f"{name} {version(name)}"
        for name in ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda12-pjrt", "jax-cuda13-pjrt")
        if version(name) != "n/a"
    )
    commit = commit_of(args.commit)
    date = datetime.datetime.now(datetime.UTC)
    versions = [f"Python {platform.python_version()}"]
    versions += [f"{name} {version(name)}" for name in ("jax", "jaxlib")]
    versions += [plugins] if plugins else []
    versions += [f"{name} {version(name)}" for name in ("numpy", "jaxlie", "yourdfpy", "optax")]
    return [
        f"- date: {date:%Y-%m-%d %H:%M} UTC; commit {commit}",
        (
            f"- device: {devs[0].platform}, {len(devs)} x {devs[0].device_kind}; CPU "
            f"{host()}, load {loadavg()}"
        ),
        f"- {', '.join(versions)}",
        (
            f"- XLA_FLAGS: `{os.environ.get('XLA_FLAGS', '')}`; IK restarts side by side: "
            f"{ {True: 'on', False: 'off', None: 'the solver default'}[args.parallel_restarts] }"
        ),
        (
            f"- mode: {mode} (IK batches {', '.join(f'{b:,}' for b in sizes.ik)}; plan batches "
            f"{', '.join(map(str, sizes.plan_batches))}; T = {sizes.steps})"
        ),
    ]


def markdown(report: Report, header: list[str], command: str, seconds: float) -> str:
    lines = [f"Command: `{command}` ({seconds:.0f} s in all)", "", *header, ""]
    lines += [
        "| what | size | time | rate | success (solver) | verified (of the successes) | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report.rows:
        cells = [r.what, r.size, r.time, r.rate, r.success, r.verified, r.note]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    lines.append("")
    lines += [f"- {note}" for note in report.notes]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CPU sizes (the default on a CPU)")
    mode.add_argument("--full", action="store_true", help="GPU sizes (the default on a GPU)")
    parser.add_argument(
        "--out", help="markdown file to put the report in (--full: docs/benchmarks/gpu.md)"
    )
    parser.add_argument("--only", help=f"comma-separated groups of {','.join(GROUPS)}")
    parser.add_argument("--mbm", help="folder with demo_set.yaml and franka_spheres.yml")
    parser.add_argument("--commit", help="commit to record (default: git, or $PYROKI_ROS_COMMIT)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache",
        action="store_true",
        help="use the persistent compilation cache (~/.cache/pyroki_ros/xla): faster reruns, "
        "but 'first call' then measures loading, not compiling",
    )
    parser.add_argument("--repeat-budget", type=float, default=10.0, help="s per timed row")
    parser.add_argument(
        "--parallel-restarts",
        choices=("on", "off"),
        help="IK: a batch's remaining restarts side by side (IKSolver's parallel_restarts; "
        "default: the solver's for the device, on for a GPU)",
    )
    # size overrides (tests, or a tight GPU lease)
    parser.add_argument("--fk-batches")
    parser.add_argument("--ik-batches")
    parser.add_argument("--latency", type=int)
    parser.add_argument("--plans", type=int)
    parser.add_argument("--plan-batches")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--mbm-problems", type=int)
    parser.add_argument("--train-seconds", type=float)
    parser.add_argument("--train-batch", type=int)
    parser.add_argument("--train-chunk", type=int)
    parser.add_argument("--sample-k", type=int)
    parser.add_argument("--segment-samples", type=int)
    args = parser.parse_args(argv)
    args.parallel_restarts = {"on": True, "off": False, None: None}[args.parallel_restarts]

    started = time.perf_counter()
    import jax

    from pyroki_ros.ik import enable_compilation_cache

    platform_name = jax.devices()[0].platform
    full = args.full or (not args.quick and platform_name != "cpu")
    sizes = FULL if full else QUICK
    ints = lambda text: tuple(int(x) for x in text.split(","))
    overrides = {
        "fk": ints(args.fk_batches) if args.fk_batches else None,
        "ik": ints(args.ik_batches) if args.ik_batches else None,
        "latency": args.latency,
        "plans": args.plans,
        "plan_batches": ints(args.plan_batches) if args.plan_batches else None,
        "steps": args.steps,
        "mbm_problems": args.mbm_problems,
        "train_seconds": args.train_seconds,
        "train_batch": args.train_batch,
        "train_chunk": args.train_chunk,
        "sample_k": args.sample_k,
        "segment_samples": args.segment_samples,
    }
    sizes = Sizes(**{**sizes.__dict__, **{k: v for k, v in overrides.items() if v is not None}})
    groups = GROUPS if not args.only else tuple(g.strip() for g in args.only.split(","))
    unknown = set(groups) - set(GROUPS)
    if unknown:
        parser.error(f"unknown groups {sorted(unknown)}; choose from {','.join(GROUPS)}")
    cache = "off: every first call compiles"
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        cache = f"{os.environ['JAX_COMPILATION_CACHE_DIR']} (JAX_COMPILATION_CACHE_DIR)"
    elif args.cache:  # as the CLI and the node: a second run loads instead of compiling
        directory = enable_compilation_cache()
        cache = f"{directory}, {sum(1 for _ in directory.iterdir())} entries at the start"
    mode_name = "full" if full else "quick"
    print(f"[gpu-report] {platform_name}, {mode_name} sizes: {sizes}", flush=True)

    report = Report()
    ctx = Context(args, sizes)
    report.notes.append(ctx.self_check())
    device_rows(report)
    parts = {
        "fk": fk_rows,
        "ik": ik_rows,
        "latency": latency_rows,
        "plan": plan_rows,
        "mbm": mbm_rows,
        "sampler": sampler_rows,
    }
    for group in groups:
        t0 = time.perf_counter()
        print(f"[gpu-report] {group} ...", flush=True)
        parts[group](ctx, report)
        print(f"[gpu-report] {group}: {time.perf_counter() - t0:.0f} s", flush=True)

    # (a None entry is a module blocked from importing, as the tests do: not imported)
    ros = sorted(m for m, v in sys.modules.items() if m.partition(".")[0] == "rclpy" and v)
    report.notes.append(f"rclpy imported: {'yes (' + ', '.join(ros) + ')' if ros else 'no'}")
    command = "python " + " ".join(
        shlex.quote(a)
        for a in [os.path.relpath(__file__, REPO), *(sys.argv[1:] if argv is None else argv)]
    )
    elapsed = time.perf_counter() - started
    header = [*machine_lines(args, sizes, mode_name), f"- persistent compilation cache: {cache}"]
    text = markdown(report, header, command, elapsed)
    print(text)
    out = args.out or (str(REPO / "docs/benchmarks/gpu.md") if full else None)
    if out:
        key = f"{platform_name}-{mode_name}" + ("-" + "-".join(groups) if args.only else "")
        title = f"{platform_name.upper()}, {mode_name} sizes" + (
            f" ({', '.join(groups)})" if args.only else ""
        )
        write_between_markers(
            Path(out),
            f"<!-- gpu-report:{key}:begin -->",
            f"<!-- gpu-report:{key}:end -->",
            f"## {title}\n\n{text}",
            new_file="# GPU report\n",
        )
        print(f"[gpu-report] written to {out} (section {key})")
    return 1 if ros else 0


if __name__ == "__main__":
    sys.exit(main())
