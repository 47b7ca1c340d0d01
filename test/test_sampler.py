"""The learned IK sampler on small planar chains (as in the IKNet paper's Table 1).

Tiny models with fixed seeds, trained once per module; sample errors are checked with the
independent float64 reference FK (test/reference_fk.py), not with the JAX FK.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_fk import parse_urdf, reference_fk

from pyroki_ros import Robot
from pyroki_ros.ik import IKSolver
from pyroki_ros.sampler import IKSampler, TrainConfig, train
from pyroki_ros.sampler.seeding import best_samples, seeded_solve

LIMIT = 3.0  # rad, every joint


def planar_chain_urdf(lengths, name="planar") -> str:
    """Revolute z-axis joints in a row along x; link i has length lengths[i]; tip link 'tip'."""
    links = "".join(f'<link name="l{i}"/>' for i in range(len(lengths)))
    joints, parent, offset = [], "base", 0.0
    for i, length in enumerate(lengths):
        joints.append(
            f'<joint name="j{i}" type="revolute"><parent link="{parent}"/><child link="l{i}"/>'
            f'<origin xyz="{offset} 0 0"/><axis xyz="0 0 1"/>'
            f'<limit lower="{-LIMIT}" upper="{LIMIT}" effort="1" velocity="1"/></joint>'
        )
        parent, offset = f"l{i}", length
    joints.append(
        f'<joint name="tip_joint" type="fixed"><parent link="{parent}"/><child link="tip"/>'
        f'<origin xyz="{offset} 0 0"/></joint>'
    )
    return f'<robot name="{name}"><link name="base"/>{links}<link name="tip"/>{"".join(joints)}</robot>'


TWO = planar_chain_urdf([0.5, 0.4], "planar2")
FOUR = planar_chain_urdf([0.4, 0.3, 0.2, 0.1], "planar4")


def reference_errors(urdf: str, q: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Tip position errors (m) of q (..., n) against targets (..., 3), float64 reference FK."""
    flat_q, flat_t = q.reshape(-1, q.shape[-1]), np.broadcast_to(targets, q.shape[:-1] + (3,))
    flat_t = flat_t.reshape(-1, 3)
    model = parse_urdf(urdf)
    errors = [
        np.linalg.norm(reference_fk(model, qi)["tip"][:3, 3] - ti) for qi, ti in zip(flat_q, flat_t)
    ]
    return np.asarray(errors).reshape(q.shape[:-1])


def polar_targets(n: int, r: tuple[float, float], seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    radius, angle = rng.uniform(*r, n), rng.uniform(-1.5, 1.5, n)
    return np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(n)], axis=1)


@pytest.fixture(scope="module")
def two() -> IKSampler:
    config = TrainConfig(steps=1000, batch_size=256, learning_rate=3e-3, chunk=100, seed=0)
    return train(
        Robot.from_urdf(TWO),
        "tip",
        config=config,
        log=None,
        hyper_hidden=(32, 32),
        joint_hidden=16,
        components=4,
    )


@pytest.fixture(scope="module")
def four() -> IKSampler:
    config = TrainConfig(steps=1500, batch_size=256, learning_rate=3e-3, chunk=100, seed=0)
    return train(
        Robot.from_urdf(FOUR),
        "tip",
        config=config,
        log=None,
        hyper_hidden=(64, 64),
        joint_hidden=32,
        components=6,
        generated="film",
    )


def test_two_joints_finds_elbow_up_and_elbow_down(two):
    # 0.3-0.8 m from the base (reach 0.1-0.9 m): both elbow branches reachable in the limits.
    targets = polar_targets(20, (0.3, 0.8), seed=1)
    q = two.sample(targets, 32, seed=3)  # (20, 32, 2)
    errors = reference_errors(TWO, q, targets[:, None])
    good = errors < 0.03
    for i in range(len(targets)):
        elbow = q[i, good[i], 1]
        assert (elbow > 0.1).sum() >= 3 and (elbow < -0.1).sum() >= 3, (
            f"target {targets[i]}: elbow signs of accurate samples {np.sign(elbow)}"
        )


def test_two_joint_samples_are_accurate_and_inside_limits(two):
    targets = polar_targets(20, (0.2, 0.85), seed=2)
    q = two.sample(targets, 32, seed=4)  # the shapes of the test above: no new compile
    assert q.shape == (20, 32, 2)
    assert np.all(np.abs(q) <= LIMIT + 1e-6)
    errors = reference_errors(TWO, q, targets[:, None])
    assert np.median(errors) < 0.01, f"median {np.median(errors):.4f} m"
    assert np.mean(errors < 0.1) > 0.9
    # The sampler's own (float32 JAX) error report agrees with the reference.
    own, _ = two.errors(targets[:, None], q)
    np.testing.assert_allclose(own, errors, atol=2e-5)


def test_four_joints_diverse_and_accurate(four):
    targets = polar_targets(20, (0.3, 0.8), seed=5)
    q = four.sample(targets, 32, seed=6)
    errors = reference_errors(FOUR, q, targets[:, None])
    # A tiny model trained for seconds: loose bounds (reach 1 m; an untrained model: ~0.4 m).
    assert np.median(errors) < 0.12, f"median {np.median(errors):.4f} m"
    assert np.mean(errors < 0.1) > 0.4
    # Two redundant DoF: the K samples of one target spread out in joint space.
    assert np.median(q.std(axis=1).mean(-1)) > 0.3


def test_best_of_k_reduces_error(four):
    targets = polar_targets(20, (0.3, 0.8), seed=7)
    best, score = best_samples(four, targets, 32, seed=8)
    assert best.shape == (20, 4)
    errors = reference_errors(FOUR, best, targets)
    np.testing.assert_allclose(score, errors, atol=2e-5)
    raw = reference_errors(FOUR, four.sample(targets, 32, seed=8), targets[:, None])
    assert np.mean(errors) < 0.5 * np.mean(raw)


def test_fused_best_samples_picks_the_lowest_error_sample(four):
    # best_samples draws, FK-ranks and picks in one compiled program (batch padded to a
    # bucket): among exactly the samples sample() draws, it must return the one that the
    # independent float64 reference FK ranks lowest, for a batch, one target and no batch.
    targets = polar_targets(30, (0.3, 0.8), seed=13)
    for batch in (targets, targets[:20], targets[3]):
        q = four.sample(batch, 32, seed=14)  # (..., 32, 4)
        best, score = best_samples(four, batch, 32, seed=14)
        assert best.shape == batch.shape[:-1] + (4,) and score.shape == batch.shape[:-1]
        errors = reference_errors(FOUR, q, batch[..., None, :])  # (..., 32)
        distance = np.abs(q - best[..., None, :]).max(-1)
        assert np.all(distance.min(-1) < 1e-5), "a returned configuration is not a sample"
        picked = distance.argmin(-1)
        picked_error = np.take_along_axis(errors, picked[..., None], -1)[..., 0]
        order = np.sort(errors, axis=-1)
        np.testing.assert_allclose(picked_error, order[..., 0], atol=2e-5)
        np.testing.assert_allclose(score, order[..., 0], atol=2e-5)
        # Where no float32 near-tie: exactly the reference's choice.
        clear = order[..., 1] - order[..., 0] > 1e-5
        np.testing.assert_array_equal(picked[clear], errors.argmin(-1)[clear])
        assert batch.ndim == 1 or clear.mean() > 0.5
    # 30 and 20 targets share the padded bucket (128): two compiles, with the single target.
    assert four.programs[("best", 32, False)]._cache_size() == 2


def test_best_samples_keeps_a_better_incumbent(four):
    model = parse_urdf(FOUR)
    q_true = np.array([[0.3, -0.5, 0.8, 0.2], [-1.0, 0.6, 0.4, -0.3]])
    targets = np.array([reference_fk(model, qi)["tip"][:3, 3] for qi in q_true])
    # An exact solution as incumbent wins (and comes back exactly as given, float64) ...
    best, score = best_samples(four, targets, 16, incumbent=q_true)
    np.testing.assert_array_equal(best, q_true)
    assert np.all(score < 1e-5)
    # ... a far-off one loses to the best sample.
    far = q_true + np.array([2.5, 0.0, 0.0, 0.0])
    best, score = best_samples(four, targets, 16, incumbent=far)
    samples, samples_score = best_samples(four, targets, 16)
    np.testing.assert_array_equal(best, samples)
    np.testing.assert_array_equal(score, samples_score)
    np.testing.assert_allclose(score, reference_errors(FOUR, best, targets), atol=2e-5)


def test_paths_are_smooth_and_follow_the_targets(two):
    t = np.linspace(0, 1, 25)
    targets = np.stack([0.5 + 0.2 * t, -0.2 + 0.4 * t, 0 * t], axis=1)
    paths = two.paths(targets, 6, radius=0.08, seed=9)  # (6, 25, 2)
    assert paths.shape == (6, 25, 2)
    assert np.abs(np.diff(paths, axis=1)).max() <= 0.08 + 1e-5
    errors = reference_errors(TWO, paths, targets[None])
    assert np.median(errors) < 0.02, f"median {np.median(errors):.4f} m"
    # Paths start on both branches and keep their branch (the window forbids a jump).
    signs = np.sign(paths[:, :, 1])
    assert np.all(signs == signs[:, :1])
    assert len(set(signs[:, 0])) == 2


def test_checkpoint_round_trip_and_robot_check(two, tmp_path):
    weights, meta = two.save(tmp_path / "two.npz")
    info = json.loads(meta.read_text())
    assert info["robot_name"] == "planar2" and info["joint_names"] == ["j0", "j1"]
    assert info["limits"] == [[-LIMIT, LIMIT], [-LIMIT, LIMIT]]
    loaded = IKSampler.load(weights, Robot.from_urdf(TWO))
    targets = polar_targets(20, (0.3, 0.8), seed=10)
    np.testing.assert_array_equal(
        loaded.sample(targets, 32, seed=1), two.sample(targets, 32, seed=1)
    )
    with pytest.raises(ValueError, match="planar2"):
        IKSampler.load(weights, Robot.from_urdf(FOUR))
    other_limits = TWO.replace(f'lower="{-LIMIT}"', 'lower="-2.0"')
    with pytest.raises(ValueError, match="limits"):
        IKSampler.load(weights, Robot.from_urdf(other_limits))


def test_sampler_seeds_help_the_solver(two):
    robot = two.robot
    solver = IKSolver(robot)
    targets = polar_targets(16, (0.2, 0.85), seed=11)
    plain = solver.solve(two_objective(targets))
    best = seeded_solve(solver, two, targets, k=32, strategy="best")
    every = seeded_solve(solver, two, targets, k=8, strategy="all")
    for result in (best, every):
        assert result.success.mean() >= plain.success.mean()
        assert result.q.shape == (16, 2)
        np.testing.assert_array_less(
            reference_errors(TWO, result.q, targets)[result.success], 1.1e-3
        )
    assert np.median(best.iterations) < np.median(plain.iterations)


def two_objective(targets):
    from pyroki_ros import objectives

    return objectives.position("tip", targets)


def test_wrong_target_shape_is_refused(two):
    with pytest.raises(ValueError, match="positions"):
        two.sample(np.zeros((3, 7)), 2)


def test_cli_trains_and_samples(tmp_path, capsys):
    from pyroki_ros.cli import main

    urdf = tmp_path / "planar2.urdf"
    urdf.write_text(TWO)
    model = tmp_path / "model.npz"
    args = ["train-sampler", "--urdf", str(urdf), "--tip", "tip", "--out", str(model)]
    args += ["--steps", "100", "--batch-size", "64", "--hyper-hidden", "16", "--joint-hidden", "8"]
    assert main(args) == 0
    assert model.exists() and model.with_suffix(".json").exists()
    targets = polar_targets(4, (0.3, 0.8), seed=12)
    np.savez(tmp_path / "targets.npz", targets=targets)
    out = tmp_path / "samples.npz"
    args = ["sample", "--urdf", str(urdf), "--model", str(model), "-k", "3"]
    assert main([*args, "--targets", str(tmp_path / "targets.npz"), "--out", str(out)]) == 0
    with np.load(out) as data:
        assert data["q"].shape == (4, 3, 2)
        np.testing.assert_allclose(
            data["position_error"], reference_errors(TWO, data["q"], targets[:, None]), atol=2e-5
        )
    assert "mean position error" in capsys.readouterr().out
    urdf.write_text(FOUR)  # another robot: the checkpoint is refused
    assert main([*args, "--targets", str(tmp_path / "targets.npz"), "--out", str(out)]) == 2


def test_pose_sampler_reports_errors_like_the_reference():
    # Full pose targets: the model reads the orientation too; the error report is checked
    # against the reference FK (a few steps of training: accuracy is not the point here).
    robot = Robot.from_urdf(TWO)
    config = TrainConfig(steps=100, batch_size=64, chunk=100, seed=1)
    sampler = train(
        robot,
        "tip",
        mode="pose",
        config=config,
        log=None,
        hyper_hidden=(16,),
        joint_hidden=8,
        components=2,
    )
    q_true = np.array([[0.3, 1.2], [-1.0, -0.7], [2.0, 0.4]])
    model = parse_urdf(TWO)
    poses = [reference_fk(model, qi)["tip"] for qi in q_true]
    yaw = np.array([np.arctan2(p[1, 0], p[0, 0]) for p in poses])
    targets = np.concatenate(
        [np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], 1),
         np.array([p[:3, 3] for p in poses])], axis=1,
    )  # fmt: skip
    q = sampler.sample(targets, 4, seed=2)
    position, orientation = sampler.errors(targets[:, None], q)
    np.testing.assert_allclose(position, reference_errors(TWO, q, targets[:, None, 4:]), atol=2e-5)
    sample_yaw = q.sum(-1)  # planar z-axis chain: the tip's yaw is the sum of the joints
    expected = np.abs(np.angle(np.exp(1j * (sample_yaw - yaw[:, None]))))
    np.testing.assert_allclose(orientation, expected, atol=2e-3)


def test_fallback_seeds_only_the_targets_the_first_attempt_leaves(four):
    # strategy="fallback": the solver's first attempt from `start`; the best of K samples
    # only for the targets it does not solve. Targets solved by the first attempt get exactly
    # the plain solver's answer (no sampler call); the others are solved at least as often.
    robot = four.robot
    solver = IKSolver(robot)
    targets = polar_targets(32, (0.15, 0.95), seed=13)
    rng = np.random.default_rng(14)
    starts = rng.uniform(-LIMIT, LIMIT, (32, 4))
    objective = two_objective(targets)
    first = solver.solve(objective, seed=starts, max_iterations=15)
    plain = solver.solve(objective, seed=starts)
    assert 0 < first.success.sum() < 32  # easy and hard targets both
    result = seeded_solve(solver, four, targets, k=16, strategy="fallback", start=starts)
    easy = first.success
    np.testing.assert_array_equal(result.q[easy], first.q[easy])
    np.testing.assert_array_equal(result.iterations[easy], first.iterations[easy])
    assert np.all(result.iterations[~easy] > 15)
    assert result.success.sum() >= plain.success.sum()
    np.testing.assert_array_less(reference_errors(FOUR, result.q, targets)[result.success], 1.1e-3)
    # One target (no batch): the same answer as its row of the batch.
    i = int(np.flatnonzero(~easy)[0])
    one = seeded_solve(solver, four, targets[i], k=16, strategy="fallback", start=starts[i])
    assert one.q.shape == (4,) and one.success.shape == () and one.position_error.shape == (1,)
    assert bool(one.success) == bool(result.success[i])
    assert int(one.iterations) == int(result.iterations[i])
    # An inactive chain joint stays at the start, also in the sampler-seeded stage.
    held = seeded_solve(
        solver, four, targets, k=16, strategy="fallback", start=starts,
        active_joints=["j1", "j2", "j3"],
    )  # fmt: skip
    np.testing.assert_allclose(held.q[:, 0], starts[:, 0], atol=1e-6)  # float32 program
    # One target from several starts: a batch of problems.
    several = seeded_solve(solver, four, targets[i], k=16, strategy="fallback", start=starts[:5])
    assert several.q.shape == (5, 4) and several.success.shape == (5,)
    with pytest.raises(ValueError, match="fallback"):
        seeded_solve(solver, four, targets, strategy="best", start=starts)
    with pytest.raises(ValueError, match="max_deviation"):
        seeded_solve(solver, four, targets, strategy="fallback", max_deviation=0.1)
