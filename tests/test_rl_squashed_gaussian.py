"""Squashed-Gaussian log-density against the change-of-variables formula in NumPy."""

import numpy as np
import torch

from unilab_gpu.rl.squashed_gaussian import bounded_log_std, sample_squashed_gaussian


def test_log_prob_matches_change_of_variables():
    rng = np.random.default_rng(0)
    mean = rng.normal(size=(32, 3))
    log_std = rng.uniform(-1.5, 0.5, size=(32, 3))
    noise = rng.normal(size=(32, 3))
    action, log_prob = sample_squashed_gaussian(torch.tensor(mean), torch.tensor(log_std), torch.tensor(noise))
    a = action.numpy()
    # Density of a = tanh(u): p_a(a) = p_u(atanh a) / |d tanh / du| = p_u(atanh a) / (1 - a^2).
    u = np.arctanh(a)
    std = np.exp(log_std)
    log_normal = -0.5 * ((u - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)
    expected = (log_normal - np.log(1 - a**2)).sum(-1)
    np.testing.assert_allclose(log_prob.numpy(), expected, rtol=1e-7, atol=1e-7)


def test_log_prob_finite_where_tanh_saturates():
    action, log_prob = sample_squashed_gaussian(torch.tensor([[30.0]]), torch.tensor([[-5.0]]), torch.tensor([[0.0]]))
    assert action.item() == 1.0 and torch.isfinite(log_prob).all()


def test_bounded_log_std_range_and_midpoint():
    raw = torch.tensor([-1e3, 0.0, 1e3])
    np.testing.assert_allclose(bounded_log_std(raw, -5.0, 2.0).numpy(), [-5.0, -1.5, 2.0])
