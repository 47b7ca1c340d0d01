"""Plan budgets do not count compiles (pyroki_ros.planning.budget): the compile time of a
thread comes from JAX's own compile events, checked here against the wall clock around a
first call; another thread's compile is not this thread's; a cold planner's first plan (its
goal search's IK and clearance programs compile as well as the optimiser's) succeeds within a
budget far shorter than its compiles."""

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
from pyroki_ros.planning.budget import CompileFreeClock, compile_seconds
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
