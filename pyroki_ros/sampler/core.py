"""The learned sampler: a trained model bound to a robot chain; sampling, paths, checkpoints.

A sampler models the joints that move ``tip`` relative to ``base`` (the chain); every other
actuated joint of a returned configuration sits at ``rest`` (the middle of its limits by
default). Targets are tip positions (*batch, 3) for a ``"position"`` sampler, or tip poses
(*batch, 7) wxyz_xyz for a ``"pose"`` sampler, in the base frame.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from pyroki_ros.model.kinematics import forward_kinematics
from pyroki_ros.model.limits import JointLimits
from pyroki_ros.model.robot import Robot
from pyroki_ros.sampler import model as m

Mode = Literal["position", "pose"]
FORMAT = "pyroki_ros.sampler/1"
# Trained models shipped in the package: <name>.npz + <name>.json (IKSampler.pretrained).
MODELS = Path(__file__).resolve().parent / "models"


@dataclasses.dataclass(frozen=True)
class SamplerSpec:
    """Everything but the weights: what the checkpoint's JSON holds."""

    robot_name: str
    joint_names: tuple[str, ...]  # every actuated joint of the robot, in q order
    limits: tuple[tuple[float, float], ...]  # (lower, upper) per actuated joint
    tip: str
    base: str
    mode: Mode
    chain: tuple[int, ...]  # indices into joint_names of the modelled joints
    model: m.ModelConfig
    target_center: tuple[float, ...]  # (3,) to normalize target positions
    target_scale: float
    # The model's sampling settings, chosen per model on held-out targets after training
    # (docs/benchmarks/sampler.md); 1 and 1 sample the trained mixture as it is.
    # temperature scales every component's width; mixture_temperature divides the mixture
    # logits (Graves' sampling bias for mixture density networks): < 1 favours each joint's
    # likelier components, so fewer draws start down a rare branch the later joints cannot
    # finish.
    temperature: float = 1.0
    mixture_temperature: float = 1.0
    training: dict = dataclasses.field(default_factory=dict, compare=False)  # provenance only

    def __post_init__(self) -> None:
        for name in ("temperature", "mixture_temperature"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be > 0, got {value}")

    def to_json(self) -> dict:
        return {"format": FORMAT, **dataclasses.asdict(self)}  # asdict recurses into model

    @staticmethod
    def from_json(data: dict) -> SamplerSpec:
        data = dict(data)
        if data.pop("format", None) != FORMAT:
            raise ValueError(f"not a sampler checkpoint (expected format '{FORMAT}')")
        model = data["model"]
        data["model"] = m.ModelConfig(**{**model, "hyper_hidden": tuple(model["hyper_hidden"])})
        for key in ("joint_names", "chain", "target_center"):
            data[key] = tuple(data[key])
        data["limits"] = tuple(tuple(x) for x in data["limits"])
        return SamplerSpec(**data)

    @property
    def chain_limits(self) -> JointLimits:
        """The limits of the modelled joints (the checkpoint's; continuous joints span
        [-pi, pi] and are sampled as bounded)."""
        return JointLimits.create(*np.asarray(self.limits).T, [False] * len(self.limits)).select(
            self.chain
        )


def tip_pose(robot: Robot, tip: str, base: str, q: jax.Array) -> jax.Array:
    """Pose of ``tip`` in the ``base`` frame, (*batch, 7) wxyz_xyz."""
    poses = forward_kinematics(robot, q).wxyz_xyz
    pose = jaxlie.SE3(poses[..., robot.link_index(tip), :])
    if base != robot.root_link:
        pose = jaxlie.SE3(poses[..., robot.link_index(base), :]).inverse() @ pose
    return pose.wxyz_xyz


def target_features(spec: SamplerSpec, targets: jax.Array) -> jax.Array:
    """Network input (*batch, target_dim) from positions (*batch, 3) or poses (*batch, 7)."""
    position = targets[..., -3:]
    c = (position - jnp.asarray(spec.target_center, position.dtype)) / spec.target_scale
    if spec.mode == "pose":
        # Two columns of the rotation matrix: continuous in the rotation, unlike a quaternion
        # (q and -q are the same rotation).
        rotation = jaxlie.SO3(targets[..., :4]).normalize().as_matrix()
        c = jnp.concatenate([c, rotation[..., :, 0], rotation[..., :, 1]], axis=-1)
    return c


def pose_errors(spec: SamplerSpec, targets: jax.Array, poses: jax.Array):
    """Position error (m) and orientation error (rad; zeros for position targets) of tip poses
    (*batch, 7) against targets broadcastable to them."""
    position_error = jnp.linalg.norm(poses[..., 4:] - targets[..., -3:], axis=-1)
    if spec.mode == "position":
        return position_error, jnp.zeros_like(position_error)
    target_q = jaxlie.SO3(targets[..., :4]).normalize()
    dot = jnp.abs(jnp.sum(target_q.wxyz * poses[..., :4], axis=-1))
    return position_error, 2 * jnp.arccos(jnp.clip(dot, 0.0, 1.0))


def _sample_joint(spec, uniforms, mixture, temperature, low, high):
    """One draw from a mixture over one joint, restricted to [low, high] (normalized units).
    ``temperature`` scales the components' widths, ``mixture_temperature`` divides the
    logits of their weights (:attr:`SamplerSpec.mixture_temperature`).

    The component is picked by its mass inside the window, then the value by the inverse CDF
    of that component truncated to the window, so a window (path following) never rejects.
    ``uniforms`` (..., 2) in (0, 1): the first picks the component (inverse CDF of the
    component weights), the second the value.
    """
    logits, means, log_scales = mixture
    scales = jnp.exp(log_scales) * temperature
    cdf_low = jax.scipy.special.ndtr((low[..., None] - means) / scales)
    cdf_high = jax.scipy.special.ndtr((high[..., None] - means) / scales)
    mass = cdf_high - cdf_low
    weights = jax.nn.softmax(logits / spec.mixture_temperature, -1)
    cumulative = jnp.cumsum(weights * (mass + 1e-30), axis=-1)
    pick = uniforms[..., :1] * cumulative[..., -1:]
    k = jnp.minimum(jnp.sum(cumulative < pick, axis=-1), logits.shape[-1] - 1)[..., None]
    take = lambda x: jnp.take_along_axis(x, k, axis=-1)[..., 0]
    mean, scale = take(means), take(scales)
    lo, hi, mass_k = take(cdf_low), take(cdf_high), take(mass)
    p = jnp.clip(lo + uniforms[..., 1] * (hi - lo), 1e-7, 1 - 1e-7)
    value = mean + scale * jax.scipy.special.ndtri(p)
    # All mass of the component outside the window (float32 CDF of 0 or 1): nearest edge.
    value = jnp.where(mass_k > 1e-6, value, mean)
    return jnp.clip(value, low, high)


def half_span(spec: SamplerSpec) -> jax.Array:
    """(n,) half the range of each chain joint (rad or m)."""
    limits = spec.chain_limits
    return jnp.asarray((limits.upper - limits.lower) / 2, jnp.float32)


def sample_normalized(
    spec: SamplerSpec,
    params: m.Params,
    c: jax.Array,
    key: jax.Array,
    temperature: float | jax.Array,
    low: jax.Array,
    high: jax.Array,
) -> jax.Array:
    """Joint-by-joint draws in normalized units.

    Args:
        c: (N, target_dim) target features.
        low, high: (N, K, n) window per joint in normalized units ([-1, 1] = the limits).

    Returns:
        (N, K, n)
    """
    config = spec.model
    # Per-target weights with a sample axis of size 1 (broadcast over the K samples).
    weights = m.primary_weights(config, params, c)
    weights = {k: v[:, None] if k in config.generated_names() else v for k, v in weights.items()}
    n_targets, k = low.shape[:2]
    u = jnp.zeros((n_targets, k, config.n_joints), c.dtype)
    c_k = jnp.broadcast_to(c[:, None], (n_targets, k, c.shape[-1]))
    # Every random number of the draw at once: one generator call instead of a few per joint
    # (each is a separate loop of small kernels on a CPU, a large share of a small draw).
    uniforms = jax.random.uniform(key, (*u.shape, 2), c.dtype, 1e-6, 1 - 1e-6)
    for j in range(config.n_joints):
        mixture = m.joint_mixture(config, weights, c_k, u, j, half_span(spec))
        value = _sample_joint(
            spec, uniforms[..., j, :], mixture, temperature, low[..., j], high[..., j]
        )
        u = u.at[..., j].set(value)
    return u


@functools.partial(jax.jit, static_argnames=("spec", "k"))
def _sample(spec, params, temperature, rest, targets, key, k):
    c = target_features(spec, targets)
    shape = (targets.shape[0], k, spec.model.n_joints)
    u = sample_normalized(spec, params, c, key, temperature, -jnp.ones(shape), jnp.ones(shape))
    return _to_configuration(spec, rest, u)


def _to_configuration(spec: SamplerSpec, rest: jax.Array, u: jax.Array) -> jax.Array:
    """Full configurations (..., n_all) from normalized chain joints (..., n)."""
    lower, upper = _chain_limits(spec, u.dtype)
    s = (jnp.clip(u, -1, 1) + 1) / 2
    q_chain = spec.chain_limits.clip((1 - s) * lower + s * upper)  # never rounds past a limit
    q = jnp.broadcast_to(rest, (*u.shape[:-1], rest.shape[-1]))
    return q.at[..., jnp.asarray(spec.chain)].set(q_chain)


def _chain_limits(spec: SamplerSpec, dtype):
    return tuple(jnp.asarray(x) for x in spec.chain_limits.inner(dtype))


def _normalize(spec: SamplerSpec, q_chain: jax.Array) -> jax.Array:
    lower, upper = _chain_limits(spec, q_chain.dtype)
    return 2 * (q_chain - lower) / (upper - lower) - 1


@functools.partial(jax.jit, static_argnames=("spec",))
def _paths(spec, params, temperature, targets, start, key, radius):
    """targets (T, d), start (K, n) normalized -> (T, K, n) normalized, every step within
    ``radius`` (normalized, (n,)) of the previous one."""

    def step(u_prev, inputs):
        target, step_key = inputs
        c = target_features(spec, target[None])
        low = jnp.maximum(u_prev - radius, -1.0)[None]
        high = jnp.minimum(u_prev + radius, 1.0)[None]
        u = sample_normalized(spec, params, c, step_key, temperature, low, high)[0]
        return u, u

    keys = jax.random.split(key, targets.shape[0])
    _, us = jax.lax.scan(step, start, (targets, keys))
    return us


@dataclasses.dataclass(frozen=True)
class IKSampler:
    """A trained multi-solution IK sampler for one robot chain."""

    spec: SamplerSpec
    params: m.Params
    robot: Robot
    # Compiled programs built for this sampler (seeding.py's fused best-of-K), by key.
    programs: dict = dataclasses.field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def rest(self) -> np.ndarray:
        """(n_all,) values of the joints outside the chain: the middle of their limits."""
        return np.asarray(self.spec.limits, np.float64).mean(axis=1)

    def _targets(self, targets) -> np.ndarray:
        targets = np.asarray(targets, np.float32)
        size = 3 if self.spec.mode == "position" else 7
        if targets.ndim == 0 or targets.shape[-1] != size:
            what = "positions (*batch, 3)" if size == 3 else "poses (*batch, 7) wxyz_xyz"
            raise ValueError(f"this sampler takes {what}; got shape {targets.shape}")
        if not np.isfinite(targets).all():
            raise ValueError("targets contain NaN or infinite values")
        return targets

    def sample(
        self,
        targets,
        k: int = 8,
        *,
        seed: int | jax.Array = 0,
        temperature: float | None = None,
        mixture_temperature: float | None = None,
    ):
        """``k`` configurations per target, inside the limits: (*batch, k, n_all) numpy.

        ``temperature`` < 1 narrows every mixture component (more accurate, less diverse);
        ``mixture_temperature`` < 1 favours the likelier components (a new value compiles
        the draw once). None: the model's (:attr:`SamplerSpec.temperature`,
        :attr:`SamplerSpec.mixture_temperature`).
        """
        targets = self._targets(targets)
        batch = targets.shape[:-1]
        flat = targets.reshape(-1, targets.shape[-1])
        key = jax.random.PRNGKey(seed) if isinstance(seed, int) else seed
        q = _sample(*self._draw(temperature, mixture_temperature), self._rest, flat, key, k)
        return np.asarray(self.robot.clip(q)).reshape(*batch, k, -1)

    def paths(self, targets, k: int = 4, *, radius: float = 0.1, seed: int = 0) -> np.ndarray:
        """``k`` joint-space paths through a sequence of targets (T, 3 or 7): (k, T, n_all).

        Every step's chain joints stay within ``radius`` (rad, or m for prismatic joints) of
        the previous step's (the paper's path method: each joint's mixture restricted to a
        window around its previous value). The first step is drawn freely; every draw uses
        the model's temperatures.
        """
        targets = self._targets(targets)
        if targets.ndim != 2:
            raise ValueError(f"targets must be a sequence (T, {targets.shape[-1]})")
        first_key, key = jax.random.split(jax.random.PRNGKey(seed))
        q0 = self.sample(targets[:1], k, seed=first_key)[0]
        u0 = _normalize(self.spec, jnp.asarray(q0[:, list(self.spec.chain)], jnp.float32))
        lower, upper = _chain_limits(self.spec, jnp.float32)
        us = _paths(
            *self._draw(None, None), jnp.asarray(targets), u0, key, radius * 2 / (upper - lower)
        )
        q = _to_configuration(self.spec, self._rest, us)
        return np.asarray(self.robot.clip(q)).transpose(1, 0, 2)

    def temperature(self, temperature: float | None = None) -> float:
        """The width temperature to draw with: ``temperature``, or the model's (None)."""
        return self.spec.temperature if temperature is None else float(temperature)

    def _draw(self, temperature: float | None, mixture_temperature: float | None):
        """(spec, params, width temperature) to draw with: the model's, or with another
        mixture temperature (a new spec: compiles the draw once) or width (None: the model's)."""
        spec = self.spec
        if mixture_temperature is not None and mixture_temperature != spec.mixture_temperature:
            # replace() checks the value (SamplerSpec.__post_init__)
            spec = dataclasses.replace(spec, mixture_temperature=float(mixture_temperature))
        return spec, self.params, jnp.float32(self.temperature(temperature))

    @property
    def _rest(self) -> jax.Array:
        return jnp.asarray(self.rest, jnp.float32)

    def errors(self, targets, q) -> tuple[np.ndarray, np.ndarray]:
        """Position (m) and orientation (rad) errors of configurations q (*batch, n_all)
        against targets broadcastable to them (float32 FK)."""
        targets = self._targets(targets)
        pos, rot = _errors(self.spec, self.robot, jnp.asarray(targets), jnp.asarray(q, jnp.float32))
        return np.asarray(pos), np.asarray(rot)

    # --- checkpoints ------------------------------------------------------------------------

    def save(self, path: str | Path) -> tuple[Path, Path]:
        """Writes ``path`` (.npz weights) and the same name with .json (robot, joints, limits,
        model settings). Returns both paths."""
        path = Path(path).with_suffix(".npz")
        np.savez(path, **{k: np.asarray(v) for k, v in self.params.items()})
        meta = path.with_suffix(".json")
        meta.write_text(json.dumps(self.spec.to_json(), indent=1) + "\n")
        return path, meta

    @staticmethod
    def pretrained_names() -> tuple[str, ...]:
        """Names of the models shipped in the package (``pyroki_ros/sampler/models``), sorted:
        one per bundled robot, named after it ("panda", "ur5")."""
        return tuple(
            sorted(p.stem for p in MODELS.glob("*.npz") if p.with_suffix(".json").is_file())
        )

    @staticmethod
    def pretrained(name: str, robot: Robot | None = None) -> IKSampler:
        """The shipped model ``name`` (see :meth:`pretrained_names`), for ``robot``: by
        default the bundled URDF of the model's robot (:func:`pyroki_ros.robots.urdf_path`).
        ValueError for an unknown name (the message lists the shipped ones) or a robot that
        does not match the model (as :meth:`load`)."""
        path = pretrained_path(name)
        if robot is None:  # urdf_path: ValueError for a robot that is not bundled
            from pyroki_ros.robots import urdf_path

            robot_name = json.loads(path.with_suffix(".json").read_text())["robot_name"]
            robot = Robot.from_urdf(urdf_path(robot_name))
        return IKSampler.load(path, robot)

    @staticmethod
    def load(path: str | Path, robot: Robot) -> IKSampler:
        """Loads a checkpoint for ``robot``; ValueError when the robot does not match (name,
        actuated joints, limits) or the file is not a sampler checkpoint."""
        path = Path(path).with_suffix(".npz")
        spec = SamplerSpec.from_json(json.loads(path.with_suffix(".json").read_text()))
        check_robot(spec, robot)
        with np.load(path, allow_pickle=False) as data:
            params = {k: jnp.asarray(data[k], jnp.float32) for k in data.files}
        for name, value in m.init_params(spec.model, 0).items():  # the expected shapes
            if name not in params or params[name].shape != value.shape:
                raise ValueError(f"{path}: weight '{name}' missing or of the wrong shape")
        return IKSampler(spec, params, robot)


def pretrained_path(name: str) -> Path:
    """The .npz of the shipped model ``name``; ValueError naming the shipped models when there
    is no such model."""
    names = IKSampler.pretrained_names()
    if name not in names:
        raise ValueError(
            f"no shipped sampler model named '{name}'; available: {', '.join(names) or 'none'}"
        )
    return MODELS / f"{name}.npz"


def checkpoint_path(checkpoint: str | Path) -> Path:
    """A checkpoint given as a shipped model's name ("panda", "ur5": see
    :meth:`IKSampler.pretrained_names`) or as a path (``~`` expanded). A bare name of a
    shipped model always means the shipped model: write ``./panda.npz`` for a local file of
    that name. ValueError for a bare name that is neither a shipped model nor a file (the
    message lists the shipped models)."""
    if isinstance(checkpoint, str) and checkpoint in IKSampler.pretrained_names():
        return pretrained_path(checkpoint)
    path = Path(checkpoint).expanduser()
    bare = isinstance(checkpoint, str) and "/" not in checkpoint and not path.suffix
    if bare and not path.with_suffix(".npz").exists():
        pretrained_path(checkpoint)  # raises: no such model, naming the shipped ones
    return path


def check_robot(spec: SamplerSpec, robot: Robot) -> None:
    """ValueError naming the first difference between the checkpoint's robot and ``robot``."""
    if spec.robot_name != robot.name:
        raise ValueError(f"checkpoint is for robot '{spec.robot_name}', not '{robot.name}'")
    if tuple(spec.joint_names) != tuple(robot.joint_names):
        raise ValueError(
            f"checkpoint joints {', '.join(spec.joint_names)} differ from the robot's "
            f"{', '.join(robot.joint_names)}"
        )
    ours = np.asarray(robot.limits.bounds, np.float64).reshape(-1, 2)
    if not np.allclose(np.asarray(spec.limits, np.float64), ours, atol=1e-6):
        raise ValueError("checkpoint joint limits differ from the robot's")
    for link in (spec.tip, spec.base):
        robot.link_index(link)


@functools.partial(jax.jit, static_argnames=("spec",))
def _errors(spec, robot, targets, q):
    return pose_errors(spec, targets, tip_pose(robot, spec.tip, spec.base, q))
