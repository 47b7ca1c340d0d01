"""Peak-memory estimates of trajectory optimisation, for refusing a request before any
work (:func:`trajectory_memory_bytes`; retargeting: :func:`pyroki_ros.planning.retarget.
retarget_memory_bytes`)."""

from __future__ import annotations

# Fixed part of trajectory_memory_bytes: compiling the programs (path, IK start) and the
# chunk buffers of the collision terms (COLLISION_CHUNK configurations at a time). Measured
# as peak RSS growth minus the program's buffers: ~220 MB without collision spheres, ~370 MB
# with the Panda's 48.
MEMORY_FIXED_BYTES = 384 << 20


def trajectory_memory_bytes(
    steps: int, n_joints: int, n_links: int, *, starts: int = 1, jerk: bool = False
) -> int:
    """Estimated peak memory (bytes) of optimising a path of ``steps`` knots of ``n_joints``
    joints with ``n_links`` objectives / keypoint links (or link-to-link vectors), ``starts``
    start paths at once (a plan on a GPU: 8; on a CPU: 1), in float32, including compiling
    its program. For a refusal before the work: nothing is allocated.

    ``MEMORY_FIXED_BYTES + starts * steps * 4 * ((8 + 6 b) n^2 + 16 n + 64 K)``, with
    b = 3 with a jerk weight, else 2 (knots per group of the banded solve):

    * (8 + 6 b) n^2 per knot: the Gauss-Newton blocks, (n, n) per knot and its neighbour,
      of the linearisation (twice: the iterate and the candidate), and b n^2 per knot for
      each of the grouped blocks, their Cholesky factors and the intermediate products;
    * 16 n: the path, its bounds, gradient, step and collision rows per configuration;
    * 64 K: per link and knot, its target and weights and their residual rows (and the host's
      float64 keypoints).

    All of it is linear in T: the smoothness matrix is kept by its (b + 1, T) diagonals and
    long paths evaluate collisions in chunks (no (T, T) matrix, which took 1.6 GB at 20,000
    steps). Against XLA's buffer plan of the retarget program (22,141 knots, Panda n = 8 and
    UR5 n = 6, K = 1 and 10, with and without spheres): 63-123 MB of buffers, 71-160 MB by
    the per-knot term; a whole 20,000-step Panda retarget in a fresh process grew its peak
    RSS by 471 MB, estimated 512 MB.
    """
    for name, value in (("steps", steps), ("n_joints", n_joints), ("n_links", n_links)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    if starts < 1:
        raise ValueError(f"starts must be >= 1, got {starts}")
    b = 3 if jerk else 2
    per_knot = 4 * ((8 + 6 * b) * n_joints**2 + 16 * n_joints + 64 * n_links)
    return MEMORY_FIXED_BYTES + int(starts) * int(steps) * per_knot
