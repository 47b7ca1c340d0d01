"""Maximum-likelihood training on (configuration, tip pose) pairs made on the fly by our FK.

Every step draws a fresh batch of uniform configurations of the chain inside the limits,
computes the tip pose, and maximizes log p(q | target). Steps run in jitted chunks (a
``lax.scan``), so a tiny model is not dominated by dispatch; between chunks the loop prints
progress and sets the learning rate from the progress fraction (steps or wall time, whichever
is further along), so a time-bounded run still anneals to a small learning rate.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from pyroki_ros.model.robot import Robot
from pyroki_ros.sampler import model as m
from pyroki_ros.sampler.core import (
    IKSampler,
    Mode,
    SamplerSpec,
    _normalize,
    half_span,
    target_features,
    tip_pose,
)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 20_000
    batch_size: int = 1024
    learning_rate: float = 1e-3
    final_learning_rate: float = 1e-5
    warmup_fraction: float = 0.02
    max_seconds: float = math.inf  # stop (annealed) after this much training time
    chunk: int = 50  # steps per jitted call
    seed: int = 0
    held_out: int = 512  # targets for the progress line's sample error


def make_spec(robot: Robot, tip: str, base: str | None, mode: Mode, **model_options) -> SamplerSpec:
    """The sampler description for a robot chain; target normalization from 4096 random
    configurations' tip positions."""
    base, chain = robot.moving_chain(tip, base)
    target_dim = 3 if mode == "position" else 9  # position, or + two rotation-matrix columns
    model = m.ModelConfig(n_joints=len(chain), target_dim=target_dim, **model_options)
    q = _chain_configurations(robot, chain, jax.random.PRNGKey(12345), 4096)
    positions = np.asarray(tip_pose(robot, tip, base, q)[:, 4:], np.float64)
    return SamplerSpec(
        robot_name=robot.name,
        joint_names=robot.joint_names,
        limits=robot.limits.bounds,  # float pairs
        tip=tip,
        base=base,
        mode=mode,
        chain=chain,
        model=model,
        target_center=tuple(float(x) for x in positions.mean(0)),
        target_scale=float(max(positions.std(0).max(), 1e-3)),
    )


def _batch(spec: SamplerSpec, robot: Robot, key: jax.Array, size: int):
    """Uniform chain configurations and their tip targets: (u (size, n), targets (size, 3|7))."""
    q = _chain_configurations(robot, spec.chain, key, size)
    pose = tip_pose(robot, spec.tip, spec.base, q)
    targets = pose[:, 4:] if spec.mode == "position" else pose
    return _normalize(spec, q[:, jnp.asarray(spec.chain)]), targets


def _chain_configurations(robot: Robot, chain, key: jax.Array, size: int) -> jax.Array:
    """(size, n_all): the chain joints uniform inside their limits, the others at the centre."""
    chain = jnp.asarray(chain)
    q = jnp.broadcast_to(robot.center(), (size, robot.n_joints))
    return q.at[:, chain].set(robot.random_configurations(key, (size,))[:, chain])


def _loss(spec: SamplerSpec, params, u, targets):
    c = target_features(spec, targets)
    density = m.log_density(spec.model, params, c, u, half_span(spec))
    return -jnp.mean(density) / spec.model.n_joints


@functools.partial(jax.jit, static_argnames=("spec", "optimizer", "steps", "batch_size"))
def _train_chunk(spec, optimizer, steps, batch_size, robot, params, opt_state, key, lr):
    opt_state[1].hyperparams["learning_rate"] = lr  # the inject_hyperparams state

    def step(carry, step_key):
        params, opt_state = carry
        u, targets = _batch(spec, robot, step_key, batch_size)
        loss, grads = jax.value_and_grad(lambda p: _loss(spec, p, u, targets))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    (params, opt_state), losses = jax.lax.scan(
        step, (params, opt_state), jax.random.split(key, steps)
    )
    return params, opt_state, jnp.mean(losses)


def train(
    robot: Robot,
    tip: str,
    *,
    base: str | None = None,
    mode: Mode = "position",
    config: TrainConfig = TrainConfig(),
    log: Callable[[str], None] | None = print,
    **model_options,
) -> IKSampler:
    """Trains a sampler for the chain ``base`` -> ``tip``; returns it (save with ``.save``).

    ``model_options``: :class:`ModelConfig` fields (hyper_hidden, joint_hidden, components,
    generated).
    """
    spec = make_spec(robot, tip, base, mode, **model_options)
    params = m.init_params(spec.model, config.seed)
    optimizer = optax.chain(
        optax.clip_by_global_norm(1.0),
        optax.inject_hyperparams(optax.adam)(learning_rate=config.learning_rate),
    )
    opt_state = optimizer.init(params)
    key, held_key = jax.random.split(jax.random.PRNGKey(config.seed))
    _, held_targets = _batch(spec, robot, held_key, config.held_out)

    start = time.perf_counter()
    done, progress = 0, 0.0
    compile_seconds = None
    while progress < 1.0:
        lr = _schedule(config, progress)
        key, chunk_key = jax.random.split(key)
        chunk_start = time.perf_counter()
        args = (robot, params, opt_state, chunk_key, jnp.float32(lr))
        params, opt_state, loss = _train_chunk(
            spec, optimizer, config.chunk, config.batch_size, *args
        )
        loss = float(loss)
        if compile_seconds is None:  # the first chunk includes compilation: not a rate
            compile_seconds = time.perf_counter() - chunk_start
            start = time.perf_counter()
        done += config.chunk
        elapsed = time.perf_counter() - start
        progress = max(done / config.steps, elapsed / config.max_seconds)
        if not math.isfinite(loss):
            raise FloatingPointError(f"training diverged at step {done} (loss {loss})")
        chunks = done // config.chunk
        if log is not None and (progress >= 1.0 or chunks % max(1, 2000 // config.chunk) == 1):
            error = _held_out_error(IKSampler(spec, params, robot), held_targets)
            rate = (done - config.chunk) * config.batch_size / max(elapsed, 1e-9)
            speed = f"{rate:,.0f} samples/s" if done > config.chunk else "(compiled)"
            log(
                f"step {done:6d}  loss {loss:+.4f}  lr {lr:.1e}  {speed}  "
                f"held-out mean position error {error * 100:.2f} cm  [{elapsed:.0f} s]"
            )
    elapsed = time.perf_counter() - start
    training = {
        "steps": done,
        "batch_size": config.batch_size,
        "seconds": round(elapsed, 1),
        "compile_seconds": round(compile_seconds, 1),
        "final_loss": loss,
        "device": jax.devices()[0].platform,
        "seed": config.seed,
    }
    return IKSampler(dataclasses.replace(spec, training=training), params, robot)


def _schedule(config: TrainConfig, progress: float) -> float:
    """Linear warm-up, then cosine decay from learning_rate to final_learning_rate."""
    if progress < config.warmup_fraction:
        return config.learning_rate * max(progress / config.warmup_fraction, 0.05)
    t = (progress - config.warmup_fraction) / (1 - config.warmup_fraction)
    cos = 0.5 * (1 + math.cos(math.pi * min(t, 1.0)))
    return config.final_learning_rate + (config.learning_rate - config.final_learning_rate) * cos


def _held_out_error(sampler: IKSampler, targets) -> float:
    q = sampler.sample(np.asarray(targets), 1, seed=7)[:, 0]
    position, _ = sampler.errors(np.asarray(targets), q)
    return float(np.mean(position))
