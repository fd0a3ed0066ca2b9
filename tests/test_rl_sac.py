"""SAC agent: learning signal on a bandit, compiled == eager, checkpoints, metrics, errors."""

import math

import numpy as np
import pytest
import torch
from rl_agent_helpers import COMPILE_BACKEND, bandit_distance, synthetic_batch, train_bandit

from unilab_gpu.rl.sac import SacAgent, SacConfig

SMALL = dict(actor_hidden_dims=(32,), critic_hidden_dims=(32,), num_atoms=21, compile=False)


def test_bandit_policy_moves_to_optimum():
    torch.manual_seed(0)
    cfg = SacConfig(
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
    )
    agent = SacAgent(cfg, policy_obs_dim=3, critic_obs_dim=3, act_dim=2)
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
        agent = SacAgent(SacConfig(**{**SMALL, "compile": compiled}), 5, 7, 2, compile_backend=COMPILE_BACKEND)
        torch.manual_seed(2)
        infos = [agent.update(batch) for _ in range(2)]
        results.append(
            (torch.stack([torch.stack(list(i.values())) for i in infos]), agent.act(batch["policy_obs"], True))
        )
    torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(results[1][1], results[0][1], rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_restores_training_state():
    batch = synthetic_batch(32, 5, 7, 2)
    cfg = SacConfig(**SMALL, learning_rate=1e-3, learning_rate_end=1e-4, learning_rate_decay_steps=10)
    agent = SacAgent(cfg, 5, 7, 2)
    for _ in range(3):
        agent.update(batch)
    clone = SacAgent(cfg, 5, 7, 2)
    clone.load_state_dict(agent.state_dict())
    assert clone.num_updates == 3
    torch.testing.assert_close(clone.policy_norm.mean, agent.policy_norm.mean)
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


def test_metrics_are_device_scalars_and_alpha_tracks_target_entropy():
    agent = SacAgent(SacConfig(**SMALL, target_entropy_ratio=1.0, learning_rate=1e-2, learning_rate_end=1e-2), 5, 7, 2)
    assert agent.temperature.target_entropy == -2.0
    info = agent.update(synthetic_batch(32, 5, 7, 2))
    assert set(info) == {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"}
    assert all(v.dim() == 0 and v.device == agent.device for v in info.values())
    # Entropy above the target lowers alpha (and below raises it): one step moves log alpha by
    # about -lr * sign(entropy - target) under Adam.
    expected_sign = -np.sign(info["entropy"].item() + 2.0)
    assert np.sign(math.log(info["alpha"].item()) - math.log(0.001)) == expected_sign


def test_actions_in_range_and_bad_inputs_named():
    agent = SacAgent(SacConfig(**SMALL), 5, 7, 2)
    action = agent.act(torch.randn(100, 5) * 10)
    assert action.shape == (100, 2) and action.abs().max() <= 1.0
    with pytest.raises(ValueError, match="policy_obs"):
        agent.act(torch.randn(4, 6))
    batch = synthetic_batch(8, 5, 7, 2)
    with pytest.raises(KeyError, match="discount"):
        agent.update({k: v for k, v in batch.items() if k != "discount"})
    with pytest.raises(ValueError, match="'next_critic_obs'"):
        agent.update({**batch, "next_critic_obs": torch.zeros(8, 6)})


def _numpy_critic_loss(agent, batch, critic_target: str) -> float:
    """The SAC critic loss recomputed in NumPy from the networks' outputs: the soft target of
    each target member (or of the lower-mean one for both), C51-projected as in
    ``test_rl_distributional``, then the summed twin cross-entropies."""
    from test_rl_distributional import _reference_projection

    cfg = agent.cfg
    torch.manual_seed(7)
    with torch.no_grad():
        next_action, next_log_prob = agent.actor.sample(agent.policy_norm(batch["next_policy_obs"]))
        next_logits = agent.target_critic(agent.critic_norm(batch["next_critic_obs"]), next_action)
        logits = agent.critic(agent.critic_norm(batch["critic_obs"]), batch["action"])
    next_probs = torch.softmax(next_logits, -1).double().numpy()
    support = np.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms)
    alpha = float(agent.temperature.alpha())
    discount = batch["discount"].double().numpy()
    shifted = batch["reward"].double().numpy() - discount * alpha * next_log_prob.double().numpy()
    if critic_target == "per_member":
        targets = [_reference_projection(p, shifted, discount, cfg.v_min, cfg.v_max, cfg.num_atoms) for p in next_probs]
    else:
        lower = (next_probs * support).sum(-1).argmin(0)
        chosen = next_probs[lower, np.arange(lower.size)]
        targets = [_reference_projection(chosen, shifted, discount, cfg.v_min, cfg.v_max, cfg.num_atoms)] * 2
    log_probs = torch.log_softmax(logits, -1).double().numpy()
    return float(sum(-(t * lp).sum(-1).mean() for t, lp in zip(targets, log_probs, strict=True)))


@pytest.mark.parametrize("critic_target", ["per_member", "min"])
def test_critic_loss_matches_numpy_reference(critic_target):
    torch.manual_seed(0)
    agent = SacAgent(SacConfig(**{**SMALL, "critic_target": critic_target, "v_min": -2.0, "v_max": 2.0}), 5, 7, 2)
    batch = synthetic_batch(16, 5, 7, 2)
    prepared = {**batch}
    for key, norm in (("policy_obs", agent.policy_norm), ("critic_obs", agent.critic_norm)):
        prepared[key], prepared[f"next_{key}"] = norm(batch[key]), norm(batch[f"next_{key}"])
    expected = _numpy_critic_loss(agent, batch, critic_target)
    torch.manual_seed(7)  # the same next-action draw as the reference
    loss, _ = agent._critic_loss_impl(prepared)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)


def test_per_member_targets_differ_from_clipped_when_the_targets_disagree():
    torch.manual_seed(0)
    agent = SacAgent(SacConfig(**SMALL), 5, 7, 2)
    with torch.no_grad():  # make the two target members predict different returns
        agent.target_critic.members[1][-1].bias.copy_(torch.linspace(3.0, -3.0, SMALL["num_atoms"]))
    batch = synthetic_batch(16, 5, 7, 2)
    assert _numpy_critic_loss(agent, batch, "per_member") != pytest.approx(_numpy_critic_loss(agent, batch, "min"))


@pytest.mark.parametrize(("actor_q", "reduce"), [("mean", np.mean), ("min", np.min)])
def test_actor_loss_uses_the_configured_twin_reduction(actor_q, reduce):
    torch.manual_seed(0)
    agent = SacAgent(SacConfig(**{**SMALL, "actor_q": actor_q}), 5, 7, 2)
    with torch.no_grad():
        agent.critic.members[1][-1].bias.add_(torch.linspace(-1.0, 1.0, SMALL["num_atoms"]))
    batch = synthetic_batch(16, 5, 7, 2)
    torch.manual_seed(3)
    loss, _ = agent._actor_loss_impl(batch)
    torch.manual_seed(3)
    with torch.no_grad():
        action, log_prob = agent.actor.sample(batch["policy_obs"])
        probs = torch.softmax(agent.critic(batch["critic_obs"], action), -1).double().numpy()
    support = np.linspace(agent.cfg.v_min, agent.cfg.v_max, agent.cfg.num_atoms)
    q = reduce((probs * support).sum(-1), axis=0)
    expected = (float(agent.temperature.alpha()) * log_prob.double().numpy() - q).mean()
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)


def test_actor_starts_at_the_action_centre_with_the_middle_log_std():
    agent = SacAgent(SacConfig(**SMALL), 5, 7, 2)
    mean, log_std = agent.actor(torch.randn(8, 5))
    assert torch.equal(mean, torch.zeros(8, 2))
    assert torch.allclose(log_std, torch.full((8, 2), 0.5 * (agent.cfg.log_std_min + agent.cfg.log_std_max)))
