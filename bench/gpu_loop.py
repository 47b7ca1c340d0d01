#!/usr/bin/env python3
"""Where the GPU's IK time goes: the solver's while loop, its restarts one after another or
side by side, with and without XLA command buffers (CUDA graphs).

Each trip of an XLA while loop on a GPU launches the body's kernels (a CUDA graph) and reads
the loop's condition back to the host, so a batch costs about as many trips as its slowest
problem needs. This script runs ``bench/gpu_report.py`` (IK batches, single-target latency,
optionally the batched planner) once per variant, each in its own process (XLA reads
``XLA_FLAGS`` once per process; a flag this XLA does not know stops only that variant):

* ``--parallel-restarts on|off``: a batch's remaining restarts as parallel jobs (the GPU
  default) or one after another in each problem's lane (the CPU default), see ik/lm.py
  ``_solve_all``;
* ``XLA_FLAGS`` with the command-buffer types that put the loop itself into a CUDA graph
  (``WHILE``, ``CONDITIONAL``) or with command buffers off.

Variants measured before (docs/benchmarks/gpu_runs/2026-11-27-loop.md, at commit c6927e9,
which still had them): several LM iterations per loop trip (no gain, removed).

Usage (repository root; on a CPU it runs too, at small sizes, and says little)::

    python bench/gpu_loop.py --out-dir /tmp/loop [--variants parallel,sequential] [--quick]

Writes one report per variant (``<out-dir>/<variant>.md``) and ``<out-dir>/loop.md`` with a
table of the IK and plan rows of every variant side by side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GRAPHS = (
    "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL "
    "--xla_gpu_graph_min_graph_size=1"
)
NO_GRAPHS = "--xla_gpu_enable_command_buffer="
# name: (XLA_FLAGS, restarts side by side, also the batched planner)
VARIANTS = {
    "parallel": ("", "on", False),
    "sequential": ("", "off", False),
    "graphs": (GRAPHS, "on", True),
    "nographs": (NO_GRAPHS, "on", False),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--quick", action="store_true", help="small sizes (a CPU smoke run)")
    parser.add_argument(
        "--ik-batches", help="IK batch sizes (default: 1,100 quick, else up to 100,000)"
    )
    parser.add_argument("--commit")
    parser.add_argument("--timeout", type=float, default=120.0, help="s per variant")
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    batches = args.ik_batches or ("1,100" if args.quick else "1,1000,10000,100000")
    plan_batches = "4" if args.quick else "256"
    table = ["| variant | row | size | time | success | verified | note |", "|---" * 7 + "|"]
    for name in args.variants.split(","):
        flags, restarts, plans = VARIANTS[name]
        only = "ik,latency,plan" if plans else "ik,latency"
        command = [
            sys.executable,
            str(REPO / "bench/gpu_report.py"),
            "--quick" if args.quick else "--full",
            f"--only={only}",
            f"--ik-batches={batches}",
            f"--latency={50 if args.quick else 200}",
            "--plans=0",
            f"--plan-batches={plan_batches}",
            f"--parallel-restarts={restarts}",
            "--repeat-budget=3",
            f"--out={out_dir / (name + '.md')}",
        ]
        command += [f"--commit={args.commit}"] if args.commit else []
        env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {flags}".strip()}
        print(f"[gpu-loop] {name}: XLA_FLAGS={env['XLA_FLAGS']!r}, restarts {restarts}", flush=True)
        start = time.perf_counter()
        try:
            done = subprocess.run(
                command, check=False, env=env, capture_output=True, text=True, timeout=args.timeout
            )
            failed = done.returncode != 0 and f"exit {done.returncode}: {done.stderr[-600:]}"
        except subprocess.TimeoutExpired:
            failed = f"over {args.timeout:.0f} s"
        print(f"[gpu-loop] {name}: {time.perf_counter() - start:.0f} s", flush=True)
        report = out_dir / (name + ".md")
        if failed:
            print(f"[gpu-loop] {name} failed: {failed}", flush=True)
            table.append(f"| {name} | failed |  |  |  |  | {failed[:200]!r} |")
            continue
        for line in report.read_text().splitlines():
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 7 and cells[0].startswith(("IK", "plan_batch")):
                what, size, timing, _rate, success, verified, note = cells
                table.append(
                    f"| {name} | {what} | {size} | {timing} | {success} | {verified} | {note} |"
                )
    text = "\n".join(table) + "\n"
    print(text)
    (out_dir / "loop.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
