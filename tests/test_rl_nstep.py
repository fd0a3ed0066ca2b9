"""n-step returns against a step-by-step NumPy loop."""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.replay import nstep_return


def _reference(reward, terminated, truncated, gamma):
    n, batch = reward.shape
    out = {"reward": [], "discount": [], "last": [], "ended": []}
    for b in range(batch):
        total, k = 0.0, 0
        while True:
            total += gamma**k * reward[k, b]
            if terminated[k, b] or truncated[k, b] or k == n - 1:
                break
            k += 1
        ended = bool(terminated[k, b] or truncated[k, b])
        out["reward"].append(total)
        out["discount"].append(0.0 if terminated[k, b] else gamma ** (k + 1))
        out["last"].append(k)
        out["ended"].append(ended)
    return {key: np.array(v) for key, v in out.items()}


@pytest.mark.parametrize("n", [1, 3, 5])
def test_matches_loop_reference(n):
    rng = np.random.default_rng(n)
    batch, gamma = 200, 0.9
    reward = rng.normal(size=(n, batch))
    terminated = rng.random((n, batch)) < 0.15
    truncated = rng.random((n, batch)) < 0.15
    ref = _reference(reward, terminated, truncated, gamma)
    got = nstep_return(
        torch.tensor(reward, dtype=torch.float32), torch.tensor(terminated), torch.tensor(truncated), gamma
    )
    np.testing.assert_allclose(got.reward.numpy(), ref["reward"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.discount.numpy(), ref["discount"], rtol=1e-6)
    np.testing.assert_array_equal(got.last.numpy(), ref["last"])
    np.testing.assert_array_equal(got.ended.numpy(), ref["ended"])


def test_hand_computed_truncation_bootstraps_and_termination_does_not():
    reward = torch.tensor([[1.0, 1.0], [2.0, 2.0], [4.0, 4.0]])
    terminated = torch.tensor([[False, False], [True, False], [False, False]])
    truncated = torch.tensor([[False, False], [False, True], [False, False]])
    got = nstep_return(reward, terminated, truncated, gamma=0.5)
    np.testing.assert_allclose(got.reward.numpy(), [2.0, 2.0])  # 1 + 0.5 * 2, third reward dropped
    np.testing.assert_allclose(got.discount.numpy(), [0.0, 0.25])


def test_shape_error_names_fields():
    with pytest.raises(ValueError, match="terminated"):
        nstep_return(torch.zeros(3, 2), torch.zeros(3, 1, dtype=torch.bool), torch.zeros(3, 2, dtype=torch.bool), 0.9)
