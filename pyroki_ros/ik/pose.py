"""PoseSolver, the low-overhead path for a stream of single pose targets, and small helpers
(the persistent compilation cache, residual and Jacobian of objectives)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from pyroki_ros import objectives as obj
from pyroki_ros.ik.settings import _FIELDS, _answer_columns, _one_result, _Settings, structure
from pyroki_ros.model.robot import Robot

if TYPE_CHECKING:
    from pyroki_ros.ik.settings import IKResult
    from pyroki_ros.ik.solver import IKSolver


class PoseSolver:
    """A prepared pose problem for one link: the low-overhead path for a stream of single
    targets (teleoperation, benchmarks). Everything but the target and the seed is checked
    and packed once, so a call is one small array copy and one compiled program call.

    Create with :meth:`IKSolver.pose_solver`.
    """

    def __init__(self, solver: IKSolver, pose: Callable[..., obj.Objective], options: dict):
        """``pose``: target (*batch, 7) -> the pose objective; ``options`` as for
        :meth:`IKSolver.solve`."""
        self._pose = pose
        template = pose(np.array([1.0, 0, 0, 0, 0, 0, 0]))
        obj.validate(solver.robot, (template,))
        self._solver = solver
        self._options = options
        settings = self._settings = solver.settings(**options)
        n = self._n = solver.robot.n_joints
        self._seed = slice(_Settings.size(n), _Settings.size(n) + n)
        self._target = slice(self._seed.stop, self._seed.stop + 7)
        # The program's flat input is [first stage's settings, seed, the template's fields],
        # for a call without and with a time budget (see IKSolver.solve()): the seed (default:
        # the middle of the limits) and the target are filled in per call.
        row = [settings.center, *(getattr(template, name) for name in _FIELDS)]
        self._inputs = {}
        for timed in (False, True):
            packed = solver.packed_first_stage(settings, timed)
            self._inputs[timed] = np.concatenate([packed, *row], dtype=packed.dtype)
        self._structure = (structure(template),)
        self._program = solver.program(self._structure, 1)
        self._columns = _answer_columns(n, 1)

    def __call__(self, target, seed=None, *, timeout: float = 0.0) -> IKResult:
        """Solves for ``target`` (7,) wxyz_xyz, from ``seed`` (n_joints,) (default: center),
        within ``timeout`` s (0 = none; as for :meth:`IKSolver.solve`).

        A batch of targets (*batch, 7) goes through :meth:`IKSolver.solve` instead.

        Raises:
            ValueError: NaN or infinite values, a zero quaternion.
        """
        shape = getattr(target, "shape", None) or np.shape(target)  # an array's is cheaper
        if shape != (7,) or (seed is not None and np.shape(seed) != (self._n,)):
            return self._solver.solve(
                self._pose(target), seed=seed, timeout=timeout, **self._options
            )
        # Straight into the program's input: it normalises the quaternion, puts the seed
        # into the limits and flags NaN (checked below, off the path of a solved target).
        packed = self._inputs[timeout > 0].copy()
        packed[self._target] = target
        if seed is not None:
            packed[self._seed] = seed
        start = time.perf_counter()
        out = np.asarray(self._program(packed))
        timed_out = False
        # Not solved (restarts left, a rest bias, or invalid input): the second stage's turn.
        if out[0, self._columns["success"].start] < 0.5:
            self._check(packed)
            row = packed[self._seed.start :].reshape(1, -1)
            out, timed_out = self._solver.second_stage(
                out, row, self._settings, self._structure, start, timeout
            )
        return _one_result(out[0], self._columns, time.perf_counter() - start, timed_out)

    def _check(self, packed: np.ndarray) -> None:
        problem = packed[self._seed.start : self._target.stop]
        if not np.isfinite(problem).all():
            raise ValueError("target or seed contain NaN or infinite values")
        if not np.linalg.norm(problem[self._n : self._n + 4]) > 1e-9:
            raise ValueError("target quaternion is zero")


def enable_compilation_cache(directory: str | os.PathLike | None = None) -> Path:
    """Keeps compiled programs on disk (JAX's persistent cache), so that a new process
    reuses them instead of compiling again. Default: ``$XDG_CACHE_HOME/pyroki_ros/xla``."""
    if directory is None:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        directory = Path(base) / "pyroki_ros" / "xla"
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return directory


def residual_and_jacobian(robot: Robot, objectives, q) -> obj.Evaluation:
    """Weighted residual (*batch, m), its Jacobian (*batch, m, n), per-objective errors."""
    objectives = (objectives,) if isinstance(objectives, obj.Objective) else tuple(objectives)
    obj.validate(robot, objectives)
    return obj.evaluate(robot, q, objectives)
