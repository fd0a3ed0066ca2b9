"""C51 projection against a loop-based NumPy transcription of Bellemare et al. (2017), Alg. 1."""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.distributional import (
    categorical_cross_entropy,
    categorical_support,
    expected_value,
    project_categorical,
)


def _reference_projection(probs, reward, discount, v_min, v_max, num_atoms):
    dz = (v_max - v_min) / (num_atoms - 1)
    z = v_min + dz * np.arange(num_atoms)
    out = np.zeros_like(probs)
    for i in range(probs.shape[0]):
        for j in range(num_atoms):
            tz = min(max(reward[i] + discount[i] * z[j], v_min), v_max)
            b = (tz - v_min) / dz
            lo, up = int(np.floor(b)), int(np.ceil(b))
            if lo == up:  # exactly on an atom: the original algorithm's special case
                out[i, lo] += probs[i, j]
            else:
                out[i, lo] += probs[i, j] * (up - b)
                out[i, up] += probs[i, j] * (b - lo)
    return out


def test_support_values_and_validation():
    support = categorical_support(5, -2.0, 2.0)
    np.testing.assert_allclose(support.numpy(), [-2, -1, 0, 1, 2])
    with pytest.raises(ValueError, match="v_max"):
        categorical_support(5, 1.0, 1.0)


def test_projection_matches_reference_including_terminals_and_clipping():
    rng = np.random.default_rng(0)
    batch, atoms, v_min, v_max = 64, 11, -5.0, 5.0
    probs = rng.dirichlet(np.ones(atoms), size=batch)
    reward = rng.uniform(-7, 7, size=batch)  # some targets leave the support and must clip
    discount = rng.uniform(0.5, 1.0, size=batch)
    discount[::4] = 0.0  # terminals
    reward[1] = 1.0  # exactly on an atom with discount 0 below: exercises the lo == up case
    discount[1] = 0.0
    expected = _reference_projection(probs, reward, discount, v_min, v_max, atoms)
    support = categorical_support(atoms, v_min, v_max)
    got = project_categorical(
        torch.tensor(probs, dtype=torch.float32),
        torch.tensor(reward, dtype=torch.float32),
        torch.tensor(discount, dtype=torch.float32),
        support,
    )
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(got.sum(-1).numpy(), 1.0, atol=1e-5)
    # Terminal rows: all mass on the two atoms around the (clipped) reward, with mean = reward.
    clipped = np.clip(reward[::4], v_min, v_max)
    np.testing.assert_allclose(expected_value(got[::4], support).numpy(), clipped, atol=1e-5)


def test_cross_entropy_and_expected_value():
    logits = torch.tensor([[0.0, 1.0, 2.0]])
    target = torch.tensor([[0.2, 0.3, 0.5]])
    log_p = logits.numpy() - np.log(np.exp(logits.numpy()).sum())
    np.testing.assert_allclose(
        categorical_cross_entropy(logits, target).numpy(), -(target.numpy() * log_p).sum(-1), rtol=1e-6
    )
    np.testing.assert_allclose(expected_value(target, torch.tensor([-1.0, 0.0, 1.0])).numpy(), [0.3])
