"""The IKNet-style network: a hypernetwork that writes the weights of small per-joint networks.

For a target ``c`` (position, or position + orientation) the hypernetwork produces, for every
joint ``j`` of the chain, the weights of a one-hidden-layer network. That network reads the
joints sampled before ``j`` (later joints masked to zero) and the target features, and outputs
a Gaussian mixture over joint ``j`` in normalized coordinates ``u = 2 (q - lower) / span - 1``.
Sampling joint by joint from these mixtures draws a whole configuration; the joint log
density of a configuration is the sum of the per-joint mixture log densities, which is what
training maximizes.

Why generated weights plus a learned base: the hypernetwork predicts a change to a static,
learned set of weights, so at initialization every target gets a sensible network and
training only has to learn how targets modulate it.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

Params = dict[str, jax.Array]

_LOG_SCALE_MIN, _LOG_SCALE_MAX = math.log(1e-4), math.log(2.0)


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Static sizes of the network (hashable: a jit static argument)."""

    n_joints: int  # joints of the chain that the model samples
    target_dim: int  # 3 (position) or 9 (position + two rotation-matrix columns)
    hyper_hidden: tuple[int, ...] = (256, 256)  # hypernetwork widths
    joint_hidden: int = 32  # hidden units of each per-joint network
    components: int = 8  # Gaussians per joint mixture
    # "all": the hypernetwork writes every weight of the per-joint networks (the paper);
    # "film": it writes only their biases and a per-unit gain of the hidden layer (a much
    # smaller output, so several times more samples per second on a CPU).
    generated: str = "all"

    def primary_shapes(self) -> dict[str, tuple[int, ...]]:
        """Per-joint network weights, stacked over joints. A per-joint network reads ``d``
        inputs: the features of every joint (later ones masked) and the target."""
        n, h, m = self.n_joints, self.joint_hidden, 3 * self.components
        d = 3 * n + self.target_dim
        return {"w1": (n, d, h), "b1": (n, h), "g1": (n, h), "w2": (n, h, m), "b2": (n, m)}

    def generated_names(self) -> tuple[str, ...]:
        if self.generated == "all":
            return ("w1", "b1", "w2", "b2")
        if self.generated == "film":
            return ("b1", "g1", "b2")
        raise ValueError(f"generated must be 'all' or 'film', got '{self.generated}'")

    @property
    def n_generated(self) -> int:
        shapes = self.primary_shapes()
        return sum(math.prod(shapes[name]) for name in self.generated_names())

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def init_params(config: ModelConfig, seed: int) -> Params:
    """He-initialised hypernetwork; its last layer small, so generated weights start at the
    base weights. Flat dict of float32 arrays (what the checkpoint stores)."""
    rng = np.random.default_rng(seed)
    params: dict[str, np.ndarray] = {}
    sizes = (config.target_dim, *config.hyper_hidden)
    for i in range(len(sizes) - 1):
        params[f"hyper_w{i}"] = rng.normal(size=sizes[i : i + 2]) * math.sqrt(2.0 / sizes[i])
        params[f"hyper_b{i}"] = np.zeros(sizes[i + 1])
    last = sizes[-1]
    params["hyper_out_w"] = rng.normal(size=(last, config.n_generated)) * (0.1 / math.sqrt(last))
    params["hyper_out_b"] = np.zeros(config.n_generated)
    for name, shape in config.primary_shapes().items():
        if name[0] == "w":
            scale = math.sqrt(2.0 / shape[1]) if name == "w1" else 0.1 / math.sqrt(shape[1])
            params[f"base_{name}"] = rng.normal(size=shape) * scale
        else:
            params[f"base_{name}"] = np.ones(shape) if name == "g1" else np.zeros(shape)
    # Mixture means spread over [-1, 1] at the start, so every component covers some range.
    b2 = params["base_b2"].reshape(config.n_joints, 3, config.components)
    b2[:, 1] = np.linspace(-0.8, 0.8, config.components)
    b2[:, 2] = math.log(0.3)
    return {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}


def primary_weights(config: ModelConfig, params: Params, c: jax.Array) -> dict[str, jax.Array]:
    """The per-joint networks' weights for targets ``c`` (*batch, target_dim):
    ``w1`` (*batch, n, d, h), ``b1`` and ``g1`` (*batch, n, h), ``w2`` (*batch, n, h, 3m),
    ``b2`` (*batch, n, 3m); the ones not generated lack the batch axes."""
    x = c
    for i in range(len(config.hyper_hidden)):
        x = jax.nn.gelu(x @ params[f"hyper_w{i}"] + params[f"hyper_b{i}"])
    flat = x @ params["hyper_out_w"] + params["hyper_out_b"]  # (*batch, n_generated)
    start, batch, shapes = 0, c.shape[:-1], config.primary_shapes()
    out = {name: params[f"base_{name}"] for name in shapes}
    for name in config.generated_names():
        size = math.prod(shapes[name])
        out[name] = out[name] + flat[..., start : start + size].reshape(*batch, *shapes[name])
        start += size
    return out


def joint_features(u: jax.Array, half_span: jax.Array) -> jax.Array:
    """(*batch, n) normalized joints -> (*batch, n, 3): u, sin and cos of the angle from the
    middle of the limits. Kinematics is trigonometric in the angles: sin/cos make the map
    the per-joint networks must learn much smoother than raw angles do."""
    angle = u * half_span
    return jnp.stack([u, jnp.sin(angle), jnp.cos(angle)], axis=-1)


def joint_mixture(
    config: ModelConfig,
    weights: dict[str, jax.Array],
    c: jax.Array,
    u: jax.Array,
    j: int | None,
    half_span: jax.Array,
):
    """Mixture parameters over joint ``j`` (or all joints at once when ``j`` is None, each
    seeing only the joints before it: teacher forcing for training).

    Args:
        weights: from :func:`primary_weights`, batch shape broadcastable with ``u``'s.
        c: (*batch, target_dim) target features.
        u: (*batch, n) normalized joints; entries at and after ``j`` are ignored.
        half_span: (n,) half the range of each joint (rad), for the angle features.

    Returns:
        logits, means, log_scales: each (*batch, m), or (*batch, n, m) when ``j`` is None.
    """
    n = config.n_joints
    w1, b1, g1, w2, b2 = (weights[name] for name in ("w1", "b1", "g1", "w2", "b2"))
    if j is None:
        mask = jnp.tril(jnp.ones((n, n), u.dtype), k=-1)[..., None]  # row j: joints < j
        features = joint_features(u, half_span)  # (*batch, n, 3)
        inputs = (features[..., None, :, :] * mask).reshape(*u.shape[:-1], n, 3 * n)
        ctx = jnp.broadcast_to(c[..., None, :], (*c.shape[:-1], n, c.shape[-1]))
        x = jnp.concatenate([inputs, ctx], axis=-1)  # (*batch, n, d)
    else:
        features = joint_features(u, half_span) * (jnp.arange(n) < j)[:, None]
        x = jnp.concatenate([features.reshape(*u.shape[:-1], 3 * n), c], axis=-1)  # (*batch, d)
        w1, w2 = w1[..., j, :, :], w2[..., j, :, :]  # joint j's network
        b1, g1, b2 = b1[..., j, :], g1[..., j, :], b2[..., j, :]
    generated = config.generated_names()
    hidden = jax.nn.gelu(_layer(x, w1, "w1" in generated, j is None) + b1) * g1
    raw = _layer(hidden, w2, "w2" in generated, j is None) + b2
    m = config.components
    logits, means, log_scales = raw[..., :m], raw[..., m : 2 * m], raw[..., 2 * m :]
    return logits, means, jnp.clip(log_scales, _LOG_SCALE_MIN, _LOG_SCALE_MAX)


def _layer(x: jax.Array, w: jax.Array, per_sample: bool, all_joints: bool) -> jax.Array:
    """x (..., d) times a weight matrix: one per sample (..., d, h), or shared by all samples
    ((d, h), or (n, d, h) with x (..., n, d) when all joints are evaluated at once)."""
    if per_sample:
        # Broadcast products and sums, which XLA fuses, instead of one tiny matrix product
        # per sample and joint (several times slower on a CPU).
        return jnp.sum(x[..., :, None] * w, axis=-2)
    return jnp.einsum("...nd,ndh->...nh", x, w) if all_joints else x @ w


def log_density(
    config: ModelConfig, params: Params, c: jax.Array, u: jax.Array, half_span: jax.Array
) -> jax.Array:
    """log p(u | c) in normalized coordinates, (*batch,)."""
    weights = primary_weights(config, params, c)
    logits, means, log_scales = joint_mixture(config, weights, c, u, None, half_span)
    z = (u[..., None] - means) * jnp.exp(-log_scales)
    per_component = -0.5 * z**2 - log_scales - 0.5 * math.log(2 * math.pi)
    log_weights = jax.nn.log_softmax(logits, axis=-1)
    per_joint = jax.nn.logsumexp(log_weights + per_component, axis=-1)  # (*batch, n)
    return jnp.sum(per_joint, axis=-1)
