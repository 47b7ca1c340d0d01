"""What every benchmark records beside its numbers: the machine, the commit, the load, the
versions; and the latency summary they print. One copy, imported by the scripts in bench/
(they run as ``.venv/bin/python bench/<script>.py``, so this directory is on ``sys.path``).
Standard library and numpy only: ``gpu_report.py`` runs where nothing else is installed."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), or what platform knows."""
    try:
        found = re.search(
            r"^model name\s*:\s*(.*)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE
        )
        if found:
            return found[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """CPU model and SIMD flags, logical and usable CPUs, memory, OS, Python."""
    info: dict = {"cpu": cpu_model()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        fields = dict(re.findall(r"^(cpu family|model|flags)\s*:\s*(.*)$", text, re.MULTILINE))
        info["cpu_family_model"] = f"family {fields.get('cpu family')}, model {fields.get('model')}"
        flags = fields.get("flags", "").split()
        info["simd"] = " ".join(f for f in ("avx2", "fma", "avx512f", "amx_tile") if f in flags)
    except OSError:
        pass
    info["logical_cpus"] = os.cpu_count()
    info["usable_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    try:
        kib = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        info["memory_gib"] = round(kib / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    info["os"] = platform.platform()
    info["python"] = platform.python_version()
    return info


def git_rev() -> str:
    """Short commit of this checkout, "+dirty" with uncommitted changes to tracked files."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def loadavg() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "n/a"


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, float), q)) if len(values) else float("nan")


def stats_ms(seconds) -> dict:
    """Latency summary in ms of durations in s: n, p50, p95, max, mean."""
    a = np.asarray(seconds, float) * 1e3
    if not len(a):
        return {"n": 0}
    return {
        "n": len(a),
        "p50": float(np.median(a)),
        "p95": pct(a, 95),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }
