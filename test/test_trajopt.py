"""Trajectory optimisation: the banded least-squares engine against dense numpy, Panda plans
around obstacles checked by an independent distance computation at a dense interpolation of
the knots (not only at the knots), self-collision, retargeting, time parameterisation, and bad
input."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np
import plan_check as check
import pytest
import scenes  # bench/scenes.py: random planning scenes
from collision_reference import sphere_centers
from nls_reference import dense_hessian
from reference_fk import make_transform, pose_errors, quat_wxyz_to_matrix

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.collision import ContactRules, RobotSpheres, World, embedded_path
from pyroki_ros.planning import timing
from pyroki_ros.planning.retarget import retarget_start
from pyroki_ros.planning.trajopt import (
    GOAL_IN_COLLISION,
    GOAL_UNREACHABLE,
    TIMED_OUT,
    TrajectoryOptimizer,
    retarget,
)
from pyroki_ros.robots import urdf_path
from pyroki_ros.solver import damping, lm

STEPS = 64


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    spheres = RobotSpheres.embedded("panda", robot)
    return robot, spheres, TrajectoryOptimizer(robot, spheres), check.SphereModel(spheres)


# --- the engine -------------------------------------------------------------------------------


def _dense_smoothing(t_count: int, order: int, hold_ends: bool = True) -> np.ndarray:
    """(T, T) D^T D built densely here, independently of nls: D takes ``order``-th forward
    differences (np.diff) of the chain extended by ``order`` copies of each end knot
    (``hold_ends``: the path rests before and after)."""
    ghost = order if hold_ends else 0
    extend = np.eye(t_count)[np.clip(np.arange(-ghost, t_count + ghost), 0, t_count - 1)]
    d = np.diff(extend, n=order, axis=0)
    return d.T @ d


def _bands_of(dense: np.ndarray, width: int) -> np.ndarray:
    """(width, T) diagonals [k, t] = dense[t, t + k], zero-padded at the end."""
    t_count = dense.shape[0]
    return np.stack([np.pad(np.diagonal(dense, k), (0, min(k, t_count))) for k in range(width)])


@pytest.mark.parametrize("t_count,n,bandwidth", [(1, 3, 2), (5, 4, 1), (10, 2, 3), (33, 7, 2)])
def test_banded_solve_matches_dense_numpy(t_count, n, bandwidth):
    rng = np.random.default_rng(t_count)
    j = rng.normal(size=(t_count, 5, n))
    diag = np.einsum("tmi,tmj->tij", j, j)
    jp = rng.normal(size=(max(t_count - 1, 0), 4, 2, n))
    sub = np.einsum("tmi,tmj->tij", jp[:, :, 1], jp[:, :, 0])
    for t in range(t_count - 1):
        diag[t] += jp[t, :, 0].T @ jp[t, :, 0]
        diag[t + 1] += jp[t, :, 1].T @ jp[t, :, 1]
    orders = (1, 2, 3)[:bandwidth]
    coupling = sum(w * _dense_smoothing(t_count, k) for w, k in zip((1.0, 0.5, 0.2), orders))
    bands = sum(w * s for w, s in zip((1.0, 0.5, 0.2), lm.smoothing_bands(t_count, orders)))
    weights = rng.uniform(0.5, 2.0, n)
    free = (rng.uniform(size=(t_count, n)) > 0.2).astype(float)
    lin = lm.Linearization(
        cost=jnp.zeros(()),
        gradient=jnp.zeros((t_count, n)),
        diagonal=jnp.asarray(diag, jnp.float32),
        subdiagonal=jnp.asarray(sub.reshape(-1, n, n), jnp.float32),
        coupling=jnp.asarray(bands, jnp.float32),
        coupling_weights=jnp.asarray(weights, jnp.float32),
    )
    d, c = lm.banded_matrix_blocks(lin, jnp.float32(0.1), jnp.asarray(free, jnp.float32), bandwidth)
    rhs = rng.normal(size=(t_count, n)) * free
    groups = d.shape[0]
    padded = np.concatenate([rhs, np.zeros((groups * bandwidth - t_count, n))])
    x = lm.solve_block_tridiagonal(d, c, jnp.asarray(padded.reshape(groups, -1), jnp.float32))
    x = np.asarray(x).reshape(-1, n)[:t_count]
    h = dense_hessian(diag, sub.reshape(-1, n, n), coupling, weights, 0.1, free)
    expected = np.linalg.solve(h, rhs.reshape(-1)).reshape(t_count, n)
    np.testing.assert_allclose(x, expected, atol=2e-4 * max(1.0, np.abs(expected).max()))


def test_difference_matrix_is_finite_differences_with_rest_at_the_ends():
    x = np.random.default_rng(0).normal(size=9)
    held = np.concatenate([[x[0]] * 2, x, [x[-1]] * 2])
    np.testing.assert_allclose(lm.difference_matrix(9, 1) @ x, np.diff(held[1:-1]))
    np.testing.assert_allclose(lm.difference_matrix(9, 2) @ x, np.diff(held, 2))


def test_chain_solver_reaches_the_linear_least_squares_optimum():
    """Smoothing between fixed ends plus a pull towards data: a linear problem whose optimum
    numpy's lstsq gives exactly."""
    t_count, n = 20, 2
    rng = np.random.default_rng(3)
    data = rng.normal(size=(t_count, n))
    w_data, w_acc = 0.5, 3.0

    def linearize(x):
        r = math.sqrt(w_data) * (x - data)
        return lm.Linearization(
            cost=0.5 * jnp.sum(r**2),
            gradient=math.sqrt(w_data) * r,  # J^T r with J = sqrt(w_data) I
            diagonal=jnp.broadcast_to(w_data * jnp.eye(n, dtype=x.dtype), (t_count, n, n)),
            subdiagonal=jnp.zeros((t_count - 1, n, n), x.dtype),
            coupling=w_acc * jnp.asarray(lm.smoothing_bands(t_count, (2,))[0], x.dtype),
            coupling_weights=jnp.ones(n, x.dtype),
        )

    free = np.ones((t_count, n))
    free[0] = free[-1] = 0
    x0 = np.zeros((t_count, n))
    x0[0], x0[-1] = data[0], data[-1]
    result = jax.jit(
        lambda x: lm.solve_chain(
            linearize,
            x,
            free=free,
            lower=-10.0,
            upper=10.0,
            bandwidth=2,
            relative_tolerance=1e-12,
        )
    )(jnp.asarray(x0, jnp.float32))
    # Reference: unknowns are the inner knots; rows sqrt(w_data)(x - data) and sqrt(w_acc) D2 x.
    d2 = lm.difference_matrix(t_count, 2)
    inner = np.arange(1, t_count - 1)
    for j in range(n):
        a = np.vstack(
            [math.sqrt(w_data) * np.eye(t_count)[:, inner], math.sqrt(w_acc) * d2[:, inner]]
        )
        fixed = x0[:, j]
        b = np.concatenate(
            [math.sqrt(w_data) * (data[:, j] - fixed), -math.sqrt(w_acc) * d2 @ fixed]
        )
        solution = np.linalg.lstsq(a, b, rcond=None)[0]
        np.testing.assert_allclose(np.asarray(result.x)[inner, j], solution, atol=2e-4)
    assert bool(result.converged)


def test_chain_cost_of_a_smooth_path_far_from_zero_is_accurate_in_float32():
    """The smoothness cost of a path of joint values ~2.5 rad moving a little: float32 within
    1e-5 of float64 (relative), also with a coupling that does not vanish on constants. The
    direct x^T S x cancels terms of the joint values themselves and was 6e-4 off, more than
    the relative decrease LM steps stop at."""
    t_count, n = 32, 8
    rng = np.random.default_rng(1)
    s = np.linspace(0, 1, t_count)[:, None]
    x = 2.5 + 0.3 * np.sin(3 * s + rng.uniform(0, 3, n)) + 1e-3 * rng.normal(size=(t_count, n))
    x = x.astype(np.float32).astype(np.float64)  # the reference sees the same inputs
    smoothing = [_dense_smoothing(t_count, k) for k in (1, 2)]
    for coupling in (
        1.0 * smoothing[0] + 4.0 * smoothing[1],
        smoothing[1] + 0.1 * np.eye(t_count),  # S 1 != 0: the general formula
    ):
        weights = rng.uniform(0.5, 2.0, n)
        exact = 0.5 * np.sum(weights * x * (coupling @ x))
        f32 = lambda a: jnp.asarray(a, jnp.float32)
        lin = lm.Linearization(
            cost=f32(0.0),
            gradient=f32(np.zeros((t_count, n))),
            diagonal=f32(np.zeros((t_count, n, n))),
            subdiagonal=f32(np.zeros((t_count - 1, n, n))),
            coupling=f32(_bands_of(coupling, 3)),
            coupling_weights=f32(weights),
        )
        gradient, cost = lm._coupling_terms(lin, f32(x))
        assert abs(float(cost) - exact) < 1e-5 * exact, (float(cost), exact)
        np.testing.assert_allclose(gradient, weights * (coupling @ x), atol=1e-5, rtol=1e-5)


# --- collision residuals ---------------------------------------------------------------------


@pytest.mark.parametrize("roles", [False, True], ids=["one role", "three roles"])
def test_collision_rows_are_hinges_of_reference_distances_with_matching_jacobians(roles):
    """The planner's collision residuals at random configurations: per sphere checked against
    obstacles the hinge of its nearest obstacle's distance, per self group (link pair) the
    hinge of its nearest sphere pair's, both from the numpy reference (reference FK); the
    Jacobian against central differences of those reference hinges. With roles (the
    default set's spheres in turn "both", "world", "self"), only the spheres with an
    obstacle role have obstacle rows and only those with a self role are in pairs."""
    import collision_reference as ref

    from pyroki_ros.collision import WORLD_BUCKETS, CollisionTerms
    from pyroki_ros.planning.trajopt import self_pair_groups

    rng = np.random.default_rng(12)
    world = scenes.random_obstacles(rng, 10)
    obstacles = _obstacles_kwargs(world)
    margin = 0.3  # wide: many rows active
    with jax.enable_x64(True):
        robot = Robot.from_urdf(urdf_path("panda"), dtype=jnp.float64)
        spheres = RobotSpheres.embedded("panda", robot)
        if roles:
            cycle = [("both", "world", "self")[i % 3] for i in range(spheres.n_spheres)]
            spheres = RobotSpheres.create(
                robot, spheres.link_names, spheres.centers, spheres.radii, spheres.ignore, cycle
            )
        padded = World.create(**obstacles, dtype=jnp.float64).padded(WORLD_BUCKETS)
        collide = CollisionTerms(robot, spheres)
        everything = (  # every pair checked, as in the reference
            jnp.ones((spheres.n_spheres, padded.n_obstacles), bool),
            jnp.ones((spheres.n_pairs,), bool),
        )
        rows = jax.jit(lambda q_t: collide.rows_t(q_t, padded, everything, margin, 1.0, 1.0))
        qs = np.asarray(robot.random_configurations(jax.random.PRNGKey(5), (4,)), np.float64)
        r, jac, clearance = (np.asarray(a) for a in rows(jnp.asarray(qs.T)))
        h = 1e-6
        bumped = [
            (
                np.asarray(rows(jnp.asarray((qs + h * e).T))[0]),
                np.asarray(rows(jnp.asarray((qs - h * e).T))[0]),
            )
            for e in np.eye(robot.n_joints)
        ]

    model = check.SphereModel(spheres)
    first, second, pad, _ = self_pair_groups(spheres.self_pairs, spheres.link_indices)
    grouped = [(i, j) for i, j, p in zip(first.ravel(), second.ravel(), pad.ravel()) if p == 0]
    assert sorted(grouped) == sorted(map(tuple, model.pairs))  # every pair exactly once

    def reference(q):
        c = ref.sphere_centers(model.urdf, model.links, model.centers, q)
        on = model.world  # the spheres checked against obstacles
        d_world = ref.world_distances(c[on], model.radii[on], obstacles).min(axis=1)
        gaps = np.linalg.norm(c[first] - c[second], axis=-1) - model.radii[first]
        d_self = np.where(pad > 0, np.inf, gaps - model.radii[second]).min(axis=1)
        d = np.concatenate([d_world, d_self])
        return np.maximum(margin - d, 0.0), d.min()

    for b, q in enumerate(qs):
        expected, smallest = reference(q)
        assert (expected > 0).sum() > 20
        np.testing.assert_allclose(r[:, b], expected, atol=1e-9)
        assert np.isclose(clearance[b], smallest, atol=1e-9)
        fd = np.stack(
            [(reference(q + h * e)[0] - reference(q - h * e)[0]) / (2 * h) for e in np.eye(len(q))],
            axis=1,
        )
        smooth = expected > 1e-4  # away from the hinge's kink
        np.testing.assert_allclose(jac[smooth, :, b], fd[smooth], atol=1e-5)
        # The program's own differences agree too (same rows, same kinks).
        own = np.stack([(p[:, b] - m[:, b]) / (2 * h) for p, m in bumped], axis=1)
        np.testing.assert_allclose(jac[smooth, :, b], own[smooth], atol=1e-5)


# --- planning -------------------------------------------------------------------------------


def _obstacles_kwargs(world: World) -> dict:
    return {name: np.asarray(getattr(world, name)) for name in World.__dataclass_fields__}


def test_panda_plans_around_obstacles_are_collision_free_between_knots(panda):
    robot, spheres, planner, model = panda
    rng = np.random.default_rng(7)
    world = scenes.random_obstacles(rng, 10)
    cases = scenes.feasible_cases(robot, spheres, world, "panda_hand", 3, rng)
    obstacles = _obstacles_kwargs(world)
    for case in cases:
        plan = planner.plan(
            case.start, [O.pose("panda_hand", case.goal_pose)], world=world, num_steps=STEPS
        )
        assert plan.success, plan.message
        path = plan.path
        assert path.shape == (STEPS, robot.n_joints)
        np.testing.assert_allclose(path[0], case.start, atol=1e-6)
        assert check.within_limits(path)
        world_min, self_min = check.path_clearance(model, path, obstacles, samples=10)
        assert world_min > 0, f"penetrates an obstacle by {-world_min:.4f} m between knots"
        assert self_min > 0, f"self collision by {-self_min:.4f} m"
        target = make_transform(quat_wxyz_to_matrix(case.goal_pose[:4]), case.goal_pose[4:])
        p_err, r_err = pose_errors(target, check.link_pose(path[-1], "panda_hand"))
        assert p_err <= 1e-3 + 1e-4 and r_err <= math.radians(1.0) + 1e-3, (p_err, r_err)


def test_joint_goal_plan_avoids_self_collision_where_the_straight_line_does_not(panda):
    robot, spheres, planner, model = panda
    rng = np.random.default_rng(11)
    lower, upper = check.LOWER, check.UPPER
    empty = World.empty()
    # A start/goal pair, both free of self collision, whose straight joint-space line is not
    # (rare among random pairs: search many at once, take the deepest collision).
    pairs = rng.uniform(lower, upper, (4000, 2, len(lower)))
    ends = scenes.clearances(robot, spheres, empty, pairs.reshape(-1, len(lower))).reshape(-1, 2)
    pairs = pairs[ends.min(axis=1) >= 0.02]
    f = np.linspace(0, 1, 32)[None, :, None]
    lines = pairs[:, :1] + f * (pairs[:, 1:] - pairs[:, :1])  # (P, 32, n)
    depth = scenes.clearances(robot, spheres, empty, lines.reshape(-1, len(lower)))
    worst = int(np.argmin(depth.reshape(len(pairs), -1).min(axis=1)))
    q, line = pairs[worst], lines[worst]
    _, self_line = check.path_clearance(model, line, {}, samples=0)
    assert self_line < 0  # the reference agrees that the straight line collides
    plan = planner.plan(q[0], q[1], num_steps=STEPS)
    assert plan.success, plan.message
    np.testing.assert_allclose(plan.path[-1], q[1], atol=1e-5)
    _, self_min = check.path_clearance(model, plan.path, {}, samples=10)
    assert self_min > 0, f"self collision by {-self_min:.4f} m"


def test_a_margin_per_knot_holds_each_knot_to_its_own_reach(panda):
    """``optimize(margin=(T,))``: a sphere obstacle 1 cm (by the reference model) from the
    middle knots of the path the optimiser makes without it (5 cm reach on the knots far
    from it, 0 elsewhere). With a 5 cm reach on the middle knots too they end at least
    2.5 cm clear; with a reach of 0 there the path is the one made without the obstacle. A margin of the wrong shape
    is refused."""
    robot, _spheres, planner, model = panda
    a = np.asarray(robot.center(), np.float64)
    b = a.copy()
    b[0] += 1.2
    line = a + np.linspace(0.0, 1.0, STEPS)[:, None] * (b - a)
    free = np.ones((STEPS, robot.n_joints))
    free[0] = free[-1] = 0.0
    middle = slice(STEPS // 2 - 4, STEPS // 2 + 4)
    far = np.r_[0:4, STEPS - 4 : STEPS]
    reach_far = np.zeros(STEPS)
    reach_far[far] = 0.05  # (self-collision too)
    alone = planner.optimize(line[None], free=free, margin=reach_far).path
    hand = check.link_pose(alone[STEPS // 2], "panda_hand")[:3, 3]
    outward = np.array([hand[0], hand[1], 0.0]) / np.linalg.norm(hand[:2])
    centre = hand + 0.2 * outward  # beyond the hand, away from the rest of the arm

    def obstacle(radius):
        world = World.create(sphere_centers=[centre], sphere_radii=[radius])
        return world, _obstacles_kwargs(world)

    # Distances to a sphere shift with its radius: pick it for 1 cm at the middle knots.
    probe = check.path_clearance(model, alone[middle], obstacle(0.001)[1], samples=0)[0]
    world, obstacles = obstacle(0.001 + probe - 0.01)
    assert np.isclose(check.path_clearance(model, alone[middle], obstacles, 0)[0], 0.01)
    assert check.path_clearance(model, alone[far], obstacles, 0)[0] > 0.06
    results = {}
    for name, reach in (("wide", 0.05), ("none", 0.0)):
        margin = reach_far.copy()
        margin[middle] = reach
        results[name] = planner.optimize(line[None], world=world, free=free, margin=margin).path
    wide = check.path_clearance(model, results["wide"][middle], obstacles, 0)[0]
    assert wide >= 0.025, wide
    np.testing.assert_allclose(results["none"], alone, atol=1e-4)
    with pytest.raises(ValueError, match="margin"):
        planner.optimize(line[None], world=world, free=free, margin=np.zeros(STEPS - 1))
    with pytest.raises(ValueError, match="margin"):
        planner.optimize(line[None], world=world, free=free, margin=-0.01)


def test_waypoints_are_visited(panda):
    _robot, _spheres, planner, _model = panda
    start = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])
    via_q = np.array([0.8, -0.1, 0.1, -1.9, 0.1, 1.8, 0.9, 0.02])
    goal_q = np.array([1.5, -0.3, 0.2, -2.3, 0.0, 2.0, 0.7, 0.02])
    via = check.link_pose(via_q, "panda_hand")[:3, 3]
    plan = planner.plan(start, goal_q, waypoints=[[O.position("panda_hand", via)]], num_steps=STEPS)
    assert plan.success, plan.message
    middle = (STEPS - 1) // 2
    knot = round((STEPS - 1) / 2)
    reached = min(
        np.linalg.norm(check.link_pose(plan.path[t], "panda_hand")[:3, 3] - via)
        for t in (middle, knot)
    )
    assert reached < 1e-3 + 1e-4, reached


def _smooth_path(q0: np.ndarray, q1: np.ndarray, t_count: int) -> np.ndarray:
    """(T, n) from q0 to q1 with a smoothstep profile (rest at both ends)."""
    s = np.linspace(0, 1, t_count)[:, None]
    return q0 + (3 * s**2 - 2 * s**3) * (q1 - q0)


def _link_positions(joints: np.ndarray, links) -> np.ndarray:
    """(T, K, 3) reference-FK positions of ``links`` along a joint path."""
    return np.array([[check.link_pose(q, link)[:3, 3] for link in links] for q in joints])


def test_retargeting_follows_a_synthetic_keypoint_path(panda):
    robot, _spheres, planner, _model = panda
    t_count = 40
    q0 = np.array([0, -0.3, 0, -2.0, 0, 1.8, 0.8, 0.02])
    q1 = np.array([1.0, 0.3, 0.2, -1.5, 0.3, 1.5, 0.2, 0.02])
    joints = _smooth_path(q0, q1, t_count)
    links = ("panda_link4", "panda_hand")
    human = _link_positions(joints, links) / 1.3  # keypoints of a smaller "demonstrator"
    plan, errors = retarget(planner, links, human, scale=1.3, seed=q0)
    assert plan.path.shape == (t_count, robot.n_joints)
    assert check.within_limits(plan.path)
    for t, q in enumerate(plan.path):
        for k, link in enumerate(links):
            err = np.linalg.norm(check.link_pose(q, link)[:3, 3] - 1.3 * human[t, k])
            assert err < 3e-3, (t, link, err)
    assert errors.shape == (t_count,) and errors.max() < 3e-3
    # Smooth: no joint jumps by more than the demonstration's largest step (plus slack).
    assert (
        np.abs(np.diff(plan.path, axis=0)).max() < 2 * np.abs(np.diff(joints, axis=0)).max() + 0.01
    )


def test_retargeting_within_a_budget_stops_in_time_or_matches_the_unbudgeted_path(panda):
    """The budget is checked between chunks of iterations: a generous one gives a path as good
    as the unbudgeted solve (reference FK), a tiny one stops after the first chunk with
    TIMED_OUT and success false: one iteration, as the pace of this length is known then."""
    _robot, _spheres, planner, _model = panda
    q0 = np.array([0, -0.3, 0, -2.0, 0, 1.8, 0.8, 0.02])
    q1 = np.array([1.0, 0.3, 0.2, -1.5, 0.3, 1.5, 0.2, 0.02])
    joints = _smooth_path(q0, q1, 40)
    links = ("panda_link4", "panda_hand")
    keypoints = _link_positions(joints, links)
    plan, errors = retarget(planner, links, keypoints, seed=q0, timeout=600.0)
    assert plan.success and plan.reason == "", plan.message
    reached = np.array([[check.link_pose(q, link)[:3, 3] for link in links] for q in plan.path])
    assert np.linalg.norm(reached - keypoints, axis=-1).max() < 3e-3
    assert errors.max() < 3e-3

    cut, _ = retarget(planner, links, keypoints, seed=q0, timeout=1e-6)
    assert cut.reason == TIMED_OUT and not cut.success and "budget" in cut.message
    assert cut.iterations == 1 and cut.path.shape == plan.path.shape


# --- time parameterisation --------------------------------------------------------------------


def test_time_parameterisation_respects_limits_and_starts_at_rest():
    rng = np.random.default_rng(5)
    path = np.cumsum(rng.normal(scale=0.05, size=(30, 3)), axis=0)
    v_max, a_max = np.array([1.0, 0.5, 2.0]), np.array([2.0, 1.0, 3.0])
    timed = timing.parameterize(path, v_max, a_max)
    dt = np.diff(timed.times)
    assert timed.times[0] == 0 and np.all(dt > 0)
    np.testing.assert_allclose(timed.positions, path)
    assert np.all(timed.velocities[0] == 0) and np.all(timed.velocities[-1] == 0)
    # Independent finite differences of what was returned (positions and times).
    velocity = np.diff(path, axis=0) / dt[:, None]
    assert np.all(np.abs(velocity) <= v_max * (1 + 1e-9))
    held = np.concatenate([path[:1], path, path[-1:]])
    step = dt[0]
    acceleration = (held[2:] - 2 * held[1:-1] + held[:-2]) / step**2
    assert np.all(np.abs(acceleration) <= a_max * (1 + 1e-9))
    assert np.all(np.abs(timed.velocities) <= v_max * (1 + 1e-9))
    # One limit is active: the trajectory is as fast as the limits allow.
    ratio = max(np.max(np.abs(velocity) / v_max), np.sqrt(np.max(np.abs(acceleration) / a_max)))
    assert ratio > 0.999
    slower = timing.parameterize(path, v_max, a_max, duration=3 * timed.duration)
    assert math.isclose(slower.duration, 3 * timed.duration)


# --- bad input ------------------------------------------------------------------------------


def test_bad_planning_input_raises_clear_errors(panda):
    robot, _spheres, planner, _model = panda
    start = np.asarray(robot.center(), np.float64)
    goal = [O.pose("panda_hand", np.array([1.0, 0, 0, 0, 0.4, 0.0, 0.4]))]
    with pytest.raises(ValueError, match="NaN"):
        planner.plan(np.full(robot.n_joints, np.nan), goal)
    with pytest.raises(ValueError, match="shape"):
        planner.plan(start[:3], goal)
    with pytest.raises(ValueError, match="not a link|unknown"):
        planner.plan(start, [O.pose("no_such_link", np.array([1.0, 0, 0, 0, 0.4, 0.0, 0.4]))])
    with pytest.raises(ValueError, match="num_steps"):
        planner.plan(start, goal, num_steps=1)
    with pytest.raises(ValueError, match="limits"):
        planner.plan(start + 10.0, goal)
    with pytest.raises(ValueError, match="> 0"):
        World.create(sphere_centers=[[0.5, 0, 0.5]], sphere_radii=[0.0])
    with pytest.raises(ValueError):
        World.create(box_poses=[[1, 0, 0, 0, 0.5, 0, np.nan]], box_half_extents=[[0.1, 0.1, 0.1]])
    with pytest.raises(ValueError, match="keypoints"):
        retarget(planner, ("panda_hand",), np.zeros((5, 2, 3)))


def test_unreachable_goal_answers_at_once_with_its_reason(panda):
    robot, _spheres, planner, _model = panda
    start = np.asarray(robot.center(), np.float64)
    far = np.array([1.0, 0, 0, 0, 3.0, 0.0, 0.5])  # 3 m away: out of reach
    plan = planner.plan(start, [O.pose("panda_hand", far)], num_steps=16, num_starts=1)
    assert not plan.success
    assert plan.reason == GOAL_UNREACHABLE
    assert "no IK solution of the goal" in plan.message
    assert check.within_limits(plan.path)
    np.testing.assert_allclose(plan.path, np.broadcast_to(start, plan.path.shape))
    # The closest IK answer's error: the hand reaches ~0.85 m, the goal is ~3 m out.
    assert plan.position_errors[0] > 1.5


def test_goal_inside_an_obstacle_answers_at_once_naming_the_contact(panda):
    """The hand's goal lies inside a box: the plan answers GOAL_IN_COLLISION naming the box,
    without a path. The claim is checked on IK solutions of the same pose by the independent
    sphere-model reference: every one of them puts the robot inside the box."""
    robot, _spheres, planner, model = panda
    start = np.asarray(robot.center(), np.float64)
    goal = np.array([0.0, 1.0, 0.0, 0.0, 0.5, 0.0, 0.4])  # hand pointing down, 0.5 m ahead
    box = {"box_poses": [[1.0, 0, 0, 0, 0.5, 0.0, 0.4]], "box_half_extents": [[0.1, 0.1, 0.1]]}
    world = World.create(**box, names=["crate"])
    plan = planner.plan(start, [O.pose("panda_hand", goal)], world=world, num_steps=16)
    assert not plan.success
    assert plan.reason == GOAL_IN_COLLISION, plan.message
    assert "crate" in plan.message
    np.testing.assert_allclose(plan.path, np.broadcast_to(start, plan.path.shape))
    # Independent: IK solutions of that pose (without obstacles) all put a sphere of the
    # hand inside the crate by the reference distance.
    seeds = np.asarray(robot.random_configurations(jax.random.PRNGKey(3), (8,)))
    ik = planner.ik.solve([O.pose("panda_hand", goal)], seed=seeds)
    q = np.asarray(ik.q)[np.asarray(ik.success)]
    assert len(q) > 0
    for c in q:
        world_min, _ = check.path_clearance(model, c[None], box, samples=1)
        assert world_min < 0


def _check_batch_plan(model, obstacles, case, plan) -> None:
    """The path starts at the start, stays within the limits and, when it claims success,
    holds up to the independent check (dense clearance, goal error by the reference FK)."""
    np.testing.assert_allclose(plan.path[0], case.start, atol=1e-6)
    assert check.within_limits(plan.path)
    if plan.success:
        world_min, self_min = check.path_clearance(model, plan.path, obstacles, samples=10)
        assert world_min > 0 and self_min > 0
        target = make_transform(quat_wxyz_to_matrix(case.goal_pose[:4]), case.goal_pose[4:])
        p_err, r_err = pose_errors(target, check.link_pose(plan.path[-1], "panda_hand"))
        assert p_err <= 1.1e-3 and r_err <= math.radians(1.0) + 1e-3


def _batch_problem(panda, rng_seed: int, n_obstacles: int):
    """World, 4 feasible cases, their starts (4, n) and goal poses (4, 7)."""
    robot, spheres, _, _ = panda
    rng = np.random.default_rng(rng_seed)
    world = scenes.random_obstacles(rng, n_obstacles)
    cases = scenes.feasible_cases(robot, spheres, world, "panda_hand", 4, rng)
    return world, cases, np.stack([c.start for c in cases]), np.stack([c.goal_pose for c in cases])


def _vmapped_batch_alone(planner, world, starts, goals):
    """plan_batch's vmapped solve for hand pose goals, without re-planning its failures."""
    return planner.plan_batch(
        starts,
        goals,
        tip="panda_hand",
        world=world,
        num_steps=STEPS,
        replan_failures=False,
        batched=True,
    )


def test_plan_batch_solves_many_pairs_in_one_call(panda):
    _, _, planner, model = panda
    world, cases, starts, goals = _batch_problem(panda, 8, 4)
    results = _vmapped_batch_alone(planner, world, starts, goals)
    assert len(results) == len(cases)
    obstacles = _obstacles_kwargs(world)
    for case, plan in zip(cases, results):
        _check_batch_plan(model, obstacles, case, plan)
    assert sum(r.success for r in results) >= 3
    # Joint goals: the last knot is each pair's own goal.
    joint_goals = np.stack([c.goal for c in cases])
    results = planner.plan_batch(starts, joint_goals, world=world, num_steps=STEPS, batched=True)
    for goal, plan in zip(joint_goals, results):
        np.testing.assert_allclose(plan.path[-1], goal, atol=1e-6)
    # On a CPU the default is one plan() per pair (a vmapped loop gains nothing there):
    # the same answers as planning each pair alone.
    assert planner.device.platform == "cpu"
    sequential = planner.plan_batch(starts[:2], joint_goals[:2], world=world, num_steps=STEPS)
    for case, goal, plan in zip(cases, joint_goals, sequential):
        alone = planner.plan(case.start, goal, world=world, num_steps=STEPS)
        np.testing.assert_allclose(plan.path, alone.path, atol=1e-9)
        assert plan.success == alone.success
        _check_batch_plan(model, obstacles, case, plan)
    with pytest.raises(ValueError, match="pair 1: start is outside the joint limits"):
        outside = starts[:2].copy()
        outside[1, 0] = planner.robot.limits.upper[0] + 0.5
        planner.plan_batch(outside, joint_goals[:2], world=world, num_steps=STEPS)


def test_plan_batch_replans_the_batch_failures_one_by_one(panda):
    _, _, planner, model = panda
    # 10 obstacles: the batch alone fails 2 of these 4 pairs
    world, cases, starts, goals = _batch_problem(panda, 13, 10)
    alone = _vmapped_batch_alone(planner, world, starts, goals)
    assert not all(r.success for r in alone), "the batch solves every pair: pick another seed"
    assert not any("re-planned" in r.message for r in alone)
    results = planner.plan_batch(
        starts, goals, tip="panda_hand", world=world, num_steps=STEPS, batched=True
    )
    obstacles = _obstacles_kwargs(world)
    for case, batched, plan in zip(cases, alone, results):
        assert plan.success, plan.message
        _check_batch_plan(model, obstacles, case, plan)
        if batched.success:  # untouched: the batch's own result
            np.testing.assert_array_equal(plan.path, batched.path)
            assert plan.message == batched.message == "ok"
        else:
            assert plan.message == "ok (re-planned alone)"
    # One clock for the whole call, re-plans included.
    assert len({r.solve_seconds for r in results}) == 1


def test_retargeting_by_link_to_link_vectors_transfers_the_motion_shape(panda):
    """A demonstrator standing 0.3 m away: absolute keypoints cannot be matched, the
    elbow-to-hand vectors can."""
    _robot, _, planner, _ = panda
    q0 = np.array([0, -0.3, 0, -2.0, 0, 1.8, 0.8, 0.02])
    q1 = np.array([0.8, 0.2, 0.2, -1.6, 0.3, 1.5, 0.3, 0.02])
    links = ("panda_link4", "panda_hand")
    keypoints = _link_positions(_smooth_path(q0, q1, 24), links) + np.array([0.3, 0.0, 0.0])
    plan, _ = retarget(
        planner, links, keypoints, seed=q0, link_weights=np.zeros(2), vector_pairs=[(0, 1)]
    )
    for t, q in enumerate(plan.path):
        vector = check.link_pose(q, "panda_hand")[:3, 3] - check.link_pose(q, "panda_link4")[:3, 3]
        wanted = keypoints[t, 1] - keypoints[t, 0]
        assert np.linalg.norm(vector - wanted) < 3e-3, t
    with pytest.raises(ValueError, match="vector pair"):
        retarget(planner, links, keypoints, vector_pairs=[(0, 0)])


def test_vector_only_retargeting_holds_its_bound_from_nearby_seeds(panda):
    """Only link-to-link vectors (link_weights 0), the demonstrator 2 m away: the absolute
    keypoints are out of reach, so nothing but the seed and the optimiser decides where the
    path goes. From the demonstration's own start and from seeds up to 0.5 rad off it, the
    robot's shoulder-to-elbow and elbow-to-hand vectors (reference FK) stay within 3 mm of
    the scaled demonstration's at every step. (Started from an IK answer towards the
    unreachable keypoints, the path depended on which IK restart came closest: 38 mm off once
    the IK's restarts changed; started from the seed with an undamped first LM step, three of
    these four seeds ended 10-27 mm off, two with the wrist flipped onto joint 5's limit.)"""
    _robot, _, planner, _ = panda
    q0 = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])
    q1 = q0 + np.array([0.9, 0.5, 0.2, 0.7, 0.3, -0.4, -0.3, 0.0])
    links = ("panda_link2", "panda_link4", "panda_hand")
    pairs = [(0, 1), (1, 2)]
    keypoints = _link_positions(_smooth_path(q0, q1, 30), links) + np.array([2.0, 0.5, 0.0])
    wanted = np.stack([keypoints[:, j] - keypoints[:, i] for i, j in pairs], 1)  # (T, 2, 3)
    assert np.linalg.norm(wanted - wanted[:1], axis=-1).max() > 0.2  # the vectors really move
    rng = np.random.default_rng(0)
    offsets = np.r_[np.zeros((1, 7)), rng.uniform(-0.5, 0.5, (3, 7))]
    for offset in offsets:
        seed = np.clip(q0 + np.r_[offset, 0.0], check.LOWER, check.UPPER)
        plan, step_errors = retarget(
            planner, links, keypoints, seed=seed, link_weights=np.zeros(3), vector_pairs=pairs
        )
        assert check.within_limits(plan.path)
        at = _link_positions(plan.path, links)
        errors = np.linalg.norm(
            np.stack([at[:, j] - at[:, i] for i, j in pairs], 1) - wanted, axis=-1
        )
        assert errors.max() < 3e-3, (
            offset,
            errors.max(),
            np.unravel_index(errors.argmax(), errors.shape),
        )
        assert step_errors.min() > 1.0  # the absolute keypoints stayed out of reach


def test_retargeting_starts_at_the_weighted_first_keypoints_or_at_the_seed(panda):
    """The path's start configuration (every knot held at it before optimising): IK towards
    the first step's keypoints of the links with weight > 0, only the active joints moving;
    the seed when no link has weight (vectors only) or when the weighted keypoints are out of
    reach (the IK's closest answer then depends on its restarts)."""
    _robot, _, planner, _ = panda
    seed = np.array([0.0, -0.3, 0.0, -2.0, 0.0, 1.8, 0.8, 0.02])
    goal = np.array([0.4, 0.1, 0.0, -1.8, 0.0, 1.9, 0.8, 0.02])
    links = ("panda_link4", "panda_hand")
    first = _link_positions(goal[None], links)[0]  # (2, 3)
    first[0] += 0.5  # link4's keypoint is far off: with weight 0 it must not pull
    active = ("panda_joint1", "panda_joint2", "panda_joint4", "panda_joint6")
    start = retarget_start(planner, links, first, np.array([0.0, 1.0]), seed, active)
    hand = check.link_pose(start, "panda_hand")[:3, 3]
    assert np.linalg.norm(hand - first[1]) < 1e-3
    moving = np.isin(check.JOINTS, active)
    np.testing.assert_allclose(start[~moving], seed[~moving], atol=1e-6)  # float32 solve
    assert np.abs(start[moving] - seed[moving]).max() > 0.1
    far = first + np.array([2.0, 0.0, 0.0])
    for weights, targets in ((np.zeros(2), first), (np.array([0.0, 1.0]), far)):
        start = retarget_start(planner, links, targets, weights, seed, None)
        np.testing.assert_array_equal(start, seed)


def _manipulability(q) -> float:
    from reference_fk import reference_jacobian_fd

    jac = reference_jacobian_fd(check.PANDA, q, "panda_hand", check.JOINTS)
    return float(np.sqrt(max(np.linalg.det(jac @ jac.T), 0.0)))


def test_manipulability_cost_keeps_the_path_away_from_a_singularity(panda):
    _robot, _, planner, _ = panda
    # Elbow almost straight (joint 4 near its upper limit): close to a singularity.
    start = np.array([-0.8, 0.3, 0.0, -0.15, 0.0, 1.2, 0.8, 0.02])
    goal = np.array([0.8, 0.3, 0.0, -0.15, 0.0, 1.2, 0.8, 0.02])
    plain = planner.optimize(
        np.linspace(start, goal, 16)[None], free=np.r_[[0], np.ones(14), [0]][:, None] * np.ones(8)
    )
    from pyroki_ros.planning.trajopt import Weights

    careful = planner.optimize(
        np.linspace(start, goal, 16)[None],
        free=np.r_[[0], np.ones(14), [0]][:, None] * np.ones(8),
        weights=Weights(manipulability=1e-3),
        manipulability_link="panda_hand",
    )
    inner = slice(4, 12)
    before = np.mean([_manipulability(q) for q in plain.path[inner]])
    after = np.mean([_manipulability(q) for q in careful.path[inner]])
    assert after > 1.2 * before, (before, after)
    np.testing.assert_allclose(careful.path[[0, -1]], plain.path[[0, -1]])


def test_compiled_programs_are_bounded_and_an_evicted_one_plans_the_same_again():
    """A client varying the problem structure cannot grow the planner without bound: past
    ``max_programs`` the least recently used program goes, and planning that structure again
    (recompiled) gives the same path."""
    robot = Robot.from_urdf(urdf_path("panda"))
    planner = TrajectoryOptimizer(robot, max_programs=2)
    start = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.7, 0.02])
    goal = start + np.array([0.3, 0.2, -0.2, 0.3, 0.1, -0.2, 0.2, 0.0])

    def plan(steps: int) -> np.ndarray:
        result = planner.plan(start, goal, num_steps=steps, num_starts=1)
        assert result.success, result.message
        return np.asarray(result.path)

    first = plan(8)
    for steps in (12, 16):  # two more structures (knot counts)
        plan(steps)
        assert planner.compiled_programs <= 2
    np.testing.assert_allclose(plan(8), first, atol=1e-6)
    assert planner.compiled_programs <= 2


def test_success_check_samples_a_fast_segment_as_finely_as_the_slow_ones(panda):
    """A path of small steps and one 2 rad swing of the base joint, and a small obstacle that
    the hand's sphere passes through a tenth of the way into the swing: the reported
    clearance (the success check's) finds the contact, as deep as the numpy reference
    finds it at 400 points in that segment, where evenly spaced fractions of every segment
    (4 per segment: 0.4 rad apart in the swing, the hand ~25 cm between them) step over it."""
    robot, spheres, planner, model = panda
    t_count, swing = 16, 7
    joint = np.zeros(t_count)
    joint[1:] = 0.01  # small steps of panda_joint1, then the swing between knots 7 and 8
    joint[swing + 1] += 2.0
    path = np.tile(np.asarray(robot.center(), np.float64), (t_count, 1))
    path[:, 0] = -1.2 + np.cumsum(joint)
    hand = next(i for i, name in enumerate(spheres.link_names) if name == "panda_hand")
    inside = path[swing] + 0.1 * (path[swing + 1] - path[swing])
    centre = model.clearances  # the reference model: numpy FK and distances
    point = sphere_centers(model.urdf, model.links, model.centers, inside)[hand]
    world = World.create(sphere_centers=[point], sphere_radii=[0.01])
    obstacles = _obstacles_kwargs(world)
    f = np.linspace(0.0, 1.0, 402)[:, None]
    fine = path[swing] + f * (path[swing + 1] - path[swing])
    reference = min(centre(q, obstacles)[0] for q in np.concatenate([path, fine]))
    assert reference < -0.05  # the hand's sphere (5 cm) swallows the 1 cm obstacle
    knots_and_fractions = check.dense(path, 4)
    assert min(centre(q, obstacles)[0] for q in knots_and_fractions) > 0.0  # stepped over
    # Nothing free, so that the path stays as given: every link checked all the same.
    result = planner.optimize(
        path[None], (), world=world, free=np.zeros_like(path), max_iterations=1,
        contacts=ContactRules(check_fixed_links=True),
    )  # fmt: skip
    assert result.min_distance < 0.0
    assert abs(result.min_distance - reference) < 0.01


def test_the_optimiser_runs_the_damping_schedule_it_is_given():
    """``TrajectoryOptimizer(schedule=)`` reaches the solver: a schedule that gives up at its
    own first damping stops after the first linearisation (no step: the start path comes
    back), where the default schedule steps a bent start path towards the smooth one; the
    exact model's planner gets the same schedule."""
    robot = Robot.from_urdf(urdf_path("panda"))
    give_up_at_once = dataclasses.replace(damping.CHAIN, give_up=damping.CHAIN.initial / 2)
    start = np.array([0.0, -0.5, 0.0, -2.0, 0.0, 1.6, 0.7, 0.02])
    goal = start + np.array([0.3, 0.2, -0.2, 0.3, 0.1, -0.2, 0.2, 0.0])
    knots = np.linspace(0.0, 1.0, 16)[:, None]
    bent = start + knots * (goal - start) + 0.3 * np.sin(np.pi * knots)  # (16, n)
    bent = robot.limits.clip(bent)
    free = np.ones_like(bent)
    free[0] = free[-1] = 0.0
    paths = {}
    for name, schedule in (("default", damping.CHAIN), ("give up", give_up_at_once)):
        planner = TrajectoryOptimizer(robot, schedule=schedule)
        assert planner.schedule == schedule
        result = planner.optimize(bent[None], free=free, max_iterations=20)
        paths[name] = (result.iterations, np.asarray(result.path))
    assert paths["give up"][0] == 0
    np.testing.assert_allclose(paths["give up"][1], bent, atol=1e-6)
    assert paths["default"][0] > 0
    # The smoothness cost pulls the bend out: the default's path is nearer the straight line.
    straight = start + knots * (goal - start)
    assert np.abs(paths["default"][1] - straight).max() < 0.5 * np.abs(bent - straight).max()
    fine = embedded_path("panda", fine=True)
    spheres = RobotSpheres.from_yaml(robot, fine)
    exact = RobotSpheres.from_yaml(robot, fine, exact=True)
    with_exact = TrajectoryOptimizer(robot, spheres, exact=exact, schedule=give_up_at_once)
    assert with_exact.exact.schedule == give_up_at_once
