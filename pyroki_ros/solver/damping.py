"""The Levenberg-Marquardt damping schedule: one rule for every LM loop of the package.

Both LM loops, the chain solver of planning (:func:`pyroki_ros.solver.lm.solve_chain`) and the
IK fast path (:mod:`pyroki_ros.ik.lm`), take a step from the damped normal equations

    (J^T J + D(damping)) delta = -J^T r,

accept it when it lowers the cost (:func:`improves`), and move the damping by
:meth:`Damping.update`. What differs between them is data, named here: the constants (each
tuned on its own problems) and whether the damping is scaled by the diagonal of J^T J
(Marquardt) or added as a multiple of the identity (Levenberg).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Damping:
    """A damping schedule (static: a program is compiled for one).

    Attributes:
        initial: damping of the first step.
        decrease: factor on an accepted step (< 1: towards Gauss-Newton).
        increase: factor on a rejected step (> 1: towards gradient descent).
        minimum, maximum: the damping stays in [minimum, maximum].
        give_up: above this no step has lowered the cost: the iterate is a (constrained)
            minimum (the chain solver stops, the IK loop restarts).
        scaled: Marquardt scaling, D = damping diag(J^T J) (steps invariant to the units of
            the variables); else Levenberg, D = damping I.
    """

    initial: float
    decrease: float
    increase: float
    minimum: float
    maximum: float
    give_up: float
    scaled: bool

    def update(self, damping: jax.Array, accepted: jax.Array) -> jax.Array:
        """The damping after a step, (*batch,) from (*batch,) and the step's acceptance."""
        factor = jnp.where(accepted, self.decrease, self.increase)
        return jnp.clip(damping * factor, self.minimum, self.maximum)

    def stuck(self, damping: jax.Array) -> jax.Array:
        """(*batch,) bool: the damping has grown past :attr:`give_up`."""
        return damping > self.give_up

    def diagonal(self, hessian_diagonal: jax.Array, damping: jax.Array) -> jax.Array:
        """D's diagonal, to add to that of J^T J: (*batch, n) from ``hessian_diagonal``
        (*batch, n) and ``damping`` broadcastable to it (Levenberg ignores the first)."""
        if self.scaled:
            return damping * (hessian_diagonal + 1e-9)  # 1e-9: a variable no term moves
        return jnp.broadcast_to(damping, hessian_diagonal.shape)


def improves(cost: jax.Array, current: jax.Array) -> jax.Array:
    """The acceptance test of a step: its cost is finite and lower than the current one."""
    return jnp.isfinite(cost) & (cost < current)


# Trajectories and retargeting (solve_chain): Marquardt, cautious decrease, stop when stuck.
# A steep increase: after a run of accepted steps the damping sits near Gauss-Newton, and a
# collision hinge that switches on makes the next steps fail until it is back up, each
# rejected step a full linearisation. x10 against x4 on the MotionBenchMaker sets: 18 %
# fewer LM iterations, the same successes (bench/mbm_ab.py,
# docs/benchmarks/mbm_damping_increase_ab.md).
CHAIN = Damping(
    initial=1e-3, decrease=0.3, increase=10.0, minimum=1e-9, maximum=1e9, give_up=1e8, scaled=True
)
# IK (ik/lm.py): Levenberg, a restart once stuck; constants tuned by bench/tune_ik.py.
IK = Damping(
    initial=0.3, decrease=0.35, increase=3.0, minimum=1e-7, maximum=math.inf, give_up=1e5,
    scaled=False,
)  # fmt: skip
