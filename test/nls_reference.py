"""Dense references for the banded Levenberg-Marquardt engine (nls.py), numpy only: shared by
test_trajopt.py and test_trajopt_banded.py."""

from __future__ import annotations

import numpy as np


def dense_hessian(diag, sub, coupling, weights, damping, free) -> np.ndarray:
    """The damped Gauss-Newton matrix (T n, T n) from its blocks and a dense (T, T) coupling,
    with fixed variables (``free`` False) as identity rows."""
    t_count, n = free.shape
    h = np.zeros((t_count * n, t_count * n))
    for t in range(t_count):
        h[t * n : (t + 1) * n, t * n : (t + 1) * n] += diag[t]
    for t in range(t_count - 1):
        h[(t + 1) * n : (t + 2) * n, t * n : (t + 1) * n] += sub[t]
        h[t * n : (t + 1) * n, (t + 1) * n : (t + 2) * n] += sub[t].T
    h += np.kron(coupling, np.diag(weights))
    h += np.diag(damping * (np.diag(h) + 1e-9))
    m = free.reshape(-1)
    return h * m[:, None] * m[None, :] + np.diag(1 - m)
