"""Per-solve joint limits (narrowed, or a bound turned off) without a recompile, and the
feasibility check of the global solve (Klampt's custom joint limits and feasibility test).
Answers are checked with numpy against the box and with the independent reference FK."""

from __future__ import annotations

import numpy as np
import pytest
from ik_cases import TOY_CONTINUOUS
from ik_reference import RefRobot, pose7

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.ik import IKSolver
from pyroki_ros.model.limits import JointLimits
from pyroki_ros.robots import urdf_path

ARM = [f"panda_joint{i}" for i in range(1, 8)]

PLANAR = """<?xml version="1.0"?>
<robot name="planar2">
  <link name="base"/><link name="l1"/><link name="l2"/><link name="tip"/>
  <joint name="j1" type="revolute">
    <parent link="base"/><child link="l1"/><axis xyz="0 0 1"/>
    <limit lower="-0.5" upper="0.5" effort="1" velocity="1"/>
  </joint>
  <joint name="j2" type="revolute">
    <parent link="l1"/><child link="l2"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-0.5" upper="0.5" effort="1" velocity="1"/>
  </joint>
  <joint name="tip_joint" type="fixed">
    <parent link="l2"/><child link="tip"/><origin xyz="1 0 0"/>
  </joint>
</robot>
"""


@pytest.fixture(scope="module")
def panda():
    robot = Robot.from_urdf(urdf_path("panda"))
    return robot, RefRobot(urdf_path("panda")), IKSolver(robot)


def _box(robot: Robot, rng: np.random.Generator, half_width: float) -> JointLimits:
    """A box of +-half_width around a random configuration of the arm (the finger keeps its
    URDF limits: NaN)."""
    lo, hi = robot.limits.lower, robot.limits.upper
    center = lo + rng.uniform(0.25, 0.75, robot.n_joints) * (hi - lo)
    lower = np.maximum(center - half_width, lo)
    upper = np.minimum(center + half_width, hi)
    lower[7] = upper[7] = np.nan
    return robot.limits.narrowed(lower, upper)


def test_narrowed_box_answers_inside_it_without_recompiling(panda):
    robot, ref, solver = panda
    rng = np.random.default_rng(3)
    box = _box(robot, rng, 0.3)
    # targets whose known solution lies inside the box
    q_star = box.lower + rng.uniform(0.1, 0.9, (12, robot.n_joints)) * (box.upper - box.lower)
    targets = pose7(ref.poses(q_star)["panda_hand"])
    seeds = ref.random(rng, 12)  # from the whole URDF range: most lie outside the box
    solver.solve(O.pose("panda_hand", targets), seed=seeds, active_joints=ARM)
    solver.solve(O.pose("panda_hand", targets[0]), seed=seeds[0], active_joints=ARM)
    before = solver.compiled_programs
    batch = solver.solve(O.pose("panda_hand", targets), seed=seeds, active_joints=ARM, limits=box)
    single = [
        solver.solve(O.pose("panda_hand", t), seed=s, active_joints=ARM, limits=box)
        for t, s in zip(targets[:4], seeds[:4])
    ]
    assert solver.compiled_programs == before, "per-solve limits must not compile a program"
    q = np.concatenate([batch.q, np.stack([r.q for r in single])])
    success = np.concatenate([batch.success, [r.success for r in single]])
    assert success.mean() >= 0.9, f"success {success.mean():.2f} in the box"
    inside = (q >= box.lower) & (q <= box.upper)
    assert inside.all(), f"answers outside the box: {np.argwhere(~inside)}"
    # the reported errors are those of the returned q (independent FK)
    reached = pose7(ref.poses(batch.q)["panda_hand"])
    ok = batch.success
    assert np.abs(reached[ok, 4:] - targets[ok, 4:]).max() < 2e-3


def test_default_seed_is_inside_the_box(panda):
    robot, ref, solver = panda
    rng = np.random.default_rng(4)
    box = _box(robot, rng, 0.2)
    q_star = (box.lower + box.upper) / 2 + 0.05
    q_star[7] = 0.02
    target = pose7(ref.poses(q_star[None])["panda_hand"])[0]
    result = solver.solve(O.pose("panda_hand", target), active_joints=ARM, limits=box)
    assert result.success
    assert np.all((result.q >= box.lower) & (result.q <= box.upper))


def test_a_bound_turned_off_lets_the_answer_leave_the_urdf_range():
    robot = Robot.from_urdf(PLANAR)
    solver = IKSolver(robot)
    q_star = np.array([1.2, 0.3])  # joint 1 past its URDF upper limit (0.5)
    tip = [np.cos(1.2) + np.cos(1.5), np.sin(1.2) + np.sin(1.5), 0.0]
    objective = O.position("tip", tip)
    plain = solver.solve(objective)
    assert not plain.success, "only reachable past the URDF limit"
    before = solver.compiled_programs
    free = robot.limits.narrowed(upper=[np.inf, np.nan])
    result = solver.solve(objective, limits=free)
    assert solver.compiled_programs == before
    assert result.success
    np.testing.assert_allclose(result.q, q_star, atol=1e-2)
    assert result.q[0] > 0.5 and -0.5 <= result.q[1] <= 0.5
    # a seed past the URDF limit is kept where the limits allow it (clipped into the solve's limits)
    seeded = solver.solve(objective, seed=[1.1, 0.2], limits=free, max_iterations=15)
    assert seeded.success and seeded.q[0] > 0.5


def test_invalid_limits_raise(panda):
    robot, _, solver = panda
    target = O.pose("panda_hand", [1.0, 0, 0, 0, 0.4, 0.0, 0.5])
    before = solver.compiled_programs
    wider = JointLimits.create(robot.limits.lower - 0.5, robot.limits.upper, robot.limits.wraps)
    with pytest.raises(
        ValueError, match=r"limits: joint 'panda_joint1' .* is empty or not inside its limits"
    ):
        solver.solve(target, limits=wider)
    seven = robot.limits.select(range(7))
    with pytest.raises(ValueError, match="expected 8 joints"):
        solver.solve(target, limits=seven)
    with pytest.raises(ValueError, match="expected 8 values"):
        robot.limits.narrowed(lower=np.zeros(3))
    with pytest.raises(ValueError, match=r"limits: joint 0 .* is empty or not inside its limits"):
        robot.limits.narrowed(lower=np.full(8, np.nan), upper=robot.limits.lower - 0.1)
    with pytest.raises(TypeError, match="JointLimits"):
        solver.solve(target, limits=(robot.limits.lower, robot.limits.upper))
    assert solver.compiled_programs == before


def test_feasibility_check_keeps_searching_until_an_answer_passes(panda):
    """Targets from configurations with the upper arm turned past +0.8 rad (joint 3, along the
    Panda's self-motion): they also have answers with joint 3 near 0, which the plain solve
    finds from the default seed (joint 3 at 0). The check asks for joint 3 > 0.5: every success
    satisfies it, and at least as many targets succeed."""
    robot, ref, solver = panda
    rng = np.random.default_rng(5)
    q_star = ref.random(rng, 24)
    q_star[:, 2] = rng.uniform(0.8, 2.5, 24)
    targets = pose7(ref.poses(q_star)["panda_hand"])
    turned = lambda q: q[:, 2] > 0.5  # independent of the solver: plain numpy
    calls = []

    def feasible(q: np.ndarray) -> np.ndarray:
        assert q.dtype == np.float64 and q.ndim == 2 and q.shape[1] == robot.n_joints
        calls.append(len(q))
        return turned(q)

    objective = O.pose("panda_hand", targets)
    plain = solver.solve(objective, active_joints=ARM)
    checked = solver.solve(objective, active_joints=ARM, feasible=feasible)
    plain_feasible = plain.success & turned(plain.q)
    numbers = (
        f"plain: success {plain.success.mean():.2f}, feasible {plain_feasible.mean():.2f}; "
        f"checked: success {checked.success.mean():.2f}; predicate calls {calls}"
    )
    print(numbers)
    assert turned(checked.q[checked.success]).all(), numbers
    assert checked.success.mean() >= plain.success.mean(), numbers
    assert checked.success.mean() > plain_feasible.mean(), numbers
    # the reported successes are real (independent FK)
    reached = pose7(ref.poses(checked.q)["panda_hand"])
    ok = checked.success
    assert np.abs(reached[ok, 4:] - targets[ok, 4:]).max() < 2e-3, numbers
    # one problem: the bucket-1 program, same rule
    single = solver.solve(O.pose("panda_hand", targets[0]), active_joints=ARM, feasible=turned)
    assert not single.success or turned(single.q[None])[0]


def test_feasibility_check_with_a_wrong_shape_raises(panda):
    _, ref, solver = panda
    target = pose7(ref.poses(ref.random(np.random.default_rng(6), 1))["panda_hand"])[0]
    with pytest.raises(ValueError, match="feasible must return"):
        solver.solve(
            O.pose("panda_hand", target), active_joints=ARM, feasible=lambda q: np.ones(3, bool)
        )


def test_pose_solver_takes_limits_too(panda):
    robot, ref, solver = panda
    rng = np.random.default_rng(7)
    box = _box(robot, rng, 0.3)
    q_star = box.lower + rng.uniform(0.1, 0.9, (6, robot.n_joints)) * (box.upper - box.lower)
    targets = pose7(ref.poses(q_star)["panda_hand"])
    hand = solver.pose_solver("panda_hand", active_joints=ARM, limits=box)
    results = [hand(t) for t in targets]
    q = np.stack([r.q for r in results])
    assert np.mean([r.success for r in results]) >= 0.8
    assert np.all((q >= box.lower) & (q <= box.upper))


def test_a_continuous_joint_given_bounds_stops_wrapping():
    """Two answers reach the tip (elbow +1 or -1); the box on the continuous joint keeps only
    the one with the joint at 2.0 (the other has it at 2.73), seeded from -3 (outside it)."""
    robot = Robot.from_urdf(TOY_CONTINUOUS)
    solver = IKSolver(robot)
    tip = [0.5 * np.cos(2.0) + 0.3 * np.cos(3.0), 0.5 * np.sin(2.0) + 0.3 * np.sin(3.0), 0.0]
    free = solver.solve(O.position("tip", tip), seed=[-3.0, 0.0])
    assert free.success
    before = solver.compiled_programs
    box = robot.limits.narrowed([1.5, np.nan], [2.5, np.nan])
    assert not box.wraps.any()
    boxed = solver.solve(O.position("tip", tip), seed=[-3.0, 0.0], limits=box)
    assert solver.compiled_programs == before
    assert boxed.success
    np.testing.assert_allclose(boxed.q, [2.0, 1.0], atol=1e-2)
