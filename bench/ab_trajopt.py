#!/usr/bin/env python3
"""A/B of trajectory optimisation: one commit ("before") against another or this checkout.

Each side runs its *own* ``bench/trajopt_benchmark.py`` (single plans only, ``--only single``;
``--check-after``, the plans timed back to back, where that side's script has it)
in a fresh process with ``PYTHONPATH`` at its own tree, so each side plans with its own
``pyroki_ros`` and scene generator; a commit is checked out with ``git worktree add --detach
/tmp/ab_<rev>`` and removed at the end. Protocol:

* same problems on both sides: before timing, each side generates the benchmark's scene with
  its own generator (``pyroki_ros/scenes.py`` before the restructure, ``bench/scenes.py``
  after; same seed, obstacle count and pairs) and the obstacle arrays, start/goal
  configurations and goal poses of both sides are compared (SHA-256 and the largest
  difference); the verdict goes into the report;
* runs interleaved A, B, A, B, ... for ``--rounds``, each a fresh process; the benchmark
  compiles on a warm-up pair before its timed plans (its "compile" column), so the times
  are of compiled plans (``PlanResult.solve_seconds``: wall time of the whole ``plan()``
  call on both sides);
* per run: the benchmark's median / p95 / max plan time, success (planner) and the
  independent check; per side: median of the run medians, their min and max, success;
  the ratio after / before of the medians of medians, and per round;
* recorded: machine, niceness, load average at the start and end (and per run), date,
  both commits;
* a side that cannot run (the venv's dependencies no longer fit an old commit) is reported
  with the reason, and the nearest commits (earlier, then later, alternating) are tried up
  to ``--fallback`` deep; the report names the commit that ran.

Usage (repository root; ~1 min per run on 2 shared CPU cores, compile included)::

    nice -n 5 .venv/bin/python bench/ab_trajopt.py --rounds 3 --out docs/benchmarks/trajopt.md
    .venv/bin/python bench/ab_trajopt.py --before 629dcc7 --after 77ae860 --rounds 1
    # the report of an earlier run's --json, with its own heading:
    .venv/bin/python bench/ab_trajopt.py --report /tmp/ab.json --title "..." --out F.md
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, host, loadavg, utc_now, version, write_between_markers

import numpy as np

BEGIN = "<!-- ab_trajopt:begin -->"
END = "<!-- ab_trajopt:end -->"
WORKTREE = "worktree"
TITLE = "before and after the restructure (issue 15)"

# Run in a side's tree (PYTHONPATH = tree, tree/bench, tree/test): the benchmark's scene with
# that side's own generator, saved for comparison; also imports what the benchmark imports,
# so that a side whose code no longer runs with this venv fails here, before any timing.
SCENE_PROBE = r"""
import json, sys
import numpy as np
try:
    import scenes  # bench/scenes.py (after the restructure)
except ImportError:
    from pyroki_ros import scenes  # pyroki_ros/scenes.py (before)
import plan_check  # noqa: F401  (the benchmark's independent check)
import pyroki_ros
from pyroki_ros import Robot
from pyroki_ros.collision import RobotSpheres, World
from pyroki_ros.robots import urdf_path
try:
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer  # noqa: F401
except ImportError:
    from pyroki_ros.trajopt import TrajectoryOptimizer  # noqa: F401
out, seed, obstacles, pairs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
robot = Robot.from_urdf(urdf_path("panda"))
spheres = RobotSpheres.embedded("panda", robot)
rng = np.random.default_rng(seed)
world = scenes.random_obstacles(rng, obstacles)
cases = scenes.feasible_cases(robot, spheres, world, "panda_hand", pairs, rng)
warm = scenes.feasible_cases(robot, spheres, world, "panda_hand", 1, np.random.default_rng(99))
arrays = {"world." + f: np.asarray(getattr(world, f)) for f in World.__dataclass_fields__
          if hasattr(getattr(world, f), "shape")}
arrays.update(
    starts=np.stack([c.start for c in cases]), goals=np.stack([c.goal for c in cases]),
    goal_poses=np.stack([c.goal_pose for c in cases]),
    warm_start=warm[0].start, warm_goal_pose=warm[0].goal_pose,
    limits=np.stack([np.asarray(robot.lower, np.float64), np.asarray(robot.upper, np.float64)]),
)
np.savez(out, **arrays)
print(json.dumps({"pyroki_ros": pyroki_ros.__file__, "scenes": scenes.__file__}))
"""


def git(*args: str, check: bool = True) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False
    )
    if check and done.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def describe(rev: str) -> str:
    """One line: short commit, commit date and subject (cut to 110 characters in all)."""
    line = git("show", "-s", "--date=format-local:%Y-%m-%d %H:%M UTC", "--format=%h (%cd) %s", rev)
    return line if len(line) <= 110 else line[:107] + "..."


class Side:
    """One side of the A/B: a commit in a temporary worktree, or this checkout as it is."""

    def __init__(self, label: str, rev: str):
        self.label, self.requested = label, rev
        self.worktree = None
        self.note = ""  # why another commit than the requested one ran
        if rev == WORKTREE:
            self.commit, self.tree = git("rev-parse", "HEAD"), REPO
            changed = git("status", "--porcelain", "--untracked-files=normal").splitlines()
            self.name = git("rev-parse", "--short", "HEAD") + ("+dirty" if changed else "")
            self.dirty = [line[3:] for line in changed if line[3:].startswith("pyroki_ros/")]
            self.fingerprint = self.state()
        else:
            self.use(rev)

    def use(self, rev: str) -> None:
        self.remove()
        self.commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
        short = git("rev-parse", "--short", self.commit)
        path = Path(tempfile.gettempdir()) / f"ab_{short}"
        if path.exists():  # left by an interrupted run of this script
            git("worktree", "remove", "--force", str(path), check=False)
        git("worktree", "add", "--detach", str(path), self.commit)
        self.worktree = self.tree = path
        self.name, self.dirty = short, []
        self.fingerprint = self.state()

    def state(self) -> dict[str, str]:
        """Digest of each file in which the working tree's code differs from HEAD
        (pyroki_ros/, bench/, test/): another session editing the tree during the A/B
        changes it. A commit side: its commit."""
        if self.requested != WORKTREE:
            return {"": self.commit}
        spec = ("--", "pyroki_ros", "bench", "test", ":!bench/ab_trajopt.py")
        names = git("diff", "HEAD", "--name-only", *spec).split("\n")
        names += git("ls-files", "--others", "--exclude-standard", *spec).split("\n")
        digests = {}
        for name in filter(None, names):
            path = REPO / name
            data = path.read_bytes() if path.is_file() else b"(deleted)"
            digests[name] = hashlib.sha256(data).hexdigest()[:12]
        return digests

    def remove(self) -> None:
        if self.worktree is not None:
            git("worktree", "remove", "--force", str(self.worktree), check=False)
            self.worktree = None

    def env(self) -> dict:
        env = dict(os.environ)
        paths = [str(self.tree), str(self.tree / "bench"), str(self.tree / "test")]
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
        return env

    def run(self, command: list[str], timeout: float) -> subprocess.CompletedProcess:
        """``command`` in this side's tree with its PYTHONPATH, output captured."""
        return subprocess.run(
            command,
            cwd=self.tree,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def describe(self) -> str:
        text = describe(self.commit)
        if self.requested == WORKTREE:
            text = f"working tree at {text}"
            if self.dirty:
                text += f"; uncommitted changes in pyroki_ros/: {', '.join(self.dirty)}"
        return text


def probe(side: Side, args, out: Path) -> tuple[bool, str]:
    """The side's scene into ``out`` (.npz); (ok, the probe's JSON line or the error's tail)."""
    done = side.run(
        [sys.executable, "-c", SCENE_PROBE, str(out)]
        + [str(x) for x in (args.seed, args.obstacles, args.pairs)],
        args.timeout,
    )
    if done.returncode:
        return False, " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
    return True, done.stdout.strip().splitlines()[-1]


def nearest_commits(rev: str, toward: str, depth: int) -> list[str]:
    """``rev``, then up to ``depth`` neighbours each way, earlier and later (on the way to
    ``toward``) alternately, nearest first."""
    earlier = git("rev-list", "--first-parent", f"--max-count={depth + 1}", rev).split()[1:]
    later = git("rev-list", "--reverse", "--ancestry-path", f"{rev}..{toward}").split()[:depth]
    order = [git("rev-parse", rev)]
    for i in range(depth):
        order += earlier[i : i + 1] + later[i : i + 1]
    return order


def prepare(side: Side, args, scratch: Path, toward: str) -> tuple[Path, str]:
    """Probes the side, falling back to the nearest commits that run (a commit side only);
    the scene file and the probe's line."""
    commits = (
        [side.commit]
        if side.requested == WORKTREE
        else nearest_commits(side.commit, toward, args.fallback)
    )
    failures = []
    for commit in commits:
        if commit != side.commit:
            side.use(commit)
        out = scratch / f"scene_{side.label}_{side.name}.npz"
        ok, line = probe(side, args, out)
        if ok:
            if failures:
                side.note = (
                    f"{side.label} {side.requested} does not run with this venv ("
                    + "; ".join(failures)
                    + f"); measured {side.name} instead, the nearest commit that runs"
                )
            return out, line
        failures.append(f"{side.name}: {line}")
        print(f"[{side.label}] {side.name} does not run: {line}", flush=True)
    raise RuntimeError(f"no {side.label} commit runs: " + "; ".join(failures))


def same_scene(a: Path, b: Path) -> tuple[bool, str]:
    """Whether two probe files hold the same problems, and one line saying how they compare."""
    one, two = np.load(a), np.load(b)

    def digest(files, keys) -> str:
        h = hashlib.sha256()
        for k in keys:
            x = np.ascontiguousarray(files[k], np.float64)
            h.update(f"{k}{x.shape}".encode() + x.tobytes())
        return h.hexdigest()[:12]

    parts, same, largest = [], True, 0.0
    groups = {
        "obstacles": sorted(k for k in one.files if k.startswith("world.")),
        "start/goal configurations": ["starts", "goals", "warm_start"],
        "goal poses": ["goal_poses", "warm_goal_pose"],
        "joint limits (float64 of the robot's arrays; the configurations are drawn in them)": [
            "limits"
        ],
    }
    for what, keys in groups.items():
        other = (
            sorted(k for k in two.files if k.startswith("world.")) if what == "obstacles" else keys
        )
        # A field one revision lacks (e.g. cylinders, added later) must be empty on the other.
        extra = set(keys) ^ set(other)
        if any(np.size((one if k in one.files else two)[k]) for k in extra):
            return False, f"{what}: fields differ ({', '.join(sorted(extra))}, not empty)"
        keys = [k for k in keys if k in other]
        h1, h2 = digest(one, keys), digest(two, keys)
        shapes = all(one[k].shape == two[k].shape for k in keys)
        diff = (
            max(float(np.max(np.abs(one[k] - two[k]), initial=0.0)) for k in keys)
            if shapes
            else np.inf
        )
        if h1 == h2:
            parts.append(f"{what} identical (sha256 {h1})")
        else:
            same, largest = same and diff <= 1e-6, max(largest, diff)
            parts.append(f"{what} differ: sha256 {h1} / {h2}, largest difference {diff:.2e}")
    verdict = "identical" if not largest else f"the same draws, equal to within {largest:.1e}"
    return same, ("" if same else "NOT the same: ") + verdict + "; " + "; ".join(parts)


def run_side(side: Side, args, scratch: Path, round_: int) -> dict:
    """One fresh process of the side's own benchmark; its row and how the run went."""
    out = scratch / f"run_{side.label}_{round_}.json"
    command = [
        sys.executable, str(side.tree / "bench" / "trajopt_benchmark.py"),
        "--only", "single", "--pairs", str(args.pairs), "--steps", str(args.steps),
        "--obstacles", str(args.obstacles), "--seed", str(args.seed), "--json", str(out),
    ]  # fmt: skip
    # Plans timed back to back where the side's benchmark can (a plan right after the check
    # of the last path runs slower on a shared VM, by more than most changes measured here:
    # bench/plan_after_idle.py); an older side checks each path after its plan.
    back_to_back = "--check-after" in (side.tree / "bench" / "trajopt_benchmark.py").read_text()
    command += ["--check-after"] if back_to_back else []
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    done = side.run(command, args.timeout)
    wall = time.perf_counter() - t0
    (scratch / f"run_{side.label}_{round_}.log").write_text(done.stdout + done.stderr)
    if done.returncode or not out.is_file():
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{side.label} ({side.name}) round {round_} failed:\n{tail}")
    row = json.loads(out.read_text())["rows"][0]
    return {
        "side": side.label,
        "commit": side.name,
        "round": round_,
        "wall_s": wall,
        "load_1min": load,
        "check_after": back_to_back,
        **{k: row[k] for k in row if k != "disagreements"},
        "disagreements": len(row.get("disagreements", [])),
    }


def summary(runs: list[dict]) -> dict:
    medians = [r["median_ms"] for r in runs]
    return {
        "median_ms": float(np.median(medians)),
        "min_ms": min(medians),
        "max_ms": max(medians),
        "p95_ms": float(np.median([r["p95_ms"] for r in runs])),
        "success": sorted({r["success_pct"] for r in runs}),
        "checked": sorted({r["checked_pct"] for r in runs}),
        "disagreements": sum(r["disagreements"] for r in runs),
        "iterations": float(np.mean([r["mean_iterations"] for r in runs])),
        "compile_s": float(np.median([r["compile_s"] for r in runs])),
        "wall_s": float(np.median([r["wall_s"] for r in runs])),
    }


def pcts(values: list[float]) -> str:
    return " / ".join(f"{v:.1f} %" for v in values)


def report(result: dict, title: str) -> str:
    a, b = result["summary"]["before"], result["summary"]["after"]
    p = result["params"]
    lines = [
        f"## A/B: {title}",
        "",
        (
            f"Measured {result['started']} - {result['ended']} on {result['host']}, jax "
            f"{result['jax']}, niceness {result['niceness']}; load average (1, 5, 15 min) "
            f"{result['load_start']} at the start, {result['load_end']} at the end (shared "
            "machine: other jobs may have run, which the interleaving spreads over both sides)."
        ),
        f"Command: `{result['command']}`",
        "",
        f"- before: {result['before']}",
        f"- after: {result['after']}",
    ]
    for note in (result["notes"]["before"], result["notes"]["after"]):
        if note:
            lines.append(f"- note: {note}")
    modes = {
        label: all(r.get("check_after", False) for r in result["runs"] if r["side"] == label)
        for label in ("before", "after")
    }
    for label, back_to_back in modes.items():
        lines.append(
            f"- {label}, timing: "
            + (
                "plans back to back, the paths checked after the last (`--check-after`)"
                if back_to_back
                else "each path checked right after its plan (the next plan follows the check)"
            )
            + (
                " (**the sides time plans differently: their times do not compare**)"
                if len(set(modes.values())) > 1
                else ""
            )
        )
    lines += [
        (
            f"- problems: each side's own `bench/trajopt_benchmark.py --only single --pairs "
            f"{p['pairs']} --steps {p['steps']} --obstacles {p['obstacles']} --seed "
            f"{p['seed']}` (Panda, random obstacles, random feasible start/goal pairs with "
            "hand-pose goals, one plan at a time after a compiling warm-up plan; time = "
            "`solve_seconds`, the wall time of the whole `plan()` call). Same problems on both "
            f"sides, generated by each side's own generator: "
            f"**{'yes' if result['same_scene'] else 'NO'}**: {result['scene_check']}."
        ),
        (
            f"- {p['rounds']} rounds, interleaved before, after, before, after, ...; each run a "
            f"fresh process (one run took ~{result['run_wall_s']:.0f} s wall: imports, scene, "
            "compile, the timed plans and the benchmark's untimed independent check of each "
            "path, numpy)."
        ),
        "",
        (
            "| run | side | commit | median | p95 | max | success | checked | mean LM "
            "iterations | compile | load (1 min) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {r['round']} | {r['side']} | {r['commit']} | {r['median_ms']:.1f} ms | "
            f"{r['p95_ms']:.0f} ms | {r['max_ms']:.0f} ms | {r['success_pct']:.1f} % | "
            f"{r['checked_pct']:.1f} % | {r['mean_iterations']:.1f} | {r['compile_s']:.1f} s "
            f"| {r['load_1min']:.2f} |"
        )
    lines += [
        "",
        (
            "| side | median of run medians | min - max of run medians | p95 (median of runs) "
            "| success (planner) | checked | mean LM iterations | compile (median) | run (median) |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, s in (("before", a), ("after", b)):
        lines.append(
            f"| {label} | {s['median_ms']:.1f} ms | {s['min_ms']:.1f} - {s['max_ms']:.1f} ms | "
            f"{s['p95_ms']:.0f} ms | {pcts(s['success'])} | {pcts(s['checked'])} | "
            f"{s['iterations']:.1f} | {s['compile_s']:.1f} s | {s['wall_s']:.0f} s |"
        )
    lines += [
        "",
        f"After / before (medians of the run medians): **{result['ratio']:.2f}**; per round: "
        + ", ".join(f"{x:.2f}" for x in result["round_ratios"])
        + ". "
        + (
            "Planner and independent check agree on every pair of every run."
            if a["disagreements"] + b["disagreements"] == 0
            else f"Planner and check disagree on {a['disagreements']} (before) / "
            f"{b['disagreements']} (after) pairs in all."
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="629dcc7", help="commit (default 629dcc7)")
    parser.add_argument(
        "--after", default=WORKTREE, help=f"commit, or '{WORKTREE}' (default: this checkout)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--obstacles", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fallback", type=int, default=3, help="neighbouring commits tried when one cannot run"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="s per process")
    parser.add_argument("--out", type=Path, help="markdown file: the section between markers")
    parser.add_argument("--json", type=Path, help="all runs and the summary as JSON")
    parser.add_argument("--title", default=TITLE, help="what is compared (report heading)")
    parser.add_argument(
        "--report", type=Path, help="only write the report of an earlier run's --json file"
    )
    args = parser.parse_args()
    if args.report:
        text = report(json.loads(args.report.read_text()), args.title)
        print(text)
        if args.out:
            write_between_markers(args.out, BEGIN, END, text)
        return 0

    command = f"nice -n {os.nice(0)} " if os.nice(0) else ""
    command += ".venv/bin/python bench/ab_trajopt.py " + shlex.join(sys.argv[1:])
    started, load_start = utc_now(), loadavg()
    print(f"{started}  load {load_start}  {host()}", flush=True)
    sides: list[Side] = []
    try:
        with tempfile.TemporaryDirectory(prefix="ab_trajopt_") as tmp:
            scratch = Path(tmp)
            after = Side("after", args.after)
            before = Side("before", args.before)
            sides = [before, after]
            toward = after.commit
            scene_b, line_b = prepare(before, args, scratch, toward)
            scene_a, line_a = prepare(after, args, scratch, toward)
            print(f"[before] {before.name}: {line_b}\n[after] {after.name}: {line_a}", flush=True)
            same, scene_check = same_scene(scene_b, scene_a)
            print(f"same problems: {same} ({scene_check})", flush=True)
            runs: list[dict] = []
            for round_ in range(1, args.rounds + 1):
                for side in (before, after):
                    run = run_side(side, args, scratch, round_)
                    runs.append(run)
                    print(
                        f"round {round_} {side.label:6s} {side.name}: median "
                        f"{run['median_ms']:.1f} ms, p95 {run['p95_ms']:.0f} ms, success "
                        f"{run['success_pct']:.1f} %, checked {run['checked_pct']:.1f} %, "
                        f"compile {run['compile_s']:.1f} s, run {run['wall_s']:.0f} s, "
                        f"load {run['load_1min']:.2f}",
                        flush=True,
                    )
    finally:
        for side in sides:
            side.remove()
    now = after.state()
    moved = sorted(
        k for k in now.keys() | after.fingerprint.keys() if now.get(k) != after.fingerprint.get(k)
    )
    if moved:
        after.note += (" " if after.note else "") + (
            "files of the working tree changed during the A/B (another session's edits; "
            "the after runs may not all be of the same code): " + ", ".join(moved)
        )

    by = {s: [r for r in runs if r["side"] == s] for s in ("before", "after")}
    stats = {s: summary(by[s]) for s in by}
    result = {
        "command": command,
        "started": started,
        "ended": utc_now(),
        "host": host(),
        "jax": version("jax"),
        "niceness": os.nice(0),
        "load_start": load_start,
        "load_end": loadavg(),
        "before": before.describe(),
        "after": after.describe(),
        "notes": {"before": before.note, "after": after.note},
        "params": {k: getattr(args, k) for k in ("rounds", "pairs", "steps", "obstacles", "seed")},
        "same_scene": same,
        "scene_check": scene_check,
        "runs": runs,
        "summary": stats,
        "ratio": stats["after"]["median_ms"] / stats["before"]["median_ms"],
        "round_ratios": [
            b["median_ms"] / a["median_ms"] for a, b in zip(by["before"], by["after"])
        ],
        "run_wall_s": float(np.median([r["wall_s"] for r in runs])),
    }
    text = report(result, args.title)
    print("\n" + text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if args.out:
        write_between_markers(args.out, BEGIN, END, text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
