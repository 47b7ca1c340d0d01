"""Small dense linear algebra for many independent systems at once.

On a CPU, LAPACK calls on batches of 7x7 systems cost more than the arithmetic, and a fully
unrolled factorisation becomes dozens of scalar kernels. Gauss-Jordan elimination over the
whole augmented matrix is n fused array updates instead. Batch axes come last, so that the
innermost, contiguous axis is the batch (see kinematics.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

UNROLL_MAX = 16  # above this size the trace grows with n; use LAPACK instead


def solve_spd(a: jax.Array, b: jax.Array) -> jax.Array:
    """Solves ``a x = b`` for symmetric positive-definite ``a`` (no pivoting needed).

    Args:
        a: (n, n, *batch)
        b: (n, *batch)

    Returns:
        x: (n, *batch)
    """
    n = a.shape[0]
    if n > UNROLL_MAX:
        a_first = jnp.moveaxis(a, (0, 1), (-2, -1))
        factor = jax.scipy.linalg.cho_factor(a_first)
        x = jax.scipy.linalg.cho_solve(factor, jnp.moveaxis(b, 0, -1)[..., None])[..., 0]
        return jnp.moveaxis(x, -1, 0)
    augmented = jnp.concatenate([a, b[:, None]], axis=1)  # (n, n + 1, *batch)
    rows = np.arange(n).reshape((n,) + (1,) * (b.ndim - 1))  # numpy: masks become constants
    for k in range(n):
        pivot = augmented[k] / augmented[k, k : k + 1]  # (n + 1, *batch)
        factor = jnp.where(rows == k, 0.0, augmented[:, k])  # (n, *batch)
        augmented = augmented - factor[:, None] * pivot[None]
        augmented = augmented.at[k].set(pivot)
    return augmented[:, n]
