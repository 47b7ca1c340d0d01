"""The smoothness coupling kept by its diagonals: bands, products, costs and Gauss-Newton
blocks against an explicit dense numpy construction of D_k^T D_k written here; a 20,000-step
retarget and plan in memory linear in T, against the memory estimate."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from nls_reference import dense_hessian

from pyroki_ros.planning.trajopt import retarget_memory_bytes, trajectory_memory_bytes
from pyroki_ros.solver import damping, lm

REPO = pathlib.Path(__file__).resolve().parent.parent


def dense_smoothing(t_count: int, order: int, hold_ends: bool) -> np.ndarray:
    """(T, T) D^T D: D takes ``order``-th forward differences (np.diff) of the chain extended
    by ``order`` copies of each end knot when ``hold_ends`` (the path rests before and after)."""
    ghost = order if hold_ends else 0
    extend = np.eye(t_count)[np.clip(np.arange(-ghost, t_count + ghost), 0, t_count - 1)]
    d = np.diff(extend, n=order, axis=0)
    return d.T @ d


@pytest.mark.parametrize("hold_ends", [True, False])
@pytest.mark.parametrize("order", [1, 2, 3])
@pytest.mark.parametrize("t_count", [1, 2, 3, 5, 8, 17, 40])
def test_smoothing_bands_are_the_diagonals_of_dense_difference_operators(t_count, order, hold_ends):
    dense = dense_smoothing(t_count, order, hold_ends)
    bands = lm.smoothing_bands(t_count, (order,), hold_ends=hold_ends)[0]
    assert bands.shape == (order + 1, t_count)
    rebuilt = np.diag(bands[0])
    for k in range(1, min(order + 1, t_count)):
        rebuilt += np.diag(bands[k, : t_count - k], k) + np.diag(bands[k, : t_count - k], -k)
        assert not bands[k, t_count - k :].any()  # past the matrix: zero
    np.testing.assert_allclose(rebuilt, dense, atol=1e-12)
    # The bands hold every nonzero entry: D^T D has bandwidth ``order``.
    assert not np.triu(dense, order + 1).any()


@pytest.mark.parametrize("hold_ends", [True, False])
@pytest.mark.parametrize("orders", [(1,), (2,), (3,), (1, 2), (1, 2, 3)])
@pytest.mark.parametrize("t_count", [5, 6, 11, 40])
def test_banded_products_costs_and_blocks_equal_dense(t_count, orders, hold_ends):
    """S x, the coupling's gradient and cost, and the damped block-tridiagonal Gauss-Newton
    blocks, from the diagonals, against the dense S (float64)."""
    rng = np.random.default_rng(t_count * 10 + len(orders))
    n = 3
    w_orders = rng.uniform(0.5, 4.0, len(orders))
    dense = sum(w * dense_smoothing(t_count, k, hold_ends) for w, k in zip(w_orders, orders))
    stacked = lm.smoothing_bands(t_count, orders, hold_ends=hold_ends)
    bands = np.einsum("o,okt->kt", w_orders, stacked)
    x = 2.0 + rng.normal(size=(t_count, n))  # far from 0, as joint values
    weights = rng.uniform(0.5, 2.0, n)
    j = rng.normal(size=(t_count, 4, n))
    diag = np.einsum("tmi,tmj->tij", j, j)
    sub = 0.3 * rng.normal(size=(t_count - 1, n, n))
    free = (rng.uniform(size=(t_count, n)) > 0.2).astype(float)
    with jax.enable_x64(True):
        f64 = lambda a: jnp.asarray(a, jnp.float64)
        np.testing.assert_allclose(lm.banded_product(f64(bands), f64(x)), dense @ x, atol=1e-9)
        lin = lm.Linearization(
            cost=f64(0.0),
            gradient=f64(np.zeros((t_count, n))),
            diagonal=f64(diag),
            subdiagonal=f64(sub),
            coupling=f64(bands),
            coupling_weights=f64(weights),
        )
        gradient, cost = lm._coupling_terms(lin, f64(x))
        np.testing.assert_allclose(gradient, weights * (dense @ x), atol=1e-9)
        np.testing.assert_allclose(cost, 0.5 * np.sum(weights * x * (dense @ x)), rtol=1e-12)
        for b in sorted({max(orders), 3}):
            d, c = (np.asarray(a) for a in lm.banded_matrix_blocks(lin, f64(0.1), f64(free), b))
            groups = -(-t_count // b)
            size = groups * b * n  # knots padded to whole groups: identity rows
            h = np.eye(size)
            h[: t_count * n, : t_count * n] = dense_hessian(diag, sub, dense, weights, 0.1, free)
            m = b * n
            assert d.shape == (groups, m, m) and c.shape == (groups - 1, m, m)
            for g in range(groups):
                np.testing.assert_allclose(d[g], h[g * m : (g + 1) * m, g * m : (g + 1) * m])
                if g + 1 < groups:
                    block = h[(g + 1) * m : (g + 2) * m, g * m : (g + 1) * m]
                    np.testing.assert_allclose(c[g], block, atol=1e-12)
                    # Nothing outside the block tridiagonal (bandwidth <= b).
                    assert not h[(g + 2) * m :, g * m : (g + 1) * m].any()


def test_memory_estimate_is_linear_and_validated():
    base = trajectory_memory_bytes(0, 8, 1)
    per_knot = 4 * (20 * 64 + 16 * 8 + 64)
    assert trajectory_memory_bytes(1000, 8, 1) == base + 1000 * per_knot
    assert trajectory_memory_bytes(1000, 8, 1, starts=8) == base + 8000 * per_knot
    assert trajectory_memory_bytes(1000, 8, 1, jerk=True) > trajectory_memory_bytes(1000, 8, 1)
    # A retarget pads its steps up to a bucket (at most 1.5x).
    assert trajectory_memory_bytes(20_000, 8, 1) < retarget_memory_bytes(20_000, 8, 1)
    assert retarget_memory_bytes(20_000, 8, 1) < trajectory_memory_bytes(30_000, 8, 1)
    with pytest.raises(ValueError):
        trajectory_memory_bytes(-1, 8, 1)
    with pytest.raises(ValueError):
        trajectory_memory_bytes(10, 8, 1, starts=0)


# A fresh process: its peak RSS (a high-water mark) counts only this work.
LONG_RUN = r"""
import json, sys
import numpy as np
from pyroki_ros import Robot
from pyroki_ros.collision import RobotSpheres
from pyroki_ros.robots import urdf_path
from pyroki_ros.planning.trajopt import TrajectoryOptimizer, retarget

def peak():
    # VmHWM: this address space's peak RSS (ru_maxrss would keep the parent's across exec).
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024

def hand_circle(t_count):
    s = np.linspace(0.0, 1.0, t_count)[:, None]
    xyz = [0.4 + 0.1 * np.cos(6 * s), 0.2 * np.sin(6 * s), 0.5 + 0.05 * s]
    return np.concatenate(xyz, 1)[:, None]  # (T, 1, 3)

robot = Robot.from_urdf(urdf_path("panda"))
planner = TrajectoryOptimizer(robot, RobotSpheres.embedded("panda", robot))
out = {"base": peak()}
# A short retarget first compiles the same kinds of programs: what the long one adds on top
# is what grows with T.
retarget(planner, ("panda_hand",), hand_circle(100), max_iterations=2)
out["short"] = peak()
result, errors = retarget(planner, ("panda_hand",), hand_circle(20_000), max_iterations=2)
out["long"] = peak()
out["retarget_shape"] = list(result.path.shape)
out["retarget_error"] = float(np.median(errors))  # 2 iterations: only roughly there
# A plan of 20,000 knots to a joint goal (no collision spheres: a cheaper compile).
start = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.02])
goal = start + np.array([1.0, 0.3, 0.0, 0.3, 0.0, -0.2, 0.0, 0.0])
plan = TrajectoryOptimizer(robot).plan(start, goal, num_steps=20_000, num_starts=1,
                                       max_iterations=2)
out["plan"] = peak()
out["plan_shape"] = list(plan.path.shape)
out["plan_end_error"] = float(np.max(np.abs(plan.path[-1] - goal)))
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="peak RSS from /proc (Linux)")
def test_long_retarget_and_plan_run_in_memory_linear_in_steps():
    """20,000 steps (the node's max_retarget_steps) with the Panda and its collision spheres:
    one dense (T, T) float32 matrix of the 22,141 knots would be 2 GB (the old program
    held five). Peak RSS growth stays far below that, and the estimate
    (retarget_memory_bytes) is within a factor 3 of it, in total and for what grows with T."""
    done = subprocess.run(
        [sys.executable, "-c", LONG_RUN],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["retarget_shape"] == [20_000, 8] and out["retarget_error"] < 0.2
    assert out["plan_shape"] == [20_000, 8] and out["plan_end_error"] < 1e-6
    mb = 2**20
    total = out["long"] - out["base"]
    with_t = out["long"] - out["short"]
    assert with_t < 500 * mb, f"{with_t / mb:.0f} MB for 20,000 steps"
    assert total < 1024 * mb, f"{total / mb:.0f} MB"
    assert out["plan"] - out["base"] < 1024 * mb, f"{(out['plan'] - out['base']) / mb:.0f} MB"
    estimate = retarget_memory_bytes(20_000, 8, 1)
    estimate_t = estimate - retarget_memory_bytes(100, 8, 1)
    assert total / 3 < estimate < 3 * total, (estimate / mb, total / mb)
    assert with_t / 3 < estimate_t < 3 * with_t, (estimate_t / mb, with_t / mb)


def test_one_damping_schedule_for_chains_and_ik():
    """The damping schedule of every LM loop (solver/damping.py): an accepted step relaxes the
    damping and a rejected one stiffens it, within the bounds; a T = 1 (dense) problem, the
    Rosenbrock function as least squares, solved by ``solve_chain`` under the chain's
    (Marquardt) and the IK's (Levenberg) schedule, reaches its minimum (1, 1) under both."""
    chain = damping.CHAIN
    np.testing.assert_allclose(chain.update(jnp.asarray([1.0, 1.0]), jnp.asarray([True, False])),
                               [chain.decrease, chain.increase], rtol=1e-6)  # fmt: skip
    assert float(chain.update(jnp.asarray(chain.minimum), True)) == pytest.approx(chain.minimum)
    assert float(chain.update(jnp.asarray(chain.maximum), False)) == pytest.approx(chain.maximum)
    assert bool(chain.stuck(chain.update(jnp.asarray(chain.give_up), False)))
    assert list(damping.improves(jnp.asarray([1.0, 3.0, np.nan]), 2.0)) == [True, False, False]

    def linearize(x):
        (a, b) = x[0]
        r = jnp.stack([10 * (b - a**2), 1 - a])
        j = jnp.array([[-20 * a, 10.0], [-1.0, 0.0]])
        return lm.Linearization(
            cost=0.5 * jnp.sum(r**2),
            gradient=(j.T @ r)[None],
            diagonal=(j.T @ j)[None],
            subdiagonal=jnp.zeros((0, 2, 2)),
            coupling=jnp.zeros((1, 1)),
            coupling_weights=jnp.zeros(2),
        )

    for schedule in (damping.CHAIN, damping.IK):
        result = jax.jit(
            lambda x, schedule=schedule: lm.solve_chain(
                linearize, x, free=jnp.ones((1, 2)), lower=-5.0, upper=5.0, bandwidth=1,
                relative_tolerance=0.0, cost_tolerance=1e-12, schedule=schedule,
            )
        )(jnp.asarray([[-1.2, 1.0]]))  # fmt: skip
        assert bool(result.converged), schedule
        np.testing.assert_allclose(result.x[0], [1.0, 1.0], atol=1e-3)
