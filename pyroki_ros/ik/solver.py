"""IKSolver: checks a call's options and problems, packs them, keeps the compiled programs
(one per objective structure and batch bucket) and runs the stages of a solve: the first
stage, the second (the rest of the iteration budget, within a time budget), or rounds of
restarts with a feasibility check."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import threading
import time
from collections.abc import Callable

import jax
import numpy as np

from pyroki_ros import devices
from pyroki_ros import objectives as obj
from pyroki_ros.ik.lm import (
    _CPU_LANES,
    _FIRST_PASS_RESTARTS,
    _packed_solve,
    _sharded_solve,
    _ShardedProgram,
)
from pyroki_ros.ik.pose import PoseSolver
from pyroki_ros.ik.settings import (
    _FIELDS,
    IKResult,
    _answer_columns,
    _result,
    _Settings,
    bucket,
    checked_settings,
    structure,
)
from pyroki_ros.model.limits import JointLimits
from pyroki_ros.model.robot import Robot


class IKSolver:
    """Solves IK problems for one robot; keeps one compiled program per problem structure.

    Example:
        >>> solver = IKSolver(robot)
        >>> result = solver.solve(objectives.pose("panda_hand", target_wxyz_xyz))
    """

    def __init__(
        self,
        robot: Robot,
        *,
        lanes: int | None = None,
        device: str | None = None,
        parallel_restarts: bool | None = None,
    ):
        self.robot = robot
        try:
            self.device = jax.local_devices(backend=device)[0]  # this process's (jax.distributed)
        except RuntimeError as e:
            raise ValueError(f"device '{device}' is not available here: {e}") from None
        # CPU: a few lanes keep each step's arrays small and cache-resident; GPU: one lane per
        # problem, all in parallel.
        self._max_lanes = lanes or (_CPU_LANES if self.device.platform == "cpu" else 1 << 16)
        # A batch's unsolved problems run their remaining restarts side by side (_solve_all):
        # default on an accelerator, where lanes are plentiful and each loop trip costs a
        # graph launch (docs/benchmarks/gpu.md, "The solver's loop on a GPU"); a CPU's few
        # lanes are better spent on other problems.
        self._parallel = (
            self.device.platform != "cpu" if parallel_restarts is None else parallel_restarts
        )
        # Several local devices of this platform: batches are split over them (devices.py).
        self._mesh = devices.batch_mesh(self.device.platform)
        self._programs: dict = {}
        self._lock = threading.Lock()
        self._settings_cache: dict = {}
        self._derived: dict = {}  # see _per_settings
        self._dtype = np.dtype(robot.dtype)

    def program(self, structure: tuple, size: int):
        """The compiled solver for an objective structure and a batch bucket size (a
        :class:`_ShardedProgram` when a batch is split over several devices: ``size`` then a
        multiple of their count, see :meth:`_solve_rows`)."""
        mesh = self._mesh if size > 1 else None
        lanes = min(self._max_lanes, size // (mesh.size if mesh is not None else 1))
        key = (structure, lanes, mesh is not None)
        program = self._programs.get(key)
        if program is not None:
            return program
        with self._lock:  # one jitted function per key, even under concurrent first calls
            program = self._programs.get(key)
            if program is None:
                program = self._programs[key] = self._compile(structure, lanes, mesh)
        return program

    def _compile(self, structure: tuple, lanes: int, mesh) -> Callable:
        """A new program of :meth:`program`, for the robot pruned to the objectives' links."""
        links = {s[1] for s in structure} | {s[2] for s in structure if s[2]}
        pruned = self.robot.subtree(tuple(sorted(links)))
        if mesh is None:
            pruned = jax.device_put(pruned, self.device)
            fn = functools.partial(_packed_solve, pruned, structure, lanes, parallel=self._parallel)
            return jax.jit(fn)
        # the robot as constants of the program (every device), rows split
        pruned = jax.tree.map(np.asarray, pruned)
        fn = functools.partial(_sharded_solve, pruned, structure, lanes, parallel=self._parallel)
        return _ShardedProgram(devices.over_devices(fn, mesh, (devices.SAME, devices.ROWS)))

    def _solve_rows(self, keys: tuple, packed: np.ndarray, params: np.ndarray) -> np.ndarray:
        """Answer records (count, out width) of the problems ``params`` (count, width) under
        the packed settings ``packed``: the rows padded to the program's (the bucket, a
        multiple of the device count when batches are split over several devices)."""
        count = len(params)
        size = bucket(count)
        size = devices.padded_size(size, self._mesh) if size > 1 else size
        program, params = self.program(keys, size), devices.pad_rows(params, size)
        if isinstance(program, _ShardedProgram):
            return np.asarray(program.program(packed, params))[:count]
        return np.asarray(program(np.concatenate([packed, params.ravel()])))[:count]

    def forget(self, structure: tuple) -> None:
        """Drops the compiled programs of an objective structure (``tuple(structure(o))``
        per objective): their executables are freed once no caller holds them."""
        with self._lock:
            for key in [k for k in self._programs if k[0] == structure]:
                del self._programs[key]

    @property
    def compiled_programs(self) -> int:
        """How many programs this solver has compiled and keeps (one per objective structure,
        lane count and argument signature): a solve that needs no new program leaves it as is."""
        with self._lock:
            programs = list(self._programs.values())
        jitted = [p.program if isinstance(p, _ShardedProgram) else p for p in programs]
        return sum(f._cache_size() if hasattr(f, "_cache_size") else 1 for f in jitted)

    def _cached_settings(self, options: dict) -> _Settings:
        # Options repeat from call to call (a teleop loop, a benchmark): check them once.
        key = tuple((k, tuple(v) if isinstance(v, list | tuple) else v) for k, v in options.items())
        try:
            settings = self._settings_cache.get(key)
        except TypeError:  # numpy arrays and the like (unhashable): no caching
            return self.settings(**options)
        if settings is None:  # get-then-set: safe when several threads share the solver
            if len(self._settings_cache) > 64:
                self._settings_cache.clear()
            settings = self._settings_cache[key] = self.settings(**options)
        return settings

    def _per_settings(self, settings: _Settings, extra, make):
        """``make()``, kept per (settings object, ``extra``): repeated calls with the cached
        settings (a request stream, teleop) skip the work. Keyed on identity, checked against
        the object itself, so a recycled id never returns a stale entry."""
        key = (id(settings), extra)
        entry = self._derived.get(key)
        if entry is None or entry[0] is not settings:
            if len(self._derived) > 128:
                self._derived.clear()
            entry = self._derived[key] = (settings, make())
        return entry[1]

    def _first_stage(self, settings: _Settings, timed: bool) -> _Settings:
        """Settings of a call's first stage: with a rest bias, a short biased stage; with a
        time budget, the attempt from the seed only (the second stage, :meth:`second_stage`,
        gets the rest)."""
        if not (settings.rest_weight > 0 or timed):
            return settings

        # a rest bias alone: two attempts; a time budget: the attempt from the seed only
        cap = min(settings.max_iterations, (1 if timed else 2) * settings.iterations_per_restart)
        make = lambda: dataclasses.replace(settings, max_iterations=cap)
        return self._per_settings(settings, ("first stage", timed), make)

    def packed_first_stage(self, settings: _Settings, timed: bool) -> np.ndarray:
        """The first stage's settings of a single-problem call with ``settings`` (from
        :meth:`settings`; ``timed``: with a time budget), packed in the program's dtype: what
        :class:`PoseSolver` prepares its calls with. Finish such a call with
        :meth:`second_stage`."""
        return self._packed(self._first_stage(settings, timed), 1)

    def _packed(self, settings: _Settings, count: int) -> np.ndarray:
        """``settings`` packed for ``count`` problems. A host array, like every other argument:
        a device array would be a different jit signature (a second compilation)."""
        return self._per_settings(
            settings, ("packed", count), lambda: settings.pack(count, self._dtype)
        )

    def pose_solver(
        self,
        link: str,
        *,
        reference: str | None = None,
        position_weight: float = 1.0,
        orientation_weight: float = obj.POSE_ORIENTATION_WEIGHT,
        **options,
    ) -> PoseSolver:
        """A prepared single-target pose solver for ``link`` (see :class:`PoseSolver`);
        ``options`` as for :meth:`solve`."""
        pose = functools.partial(
            obj.pose,
            link,
            reference=reference,
            position_weight=position_weight,
            orientation_weight=orientation_weight,
        )
        return PoseSolver(self, pose, options)

    def settings(self, **options) -> _Settings:
        """Checks and gathers the per-call options (see :meth:`solve` and
        :func:`~pyroki_ros.ik.settings.checked_settings`)."""
        return checked_settings(self.robot, self._dtype, **options)

    def solve(
        self,
        objectives,
        seed=None,
        *,
        limits: JointLimits | None = None,
        feasible: Callable[[np.ndarray], np.ndarray] | None = None,
        timeout: float = 0.0,
        **options,
    ) -> IKResult:
        """Solves every problem in the batch.

        Args:
            objectives: one :class:`~pyroki_ros.objectives.Objective` or a sequence of them,
                all broadcastable to a common batch shape ``(*batch,)``.
            seed: (*batch, n_joints) or (n_joints,) start configuration; default the middle
                of the limits. Also the value of inactive joints.
            **options: active_joints (names; the others stay at the seed), max_deviation
                (solve-nearby: each joint within this of the seed), rest and rest_weight
                (a w |q - rest|^2 term that biases redundant robots towards ``rest``; problems
                it keeps from the tolerance are finished without it), position_tolerance
                (m, default 1e-3),
                orientation_tolerance (rad, default 1 degree), iterations_per_restart
                (default 15), max_iterations (per problem over all restarts, default 1000).
            timeout: wall-clock budget in s (0 = none). The first attempt from the seed always
                runs; the restarts of the problems it leaves unsolved then get the iterations
                that fit in the time left (estimated from the first attempt's cost per
                iteration), so a call ends near ``timeout`` unless one attempt alone is longer.
                ``IKResult.timed_out`` says whether the budget cut the restarts short.
            limits: joint limits of this solve (``robot.limits.narrowed(lower, upper)``: a
                narrower box, or a bound turned off with -inf / +inf); default the robot's.
                They travel as arrays into the compiled program: no recompile. Seeds are put
                into them, restart points drawn inside them (a bound turned off: up to the
                URDF's), answers lie inside them.
            feasible: a batched check of answers, (N, n_joints) float64 -> (N,) bool, applied on
                the host to every answer that meets the objectives; one that fails it does not
                end the search: the solve goes on in rounds of fresh restarts until a feasible
                answer is found or the iterations (or ``timeout``) run out. ``success`` then
                means "meets the objectives and is feasible".

        Returns:
            IKResult with numpy arrays of batch shape ``(*batch,)``.

        Raises:
            ValueError: unknown links or joints, NaN/inf targets or seeds, wrong shapes,
                negative max_deviation, an empty batch, limits that are not inside the URDF's
                or empty, a ``feasible`` that does not return (N,) values.
        """
        robot = self.robot
        objectives = (objectives,) if isinstance(objectives, obj.Objective) else tuple(objectives)
        obj.validate(robot, objectives, check_values=False)  # values: checked once packed
        if limits is not None:
            options = {**options, "limits": limits}
        settings = self._cached_settings(options)
        n = robot.n_joints
        if seed is None:
            seed = settings.center
        else:
            seed = np.asarray(seed, np.float64)
            if seed.ndim == 0 or seed.shape[-1] != n:
                raise ValueError(f"seed must have shape (*batch, {n}), got {seed.shape}")
            seed = settings.limits.clip(seed)  # NaN survives: checked below
        shapes = {seed.shape[:-1]} | {o.batch_shape for o in objectives}
        try:
            batch = shapes.pop() if len(shapes) == 1 else np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(
                "objectives and seed have batch shapes that do not broadcast: "
                f"{[o.batch_shape for o in objectives]} and {seed.shape[:-1]}"
            ) from None
        count = math.prod(batch)
        if count == 0:
            raise ValueError("empty batch: nothing to solve")

        columns = [seed] + [getattr(o, name) for o in objectives for name in _FIELDS]
        if batch != ():
            columns = [
                np.broadcast_to(c, (*batch, c.shape[-1])).reshape(count, -1) for c in columns
            ]
        params = np.concatenate(columns, axis=-1, dtype=self._dtype).reshape(count, -1)
        if not np.isfinite(params).all():
            what = "the seed" if not np.isfinite(params[:, :n]).all() else "an objective"
            raise ValueError(f"{what} contains NaN or infinite values")
        keys = tuple(structure(o) for o in objectives)
        columns = _answer_columns(n, len(objectives))
        start = time.perf_counter()
        if feasible is None:
            out, timed_out = self._staged(params, settings, keys, start, timeout)
        else:
            out, timed_out = self._rounds(params, settings, keys, start, timeout, feasible)
        return _result(out, columns, batch, time.perf_counter() - start, timed_out)

    def _staged(
        self, params: np.ndarray, settings: _Settings, keys: tuple, start: float, timeout: float
    ) -> tuple[np.ndarray, bool]:
        """Solves the problems ``params`` (count, width): the first stage, then the second
        (see :meth:`second_stage`). Returns the answer records (count, out width) and whether
        the time budget cut the restarts short."""
        first = self._first_stage(settings, timeout > 0)
        out = self._solve_rows(keys, self._packed(first, len(params)), params)
        return self.second_stage(out, params, settings, keys, start, timeout)

    def _rounds(
        self, params, settings: _Settings, keys: tuple, start: float, timeout: float, feasible
    ) -> tuple[np.ndarray, bool]:
        """:meth:`_staged` with a feasibility check: rounds of ``_FIRST_PASS_RESTARTS`` attempts,
        each round's restarts numbered after the last one's (fresh restart points), over the
        problems without a feasible converged answer yet, until the iteration budget or the
        time runs out. Keeps the first feasible converged answer per problem, else the one of
        lowest cost (reported unsuccessful)."""
        n = self.robot.n_joints
        columns = _answer_columns(n, len(keys))
        success, cost, iterations = (columns[k].start for k in ("success", "cost", "iterations"))
        out = np.zeros((len(params), columns["cost"].stop), np.float64)
        out[:, cost] = np.inf
        todo = np.arange(len(params))
        per_round = _FIRST_PASS_RESTARTS * settings.iterations_per_restart
        timed_out = False
        for round_index in itertools.count():
            budget = min(per_round, settings.max_iterations - round_index * per_round)
            left = timeout - (time.perf_counter() - start)
            if budget <= 0 or not len(todo) or (timeout > 0 and round_index and left <= 0):
                return out, timed_out or (bool(len(todo)) and budget > 0)
            stage = dataclasses.replace(
                settings, max_iterations=budget, first_restart=round_index * _FIRST_PASS_RESTARTS
            )
            time_left = max(left, 1e-9) if timeout > 0 else 0.0
            records, cut = self._staged(params[todo], stage, keys, time.perf_counter(), time_left)
            records = np.asarray(records, np.float64)
            converged = records[:, success] > 0.5
            ok = np.zeros(len(todo), bool)
            if converged.any():
                checked = np.asarray(feasible(records[converged, :n].copy()))
                if checked.shape != (int(converged.sum()),):
                    raise ValueError(
                        f"feasible must return ({int(converged.sum())},) values for "
                        f"({int(converged.sum())}, {n}) configurations, got {checked.shape}"
                    )
                ok[converged] = checked.astype(bool)
            records[~ok, success] = 0.0  # an infeasible answer is no success
            records[:, iterations] += out[todo, iterations]
            better = ok | (records[:, cost] < out[todo, cost])
            out[todo[better]] = records[better]
            out[todo, iterations] = records[:, iterations]
            todo = todo[~ok]
            timed_out = cut

    def second_stage(
        self, out, params, settings: _Settings, keys: tuple, start: float, timeout: float
    ) -> tuple[np.ndarray, bool]:
        """The second stage of a call, after the first (:meth:`_first_stage`) answered ``out``
        (count, out width) for the problems ``params`` (count, width; a :class:`PoseSolver`'s
        input row); ``start``: perf_counter at the first stage's start. The problems it left
        unsolved get the rest of their iteration budget, as much of it as fits in what is left
        of ``timeout`` (estimated from the first stage's cost per iteration), without the rest
        term (it pulls the optimum off the task by ~ w |q - rest| / sigma^2), starting from
        where they are unless a max_deviation box (centred on the seed) holds them. Keeps the
        better answer per problem. Returns the answer records and whether the time budget cut
        the restarts short."""
        columns = _answer_columns(self.robot.n_joints, len(keys))
        success, cost, iterations = (columns[k].start for k in ("success", "cost", "iterations"))
        failed = np.flatnonzero(out[:, success] < 0.5)
        budget = settings.max_iterations - self._first_stage(settings, timeout > 0).max_iterations
        timed_out = False
        if len(failed) and budget > 0 and timeout > 0:
            elapsed = time.perf_counter() - start
            per_iteration = elapsed / max(float(out[:, iterations].sum()), 1.0)
            affordable = int((timeout - elapsed) / per_iteration / len(failed))
            timed_out = affordable < budget
            budget = min(budget, affordable)
        if not (len(failed) and budget > 0):
            return out, timed_out
        n = self.robot.n_joints
        again = params[failed]
        stage = dataclasses.replace(settings, rest_weight=0.0, max_iterations=budget)
        if not np.isfinite(settings.max_deviation).any():
            again[:, :n] = out[failed, :n]
            stage = dataclasses.replace(stage, first_restart=0)  # 0: go on from the answer
        later = self._solve_rows(keys, stage.pack(len(failed), self._dtype), again)
        out = out.copy()
        total = later[:, iterations] + out[failed, iterations]
        # The first stage's cost includes the rest term: an unbiased answer replaces it.
        better = (later[:, success] > 0.5) | (later[:, cost] <= out[failed, cost])
        better |= settings.rest_weight > 0
        out[failed] = np.where(better[:, None], later, out[failed])
        out[failed, iterations] = total
        return out, timed_out
