"""Small dense linear algebra for many independent systems at once.

On a CPU, LAPACK calls on batches of 7x7 systems cost more than the arithmetic, and a fully
unrolled factorisation becomes dozens of scalar kernels. Gauss-Jordan elimination over the
whole augmented matrix is n fused array updates instead.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

UNROLL_MAX = 16  # above this size the trace grows with n; use LAPACK instead


def solve_spd(a: jax.Array, b: jax.Array) -> jax.Array:
    """Solves ``a x = b`` for symmetric positive-definite ``a`` (no pivoting needed).

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
    augmented = jnp.concatenate([a, b[..., None]], axis=-1)  # (*batch, n, n + 1)
    rows = jnp.arange(n)
    for k in range(n):
        pivot = augmented[..., k, :] / augmented[..., k, k : k + 1]  # (*batch, n + 1)
        factor = jnp.where(rows == k, 0.0, augmented[..., :, k])  # (*batch, n)
        augmented = augmented - factor[..., :, None] * pivot[..., None, :]
        augmented = jnp.where((rows == k)[:, None], pivot[..., None, :], augmented)
    return augmented[..., :, n]
