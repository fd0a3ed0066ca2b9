"""FastSAC-style soft actor-critic for massively parallel envs.

SAC (Haarnoja et al., ICML 2018, and arXiv:1812.05905 for the learned temperature) with the
recipe of FastTD3/FastSAC (Seo et al., 2025): large batches from thousands of parallel envs,
distributional C51 critics (Bellemare et al., 2017) with LayerNorm + SiLU MLPs, running
observation normalisation, AdamW and a fast Polyak target. The critics see the critic
observation group (which may be privileged); the actor sees the policy group.

Observation statistics are updated from each training batch (the distribution the networks
are trained on) and frozen in :meth:`SacAgent.act`.
"""

from __future__ import annotations

import copy

import torch
from torch.func import functional_call

from unilab_gpu.rl.agent import OffPolicyAgent
from unilab_gpu.rl.compiling import maybe_compile
from unilab_gpu.rl.config import SacConfig
from unilab_gpu.rl.distributional import categorical_cross_entropy, expected_value
from unilab_gpu.rl.obs_norm import ObsNormalizer
from unilab_gpu.rl.sac_networks import SquashedGaussianActor, TwinCategoricalCritic


class SacAgent(OffPolicyAgent):
    """SAC agent.

    Args:
        cfg: hyperparameters.
        policy_obs_dim, critic_obs_dim, act_dim: sizes of the two observation groups and the
            action; actions are in ``[-1, 1]``.
        device: where networks and state live.
        compile_backend: ``torch.compile`` backend used when ``cfg.compile`` is set.
    """

    cfg: SacConfig

    def __init__(
        self,
        cfg: SacConfig,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        device: torch.device | str | None = None,
        compile_backend: str = "inductor",
    ) -> None:
        super().__init__(cfg, policy_obs_dim, critic_obs_dim, act_dim, device, compile_backend)
        self._policy = maybe_compile(self._policy_impl, cfg.compile, compile_backend)

    def _build_networks(self) -> None:
        cfg, dev = self.cfg, self.device
        self.actor = SquashedGaussianActor(
            self.policy_obs_dim, self.act_dim, cfg.actor_hidden_dims, cfg.log_std_min, cfg.log_std_max
        ).to(dev)
        self.critic = TwinCategoricalCritic(
            self.critic_obs_dim, self.act_dim, cfg.critic_hidden_dims, cfg.num_atoms
        ).to(dev)
        self.target_critic = copy.deepcopy(self.critic)
        clip = cfg.obs_norm_clip
        self.policy_norm = ObsNormalizer(self.policy_obs_dim, clip=clip, enabled=cfg.normalize_obs, device=dev)
        self.critic_norm = ObsNormalizer(self.critic_obs_dim, clip=clip, enabled=cfg.normalize_obs, device=dev)
        self.stateful.update(policy_norm=self.policy_norm, critic_norm=self.critic_norm)

    def _prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        self.policy_norm.update(batch["policy_obs"])
        self.critic_norm.update(batch["critic_obs"])
        out = dict(batch)
        for key, norm in (("policy_obs", self.policy_norm), ("critic_obs", self.critic_norm)):
            out[key] = norm(batch[key])
            out[f"next_{key}"] = norm(batch[f"next_{key}"])
        return out

    def _critic_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch["next_policy_obs"])
            next_logits = self.target_critic(batch["next_critic_obs"], next_action)
            target = self._bootstrap_target(next_logits, batch["reward"], batch["discount"], next_log_prob)
        logits = self.critic(batch["critic_obs"], batch["action"])
        loss = categorical_cross_entropy(logits, target.unsqueeze(0)).mean(dim=-1).sum()
        q_mean = expected_value(torch.softmax(logits.detach(), dim=-1), self.support).mean()
        return loss, q_mean

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        action, log_prob = self.actor.sample(batch["policy_obs"])
        # Critic weights enter as constants so the actor loss builds no critic gradients.
        frozen = {name: p.detach() for name, p in self.critic.named_parameters()}
        logits = functional_call(self.critic, frozen, (batch["critic_obs"], action))
        loss = (self.temperature.alpha() * log_prob - self._min_q(logits)).mean()
        return loss, -log_prob.detach().mean()

    def _policy_impl(self, policy_obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        obs = self.policy_norm(policy_obs)
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    @torch.no_grad()
    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]`` for ``policy_obs`` ``(num_envs, dim)``."""
        self._check_policy_obs(policy_obs)
        return self._policy(policy_obs, deterministic)
