"""A plan's wall-clock budget: how much time is left, and how many LM iterations fit in it."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyroki_ros.planning.trajopt import TrajectoryOptimizer


class PlanBudget:
    """A plan's wall-clock budget (``timeout`` s; 0 = none). Compiling a new program cannot
    be cut and is not counted: the clock restarts after a call that built one. An
    optimisation gets the iterations that fit in the time left, at the last measured pace
    (:attr:`TrajectoryOptimizer.seconds_per_iteration`)."""

    def __init__(self, planner: TrajectoryOptimizer, timeout: float, clock: float):
        self.planner, self.timeout = planner, timeout
        self.start, self.built = clock, planner.programs_built

    def left(self) -> float:
        """Seconds left (inf without a budget)."""
        if self.timeout <= 0:
            return math.inf
        if self.planner.programs_built > self.built:
            self.start, self.built = time.perf_counter(), self.planner.programs_built
        return self.timeout - (time.perf_counter() - self.start)

    def iterations(self, t_count: int, planned: int) -> int:
        """At most ``planned``, at least 1 LM iterations for an optimisation of T knots."""
        pace = self.planner.seconds_per_iteration.get(t_count)
        left = self.left()
        if pace is None or not math.isfinite(left):
            return planned
        return int(max(1, min(planned, left // pace)))
