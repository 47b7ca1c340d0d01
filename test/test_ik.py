"""IKSolver end to end, checked with an independent float64 FK (test/reference_fk.py).

Every target is generated from the reference FK of a random in-limit configuration (so it is
reachable), or deliberately out of reach; every answer is checked by recomputing the
geometry of the returned configuration with the reference FK, never by trusting the errors
the solver reports (those are checked against the reference too).

Compilation dominates the run time (one program per robot, objective structure, lane count
and batch bucket), so the solvers are module-scoped and the tests reuse few programs: the
default (multi-lane) solver for Panda ``pose(panda_hand)`` at buckets 1, 16, 128 and 1024;
a one-lane solver (``lanes=1``, ~3x cheaper to compile, the same objective code) for every
objective kind at bucket 16, the other position tests, UR5, Kinova and a toy arm.
"""

from __future__ import annotations

import math
import sys
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import NamedTuple

import numpy as np
import pytest
from ik_cases import TOY_CONTINUOUS, Spec, build, geometric_errors
from ik_reference import RefRobot, pose7

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.ik import IKSolver
from pyroki_ros.robots import urdf_path

HERE = Path(__file__).resolve().parent
KINOVA = HERE / "data" / "robots" / "kinova.urdf"
KINOVA_TIP = "j2s6s200_end_effector"

POS_TOL = 1e-3  # m, the solver's default
ROT_TOL = math.radians(1.0)  # rad, the solver's default
# float32 solution, float64 check: the reference geometry of a returned configuration may
# differ from the solver's own float32 evaluation by a few 1e-6 m / rad.
F32_SLACK = 2e-5
LIMIT_SLACK = 1e-6  # limits are stored in float32


class Arm(NamedTuple):
    robot: Robot
    ref: RefRobot
    solver: IKSolver  # default lanes (a capped pass over many lanes, then the leftovers)
    serial: IKSolver  # lanes=1: one lane works through the queue; compiles ~3x faster

    @property
    def lower(self):
        return self.ref.lower

    @property
    def upper(self):
        return self.ref.upper


def _arm(path) -> Arm:
    robot = Robot.from_urdf(path)
    ref = RefRobot(path)
    assert list(robot.joint_names) == ref.joint_names
    return Arm(robot, ref, IKSolver(robot), IKSolver(robot, lanes=1))


@pytest.fixture(scope="module")
def panda() -> Arm:
    return _arm(urdf_path("panda"))


@pytest.fixture(scope="module")
def ur5() -> Arm:
    return _arm(urdf_path("ur5"))


@pytest.fixture(scope="module")
def kinova() -> Arm:
    return _arm(KINOVA)


PANDA_ARM = [f"panda_joint{i}" for i in range(1, 8)]  # the finger joint stays at the seed
FINGER = 7  # index of panda_finger_joint1


def hand_poses(arm: Arm, q) -> np.ndarray:
    """(N, 7) wxyz_xyz of panda_hand from the reference FK."""
    return pose7(arm.ref.poses(q)["panda_hand"])


def check_result(specs, arm: Arm, result, targets, *, min_success=1.0, slack=F32_SLACK):
    """Checks a result against the reference FK; returns the independent errors.

    * q inside the limits (float32 tolerance);
    * the reported errors equal the independent errors of the returned q, success or not;
    * every success meets the tolerances in the independent geometry;
    * at least ``min_success`` of the problems succeed.
    """
    q = np.asarray(result.q, np.float64)
    assert np.all(q >= arm.lower - LIMIT_SLACK) and np.all(q <= arm.upper + LIMIT_SLACK)
    pos, rot = geometric_errors(specs, arm.ref, q, targets)
    np.testing.assert_allclose(result.position_error, pos, atol=slack)
    np.testing.assert_allclose(result.orientation_error, rot, atol=5 * slack)
    ok = np.asarray(result.success)
    assert np.all(pos[ok] <= POS_TOL + slack), pos[ok].max()
    assert np.all(rot[ok] <= ROT_TOL + 5 * slack), rot[ok].max()
    # success means every objective is within tolerance, independently recomputed
    independent_ok = np.all(pos <= POS_TOL + slack, -1) & np.all(rot <= ROT_TOL + 5 * slack, -1)
    assert np.all(independent_ok[ok])
    assert ok.mean() >= min_success, f"success rate {ok.mean():.3f} < {min_success}"
    return pos, rot


# --- 2. every objective kind, solved and checked with the reference FK -------------------

LP = (0.02, -0.04, 0.09)
LA = (0.3, -0.5, 0.81)
NORMAL = (0.2, 0.9, -0.4)
# Some kinds share a problem (two objectives on two links, met by the same configuration) to
# save compilations; each objective is still checked on its own with the reference FK.
SOLVE_CASES = {
    "pose": [Spec("pose", "panda_hand")],
    "position": [Spec("position", "panda_hand")],
    "point_and_orientation": [
        Spec("point", "panda_hand", local_point=LP),
        Spec("orientation", "panda_link6", weights=(0.0, 1.0)),
    ],
    "hinge": [Spec("hinge", "panda_hand", local_point=LP, local_axis=LA)],
    "plane_and_line": [
        Spec("plane", "panda_hand", local_point=LP, set_axis=NORMAL),
        Spec("line", "panda_link4", local_point=LP, set_axis=LA),
    ],
    "plane_axis": [
        Spec("plane", "panda_hand", local_point=LP, local_axis=LA, set_axis=NORMAL, align=True)
    ],
    "line_axis": [
        Spec("line", "panda_hand", local_point=LP, local_axis=LA, set_axis=NORMAL, align=True)
    ],
    # relative: only joints 4-7 move the hand relative to panda_link3 (4 DoF, 6 constraints)
    "relative_pose": [Spec("pose", "panda_hand", reference="panda_link3")],
}
N_PER_KIND = 16  # one bucket (16) for all the per-kind programs


@pytest.mark.parametrize("specs", SOLVE_CASES.values(), ids=SOLVE_CASES.keys())
def test_each_kind_solves_reachable_targets(panda, specs):
    rng = np.random.default_rng(zlib.crc32(specs[-1].name.encode()))
    q_star = panda.ref.random(rng, N_PER_KIND)
    targets = build(specs, panda.ref, q_star, rng)
    objs = [s.objective(t) for s, t in zip(specs, targets)]
    result = panda.serial.solve(objs, active_joints=PANDA_ARM)
    assert result.q.shape == (N_PER_KIND, panda.robot.n_joints)
    assert result.position_error.shape == (N_PER_KIND, len(specs))
    check_result(specs, panda, result, targets)
    # the default seed is the middle of the limits: the problems were not solved at the start
    seed_pos, seed_rot = geometric_errors(
        specs, panda.ref, np.broadcast_to((panda.lower + panda.upper) / 2, q_star.shape), targets
    )
    assert np.mean(np.any((seed_pos > 10 * POS_TOL) | (seed_rot > 10 * ROT_TOL), -1)) > 0.9
    # the finger joint was not active: exactly the seed
    assert np.all(
        result.q[:, FINGER] == np.float32((panda.lower[FINGER] + panda.upper[FINGER]) / 2)
    )


def test_ur5_pose_and_forearm_point(ur5):
    """Two tips: tool0 pose plus a point on forearm_link, from the same configuration; the
    forearm point picks one of the UR5's up to 8 pose solutions."""
    specs = [Spec("pose", "tool0"), Spec("point", "forearm_link", local_point=(0.05, 0.0, 0.3))]
    rng = np.random.default_rng(5)
    q_star = ur5.ref.random(rng, N_PER_KIND)
    targets = build(specs, ur5.ref, q_star, rng)
    result = ur5.serial.solve([s.objective(t) for s, t in zip(specs, targets)])
    check_result(specs, ur5, result, targets, min_success=0.9)


# --- 3. joint limits ---------------------------------------------------------------------


def test_joint_limits_hold_for_200_targets_near_limits(panda):
    rng = np.random.default_rng(3)
    count = 200
    q_star = panda.ref.random(rng, count, margin=0.0)
    # a third of the targets come from configurations with joints exactly on a limit
    on_limit = rng.uniform(size=q_star.shape) < 0.3
    on_limit[count // 3 :] = False
    upper = rng.uniform(size=q_star.shape) < 0.5
    q_star = np.where(on_limit, np.where(upper, panda.upper, panda.lower), q_star)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    # seeds: random, some outside the limits on purpose (the solver clips them)
    seeds = panda.ref.random(rng, count, margin=0.0)
    seeds[::7] = panda.lower - 0.5
    seeds[1::7] = panda.upper + 0.5
    result = panda.solver.solve(specs[0].objective(targets[0]), seed=seeds, active_joints=PANDA_ARM)
    q = np.asarray(result.q, np.float64)
    assert q.shape == (count, panda.robot.n_joints)
    assert np.all(q >= panda.lower - LIMIT_SLACK), (q - panda.lower).min()
    assert np.all(q <= panda.upper + LIMIT_SLACK), (q - panda.upper).max()
    # some answers sit on a limit: the limits are active constraints, not just never reached
    assert (
        np.sum(
            np.isclose(q[:, :7], panda.lower[:7], atol=1e-5)
            | np.isclose(q[:, :7], panda.upper[:7], atol=1e-5)
        )
        >= 10
    )
    check_result(specs, panda, result, targets, min_success=0.95)


@pytest.fixture(scope="module")
def toy() -> Arm:
    return _arm(TOY_CONTINUOUS)


def test_continuous_joint_wraps_across_pi(toy):
    """Seed just below +pi, target just past it (at -pi + 0.06): the solver takes the short way
    through pi, and reports the angle wrapped into [-pi, pi)."""
    arm = toy
    assert arm.robot.continuous == (True, False)
    seeds = np.array([[3.10, 0.7], [3.12, -0.7], [-3.10, 0.7], [-3.13, -1.2]] * 4)
    q_star = seeds.copy()
    # cross pi in both directions: +0.1 from just below +pi, -0.1 from just above -pi
    q_star[:, 0] = np.where(
        seeds[:, 0] > 0, seeds[:, 0] + 0.1 - 2 * np.pi, seeds[:, 0] - 0.1 + 2 * np.pi
    )
    q_star[:, 1] += 0.05
    specs = [Spec("position", "tip")]
    targets = build(specs, arm.ref, q_star, np.random.default_rng(0))
    result = arm.serial.solve(specs[0].objective(targets[0]), seed=seeds)
    check_result(specs, arm, result, targets)
    q = np.asarray(result.q, np.float64)
    assert np.all(q[:, 0] >= -np.pi - LIMIT_SLACK) and np.all(q[:, 0] < np.pi + LIMIT_SLACK)
    # the nearby solution (through pi), not the mirrored elbow (~1.3 rad away) or a detour;
    # 1 mm at the tip allows ~5e-3 rad of joint error
    np.testing.assert_allclose(q[:, 0], q_star[:, 0], atol=2e-2)
    np.testing.assert_allclose(q[:, 1], q_star[:, 1], atol=2e-2)
    assert np.all(result.iterations < 15)  # no restart was needed


def _toy_targets(toy, q_star):
    return toy.ref.poses(np.asarray(q_star, np.float64))["tip"][..., :3, 3]


def test_inactive_continuous_seed_outside_pi_is_wrapped(toy):
    seeds = np.array([[4.0, 0.2], [-4.0, -0.2]])  # 4.0 rad is the same angle as 4.0 - 2 pi
    q_star = seeds.copy()
    q_star[:, 1] = [0.5, -0.5]
    result = toy.serial.solve(
        O.position("tip", _toy_targets(toy, q_star)), seed=seeds, active_joints=["elbow"]
    )
    wrapped = np.mod(seeds[:, 0] + np.pi, 2 * np.pi) - np.pi
    np.testing.assert_allclose(result.q[:, 0], wrapped, atol=1e-6)
    assert result.success.all()
    # One problem at a time (the single-problem program and result path), seeds on +-pi,
    # whose float32 copies round outwards: answers inside [-pi, pi) in float64.
    for spin in (np.pi, -np.pi, 4.0, -4.0):
        seed = np.array([spin, 0.2])
        one = toy.serial.solve(
            O.position("tip", _toy_targets(toy, [spin, 0.5])), seed=seed, active_joints=["elbow"]
        )
        assert one.success and -np.pi <= one.q[0] < np.pi, one.q
        angle = lambda a: [np.cos(a), np.sin(a)]
        np.testing.assert_allclose(angle(one.q[0]), angle(spin), atol=1e-6)  # the same angle


def test_max_deviation_lets_continuous_joint_cross_pi(toy):
    seeds = np.array([[3.1, 0.5], [-3.1, 0.5]])
    q_star = seeds + np.array([[0.1, 0.0], [-0.1, 0.0]])  # 0.1 rad away, across +-pi
    result = toy.serial.solve(
        O.position("tip", _toy_targets(toy, q_star)), seed=seeds, max_deviation=0.3
    )
    assert result.success.all()
    wrapped = np.mod(q_star[:, 0] + np.pi, 2 * np.pi) - np.pi
    np.testing.assert_allclose(result.q[:, 0], wrapped, atol=2e-2)


def test_kinova_continuous_joints_wrap(kinova):
    """Kinova Jaco: 3 continuous joints (URDF limits +-2pi ignored), seeds near +-pi."""
    cont = np.array(kinova.robot.continuous)
    assert cont.sum() == 3
    np.testing.assert_allclose(kinova.lower[cont], -np.pi)
    rng = np.random.default_rng(8)
    q_star = kinova.ref.random(rng, N_PER_KIND)
    specs = [Spec("pose", KINOVA_TIP)]
    targets = build(specs, kinova.ref, q_star, rng)
    seeds = kinova.ref.random(rng, N_PER_KIND)
    seeds[:, cont] = rng.choice([np.pi - 0.01, -np.pi + 0.01], size=(N_PER_KIND, 3))
    result = kinova.serial.solve(specs[0].objective(targets[0]), seed=seeds)
    check_result(specs, kinova, result, targets, min_success=0.9)
    q = np.asarray(result.q, np.float64)
    assert np.all(np.abs(q[:, cont]) <= np.pi + LIMIT_SLACK)


# --- 4. active joints ---------------------------------------------------------------------


def test_inactive_joints_stay_exactly_at_the_seed(panda):
    """Pose targets reachable by joints 1, 2, 4, 5, 6, 7 from random seeds; joint 3 and the
    finger inactive, and returned bit-for-bit as the (float32) seed."""
    rng = np.random.default_rng(4)
    count = 24
    active = [j for j in PANDA_ARM if j != "panda_joint3"]
    mask = np.array([j in active for j in panda.robot.joint_names])
    seeds = panda.ref.random(rng, count, margin=0.05)
    q_star = np.where(mask, panda.ref.random(rng, count, margin=0.05), seeds)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    result = panda.solver.solve(specs[0].objective(targets[0]), seed=seeds, active_joints=active)
    assert np.array_equal(result.q[:, ~mask], seeds[:, ~mask].astype(np.float32))
    check_result(specs, panda, result, targets, min_success=0.9)
    assert np.any(result.q[:, mask] != seeds[:, mask].astype(np.float32))


def test_joints_that_move_no_objective_link_keep_the_seed(panda):
    """The finger joint is active (every joint is, by default) but moves nothing between the
    root and panda_hand: it keeps its seed, even with a rest bias pulling elsewhere, while the
    arm reaches the target (independent FK)."""
    rng = np.random.default_rng(9)
    seeds = panda.ref.random(rng, 6, margin=0.05)
    q_star = panda.ref.random(rng, 6, margin=0.05)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    finger = panda.robot.joint_index("panda_finger_joint1")
    for options in ({}, {"rest": READY, "rest_weight": 1e-3}):
        result = panda.solver.solve(specs[0].objective(targets[0]), seed=seeds, **options)
        np.testing.assert_array_equal(result.q[:, finger], seeds[:, finger].astype(np.float32))
        check_result(specs, panda, result, targets, min_success=0.9)
    with pytest.raises(ValueError, match="left out"):
        panda.robot.with_joints((0, 1))  # joints 3-7 move links too


def test_position_with_three_active_joints(panda):
    rng = np.random.default_rng(6)
    active = ["panda_joint1", "panda_joint2", "panda_joint4"]
    mask = np.array([j in active for j in panda.robot.joint_names])
    seeds = panda.ref.random(rng, N_PER_KIND, margin=0.05)
    q_star = np.where(mask, panda.ref.random(rng, N_PER_KIND, margin=0.05), seeds)
    specs = [Spec("position", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    result = panda.serial.solve(specs[0].objective(targets[0]), seed=seeds, active_joints=active)
    assert np.array_equal(result.q[:, ~mask], seeds[:, ~mask].astype(np.float32))
    check_result(specs, panda, result, targets, min_success=0.9)


# --- 5. rest bias --------------------------------------------------------------------------

READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02])


def _rest_problem(panda, rng_seed=7):
    rng = np.random.default_rng(rng_seed)
    q_star = panda.ref.random(rng, N_PER_KIND)
    specs = [Spec("position", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    seeds = panda.ref.random(rng, N_PER_KIND)
    return specs, targets, seeds


def test_rest_weight_pulls_towards_rest(panda):
    """Position-only (4 redundant DoF): a rest weight moves the solutions
    towards ``rest``; what is reported as success is a true success."""
    specs, targets, seeds = _rest_problem(panda)
    objective = specs[0].objective(targets[0])
    free = panda.serial.solve(objective, seed=seeds, active_joints=PANDA_ARM, rest=READY)
    biased = panda.serial.solve(
        objective, seed=seeds, active_joints=PANDA_ARM, rest=READY, rest_weight=1e-3
    )
    check_result(specs, panda, free, targets)
    check_result(specs, panda, biased, targets)
    distance = lambda r: np.linalg.norm(r.q[:, :7] - READY[:7], axis=-1)
    assert distance(biased).mean() < 0.9 * distance(free).mean()


def test_rest_weight_keeps_succeeding_on_redundant_robot(panda):
    specs, targets, seeds = _rest_problem(panda)
    objective = specs[0].objective(targets[0])
    free = panda.serial.solve(objective, seed=seeds, active_joints=PANDA_ARM, rest=READY)
    biased = panda.serial.solve(
        objective, seed=seeds, active_joints=PANDA_ARM, rest=READY, rest_weight=1e-2
    )
    check_result(specs, panda, biased, targets, min_success=1.0)
    distance = lambda r: np.linalg.norm(r.q[:, :7] - READY[:7], axis=-1)
    assert distance(biased).mean() < distance(free).mean()


# --- 6. solve nearby ------------------------------------------------------------------------


def test_max_deviation_bounds_every_joint(panda):
    rng = np.random.default_rng(9)
    count = 24
    deviation = np.array([0.1, 0.2, 0.3, 0.4, 0.3, 0.2, 0.15, 0.0])
    seeds = panda.ref.random(rng, count, margin=0.1)
    # targets from configurations near the corners of the box: an unbounded step overshoots
    sign = rng.choice([-1.0, 1.0], size=seeds.shape)
    q_star = np.clip(
        seeds + sign * rng.uniform(0.7, 0.95, seeds.shape) * deviation, panda.lower, panda.upper
    )
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    result = panda.solver.solve(
        specs[0].objective(targets[0]), seed=seeds, active_joints=PANDA_ARM, max_deviation=deviation
    )
    step = np.abs(np.asarray(result.q, np.float64) - seeds)
    assert np.all(step <= deviation + LIMIT_SLACK), (step - deviation).max()
    check_result(specs, panda, result, targets, min_success=0.9)


def test_tiny_max_deviation_far_target_returns_closest_found(panda):
    """d = 0.02 rad and a target 0.3 m away: no success, every joint within d of the seed, and
    the returned configuration is at least as close as the best of 150 random configurations
    in the allowed box."""
    rng = np.random.default_rng(10)
    d = 0.02
    seeds = panda.ref.random(rng, N_PER_KIND, margin=0.1)
    start = panda.ref.poses(seeds)["panda_hand"][:, :3, 3]
    direction = rng.normal(size=start.shape)
    far = start + 0.3 * direction / np.linalg.norm(direction, axis=-1, keepdims=True)
    objective = O.position("panda_hand", far)
    result = panda.serial.solve(objective, seed=seeds, active_joints=PANDA_ARM, max_deviation=d)
    q = np.asarray(result.q, np.float64)
    assert not result.success.any()
    assert np.all(np.abs(q - seeds) <= d + LIMIT_SLACK)
    got = np.linalg.norm(panda.ref.poses(q)["panda_hand"][:, :3, 3] - far, axis=-1)
    np.testing.assert_allclose(result.position_error[:, 0], got, atol=F32_SLACK)
    assert np.all(got < np.linalg.norm(start - far, axis=-1) - 0.005)  # it moved towards it
    for i in range(N_PER_KIND):
        lo = np.maximum(panda.lower, seeds[i] - d)
        hi = np.minimum(panda.upper, seeds[i] + d)
        lo[FINGER] = hi[FINGER] = seeds[i, FINGER]
        samples = lo + rng.uniform(size=(150, 8)) * (hi - lo)
        best = np.linalg.norm(panda.ref.poses(samples)["panda_hand"][:, :3, 3] - far[i], axis=-1)
        assert got[i] <= best.min() + 1e-4, (i, got[i], best.min())


# --- 7. restarts ---------------------------------------------------------------------------


def _hand_pose_targets(panda, rng_seed: int, count: int, far_every: int = 0):
    """``count`` pose targets of panda_hand from random reachable configurations (the
    reference FK); with ``far_every`` > 0 every ``far_every``-th one (from the second) moved
    2 m from the base, out of reach. Returns (specs, targets, which are far)."""
    rng = np.random.default_rng(rng_seed)
    q_star = panda.ref.random(rng, count)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    far = (np.arange(count) % far_every == 1) if far_every else np.zeros(count, bool)
    targets[0]["pose"][far, 4:] = 2.0 * _directions(int(far.sum()), rng)
    return specs, targets, far


def test_restarts_rescue_a_bad_seed(panda):
    """Seed with every joint on its lower limit (joint 4 and 6 folded, a poor start): 100
    reachable pose targets, >= 99 % succeed because restarts move away from it."""
    specs, targets, _ = _hand_pose_targets(panda, 12, 100)
    objective = specs[0].objective(targets[0])
    bad = panda.lower.copy()
    result = panda.solver.solve(objective, seed=bad, active_joints=PANDA_ARM)
    check_result(specs, panda, result, targets, min_success=0.99)
    # restarts did work: many problems needed more than the first 15 iterations
    assert np.mean(result.iterations > 15) > 0.2
    single = panda.solver.solve(
        objective, seed=bad, active_joints=PANDA_ARM, iterations_per_restart=10**6
    )
    check_result(specs, panda, single, targets, min_success=0.0)
    # without restarts: fewer successes, or (measured: 2.4x) more iterations to get there
    assert (
        single.success.mean() < result.success.mean()
        or single.iterations.mean() > 1.3 * result.iterations.mean()
    )


@pytest.fixture(scope="module")
def parallel(panda) -> IKSolver:
    """Restarts side by side (a GPU's default, see IKSolver), here on the CPU with 128 lanes."""
    return IKSolver(panda.robot, lanes=128, parallel_restarts=True)


def test_parallel_restarts_rescue_a_bad_seed(panda, parallel):
    """The bad-seed problem above with the second pass's restarts run as parallel jobs: as
    many successes as one restart after another, every one checked by the reference FK."""
    specs, targets, _ = _hand_pose_targets(panda, 12, 100)
    objective = specs[0].objective(targets[0])
    result = parallel.solve(objective, seed=panda.lower.copy(), active_joints=PANDA_ARM)
    check_result(specs, panda, result, targets, min_success=0.99)
    assert np.mean(result.iterations > 45) > 0.05  # some needed the second pass
    one_by_one = panda.solver.solve(objective, seed=panda.lower.copy(), active_joints=PANDA_ARM)
    assert result.success.sum() >= one_by_one.success.sum()


@pytest.mark.parametrize("max_iterations", [20, 1000])
def test_parallel_restarts_keep_the_budget(panda, parallel, max_iterations):
    """Reachable and unreachable targets mixed (100 rows, the program above): the reachable
    ones solved, the unreachable ones fail having spent at most ``max_iterations`` over all
    their parallel restarts (exactly, when the first pass alone spends it)."""
    specs, targets, far = _hand_pose_targets(panda, 13, 100, far_every=4)
    result = parallel.solve(
        specs[0].objective(targets[0]), active_joints=PANDA_ARM, max_iterations=max_iterations
    )
    check_result(specs, panda, result, targets, min_success=0.0)
    assert not result.success[far].any()
    assert np.all(result.iterations <= max_iterations), result.iterations.max()
    if max_iterations == 20:  # within the first pass's cap (3 restarts of 15)
        assert np.all(result.iterations[far] == 20)
    else:
        assert result.success[~far].all()
        assert np.all(result.iterations[far] > 45)  # the second pass's jobs counted


# --- 8. unreachable -----------------------------------------------------------------------


def _directions(count, rng):
    d = rng.normal(size=(count, 3))
    d[:, 2] = np.abs(d[:, 2])  # above the floor
    return d / np.linalg.norm(d, axis=-1, keepdims=True)


def test_unreachable_pose_mixed_with_reachable_ones(panda):
    """20 reachable and 20 unreachable (2 m from the base) pose targets in one batch."""
    specs, targets, far = _hand_pose_targets(panda, 13, 40, far_every=2)
    result = panda.solver.solve(specs[0].objective(targets[0]), active_joints=PANDA_ARM)
    pos, _ = check_result(specs, panda, result, targets, min_success=0.0)
    assert not result.success[far].any()
    assert result.success[~far].all()
    assert np.all(pos[far, 0] > 0.7)  # the Panda reaches ~1.2 m at most from its base
    assert np.all(result.iterations[far] == 1000)  # max_iterations spent


@pytest.mark.parametrize("which", ["serial", "solver"])
@pytest.mark.parametrize("max_iterations", [1, 20])
def test_iterations_never_exceed_max_iterations(panda, which, max_iterations):
    far = np.tile([1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.5], (5, 1))  # unreachable: all iterations
    result = getattr(panda, which).solve(
        O.pose("panda_hand", far), active_joints=PANDA_ARM, max_iterations=max_iterations
    )
    assert not result.success.any()
    assert np.all(result.iterations == max_iterations), result.iterations


@pytest.mark.parametrize("which", ["serial", "solver"])
def test_timeout_cuts_restarts_short(panda, which):
    """Unreachable targets with a huge iteration budget: a 50 ms timeout ends the call near
    50 ms (measured here by the wall clock, not the solver's own report) and says so."""
    import time

    far = np.tile([1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.5], (3, 1))
    solve = lambda **kw: getattr(panda, which).solve(
        O.pose("panda_hand", far), active_joints=PANDA_ARM, max_iterations=10**6, **kw
    )
    solve(timeout=0.05)  # compile both stages' programs
    start = time.perf_counter()
    result = solve(timeout=0.05)
    wall = time.perf_counter() - start
    assert result.timed_out and not result.success.any()
    assert wall < 0.5, wall  # 10**6 iterations would take seconds
    assert np.all(result.iterations >= 15)  # the first attempt always runs
    assert np.all(result.iterations < 10**6)
    q = np.asarray(result.q)
    assert np.all(q >= panda.lower - LIMIT_SLACK) and np.all(q <= panda.upper + LIMIT_SLACK)


def test_generous_timeout_changes_nothing_for_reachable_targets(panda):
    """With time to spare, a timeout neither cuts restarts nor loses solutions."""
    rng = np.random.default_rng(21)
    q_star = panda.ref.random(rng, 16)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    result = panda.solver.solve(
        specs[0].objective(targets[0]), active_joints=PANDA_ARM, timeout=10.0
    )
    check_result(specs, panda, result, targets)
    assert not result.timed_out


def test_unreachable_position_is_close_to_the_reach(panda):
    """Position 2 m from the base: the best found is about the closest the hand can get,
    compared with the best of 2000 random configurations (reference FK)."""
    rng = np.random.default_rng(14)
    targets = 2.0 * _directions(N_PER_KIND, rng)
    result = panda.serial.solve(O.position("panda_hand", targets), active_joints=PANDA_ARM)
    q = np.asarray(result.q, np.float64)
    assert not result.success.any()
    assert np.all(q >= panda.lower - LIMIT_SLACK) and np.all(q <= panda.upper + LIMIT_SLACK)
    got = np.linalg.norm(panda.ref.poses(q)["panda_hand"][:, :3, 3] - targets, axis=-1)
    np.testing.assert_allclose(result.position_error[:, 0], got, atol=1e-4)
    samples = panda.ref.random(rng, 2000, margin=0.0)
    hands = panda.ref.poses(samples)["panda_hand"][:, :3, 3]
    best = np.linalg.norm(hands[None] - targets[:, None], axis=-1).min(axis=1)
    assert np.all(got <= best + 0.05), np.max(got - best)


# --- 9. invalid input ----------------------------------------------------------------------

GOOD_POSE = np.array([0.0, 1.0, 0.0, 0.0, 0.4, 0.1, 0.5])


def _invalid_cases():
    arm = {"active_joints": PANDA_ARM}
    cases = {
        "unknown link": (lambda: O.pose("panda_nope", GOOD_POSE), {}, "unknown link 'panda_nope'"),
        "unknown reference": (
            lambda: O.pose("panda_hand", GOOD_POSE, reference="ref_nope"),
            {},
            "unknown link 'ref_nope'",
        ),
        "nan target": (
            lambda: O.pose("panda_hand", np.where(np.arange(7) == 5, np.nan, GOOD_POSE)),
            {},
            "target contains NaN",
        ),
        "inf target": (
            lambda: O.position("panda_hand", [0.3, np.inf, 0.2]),
            {},
            "position contains NaN or infinite",
        ),
        "zero quaternion": (
            lambda: O.pose("panda_hand", [0, 0, 0, 0, 0.4, 0.1, 0.5]),
            {},
            "non-zero quaternion",
        ),
        "zero orientation quaternion": (
            lambda: O.orientation("panda_hand", np.zeros(4)),
            {},
            "non-zero quaternion",
        ),
        "zero hinge axis": (
            lambda: O.hinge("panda_hand", LP, LA, [0.4, 0, 0.5], [0, 0, 0]),
            {},
            "^axis must be a non-zero vector",
        ),
        "zero local axis": (
            lambda: O.hinge("panda_hand", LP, (0, 0, 0), [0.4, 0, 0.5], LA),
            {},
            "local_axis must be a non-zero vector",
        ),
        "zero plane normal": (
            lambda: O.plane("panda_hand", LP, [0.4, 0, 0.5], [0, 0, 0]),
            {},
            "^axis must be a non-zero vector",
        ),
        "wrong target shape": (
            lambda: O.pose("panda_hand", np.zeros(6)),
            {},
            r"target must have shape \(\*batch, 7\)",
        ),
        "wrong batch target shape": (
            lambda: O.pose("panda_hand", np.zeros((3, 6))),
            {},
            r"target must have shape \(\*batch, 7\)",
        ),
        "wrong point shape": (
            lambda: O.position("panda_hand", [0.1, 0.2]),
            {},
            r"position must have shape \(\*batch, 3\)",
        ),
        "seed wrong length": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"seed": np.zeros(7)},
            r"seed must have shape \(\*batch, 8\)",
        ),
        "nan seed": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"seed": np.where(np.arange(8) == 2, np.nan, 0.0)},
            "seed contains? NaN",
        ),
        "unknown active joint": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"active_joints": ["panda_joint1", "bogus"]},
            "joint 'bogus' is unknown",
        ),
        "mimic active joint": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"active_joints": ["panda_joint1", "panda_finger_joint2"]},
            "'panda_finger_joint2' is a mimic joint",
        ),
        "fixed active joint": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"active_joints": ["panda_joint1", "panda_hand_joint"]},
            "'panda_hand_joint' is a fixed joint",
        ),
        "empty active joints": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"active_joints": []},
            "active_joints is empty",
        ),
        "negative max_deviation": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            dict(arm, max_deviation=-0.1),
            "max_deviation must be >= 0",
        ),
        "negative max_deviation entry": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            dict(arm, max_deviation=[0.1] * 7 + [-1e-3]),
            "max_deviation must be >= 0",
        ),
        "empty batch": (lambda: O.pose("panda_hand", np.zeros((0, 7))), {}, "empty batch"),
        "non-broadcastable objectives": (
            lambda: [
                O.pose("panda_hand", np.tile(GOOD_POSE, (3, 1))),
                O.position("panda_link4", np.zeros((4, 3))),
            ],
            {},
            "do not broadcast",
        ),
        "non-broadcastable seed": (
            lambda: O.pose("panda_hand", np.tile(GOOD_POSE, (3, 1))),
            {"seed": np.zeros((4, 8))},
            "do not broadcast",
        ),
        "plane local_axis only": (
            lambda: O.plane("panda_hand", LP, [0.4, 0, 0.5], NORMAL, local_axis=LA),
            {},
            "plane: give both local_axis and axis",
        ),
        "plane axis only": (
            lambda: O.plane("panda_hand", LP, [0.4, 0, 0.5], NORMAL, axis=LA),
            {},
            "plane: give both local_axis and axis",
        ),
        "line axis only": (
            lambda: O.line("panda_hand", LP, [0.4, 0, 0.5], NORMAL, axis=LA),
            {},
            "line: give both local_axis and axis",
        ),
        "negative weight": (
            lambda: O.position("panda_hand", [0.3, 0.1, 0.4], weight=-1.0),
            {},
            "weights must be",
        ),
        "rest wrong length": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"rest": np.zeros(7), "rest_weight": 0.1},
            "rest must be 8",
        ),
        "zero tolerance": (
            lambda: O.pose("panda_hand", GOOD_POSE),
            {"position_tolerance": 0.0},
            "position_tolerance must be a positive number",
        ),
    }
    return [
        pytest.param(make, options, match, id=name)
        for name, (make, options, match) in cases.items()
    ]


@pytest.mark.parametrize("make, options, match", _invalid_cases())
def test_invalid_input_raises_value_error(panda, make, options, match):
    """Raised at construction or at solve, before anything is compiled."""
    programs = panda.solver.compiled_programs
    with pytest.raises(ValueError, match=match):
        panda.solver.solve(make(), **options)
    assert panda.solver.compiled_programs == programs


def test_invalid_input_to_residual_and_jacobian(panda):
    from pyroki_ros.ik import residual_and_jacobian

    with pytest.raises(ValueError, match="unknown link 'nope'"):
        residual_and_jacobian(panda.robot, O.position("nope", [0.1, 0.2, 0.3]), np.zeros(8))
    with pytest.raises(ValueError, match="8"):
        residual_and_jacobian(panda.robot, O.position("panda_hand", [0.1, 0.2, 0.3]), np.zeros(7))


# --- 10. batching and compilation ---------------------------------------------------------


def _pose_problems(panda, count, rng_seed):
    rng = np.random.default_rng(rng_seed)
    q_star = panda.ref.random(rng, count)
    return hand_poses(panda, q_star)


def compiled(solver) -> int:
    """Programs the solver has compiled (its public count)."""
    return solver.compiled_programs


def test_batches_in_one_bucket_share_one_program(panda):
    solver = panda.solver
    poses = _pose_problems(panda, 100, 15)
    first = solver.solve(O.pose("panda_hand", poses[:37]), active_joints=PANDA_ARM)
    before = compiled(solver)
    second = solver.solve(O.pose("panda_hand", poses), active_joints=PANDA_ARM)
    # new option values are traced too
    third = solver.solve(
        O.pose("panda_hand", poses[:70]),
        seed=panda.ref.random(np.random.default_rng(0), 70),
        active_joints=PANDA_ARM[:6],
        max_deviation=2.0,
        position_tolerance=2e-3,
        orientation_tolerance=0.03,
        iterations_per_restart=20,
        max_iterations=500,
        rest=READY,
        rest_weight=1e-6,
    )
    assert compiled(solver) == before
    assert first.q.shape == (37, 8) and second.q.shape == (100, 8) and third.q.shape == (70, 8)
    # the first 37 problems are the same in both calls, with the same seed: same answers
    np.testing.assert_array_equal(first.success, second.success[:37])
    np.testing.assert_allclose(first.q, second.q[:37], atol=1e-5)


def test_new_single_target_values_never_recompile(panda):
    solver = panda.solver
    poses = _pose_problems(panda, 4, 16)
    results = [solver.solve(O.pose("panda_hand", poses[0]), active_joints=PANDA_ARM)]
    before = compiled(solver)
    for pose in poses[1:]:
        results.append(
            solver.solve(
                O.pose("panda_hand", pose),
                active_joints=PANDA_ARM,
                seed=panda.ref.random(np.random.default_rng(1), 1)[0],
            )
        )
    results.append(
        solver.solve(
            O.pose("panda_hand", poses[0]),
            active_joints=PANDA_ARM[2:],
            max_iterations=300,
            position_tolerance=1e-4,
        )
    )
    assert compiled(solver) == before
    for r in results:
        assert r.q.shape == (8,) and r.success.shape == () and r.position_error.shape == (1,)
    check_result(
        [Spec("pose", "panda_hand")], panda, _stack(results[:4]), [{"pose": poses}], min_success=1.0
    )


def test_pose_solver_answers_like_solve_and_checks_its_input(panda):
    """The prepared single-target path: the same compiled program as solve() for one pose,
    answers checked with the reference FK, bad input refused, no new compilation per target."""
    solver = panda.solver
    prepared = solver.pose_solver("panda_hand", active_joints=PANDA_ARM)
    rng = np.random.default_rng(18)
    poses = _pose_problems(panda, 6, 18)
    seeds = panda.ref.random(rng, 6)
    seeds[0] = np.nan  # replaced below: the first call uses the default seed
    results = [prepared(poses[0])]
    before = compiled(solver)
    results += [prepared(pose, seed=seed) for pose, seed in zip(poses[1:], seeds[1:])]
    assert compiled(solver) == before
    check_result([Spec("pose", "panda_hand")], panda, _stack(results), [{"pose": poses}])
    for r in results:
        assert r.q.shape == (8,) and r.success.shape == () and r.position_error.shape == (1,)
        assert isinstance(r.iterations, np.integer) and r.iterations >= 1
    # the same problem through solve(): the same answer
    again = solver.solve(O.pose("panda_hand", poses[1]), seed=seeds[1], active_joints=PANDA_ARM)
    np.testing.assert_allclose(results[1].q, again.q, atol=1e-6)
    # a quaternion that is not unit length is normalised, as O.pose does
    scaled = poses[2].copy()
    scaled[:4] *= 3.0
    np.testing.assert_allclose(prepared(scaled, seed=seeds[2]).q, results[2].q, atol=1e-6)
    # the inactive finger joint stays at the (float32) seed
    np.testing.assert_array_equal(results[3].q[7:], seeds[3][7:].astype(np.float32))
    # a seed past the limits starts from its clipped value; answers at a limit whose float32
    # copy rounds outwards (panda_joint1: 2.8973) still lie inside the float64 limits
    lower, upper = np.array(panda.robot.limits.bounds).T
    assert np.float32(upper[0]) > upper[0]
    past = prepared(poses[4], seed=upper + 0.5)
    np.testing.assert_allclose(past.q, prepared(poses[4], seed=upper).q, atol=1e-6)
    held = solver.pose_solver("panda_hand", active_joints=PANDA_ARM[1:])  # joint1 held
    batch_held = solver.solve(
        O.pose("panda_hand", poses[:3]), seed=np.stack([upper] * 3), active_joints=PANDA_ARM[1:]
    )
    for r in (past, held(poses[4], seed=upper), held(poses[4], seed=upper + 0.5), batch_held):
        assert np.all(r.q >= lower) and np.all(r.q <= upper)
    assert held(poses[4], seed=upper).q[0] == np.nextafter(np.float32(upper[0]), np.float32(0))
    # a batch of targets goes through solve()
    batch = prepared(poses[:3])
    assert batch.q.shape == (3, 8) and bool(np.all(batch.success))
    for target, seed, match in (
        (np.array([0.0, 0, 0, 0, 0.3, 0, 0.5]), None, "quaternion"),
        (np.array([1.0, 0, 0, 0, np.nan, 0, 0.5]), None, "NaN"),
        (np.array([1.0, 0, 0, 0, 0.3, 0, np.inf]), None, "NaN"),
        (poses[0], np.full(8, np.nan), "NaN"),
    ):
        with pytest.raises(ValueError, match=match):
            prepared(target, seed=seed)


def _stack(results):
    """IKResults of single problems -> one with a (len,) batch."""
    fields = ("q", "success", "position_error", "orientation_error", "iterations")
    return SimpleNamespace(**{f: np.stack([getattr(r, f) for r in results]) for f in fields})


def test_batch_agrees_with_one_by_one(panda):
    rng = np.random.default_rng(17)
    count = 5
    q_star = panda.ref.random(rng, count)
    seeds = panda.ref.random(rng, count)
    specs = [Spec("pose", "panda_hand")]
    targets = build(specs, panda.ref, q_star, rng)
    batch = panda.solver.solve(specs[0].objective(targets[0]), seed=seeds, active_joints=PANDA_ARM)
    singles = [  # the same objective, one problem at a time
        panda.solver.solve(
            specs[0].objective({k: v[i] for k, v in targets[0].items()}),
            seed=seeds[i],
            active_joints=PANDA_ARM,
        )
        for i in range(count)
    ]
    check_result(specs, panda, batch, targets)
    one = _stack(singles)
    check_result(specs, panda, one, targets)
    np.testing.assert_array_equal(batch.success, one.success)
    # solved from the seed without a restart: the same local solution. (Not bit-identical:
    # 16 lanes and 1 lane round differently, and the redundant DoF drifts by ~5e-4 rad.)
    same_path = (batch.iterations < 15) & (one.iterations < 15)
    assert same_path.any()
    np.testing.assert_allclose(batch.q[same_path], one.q[same_path], atol=1e-2)


@pytest.mark.parametrize("shape", [(), (5,), (2, 3)], ids=str)
def test_output_shapes_follow_the_batch_shape(panda, shape):
    count = int(np.prod(shape))
    poses = _pose_problems(panda, count, 18).reshape(*shape, 7)
    seeds = panda.ref.random(np.random.default_rng(2), count).reshape(*shape, 8)
    objs = [O.pose("panda_hand", poses)]
    result = panda.solver.solve(objs, seed=seeds, active_joints=PANDA_ARM)
    assert result.q.shape == (*shape, 8)
    assert result.success.shape == shape
    assert result.iterations.shape == shape
    assert result.position_error.shape == (*shape, 1)
    assert result.orientation_error.shape == (*shape, 1)
    # element [idx] answers problem [idx]
    flat_q = np.asarray(result.q, np.float64).reshape(count, 8)
    got = hand_poses(panda, flat_q)
    want = poses.reshape(count, 7)
    ok = result.success.reshape(count)
    assert ok.mean() >= 0.8
    np.testing.assert_allclose(got[ok, 4:], want[ok, 4:], atol=POS_TOL + F32_SLACK)
    # a seed broadcast against the batch
    if shape:
        shared = panda.solver.solve(objs, seed=seeds.reshape(count, 8)[0], active_joints=PANDA_ARM)
        assert shared.q.shape == (*shape, 8)


_X64_SCRIPT = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)  # a user's setting for their own float64 work
import numpy as np
sys.path.insert(0, sys.argv[1])
from ik_reference import pose7
from reference_fk import pose_errors, reference_fk
from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.ik import IKSolver
from pyroki_ros.robots import urdf_path
from pyroki_ros.planning.trajopt import TrajectoryOptimizer

urdf = urdf_path("panda").read_text()
robot = Robot.from_urdf(urdf)  # float32, the default
arm = [f"panda_joint{i}" for i in range(1, 8)]
q_star = np.array([0.3, -0.4, 0.2, -2.0, 0.1, 1.8, 0.5, 0.02])
t = reference_fk(urdf, q_star, robot.joint_names)["panda_hand"]
target = pose7(t)
solver = IKSolver(robot)
answers = {
    "solve": solver.solve(O.pose("panda_hand", target), active_joints=arm),
    "pose_solver": solver.pose_solver("panda_hand", active_joints=arm)(target),
}
report = {}
for name, r in answers.items():
    got = reference_fk(urdf, r.q, robot.joint_names)["panda_hand"]
    report[name] = [bool(r.success), *pose_errors(t, got)]
start = np.array([0.0, -0.5, 0.0, -2.2, 0.0, 1.7, 0.8, 0.02])
plan = TrajectoryOptimizer(robot).plan(start, (O.pose("panda_hand", target),), num_steps=16)
got = reference_fk(urdf, plan.path[-1], robot.joint_names)["panda_hand"]
report["plan"] = [bool(plan.success), *pose_errors(t, got)]
print(json.dumps(report))
"""


def test_float32_robot_solves_with_jax_x64_enabled(tmp_path):
    """jax_enable_x64 is process-wide (a user may need it elsewhere): with a float32 robot the
    IK programs and the trajectory optimiser must keep one dtype (a float64 constant used to
    promote the loop state and fail tracing). Checked with the independent reference FK."""
    import json
    import subprocess

    script = tmp_path / "x64.py"
    script.write_text(_X64_SCRIPT)
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        [sys.executable, str(script), str(here)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=here.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for name, (success, position_error, orientation_error) in report.items():
        assert success, name
        assert position_error < 1e-3 and orientation_error < math.radians(1.0), name
