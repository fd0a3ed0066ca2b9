"""FlashSAC: soft actor-critic with norm-bounded residual networks.

Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement Learning for
High-Dimensional Robot Control" (arXiv:2604.04539, 2026). On top of the distributional SAC
update (:mod:`unilab_gpu.rl.agent`) it uses

- BatchNorm/inverted-residual/RMSNorm networks (:mod:`unilab_gpu.rl.flashsac_networks`) whose
  norms are re-imposed after every optimizer step (SimbaV2, Lee et al. 2025): unit-norm linear
  weight rows (all but the actor's heads) and BatchNorm ``(gamma, beta)`` / RMSNorm ``gamma``
  at their initial norm ``sqrt(dim)`` (:mod:`unilab_gpu.rl.weight_norm`);
- joint BatchNorm forwards: the critic sees ``(s, a)`` and ``(s', a')`` in one batch, the actor
  sees ``s`` and ``s'`` in one batch, so training and bootstrap inputs share statistics;
- rewards scaled by the running discounted-return statistics (:mod:`unilab_gpu.rl.reward_scaler`)
  so returns fit the fixed support ``[-g_max, g_max]``;
- a cosine learning-rate decay and an actor/temperature step every ``actor_update_period``
  critic steps;
- exploration noise held for zeta-distributed durations (:mod:`unilab_gpu.rl.exploration`).

The critic loss evaluates the actor with running statistics at ``s'`` (as an evaluation) and
the actor loss evaluates the critic with running statistics (its batch is actor samples only).

The target critic is held to the same norms after each Polyak update (the authors' code only
normalises it at initialisation; a Polyak average of two unit vectors is shorter than either,
by about tau/2 times their squared angle, so projecting keeps the target on the critic's sphere
without changing its direction).
"""

from __future__ import annotations

import copy

import torch
from torch.func import functional_call

from unilab_gpu.rl.agent import OffPolicyAgent
from unilab_gpu.rl.compiling import maybe_compile
from unilab_gpu.rl.config import FlashSacConfig
from unilab_gpu.rl.distributional import categorical_cross_entropy, expected_value
from unilab_gpu.rl.exploration import HeldNoise
from unilab_gpu.rl.flashsac_networks import FlashActor, TwinFlashCritic, normalization_affines, unit_norm_weights
from unilab_gpu.rl.reward_scaler import RewardScaler
from unilab_gpu.rl.weight_norm import project_rows_to_unit_norm_, rescale_to_fixed_norm_


class FlashSacAgent(OffPolicyAgent):
    """FlashSAC agent.

    Args:
        cfg: hyperparameters.
        policy_obs_dim, critic_obs_dim, act_dim: observation group and action sizes.
        num_envs: parallel envs (running returns and exploration noise are per env).
        device: where networks and state live.
        compile_backend: ``torch.compile`` backend used when ``cfg.compile`` is set.
        generator: torch generator on ``device`` for the exploration noise (optional).
    """

    cfg: FlashSacConfig

    def __init__(
        self,
        cfg: FlashSacConfig,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        num_envs: int,
        device: torch.device | str | None = None,
        compile_backend: str = "inductor",
        generator: torch.Generator | None = None,
    ) -> None:
        self.num_envs = num_envs
        self._generator = generator
        super().__init__(cfg, policy_obs_dim, critic_obs_dim, act_dim, device, compile_backend)
        # (unit-norm weights, fixed-norm affine groups) of each network
        self._actor_norms = (unit_norm_weights(self.actor), normalization_affines(self.actor))
        self._critic_norms = (unit_norm_weights(self.critic), normalization_affines(self.critic))
        self._target_norms = (unit_norm_weights(self.target_critic), normalization_affines(self.target_critic))
        for norms in (self._actor_norms, self._critic_norms, self._target_norms):
            _constrain_norms(*norms)
        self._project_actor = maybe_compile(self._project_actor_impl, cfg.compile, compile_backend)
        self._project_critic = maybe_compile(self._project_critic_impl, cfg.compile, compile_backend)
        self._policy = maybe_compile(self._policy_impl, cfg.compile, compile_backend)

    def _build_networks(self) -> None:
        cfg, dev = self.cfg, self.device
        self.actor = FlashActor(
            self.policy_obs_dim,
            self.act_dim,
            cfg.actor_hidden_dim,
            cfg.actor_num_blocks,
            cfg.log_std_min,
            cfg.log_std_max,
            cfg.batch_norm_momentum,
        ).to(dev)
        self.critic = TwinFlashCritic(
            self.critic_obs_dim,
            self.act_dim,
            cfg.critic_hidden_dim,
            cfg.critic_num_blocks,
            cfg.num_atoms,
            cfg.batch_norm_momentum,
        ).to(dev)
        self.target_critic = copy.deepcopy(self.critic)
        self.reward_scaler = RewardScaler(self.num_envs, cfg.gamma, cfg.reward_g_max, device=dev)
        self.noise = HeldNoise(
            self.num_envs, self.act_dim, cfg.noise_zeta_exponent, cfg.noise_max_length, dev, self._generator
        )
        self.stateful.update(reward_scaler=self.reward_scaler, noise=self.noise)

    def observe_reward(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Feed one env step ``(num_envs,)`` to the reward scaler and end the held exploration
        noise of rows whose episode ended (a new episode starts with a fresh draw); call once per
        env step."""
        self.reward_scaler.update(reward, terminated, truncated)
        self.noise.reset(terminated | truncated)

    def _prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = dict(batch)
        out["reward"] = batch["reward"] * self.reward_scaler.scale()
        return out

    def _critic_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        obs, action = batch["critic_obs"], batch["action"]
        next_obs = batch["next_critic_obs"]
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch["next_policy_obs"], batch_stats=False)
            _, next_logits = self.target_critic.joint(obs, action, next_obs, next_action)
            target = self._bootstrap_target(next_logits, batch["reward"], batch["discount"], next_log_prob)
        logits, _ = self.critic.joint(obs, action, next_obs, next_action)
        loss = categorical_cross_entropy(logits, target.unsqueeze(0)).mean(dim=-1).sum()
        q_mean = expected_value(torch.softmax(logits.detach(), dim=-1), self.support).mean()
        return loss, q_mean

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        size = batch["policy_obs"].shape[0]
        both = torch.cat([batch["policy_obs"], batch["next_policy_obs"]])
        action, log_prob = self.actor.sample(both, batch_stats=True)
        action, log_prob = action[:size], log_prob[:size]
        frozen = {name: p.detach() for name, p in self.critic.named_parameters()}
        logits = functional_call(self.critic, frozen, (batch["critic_obs"], action), {"batch_stats": False})
        loss = (self.temperature.alpha() * log_prob - self._min_q(logits)).mean()
        return loss, -log_prob.detach().mean()

    def _project_actor_impl(self) -> None:
        _constrain_norms(*self._actor_norms)

    def _project_critic_impl(self) -> None:
        _constrain_norms(*self._critic_norms)

    def _after_actor_step(self) -> None:
        self._project_actor()

    def _after_critic_step(self) -> None:
        self._project_critic()

    def _target_update_impl(self) -> None:
        super()._target_update_impl()
        _constrain_norms(*self._target_norms)

    def _policy_impl(self, policy_obs: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        mean, log_std = self.actor(policy_obs, batch_stats=False)
        return torch.tanh(mean if noise is None else mean + log_std.exp() * noise)

    @torch.no_grad()
    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]``.

        Stochastic actions use the held exploration noise, which advances one step per call;
        they need ``num_envs`` rows. Deterministic actions accept any batch size.
        """
        self._check_policy_obs(policy_obs)
        if deterministic:
            return self._policy(policy_obs, None)
        if policy_obs.shape[0] != self.num_envs:
            raise ValueError(f"policy_obs must have {self.num_envs} rows (num_envs), got {policy_obs.shape[0]}")
        return self._policy(policy_obs, self.noise.step())


def _constrain_norms(weights: list[torch.Tensor], affines: list[tuple[torch.Tensor, ...]]) -> None:
    project_rows_to_unit_norm_(weights)
    rescale_to_fixed_norm_(affines)
