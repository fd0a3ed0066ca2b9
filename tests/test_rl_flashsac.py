"""FlashSAC agent: learning signal, compiled == eager, update cadence, projections, schedule."""

import math

import pytest
import torch
from rl_agent_helpers import COMPILE_BACKEND, bandit_distance, synthetic_batch, train_bandit

from unilab_gpu.rl.config import FlashSacConfig
from unilab_gpu.rl.flashsac import FlashSacAgent
from unilab_gpu.rl.weight_norm import linear_weights

SMALL = dict(
    actor_hidden_dim=16, critic_hidden_dim=16, actor_num_blocks=1, critic_num_blocks=1, num_atoms=21, compile=False
)


def _make(num_envs=4, **overrides):
    return FlashSacAgent(FlashSacConfig(**{**SMALL, **overrides}), 5, 7, 2, num_envs=num_envs)


def test_bandit_policy_moves_to_optimum():
    torch.manual_seed(0)
    cfg = FlashSacConfig(
        actor_hidden_dim=32,
        critic_hidden_dim=32,
        num_atoms=51,
        learning_rate=5e-3,
        learning_rate_end=5e-3,
        actor_update_period=1,
        compile=False,
    )
    agent = FlashSacAgent(cfg, policy_obs_dim=3, critic_obs_dim=3, act_dim=2, num_envs=64)
    probe = torch.randn(512, 3, generator=torch.Generator().manual_seed(1))
    before = bandit_distance(agent, probe)
    train_bandit(agent, steps=80, updates_per_step=2)
    after = bandit_distance(agent, probe)
    assert after < 0.3 and after < 0.4 * before, (before, after)


def test_compiled_update_matches_eager():
    batch = synthetic_batch(32, 5, 7, 2)
    results = []
    for compiled in (False, True):
        torch.manual_seed(1)
        agent = FlashSacAgent(
            FlashSacConfig(**{**SMALL, "compile": compiled}), 5, 7, 2, num_envs=4, compile_backend=COMPILE_BACKEND
        )
        torch.manual_seed(2)
        infos = [agent.update(batch) for _ in range(2)]
        results.append(
            (torch.stack([torch.stack(list(i.values())) for i in infos]), agent.act(batch["policy_obs"], True))
        )
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


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
        for weight in linear_weights(module):
            torch.testing.assert_close(
                torch.linalg.vector_norm(weight, dim=-1), torch.ones(weight.shape[0]), atol=1e-5, rtol=0
            )


def test_rewards_are_scaled_and_lr_follows_cosine():
    agent = _make(learning_rate=3e-4, learning_rate_end=1.5e-4, learning_rate_decay_steps=8)
    for _ in range(5):
        agent.observe_reward(
            torch.tensor([10.0, -3.0, 4.0, 0.5]), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool)
        )
    scale = agent.reward_scaler.scale()
    assert scale.item() < 0.5  # returns of size ~10-50 must be shrunk towards [-5, 5]
    batch = synthetic_batch(16, 5, 7, 2)
    torch.testing.assert_close(agent._prepare(batch)["reward"], batch["reward"] * scale)
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


def test_state_dict_round_trip():
    agent = _make()
    batch = synthetic_batch(32, 5, 7, 2)
    agent.observe_reward(torch.ones(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool))
    for _ in range(3):
        agent.update(batch)
    clone = _make()
    clone.load_state_dict(agent.state_dict())
    torch.testing.assert_close(clone.reward_scaler.scale(), agent.reward_scaler.scale())
    torch.manual_seed(3)
    expected = agent.update(batch)
    torch.manual_seed(3)
    got = clone.update(batch)
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], msg=key)
