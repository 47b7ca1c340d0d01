"""Learned multi-solution IK: an IKNet-style sampler (hypernetwork + per-joint mixtures).

See docs/sampler.md. ``train`` fits a sampler to a robot chain from FK samples;
``IKSampler.sample`` draws K configurations per target; ``IKSampler.pretrained("panda")``
loads a model shipped in the package (``models/``); ``IKSampler.paths`` follows a
sequence of targets; :mod:`.seeding` feeds the samples to the IK solver as seeds.
"""

from pyroki_ros.sampler.core import IKSampler, SamplerSpec, check_robot, checkpoint_path
from pyroki_ros.sampler.model import ModelConfig
from pyroki_ros.sampler.training import TrainConfig, train

__all__ = [
    "IKSampler",
    "ModelConfig",
    "SamplerSpec",
    "TrainConfig",
    "check_robot",
    "checkpoint_path",
    "train",
]
