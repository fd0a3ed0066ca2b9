"""Running-return reward scaling against a NumPy recomputation over the whole stream."""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.reward_scaler import RewardScaler


def _stream(seed, steps=60, envs=7):
    rng = np.random.default_rng(seed)
    reward = rng.normal(1.0, 2.0, size=(steps, envs)).astype(np.float32)
    terminated = rng.random((steps, envs)) < 0.05
    truncated = rng.random((steps, envs)) < 0.05
    return reward, terminated, truncated


def _reference_returns(reward, terminated, truncated, gamma):
    done = terminated | truncated
    g = np.zeros(reward.shape[1])
    values = []
    for t in range(reward.shape[0]):
        g = gamma * g + reward[t]  # restart happens after the episode's last reward
        values.append(g.copy())
        g = np.where(done[t], 0.0, g)
    return np.stack(values)


@pytest.mark.parametrize("g_max", [None, 5.0, 0.5])
def test_scale_matches_numpy_reference(g_max):
    gamma = 0.9
    reward, terminated, truncated = _stream(0)
    scaler = RewardScaler(num_envs=reward.shape[1], gamma=gamma, g_max=g_max)
    for t in range(reward.shape[0]):
        scaler.update(torch.tensor(reward[t]), torch.tensor(terminated[t]), torch.tensor(truncated[t]))
    returns = _reference_returns(reward, terminated, truncated, gamma)
    denominator = np.sqrt(returns.var() + 1e-8)
    if g_max is not None:
        denominator = max(denominator, np.abs(returns).max() / g_max)
    np.testing.assert_allclose(scaler.scale().item(), 1.0 / denominator, rtol=1e-5)
    np.testing.assert_allclose(scaler.var.item(), returns.var(), rtol=1e-5)
    np.testing.assert_allclose(scaler.running_return.numpy(), returns[-1], rtol=1e-5)


def test_initial_scale_is_one_and_state_round_trips():
    scaler = RewardScaler(num_envs=3, gamma=0.99)
    assert scaler.scale().item() == pytest.approx(1.0)
    scaler.update(torch.tensor([1.0, 2.0, 3.0]), torch.zeros(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool))
    copy = RewardScaler(num_envs=3, gamma=0.99)
    copy.load_state_dict(scaler.state_dict())
    assert copy.scale().item() == pytest.approx(scaler.scale().item())


def test_bad_shape_names_field():
    with pytest.raises(ValueError, match="reward"):
        RewardScaler(num_envs=3, gamma=0.9).update(
            torch.zeros(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
        )
