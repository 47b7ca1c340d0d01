"""examples/train_through_fk.py: gradients through FK are finite and training reduces the loss."""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_through_fk as example


def test_predicted_joints_stay_inside_limits():
    robot = example.load_robot()
    params = example.make_model(1, robot.n_joints)
    # Huge weights push the sigmoid into saturation: the angles still respect the limits.
    params = jax.tree_util.tree_map(lambda x: 1e3 * x, params)
    targets = jax.random.normal(jax.random.PRNGKey(2), (64, 3))
    q = np.asarray(jax.jit(example.predict_joints)(params, robot, targets))
    assert q.shape == (64, robot.n_joints)
    assert np.all(q >= np.asarray(robot.lower)) and np.all(q <= np.asarray(robot.upper))


def test_training_through_fk_reduces_loss():
    seen_steps = []

    def check_gradients(step, loss, grads):
        leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(grads)]
        assert len(leaves) == 6, "expected w and b of 3 layers"
        for leaf in leaves:
            assert np.all(np.isfinite(leaf)), f"non-finite gradient at step {step}"
        if step == 0:  # the loss depends on every layer's weights and biases
            assert all(np.abs(leaf).max() > 0 for leaf in leaves)
        assert np.isfinite(loss)
        seen_steps.append(step)

    losses = example.train(100, seed=0, batch_size=128, callback=check_gradients)
    assert len(losses) == 100 and seen_steps == list(range(100))
    first, last = losses[0], float(np.mean(losses[-10:]))
    assert last < 0.5 * first, f"loss did not fall: {first:.4f} -> {last:.4f}"
    # And in absolute terms: an rms distance below about 30 cm after 100 steps.
    assert last < 0.1, f"final loss {last:.4f}"
