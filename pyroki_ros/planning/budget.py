"""A plan's wall-clock budget: how much time is left, and how many LM iterations fit in it.

An optimisation costs a fixed part (its linearisation at the start path, its dense success
check, the host's work) plus a part per LM iteration: 11-19 ms and 4-7 ms per
MotionBenchMaker family (docs/benchmarks/plan_profile.md), both fitted here to the last
optimisations of the same program (:class:`PaceLog`). Counting only a per-iteration pace,
failing plans started optimisations with no time left and answered 10-28 ms past 0.3-2 s
budgets; with the fixed part, -3 to +2 ms in the median (docs/benchmarks/plan_overrun*.md).

Compiling a program cannot be cut short, so a budget does not count it: JAX reports every
compile's tracing, lowering and XLA compile (``jax.monitoring`` duration events), summed here
per thread (:func:`compile_seconds`) and taken off the budget's clock. Every compile a plan
meets counts the same (the goal search's IK and clearance programs as well as the trajectory
optimiser's), and a compile on another thread (the node's IK compile thread) does not.
"""

from __future__ import annotations

import collections
import dataclasses
import math
import threading
import time
from collections.abc import Hashable
from typing import TYPE_CHECKING

import jax
import numpy as np

if TYPE_CHECKING:
    from pyroki_ros.collision import World
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer

COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
_compile_seconds: collections.defaultdict[int, float] = collections.defaultdict(float)


def _on_event(event: str, duration: float, **_) -> None:
    if event in COMPILE_EVENTS:  # reported on the thread that compiles
        _compile_seconds[threading.get_ident()] += duration


jax.monitoring.register_event_duration_secs_listener(_on_event)


def compile_seconds(*, all_threads: bool = False) -> float:
    """Seconds JAX has spent compiling on this thread so far (``all_threads``: in this
    process)."""
    if all_threads:
        return sum(list(_compile_seconds.values()))
    return _compile_seconds.get(threading.get_ident(), 0.0)


class CompileFreeClock:
    """Wall seconds since it was made, less this thread's compile time meanwhile."""

    def __init__(self, start: float | None = None):
        self.start = time.perf_counter() if start is None else start
        self.compiled = compile_seconds()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start - (compile_seconds() - self.compiled)


@dataclasses.dataclass(frozen=True)
class Pace:
    """An optimisation's wall time: ``fixed + per_iteration * iterations`` seconds."""

    fixed: float
    per_iteration: float

    def seconds(self, iterations: int) -> float:
        return self.fixed + self.per_iteration * iterations

    def iterations_within(self, seconds: float) -> int:
        """The iterations that fit in ``seconds`` (< 1 when not even one does)."""
        return int((seconds - self.fixed) // self.per_iteration)


class PaceLog:
    """The wall time and iteration count of the last :data:`HISTORY` optimisations of each
    program (a key: knots and obstacle buckets) that compiled nothing, fitted to a
    :class:`Pace` by least squares and scaled to the last call's time (this machine's speed
    drifts by tens of percent within minutes); with one iteration count only (or a fit that
    is not a cost), all of the last call's time per iteration."""

    HISTORY = 16

    def __init__(self):
        self._calls: dict[Hashable, collections.deque] = {}

    def record(self, key: Hashable, iterations: int, seconds: float) -> None:
        if iterations > 0:
            calls = self._calls.setdefault(key, collections.deque(maxlen=self.HISTORY))
            calls.append((float(iterations), float(seconds)))

    def get(self, key: Hashable) -> Pace | None:
        """The pace of ``key``'s optimisations (None before the first one is recorded)."""
        calls = tuple(self._calls.get(key, ()))  # a copy: another thread may record meanwhile
        if not calls:
            return None
        n, s = (np.asarray(v) for v in zip(*calls))
        last = Pace(0.0, s[-1] / n[-1])
        if np.ptp(n) == 0:
            return last
        per, fixed = np.polyfit(n, s, 1)
        if not (per > 0 and fixed >= 0):
            return last
        scale = s[-1] / (fixed + per * n[-1])
        return Pace(float(fixed * scale), float(per * scale))


class PlanBudget:
    """A plan's wall-clock budget (``timeout`` s; 0 = none), compiles not counted. An
    optimisation among ``world`` gets the iterations that fit in the time left at the
    measured pace (:meth:`TrajectoryOptimizer.pace`)."""

    def __init__(
        self, planner: TrajectoryOptimizer, timeout: float, clock: float, world: World | None
    ):
        self.planner, self.timeout, self.world = planner, timeout, world
        self.clock = CompileFreeClock(clock)

    def left(self) -> float:
        """Seconds left (inf without a budget)."""
        if self.timeout <= 0:
            return math.inf
        return self.timeout - self.clock.elapsed()

    def iterations(self, t_count: int, planned: int) -> int:
        """At most ``planned``, at least 1 LM iterations for an optimisation of T knots."""
        pace = self.planner.pace(t_count, self.world)
        left = self.left()
        if pace is None or not math.isfinite(left):
            return planned
        return max(1, min(planned, pace.iterations_within(left)))

    def seconds(self, t_count: int, iterations: int) -> float:
        """Seconds an optimisation of T knots with ``iterations`` takes (0 while unknown)."""
        pace = self.planner.pace(t_count, self.world)
        return 0.0 if pace is None else pace.seconds(iterations)

    def affords(self, t_count: int, iterations: int = 1) -> bool:
        """Whether an optimisation of T knots with ``iterations`` fits in the time left (while
        the pace is unknown: whether any time is left)."""
        return self.left() > self.seconds(t_count, iterations)
