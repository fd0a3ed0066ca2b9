"""Critic support sized from the task's rewards (``algo.value_range: reward_scale``, #48)."""

from __future__ import annotations

import pytest
import torch
from rl_agent_helpers import small_agent, synthetic_batch

from unilab_gpu.rl.flashsac import FlashSacConfig
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.value_range import value_bound


def test_bound_is_the_n_step_horizon_of_the_largest_reward_sum():
    # margin * max|G| / (1 - gamma^n), by hand: 2 * 0.3 / (1 - 0.81)
    bound = value_bound(torch.tensor([0.1, -0.3, 0.2]), gamma=0.9, n_step=2, margin=2.0)
    assert bound.item() == pytest.approx(2 * 0.3 / 0.19, rel=1e-6)
    # A value whose every 2-step sum is within g stays within g / (1 - gamma^2): the fixed point
    # of V = g + gamma^2 V (checked by iteration, independent of the formula above).
    value = 0.0
    for _ in range(2000):
        value = 0.3 + 0.81 * value
    assert 2 * value == pytest.approx(bound.item(), rel=1e-5)
    assert value_bound(torch.zeros(4), 0.99, 1, 2.0).item() == pytest.approx(1e-3)  # never collapses


def test_first_update_respaces_the_support_in_place_and_a_checkpoint_keeps_it():
    agent = small_agent("sac", value_range="reward_scale", value_range_margin=1.5, gamma=0.95, n_step=3)
    support = agent.support
    before = support.data_ptr()
    batch = synthetic_batch(64, 5, 7, 2, seed=1)
    expected = 1.5 * batch["reward"].abs().max() / (1 - 0.95**3)
    agent.update(batch)
    assert agent.support.data_ptr() == before and agent.support is support
    torch.testing.assert_close(support, torch.linspace(-1, 1, support.shape[0]) * expected, rtol=1e-5, atol=1e-6)
    sized = support.clone()
    agent.update(synthetic_batch(64, 5, 7, 2, seed=2))  # later batches leave it alone
    torch.testing.assert_close(support, sized, rtol=0, atol=0)
    fresh = small_agent("sac", value_range="reward_scale", value_range_margin=1.5, gamma=0.95, n_step=3)
    fresh.load_state_dict(agent.state_dict())
    torch.testing.assert_close(fresh.support, sized, rtol=0, atol=0)
    fresh.update(synthetic_batch(64, 5, 7, 2, seed=3))  # a resumed agent keeps its support
    torch.testing.assert_close(fresh.support, sized, rtol=0, atol=0)


def test_fixed_range_keeps_the_config_support_and_the_checkpoint_layout():
    agent = small_agent("sac", v_min=-3.0, v_max=4.0)
    agent.update(synthetic_batch(32, 5, 7, 2))
    torch.testing.assert_close(agent.support, torch.linspace(-3.0, 4.0, agent.support.shape[0]))
    assert "value_support" not in agent.state_dict()["modules"]


def test_bad_value_range_keys_name_the_field():
    with pytest.raises(ValueError, match="algo.value_range' must be 'fixed' or 'reward_scale'"):
        OffPolicyConfig(value_range="auto")
    with pytest.raises(ValueError, match="algo.value_range_margin"):
        OffPolicyConfig(value_range_margin=0.5)
    with pytest.raises(ValueError, match="algo.gamma' must be < 1 with value_range"):
        OffPolicyConfig(value_range="reward_scale", gamma=1.0)
    with pytest.raises(ValueError, match="algo.value_range' must be 'fixed' for FlashSAC"):
        FlashSacConfig(value_range="reward_scale")


def test_sizing_happens_inside_the_sync_free_loop():
    """The first update sizes the support without reading anything back to the host."""
    from test_rl_trainer import make_trainer

    from unilab_gpu.utils.sync_audit import no_host_sync

    trainer, _ = make_trainer("sac", iterations=1, warmup=2, value_range="reward_scale")
    trainer.train()  # one warm-up iteration, no update yet
    before = trainer.agent.support.clone()
    with no_host_sync():
        for _ in range(4):
            trainer.run_iteration()
    assert trainer.agent.num_updates > 0
    assert not torch.equal(before, trainer.agent.support)
