"""Training a network *through* forward kinematics.

A small MLP (plain JAX + optax) maps a target hand position (3,) to Panda joint angles. The
angles are squashed into the joint limits with a sigmoid, forward kinematics turns them into
the position of the hand's tool centre point, and the loss is the squared distance to the
target, averaged over a batch. Targets are positions the hand can reach: the FK of random
configurations inside the limits. Gradients flow from the loss, through the FK, into the
network weights.

Run from the repository root:

    python3 examples/train_through_fk.py --steps 300

Importable pieces: ``make_model``, ``predict_joints``, ``sample_targets``, ``loss_fn`` and
``train(steps, seed) -> list[float]``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

try:
    from pyroki_ros import Robot, forward_kinematics
except ImportError:  # running from a source checkout: examples/ sits next to pyroki_ros/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pyroki_ros import Robot, forward_kinematics
from pyroki_ros.robots import urdf_path

HAND_LINK = "panda_hand_tcp"
# Rough centre and size of the Panda's workspace, to give the network inputs of order one.
_INPUT_CENTER = jnp.array([0.0, 0.0, 0.4])
_INPUT_SCALE = 0.6

Params = list[dict[str, jax.Array]]


def load_robot() -> Robot:
    return Robot.from_urdf(urdf_path("panda"))


def make_model(seed: int, n_outputs: int, hidden: tuple[int, ...] = (64, 64)) -> Params:
    """Weights of an MLP 3 -> hidden... -> n_outputs (He-initialised, zero biases).

    Initialised with numpy: a handful of random arrays is not worth compiling JAX kernels for.
    """
    rng = np.random.default_rng(seed)
    sizes = (3, *hidden, n_outputs)
    params = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        w = rng.normal(size=(fan_in, fan_out)) * math.sqrt(2.0 / fan_in)
        params.append({"w": jnp.asarray(w, jnp.float32), "b": jnp.zeros(fan_out, jnp.float32)})
    params[-1]["w"] = params[-1]["w"] * 0.1  # start near the middle of the joint ranges
    return params


def predict_joints(params: Params, robot: Robot, targets: jax.Array) -> jax.Array:
    """(batch, 3) target positions -> (batch, n_joints) angles inside the limits."""
    x = (targets - _INPUT_CENTER) / _INPUT_SCALE
    for layer in params[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    z = x @ params[-1]["w"] + params[-1]["b"]
    s = jax.nn.sigmoid(z)
    # A convex combination, not lower + span * s: in float32 the latter can round past a limit.
    return jnp.clip((1 - s) * robot.lower + s * robot.upper, robot.lower, robot.upper)


def hand_positions(robot: Robot, q: jax.Array) -> jax.Array:
    return forward_kinematics(robot, q).translation()[..., robot.link_index(HAND_LINK), :]


def sample_targets(robot: Robot, key: jax.Array, n: int) -> jax.Array:
    """Reachable hand positions: the FK of uniformly random configurations."""
    return hand_positions(robot, robot.random_configurations(key, (n,)))


def loss_fn(params: Params, robot: Robot, targets: jax.Array) -> jax.Array:
    """Mean squared distance (m^2) between the hand and the targets."""
    reached = hand_positions(robot, predict_joints(params, robot, targets))
    return jnp.mean(jnp.sum((reached - targets) ** 2, axis=-1))


def train(
    steps: int = 300,
    seed: int = 0,
    *,
    batch_size: int = 256,
    learning_rate: float = 1e-2,
    log_every: int = 0,
    callback: Callable[[int, float, Params], None] | None = None,
) -> list[float]:
    """Trains on fresh random targets every step; returns the loss of every step.

    ``callback(step, loss, grads)``, if given, sees every step's gradients.
    """
    robot = load_robot()
    params = make_model(seed, robot.n_joints)
    optimizer = optax.adam(optax.cosine_decay_schedule(learning_rate, steps, alpha=0.05))

    @jax.jit
    def step(params, opt_state, i):
        key = jax.random.fold_in(jax.random.PRNGKey(seed), i)  # fresh targets every step
        targets = sample_targets(robot, key, batch_size)
        loss, grads = jax.value_and_grad(loss_fn)(params, robot, targets)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, grads

    opt_state = jax.jit(optimizer.init)(params)
    losses = []
    for i in range(steps):
        params, opt_state, loss, grads = step(params, opt_state, np.int32(i))
        losses.append(float(loss))
        if callback is not None:
            callback(i, losses[-1], grads)
        if log_every and (i % log_every == 0 or i == steps - 1):
            recent = sum(losses[-log_every:]) / len(losses[-log_every:])  # batches are noisy
            rms_cm = 100 * math.sqrt(recent)
            print(f"step {i:4d}  loss {recent:.5f} m^2  (rms distance {rms_cm:.1f} cm)")
    return losses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=1e-2)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    losses = train(
        args.steps,
        args.seed,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        log_every=max(1, args.steps // 10),
    )
    tail = losses[-max(1, args.steps // 10) :]
    print(
        f"loss {losses[0]:.4f} -> {sum(tail) / len(tail):.4f} m^2 (mean of the last {len(tail)} "
        f"steps) in {args.steps} steps, {time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()
