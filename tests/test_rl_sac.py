"""SAC agent: metrics, the critic and actor losses against NumPy, the actor's start (what SAC and
FlashSAC share is tested on both in ``test_rl_agents.py``)."""

import math

import numpy as np
import pytest
import torch
from rl_agent_helpers import SAC_SMALL, synthetic_batch

from unilab_gpu.rl.sac import SacAgent, SacConfig


def test_metrics_are_device_scalars_and_alpha_tracks_target_entropy():
    agent = SacAgent(
        SacConfig(**SAC_SMALL, target_entropy_ratio=1.0, learning_rate=1e-2, learning_rate_end=1e-2), 5, 7, 2
    )
    assert agent.temperature.target_entropy == -2.0
    info = agent.update(synthetic_batch(32, 5, 7, 2))
    assert set(info) == {"critic_loss", "actor_loss", "alpha", "entropy", "q_mean"}
    assert all(v.dim() == 0 and v.device == agent.device for v in info.values())
    # Entropy above the target lowers alpha (and below raises it): one step moves log alpha by
    # about -lr * sign(entropy - target) under Adam.
    expected_sign = -np.sign(info["entropy"].item() + 2.0)
    assert np.sign(math.log(info["alpha"].item()) - math.log(0.001)) == expected_sign


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
    agent = SacAgent(SacConfig(**{**SAC_SMALL, "critic_target": critic_target, "v_min": -2.0, "v_max": 2.0}), 5, 7, 2)
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
    agent = SacAgent(SacConfig(**SAC_SMALL), 5, 7, 2)
    with torch.no_grad():  # make the two target members predict different returns
        agent.target_critic.members[1][-1].bias.copy_(torch.linspace(3.0, -3.0, SAC_SMALL["num_atoms"]))
    batch = synthetic_batch(16, 5, 7, 2)
    assert _numpy_critic_loss(agent, batch, "per_member") != pytest.approx(_numpy_critic_loss(agent, batch, "min"))


@pytest.mark.parametrize(("actor_q", "reduce"), [("mean", np.mean), ("min", np.min)])
def test_actor_loss_uses_the_configured_twin_reduction(actor_q, reduce):
    torch.manual_seed(0)
    agent = SacAgent(SacConfig(**{**SAC_SMALL, "actor_q": actor_q}), 5, 7, 2)
    with torch.no_grad():
        agent.critic.members[1][-1].bias.add_(torch.linspace(-1.0, 1.0, SAC_SMALL["num_atoms"]))
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
    agent = SacAgent(SacConfig(**SAC_SMALL), 5, 7, 2)
    mean, log_std = agent.actor(torch.randn(8, 5))
    assert torch.equal(mean, torch.zeros(8, 2))
    assert torch.allclose(log_std, torch.full((8, 2), 0.5 * (agent.cfg.log_std_min + agent.cfg.log_std_max)))
