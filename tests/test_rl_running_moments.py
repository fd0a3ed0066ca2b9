from __future__ import annotations

import numpy as np
import torch

from unilab_gpu.rl.running_moments import merge_moments_


def test_batches_merge_to_the_moments_of_all_data() -> None:
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, (50, 4))
    mean, var, count = (
        torch.zeros(4, dtype=torch.float64),
        torch.ones(4, dtype=torch.float64),
        torch.zeros((), dtype=torch.float64),
    )
    for chunk in np.split(data, [7, 8, 30]):
        merge_moments_(mean, var, count, torch.from_numpy(chunk))
    np.testing.assert_allclose(mean.numpy(), data.mean(0), rtol=1e-12)
    np.testing.assert_allclose(var.numpy(), data.var(0), rtol=1e-12)
    assert float(count) == 50


def test_scalar_statistics_pool_every_element() -> None:
    data = np.arange(12.0).reshape(3, 4)
    mean, var, count = (
        torch.zeros((), dtype=torch.float64),
        torch.ones((), dtype=torch.float64),
        torch.zeros((), dtype=torch.float64),
    )
    merge_moments_(mean, var, count, torch.from_numpy(data[:1]))
    merge_moments_(mean, var, count, torch.from_numpy(data[1:]))
    assert float(mean) == data.mean() and abs(float(var) - data.var()) < 1e-12 and float(count) == 12
