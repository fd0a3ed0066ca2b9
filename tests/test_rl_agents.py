"""What SAC and FlashSAC agents share, tested on both: learning signal on a bandit, compiled ==
eager, a state-dict round trip that resumes the same updates, actions in range and bad inputs
named. Each algorithm's own behaviour is in ``test_rl_sac.py`` and ``test_rl_flashsac.py``."""

import math

import pytest
import torch
from rl_agent_helpers import COMPILE_BACKEND, bandit_distance, small_agent, synthetic_batch, train_bandit

from unilab_gpu.rl.flashsac import FlashSacAgent, FlashSacConfig
from unilab_gpu.rl.sac import SacAgent, SacConfig

ALGOS = ["sac", "flashsac"]

BANDIT = {
    "sac": lambda: SacAgent(
        SacConfig(
            actor_hidden_dims=(64, 64),
            critic_hidden_dims=(64, 64),
            num_atoms=51,
            v_min=-5.0,
            v_max=1.0,
            learning_rate=5e-3,
            learning_rate_end=5e-3,
            # The policy acts from the first step (no uniform warm-up here): a wide initial std and
            # an actor step per update let 160 updates find the optimum from the zero-initial mean.
            log_std_max=2.0,
            target_entropy_ratio=1.0,
            actor_update_period=1,
            compile=False,
        ),
        policy_obs_dim=3,
        critic_obs_dim=3,
        act_dim=2,
    ),
    "flashsac": lambda: FlashSacAgent(
        FlashSacConfig(
            actor_hidden_dim=32,
            critic_hidden_dim=32,
            num_atoms=51,
            learning_rate=5e-3,
            learning_rate_end=5e-3,
            actor_update_period=1,
            compile=False,
        ),
        policy_obs_dim=3,
        critic_obs_dim=3,
        act_dim=2,
        num_envs=64,
    ),
}
"""Each algorithm's agent for the one-step bandit (``train_bandit``)."""


@pytest.mark.parametrize("algo", ALGOS)
def test_bandit_policy_moves_to_optimum(algo):
    torch.manual_seed(0)
    agent = BANDIT[algo]()
    probe = torch.randn(512, 3, generator=torch.Generator().manual_seed(1))
    before = bandit_distance(agent, probe)
    train_bandit(agent, steps=80, updates_per_step=2)
    after = bandit_distance(agent, probe)
    assert after < 0.3 and after < 0.4 * before, (before, after)


@pytest.mark.parametrize("algo", ALGOS)
def test_compiled_update_matches_eager(algo):
    batch = synthetic_batch(32, 5, 7, 2)
    results = []
    for compiled in (False, True):
        torch.manual_seed(1)
        agent = small_agent(algo, compile=compiled, compile_backend=COMPILE_BACKEND)
        torch.manual_seed(2)
        infos = [agent.update(batch) for _ in range(2)]
        results.append(
            (torch.stack([torch.stack(list(i.values())) for i in infos]), agent.act(batch["policy_obs"], True))
        )
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("algo", ALGOS)
def test_state_dict_round_trip_restores_training_state(algo):
    """A clone loaded from the state makes the same next update: networks, normalisers (SAC's
    observation statistics, FlashSAC's reward scaler), optimizers and the schedule all travel."""
    schedule = dict(learning_rate=1e-3, learning_rate_end=1e-4, learning_rate_decay_steps=10)
    agent = small_agent(algo, **schedule)
    batch = synthetic_batch(32, 5, 7, 2)
    agent.observe_step(torch.ones(4), torch.zeros(4, dtype=torch.bool), torch.zeros(4, dtype=torch.bool))
    for _ in range(3):
        agent.update(batch)
    clone = small_agent(algo, **schedule)
    clone.load_state_dict(agent.state_dict())
    assert clone.num_updates == 3
    for name, module in agent.stateful.items():
        for key, value in module.state_dict().items():
            torch.testing.assert_close(clone.stateful[name].state_dict()[key], value, msg=f"{name}.{key}")
    torch.manual_seed(5)
    expected = agent.update(batch)
    torch.manual_seed(5)
    got = clone.update(batch)
    for key in expected:
        torch.testing.assert_close(got[key], expected[key], msg=key)
    # The optimizers still read the schedule's lr tensor after loading.
    lr = 1e-4 + 0.5 * (1e-3 - 1e-4) * (1 + math.cos(math.pi * 4 / 10))
    for opt in clone.optimizers.values():
        assert opt.param_groups[0]["lr"] is clone.schedule.lr
        assert opt.param_groups[0]["lr"].item() == pytest.approx(lr, rel=1e-5)


@pytest.mark.parametrize("algo", ALGOS)
def test_actions_in_range_and_bad_inputs_named(algo):
    agent = small_agent(algo)
    rows = getattr(agent, "num_envs", 100)  # FlashSAC's held noise is one row per env
    action = agent.act(torch.randn(rows, 5) * 10)
    assert action.shape == (rows, 2) and action.abs().max() <= 1.0
    assert agent.act(torch.randn(100, 5) * 10, deterministic=True).abs().max() <= 1.0
    with pytest.raises(ValueError, match="policy_obs"):
        agent.act(torch.randn(4, 6))
    batch = synthetic_batch(8, 5, 7, 2)
    with pytest.raises(KeyError, match="discount"):
        agent.update({k: v for k, v in batch.items() if k != "discount"})
    with pytest.raises(ValueError, match="'next_critic_obs'"):
        agent.update({**batch, "next_critic_obs": torch.zeros(8, 6)})
