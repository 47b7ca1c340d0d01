#!/usr/bin/env python3
"""Forward-kinematics benchmark: pyroki_ros (JAX) vs pytorch-kinematics vs Pinocchio.

Every library computes the pose of every link of the robot (default: the bundled Panda,
13 links) for the same joint configurations (uniform inside the joint limits, fixed seed),
at batch sizes 1, 1,000 and 100,000. One invocation runs everything and prints one markdown
report; ``--markdown FILE`` also writes it to a file.

Each library (and each JAX variant: dtype x XLA flags) runs in its own subprocess, so
``XLA_FLAGS`` are set before JAX is imported, compile times are those of a fresh process,
and thread settings do not leak between libraries. The subprocesses run one after the other.

Timing:
  * JAX: ``jax.jit(forward_kinematics)`` called as a user would (robot and q as arguments);
    the first call (trace + compile + run) is reported as "first call"; then warm-up calls;
    every timed call ends with ``block_until_ready``.
  * pytorch-kinematics: ``build_chain_from_urdf`` + ``chain.forward_kinematics(th)`` on CPU,
    float32, ``torch.set_num_threads(n)`` for each n in ``--threads`` (default 2 and 1).
  * Pinocchio: a Python loop over the batch of ``forwardKinematics`` +
    ``updateFramePlacements`` (float64; Pinocchio's Python API has no batched FK).
  The reported time per call is the median over the timed repeats (a repeat is one call on
  the whole batch; at least ``--min-repeats`` and at least ``--min-seconds`` of calls).

Shared machines: for every job the report gives the CPUs that other processes kept busy
meanwhile (/proc/stat), and a job is rerun (``--retries``) while that exceeds
``--max-other-load``; run it on an idle machine all the same.

Cross-check: every library's link positions and rotation matrices for the first
``--check-batch`` configurations are compared with a reference (Pinocchio if present, else
JAX float64, else the first row), and the largest differences are reported.

Run from the repository root, e.g.::

    python3 bench/fk_benchmark.py --markdown docs/benchmarks/fk.md

Requirements beyond the package's: bench/requirements.txt.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import math
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, git_rev, machine, time_calls, version, write_between_markers

import numpy as np
from reference_fk import quat_wxyz_to_matrix

DEFAULT_URDF = REPO / "pyroki_ros" / "robots" / "panda.urdf"

# Named sets of XLA flags for the JAX variants ("DTYPE[:PRESET][@CPUS]" in --jax-variants).
XLA_PRESETS = {
    "default": "",
    # Turn off XLA:CPU's YNNPACK fusions (reported faster for large batches on this CPU).
    "ynn-off": "--xla_cpu_experimental_ynn_fusion_type=",
    # ... and use the legacy (non-MLIR) loop-fusion emitters.
    "ynn-off+legacy": "--xla_cpu_experimental_ynn_fusion_type= --xla_cpu_use_fusion_emitters=false",
}
BEGIN, END = "<!-- fk_benchmark:begin -->", "<!-- fk_benchmark:end -->"


# ----------------------------------------------------------------------------------------
# timing (used by the workers)


def _time_batches(call, batch_input, args, warmup: int) -> list[dict]:
    """Per batch size: the first call (timed: trace + compile + run for JAX), ``warmup``
    calls, then timed calls; their summary."""
    results = []
    for batch in args.batches:
        x = batch_input(batch)
        t0 = time.perf_counter()
        call(x)
        first = time.perf_counter() - t0
        for _ in range(warmup):
            call(x)
        calls = time_calls(
            lambda x=x: call(x),
            min_repeats=args.min_repeats,
            min_seconds=args.min_seconds,
            max_repeats=args.max_repeats,
        )
        median = float(np.median(calls.wall))
        results.append(
            {
                "batch": batch,
                "median_s": median,
                "p10_s": float(np.percentile(calls.wall, 10)),
                "p90_s": float(np.percentile(calls.wall, 90)),
                "cpu_median_s": float(np.median(calls.cpu)),
                "repeats": len(calls.wall),
                "throughput": batch / median,
                "first_call_s": first,
            }
        )
    return results


# ----------------------------------------------------------------------------------------
# workers: each runs in its own process and writes <out>.json and <out>.npz


def _worker_jax(args) -> dict:
    # XLA_FLAGS were put into the environment by the parent before this process started.
    if args.cpus:  # before jax starts its thread pools, which size themselves to the affinity
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.cpus])
    import jax

    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from pyroki_ros import Robot, forward_kinematics

    source = _kinematics_hash()  # the FK source this process imported (others may edit it)

    impls = {"pyroki_ros": forward_kinematics}
    for spec in args.jax_fk or []:
        path, func = spec.rsplit(":", 1)
        module_spec = importlib.util.spec_from_file_location(Path(path).stem, path)
        module = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
        impls[f"{Path(path).stem}.{func}"] = getattr(module, func)

    dtype = jnp.float32 if args.dtype == "float32" else jnp.float64
    configs = np.load(args.configs)
    devices = [("cpu", jax.devices("cpu")[0])]
    try:
        devices += [("gpu", d) for d in jax.devices("gpu")[:1]]
    except RuntimeError:
        pass

    rows, poses = [], {}
    for impl_name, impl in impls.items():
        for device_name, device in devices:
            robot = jax.device_put(Robot.from_urdf(args.urdf, dtype=dtype), device)
            fk = jax.jit(impl)

            def call(q, fk=fk, robot=robot):
                out = fk(robot, q)
                out = getattr(out, "wxyz_xyz", out)
                return out.block_until_ready()

            results = _time_batches(
                call,
                lambda batch, device=device: jax.device_put(
                    jnp.asarray(configs[:batch], dtype), device
                ),
                args,
                args.warmup,
            )
            key = f"{impl_name}/{device_name}"
            q = jax.device_put(jnp.asarray(configs[: args.check_batch], dtype), device)
            out = np.asarray(call(q), np.float64)
            poses[key] = (out[..., 4:], quat_wxyz_to_matrix(out[..., :4]))
            rows.append(
                {
                    "key": key,
                    "library": "pyroki_ros (JAX)" if impl_name == "pyroki_ros" else impl_name,
                    "device": device_name,
                    "device_kind": device.device_kind,
                    "dtype": args.dtype,
                    "cpus": args.cpus or len(os.sched_getaffinity(0)),
                    "source": source,
                    "results": results,
                }
            )
    return {"rows": rows, "poses": poses, "versions": {"jax": jax.__version__}}


def _worker_torch(args) -> dict:
    import pytorch_kinematics as pk
    import torch

    torch.set_num_threads(int(args.threads))
    link_names, joint_names, _ = _robot_summary(args.urdf)
    configs = np.load(args.configs)
    with open(args.urdf) as f:
        chain = pk.build_chain_from_urdf(f.read()).to(dtype=torch.float32, device="cpu")
    # pytorch-kinematics has no mimic joints: every movable joint is an input; copy the
    # driving joint's value (multiplier 1 and offset 0 on the Panda) into mimic inputs.
    columns = _mimic_columns(args.urdf, joint_names, chain.get_joint_parameter_names())

    def call(th):
        out = chain.forward_kinematics(th)
        return [out[name].get_matrix() for name in link_names]

    results = _time_batches(
        call,
        lambda batch: torch.as_tensor(configs[:batch][:, columns], dtype=torch.float32),
        args,
        args.warmup,
    )
    th = torch.as_tensor(configs[: args.check_batch][:, columns], dtype=torch.float32)
    mats = np.stack([m.numpy() for m in call(th)], axis=1).astype(np.float64)  # (B, L, 4, 4)
    row = {
        "key": "pytorch_kinematics/cpu",
        "library": "pytorch-kinematics",
        "device": "cpu",
        "device_kind": f"torch threads={torch.get_num_threads()}",
        "threads": torch.get_num_threads(),
        "dtype": "float32",
        "results": results,
    }
    versions = {
        "torch": torch.__version__,
        "pytorch_kinematics": version("pytorch_kinematics"),
    }
    return {
        "rows": [row],
        "poses": {row["key"]: (mats[..., :3, 3], mats[..., :3, :3])},
        "versions": versions,
    }


def _worker_pin(args) -> dict:
    import pinocchio as pin

    link_names, joint_names, _ = _robot_summary(args.urdf)
    configs = np.load(args.configs)
    model = pin.buildModelFromUrdf(str(args.urdf), mimic=True)
    data = model.createData()
    frame_ids = [model.getFrameId(name, pin.BODY) for name in link_names]
    # Pinocchio's q layout: each joint's idx_q (mimic joints take no entry with mimic=True);
    # continuous joints take two entries, (cos, sin) of the angle.
    joints = [model.joints[model.getJointId(name)] for name in joint_names]

    def to_pin(q):
        out = np.zeros((q.shape[0], model.nq))
        for column, joint in enumerate(joints):
            if joint.nq == 2:
                out[:, joint.idx_q] = np.cos(q[:, column])
                out[:, joint.idx_q + 1] = np.sin(q[:, column])
            else:
                out[:, joint.idx_q] = q[:, column]
        return np.ascontiguousarray(out)

    def call(qs):
        for q in qs:
            pin.forwardKinematics(model, data, q)
            pin.updateFramePlacements(model, data)

    results = _time_batches(call, lambda batch: to_pin(configs[:batch]), args, min(args.warmup, 1))
    positions, rotations = [], []
    for q in to_pin(configs[: args.check_batch]):
        pin.forwardKinematics(model, data, q)
        pin.updateFramePlacements(model, data)
        positions.append([data.oMf[i].translation.copy() for i in frame_ids])
        rotations.append([data.oMf[i].rotation.copy() for i in frame_ids])
    row = {
        "key": "pinocchio/cpu",
        "library": "Pinocchio",
        "device": "cpu",
        "device_kind": "1 thread, Python loop",
        "dtype": "float64",
        "results": results,
    }
    return {
        "rows": [row],
        "poses": {row["key"]: (np.array(positions), np.array(rotations))},
        "versions": {"pin": pin.__version__},
    }


def _robot_summary(urdf: Path) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
    """Link names, actuated joint names and (2, n_joints) limits, via pyroki_ros's parser."""
    from pyroki_ros.model.urdf import read_urdf

    description, _ = read_urdf(str(urdf))
    actuated = [j for j in description.joints if j.type != "fixed" and j.mimic_joint is None]
    limits = []
    for j in actuated:
        if j.type == "continuous":
            limits.append((-math.pi, math.pi))
        else:
            limits.append((j.lower, j.upper))
    return tuple(description.link_names), tuple(j.name for j in actuated), np.array(limits).T


def _mimic_columns(urdf: Path, joint_names, wanted) -> list[int]:
    """For each name in ``wanted``, the column of ``joint_names`` that drives it."""
    from pyroki_ros.model.urdf import read_urdf

    description, _ = read_urdf(str(urdf))
    by_name = {j.name: j for j in description.joints}
    columns = []
    for name in wanted:
        joint = by_name[name]
        while joint.mimic_joint is not None:
            if joint.multiplier != 1.0 or joint.offset != 0.0:
                raise NotImplementedError(f"mimic joint {joint.name} with multiplier/offset")
            joint = by_name[joint.mimic_joint]
        columns.append(joint_names.index(joint.name))
    return columns


def _run_worker(args) -> None:
    result = {"jax": _worker_jax, "torch": _worker_torch, "pin": _worker_pin}[args.worker](args)
    poses = result.pop("poses")
    np.savez(
        args.out + ".npz",
        **{f"{k}|pos": v[0] for k, v in poses.items()},
        **{f"{k}|rot": v[1] for k, v in poses.items()},
    )
    with open(args.out + ".json", "w") as f:
        json.dump(result, f)


# ----------------------------------------------------------------------------------------
# the parent: configurations, subprocesses, cross-check, report


def _busy_cpu_seconds() -> float | None:
    """CPU-seconds all CPUs spent busy since boot (/proc/stat), or None."""
    try:
        fields = Path("/proc/stat").read_text().split("\n")[0].split()[1:]
        ticks = [int(x) for x in fields]
        idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
        return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _run_job(cmd: list[str], env: dict) -> tuple:
    """Runs one worker; returns (CPUs kept busy by other processes meanwhile, wall s, proc).

    Other load = busy CPU time of the whole machine (/proc/stat) minus the worker's own CPU
    time, per second of wall time.
    """
    busy0, own0 = _busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd,
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    busy1, own1 = _busy_cpu_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN)
    other = None
    if busy0 is not None and busy1 is not None:
        own = (own1.ru_utime + own1.ru_stime) - (own0.ru_utime + own0.ru_stime)
        other = max(0.0, (busy1 - busy0 - own) / wall)
    return other, wall, proc


def _fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _fmt_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f} M/s"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f} k/s"
    return f"{rate:.0f} /s"


def _label(row: dict) -> str:
    label = f"{row['library']} {row['dtype']}"
    if row.get("preset"):
        tag = row["preset"]
        if row.get("cpus_restricted"):
            tag += f", {row['cpus']} CPU" + ("s" if row["cpus"] > 1 else "")
        label += f" [{tag}]"
    if row.get("threads"):
        label += f" (threads={row['threads']})"
    if row["device"] != "cpu":
        label += f" ({row['device']}: {row['device_kind']})"
    return label


def _kinematics_hash() -> str:
    source = REPO / "pyroki_ros" / "model" / "kinematics.py"
    return hashlib.sha256(source.read_bytes()).hexdigest()[:12] if source.exists() else "n/a"


def _source_state(rows) -> str:
    """Git commit (and whether pyroki_ros/ differs from it) plus the kinematics.py hash(es)."""
    digest = ", ".join(sorted({r["source"] for r in rows if r.get("source")})) or "n/a"
    if "," in digest:
        digest += " (CHANGED DURING THE RUN: rows are not comparable)"
    head = git_rev("pyroki_ros")  # +dirty: pyroki_ros/ has uncommitted changes
    return f"git {head}; pyroki_ros/model/kinematics.py sha256 {digest}"


def _report(rows, machine, versions, checks, reference, args, command, load, started) -> str:
    batches = args.batches
    urdf = Path(args.urdf).resolve()
    shown = urdf.relative_to(REPO) if urdf.is_relative_to(REPO) else urdf
    lines = [
        "# Forward kinematics benchmark",
        "",
        (
            f"Robot: `{shown}` ({args.n_links} links, {args.n_joints} actuated joints); every "
            f"library computes the pose of all {args.n_links} links. Configurations: uniform "
            f"inside the joint limits, seed {args.seed}, identical for every library."
        ),
        "",
        f"Date: {started}  ",
        f"Command: `{command}`  ",
        (
            f"Machine: {machine['cpu']} ({machine.get('cpu_family_model', '')}; "
            f"{machine.get('simd', '')}), {machine['logical_cpus']} logical CPUs "
            f"({machine['usable_cpus']} usable), {machine.get('memory_gib', '?')} GiB RAM, "
            f"{machine['os']}  "
        ),
        "Versions: python "
        + machine["python"]
        + ", "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
        + "  ",
        f"Source: {_source_state(rows)}  ",
        f"Load average (1 min) at start / end: {load[0]:.2f} / {load[1]:.2f}  ",
        (
            "Timing: median over repeats of one call on the whole batch (JAX: jitted, "
            "`block_until_ready`; first call = trace + compile + run); "
            f"at least {args.min_repeats} repeats and {args.min_seconds:g} s per cell. A "
            f"library's job is rerun (up to {args.retries}x) when other processes kept more "
            f"than {args.max_other_load:g} CPUs busy meanwhile; the quietest attempt is shown."
        ),
        "",
        "## Time per call (median) and throughput",
        "",
        "| library | "
        + " | ".join(f"batch {b:,}" for b in batches)
        + " | first call (compile) | other load |",
        "|---|" + "---:|" * len(batches) + "---|---:|",
    ]
    for row in rows:
        cells = [
            f"{_fmt_time(r['median_s'])} ({_fmt_rate(r['throughput'])})" for r in row["results"]
        ]
        first = "n/a"
        if row.get("preset"):  # a JAX row
            first = ", ".join(_fmt_time(r["first_call_s"]) for r in row["results"])
        other = row.get("other_cpus")
        other = "?" if other is None else f"{other:.2f}"
        lines.append(f"| {_label(row)} | " + " | ".join(cells) + f" | {first} | {other} |")
    lines += [
        "",
        (
            "Cells: wall time per call (configurations per second). First call (JAX): one "
            "value per batch size, in order (each batch shape compiles once). Other load: "
            "CPUs kept busy by other processes on the machine while that row ran (busy CPU "
            "time from /proc/stat minus the row's own, per second); near 0 = a quiet machine."
        ),
        "",
        (
            "CPU time per call (process CPU time of all threads, median; less sensitive to "
            "other load on the machine than wall time, but it counts spinning worker threads):"
        ),
        "",
        "| library | " + " | ".join(f"batch {b:,}" for b in batches) + " |",
        "|---|" + "---:|" * len(batches),
    ]
    for row in rows:
        cells = [_fmt_time(r["cpu_median_s"]) for r in row["results"]]
        lines.append(f"| {_label(row)} | " + " | ".join(cells) + " |")

    pk_rows = [r for r in rows if r["library"] == "pytorch-kinematics"]
    pk = None
    if pk_rows:  # the best pytorch-kinematics setting per batch size (the strictest baseline)
        pk = {
            "results": [
                max(col, key=lambda r: r["throughput"])
                for col in zip(*(r["results"] for r in pk_rows))
            ]
        }
    jax_rows = [
        r for r in rows if r.get("preset") and r["device"] == "cpu" and r["dtype"] == "float32"
    ]
    if pk and jax_rows:
        lines += [
            "",
            "## JAX float32 (CPU) throughput relative to pytorch-kinematics",
            "",
            (
                "Goal: at least 2x pytorch-kinematics' batched CPU throughput (batches > 1). "
                "Baseline: the faster pytorch-kinematics thread setting at each batch size."
            ),
            "",
            "| JAX variant | "
            + " | ".join(f"batch {b:,}" for b in batches)
            + " | goal (batches > 1) |",
            "|---|" + "---:|" * len(batches) + "---|",
        ]
        for row in jax_rows:
            ratios = [
                j["throughput"] / p["throughput"] for j, p in zip(row["results"], pk["results"])
            ]
            batched = [x for x, b in zip(ratios, batches) if b > 1]
            verdict = "n/a" if not batched else ("met" if min(batched) >= 2 else "NOT met")
            lines.append(
                f"| {_label(row)} | " + " | ".join(f"{x:.2f}x" for x in ratios) + f" | {verdict} |"
            )
    lines += [
        "",
        f"## Cross-check (first {args.check_batch:,} configurations)",
        "",
        f"Reference: {reference}. Max over configurations and links.",
        "",
        "| library | max position difference (m) | max rotation-matrix difference |",
        "|---|---:|---:|",
    ]
    for row in rows:
        pos, rot = checks[row["key_full"]]
        lines.append(f"| {_label(row)} | {pos:.2e} | {rot:.2e} |")
    lines += [
        "",
        "Notes:",
        "",
        (
            "* Pinocchio: `forwardKinematics` + `updateFramePlacements` per configuration in a "
            "Python loop (its Python bindings have no batched forward kinematics; the C++ "
            "`ModelPool`/OpenMP `*InParallel` functions cover RNEA, ABA and collisions only). "
            "Times include the Python loop; reading the poses out of `data.oMf` is not timed."
        ),
        (
            "* pytorch-kinematics: CPU, float32, `torch.set_num_threads(threads)`; mimic joints "
            "(not supported there) receive their driving joint's value. With 2 threads on a "
            "2-CPU machine every small op ends in a thread barrier, so any other load on the "
            "machine slows it down a lot: compare the load average."
        ),
        (
            "* JAX on CPU uses every CPU it may run on (XLA's thread pool); `N CPU` rows ran "
            "with the process's CPU affinity restricted to N CPUs before importing jax."
        ),
    ]
    caller_flags = os.environ.get("XLA_FLAGS")
    for preset in sorted({r["preset"] for r in rows if r.get("preset")}):
        extra = f" (after the caller's XLA_FLAGS `{caller_flags}`)" if caller_flags else ""
        lines.append(f"* [{preset}]: `XLA_FLAGS='{XLA_PRESETS[preset]}'`{extra}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urdf", type=Path, default=DEFAULT_URDF)
    parser.add_argument(
        "--batches", default="1,1000,100000", type=lambda s: [int(x) for x in s.split(",")]
    )
    parser.add_argument(
        "--libraries", default="jax,torch,pin", help="comma-separated subset of jax,torch,pin"
    )
    parser.add_argument(
        "--jax-variants",
        default="float32,float32:ynn-off,float64",
        help="comma-separated DTYPE[:PRESET][@CPUS]: DTYPE float32|float64, PRESET one of "
        f"{', '.join(XLA_PRESETS)} (XLA_FLAGS set before importing jax), CPUS restricts the "
        "process to that many CPUs (e.g. float32@1 for single-threaded XLA)",
    )
    parser.add_argument(
        "--jax-fk",
        action="append",
        metavar="FILE.py:FUNCTION",
        help="also time an alternative FK function f(robot, q) -> SE3 or "
        "(..., n_links, 7) wxyz_xyz array (for experiments); repeatable",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads",
        default="2,1",
        help="comma-separated torch thread counts; one pytorch-kinematics run for each",
    )
    parser.add_argument("--min-repeats", type=int, default=5)
    parser.add_argument("--min-seconds", type=float, default=1.0)
    parser.add_argument("--max-repeats", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--check-batch", type=int, default=1000)
    parser.add_argument(
        "--max-other-load",
        type=float,
        default=0.25,
        help="rerun a library's job when other processes kept more CPUs than this busy "
        "meanwhile (see --retries); the quietest attempt is reported",
    )
    parser.add_argument("--retries", type=int, default=2, help="see --max-other-load")
    parser.add_argument(
        "--markdown",
        type=Path,
        help="also write the report here (the part "
        "between the fk_benchmark markers is replaced, the rest kept)",
    )
    parser.add_argument("--json", type=Path, help="also write raw results as JSON")
    # worker-only arguments
    parser.add_argument("--worker", choices=("jax", "torch", "pin"), help=argparse.SUPPRESS)
    parser.add_argument("--configs", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--dtype", default="float32", help=argparse.SUPPRESS)
    parser.add_argument("--cpus", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        _run_worker(args)
        return 0

    command = "python3 " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(__file__, Path.cwd())] + sys.argv[1:]
    )
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    load_start = os.getloadavg()[0]
    link_names, joint_names, limits = _robot_summary(args.urdf)
    args.n_links, args.n_joints = len(link_names), len(joint_names)
    args.check_batch = min(args.check_batch, max(args.batches))
    rng = np.random.default_rng(args.seed)
    configs = limits[0] + rng.random((max(args.batches), len(joint_names))) * (
        limits[1] - limits[0]
    )

    jobs = []  # (name, worker, extra worker args, XLA preset or None)
    libraries = args.libraries.split(",")
    if "jax" in libraries:
        for variant in args.jax_variants.split(","):
            variant, _, cpus = variant.partition("@")
            dtype, _, preset = variant.partition(":")
            preset = preset or "default"
            dtype = {"f32": "float32", "f64": "float64"}.get(dtype, dtype)
            if (
                dtype not in ("float32", "float64")
                or preset not in XLA_PRESETS
                or not (cpus == "" or cpus.isdigit())
            ):
                parser.error(f"bad JAX variant {variant!r}")
            extra = ["--dtype", dtype, "--cpus", cpus or "0"]
            for spec in args.jax_fk or []:
                extra += ["--jax-fk", spec]
            jobs.append(
                (f"jax {dtype} [{preset}]{'@' + cpus if cpus else ''}", "jax", extra, preset)
            )
    if "torch" in libraries:
        for threads in args.threads.split(","):
            jobs.append(
                (f"pytorch-kinematics threads={threads}", "torch", ["--threads", threads], None)
            )
    if "pin" in libraries:
        jobs.append(("pinocchio", "pin", [], None))

    rows, versions, poses = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="fk_benchmark_") as tmp:
        config_file = os.path.join(tmp, "configs.npy")
        np.save(config_file, configs)
        for i, (name, worker, extra, preset) in enumerate(jobs):
            out = os.path.join(tmp, f"job{i}")
            env = dict(os.environ)
            if preset is not None:
                env["XLA_FLAGS"] = " ".join(
                    f for f in (os.environ.get("XLA_FLAGS", ""), XLA_PRESETS[preset]) if f
                )
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                worker,
                "--configs",
                config_file,
                "--out",
                out,
                "--urdf",
                str(args.urdf),
                "--batches",
                ",".join(map(str, args.batches)),
                "--min-repeats",
                str(args.min_repeats),
                "--min-seconds",
                str(args.min_seconds),
                "--max-repeats",
                str(args.max_repeats),
                "--warmup",
                str(args.warmup),
                "--check-batch",
                str(args.check_batch),
                *extra,
            ]
            best = None  # (other load, attempt's output prefix)
            for attempt in range(1 + args.retries):
                prefix = f"{out}.{attempt}"
                cmd[cmd.index("--out") + 1] = prefix
                print(f"[fk_benchmark] {name} ...", file=sys.stderr, flush=True)
                other, wall, proc = _run_job(cmd, env)
                if proc.returncode != 0:
                    print(f"[fk_benchmark] {name} failed:\n{proc.stdout[-4000:]}", file=sys.stderr)
                    break
                print(
                    f"[fk_benchmark] {name} done in {wall:.0f} s, other processes kept "
                    f"{other if other is not None else float('nan'):.2f} CPUs busy",
                    file=sys.stderr,
                    flush=True,
                )
                if best is None or (other is not None and other < best[0]):
                    best = (other if other is not None else float("inf"), prefix)
                if other is None or other <= args.max_other_load:
                    break
            if best is None:
                continue
            other, out = best
            other = None if math.isinf(other) else other
            with open(out + ".json") as f:
                result = json.load(f)
            versions.update(result["versions"])
            with np.load(out + ".npz") as npz:
                for row in result["rows"]:
                    row["preset"] = preset
                    row["other_cpus"] = other
                    row["cpus_restricted"] = (
                        "--cpus" in extra and extra[extra.index("--cpus") + 1] != "0"
                    )
                    row["key_full"] = f"job{i}/{row['key']}"
                    poses[row["key_full"]] = (npz[row["key"] + "|pos"], npz[row["key"] + "|rot"])
                    rows.append(row)
    if not rows:
        print("no library ran", file=sys.stderr)
        return 1
    for package in ("numpy", "jaxlib", "jaxlie"):
        versions.setdefault(package, version(package))

    ref_key = next((r["key_full"] for r in rows if r["library"] == "Pinocchio"), None)
    ref_key = (
        ref_key
        or next(
            (r["key_full"] for r in rows if "JAX" in r["library"] and r["dtype"] == "float64"), None
        )
        or rows[0]["key_full"]
    )
    ref_row = next(r for r in rows if r["key_full"] == ref_key)
    ref_pos, ref_rot = poses[ref_key]
    checks = {
        k: (float(np.abs(p - ref_pos).max()), float(np.abs(r - ref_rot).max()))
        for k, (p, r) in poses.items()
    }
    load_end = os.getloadavg()[0]
    report = _report(
        rows,
        machine(),
        versions,
        checks,
        _label(ref_row),
        args,
        command,
        (load_start, load_end),
        started,
    )
    print(report)
    if args.markdown:
        write_between_markers(args.markdown, BEGIN, END, report)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps(
                {
                    "rows": rows,
                    "versions": versions,
                    "checks": checks,
                    "command": command,
                    "date": started,
                    "load": [load_start, load_end],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
