"""Held zeta noise: length distribution (chi-square) and hold/redraw behaviour."""

import numpy as np
import torch

from unilab_gpu.rl.exploration import HeldNoise, truncated_zeta_pmf


def test_pmf_matches_formula():
    pmf = truncated_zeta_pmf(2.0, 16).numpy()
    ref = np.arange(1, 17, dtype=float) ** -2.0
    np.testing.assert_allclose(pmf, ref / ref.sum())


def test_length_distribution_chi_square():
    gen = torch.Generator().manual_seed(0)
    noise = HeldNoise(num_envs=1, act_dim=1, exponent=2.0, max_length=16, generator=gen)
    draws = 200_000
    lengths = noise.sample_lengths(draws).numpy()
    assert lengths.min() >= 1 and lengths.max() <= 16
    observed = np.bincount(lengths, minlength=17)[1:]
    expected = truncated_zeta_pmf(2.0, 16).numpy() * draws
    chi2 = ((observed - expected) ** 2 / expected).sum()
    # 15 degrees of freedom: the 99.9 % quantile is 37.7.
    assert chi2 < 37.7, chi2


def test_noise_is_held_for_its_length_then_redrawn():
    gen = torch.Generator().manual_seed(1)
    noise = HeldNoise(num_envs=64, act_dim=3, exponent=1.5, max_length=8, generator=gen)
    history, remaining = [], []
    for _ in range(40):
        history.append(noise.step().clone())
        remaining.append(noise.remaining.clone())
    history = torch.stack(history)  # (T, E, A)
    remaining = torch.stack(remaining)  # (T, E)
    changed = (history[1:] != history[:-1]).any(-1)  # (T-1, E)
    # A redraw happens exactly when the previous step left no remaining hold.
    np.testing.assert_array_equal(changed.numpy(), (remaining[:-1] == 0).numpy())
    # Run lengths between redraws never exceed max_length.
    for env in range(64):
        starts = np.flatnonzero(np.r_[True, changed[:, env].numpy()])
        assert np.diff(starts).max() <= 8
    noise.reset(torch.arange(64) < 32)
    before = noise.noise.clone()
    after = noise.step()
    assert (after[:32] != before[:32]).all()
