"""The learned IK sampler models shipped in the package (``pyroki_ros/sampler/models``), loaded
by name: each matches its bundled robot, and its raw samples on fixed held-out targets stay
within the figures documented in docs/benchmarks/sampler.md. Targets and errors come from the
independent float64 reference FK (test/batched_reference.py), not from the package's FK.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from batched_reference import Chain
from reference_fk import parse_urdf

from pyroki_ros import Robot
from pyroki_ros.robots import urdf_path
from pyroki_ros.sampler import IKSampler, checkpoint_path
from pyroki_ros.sampler.core import MODELS

SHIPPED = {"panda": "panda_hand_tcp", "ur5": "tool0"}  # model name (= robot): tip link

# The one place the tests read the shipped models' accuracy from; keep it equal to the
# "Shipped models" table of docs/benchmarks/sampler.md (held-out targets: the tip positions of
# TARGETS uniform random chain configurations, numpy seed SEED; one sample per target at the
# model's own sampling settings (its checkpoint's temperature and mixture_temperature); errors
# by the reference FK). max_mean_cm: the documented mean raw position error (1.15 / 0.29 cm)
# plus a margin for another random stream (sampler seeds 0-2 gave 1.15-1.42 / 0.29-0.30 cm);
# min_within_10cm: the documented share within 10 cm (100 / 100 %) less the same kind of
# margin (seeds 0-2: 99.2-100 / 100 %).
DOCUMENTED = {
    "panda": {"max_mean_cm": 1.6, "min_within_10cm": 98.5},
    "ur5": {"max_mean_cm": 0.5, "min_within_10cm": 99.0},
}
TARGETS = 500
SEED = 20


def test_the_shipped_models_are_listed():
    assert IKSampler.pretrained_names() == tuple(sorted(SHIPPED))
    assert set(DOCUMENTED) == set(SHIPPED)


def test_an_unknown_name_is_refused_with_the_shipped_names():
    with pytest.raises(ValueError, match="available: panda, ur5"):
        IKSampler.pretrained("fetch")


def test_checkpoint_path_takes_a_shipped_name_or_a_path():
    assert checkpoint_path("panda") == MODELS / "panda.npz"
    assert checkpoint_path("ur5") == MODELS / "ur5.npz"
    # Anything else is a path: a local file named like a shipped model, ~ expanded.
    assert checkpoint_path("./panda.npz") == pathlib.Path("panda.npz")
    assert checkpoint_path("~/m.npz") == pathlib.Path.home() / "m.npz"
    assert checkpoint_path(pathlib.Path("panda")) == pathlib.Path("panda")
    with pytest.raises(ValueError, match="available: panda, ur5"):
        checkpoint_path("fetch")  # a bare name that is no shipped model and no file
    robot = Robot.from_urdf(urdf_path("ur5"))
    assert IKSampler.load(checkpoint_path("ur5"), robot).spec.tip == "tool0"


@pytest.fixture(scope="module", params=sorted(SHIPPED))
def shipped(request):
    return request.param, IKSampler.pretrained(request.param)


def chain_joints(urdf, tip: str) -> list[str]:
    """Movable joints from the root to ``tip``, from the reference parse."""
    model = parse_urdf(urdf)
    by_child, names = model.joint_by_child, []
    link = tip
    while link in by_child:
        joint = by_child[link]
        if joint.type != "fixed":
            names.append(joint.name)
        link = joint.parent
    return names[::-1]


def test_a_shipped_model_matches_its_robot(shipped):
    name, sampler = shipped
    urdf = urdf_path(name)
    reference = Chain(urdf)
    spec = sampler.spec
    assert spec.robot_name == name and spec.tip == SHIPPED[name]
    assert spec.mode == "position" and spec.base == parse_urdf(urdf).root
    assert spec.joint_names == reference.joint_names
    np.testing.assert_allclose(np.asarray(spec.limits)[:, 0], reference.lower, atol=1e-9)
    np.testing.assert_allclose(np.asarray(spec.limits)[:, 1], reference.upper, atol=1e-9)
    assert [spec.joint_names[i] for i in spec.chain] == chain_joints(urdf, spec.tip)
    # The same model loads for an explicitly given robot, and is refused for the other one.
    assert IKSampler.pretrained(name, Robot.from_urdf(urdf)).spec == spec
    other = next(n for n in SHIPPED if n != name)
    with pytest.raises(ValueError, match="checkpoint is for robot"):
        IKSampler.pretrained(name, Robot.from_urdf(urdf_path(other)))


def held_out_errors(name: str, sampler: IKSampler, **settings) -> np.ndarray:
    """(TARGETS,) position errors (m) of one raw sample per held-out target, by the reference
    FK; ``settings``: sample()'s temperatures (none: the model's own)."""
    reference = Chain(urdf_path(name))
    tip, chain = sampler.spec.tip, list(sampler.spec.chain)
    rng = np.random.default_rng(SEED)
    q = np.tile((reference.lower + reference.upper) / 2, (TARGETS, 1))
    q[:, chain] = rng.uniform(reference.lower[chain], reference.upper[chain], (TARGETS, len(chain)))
    targets = reference.poses(q, [tip])[tip][:, :3, 3]
    samples = sampler.sample(targets, 1, seed=0, **settings)[:, 0]
    assert np.all(samples >= reference.lower - 1e-6) and np.all(samples <= reference.upper + 1e-6)
    return np.linalg.norm(reference.poses(samples, [tip])[tip][:, :3, 3] - targets, axis=-1)


def test_raw_samples_stay_within_the_documented_error(shipped):
    name, sampler = shipped
    errors = held_out_errors(name, sampler)
    mean_cm, within = 100 * errors.mean(), 100 * (errors < 0.1).mean()
    figures = DOCUMENTED[name]
    assert mean_cm <= figures["max_mean_cm"], f"{name}: mean raw error {mean_cm:.2f} cm"
    assert within >= figures["min_within_10cm"], f"{name}: {within:.1f} % within 10 cm"


def test_the_models_sampling_settings_beat_the_trained_mixture_as_it_is(shipped):
    """The checkpoint's sampling settings (chosen on other held-out targets) are what
    sample() uses by default, and they sample more accurately than both temperatures at 1:
    fewer draws down a rare mixture branch (docs/benchmarks/sampler.md)."""
    name, sampler = shipped
    assert sampler.spec.mixture_temperature < 1.0 and sampler.spec.temperature < 1.0
    own = held_out_errors(name, sampler)
    as_trained = held_out_errors(name, sampler, temperature=1.0, mixture_temperature=1.0)
    assert own.mean() < 0.7 * as_trained.mean()
    assert (own < 0.1).mean() >= (as_trained < 0.1).mean()
    with pytest.raises(ValueError, match="mixture_temperature must be > 0"):
        sampler.sample(np.zeros((1, 3)), 1, mixture_temperature=0.0)
