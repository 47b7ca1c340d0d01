"""Experimental forward-kinematics variants, for ``bench/fk_benchmark.py --jax-fk``.

Measurement aids only: nothing in the package imports this module. Each function has the
signature of :func:`pyroki_ros.forward_kinematics` and returns the same poses.

Example::

    python3 bench/fk_benchmark.py --jax-fk bench/fk_variants.py:forward_kinematics_chunked
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jaxlie

from pyroki_ros import Robot, forward_kinematics

CHUNK = 1024


def forward_kinematics_chunked(robot: Robot, q: jax.Array, chunk: int = CHUNK) -> jaxlie.SE3:
    """``forward_kinematics`` over chunks of ``chunk`` configurations (``jax.lax.map``).

    Each chunk's intermediates (13 links x 7 components x 1024 configurations x 4 bytes,
    about 0.4 MB per stage for the Panda) stay in the CPU caches; one pass over a batch of
    100,000 streams every stage through main memory instead. Batches of at most ``chunk``
    configurations take the plain path.
    """
    q = jnp.asarray(q, robot.dtype)
    batch = q.shape[:-1]
    flat = q.reshape(-1, q.shape[-1])
    if flat.shape[0] <= chunk:
        return forward_kinematics(robot, q)
    poses = jax.lax.map(lambda x: forward_kinematics(robot, x).wxyz_xyz, flat, batch_size=chunk)
    return jaxlie.SE3(poses.reshape(*batch, robot.n_links, 7))
