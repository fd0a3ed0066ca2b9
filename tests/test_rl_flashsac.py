"""FlashSAC agent: update cadence, norm constraints, heads, reward scaling, schedule, held noise
(what SAC and FlashSAC share is tested on both in ``test_rl_agents.py``)."""

import math

import pytest
import torch
from rl_agent_helpers import small_agent, synthetic_batch

from unilab_gpu.rl.weight_norm import normalization_affines, unit_norm_weights


def _make(num_envs=4, **overrides):
    return small_agent("flashsac", num_envs=num_envs, **overrides)


def _row_norms(weight):
    return torch.linalg.vector_norm(weight, dim=-1)


def test_actor_and_temperature_step_every_second_update_with_unit_norm_rows():
    agent = _make()
    batch = synthetic_batch(32, 5, 7, 2)
    changed = []
    for _ in range(4):
        actor_before = [p.clone() for p in agent.actor.parameters()]
        alpha_before = agent.temperature.log_alpha.clone()
        critic_before = [p.clone() for p in agent.critic.parameters()]
        agent.update(batch)
        actor_moved = any(not torch.equal(a, b) for a, b in zip(actor_before, agent.actor.parameters(), strict=True))
        assert actor_moved == (not torch.equal(alpha_before, agent.temperature.log_alpha))
        assert any(not torch.equal(a, b) for a, b in zip(critic_before, agent.critic.parameters(), strict=True))
        changed.append(actor_moved)
    assert changed == [True, False, True, False]
    for module in (agent.actor, agent.critic, agent.target_critic):
        for weight in unit_norm_weights(module):
            torch.testing.assert_close(_row_norms(weight), torch.ones(weight.shape[0]), atol=1e-5, rtol=0)


def test_actor_heads_start_near_zero_outside_the_projection():
    torch.manual_seed(0)
    agent = _make()
    actor = agent.actor
    # Trunk linears are projected, heads are not (authors' code, leeyngdo/FlashSAC 9100e66).
    assert len(unit_norm_weights(actor)) == 3  # embed + expand/contract of one block
    assert all(w is not actor.mean_head.weight and w is not actor.log_std_head.weight for w in unit_norm_weights(actor))
    assert 0.5e-3 < actor.mean_head.weight.std().item() < 2e-3
    for p in (actor.mean_head.bias, actor.log_std_head.weight, actor.log_std_head.bias):
        assert torch.count_nonzero(p) == 0
    mean, log_std = actor(torch.randn(64, 5) * 3, batch_stats=True)
    assert mean.abs().max().item() < 0.05  # |h| ~ sqrt(16) after RMSNorm, weights ~1e-3
    torch.testing.assert_close(log_std, torch.full_like(log_std, -2.5))  # middle of [-5, 0]
    batch = synthetic_batch(32, 5, 7, 2)
    for _ in range(4):
        agent.update(batch)
    # The heads learn freely: after a few steps of lr 3e-4 their rows are nowhere near unit norm.
    assert _row_norms(actor.mean_head.weight).max().item() < 0.1
    assert torch.count_nonzero(actor.log_std_head.weight) > 0


def test_norms_stay_at_their_targets_over_many_updates():
    torch.manual_seed(4)
    agent = _make(learning_rate=1e-2, learning_rate_end=1e-2, actor_update_period=1)
    networks = (agent.actor, agent.critic, agent.target_critic)
    assert [len(normalization_affines(n)) for n in networks] == [4, 8, 8]  # 3 BatchNorms + RMSNorm per trunk
    for step in range(60):
        agent.update(synthetic_batch(32, 5, 7, 2, seed=step))
        for network in networks:
            for weight in unit_norm_weights(network):
                torch.testing.assert_close(_row_norms(weight), torch.ones(weight.shape[0]), atol=1e-5, rtol=0)
            for group in normalization_affines(network):
                norm = torch.sqrt(sum(p.detach().square().sum() for p in group))
                assert abs(norm.item() - group[0].shape[0] ** 0.5) < 1e-4, (step, norm.item())
    # The affine parameters did move (direction, not norm): 60 Adam steps of 1e-2 reshape gamma and beta.
    for network in (agent.actor, agent.critic):
        gammas = torch.cat([group[0].detach() for group in normalization_affines(network)])
        betas = torch.cat([group[1].detach() for group in normalization_affines(network) if len(group) == 2])
        assert (gammas - 1).abs().max().item() > 0.05 and betas.abs().max().item() > 0.05


def test_rewards_are_scaled_and_lr_follows_cosine():
    agent = _make(learning_rate=3e-4, learning_rate_end=1.5e-4, learning_rate_decay_steps=8)
    for _ in range(5):
        agent.observe_step(
            torch.tensor([10.0, -3.0, 4.0, 0.5]), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
        )
    scale = agent.reward_scaler.scale()
    assert scale.item() < 0.5  # returns of size ~10-50 must be shrunk towards [-5, 5]
    batch = synthetic_batch(16, 5, 7, 2)
    torch.testing.assert_close(agent._scaled_rewards(batch)["reward"], batch["reward"] * scale)
    for _ in range(3):
        agent.update(batch)
    expected = 1.5e-4 + 0.5 * 1.5e-4 * (1 + math.cos(math.pi * 3 / 8))
    for opt in agent.optimizers.values():
        assert opt.param_groups[0]["lr"].item() == pytest.approx(expected, rel=1e-5)


def test_exploration_noise_is_held_between_redraws():
    agent = _make(num_envs=6)
    obs = torch.randn(6, 5)
    previous_remaining = agent.noise.remaining.clone()
    previous = agent.act(obs)
    for _ in range(10):
        remaining = agent.noise.remaining.clone()
        action = agent.act(obs)
        redrawn = remaining == 0
        same = (action == previous).all(-1)
        assert torch.equal(same, ~redrawn) or not redrawn.any() and same.all()
        previous, previous_remaining = action, agent.noise.remaining.clone()
    assert previous_remaining.max() <= agent.cfg.noise_max_length
    assert agent.act(torch.randn(3, 5), deterministic=True).shape == (3, 2)
    with pytest.raises(ValueError, match="num_envs"):
        agent.act(torch.randn(3, 5))


def test_an_ended_episode_ends_its_held_exploration_noise():
    agent = _make()
    obs = torch.randn(agent.num_envs, 5)
    agent.act(obs)  # draws noise held for 1..16 steps per row
    held = agent.noise.noise.clone()
    terminated = torch.tensor([True, False, False, False])[: agent.num_envs]
    truncated = torch.tensor([False, False, True, False])[: agent.num_envs]
    agent.noise.remaining.fill_(5)  # every row would keep its draw for 5 more steps
    agent.observe_step(torch.zeros(agent.num_envs), terminated, truncated)
    assert agent.noise.remaining.tolist() == [0, 5, 0, 5][: agent.num_envs]
    agent.act(obs)
    redrawn = (agent.noise.noise != held).any(dim=1)
    assert redrawn.tolist() == [True, False, True, False][: agent.num_envs]
