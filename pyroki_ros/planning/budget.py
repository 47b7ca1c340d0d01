"""A plan's wall-clock budget: how much time is left, and how many LM iterations fit in it.

Compiling a program cannot be cut short, so a budget does not count it: JAX reports every
compile's tracing, lowering and XLA compile (``jax.monitoring`` duration events), summed here
per thread (:func:`compile_seconds`) and taken off the budget's clock. Every compile a plan
meets counts the same (the goal search's IK and clearance programs as well as the trajectory
optimiser's), and a compile on another thread (the node's IK compile thread) does not.
"""

from __future__ import annotations

import collections
import math
import threading
import time
from typing import TYPE_CHECKING

import jax

if TYPE_CHECKING:
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


class PlanBudget:
    """A plan's wall-clock budget (``timeout`` s; 0 = none), compiles not counted. An
    optimisation gets the iterations that fit in the time left, at the last measured pace
    (:attr:`TrajectoryOptimizer.seconds_per_iteration`)."""

    def __init__(self, planner: TrajectoryOptimizer, timeout: float, clock: float):
        self.planner, self.timeout = planner, timeout
        self.clock = CompileFreeClock(clock)

    def left(self) -> float:
        """Seconds left (inf without a budget)."""
        if self.timeout <= 0:
            return math.inf
        return self.timeout - self.clock.elapsed()

    def iterations(self, t_count: int, planned: int) -> int:
        """At most ``planned``, at least 1 LM iterations for an optimisation of T knots."""
        pace = self.planner.seconds_per_iteration.get(t_count)
        left = self.left()
        if pace is None or not math.isfinite(left):
            return planned
        return int(max(1, min(planned, left // pace)))
