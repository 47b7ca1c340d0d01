"""Levenberg-Marquardt least squares over a chain of variables, with a banded solve.

The variables are a chain ``x`` (T, n): T knots of n values each (a trajectory of joint
vectors; T = 1 is a plain dense problem). Residual terms either depend on one knot or on two
neighbouring knots, and a quadratic coupling ``0.5 sum_j w_j x[:, j]^T S x[:, j]`` with a
symmetric banded (T, T) matrix S expresses finite-difference smoothness. S is only ever stored
by its diagonals, ``bands`` (c + 1, T) with ``bands[k, t] = S[t, t + k] = S[t + k, t]`` (zero
where t + k >= T; c <= 3 is its bandwidth), so memory stays O(T c) at any T (a dense S of a
20,000-step motion alone was 1.6 GB). The Gauss-Newton matrix is then block-banded, and
solving it costs O(T) instead of the O(T^3) of a dense factorisation: knots are grouped
``bandwidth`` at a time, which makes the matrix block-tridiagonal in the groups, and a block
Cholesky factorisation runs as one ``lax.scan`` over the groups.

Everything is pure JAX: jit once per problem structure (T, n, the terms), ``vmap`` over
problems and starts, the same code on CPU and GPU. Box bounds are held by projection: every
accepted iterate lies inside them. The damping schedule and the acceptance test are
:mod:`pyroki_ros.solver.damping`'s, the same rules as the IK fast path's (pyroki_ros/ik/lm.py).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from pyroki_ros.solver.damping import CHAIN, Damping, improves


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Linearization:
    """The nonlinear terms of a chain problem around ``x``, Gauss-Newton style.

    Attributes:
        cost: () 0.5 |r|^2 of the nonlinear residuals (the coupling term is added by the solver).
        gradient: (T, n) J^T r.
        diagonal: (T, n, n) diagonal blocks of J^T J.
        subdiagonal: (T - 1, n, n) blocks (t + 1, t) of J^T J (terms on two neighbours).
        coupling: (c + 1, T) the diagonals of the symmetric banded S of the quadratic term:
            ``coupling[k, t] = S[t, t + k] = S[t + k, t]``, zero where t + k >= T (see the
            module docstring and :func:`smoothing_bands`).
        coupling_weights: (n,) per-variable weights w of the quadratic term.
        satisfied: () bool, the caller's own test that ``x`` is good enough (for a planner:
            goals met and clear of obstacles); with ``satisfied_tolerance`` the solve then
            stops at a looser relative decrease.
    """

    cost: jax.Array
    gradient: jax.Array
    diagonal: jax.Array
    subdiagonal: jax.Array
    coupling: jax.Array
    coupling_weights: jax.Array
    satisfied: jax.Array = dataclasses.field(default_factory=lambda: jnp.asarray(False))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ChainResult:
    """Per problem: the solution and how the solve went.

    Attributes:
        x: (T, n) the best iterate (inside the bounds).
        cost: () its total cost.
        iterations: () iterations used.
        converged: () the relative cost decrease fell below the tolerance (or the cost below
            ``cost_tolerance``) before the iteration limit.
    """

    x: jax.Array
    cost: jax.Array
    iterations: jax.Array
    converged: jax.Array


def banded_product(bands: jax.Array, y: jax.Array) -> jax.Array:
    """S @ y for the symmetric banded S given by its diagonals, in O(T c n).

    Args:
        bands: (c + 1, T) ``bands[k, t] = S[t, t + k] = S[t + k, t]`` (zero where t + k >= T).
        y: (T, n)

    Returns:
        (T, n)
    """
    t_count = y.shape[0]
    out = bands[0][:, None] * y
    for k in range(1, min(bands.shape[0], t_count)):
        b_k = bands[k, : t_count - k][:, None]
        # Row t gets S[t, t + k] y[t + k] (above the diagonal) and S[t, t - k] y[t - k].
        out = out + jnp.pad(b_k * y[k:], ((0, k), (0, 0)))
        out = out + jnp.pad(b_k * y[: t_count - k], ((k, 0), (0, 0)))
    return out


def _coupling_terms(lin: Linearization, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The coupling's gradient ``w * (S x)`` (T, n) and cost ``0.5 sum_j w_j x_j^T S x_j``.

    Evaluated about each variable's mean m over the knots, x = y + m: S x = S y + (S 1) m and
    x^T S x = y^T S y + m (2 (S 1)^T y + m 1^T S 1), exact for any S. A smoothness S has
    S 1 = 0, and then only the small deviations y enter. Evaluated on x directly in float32,
    rows of S x cancel terms of the joint values themselves (~1 rad): a path's cost came out
    with noise ~4e-4 of itself (1e-5 about the mean), far above the relative decrease the solve
    stops at, so rounding accepted or rejected late steps (retargeting runs took ~1.4x the
    iterations)."""
    mean = jnp.mean(x, axis=0)
    y = x - mean
    s = banded_product(lin.coupling, jnp.ones((x.shape[0], 1), x.dtype))[:, 0]  # S 1, (T,)
    sy = banded_product(lin.coupling, y)
    product = sy + s[:, None] * mean
    quadratic = jnp.sum(y * sy, axis=0) + mean * (2 * (s @ y) + mean * jnp.sum(s))
    return lin.coupling_weights * product, 0.5 * jnp.sum(lin.coupling_weights * quadratic)


def banded_matrix_blocks(
    lin: Linearization,
    damping: jax.Array,
    free: jax.Array,
    bandwidth: int,
    schedule: Damping = CHAIN,
) -> tuple[jax.Array, jax.Array]:
    """The damped Gauss-Newton matrix as block-tridiagonal groups of ``bandwidth`` knots.

    Fixed variables (``free`` == 0) get an identity row and column, so their step is zero.
    The coupling's blocks come from its diagonals (O(T b^2), no (T, T) matrix); diagonals
    beyond 2 b - 1 cannot reach a neighbouring group and must be zero (bandwidth of S <= b).

    Returns:
        diagonal groups (G, b n, b n) and subdiagonal groups (G - 1, b n, b n) (rows of group
        g + 1, columns of group g), with G = ceil(T / b).
    """
    t_count, n = lin.gradient.shape
    b = bandwidth
    groups = -(-t_count // b)
    pad = groups * b - t_count
    eye_n = jnp.eye(n, dtype=lin.diagonal.dtype)
    a = jnp.concatenate([lin.diagonal, jnp.broadcast_to(eye_n, (pad, n, n))], 0)
    sub = jnp.concatenate([lin.subdiagonal, jnp.zeros((pad + 1, n, n), a.dtype)], 0)
    # Diagonals padded to (G + 1) b knots: strided slices of them give the groups' entries.
    bands = jnp.pad(lin.coupling[: 2 * b], ((0, 0), (0, pad + b)))
    c = bands.shape[0] - 1
    zeros_g = jnp.zeros((groups,), bands.dtype)

    def entries(k: int, first: int) -> jax.Array:
        """(G,) S[g b + first + k, g b + first] for every group g."""
        if k > c:
            return zeros_g
        return bands[k, first : first + groups * b : b]

    mask = jnp.concatenate([free, jnp.zeros((pad, n), free.dtype)], 0)

    # The damping enters the diagonal by the schedule's rule (Marquardt: scaled by it).
    s_main = bands[0, : groups * b]
    h_diag = jnp.diagonal(a, axis1=1, axis2=2) + s_main[:, None] * lin.coupling_weights
    a = a + schedule.diagonal(h_diag, damping)[:, :, None] * eye_n

    # Block (g, g): S[g b + i, g b + j]; block (g + 1, g): S[(g + 1) b + i, g b + j].
    s_diag = jnp.stack(
        [jnp.stack([entries(abs(i - j), min(i, j)) for j in range(b)], -1) for i in range(b)], -2
    )  # (G, b, b)
    s_sub = jnp.stack(
        [jnp.stack([entries(b + i - j, j)[:-1] for j in range(b)], -1) for i in range(b)], -2
    )  # (G - 1, b, b)
    w = jnp.diag(lin.coupling_weights)
    diag = jnp.einsum("gij,kl->gikjl", s_diag, w)
    lower = jnp.einsum("gij,kl->gikjl", s_sub, w)
    eye_b = np.eye(b, dtype=a.dtype)
    shift = np.eye(b, k=-1, dtype=a.dtype)  # [i, i - 1] = 1: block (t + 1, t) in a group
    a_g = a.reshape(groups, b, n, n)
    sub_g = sub[: groups * b].reshape(groups, b, n, n)
    diag = diag + jnp.einsum("gikl,ij->gikjl", a_g, eye_b)
    within = jnp.einsum("gjkl,ij->gikjl", sub_g, shift)
    diag = diag + within + jnp.swapaxes(jnp.swapaxes(within, 1, 3), 2, 4)
    corner = np.zeros((b, b), a.dtype)
    corner[0, b - 1] = 1.0  # block ((g + 1) b, g b + b - 1) links neighbouring groups
    lower = lower + jnp.einsum("gkl,ij->gikjl", sub_g[:-1, b - 1], corner)

    m = mask.reshape(groups, b * n)
    diag = diag.reshape(groups, b * n, b * n)
    lower = lower.reshape(groups - 1, b * n, b * n)
    diag = diag * m[:, :, None] * m[:, None, :] + jax.vmap(jnp.diag)(1.0 - m)
    lower = lower * m[1:, :, None] * m[:-1, None, :]
    return diag, lower


def solve_block_tridiagonal(diag: jax.Array, lower: jax.Array, rhs: jax.Array) -> jax.Array:
    """Solves a symmetric positive-definite block-tridiagonal system by block Cholesky.

    Args:
        diag: (G, m, m) diagonal blocks.
        lower: (G - 1, m, m) blocks below the diagonal (row block g + 1, column block g).
        rhs: (G, m)

    Returns:
        (G, m)
    """
    tri = jax.lax.linalg.triangular_solve

    def factor(carry, blocks):
        l_prev, y_prev = carry
        d, c, r = blocks
        # M = C L_prev^-T, then L L^T = D - M M^T and L y = r - M y_prev.
        m = tri(l_prev, c, left_side=False, lower=True, transpose_a=True)
        l_now = jnp.linalg.cholesky(d - m @ m.T)
        y = tri(l_now, (r - m @ y_prev)[:, None], left_side=True, lower=True)[:, 0]
        return (l_now, y), (l_now, m, y)

    l0 = jnp.linalg.cholesky(diag[0])
    y0 = tri(l0, rhs[0][:, None], left_side=True, lower=True)[:, 0]
    _, (ls, ms, ys) = jax.lax.scan(factor, (l0, y0), (diag[1:], lower, rhs[1:]))
    ls = jnp.concatenate([l0[None], ls], 0)
    ys = jnp.concatenate([y0[None], ys], 0)

    def back(x_next, blocks):
        l_now, m_next, y = blocks
        x = tri(
            l_now, (y - m_next.T @ x_next)[:, None], left_side=True, lower=True, transpose_a=True
        )
        return x[:, 0], x[:, 0]

    x_last = tri(ls[-1], ys[-1][:, None], left_side=True, lower=True, transpose_a=True)[:, 0]
    _, xs = jax.lax.scan(back, x_last, (ls[:-1], ms, ys[:-1]), reverse=True)
    return jnp.concatenate([xs, x_last[None]], 0)


def solve_chain(
    linearize: Callable[[jax.Array], Linearization],
    x0: jax.Array,
    *,
    free: jax.Array,
    lower: jax.Array,
    upper: jax.Array,
    bandwidth: int,
    max_iterations: int | jax.Array = 100,
    relative_tolerance: float | jax.Array = 1e-6,
    cost_tolerance: float | jax.Array = 0.0,
    satisfied_tolerance: float | jax.Array = 0.0,
    initial_damping: float | jax.Array | None = None,
    schedule: Damping = CHAIN,
) -> ChainResult:
    """Projected Levenberg-Marquardt on a chain problem (call inside jit; vmap over problems).

    Args:
        linearize: x (T, n) -> :class:`Linearization`; the coupling's bandwidth (largest
            |t - s| with S[t, s] != 0) must be at most ``bandwidth`` (and >= 1); it may
            store more diagonals than that if those are zero.
        x0: (T, n) start, inside the bounds.
        free: (T, n) 1 where a variable may move, 0 where it stays at ``x0``.
        lower, upper: (T, n) or broadcastable box bounds, held by projection.
        bandwidth: knots per group of the banded solve (>= 1).
        max_iterations: iteration limit.
        relative_tolerance: stop when an accepted step lowers the cost by less than this
            fraction.
        cost_tolerance: stop when the cost falls below this.
        satisfied_tolerance: stop when an accepted step at which the linearisation reports
            ``satisfied`` lowers the cost by less than this fraction, or a step from such an
            iterate is rejected (0: never early).
        initial_damping: the first step's damping (default ``schedule.initial``).
        schedule: the damping schedule (:mod:`pyroki_ros.solver.damping`).

    Returns:
        ChainResult of the best (lowest-cost) iterate.
    """
    free = jnp.asarray(free, x0.dtype)
    t_count, n = x0.shape
    b = max(1, min(bandwidth, t_count))
    groups = -(-t_count // b)

    def step(lin: Linearization, x: jax.Array, damping: jax.Array) -> jax.Array:
        diag, sub = banded_matrix_blocks(lin, damping, free, b, schedule)
        grad = lin.gradient + _coupling_terms(lin, x)[0]
        rhs = -grad * free
        rhs = jnp.concatenate([rhs, jnp.zeros((groups * b - t_count, n), rhs.dtype)], 0)
        delta = solve_block_tridiagonal(diag, sub, rhs.reshape(groups, b * n))
        delta = delta.reshape(groups * b, n)[:t_count] * free
        return jnp.clip(x + delta, lower, upper)

    # The first iteration only linearises at x0 (no step), so the program holds one copy of
    # the (large) linearisation instead of two: half the compile time.
    lin0 = jax.tree.map(jnp.zeros_like, jax.eval_shape(linearize, x0))
    state0 = {
        "x": x0,
        "lin": lin0,
        "cost": jnp.asarray(jnp.inf, x0.dtype),
        "damping": jnp.asarray(
            schedule.initial if initial_damping is None else initial_damping, x0.dtype
        ),
        "iterations": jnp.asarray(-1, jnp.int32),
        "done": jnp.asarray(False),
        "converged": jnp.asarray(False),
    }

    def body(s):
        first = s["iterations"] < 0
        candidate = jnp.where(first, s["x"], step(s["lin"], s["x"], s["damping"]))
        lin_c = linearize(candidate)
        cost_c = lin_c.cost + _coupling_terms(lin_c, candidate)[1]
        better = first | improves(cost_c, s["cost"])
        decrease = (s["cost"] - cost_c) / jnp.maximum(s["cost"], 1e-30)
        small = jnp.where(lin_c.satisfied, satisfied_tolerance, 0.0)
        # A rejected step from a satisfied iterate: the model has stopped predicting the
        # cost well and what is left to gain is small; stop instead of raising the damping.
        settled = ~better & ~first & s["lin"].satisfied & (satisfied_tolerance > 0)
        converged = (
            (better & ~first & (decrease < jnp.maximum(relative_tolerance, small)))
            | settled
            | (jnp.where(better, cost_c, s["cost"]) <= cost_tolerance)
        )
        pick = lambda new, old: jnp.where(better, new, old)
        iterations = s["iterations"] + 1
        damping = jnp.where(first, s["damping"], schedule.update(s["damping"], better))
        stuck = schedule.stuck(damping)  # no damping gives a decrease: a (constrained) minimum
        return {
            "x": pick(candidate, s["x"]),
            "lin": jax.tree.map(pick, lin_c, s["lin"]),
            "cost": pick(cost_c, s["cost"]),
            "damping": damping,
            "iterations": iterations,
            "done": converged | stuck | (iterations >= max_iterations),
            "converged": converged | stuck,
        }

    out = jax.lax.while_loop(lambda s: ~s["done"], body, state0)
    return ChainResult(**{name: out[name] for name in ("x", "cost", "iterations", "converged")})


def difference_matrix(t_count: int, order: int, *, hold_ends: bool = True) -> np.ndarray:
    """Finite differences of ``order`` over T knots as a dense (rows, T) matrix.

    With ``hold_ends`` the chain is extended by copies of its first and last knot (the
    trajectory rests before and after), so velocity and acceleration terms also pull the
    ends towards rest. Units: per knot step (divide by dt^order for time derivatives).
    Dense, O(T^2): for small T and checks only; the solver uses :func:`smoothing_bands`.
    """
    stencil, knots = _difference_rows(t_count, order, hold_ends)
    d = np.zeros((len(knots[0]), t_count))
    for c, knot in zip(stencil, knots):
        np.add.at(d, (np.arange(len(knot)), knot), c)
    return d


def _difference_rows(t_count: int, order: int, hold_ends: bool) -> tuple[np.ndarray, list]:
    """The rows of :func:`difference_matrix`: the forward difference's coefficients c
    (order + 1,), row r putting c_i on knot r + i of the chain, and per i the knot (rows,)
    each row puts c_i on (with ``hold_ends``, the chain is extended by ``order`` copies of its
    first and last knot, which fold onto them)."""
    stencil = np.array([(-1.0) ** (order - i) * math.comb(order, i) for i in range(order + 1)])
    ghost = order if hold_ends else 0
    rows = np.arange(t_count + 2 * ghost - order)
    return stencil, [np.clip(rows + i - ghost, 0, t_count - 1) for i in range(order + 1)]


def smoothing_bands(
    t_count: int, orders: tuple[int, ...] = (1, 2, 3), *, hold_ends: bool = True
) -> np.ndarray:
    """D_k^T D_k of each finite-difference order k (:func:`difference_matrix`) by diagonals.

    Built in O(T k^2) without any (T, T) matrix: row r of D_k holds the stencil c on the
    (folded) knots u_i = knot(r + i), so it adds c_i c_j to S[u_i, u_j] for every i, j; the
    pairs with u_i <= u_j give every entry on or above the diagonal exactly once.

    Returns:
        (len(orders), max(orders) + 1, T) float64: ``[o, k, t] = S_o[t, t + k]`` (=
        S_o[t + k, t]; zero where t + k >= T), the layout of :attr:`Linearization.coupling`.
    """
    if t_count < 1 or any(k < 1 for k in orders):
        raise ValueError(f"need t_count >= 1 and orders >= 1, got {t_count}, {orders}")
    width = max(orders) + 1
    out = np.zeros((len(orders), width, t_count))
    for o, order in enumerate(orders):
        stencil, knots = _difference_rows(t_count, order, hold_ends)
        for i, c_i in enumerate(stencil):
            for j, c_j in enumerate(stencil):
                upper = knots[i] <= knots[j]
                u, v = knots[i][upper], knots[j][upper]
                np.add.at(out[o], (v - u, u), c_i * c_j)
    return out
