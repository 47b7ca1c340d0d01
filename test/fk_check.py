"""Shared measurement code for test_fk_accuracy.py (float32, in-process) and
test_fk_accuracy_f64.py (float64, in a subprocess with jax_enable_x64).

Everything here measures errors of the JAX core against test/reference_fk.py and returns plain
dicts of floats/strings (JSON-serializable), so the float64 numbers can come back from a
subprocess. The asserting is done by the test files.
"""

from __future__ import annotations

import numpy as np
import reference_fk as ref
from robot_cases import ROBOT_PATHS

N_CONFIGS = 50
SEED = 20240611


def sample_configurations(model: ref.Model, n: int, seed: int = SEED) -> np.ndarray:
    """Uniform in [lower, upper] of the reference limits (continuous joints: [-pi, pi])."""
    lower, upper = ref.actuated_joint_limits(model)
    return np.random.default_rng(seed).uniform(lower, upper, size=(n, lower.shape[0]))


def _parent_joint_kind(model: ref.Model, link: str) -> str:
    joint = model.joint_by_child.get(link)
    if joint is None:
        return "root"
    return f"{joint.name} ({joint.type}{', mimic' if joint.mimic else ''})"


def structure_mismatches(robot, model: ref.Model) -> list[str]:
    """Differences between the JAX Robot's names/limits and the reference; empty if none."""
    problems = []
    names = ref.actuated_joint_names(model)
    if tuple(robot.joint_names) != tuple(names):
        problems.append(f"joint_names {tuple(robot.joint_names)} != reference {tuple(names)}")
    if set(robot.link_names) != set(model.links) or len(robot.link_names) != len(model.links):
        problems.append(
            f"link_names differ: missing {set(model.links) - set(robot.link_names)}, "
            f"extra {set(robot.link_names) - set(model.links)}"
        )
    elif robot.link_names[0] != model.root:
        problems.append(f"link_names[0] = {robot.link_names[0]!r}, root is {model.root!r}")
    else:
        seen = set()
        by_child = model.joint_by_child
        for link in robot.link_names:
            if link != model.root and by_child[link].parent not in seen:
                problems.append(f"link_names not topological: {link!r} before its parent")
                break
            seen.add(link)
    lower, upper = ref.actuated_joint_limits(model)
    got_lo = np.asarray(robot.lower, dtype=np.float64)
    got_hi = np.asarray(robot.upper, dtype=np.float64)
    tol = 1e-6 if np.asarray(robot.lower).dtype == np.float32 else 1e-12
    if got_lo.shape != lower.shape or not (
        np.allclose(got_lo, lower, atol=tol, rtol=0)
        and np.allclose(got_hi, upper, atol=tol, rtol=0)
    ):
        problems.append(f"limits differ: lower {got_lo} vs {lower}, upper {got_hi} vs {upper}")
    return problems


def fk_errors(robot_name: str, dtype_name: str, n_configs: int = N_CONFIGS) -> dict:
    """Max FK errors of the JAX core vs the reference over ``n_configs`` random configurations.

    The configurations are rounded to ``dtype`` first and the reference is evaluated at the
    rounded values, so only the FK arithmetic is measured, not the rounding of q.
    """
    import jax
    import jax.numpy as jnp

    from pyroki_ros import Robot
    from pyroki_ros.model.kinematics import forward_kinematics

    dtype = {"float32": jnp.float32, "float64": jnp.float64}[dtype_name]
    path = ROBOT_PATHS[robot_name]
    model = ref.parse_urdf(path)
    robot = Robot.from_urdf(str(path), dtype=dtype)
    out = {
        "robot": robot_name,
        "dtype": dtype_name,
        "problems": structure_mismatches(robot, model),
        "n_links": len(model.links),
        "n_joints": len(ref.actuated_joint_names(model)),
    }
    if out["problems"]:
        return out
    q = np.asarray(sample_configurations(model, n_configs), dtype=np.dtype(dtype_name))
    poses_jax = jax.jit(forward_kinematics)(robot, jnp.asarray(q))
    wxyz_xyz = np.asarray(poses_jax.wxyz_xyz, dtype=np.float64)
    assert wxyz_xyz.shape == (n_configs, len(model.links), 7), wxyz_xyz.shape
    link_index = {l: i for i, l in enumerate(robot.link_names)}
    worst_pos = (0.0, "", -1)
    worst_rot = (0.0, "", -1)
    worst_norm, reach = 0.0, 0.0
    for c in range(n_configs):
        poses = ref.reference_fk(model, q[c].astype(np.float64))
        for link, t_ref in poses.items():
            row = wxyz_xyz[c, link_index[link]]
            t = ref.make_transform(ref.quat_wxyz_to_matrix(row[:4]), row[4:])
            dp, dr = ref.pose_errors(t_ref, t)
            reach = max(reach, float(np.linalg.norm(t_ref[:3, 3])))
            if dp > worst_pos[0]:
                worst_pos = (dp, link, c)
            if dr > worst_rot[0]:
                worst_rot = (dr, link, c)
            worst_norm = max(worst_norm, abs(float(np.linalg.norm(row[:4])) - 1.0))
    out.update(
        max_pos_err=worst_pos[0],
        max_pos_link=worst_pos[1],
        max_pos_joint=_parent_joint_kind(model, worst_pos[1]) if worst_pos[1] else "",
        max_rot_err=worst_rot[0],
        max_rot_link=worst_rot[1],
        max_rot_joint=_parent_joint_kind(model, worst_rot[1]) if worst_rot[1] else "",
        max_quat_norm_dev=worst_norm,
        max_reach=reach,
    )
    return out


def jacobian_errors(robot_name: str, link: str, dtype_name: str, n_configs: int = 5) -> dict:
    """Max |J_jax - J_fd| (entrywise) of ``link_jacobian`` vs the float64 central-difference
    reference Jacobian, over ``n_configs`` random configurations."""
    import jax.numpy as jnp

    from pyroki_ros import Robot
    from pyroki_ros.model.kinematics import link_jacobian

    dtype = {"float32": jnp.float32, "float64": jnp.float64}[dtype_name]
    path = ROBOT_PATHS[robot_name]
    model = ref.parse_urdf(path)
    robot = Robot.from_urdf(str(path), dtype=dtype)
    q = np.asarray(sample_configurations(model, n_configs, seed=SEED + 1), np.dtype(dtype_name))
    jac = np.asarray(link_jacobian(robot, jnp.asarray(q), link), dtype=np.float64)
    n = len(ref.actuated_joint_names(model))
    assert jac.shape == (n_configs, 6, n), jac.shape
    worst, worst_entry, scale = 0.0, "", 0.0
    for c in range(n_configs):
        jfd = ref.reference_jacobian_fd(model, q[c].astype(np.float64), link)
        scale = max(scale, float(np.abs(jfd).max()))
        err = np.abs(jac[c] - jfd)
        if err.max() > worst:
            r, k = np.unravel_index(int(err.argmax()), err.shape)
            worst = float(err.max())
            worst_entry = (
                f"row {['vx', 'vy', 'vz', 'wx', 'wy', 'wz'][r]}, joint {robot.joint_names[k]}"
            )
    nonzero_cols = int(np.count_nonzero(np.abs(jac).max(axis=(0, 1)) > 0))
    return {
        "robot": robot_name,
        "link": link,
        "dtype": dtype_name,
        "max_err": worst,
        "worst_entry": worst_entry,
        "max_abs_entry": scale,
        "nonzero_columns": nonzero_cols,
    }


def batch_shape_errors(robot_name: str, dtype_name: str, batches=((), (5,), (2, 3))) -> list[dict]:
    """FK and Jacobian output shapes and values for several leading batch shapes."""
    import jax.numpy as jnp

    from pyroki_ros import Robot
    from pyroki_ros.model.kinematics import forward_kinematics, link_jacobian

    dtype = {"float32": jnp.float32, "float64": jnp.float64}[dtype_name]
    path = ROBOT_PATHS[robot_name]
    model = ref.parse_urdf(path)
    robot = Robot.from_urdf(str(path), dtype=dtype)
    n_links, n = len(model.links), len(ref.actuated_joint_names(model))
    tip = robot.link_names[-1]
    results = []
    for batch in batches:
        count = int(np.prod(batch)) if batch else 1
        q = np.asarray(
            sample_configurations(model, count, seed=SEED + 2), np.dtype(dtype_name)
        ).reshape(*batch, n)
        poses = forward_kinematics(robot, jnp.asarray(q))
        jac = link_jacobian(robot, jnp.asarray(q), tip)
        wxyz_xyz = np.asarray(poses.wxyz_xyz, dtype=np.float64)
        flat = wxyz_xyz.reshape(count, n_links, 7)
        qf = q.reshape(count, n).astype(np.float64)
        err = 0.0
        for c in range(count):
            ref_poses = ref.reference_fk(model, qf[c])
            for i, link in enumerate(robot.link_names):
                row = flat[c, i]
                t = ref.make_transform(ref.quat_wxyz_to_matrix(row[:4]), row[4:])
                err = max(err, *ref.pose_errors(ref_poses[link], t))
        results.append(
            {
                "batch": list(batch),
                "fk_shape": list(wxyz_xyz.shape),
                "fk_expected": [*batch, n_links, 7],
                "jac_shape": list(np.shape(jac)),
                "jac_expected": [*batch, 6, n],
                "fk_dtype": str(poses.wxyz_xyz.dtype),
                "max_err": err,
            }
        )
    return results


def format_fk_row(r: dict) -> str:
    if r.get("problems"):
        return f"{r['robot']:14s} {r['dtype']}: STRUCTURE MISMATCH {r['problems']}"
    return (
        f"{r['robot']:14s} {r['dtype']}: links={r['n_links']:3d} dof={r['n_joints']:2d} "
        f"max pos err {r['max_pos_err']:.2e} m at {r['max_pos_link']} via {r['max_pos_joint']}; "
        f"max rot err {r['max_rot_err']:.2e} rad at {r['max_rot_link']} via {r['max_rot_joint']}; "
        f"|quat|-1 {r['max_quat_norm_dev']:.1e}; reach {r['max_reach']:.2f} m"
    )


def angle_tolerance(dtype_name: str) -> float:
    return 1e-5 if dtype_name == "float32" else 1e-10


def position_tolerance(dtype_name: str) -> float:
    return 1e-5 if dtype_name == "float32" else 1e-10


__all__ = [
    "N_CONFIGS",
    "ROBOT_PATHS",
    "angle_tolerance",
    "batch_shape_errors",
    "fk_errors",
    "format_fk_row",
    "jacobian_errors",
    "position_tolerance",
    "sample_configurations",
    "structure_mismatches",
]
