#!/usr/bin/env python3
"""IK benchmark: pyroki_ros against its peers, on the protocol of shared/benchmarks.md.

Protocol (per robot):

* N joint configurations drawn uniformly inside the limits of the base->tip chain with a fixed
  seed (continuous joints: [-pi, pi]); their tip poses, computed by the independent float64
  reference FK in ``test/reference_fk.py``, are the targets.
* Every solver starts from the same seed, the midpoint of the limits; restarts count only
  where a solver does them itself, inside the time it is charged for.
* Success: position error < 1 mm AND orientation error < 1 degree, both checked here with the
  reference FK (not with the solver's own claim), AND every bounded chain joint inside its
  limits (within 1e-6 rad/m, for float32 round-off of the limit values).
* Reported per solver: success %, inside-limits %, median / p95 single-target latency (one
  target per call in a Python loop, timed around the call as a user writes it, objective
  construction included), throughput after warm-up (batch call where the solver has one,
  else N / loop time), compile time (first call minus a steady call), peak RSS of the solver's
  own process (VmHWM) and its growth over the RSS after imports.

Every solver runs in its own subprocess (``--worker``), so memory figures and JAX/torch state
do not leak from one to the next. A peer that cannot be imported is reported as skipped.

Examples (from the repository root, system python3)::

    python3 bench/ik_benchmark.py --quick
    python3 bench/ik_benchmark.py --markdown docs/benchmarks/ik.md --json /tmp/ik.json
    python3 bench/ik_benchmark.py --robots panda --solvers pyroki_ros,pyroki_ros-cli,tracik-5ms

Extra requirements of the peers: bench/requirements-ik.txt.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from common import REPO, git_rev, loadavg, machine, utc_now, version

import numpy as np

POS_TOL = 1e-3  # m
ROT_TOL = math.radians(1.0)  # rad
LIMIT_SLACK = 1e-6  # rad or m: float32 copies of a limit may exceed the float64 value
SKIPPED_EXIT = 3  # worker exit code: the peer is not available here


@dataclass(frozen=True)
class RobotSpec:
    urdf: str  # relative to the repository root
    base: str
    tip: str
    note: str = ""


ROBOTS = {
    "panda": RobotSpec(
        "pyroki_ros/robots/panda.urdf",
        "panda_link0",
        "panda_hand",
        "7 DoF; finger joints held at their midpoint",
    ),
    "ur5": RobotSpec("pyroki_ros/robots/ur5.urdf", "world", "tool0", "6 DoF, +-2pi joints"),
    "xarm7": RobotSpec("test/data/robots/xarm7.urdf", "world", "link_eef", "7 DoF, +-2pi joints"),
    "kinova": RobotSpec(
        "test/data/robots/kinova.urdf",
        "base",
        "j2s6s200_end_effector",
        "6 DoF, 3 continuous joints",
    ),
    "so100": RobotSpec(
        "test/data/robots/so100.urdf",
        "base",
        "gripper",
        "5 DoF: 6-D targets reachable only because they come from FK",
    ),
}
DEFAULT_ROBOTS = ("panda", "ur5", "xarm7", "kinova")


@dataclass(frozen=True)
class SolverSpec:
    label: str
    mode: str  # single | batch | cli
    doc: str


SOLVERS = {
    "pyroki_ros": SolverSpec("pyroki_ros", "single", "IKSolver.solve, one target per call"),
    "pyroki_ros-stream": SolverSpec(
        "pyroki_ros (pose_solver)", "single", "IKSolver.pose_solver, one target per call"
    ),
    "pyroki_ros-batch": SolverSpec("pyroki_ros", "batch", "IKSolver.solve, all N in one call"),
    "pyroki_ros-cli": SolverSpec(
        "pyroki-ros ik (CLI)", "cli", "python3 -m pyroki_ros.cli ik, npz in/out"
    ),
    "tracik-5ms": SolverSpec("TRAC-IK (pytracik), 5 ms", "single", "Speed, eps 1e-5"),
    "tracik-20ms": SolverSpec("TRAC-IK (pytracik), 20 ms", "single", "Speed, eps 1e-5"),
    "pyroki": SolverSpec("PyRoki basic IK", "single", "one seed"),
    "pytorch-kinematics": SolverSpec("pytorch-kinematics", "batch", "PseudoInverseIK, 10 restarts"),
    "pinocchio": SolverSpec("Pinocchio DLS loop", "single", "damped least squares"),
    "ikpy": SolverSpec("ikpy", "single", "scipy least_squares"),
}
DEFAULT_SOLVERS = tuple(SOLVERS)


# ============================================================================================
# Small helpers (shared by the orchestrator and the workers)
# ============================================================================================


def proc_status_kb(field: str) -> int:
    """A memory line of /proc/self/status (VmRSS, VmHWM) in kB; -1 where unavailable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def chain_only_urdf(urdf_path: str, base: str, tip: str) -> str:
    """The URDF reduced to the links and joints on the base->tip path (for ikpy, which follows
    the first child of each link and would otherwise walk past the tip into a finger)."""
    root = ET.parse(urdf_path).getroot()
    by_child = {j.find("child").get("link"): j for j in root.findall("joint")}
    links, joints, link = [tip], [], tip
    while link != base:
        joint = by_child[link]
        joints.append(joint)
        link = joint.find("parent").get("link")
        links.append(link)
    out = ET.Element("robot", name=root.get("name", "chain"))
    for element in root.findall("link"):
        if element.get("name") in links:
            out.append(element)
    for joint in reversed(joints):
        out.append(joint)
    return ET.tostring(out, encoding="unicode")


class Skip(Exception):
    """The peer is not available on this machine (not installed / not installable)."""


# ============================================================================================
# Workers: one solver on one robot, in a process of its own
# ============================================================================================


def load_task(path: str) -> dict:
    with np.load(path, allow_pickle=False) as data:
        task = {k: data[k] for k in data.files}
    for key in ("urdf", "base", "tip", "robot"):
        task[key] = str(task[key])
    task["joint_names"] = [str(n) for n in task["joint_names"]]
    task["all_joint_names"] = [str(n) for n in task["all_joint_names"]]
    task["repeats"] = int(task["repeats"])
    return task


# Single-target loops run up to PASSES times while one pass takes under PASS_BUDGET_S; the
# pass with the lowest median latency is reported (timeit-style: the pass least disturbed by
# other jobs on a shared machine). Every pass's median goes into the notes.
PASSES = 3
PASS_BUDGET_S = 3.0


def timed_loop(solve_one, n: int, on_pass=None) -> dict:
    """Warm-up call on target 0 (timed: the compile / cold call), then passes of one timed call
    per target. ``solve_one(i)`` returns (q or None, claimed success or None);
    ``on_pass(p)`` is told when pass p starts."""
    start = time.perf_counter()
    solve_one(0)
    first = time.perf_counter() - start
    passes = []
    for p in range(PASSES):
        if on_pass is not None:
            on_pass(p)
        qs, claimed, lat = [], [], np.empty(n)
        loop_start = time.perf_counter()
        for i in range(n):
            t0 = time.perf_counter()
            q, ok = solve_one(i)
            lat[i] = time.perf_counter() - t0
            qs.append(q)
            claimed.append(ok)
        loop = time.perf_counter() - loop_start
        passes.append({"qs": qs, "claimed": claimed, "latencies": lat, "loop_seconds": loop})
        if loop > PASS_BUDGET_S:
            break
    best = min(range(len(passes)), key=lambda p: np.median(passes[p]["latencies"]))
    return {
        **passes[best],
        "first_call": first,
        "best_pass": best,
        "pass_medians": [float(np.median(p["latencies"])) for p in passes],
    }


def work_pyroki_ros(task: dict, mode: str) -> dict:
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)
    from pyroki_ros import Robot
    from pyroki_ros import objectives as O
    from pyroki_ros.ik import IKSolver

    rss0 = proc_status_kb("VmRSS")
    robot = Robot.from_urdf(task["urdf"])
    solver = IKSolver(robot)
    names = list(robot.joint_names)
    cols = [names.index(j) for j in task["joint_names"]]
    seed = (np.asarray(robot.lower, np.float64) + np.asarray(robot.upper, np.float64)) / 2
    tip, poses = task["tip"], task["poses_wxyz_xyz"]
    options = {
        "active_joints": task["joint_names"],
        "position_tolerance": POS_TOL,
        "orientation_tolerance": ROT_TOL,
    }
    meta = {
        "jax_cache": str(jax.config.jax_compilation_cache_dir),
        "device": str(solver.device),
        "dtype": str(robot.dtype),
    }
    n = len(poses)
    if mode in ("single", "stream"):
        program_seconds = np.empty((PASSES, n))
        current = [0]  # pass index
        if mode == "stream":  # the prepared path: options checked and packed once
            prepared = solver.pose_solver(tip, **options)

            def call(i):
                return prepared(poses[i], seed=seed)
        else:

            def call(i):
                return solver.solve(O.pose(tip, poses[i]), seed=seed, **options)

        def solve_one(i):
            res = call(i)
            program_seconds[current[0], i] = res.solve_seconds
            return res.q[cols], bool(res.success)

        out = timed_loop(solve_one, n, on_pass=lambda p: current.__setitem__(0, p))
        out.update(
            rss_start_kb=rss0,
            meta=meta,
            program_seconds=program_seconds[out["best_pass"]],
            iterations=None,
        )
        return out
    # batch: warm-up (compiles the bucket), then `repeats` timed calls
    start = time.perf_counter()
    solver.solve(O.pose(tip, poses), seed=seed, **options)
    first = time.perf_counter() - start
    times, program = [], []
    for _ in range(task["repeats"]):
        t0 = time.perf_counter()
        res = solver.solve(O.pose(tip, poses), seed=seed, **options)
        times.append(time.perf_counter() - t0)
        program.append(res.solve_seconds)
    meta["iterations_median"] = float(np.median(res.iterations))
    meta["iterations_max"] = int(np.max(res.iterations))
    return {
        "q": res.q[:, cols],
        "claimed": res.success,
        "batch_seconds": times,
        "first_call": first,
        "program_seconds": np.asarray(program),
        "rss_start_kb": rss0,
        "meta": meta,
    }


def work_tracik(task: dict, timeout: float) -> dict:
    try:
        import pytracik
    except ImportError as e:
        raise Skip(f"pytracik not importable ({e})") from None
    rss0 = proc_status_kb("VmRSS")
    urdf = Path(task["urdf"]).read_text()
    solver = pytracik.TRAC_IK(
        task["base"], task["tip"], urdf, timeout, 1e-5, pytracik.SolveType.Speed
    )
    if pytracik.get_num_joints(solver) != len(task["joint_names"]):
        raise RuntimeError("pytracik chain has a different joint count")
    # pytracik reads limits wrongly for URDFs with <safety_controller> (the Panda's come out
    # as [0, 0]) and as float32: set every bounded joint's limits from the URDF; keep its
    # (unbounded) values for continuous joints.
    read_lo = pytracik.get_joint_lower_bounds(solver)
    read_hi = pytracik.get_joint_upper_bounds(solver)
    cont = task["continuous"]
    lo = [read_lo[i] if cont[i] else float(task["lower"][i]) for i in range(len(cont))]
    hi = [read_hi[i] if cont[i] else float(task["upper"][i]) for i in range(len(cont))]
    pytracik.set_joint_limits(solver, lo, hi)
    seed = np.ascontiguousarray(task["seed"], np.float64)
    poses = task["poses_wxyz_xyz"]
    targets = [tuple(float(v) for v in (p[4], p[5], p[6], p[1], p[2], p[3], p[0])) for p in poses]
    ik = pytracik.ik

    def solve_one(i):
        x, y, z, qx, qy, qz, qw = targets[i]
        r = ik(solver, seed, x, y, z, qx, qy, qz, qw)
        ok = r[0] >= 0
        return (np.asarray(r[1:]) if ok else None), bool(ok)

    out = timed_loop(solve_one, len(poses))
    out.update(
        rss_start_kb=rss0,
        meta={
            "limits_read": [list(map(float, read_lo)), list(map(float, read_hi))],
            "timeout_s": timeout,
        },
    )
    return out


def work_pyroki(task: dict) -> dict:
    try:
        import pyroki  # noqa: F401
    except ImportError as e:
        raise Skip(
            "PyRoki is not on PyPI (`pip install pyroki`: no matching distribution) and "
            f"no other source is reachable here ({e})"
        ) from None
    raise Skip("pyroki is importable but this script has no adapter for its API version yet")


def work_pytorch_kinematics(task: dict, retries: int = 10) -> dict:
    try:
        import pytorch_kinematics as pk
        import torch
    except ImportError as e:
        raise Skip(f"pytorch-kinematics / torch not importable ({e})") from None
    import logging

    logging.getLogger("pytorch_kinematics").setLevel(logging.ERROR)
    rss0 = proc_status_kb("VmRSS")
    threads = int(task["torch_threads"])
    if threads > 0:
        # Default 1: with torch's default (one thread per core) a loaded 2-core machine made
        # the same batch 12x slower (OpenMP workers spinning against other processes).
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    urdf = Path(task["urdf"]).read_text()
    chain = pk.build_serial_chain_from_urdf(
        urdf, end_link_name=task["tip"], root_link_name=task["base"]
    )
    if list(chain.get_joint_parameter_names()) != task["joint_names"]:
        raise RuntimeError(f"joint order differs: {chain.get_joint_parameter_names()}")
    dtype = chain.dtype
    lower, upper = (torch.tensor(v, dtype=dtype) for v in chain.get_joint_limits())
    # restart 0 = the protocol's seed; the others uniform inside pk's own limits
    seed = torch.tensor(task["seed"], dtype=dtype)
    retry = torch.cat(
        [seed[None], lower + torch.rand(retries - 1, len(seed), dtype=dtype) * (upper - lower)]
    )
    ik = pk.PseudoInverseIK(
        chain,
        retry_configs=retry,
        joint_limits=torch.stack([lower, upper], 1),
        pos_tolerance=POS_TOL,
        rot_tolerance=ROT_TOL,
        early_stopping_any_converged=True,
    )
    mats = torch.tensor(task["poses_mat"], dtype=dtype)

    def solve(m):
        sol = ik.solve(pk.Transform3d(matrix=m))
        err = sol.err_pos + sol.err_rot
        pick = torch.where(sol.converged, torch.zeros_like(err), err).argmin(dim=1)
        pick = torch.where(sol.converged_any, sol.converged.float().argmax(dim=1), pick)
        q = sol.solutions[torch.arange(len(pick)), pick]
        return q.double().numpy(), sol.converged_any.numpy(), sol.iterations

    start = time.perf_counter()
    solve(mats)  # warm-up on the full batch, like the JAX batch solver's
    first = time.perf_counter() - start
    times = []
    for _ in range(task["repeats"]):
        t0 = time.perf_counter()
        q, claimed, iterations = solve(mats)
        times.append(time.perf_counter() - t0)
    return {
        "q": q,
        "claimed": claimed,
        "batch_seconds": times,
        "first_call": first,
        "rss_start_kb": rss0,
        "meta": {
            "threads": torch.get_num_threads(),
            "dtype": str(dtype),
            "iterations": int(iterations),
            "retries": retries,
        },
    }


def work_pinocchio(task: dict, max_iterations: int = 200, damping: float = 1e-2) -> dict:
    """A plain damped-least-squares loop on Pinocchio's FK and frame Jacobian: full steps,
    fixed damping (1e-2 was best of 1e-6 ... 1e-1 in a 100-target Panda probe), projection onto
    the limits after each step."""
    try:
        import pinocchio as pin
    except ImportError as e:
        raise Skip(f"pinocchio not importable ({e})") from None
    rss0 = proc_status_kb("VmRSS")
    # The base->tip chain alone (buildReducedModel trips over so100, whose joint and link
    # "gripper" share a name); the tip is looked up as a BODY frame for the same reason.
    path = Path(tempfile.mkdtemp(prefix="pin-")) / "chain.urdf"
    path.write_text(chain_only_urdf(task["urdf"], task["base"], task["tip"]))
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    frame = model.getFrameId(task["tip"], pin.FrameType.BODY)
    if [model.names[i] for i in range(1, model.njoints)] != task["joint_names"]:
        raise RuntimeError("pinocchio chain joints differ from the task's")
    joint_ids = [model.getJointId(n) for n in task["joint_names"]]
    idx_q = [model.joints[j].idx_q for j in joint_ids]
    nq_of = [model.joints[j].nq for j in joint_ids]  # 2 for continuous joints (cos, sin)
    bounded = np.array([nq == 1 for nq in nq_of])
    lo = np.array([model.lowerPositionLimit[i] for i in idx_q])
    hi = np.array([model.upperPositionLimit[i] for i in idx_q])

    def to_pin(angles):
        q = np.zeros(model.nq)
        for a, i, nq in zip(angles, idx_q, nq_of):
            q[i : i + nq] = (a,) if nq == 1 else (math.cos(a), math.sin(a))
        return q

    def from_pin(q):
        return np.array(
            [q[i] if nq == 1 else math.atan2(q[i + 1], q[i]) for i, nq in zip(idx_q, nq_of)]
        )

    seed = to_pin(task["seed"])
    mats = task["poses_mat"]
    world = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
    eye6 = np.eye(6)

    def solve_one(i):
        p_goal, r_goal = mats[i][:3, 3], mats[i][:3, :3]
        q = seed.copy()
        for _ in range(max_iterations):
            pin.forwardKinematics(model, data, q)
            placement = pin.updateFramePlacement(model, data, frame)
            # error in the world axes: translation, then rotation vector of R_goal R^T
            e_pos = p_goal - placement.translation
            e_rot = pin.log3(r_goal @ placement.rotation.T)
            if np.linalg.norm(e_pos) < POS_TOL and np.linalg.norm(e_rot) < ROT_TOL:
                return from_pin(q), True
            jac = pin.computeFrameJacobian(model, data, q, frame, world)
            err = np.concatenate([e_pos, e_rot])
            v = jac.T @ np.linalg.solve(jac @ jac.T + damping * eye6, err)
            q = pin.integrate(model, q, v)
            for k, col in enumerate(idx_q):  # projection onto the limits, bounded joints
                if bounded[k]:
                    q[col] = min(max(q[col], lo[k]), hi[k])
        return from_pin(q), False

    out = timed_loop(solve_one, len(mats))
    out.update(rss_start_kb=rss0, meta={"max_iterations": max_iterations, "damping": damping})
    return out


def work_ikpy(task: dict) -> dict:
    try:
        import ikpy.chain
    except ImportError as e:
        raise Skip(f"ikpy not importable ({e})") from None
    import warnings

    rss0 = proc_status_kb("VmRSS")
    tmp = Path(tempfile.mkdtemp(prefix="ikpy-"))
    path = tmp / "chain.urdf"
    path.write_text(chain_only_urdf(task["urdf"], task["base"], task["tip"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        probe = ikpy.chain.Chain.from_urdf_file(
            str(path), base_elements=[task["base"]], jax_precompile=False
        )
        mask = [i > 0 and link.joint_type != "fixed" for i, link in enumerate(probe.links)]
        chain = ikpy.chain.Chain.from_urdf_file(
            str(path), base_elements=[task["base"]], active_links_mask=mask, jax_precompile=False
        )
    active = np.array(mask)
    if [link.name for link, a in zip(chain.links, mask) if a] != task["joint_names"]:
        raise RuntimeError("ikpy chain joints differ from the task's")
    init = np.zeros(len(chain.links))
    init[active] = task["seed"]
    mats = task["poses_mat"]

    def solve_one(i):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = chain.inverse_kinematics_frame(
                mats[i], initial_position=init, orientation_mode="all"
            )
        return np.asarray(full)[active], None

    out = timed_loop(solve_one, len(mats))
    out.update(rss_start_kb=rss0, meta={})
    return out


def work_cli(task: dict, tmp: Path) -> dict:
    """The CLI contract: a process of its own; its solve_seconds / compile_seconds are read
    back from the npz it writes. Run twice with a fresh XDG_CACHE_HOME: once cold (the CLI
    compiles, and fills its persistent compilation cache if it keeps one), once as a user's
    next invocation would (cache warm). The row reports the second run's answers and
    solve_seconds, the cold compile_seconds, and the warm one in the notes."""
    n = len(task["poses_wxyz_xyz"])
    targets = tmp / "targets.npz"
    np.savez(targets, poses=task["poses_wxyz_xyz"])
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "xdg-cache"))
    runs = []
    for attempt in ("cold", "warm"):
        out_path = tmp / f"answers-{attempt}.npz"
        cmd = [
            sys.executable,
            "-m",
            "pyroki_ros.cli",
            "ik",
            "--urdf",
            task["urdf"],
            "--tip",
            task["tip"],
            "--targets",
            str(targets),
            "--out",
            str(out_path),
        ]
        start = time.perf_counter()
        child = run_child(cmd, float(task["child_timeout"]), REPO, tmp / attempt, env)
        wall = time.perf_counter() - start
        if child["rc"] != 0:
            raise RuntimeError(f"CLI exited {child['rc']}: {child['stderr_tail']}")
        with np.load(out_path, allow_pickle=False) as data:
            names = [str(v) for v in data["joint_names"]]
            cols = [names.index(j) for j in task["joint_names"]]
            runs.append(
                {
                    "q": data["q"][:, cols],
                    "claimed": data["success"],
                    "solve": float(data["solve_seconds"]),
                    "compile": float(data["compile_seconds"]),
                    "wall": wall,
                    "peak_kb": child["maxrss_kb"],
                }
            )
    cold, warm = runs
    return {
        "q": warm["q"],
        "claimed": warm["claimed"],
        "batch_seconds": [warm["solve"]],
        "first_call": cold["compile"],
        "compile_is_reported": True,
        "rss_start_kb": -1,
        "peak_kb": max(cold["peak_kb"], warm["peak_kb"]),
        "meta": {
            "command": shlex.join(["python3", *cmd[1:]]),
            "process_wall_s": warm["wall"],
            "cold_process_wall_s": cold["wall"],
            "cold_solve_s": cold["solve"],
            "warm_compile_s": warm["compile"],
            "answers_differ": bool(not np.array_equal(cold["q"], warm["q"])),
            "n": n,
        },
    }


def worker_main(name: str, task_path: str, result_path: str) -> int:
    task = load_task(task_path)
    tmp = Path(result_path).parent
    try:
        if name in ("pyroki_ros", "pyroki_ros-batch"):
            out = work_pyroki_ros(task, SOLVERS[name].mode)
        elif name == "pyroki_ros-stream":
            out = work_pyroki_ros(task, "stream")
        elif name == "pyroki_ros-cli":
            out = work_cli(task, tmp)
        elif name.startswith("tracik-"):
            out = work_tracik(task, {"tracik-5ms": 0.005, "tracik-20ms": 0.020}[name])
        elif name == "pyroki":
            out = work_pyroki(task)
        elif name == "pytorch-kinematics":
            out = work_pytorch_kinematics(task)
        elif name == "pinocchio":
            out = work_pinocchio(task)
        elif name == "ikpy":
            out = work_ikpy(task)
        else:
            raise ValueError(f"unknown solver {name}")
    except Skip as e:
        Path(result_path).write_text(json.dumps({"skipped": str(e)}))
        return SKIPPED_EXIT
    n, dof = len(task["poses_wxyz_xyz"]), len(task["joint_names"])
    if "qs" in out:  # single-target loop
        q = np.full((n, dof), np.nan)
        for i, qi in enumerate(out.pop("qs")):
            if qi is not None:
                q[i] = qi
        claimed = out.pop("claimed")
        out["claimed"] = np.array([-1 if c is None else int(c) for c in claimed])
        out["q"] = q
    else:
        out["claimed"] = np.asarray(out["claimed"]).astype(int)
    peak = out.pop("peak_kb", None) or proc_status_kb("VmHWM")
    meta = dict(
        out.pop("meta", {}),
        peak_kb=peak,
        rss_start_kb=out.pop("rss_start_kb"),
        first_call=out.pop("first_call"),
        loop_seconds=out.pop("loop_seconds", None),
        batch_seconds=out.pop("batch_seconds", None),
        compile_is_reported=out.pop("compile_is_reported", False),
        pass_medians=out.pop("pass_medians", None),
        best_pass=out.pop("best_pass", None),
    )
    arrays = {k: np.asarray(v) for k, v in out.items() if v is not None}
    np.savez(result_path, meta=np.array(json.dumps(meta)), **arrays)
    return 0


# ============================================================================================
# Orchestrator
# ============================================================================================


def run_child(cmd: list[str], timeout: float, cwd: Path, log_dir: Path, env=None) -> dict:
    """Runs a process to completion (killing its process group after ``timeout``); returns its
    exit code, its own peak RSS (wait4 rusage, kB) and the tails of its output."""
    log_dir.mkdir(parents=True, exist_ok=True)
    out_p, err_p = log_dir / "stdout.txt", log_dir / "stderr.txt"
    timed_out = False
    with open(out_p, "wb") as fo, open(err_p, "wb") as fe:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=fo, stderr=fe, start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {
        "rc": proc.returncode,
        "timed_out": timed_out,
        "maxrss_kb": usage.ru_maxrss,
        "stdout_tail": out_p.read_text(errors="replace")[-2000:],
        "stderr_tail": err_p.read_text(errors="replace")[-2000:],
    }


@dataclass
class Problem:
    robot: str
    spec: RobotSpec
    urdf_path: str
    model: object  # reference_fk.Model
    all_names: list
    chain: list
    chain_cols: list
    lower: np.ndarray
    upper: np.ndarray
    continuous: np.ndarray
    base_q: np.ndarray  # all actuated joints at the midpoint
    q_true: np.ndarray
    mats: np.ndarray
    wxyz_xyz: np.ndarray


def make_problem(name: str, n: int, seed: int) -> Problem:
    import reference_fk as ref
    from ik_reference import pose7

    spec = ROBOTS[name]
    path = str(REPO / spec.urdf)
    model = ref.parse_urdf(path)
    all_names = ref.actuated_joint_names(model)
    lo_all, hi_all = ref.actuated_joint_limits(model)
    # chain joints: actuated joints on the base->tip path, in document order
    by_child, on_path, link = model.joint_by_child, set(), spec.tip
    while link != spec.base:
        joint = by_child[link]
        on_path.add(joint.name)
        link = joint.parent
    chain = [j for j in all_names if j in on_path]
    cols = [all_names.index(j) for j in chain]
    by_name = model.joint_by_name
    continuous = np.array([by_name[j].type == "continuous" for j in chain])
    lower, upper = lo_all[cols], hi_all[cols]
    rng = np.random.default_rng(seed)
    q_true = rng.uniform(lower, upper, size=(n, len(chain)))
    base_q = (lo_all + hi_all) / 2
    mats = np.stack([tip_pose(model, all_names, base_q, cols, q, spec.tip) for q in q_true])
    wxyz_xyz = pose7(mats)
    return Problem(
        name,
        spec,
        path,
        model,
        all_names,
        chain,
        cols,
        lower,
        upper,
        continuous,
        base_q,
        q_true,
        mats,
        wxyz_xyz,
    )


def tip_pose(model, all_names, base_q, cols, q_chain, tip) -> np.ndarray:
    import reference_fk as ref

    q = base_q.copy()
    q[cols] = q_chain
    return ref.reference_fk(model, q, all_names)[tip]


def check(problem: Problem, q: np.ndarray) -> dict:
    """Independent check of answers (N, dof): float64 reference FK, limits."""
    import reference_fk as ref

    n = len(q)
    pos, rot = np.full(n, np.inf), np.full(n, np.inf)
    answered = np.all(np.isfinite(q), axis=1)
    for i in np.flatnonzero(answered):
        t = tip_pose(
            problem.model,
            problem.all_names,
            problem.base_q,
            problem.chain_cols,
            q[i],
            problem.spec.tip,
        )
        pos[i], rot[i] = ref.pose_errors(problem.mats[i], t)
    bounded = ~problem.continuous
    over = np.maximum(problem.lower - q, q - problem.upper)[:, bounded]
    violation = np.where(answered, np.max(over, axis=1, initial=-np.inf), np.inf)
    inside = answered & (violation <= LIMIT_SLACK)
    pose_ok = (pos < POS_TOL) & (rot < ROT_TOL)
    return {
        "pos": pos,
        "rot": rot,
        "answered": answered,
        "inside": inside,
        "violation": violation,
        "pose_ok": pose_ok,
        "success": pose_ok & inside,
    }


def write_task(problem: Problem, path: Path, args) -> None:
    lo, hi = problem.lower, problem.upper
    np.savez(
        path,
        robot=problem.robot,
        urdf=problem.urdf_path,
        base=problem.spec.base,
        tip=problem.spec.tip,
        joint_names=np.array(problem.chain),
        all_joint_names=np.array(problem.all_names),
        lower=lo,
        upper=hi,
        continuous=problem.continuous,
        seed=(lo + hi) / 2,
        poses_wxyz_xyz=problem.wxyz_xyz,
        poses_mat=problem.mats,
        repeats=args.repeats,
        child_timeout=args.timeout,
        torch_threads=args.torch_threads,
    )


def run_solver(name: str, problem: Problem, work: Path, args) -> dict:
    d = work / problem.robot / name
    d.mkdir(parents=True, exist_ok=True)
    task, result = d / "task.npz", d / "result.npz"
    write_task(problem, task, args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        name,
        "--task",
        str(task),
        "--result",
        str(result),
    ]
    start = time.perf_counter()
    child = run_child(cmd, args.timeout, REPO, d, env)
    wall = time.perf_counter() - start
    row = {
        "robot": problem.robot,
        "solver": name,
        "label": SOLVERS[name].label,
        "mode": SOLVERS[name].mode,
        "worker_wall_s": wall,
        "n": len(problem.q_true),
    }
    if child["rc"] == SKIPPED_EXIT:
        row["skipped"] = json.loads(Path(str(result)).read_text())["skipped"]
        return row
    if child["rc"] != 0 or not result.exists():
        why = "timed out" if child["timed_out"] else f"exit {child['rc']}"
        tail = child["stderr_tail"].strip().splitlines()[-3:]
        row["error"] = f"{why}: {' | '.join(tail)}"
        return row
    with np.load(result, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        arrays = {k: data[k] for k in data.files if k != "meta"}
    if meta.get("peak_kb", -1) <= 0:
        meta["peak_kb"] = child["maxrss_kb"]
    row["meta"] = meta
    q = arrays["q"]
    c = check(problem, q)
    claimed = arrays["claimed"]
    row.update(
        success=float(np.mean(c["success"])),
        pose_ok=float(np.mean(c["pose_ok"])),
        inside=float(np.sum(c["inside"]) / max(np.sum(c["answered"]), 1)),
        answered=float(np.mean(c["answered"])),
        max_violation=float(np.max(np.where(c["answered"], c["violation"], -np.inf))),
        outside_strict=int(np.sum(c["answered"] & (c["violation"] > 0))),
        pos_p95_mm=float(np.percentile(np.minimum(c["pos"], 1e9), 95) * 1e3),
        rot_p95_deg=float(np.degrees(np.percentile(np.minimum(c["rot"], 1e9), 95))),
    )
    if np.all(claimed >= 0):
        row["claimed"] = float(np.mean(claimed == 1))
        row["false_claims"] = int(np.sum((claimed == 1) & ~c["success"]))
        row["missed_claims"] = int(np.sum((claimed == 0) & c["success"]))
        row["false_claims_pose"] = int(np.sum((claimed == 1) & ~c["pose_ok"]))
    first = meta["first_call"]
    if "latencies" in arrays:
        lat = arrays["latencies"]
        row.update(
            median_ms=float(np.median(lat) * 1e3),
            p95_ms=float(np.percentile(lat, 95) * 1e3),
            mean_ms=float(np.mean(lat) * 1e3),
            total_s=float(meta["loop_seconds"]),
            throughput=len(lat) / meta["loop_seconds"],
            compile_s=max(first - float(np.median(lat)), 0.0),
        )
    else:
        steady = float(np.median(meta["batch_seconds"]))
        row.update(
            total_s=steady,
            throughput=len(q) / steady,
            compile_s=first if meta.get("compile_is_reported") else max(first - steady, 0.0),
        )
    if "program_seconds" in arrays:
        row["program_median_ms"] = float(np.median(arrays["program_seconds"]) * 1e3)
    row["peak_mb"] = meta["peak_kb"] / 1024
    if meta.get("rss_start_kb", -1) > 0:
        row["growth_mb"] = (meta["peak_kb"] - meta["rss_start_kb"]) / 1024
    return row


VERSIONED = (
    "numpy",
    "jax",
    "jaxlib",
    "jaxlie",
    "pytracik",
    "torch",
    "pytorch-kinematics",
    "pin",
    "ikpy",
    "pyroki",
    "scipy",
)


def fmt(value, spec: str, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:{spec}}{unit}"


def render(rows: list[dict], info: dict, args) -> str:
    lines = [
        "# IK benchmark: pyroki_ros and its peers",
        "",
        f"- date: {info['date']}; duration {info['duration_s']:.0f} s",
        f"- command: `{info['command']}` (cwd: repository root)",
        (
            f"- machine: {info['machine']['cpu']}, {info['machine']['logical_cpus']} cores "
            f"({info['machine']['usable_cpus']} usable), {info['machine'].get('memory_gib')} GiB "
            f"RAM, {info['machine']['os']}, Python {info['machine']['python']}"
        ),
        f"- load average (1/5/15 min) at start: {info['load_start']}, at end: {info['load_end']}"
        + ("  **(machine busy: timings not representative)**" if info["busy"] else ""),
        f"- repository: {info['git']}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v),
        (
            f"- protocol: N = {args.n} targets per robot from uniform joint samples (seed "
            f"{args.seed}); all solvers start at the midpoint of the limits; success = position "
            f"< 1 mm and orientation < 1 deg by the independent float64 reference FK "
            f"(test/reference_fk.py) and inside the joint limits (slack {LIMIT_SLACK:g}); "
            f"batch timings: median of {args.repeats} call(s) after a warm-up call."
        ),
        (
            "- latency: one target per call in a Python loop, timed around the call (objective "
            f"construction included); the loop over all N targets runs up to {PASSES} times "
            f"(passes) while a pass takes under {PASS_BUDGET_S:g} s, and the pass with the lowest "
            "median is reported, for every solver alike (timeit-style: the pass least disturbed "
            "by other jobs on a shared machine; each pass's median is in the notes); throughput: N / batch call (batch, cli) or N / loop time "
            "(single); compile: first call minus a steady call (cli: its own compile_seconds); "
            "peak RSS: VmHWM of the solver's own process; growth: peak minus RSS after imports; "
            "in limits: share of the answers given (a solver may return none); claims: the "
            "solver's own success flag, compared with the independent check."
        ),
        (
            f"- environment: XLA_FLAGS={os.environ.get('XLA_FLAGS', '(unset)')}; "
            f"pytorch-kinematics with {args.torch_threads or 'default'} torch thread(s)"
        ),
        "",
    ]
    by_robot: dict[str, list] = {}
    for row in rows:
        by_robot.setdefault(row["robot"], []).append(row)
    for robot, rs in by_robot.items():
        spec = ROBOTS[robot]
        lines += [
            f"## {robot}: `{spec.urdf}`, {spec.base} -> {spec.tip} ({spec.note})",
            "",
            (
                "| solver | mode | success | in limits (of answers) | median | p95 | throughput | compile | "
                "peak RSS | growth | notes |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in rs:
            if "skipped" in r or "error" in r:
                what = "skipped" if "skipped" in r else "error"
                lines.append(
                    f"| {r['label']} | {r['mode']} | — | — | — | — | — | — | — | — | "
                    f"{what}: {r.get('skipped') or r.get('error')} |"
                )
                continue
            notes = []
            if "claimed" in r:
                notes.append(f"claims {r['claimed']:.1%}")
                if r["false_claims"]:
                    notes.append(f"**{r['false_claims']} claimed successes fail the check**")
                if r["missed_claims"]:
                    notes.append(f"{r['missed_claims']} unclaimed pass")
            if r["answered"] < 1:
                notes.append(f"no answer for {1 - r['answered']:.1%}")
            if r["outside_strict"]:
                notes.append(
                    f"{r['outside_strict']} past a limit by up to {r['max_violation']:.2g}"
                )
            if "program_median_ms" in r and r["mode"] == "single":
                notes.append(f"in-program median {r['program_median_ms']:.3f} ms")
            meta = r.get("meta", {})
            if "iterations_median" in meta:
                notes.append(
                    f"iterations median {meta['iterations_median']:.0f} / max "
                    f"{meta['iterations_max']}"
                )
            if "retries" in meta:
                notes.append(f"{meta['retries']} restarts, {meta['iterations']} iterations")
            if "damping" in meta:
                notes.append(f"damping {meta['damping']:g}, <= {meta['max_iterations']} steps")
            if r["mode"] == "cli":
                notes.append(
                    f"2nd run (compile cache warm): compile {meta['warm_compile_s']:.2f} s, "
                    f"process wall {meta['process_wall_s']:.1f} s; 1st run: process wall "
                    f"{meta['cold_process_wall_s']:.1f} s, solve {meta['cold_solve_s'] * 1e3:.1f} ms"
                )
                if meta["answers_differ"]:
                    notes.append("**answers differ between the two runs**")
            if r["mode"] in ("single",):
                notes.append(f"loop total {r['total_s']:.2f} s")
                medians = meta.get("pass_medians") or []
                if len(medians) > 1:
                    notes.append(
                        "pass medians "
                        + " / ".join(f"{m * 1e3:.3f}" for m in medians)
                        + f" ms (pass {meta['best_pass'] + 1} reported)"
                    )
            lines.append(
                f"| {r['label']} | {r['mode']} | {r['success']:.1%} | {r['inside']:.1%} | "
                f"{fmt(r.get('median_ms'), '.3f', ' ms')} | {fmt(r.get('p95_ms'), '.3f', ' ms')} | "
                f"{fmt(r.get('throughput'), ',.0f', ' /s')} | {fmt(r.get('compile_s'), '.2f', ' s')} | "
                f"{fmt(r.get('peak_mb'), '.0f', ' MB')} | {fmt(r.get('growth_mb'), '.0f', ' MB')} | "
                f"{'; '.join(notes)} |"
            )
        cli = next((r for r in rs if r["solver"] == "pyroki_ros-cli" and "success" in r), None)
        trac = next((r for r in rs if r["solver"] == "tracik-5ms" and "success" in r), None)
        if cli and trac:
            ratio = cli["total_s"] / trac["total_s"]
            verdict = "meets" if ratio <= 0.2 else "misses"
            lines += [
                "",
                (
                    f"CLI contract: `pyroki-ros ik` solve_seconds {cli['total_s'] * 1e3:.1f} ms "
                    f"for {cli['n']} targets vs TRAC-IK (5 ms) loop total "
                    f"{trac['total_s'] * 1e3:.1f} ms: ratio {ratio:.3f} ({verdict} the goal "
                    f"<= 0.2); success {cli['success']:.1%} vs {trac['success']:.1%}."
                ),
            ]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 100 targets (unless --n), one batch repeat"
    )
    parser.add_argument("--n", type=int, help="targets per robot (default 1000, quick 100)")
    parser.add_argument("--seed", type=int, default=0, help="target sampling seed (default 0)")
    parser.add_argument(
        "--robots",
        default=",".join(DEFAULT_ROBOTS),
        help=f"comma list of {', '.join(ROBOTS)} (default: {','.join(DEFAULT_ROBOTS)})",
    )
    parser.add_argument(
        "--solvers",
        default=",".join(DEFAULT_SOLVERS),
        help=f"comma list of {', '.join(SOLVERS)} (default: all)",
    )
    parser.add_argument("--repeats", type=int, help="timed batch calls (default 3, quick 1)")
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds per solver process (default 1800)"
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="torch.set_num_threads for pytorch-kinematics (default 1; 0 = torch's default)",
    )
    parser.add_argument("--markdown", help="also write the markdown report to this file")
    parser.add_argument("--json", help="also write every row and the run info as JSON")
    parser.add_argument("--keep", help="keep the work files (tasks, answers, logs) here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.worker, args.task, args.result)

    args.n = args.n or (100 if args.quick else 1000)
    args.repeats = args.repeats or (1 if args.quick else 3)
    robots = [r.strip() for r in args.robots.split(",") if r.strip()]
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    for r in robots:
        if r not in ROBOTS:
            parser.error(f"unknown robot {r!r}; known: {', '.join(ROBOTS)}")
    for s in solvers:
        if s not in SOLVERS:
            parser.error(f"unknown solver {s!r}; known: {', '.join(SOLVERS)}")
    start = time.time()
    info = {
        "date": utc_now(),
        "command": "python3 " + shlex.join([os.path.relpath(sys.argv[0], REPO), *sys.argv[1:]]),
        "machine": machine(),
        "git": git_rev(),
        "versions": {k: version(k, missing=None) for k in VERSIONED},
        "load_start": loadavg(),
    }
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ik-bench-"))
    rows = []
    for robot in robots:
        print(f"[{robot}] sampling {args.n} targets ...", file=sys.stderr, flush=True)
        problem = make_problem(robot, args.n, args.seed)
        for name in solvers:
            print(f"[{robot}] {name} ...", file=sys.stderr, flush=True)
            try:
                row = run_solver(name, problem, work, args)
            except Exception as e:  # noqa: BLE001 - a broken peer must not stop the run
                traceback.print_exc()
                row = {
                    "robot": robot,
                    "solver": name,
                    "label": SOLVERS[name].label,
                    "mode": SOLVERS[name].mode,
                    "error": f"{type(e).__name__}: {e}",
                }
            rows.append(row)
            brief = (
                "skipped"
                if "skipped" in row
                else "error: " + row["error"]
                if "error" in row
                else f"success {row['success']:.1%}, "
                + (f"{row['median_ms']:.3f} ms median, " if "median_ms" in row else "")
                + f"{row['throughput']:,.0f} /s"
            )
            print(
                f"[{robot}] {name}: {brief} ({row.get('worker_wall_s', 0):.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    info.update(load_end=loadavg())
    info.update(
        busy=max(float(info[k].split()[0]) for k in ("load_start", "load_end"))
        > 0.5 * (os.cpu_count() or 1),
        duration_s=time.time() - start,
    )
    report = render(rows, info, args)
    print(report)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(report)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"info": info, "rows": rows}, indent=1, default=float)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
