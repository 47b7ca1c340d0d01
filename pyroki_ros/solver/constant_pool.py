"""Array constants of a traced function gathered into a few buffers.

XLA:CPU sets up every array constant of a program on each call (one aligned allocation,
about 0.13 us here); the IK solver's loop has dozens of small ones (the robot's per-link
arrays, index and mask tables), a noticeable share of a 0.1 ms solve. Here a function's
constants are packed into buffers of one dtype each, at most 512 bytes (above that,
XLA:CPU runs a program's kernels on its thread pool, which costs far more), behind an
optimization barrier so that XLA does not fold the slices back into separate constants;
the slices then fuse into the kernels that use them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

_POOL_BYTES = 512  # XLA:CPU's limit for running a program's kernels in sequence


def pooled_constants(fn: Callable) -> Callable:
    """``fn`` with its array constants read from pooled buffers (same results)."""

    @functools.wraps(fn)
    def wrapped(*args):
        flat_args, in_tree = jax.tree.flatten(args)
        closed, out_shape = jax.make_jaxpr(
            lambda *flat: fn(*jax.tree.unflatten(in_tree, flat)), return_shape=True
        )(*flat_args)
        consts = _unpooled(list(closed.consts))
        out = jax.core.eval_jaxpr(closed.jaxpr, consts, *flat_args)
        return jax.tree.unflatten(jax.tree.structure(out_shape), out)

    return wrapped


def _unpooled(consts: list) -> list:
    """The constants, the small ones as slices of barrier-held pools."""
    groups: dict[np.dtype, list[int]] = {}
    arrays: dict[int, np.ndarray] = {}
    for i, c in enumerate(consts):
        if isinstance(c, jax.core.Tracer):
            continue
        a = np.asarray(c)
        if a.ndim == 0 or a.nbytes > _POOL_BYTES:
            continue
        arrays[i] = a
        groups.setdefault(a.dtype, []).append(i)
    chunks: list[list[int]] = []
    for members in groups.values():
        chunk, size = [], 0
        for i in members:
            if size + arrays[i].nbytes > _POOL_BYTES:
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(i)
            size += arrays[i].nbytes
        chunks.append(chunk)
    chunks = [c for c in chunks if len(c) > 1]
    pools = jax.lax.optimization_barrier(
        tuple(jnp.asarray(np.concatenate([arrays[i].ravel() for i in c])) for c in chunks)
    )
    out = list(consts)
    for chunk, pool in zip(chunks, pools):
        start = 0
        for i in chunk:
            a = arrays[i]
            out[i] = pool[start : start + a.size].reshape(a.shape)
            start += a.size
    return out
