"""pooled_constants: the same results as the plain function, with fewer array constants in
the compiled program (what it is for; see pyroki_ros/solver/constant_pool.py)."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros.solver.constant_pool import pooled_constants

RNG = np.random.default_rng(0)
SMALL = [RNG.normal(size=(9, 1)).astype(np.float32) for _ in range(6)]
INDEX = [RNG.integers(0, 9, size=9) for _ in range(3)]
MASKS = [RNG.random((9, 1)) > 0.5 for _ in range(4)]
LARGE = RNG.normal(size=(200, 1)).astype(np.float32)  # over 512 bytes: stays a constant


def _program(x, state):
    """Element-wise work, gathers with constant indices, masks, a loop whose body closes
    over a traced value, and a pytree out."""
    y = x
    for c, index, mask in zip(SMALL, INDEX, MASKS):
        y = jnp.where(mask, y[index] * c + 1.0, -y)
    big = jnp.sum(LARGE * y[:1])

    def body(carry):
        i, v = carry
        return i + 1, jnp.where(MASKS[3], v * SMALL[4] + state, v - SMALL[5])

    _, v = jax.lax.while_loop(lambda c: c[0] < 3, pooled_constants(body), (0, y))
    return {"v": v, "big": big}


def _array_constants(fn, *args) -> int:
    text = jax.jit(fn).lower(*args).compile().as_text()
    computations = re.split(r"\n(?=\S)", text)
    return sum(
        len(re.findall(r"= \S+\[[0-9,]+\]\S* constant\(", c))
        for c in computations
        if not re.match(r"%(fused_computation|wrapped_)", c)
    )


def test_same_results_and_fewer_constants():
    x = RNG.normal(size=(9, 1)).astype(np.float32)
    state = np.float32(0.25)
    pooled = pooled_constants(_program)
    want = jax.jit(_program)(x, state)
    got = jax.jit(pooled)(x, state)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-6)
    # Without jit (eager) too, and under differentiation (forward mode: a while loop has no
    # reverse mode).
    np.testing.assert_allclose(
        np.asarray(pooled(x, state)["v"]), np.asarray(want["v"]), rtol=1e-6, atol=1e-6
    )
    tangent = np.ones_like(x)
    jvp = lambda f: np.asarray(jax.jvp(lambda x: f(x, state)["v"], (x,), (tangent,))[1])
    np.testing.assert_allclose(jvp(pooled), jvp(_program), rtol=1e-5, atol=1e-6)
    plain, fewer = _array_constants(_program, x, state), _array_constants(pooled, x, state)
    assert plain >= 10 and fewer <= plain / 2, (plain, fewer)
