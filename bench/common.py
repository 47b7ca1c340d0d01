"""What every benchmark records beside its numbers, and how it times and writes them: one copy,
imported by every script in bench/.

* the run: :func:`machine` (a dict) / :func:`host` / :func:`machine_line` (one line),
  :func:`git_rev`, :func:`loadavg`, :func:`version`, :func:`utc_now`;
* timing: :func:`time_calls` (repeated calls of one function, wall and CPU seconds),
  :func:`pct` and :func:`stats_ms` (latency summary);
* results: :func:`run_meta` and :func:`measured_lines` (a report's run and its opening
  lines), :func:`write_report`, :func:`write_between_markers` (a report into its place in a
  markdown file).

Scripts run as ``.venv/bin/python bench/<script>.py`` from the repository root, so this
directory is on ``sys.path`` and ``import common`` works; importing it also puts this checkout
and ``test/`` first on ``sys.path`` (``pyroki_ros`` is this checkout's, installed or not, and
the independent numpy references of ``test/`` import by name). Standard library and numpy
only, no rclpy and no JAX at import: ``gpu_report.py`` runs where only the core is installed.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
for _path in (REPO / "test", REPO):  # REPO ends up first
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))


# --- the run ----------------------------------------------------------------------------------


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
    return platform.processor() or platform.machine() or "unknown"


def usable_cpus() -> int | None:
    """CPUs this process may run on (its affinity), where the OS says."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


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
    info["usable_cpus"] = usable_cpus()
    try:
        kib = int(Path("/proc/meminfo").read_text().split("\n")[0].split()[1])
        info["memory_gib"] = round(kib / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    info["os"] = platform.platform()
    info["python"] = platform.python_version()
    return info


def host() -> str:
    """One line: the CPU model and the logical CPUs (and the usable ones, when fewer)."""
    logical, usable = os.cpu_count(), usable_cpus()
    fewer = f" ({usable} usable)" if usable and logical and usable < logical else ""
    return f"{cpu_model()}, {logical} logical CPUs{fewer}"


def machine_line() -> str:
    """One line: :func:`host`, JAX's first device, Python and jax versions (imports jax)."""
    import jax

    device = jax.devices()[0]
    kind = "" if device.platform == "cpu" else f" {device.device_kind}"
    return (
        f"{host()}, JAX on {device.platform}{kind}, Python {platform.python_version()}, "
        f"jax {version('jax')}"
    )


def git_rev(*paths: str) -> str:
    """Short commit of this checkout, "+dirty" when the working tree differs from it: changed
    or new (not ignored) files, only those under ``paths`` (relative to the repository root)
    when given."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", *paths)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def commit_of(given: str | None = None) -> str:
    """The commit a report records: ``given`` (a script's ``--commit``), else
    ``$PYROKI_ROS_COMMIT``, else :func:`git_rev` (a copy without git, such as a lent GPU
    machine's, says which commit it is by one of the first two)."""
    return given or os.environ.get("PYROKI_ROS_COMMIT") or git_rev()


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as "0.52 0.61 0.70"."""
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def version(dist: str, missing: str | None = "n/a") -> str | None:
    """The installed version of distribution ``dist``, else ``missing``."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return missing


def utc_now() -> str:
    """The time now, as "2026-11-25 05:19 UTC"."""
    return f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"


# --- timing -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Calls:
    """What :func:`time_calls` measured: seconds of each call, and the last call's result."""

    wall: np.ndarray  # wall-clock seconds per call
    cpu: np.ndarray  # process CPU seconds per call (all threads)
    result: object


def time_calls(
    fn: Callable[[], object],
    *,
    min_repeats: int = 1,
    max_repeats: int | None = None,
    min_seconds: float = 0.0,
    max_seconds: float = math.inf,
) -> Calls:
    """Calls ``fn()`` again and again, timing each call: at least ``min_repeats`` calls and
    ``min_seconds`` in all, at most ``max_repeats`` calls, and no call once the fastest one so
    far would carry the total past ``max_seconds`` (the first call always runs). Warm-up and
    compiling calls are the caller's, before."""
    wall: list[float] = []
    cpu: list[float] = []
    result = None
    start = time.perf_counter()
    while max_repeats is None or len(wall) < max_repeats:
        spent = time.perf_counter() - start
        if len(wall) >= min_repeats and spent >= min_seconds:
            break
        if wall and spent + min(wall) > max_seconds:
            break
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return Calls(np.asarray(wall), np.asarray(cpu), result)


def pct(values, q: float) -> float:
    """The ``q`` th percentile of ``values`` (NaN when there are none)."""
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


def interleaved(count: int, k: int) -> list[int]:
    """The order in which item ``k`` of an A/B runs its ``count`` variants back to back:
    reversed every other item, so a drift of the machine's speed falls on all alike."""
    order = list(range(count))
    return order if k % 2 == 0 else order[::-1]


def geometric_ratio(seconds, base) -> float:
    """Geometric mean over paired items of ``seconds / base`` (a ratio of times that no
    single slow item dominates)."""
    return math.exp(float(np.mean(np.log(np.asarray(seconds, float) / np.asarray(base, float)))))


def plan_keywords(text: str) -> dict:
    """Keywords of ``TrajectoryOptimizer.plan`` from a JSON object (``weights``: the fields
    of :class:`~pyroki_ros.planning.problem.Weights`)."""
    from pyroki_ros.planning.problem import Weights

    options = json.loads(text)
    if not isinstance(options, dict):
        raise TypeError(f"plan options are a JSON object of plan keywords, got {text!r}")
    if "weights" in options:
        options["weights"] = Weights(**options["weights"])
    return options


# --- results ----------------------------------------------------------------------------------


def run_meta(script: str, argv: Sequence[str] | None, load_start: str, **extra) -> dict:
    """What a report records about its run (:func:`measured_lines`): the date, machine,
    commit, the command as typed (``.venv/bin/python bench/<script> <argv>``; ``argv``
    None: this process's), the load averages at the start (``load_start``, taken before the
    work) and now; then ``extra``."""
    argv = sys.argv[1:] if argv is None else argv
    return {
        "date": utc_now(),
        "machine": machine_line(),
        "commit": commit_of(None),
        "command": f".venv/bin/python bench/{script} {shlex.join(argv)}".strip(),
        "load_start": load_start,
        "load_end": loadavg(),
        **extra,
    }


def measured_lines(meta: dict) -> list[str]:
    """A report's opening lines from :func:`run_meta`: when, where, which commit and load;
    the command."""
    return [
        (
            f"Measured {meta['date']} on {meta['machine']}; commit {meta['commit']}; load "
            f"average {meta['load_start']} at the start, {meta['load_end']} at the end."
        ),
        f"Command: `{meta['command']}`",
    ]


def write_report(text: str, path: str | Path) -> None:
    """Prints a report and, where ``path`` is given (relative: to the repository root),
    writes it there."""
    print(text)
    if path:
        target = REPO / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def write_between_markers(path: Path, begin: str, end: str, body: str, new_file: str = "") -> None:
    """Puts ``begin``, ``body`` and ``end`` (one block) into the markdown file ``path``: in
    place of the block between these markers where the file has them, else at its end (a
    file that does not exist yet starts as ``new_file``). The rest of the file is kept."""
    block = f"{begin}\n{body}{end}\n"
    text = path.read_text() if path.is_file() else new_file
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "") + block
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
