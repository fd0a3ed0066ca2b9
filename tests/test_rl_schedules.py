"""Cosine schedule against the closed form; the lr tensor is updated in place."""

import math

import numpy as np
import torch

from unilab_gpu.rl.optimization import CosineSchedule


def test_cosine_values_and_in_place_update():
    schedule = CosineSchedule(3e-4, 1.5e-4, total_steps=10)
    lr = schedule.lr
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=lr, capturable=True)
    values = []
    for _ in range(12):
        values.append(optimizer.param_groups[0]["lr"].item())
        schedule.step()
    expected = [1.5e-4 + 0.5 * 1.5e-4 * (1 + math.cos(math.pi * min(k / 10, 1.0))) for k in range(12)]
    np.testing.assert_allclose(values, expected, rtol=1e-6)
    assert schedule.lr is lr and schedule.lr.data_ptr() == lr.data_ptr()
    restored = CosineSchedule(3e-4, 1.5e-4, total_steps=10)
    restored.load_state_dict(schedule.state_dict())
    assert restored.num_steps.item() == 12 and restored.lr.item() == lr.item()
