"""Inverse kinematics: Levenberg-Marquardt with restarts, hard joint limits and a work queue.

Compilation happens once per (robot, objective kinds/links, batch bucket); new target values,
seeds, tolerances, active joints, deviation bounds or joint limits reuse the compiled program.

Modules:

* :mod:`~pyroki_ros.ik.lm`: the fast path, the jitted LM loop and restart queue (lanes last).
* :mod:`~pyroki_ros.ik.settings`: per-call settings and their packing, answer columns, buckets.
* :mod:`~pyroki_ros.ik.solver`: :class:`IKSolver`, the public entry point.
* :mod:`~pyroki_ros.ik.pose`: :class:`PoseSolver`, single pose targets at low overhead.
"""

from pyroki_ros.ik.pose import PoseSolver, enable_compilation_cache, residual_and_jacobian
from pyroki_ros.ik.settings import (
    BUCKETS,
    DEFAULT_ITERATIONS_PER_RESTART,
    DEFAULT_ORIENTATION_TOLERANCE,
    DEFAULT_POSITION_TOLERANCE,
    IKResult,
    bucket,
    structure,
)
from pyroki_ros.ik.solver import IKSolver

__all__ = [
    "BUCKETS",
    "DEFAULT_ITERATIONS_PER_RESTART",
    "DEFAULT_ORIENTATION_TOLERANCE",
    "DEFAULT_POSITION_TOLERANCE",
    "IKResult",
    "IKSolver",
    "PoseSolver",
    "bucket",
    "enable_compilation_cache",
    "residual_and_jacobian",
    "structure",
]
