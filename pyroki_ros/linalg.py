"""Small dense linear algebra for many independent systems at once.

On a CPU, LAPACK calls on batches of 7x7 systems cost more than the arithmetic: an unrolled
Cholesky over the batch axis becomes a handful of fused element-wise kernels instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

UNROLL_MAX = 12  # above this size the trace grows as n^3; use LAPACK instead


def solve_spd(a: jax.Array, b: jax.Array) -> jax.Array:
    """Solves ``a x = b`` for symmetric positive-definite ``a``.

    Args:
        a: (*batch, n, n)
        b: (*batch, n)

    Returns:
        x: (*batch, n)
    """
    n = a.shape[-1]
    if n > UNROLL_MAX:
        factor = jax.scipy.linalg.cho_factor(a)
        return jax.scipy.linalg.cho_solve(factor, b[..., None])[..., 0]
    # Cholesky a = L L^T, columns of L kept as lists of (*batch,) arrays.
    low = [[None] * n for _ in range(n)]
    for j in range(n):
        diag = a[..., j, j] - sum((low[j][k] ** 2 for k in range(j)), jnp.zeros_like(a[..., 0, 0]))
        ljj = jnp.sqrt(jnp.maximum(diag, 1e-12))
        low[j][j] = ljj
        inv = 1.0 / ljj
        for i in range(j + 1, n):
            s = a[..., i, j] - sum((low[i][k] * low[j][k] for k in range(j)), jnp.zeros_like(ljj))
            low[i][j] = s * inv
    # Forward then backward substitution.
    y = [None] * n
    for i in range(n):
        s = b[..., i] - sum((low[i][k] * y[k] for k in range(i)), jnp.zeros_like(b[..., 0]))
        y[i] = s / low[i][i]
    x = [None] * n
    for i in reversed(range(n)):
        s = y[i] - sum((low[k][i] * x[k] for k in range(i + 1, n)), jnp.zeros_like(b[..., 0]))
        x[i] = s / low[i][i]
    return jnp.stack(x, axis=-1)
