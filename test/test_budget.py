"""Plan budgets do not count compiles (pyroki_ros.planning.budget): the compile time of a
thread comes from JAX's own compile events, checked here against the wall clock around a
first call; another thread's compile is not this thread's; a cold planner's first plan (its
goal search's IK and clearance programs compile as well as the optimiser's) succeeds within a
budget far shorter than its compiles. An optimisation's cost is fitted as a fixed part plus
a part per iteration, and a budget leaves the fixed part when it counts iterations."""

from __future__ import annotations

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pyroki_ros import Robot
from pyroki_ros import objectives as O
from pyroki_ros.collision import RobotSpheres
from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.planning.budget import (
    CompileFreeClock,
    Pace,
    PaceLog,
    PlanBudget,
    compile_seconds,
)
from pyroki_ros.planning.trajopt import TrajectoryOptimizer
from pyroki_ros.robots import urdf_path


def _new_program(seed: int):
    """A function JAX has not compiled before (its constant differs), with some work in it."""

    def f(x):
        for _ in range(30):
            x = jnp.sin(x) * jnp.cos(x + seed) + 0.5 * x
        return x

    return jax.jit(f)


def test_compile_seconds_are_this_threads_and_within_the_wall_time_of_a_first_call():
    x = jnp.linspace(0.0, 1.0, 64)
    before, clock = compile_seconds(), CompileFreeClock()
    t = time.perf_counter()
    _new_program(1)(x).block_until_ready()
    wall = time.perf_counter() - t
    compiled = compile_seconds() - before
    assert 0.0 < compiled <= wall
    assert clock.elapsed() <= wall - compiled + 0.05  # the clock left the compile out
    compiled_again = compile_seconds()
    _new_program(1)  # nothing new
    assert compile_seconds() == compiled_again

    # Another thread's compile: counted there, not here.
    seen: list[float] = []

    def other() -> None:
        start = compile_seconds()
        _new_program(2)(x).block_until_ready()
        seen.append(compile_seconds() - start)

    mine = compile_seconds()
    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert seen and seen[0] > 0.0
    assert compile_seconds() == mine
    assert compile_seconds(all_threads=True) >= mine + seen[0]


@pytest.mark.slow
def test_a_cold_planners_first_plan_succeeds_within_a_budget_shorter_than_its_compiles():
    robot = Robot.from_urdf(urdf_path("panda"))
    planner = TrajectoryOptimizer(robot, RobotSpheres.embedded("panda", robot))
    start = np.array([0.0, -0.4, 0.0, -2.2, 0.0, 1.8, 0.8, 0.02])
    goal_q = start + np.array([0.5, 0.2, -0.3, 0.3, 0.2, -0.2, 0.3, 0.0])
    hand = robot.link_index("panda_hand")
    goal = np.asarray(forward_kinematics(robot, goal_q).wxyz_xyz[hand], np.float64)
    before = compile_seconds()
    t = time.perf_counter()
    result = planner.plan(start, (O.pose("panda_hand", goal),), num_steps=32, timeout=0.5)
    wall = time.perf_counter() - t
    compiled = compile_seconds() - before
    assert compiled > 0.5, compiled  # the budget alone could not have paid for the compiles
    assert result.success, (result.message, f"{wall:.1f} s, of which compiles {compiled:.1f} s")


def test_the_pace_log_fits_a_fixed_and_a_per_iteration_cost_and_follows_the_last_call():
    log = PaceLog()
    assert log.get("T16") is None
    truth = Pace(fixed=0.013, per_iteration=0.0046)  # a 64-knot plan's, measured here
    for n in (60, 1, 23, 8, 60, 16):
        log.record("T16", n, truth.seconds(n))
    pace = log.get("T16")
    assert pace.fixed == pytest.approx(truth.fixed, rel=1e-9)
    assert pace.per_iteration == pytest.approx(truth.per_iteration, rel=1e-9)
    assert pace.iterations_within(0.013 + 10.5 * 0.0046) == 10
    assert pace.iterations_within(0.012) < 1

    # The machine slows down by half: the fit is scaled to the last call, so every count's
    # prediction is slower than before.
    log.record("T16", 30, 1.5 * truth.seconds(30))
    slower = log.get("T16")
    assert slower.seconds(30) == pytest.approx(1.5 * truth.seconds(30), rel=1e-9)
    assert slower.seconds(1) > truth.seconds(1) and slower.seconds(60) > truth.seconds(60)

    # One iteration count only: nothing to split; all of it per iteration. Keys apart.
    log.record("T32", 20, 0.1)
    log.record("T32", 20, 0.12)
    assert log.get("T32") == Pace(0.0, 0.12 / 20)
    log.record("T32", 0, 5.0)  # no iteration: nothing learnt
    assert log.get("T32") == Pace(0.0, 0.12 / 20)


def test_a_budget_counts_iterations_after_the_fixed_cost_and_says_what_it_affords():
    class Planner:  # the one thing a budget asks of a planner
        def __init__(self, pace):
            self.pace = lambda t_count, world: pace

    t0 = time.perf_counter()
    budget = PlanBudget(Planner(Pace(0.02, 0.005)), timeout=100.0, clock=t0 - 99.9, world=None)
    left = budget.left()
    assert 0.09 < left <= 0.1
    assert budget.iterations(64, 60) in (
        int((left - 0.02) // 0.005),
        int((left - 0.02) // 0.005) - 1,
    )
    assert budget.iterations(64, 3) == 3 and budget.affords(64, 10)
    assert not budget.affords(64, 20)  # 0.12 s > what is left
    assert budget.seconds(64, 10) == pytest.approx(0.07)

    spent = PlanBudget(Planner(Pace(0.02, 0.005)), timeout=1.0, clock=t0 - 0.99, world=None)
    assert not spent.affords(64) and spent.iterations(64, 60) == 1  # a path to answer with
    unknown = PlanBudget(Planner(None), timeout=1.0, clock=t0, world=None)
    assert unknown.iterations(64, 60) == 60 and unknown.affords(64)
    assert unknown.seconds(64, 10) == 0.0
    unlimited = PlanBudget(Planner(Pace(0.02, 0.005)), timeout=0.0, clock=t0, world=None)
    assert unlimited.iterations(64, 60) == 60 and unlimited.affords(64, 10**6)
