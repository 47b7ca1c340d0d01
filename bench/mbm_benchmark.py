#!/usr/bin/env python3
"""MotionBenchMaker benchmark: ``TrajectoryOptimizer.plan`` on Panda problem files, judged by
the planner and by an independent check.

Protocol:

* problems: robometrics' 5 demo problems (``test/data/mbm/demo_set.yaml``) and the generated
  MotionBenchMaker-style set (``test/data/mbm/generated_seed0.yaml``: 10 per family, seven
  families, made by ``bench/mbm_problems.py`` independently of pyroki_ros);
* planning, with the public API as a user would: ``Robot.from_urdf`` of the bundled Panda, its
  bundled sphere model, ``TrajectoryOptimizer(robot, spheres).plan(start, [pose("panda_hand",
  goal)], world=..., num_steps=64, active_joints=<the 7 arm joints>, timeout=2.0)`` (the
  budget: ``--timeout``, 2 s by default, the failure time asked for), the start padded with
  the open fingers; the world: cuboids as boxes, cylinders as cylinders (exact, flat caps; as
  capsules, a cover reaching a radius past each cap, where ``World`` has no cylinder kind),
  the robot's stand included
  (``--drop-stand`` leaves it out of the planner's world, never out of the check). When
  ``plan`` takes ``contacts`` it is left at its default and said so in the report;
* warm-up: a fresh optimiser's ``warm_up`` (as the node runs at start: a plan and the whole
  goal search) on the first problem, or a plan of it for a commit without ``warm_up``; then
  every problem once, timed with ``time.perf_counter`` around ``plan``, with the seconds JAX
  spent compiling during it (tracing, lowering and XLA, by ``jax.monitoring``'s events: every
  program, the optimiser's, the IK's and the clearance checks'); each path checked right
  after its plan, or with ``--check-after`` every path after the last plan, the plans timed
  back to back (on a shared VM a plan that follows the check's numpy work runs slower:
  ``bench/plan_after_idle.py`` measures by how much);
* independent check (``test/mbm_check.py``): goal within 1 mm / 1 degree by a float64 numpy FK,
  joint limits, robometrics' Franka spheres (not the planner's) at distance >= 0 from the exact
  cuboids and cylinders (``panda_link0``'s excepted), robometrics' self-collision rule, along
  the path linearly interpolated (>= 20 points per segment, <= 0.005 rad per joint between
  points). Every returned path is checked, whatever the planner says.

Per set and family: plans the planner calls successful, paths that pass the check, both
(the success that counts), false successes (planner yes, check no), plan time median / p95 /
max, the family's first plan in the timed pass, the compile seconds inside the timed plans, and
the median joint-space path length (sum over segments of the 7 arm joints' Euclidean step, rad).

Usage (repository root)::

    .venv/bin/python bench/mbm_benchmark.py                      # all, writes docs/benchmarks/mbm.md
    .venv/bin/python bench/mbm_benchmark.py --quick              # demo set + 1 per family
    .venv/bin/python bench/mbm_benchmark.py --families cage,box --limit 3 --markdown ''
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import math
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from common import REPO, commit_of, loadavg, machine_line, utc_now

import mbm_check as mc
import mbm_problems as mp
import numpy as np

from pyroki_ros import collision as col
from pyroki_ros.solver.damping import Damping

DEFAULT_SETS = (mp.DEMO_SET, mp.GENERATED_SET)
DEFAULT_MARKDOWN = REPO / "docs" / "benchmarks" / "mbm.md"


@dataclasses.dataclass
class Planner:
    """The planner under test and how problems are handed to it."""

    robot: object
    spheres: object
    optimizer: object
    arm: tuple[str, ...]  # active joints
    plan_options: dict  # extra keywords for plan: the budget (``timeout``) when given
    notes: tuple[str, ...]  # how the API was used, for the report


# The plan's budget (s): a failure answers within 2 s, as the issue asks.
BUDGET_S = 2.0
# Obstacles per kind padded to these (TrajectoryOptimizer(obstacle_buckets=...)): the
# library's buckets for scenes that vary (the node's), the default of --obstacle-buckets and
# what the other MotionBenchMaker scripts plan with.
BUCKETS = col.COARSE_WORLD_BUCKETS


def make_planner(
    fine: bool = False,
    timeout: float = 0.0,
    buckets: tuple[int, ...] | None = None,
    spheres_file: Path | None = None,
    start_collision: str = "refuse",
    start_batches: tuple[int, ...] | None = None,
    plan_seed: int | None = None,
    schedule: Damping | None = None,
) -> Planner:
    from pyroki_ros import Robot
    from pyroki_ros.collision import RobotSpheres, embedded_path, exact_hull_links
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer
    from pyroki_ros.robots import urdf_path

    robot = Robot.from_urdf(urdf_path("panda"))
    path = spheres_file or embedded_path("panda", fine=fine)
    spheres = RobotSpheres.from_yaml(robot, path)
    model = (
        f"the model in {spheres_file}"
        if spheres_file
        else (f"the bundled {'fine' if fine else 'default'} model")
    )
    options = {} if buckets is None else {"obstacle_buckets": buckets}
    if schedule is not None:  # an LM damping schedule other than the default (bench/mbm_ab.py)
        options["schedule"] = schedule
    if exact_hull_links(path):  # the file's exact model: the plans' fallback
        options["exact"] = RobotSpheres.from_yaml(robot, path, exact=True)
    optimizer = TrajectoryOptimizer(robot, spheres, **options)
    arm = tuple(j for j in robot.joint_names if j in mc.ARM_JOINTS)
    params = inspect.signature(optimizer.plan).parameters
    notes = [
        (
            f"Planner spheres: {model} ({int(spheres.world_mask.sum())} spheres"
            + (f" and {spheres.n_boxes} boxes" if spheres.n_boxes else "")
            + f" for obstacles, {spheres.n_pairs} self pairs), not robometrics'"
        ),
    ]
    if optimizer.exact is not None:
        notes.append(
            f"exact model: {', '.join(optimizer.exact_links)} as its mesh hull, the plans' "
            "fallback when the spheres put every goal configuration in collision"
        )
    if buckets is not None:
        notes.append(f"`obstacle_buckets={tuple(buckets)}` (obstacles per kind padded to these)")
    if start_batches is not None:
        optimizer.start_batches = tuple(start_batches)
        notes.append(f"`start_batches={tuple(start_batches)}` (start paths per optimisation)")
    if "contacts" in params:
        default = params["contacts"].default
        notes.append(f"`contacts` left at its default ({default!r})")
    else:
        notes.append("`plan` has no contact rules: panda_link0 is checked against the stand")
    for name in ("allowed_collisions", "check_fixed_links"):
        if name in params:
            notes.append(f"`{name}` left at its default ({params[name].default!r})")
    options = {}
    if start_collision != "refuse":
        options["start_collision"] = start_collision
        notes.append(
            f"`start_collision={start_collision!r}` (a start the spheres call a collision is "
            "planned out of; the problems' starts are clear of the real geometry)"
        )
    if plan_seed is not None:
        options["seed"] = plan_seed
        notes.append(f"`seed={plan_seed}` (the plan's random draws: bent start paths, RRT)")
    if timeout > 0 and "timeout" in params:
        options["timeout"] = timeout
        notes.append(f"`timeout={timeout:g}` s: the plan's budget (the node's config has one too)")
    return Planner(robot, spheres, optimizer, arm, options, tuple(notes))


def _exact_cylinders() -> bool:
    """Whether ``World`` has the cylinder kind (older commits have only capsules)."""
    from pyroki_ros.collision import World

    return "cylinder_poses" in inspect.signature(World.create).parameters


def to_world(problem: mp.Problem, drop_stand: bool = False, capsules: bool = False):
    """The problem's obstacles as a ``World``: cuboids as boxes, cylinders as cylinders
    (exact). With ``capsules``, or for a ``World`` without the cylinder kind (an older commit
    benchmarked), each cylinder is the capsule of its axis segment and radius (it covers the
    cylinder, reaching a radius past each cap)."""
    from pyroki_ros.collision import World

    params = inspect.signature(World.create).parameters
    cuboids = [c for c in problem.cuboids if not (drop_stand and c.name == mp.STAND.name)]
    cylinders = list(problem.cylinders)
    kwargs = {}
    if cuboids:
        kwargs.update(
            box_poses=[c.pose for c in cuboids],
            box_half_extents=[np.asarray(c.dims) / 2 for c in cuboids],
        )
    exact = _exact_cylinders() and not capsules
    if cylinders and exact:
        kwargs.update(
            cylinder_poses=[c.pose for c in cylinders],
            cylinder_radii=[c.radius for c in cylinders],
            cylinder_half_heights=[c.height / 2 for c in cylinders],
        )
    elif cylinders:
        a, b = [], []
        for c in cylinders:
            rot, pos = mc.pose_frame(c.pose)
            half = rot[:, 2] * c.height / 2
            a.append(pos - half)
            b.append(pos + half)
        kwargs.update(capsule_a=a, capsule_b=b, capsule_radii=[c.radius for c in cylinders])
    if "names" in params:
        # World order: spheres, capsules, boxes, half-spaces, cylinders.
        boxes = [c.name for c in cuboids]
        cans = [c.name for c in cylinders]
        kwargs["names"] = boxes + cans if exact else cans + boxes
    return World.create(**kwargs)


@dataclasses.dataclass(frozen=True)
class ProblemResult:
    """One planned problem: the planner's word, the independent verdict, wall time (s),
    joint-space path length (rad, arm joints), the planner's message, compile seconds."""

    name: str
    family: str
    source: str
    planner_ok: bool
    verdict: mc.Verdict
    seconds: float
    path_length: float
    message: str
    compile_seconds: float = 0.0  # JAX compile time (tracing, lowering, XLA) inside the plan
    own_goals_clear: str = ""  # "k/K": the problem's goal_ik clear by the planner's spheres

    @property
    def false_success(self) -> bool:
        return self.planner_ok and not self.verdict.ok


def configurations(planner: Planner, arm: np.ndarray) -> np.ndarray:
    """(..., n) the robot's configurations of (..., 7) arm joint values, fingers open."""
    arm = np.asarray(arm, np.float64)
    index = {j: i for i, j in enumerate(mc.ARM_JOINTS)}
    columns = [
        arm[..., index[j]] if j in index else np.full(arm.shape[:-1], mc.FINGER_OPEN)
        for j in planner.robot.joint_names
    ]
    return np.stack(columns, axis=-1)


def start_configuration(planner: Planner, problem: mp.Problem) -> np.ndarray:
    """(n,) the problem's 7 arm joints in the robot's order, fingers open."""
    return configurations(planner, problem.start)


@dataclasses.dataclass(frozen=True)
class Planned:
    """One timed plan, not checked yet: the plan (None when ``plan`` raised, ``error`` its
    text), its wall time and the compile seconds inside it."""

    problem: mp.Problem
    plan: object | None
    seconds: float
    compile_seconds: float
    error: str = ""


def plan_problem(
    planner: Planner,
    problem: mp.Problem,
    *,
    num_steps: int = 64,
    drop_stand: bool = False,
    **options,
) -> Planned:
    """Plans one problem, timed with ``time.perf_counter`` around ``plan`` (a planner
    exception is kept as the failure's message). ``options``: more ``plan`` keywords, over
    ``planner.plan_options`` (e.g. ``progress``)."""
    from pyroki_ros import objectives as O
    from pyroki_ros.planning.budget import compile_seconds

    start = start_configuration(planner, problem)
    world = to_world(problem, drop_stand)
    goal = [O.pose(mc.GOAL_LINK, np.asarray(problem.goal_pose))]
    compiling = compile_seconds(all_threads=True)
    t0 = time.perf_counter()
    try:
        plan = planner.optimizer.plan(
            start,
            goal,
            world=world,
            num_steps=num_steps,
            active_joints=planner.arm,
            **{**planner.plan_options, **options},
        )
    except Exception as error:  # noqa: BLE001 (a crash fails this problem, not the run)
        seconds = time.perf_counter() - t0
        compiled = compile_seconds(all_threads=True) - compiling
        return Planned(problem, None, seconds, compiled, f"{type(error).__name__}: {error}")
    seconds = time.perf_counter() - t0
    return Planned(problem, plan, seconds, compile_seconds(all_threads=True) - compiling)


def check_problem(planner: Planner, planned: Planned, source: str = "") -> ProblemResult:
    """The independent check of a timed plan (``test/mbm_check.py``) and its result row."""
    problem = planned.problem
    if planned.plan is None:
        verdict = mc.Verdict(False, math.inf, math.inf, False, -math.inf, -math.inf, "no path")
        return ProblemResult(
            problem.name,
            problem.family,
            source,
            False,
            verdict,
            planned.seconds,
            math.nan,
            planned.error,
            planned.compile_seconds,
        )
    plan = planned.plan
    names = list(planner.robot.joint_names)
    path = np.asarray(plan.path, np.float64)[:, [names.index(j) for j in mc.PANDA.joint_names]]
    verdict = mc.check_path(path, problem.goal_pose, problem.scene)
    length = float(np.linalg.norm(np.diff(path[:, :7], axis=0), axis=1).sum())
    return ProblemResult(
        problem.name,
        problem.family,
        source,
        bool(plan.success),
        verdict,
        planned.seconds,
        length,
        str(getattr(plan, "message", "")),
        planned.compile_seconds,
        own_goals_clear(planner, problem) if hasattr(planner.optimizer, "clearances") else "",
    )


def run_problem(
    planner: Planner,
    problem: mp.Problem,
    *,
    num_steps: int = 64,
    drop_stand: bool = False,
    source: str = "",
) -> ProblemResult:
    """Plans one problem and checks the path independently right after."""
    planned = plan_problem(planner, problem, num_steps=num_steps, drop_stand=drop_stand)
    return check_problem(planner, planned, source)


def warm(planner: Planner, problem: mp.Problem, num_steps: int, drop_stand: bool) -> str:
    """Compiles before the timed pass as the node does at start: ``warm_up`` (a plan and the
    whole goal search) on the problem and on its boxes alone (the node warms boxes with
    cylinders and boxes alone); a plan of it where the optimiser has no ``warm_up`` (an older
    commit benchmarked). Returns which it ran."""
    from pyroki_ros import objectives as O

    if not hasattr(planner.optimizer, "warm_up"):
        run_problem(planner, problem, num_steps=num_steps, drop_stand=drop_stand)
        return "a plan"
    boxes_only = dataclasses.replace(problem, cylinders=())
    for scene in (problem, boxes_only) if problem.cylinders else (problem,):
        planner.optimizer.warm_up(
            start_configuration(planner, scene),
            [O.pose(mc.GOAL_LINK, np.asarray(scene.goal_pose))],
            world=to_world(scene, drop_stand),
            num_steps=num_steps,
            active_joints=planner.arm,
            **planner.plan_options,
        )
    return "`warm_up` (its scene, and its boxes alone: the node's warm-up kinds)"


def warmed_planner(problem: mp.Problem, schedule: Damping | None = None) -> Planner:
    """The planner as ``--fine-spheres --start-collision escape`` plans (the 2 s budget, the
    default buckets), warmed up on ``problem``: what the other MotionBenchMaker scripts time.
    ``schedule``: its LM damping schedule (default: the optimiser's)."""
    planner = make_planner(
        fine=True, timeout=BUDGET_S, buckets=BUCKETS, start_collision="escape", schedule=schedule
    )
    warm(planner, problem, 64, False)
    return planner


def own_goals_clear(planner: Planner, problem: mp.Problem) -> str:
    """``k/K``: how many of the problem's own goal configurations (``goal_ik``, clear of the
    real meshes and robometrics' spheres by construction) the planner's sphere model calls
    clear, by the planner's rule (``clearances``, the arm joints moving: ``panda_link0`` is
    not checked). 0/K: no goal search can succeed with this model unless it finds goal
    configurations the generator did not keep. Computed after the plan, not timed."""
    from pyroki_ros.collision import ContactRules

    goals = np.asarray(problem.goal_ik, np.float64).reshape(-1, 7)
    if planner.spheres is None or not len(goals):
        return "-"
    q = configurations(planner, goals)
    moving = np.isin(planner.robot.joint_names, planner.arm)
    d = planner.optimizer.clearances(q, to_world(problem), ContactRules(), moving)
    return f"{int((np.asarray(d) >= 0).sum())}/{len(goals)}"


def summarize(results: Sequence[ProblemResult]) -> dict:
    ms = np.array([r.seconds for r in results]) * 1e3
    lengths = [r.path_length for r in results if np.isfinite(r.path_length)]
    return {
        "problems": len(results),
        "planner_ok": sum(r.planner_ok for r in results),
        "check_ok": sum(r.verdict.ok for r in results),
        "both_ok": sum(r.planner_ok and r.verdict.ok for r in results),
        "false_success": sum(r.false_success for r in results),
        "median_ms": float(np.median(ms)),
        "p95_ms": float(np.percentile(ms, 95)),
        "max_ms": float(ms.max()),
        "first_ms": float(ms[0]),
        "compile_s": float(sum(r.compile_seconds for r in results)),
        "path_length": float(np.median(lengths)) if lengths else math.nan,
    }


def select(
    sets: Sequence[Path], families: Sequence[str] | None, limit: int | None, quick: bool
) -> list[tuple[str, mp.Problem]]:
    """(set label, problem) in file order; ``quick``: the demo set and the first problem of
    each family of the other sets."""
    out = []
    for path in sets:
        label = Path(path).stem
        counts: dict[str, int] = {}
        for p in mp.load_problems(path):
            if families and p.family not in families:
                continue
            cap = 1 if quick and Path(path) != mp.DEMO_SET else limit
            if cap is not None and counts.get(p.family, 0) >= cap:
                continue
            counts[p.family] = counts.get(p.family, 0) + 1
            out.append((label, p))
    return out


def pct(n: int, d: int) -> str:
    return f"{n}/{d} ({100.0 * n / d:.0f} %)" if d else "-"


def markdown(
    rows: list[tuple[str, str, dict]],
    total: dict,
    results: Sequence[ProblemResult],
    meta: dict,
) -> str:
    lines = [
        "# MotionBenchMaker benchmark",
        "",
        (
            f"Measured {meta['date']} on {meta['machine']}; commit {meta['commit']}; "
            f"load average {meta['load_start']} at the start, {meta['load_end']} at the end."
        ),
        f"Command: `{meta['command']}`",
        "",
        (
            "Panda on its stand, MotionBenchMaker scenes: robometrics' demo set (5 "
            "`bookshelf_small` problems) and the set generated by `bench/mbm_problems.py` "
            "(scenes and queries after MotionBenchMaker, valid by the independent check, never "
            "filtered by a planner). Planner: `TrajectoryOptimizer.plan`, "
            f"T = {meta['steps']}, pose goal for `panda_hand`, 7 arm joints active, cylinders "
            f"as {meta.get('cylinders', 'capsules')}"
            + (", the stand left out of the planner's world" if meta["drop_stand"] else "")
            + ". "
            + "; ".join(meta["notes"])
            + "."
        ),
        "",
        (
            "*planner*: the plan says success; *check*: the path passes the independent check "
            "(`test/mbm_check.py`: goal within 1 mm / 1 deg by a float64 numpy FK, joint "
            "limits, robometrics' Franka spheres except `panda_link0`'s at distance >= 0 from "
            "the exact cuboids and cylinders, self-collision by robometrics' rule, >= 20 "
            "points per segment); *both*: the success that counts; *false success*: planner "
            "yes, check no. Times per plan after a warm-up "
            f"({meta['first_plan_s']:.1f} s, {meta['warm_up']} of `{meta['first_problem']}`), "
            f"{meta['order']}; "
            "*first*: the family's first plan in the timed pass; *compile*: seconds JAX spent "
            "compiling inside the timed plans (tracing, lowering, XLA: a new obstacle-count "
            "bucket or problem structure). Path length: median joint-space length (rad)."
        ),
        "",
        (
            "| set | family | problems | planner | check | both | false success | median | p95 "
            "| max | first | compile | path length |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def row(label, family, s):
        n = s["problems"]
        return (
            f"| {label} | {family} | {n} | {pct(s['planner_ok'], n)} | {pct(s['check_ok'], n)} "
            f"| {pct(s['both_ok'], n)} | {s['false_success']} | {s['median_ms']:.0f} ms "
            f"| {s['p95_ms']:.0f} ms | {s['max_ms']:.0f} ms | {s['first_ms']:.0f} ms "
            f"| {s['compile_s']:.1f} s "
            f"| {s['path_length']:.2f} |"
        )

    lines += [row(label, family, s) for label, family, s in rows]
    lines.append(row("**all**", "", total))
    lines += [
        "",
        "## Per problem",
        "",
        (
            "*own goals clear*: of the problem's own goal configurations (`goal_ik`, clear of "
            "the real meshes), those the planner's sphere model calls clear (0: the model, not "
            "the search, stands in the way of those goals)."
        ),
        "",
        (
            "| set | problem | planner | check | time | own goals clear | why the check failed "
            "| planner message |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        message = r.message.replace("|", "/")[:160]
        lines.append(
            f"| {r.source} | {r.name} | {'yes' if r.planner_ok else 'no'} "
            f"| {'yes' if r.verdict.ok else 'no'} | {r.seconds * 1e3:.0f} ms "
            f"| {r.own_goals_clear} | {r.verdict.reason.replace('|', '/')} | {message} |"
        )
    lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--problems", type=Path, nargs="+", default=list(DEFAULT_SETS), help="problem files"
    )
    parser.add_argument(
        "--start-batches",
        help="TrajectoryOptimizer.start_batches, comma-separated (default: its own, "
        "1,1,1,1,1,1,1,1; before 9c94934 8 on a GPU)",
    )
    parser.add_argument(
        "--plan-seed",
        type=int,
        help="plan(seed=...) for every problem (default: plan's own): the same problems "
        "with other random draws, a probe of how often a success is false",
    )
    parser.add_argument(
        "--commit",
        help="commit to record (default: git, or $PYROKI_ROS_COMMIT; a copy without git)",
    )
    parser.add_argument("--quick", action="store_true", help="demo set + 1 problem per family")
    parser.add_argument("--families", help=f"comma-separated subset of {', '.join(mp.FAMILIES)}")
    parser.add_argument("--limit", type=int, help="at most this many problems per family and set")
    parser.add_argument("--steps", type=int, default=64, help="knots T")
    parser.add_argument(
        "--drop-stand", action="store_true", help="leave the stand out of the planner's world"
    )
    parser.add_argument(
        "--markdown",
        default=str(DEFAULT_MARKDOWN),
        help="report file ('' for none; default docs/benchmarks/mbm.md)",
    )
    parser.add_argument("--json", type=Path, help="also write the per-problem results here")
    parser.add_argument(
        "--check-after",
        action="store_true",
        help="plan every problem back to back, check the paths after the last plan "
        "(default: each path checked right after its plan)",
    )
    parser.add_argument(
        "--fine-spheres",
        action="store_true",
        help="plan with the bundled fine sphere model (RobotSpheres.embedded(fine=True))",
    )
    parser.add_argument(
        "--spheres",
        type=Path,
        help="plan with this sphere file (RobotSpheres.from_yaml; tools/fit_collision_spheres.py)",
    )
    parser.add_argument(
        "--start-collision",
        choices=("refuse", "escape"),
        default="refuse",
        help="TrajectoryOptimizer.plan(start_collision=...): refuse (default) or escape",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=BUDGET_S,
        help="the plan's budget, s (default 2: the failure time the issue asks for; 0 = none)",
    )
    parser.add_argument(
        "--obstacle-buckets",
        default=",".join(map(str, BUCKETS)),
        help="TrajectoryOptimizer(obstacle_buckets=...), comma-separated ('' for its default)",
    )
    args = parser.parse_args(argv)
    buckets = (
        tuple(int(b) for b in args.obstacle_buckets.split(",")) if args.obstacle_buckets else None
    )
    families = args.families.split(",") if args.families else None
    for name in families or ():
        if name not in mp.FAMILIES:
            parser.error(f"unknown family {name!r}")
    chosen = select(args.problems, families, args.limit, args.quick)
    if not chosen:
        parser.error("no problems selected")

    load_start = loadavg()

    if args.spheres and args.fine_spheres:
        parser.error("--spheres and --fine-spheres exclude each other")
    planner = make_planner(
        fine=args.fine_spheres,
        timeout=args.timeout,
        buckets=buckets,
        spheres_file=args.spheres,
        start_collision=args.start_collision,
        start_batches=tuple(int(b) for b in args.start_batches.split(","))
        if args.start_batches
        else None,
        plan_seed=args.plan_seed,
    )
    first_label, first = chosen[0]
    t0 = time.perf_counter()
    warm_up = warm(planner, first, num_steps=args.steps, drop_stand=args.drop_stand)
    first_plan_s = time.perf_counter() - t0
    print(f"{warm_up} ({first_label} {first.name}, compiles): {first_plan_s:.1f} s", flush=True)

    results = []

    def plan(problem: mp.Problem) -> Planned:
        return plan_problem(planner, problem, num_steps=args.steps, drop_stand=args.drop_stand)

    # --check-after: every plan timed back to back, the checks after the last (see the doc).
    planned = [plan(problem) for _, problem in chosen] if args.check_after else None
    for i, (label, problem) in enumerate(chosen):
        r = check_problem(planner, planned[i] if planned else plan(problem), label)
        results.append(r)
        print(
            f"{label} {r.name}: planner {'yes' if r.planner_ok else 'no'}, check "
            f"{'yes' if r.verdict.ok else 'no'} {r.verdict.reason}, {r.seconds:.2f} s, "
            f"{r.compile_seconds:.1f} s compiling",
            flush=True,
        )

    groups: dict[tuple[str, str], list[ProblemResult]] = {}
    for r in results:
        groups.setdefault((r.source, r.family), []).append(r)
    rows = [(label, family, summarize(rs)) for (label, family), rs in groups.items()]
    total = summarize(results)
    argv_text = shlex.join(sys.argv[1:] if argv is None else argv)
    meta = {
        "date": utc_now(),
        "machine": machine_line(),
        "commit": commit_of(args.commit),
        "command": f".venv/bin/python bench/mbm_benchmark.py {argv_text}".strip(),
        "steps": args.steps,
        "drop_stand": args.drop_stand,
        "cylinders": "cylinders" if _exact_cylinders() else "capsules",
        "notes": planner.notes,
        "first_plan_s": first_plan_s,
        "first_problem": f"{first_label} {first.name}",
        "warm_up": warm_up,
        "order": (
            "the plans back to back, every path checked after the last plan"
            if args.check_after
            else "each path checked right after its plan (the next plan follows the check)"
        ),
        "load_start": load_start,
        "load_end": loadavg(),
    }
    text = markdown(rows, total, results, meta)
    print(text)
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(text)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "meta": {k: v for k, v in meta.items() if k != "notes"},
                    "rows": [{"set": a, "family": b, **s} for a, b, s in rows],
                    "problems": [
                        {**dataclasses.asdict(r), "verdict": dataclasses.asdict(r.verdict)}
                        for r in results
                    ],
                },
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
