"""Running observation statistics equal the statistics of all data seen; the std floor."""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.sac import ObsNormalizer


def test_running_stats_match_full_data():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)).astype(np.float32) for n in (5, 17, 64)]
    norm = ObsNormalizer(4, clip=None)
    for b in batches:
        norm.update(torch.tensor(b))
    data = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-4)
    x = torch.tensor(data[:3])
    expected = (data[:3] - data.mean(0)) / (data.std(0) + 1e-2)
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-4)


def test_near_constant_feature_is_amplified_at_most_one_over_the_floor():
    # Feature 0 barely moves (std 1e-6), feature 1 is ordinary; NumPy reference with the floor.
    rng = np.random.default_rng(1)
    data = np.stack([5.0 + 1e-6 * rng.standard_normal(256), rng.normal(0.0, 3.0, 256)], axis=1)
    norm = ObsNormalizer(2, std_floor=0.05, clip=10.0)
    norm.update(torch.tensor(data, dtype=torch.float64))
    x = np.array([[5.0 + 0.1, 1.5], [5.0 - 0.2, -30.0]])
    expected = np.clip((x - data.mean(0)) / (data.std(0) + 0.05), -10.0, 10.0)
    got = norm(torch.tensor(x)).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)  # statistics are float32
    # A 0.1 step of the constant feature reads as ~2 (0.1 / 0.05), not as the clip
    # (sqrt(var + 1e-8) would have divided by 1e-4 and returned 10).
    assert 1.9 < got[0, 0] < 2.1 and got[1, 1] == -10.0


def test_clip_disabled_and_shape_error():
    norm = ObsNormalizer(2, clip=1.0)
    norm.update(torch.tensor([[0.0, 0.0], [2.0, 2.0]]))
    assert norm(torch.tensor([[100.0, -100.0]])).tolist() == [[1.0, -1.0]]
    off = ObsNormalizer(2, enabled=False)
    x = torch.tensor([[5.0, 6.0]])
    off.update(x)
    assert torch.equal(off(x), x)
    with pytest.raises(ValueError, match=r"\(batch, 2\)"):
        norm(torch.zeros(3))
    with pytest.raises(ValueError, match="std_floor must be > 0"):
        ObsNormalizer(2, std_floor=0.0)
