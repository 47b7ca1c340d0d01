"""A batch spread over every local device of a platform (``jax.sharding``).

With one device (the usual case) none of this is used: :func:`batch_mesh` is None and the
solvers call their programs as before. With several (a multi-GPU host, or a CPU run with
``XLA_FLAGS=--xla_force_host_platform_device_count=N``) a batch of independent problems is
padded to a multiple of the device count, split along its first axis over a 1-D mesh, and
every device runs the same program on its share (``shard_map``): no communication during the
solve, and each device's loops stop on their own instead of waiting for the slowest problem
of the whole batch.

Across hosts (``jax.distributed.initialize()``), ``jax.local_devices()`` are this process's
devices: each process spreads its own batch over them (see the README's GPU section).
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, PartitionSpec

AXIS = "batch"  # the mesh's one axis: problems
ROWS = PartitionSpec(AXIS)  # split along the first axis
SAME = PartitionSpec()  # a full copy on every device


def device_count(platform: str | None = None) -> int:
    """Number of local devices a batch is spread over (1: no sharding)."""
    return len(jax.local_devices(backend=platform))


@functools.cache
def batch_mesh(platform: str | None = None) -> Mesh | None:
    """A 1-D mesh (axis ``"batch"``) over the local devices of ``platform``; None with one
    device, so that callers keep their plain single-device path."""
    devices = jax.local_devices(backend=platform)
    if len(devices) < 2:
        return None
    return Mesh(np.array(devices), (AXIS,))


def padded_size(n: int, mesh: Mesh | None) -> int:
    """``n`` rounded up to a multiple of the mesh's device count (``n`` without a mesh)."""
    return n if mesh is None else math.ceil(n / mesh.size) * mesh.size


def pad_rows(tree: Any, size: int) -> Any:
    """Every array leaf (n, ...) of ``tree`` grown to (size, ...) with copies of its last
    row (numpy, on the host): padding problems that solve like a real one, then dropped."""

    def pad(x):
        x = np.asarray(x)
        if len(x) >= size:  # no copy: a full bucket is the common batch
            return x
        return np.pad(x, [(0, size - len(x))] + [(0, 0)] * (x.ndim - 1), mode="edge")

    return jax.tree.map(pad, tree)


def over_devices(fn: Callable, mesh: Mesh, in_specs: Any | Callable[..., Any]) -> Callable:
    """``fn`` jitted to run once per device on its share of the batch (``shard_map``).

    ``in_specs``: per argument ``ROWS`` (split along the first axis) or ``SAME`` (copied), as
    a pytree prefix of the arguments, or a function of the arguments returning one (called
    when tracing: for arguments whose pytree structure varies between calls). ``fn`` sees
    (n / devices, ...) rows and must not mix rows: each device's answers may only depend on
    its own rows. The outputs are ``jax.Array`` split the same way (``ROWS``).
    """
    # check_vma off: the solvers' loop carries start from constants (the same on every
    # device) and then take device-specific values, which the varying-axis check rejects;
    # the bodies never communicate, so there is nothing for it to check.
    split = functools.partial(jax.shard_map, mesh=mesh, out_specs=ROWS, check_vma=False)
    specs = in_specs if callable(in_specs) else lambda *args: in_specs

    def run(*args):
        return split(fn, in_specs=specs(*args))(*args)

    return jax.jit(run)


# One sharded wrapper per (program, mesh, specs), dropped with the program: a caller's cache
# that evicts a program frees its wrapper too (the wrapper holds the program only weakly).
_WRAPPED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def over_devices_cached(fn: Callable, mesh: Mesh, in_specs: Callable[..., Any]) -> Callable:
    """:func:`over_devices` of ``fn``, made once per (``fn``, mesh, specs) and kept while
    ``fn`` lives (for callers that keep ``fn`` in a cache of their own)."""
    per_fn = _WRAPPED.setdefault(fn, {})
    if (mesh, in_specs) not in per_fn:
        ref = weakref.ref(fn)
        per_fn[mesh, in_specs] = over_devices(lambda *a: ref()(*a), mesh, in_specs)
    return per_fn[mesh, in_specs]
