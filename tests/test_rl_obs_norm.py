"""Running observation statistics equal the statistics of all data seen."""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.obs_norm import ObsNormalizer


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
    np.testing.assert_allclose(norm(x).numpy(), (data[:3] - data.mean(0)) / np.sqrt(data.var(0) + 1e-8), rtol=1e-4)


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
