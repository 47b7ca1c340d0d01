"""Learned multi-solution IK: an IKNet-style sampler (hypernetwork + per-joint mixtures).

See docs/sampler.md. ``train`` fits a sampler to a robot chain from FK samples;
``IKSampler.sample`` draws K configurations per target; ``IKSampler.paths`` follows a
sequence of targets; :mod:`.seeding` feeds the samples to the IK solver as seeds.
"""

from .core import IKSampler, SamplerSpec, check_robot
from .model import ModelConfig
from .training import TrainConfig, train

__all__ = ["IKSampler", "ModelConfig", "SamplerSpec", "TrainConfig", "check_robot", "train"]
