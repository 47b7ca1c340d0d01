"""The ``pyroki-ros`` command line: ``fk``, ``ik``, ``train-sampler``, ``sample``, ``demo``,
``view`` and ``node``.

The ``fk`` and ``ik`` sub-commands are a stable file contract (npz in, npz out) used by the
benchmarks and by outside checks.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np


def _robot(urdf: str, dtype: type = np.float32):
    """The robot of ``--urdf``: a URDF file, or the name of an embedded robot (``panda``, ``ur5``)."""
    from pyroki_ros.model.robot import Robot
    from pyroki_ros.robots import AVAILABLE, urdf_path

    if Path(urdf).is_file():
        return Robot.from_urdf(Path(urdf), dtype)
    if urdf in AVAILABLE:
        return Robot.from_urdf(urdf_path(urdf), dtype)
    raise SystemExit(f"error: --urdf '{urdf}' is neither a file nor one of {', '.join(AVAILABLE)}")


def _column_order(robot, names: np.ndarray | None, n_columns: int) -> np.ndarray:
    """Index of each actuated joint's column in the input array."""
    if names is None:
        if n_columns != robot.n_joints:
            raise ValueError(
                f"q has {n_columns} columns but the robot has {robot.n_joints} actuated joints "
                f"({', '.join(robot.joint_names)}); pass joint_names to say which is which"
            )
        return np.arange(robot.n_joints)
    names = [str(n) for n in names]
    if len(names) != n_columns:
        raise ValueError(f"joint_names has {len(names)} entries but q has {n_columns} columns")
    if len(set(names)) != len(names):
        raise ValueError("joint_names has duplicates")
    for name in names:
        if name not in robot.joint_names and name not in robot.mimic_joint_names:
            robot.joint_index(name)  # raises with the reason (unknown / fixed)
    missing = [j for j in robot.joint_names if j not in names]
    if missing:
        raise ValueError(f"joint_names lacks actuated joints: {', '.join(missing)}")
    return np.array([names.index(j) for j in robot.joint_names])


def _arrays(path: str, name: str, optional: str | None = None):
    """Array ``name`` (float64) of an npz file, and array ``optional`` (None if absent)."""
    with np.load(path, allow_pickle=False) as data:
        if name not in data:
            raise ValueError(f"{path} has no array '{name}'")
        return np.asarray(data[name], np.float64), data.get(optional)


def _save(path: str, robot, **arrays) -> None:
    """Writes the npz ``path``: the robot's actuated joint names, then ``arrays``; floating
    point ones as float64 (the file contract)."""
    for name, value in arrays.items():
        if np.issubdtype(np.asarray(value).dtype, np.floating):
            arrays[name] = np.asarray(value, np.float64)
    np.savez(path, joint_names=np.array(robot.joint_names), **arrays)


def fk_command(args: argparse.Namespace) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)  # the file contract is float64
    from pyroki_ros.model.kinematics import forward_kinematics

    robot = _robot(args.urdf, np.float64)
    q, names = _arrays(args.q, "q", "joint_names")
    if q.ndim != 2:
        raise ValueError(f"q must have shape (N, n), got {q.shape}")
    if not np.all(np.isfinite(q)):
        raise ValueError("q contains NaN or infinite values")
    q = q[:, _column_order(robot, names, q.shape[1])]
    poses = jax.jit(forward_kinematics)(robot, q).wxyz_xyz
    _save(args.out, robot, link_names=np.array(robot.link_names), poses=poses)
    print(f"fk: {q.shape[0]} configurations x {robot.n_links} links -> {args.out}")
    return 0


def ik_command(args: argparse.Namespace) -> int:
    import jax

    jax.config.update("jax_cpu_enable_async_dispatch", False)  # ~8 us less per small call
    from pyroki_ros import objectives
    from pyroki_ros.ik import IKSolver, enable_compilation_cache

    if not args.no_compile_cache:
        enable_compilation_cache()

    robot = _robot(args.urdf)
    base, chain = robot.moving_chain(args.tip, args.base)
    poses, seeds = _arrays(args.targets, "poses", "seeds")  # the solver makes seeds float64
    if poses.ndim != 2 or poses.shape[1] != 7 or poses.shape[0] == 0:
        raise ValueError(f"poses must have shape (N, 7) with N >= 1, got {poses.shape}")
    if seeds is not None and seeds.shape != (poses.shape[0], robot.n_joints):
        raise ValueError(
            f"seeds must have shape ({poses.shape[0]}, {robot.n_joints}), got {seeds.shape}"
        )

    solver = IKSolver(robot, device=None if args.device == "auto" else args.device)
    goal = objectives.pose(args.tip, poses, reference=None if base == robot.root_link else base)
    options = {
        "seed": seeds,
        "active_joints": [robot.joint_names[i] for i in chain],
        "position_tolerance": args.pos_tol,
        "orientation_tolerance": args.rot_tol,
    }
    start = time.perf_counter()
    solver.solve(goal, **options)  # the first call compiles for this batch-size bucket
    compile_seconds = time.perf_counter() - start
    result = solver.solve(goal, **options)
    _save(
        args.out,
        robot,
        q=result.q,
        success=result.success,
        position_error=result.position_error[:, 0],
        orientation_error=result.orientation_error[:, 0],
        iterations=result.iterations,
        compile_seconds=compile_seconds,
        solve_seconds=result.solve_seconds,
    )
    print(
        f"ik: {result.success.sum()}/{len(poses)} solved ({result.success.mean():.1%}), "
        f"solve {result.solve_seconds * 1e3:.1f} ms, compile {compile_seconds:.2f} s -> {args.out}"
    )
    return 0


def train_sampler_command(args: argparse.Namespace) -> int:
    from pyroki_ros.sampler import TrainConfig, train

    robot = _robot(args.urdf)
    config = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        max_seconds=args.max_seconds if args.max_seconds > 0 else float("inf"),
        seed=args.seed,
    )
    sampler = train(
        robot,
        args.tip,
        base=args.base,
        mode=args.mode,
        config=config,
        hyper_hidden=tuple(args.hyper_hidden),
        joint_hidden=args.joint_hidden,
        components=args.components,
        generated=args.generated,
    )
    weights, meta = sampler.save(args.out)
    info = sampler.spec.training
    print(
        f"train-sampler: {info['steps']} steps in {info['seconds']:.0f} s "
        f"(+{info['compile_seconds']:.0f} s compile) -> {weights}, {meta}"
    )
    return 0


def sample_command(args: argparse.Namespace) -> int:
    from pyroki_ros.sampler import IKSampler, checkpoint_path

    robot = _robot(args.urdf)
    sampler = IKSampler.load(checkpoint_path(args.model), robot)
    targets, _ = _arrays(args.targets, "targets")
    if targets.ndim != 2:
        raise ValueError(f"targets must have shape (N, 3) or (N, 7), got {targets.shape}")
    q = sampler.sample(targets, args.k, seed=args.seed, temperature=args.temperature)
    position, orientation = sampler.errors(targets[:, None], q)
    _save(args.out, robot, q=q, position_error=position, orientation_error=orientation)
    print(
        f"sample: {len(targets)} targets x {args.k} samples, mean position error "
        f"{position.mean() * 100:.2f} cm -> {args.out}"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyroki-ros", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    fk = sub.add_parser("fk", help="forward kinematics of many configurations (npz in/out)")
    fk.add_argument("--urdf", required=True, help="URDF file, or an embedded robot: panda, ur5")
    fk.add_argument("--q", required=True, help="npz with q (N, n) and optional joint_names (n,)")
    fk.add_argument("--out", required=True, help="npz to write: joint_names, link_names, poses")
    fk.set_defaults(run=fk_command)

    ik = sub.add_parser("ik", help="pose IK for many targets of one tip link (npz in/out)")
    ik.add_argument("--urdf", required=True, help="URDF file, or an embedded robot: panda, ur5")
    ik.add_argument("--tip", required=True, help="link whose pose is given")
    ik.add_argument("--base", help="frame of the poses (default: the root link)")
    ik.add_argument("--targets", required=True, help="npz with poses (N, 7) wxyz_xyz, seeds")
    ik.add_argument("--out", required=True, help="npz to write: joint_names, q, success, ...")
    ik.add_argument("--pos-tol", type=float, default=1e-3, help="metres (default 1e-3)")
    ik.add_argument("--rot-tol", type=float, default=np.radians(1.0), help="rad (default 1 deg)")
    ik.add_argument("--device", choices=("cpu", "gpu", "auto"), default="auto")
    ik.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="do not reuse compiled solvers from ~/.cache/pyroki_ros/xla",
    )
    ik.set_defaults(run=ik_command)

    ts = sub.add_parser(
        "train-sampler",
        help="train a learned multi-solution IK sampler for a chain (writes .npz + .json)",
    )
    ts.add_argument("--urdf", required=True, help="URDF file, or an embedded robot: panda, ur5")
    ts.add_argument("--tip", required=True, help="link whose position or pose is the target")
    ts.add_argument("--base", help="frame of the targets (default: the root link)")
    ts.add_argument("--out", required=True, help="checkpoint to write: model.npz (+ model.json)")
    ts.add_argument("--mode", choices=("position", "pose"), default="position")
    ts.add_argument("--steps", type=int, default=20000, help="training steps (default 20000)")
    ts.add_argument(
        "--max-seconds", type=float, default=0.0, help="stop after this long (0 = no limit)"
    )
    ts.add_argument("--batch-size", type=int, default=1024)
    ts.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ts.add_argument("--hyper-hidden", type=int, nargs="+", default=[256, 256])
    ts.add_argument("--joint-hidden", type=int, default=64)
    ts.add_argument("--components", type=int, default=8)
    ts.add_argument(
        "--generated",
        choices=("film", "all"),
        default="film",
        help="hypernetwork output: film = per-joint biases and gains (default, ~5x faster to "
        "train on a CPU), all = every per-joint weight (the paper)",
    )
    ts.add_argument("--seed", type=int, default=0)
    ts.set_defaults(run=train_sampler_command)

    sa = sub.add_parser("sample", help="draw IK samples from a sampler checkpoint (npz in/out)")
    sa.add_argument("--urdf", required=True, help="URDF file, or an embedded robot: panda, ur5")
    sa.add_argument(
        "--model",
        required=True,
        help="checkpoint from train-sampler (.npz), or a shipped model: panda, ur5",
    )
    sa.add_argument("--targets", required=True, help="npz with targets (N, 3) or (N, 7) wxyz_xyz")
    sa.add_argument("--out", required=True, help="npz to write: joint_names, q (N, k, n), errors")
    sa.add_argument("-k", type=int, default=8, help="samples per target (default 8)")
    sa.add_argument("--temperature", type=float, help="component width (default: the model's)")
    sa.add_argument("--seed", type=int, default=0)
    sa.set_defaults(run=sample_command)

    node = sub.add_parser(
        "node",
        help="run the ROS 2 node (same as pyroki_ros_node)",
        description="Runs the ROS 2 node; ROS arguments follow, e.g. "
        "pyroki-ros node --ros-args --params-file config/panda.yaml",
    )
    # Everything after `node` goes to rclpy as is (see main: parse_known_args).
    node.set_defaults(run=node_command)

    demo = sub.add_parser(
        "demo",
        help="start the node on the bundled Panda and exercise every service (about 30 s)",
    )
    demo.add_argument(
        "--timeout",
        type=float,
        default=150.0,
        help="give up waiting for the node after this many seconds (default 150)",
    )
    demo.add_argument(
        "--view", action="store_true", help="also show each step in the web viewer (viser)"
    )
    _viewer_arguments(demo)
    demo.add_argument(
        "--view-seconds",
        type=float,
        default=-1.0,
        help="with --view: keep the viewer up this long after the demo (default: until Ctrl+C)",
    )
    demo.set_defaults(run=demo_command)

    view = sub.add_parser(
        "view",
        help="show a running node in the web viewer: its ~/markers, /joint_states, plans",
        description="Subscribes the node's ~/markers, the robot description, /joint_states and "
        "the trajectory topic, and shows them on a viser page (a ROS client; sends nothing).",
    )
    _viewer_arguments(view)
    view.add_argument("--node", default="/pyroki_ros_node", help="the node's full name")
    view.add_argument("--joint-states", default="/joint_states", help="JointState topic")
    view.add_argument(
        "--trajectory-topic",
        default="/joint_trajectory_controller/joint_trajectory",
        help="the node's trajectory_topic (trajectories of 2+ points play as plans)",
    )
    view.add_argument(
        "--robot-description", default="/robot_description", help="URDF topic (latched)"
    )
    view.add_argument(
        "--urdf", help="a URDF file or bundled robot (panda, ur5) instead of the topic"
    )
    view.add_argument(
        "--seconds", type=float, default=0.0, help="stop after this long (default: Ctrl+C)"
    )
    view.set_defaults(run=view_command)
    return parser


def _viewer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8080, help="viewer port (default 8080)")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="viewer address to bind (default 127.0.0.1; 0.0.0.0 serves every interface, "
        "without authentication)",
    )


def node_command(args: argparse.Namespace) -> int:
    from pyroki_ros.ros.node import main as node_main

    return node_main(["pyroki-ros", *args.ros_args])


def demo_command(args: argparse.Namespace) -> int:
    from pyroki_ros.ros.demo import run

    return run(args.timeout, args.view, args.host, args.port, args.view_seconds)


def view_command(args: argparse.Namespace) -> int:
    from pyroki_ros.ros.view import run  # ROS imports stay inside this command

    return run(args)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "node":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.ros_args = extra
    try:
        return args.run(args)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
