"""FlashSAC: soft actor-critic with norm-bounded residual networks.

Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement Learning for
High-Dimensional Robot Control" (arXiv:2604.04539, 2026). Its update
(:meth:`FlashSacAgent.update_body`, top to bottom) is the distributional SAC update, made of the
pieces in :mod:`unilab_gpu.rl.off_policy`, with

- BatchNorm/inverted-residual/RMSNorm networks (:mod:`~unilab_gpu.rl.flashsac_networks`) whose
  norms are re-imposed after every optimizer step (SimbaV2, Lee et al. 2025): unit-norm linear
  weight rows (all but the actor's heads) and BatchNorm ``(gamma, beta)`` / RMSNorm ``gamma``
  at their initial norm ``sqrt(dim)`` (:mod:`~unilab_gpu.rl.weight_norm`);
- joint BatchNorm forwards: the critic sees ``(s, a)`` and ``(s', a')`` in one batch, the actor
  sees ``s`` and ``s'`` in one batch, so training and bootstrap inputs share statistics;
- rewards scaled by the running discounted-return statistics (:mod:`~unilab_gpu.rl.reward_scaler`)
  so returns fit the fixed support ``[-g_max, g_max]``;
- a cosine learning-rate decay and an actor/temperature step every ``actor_update_period``
  critic steps;
- exploration noise held for zeta-distributed durations (:mod:`~unilab_gpu.rl.exploration`).

The critic loss evaluates the actor with running statistics at ``s'`` (as an evaluation) and
the actor loss evaluates the critic with running statistics (its batch is actor samples only).

The target critic is held to the same norms after each Polyak update (the authors' code only
normalises it at initialisation; a Polyak average of two unit vectors is shorter than either,
by about tau/2 times their squared angle, so projecting keeps the target on the critic's sphere
without changing its direction).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from unilab_gpu.rl.config import check_field, preset_values
from unilab_gpu.rl.exploration import HeldNoise
from unilab_gpu.rl.flashsac_networks import FlashActor, TwinFlashCritic
from unilab_gpu.rl.off_policy import OffPolicyAgent, bootstrap_target, distributional_loss, twin_q
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.optimization import polyak_update_
from unilab_gpu.rl.reward_scaler import RewardScaler
from unilab_gpu.rl.weight_norm import constrain_norms, normalization_affines, unit_norm_weights
from unilab_gpu.utils.compiling import maybe_compile

_FLASHSAC = preset_values("flashsac")


@dataclass
class FlashSacConfig(OffPolicyConfig):
    """FlashSAC: BatchNorm residual networks, unit-norm weights, reward scaling, held noise.

    Defaults are ``configs/algo/flashsac.yaml``'s values (the authors' G1 tracking run where it
    sets a value, each value's source beside it), read from there; fields not listed here have the
    same value in ``sac.yaml`` (:class:`OffPolicyConfig`'s, tested).
    """

    name: str = _FLASHSAC["name"]
    batch_size: int = _FLASHSAC["batch_size"]
    buffer_capacity_per_env: int = _FLASHSAC["buffer_capacity_per_env"]
    warmup_steps: int = _FLASHSAC["warmup_steps"]
    updates_per_step: int = _FLASHSAC["updates_per_step"]
    n_step: int = _FLASHSAC["n_step"]
    tau: float = _FLASHSAC["tau"]
    learning_rate_end: float = _FLASHSAC["learning_rate_end"]
    adam_betas: tuple[float, float] = tuple(_FLASHSAC["adam_betas"])
    weight_decay: float = _FLASHSAC["weight_decay"]
    num_atoms: int = _FLASHSAC["num_atoms"]
    v_min: float = _FLASHSAC["v_min"]
    v_max: float = _FLASHSAC["v_max"]
    alpha_init: float = _FLASHSAC["alpha_init"]
    target_entropy_ratio: float = _FLASHSAC["target_entropy_ratio"]
    actor_hidden_dim: int = _FLASHSAC["actor_hidden_dim"]
    actor_num_blocks: int = _FLASHSAC["actor_num_blocks"]
    critic_hidden_dim: int = _FLASHSAC["critic_hidden_dim"]
    critic_num_blocks: int = _FLASHSAC["critic_num_blocks"]
    reward_g_max: float = _FLASHSAC["reward_g_max"]
    noise_zeta_exponent: float = _FLASHSAC["noise_zeta_exponent"]
    noise_max_length: int = _FLASHSAC["noise_max_length"]
    batch_norm_momentum: float = _FLASHSAC["batch_norm_momentum"]

    def __post_init__(self) -> None:
        super().__post_init__()
        check_field(self.reward_g_max > 0, "reward_g_max", "> 0", self.reward_g_max)
        # The reward scaler already sizes the rewards to the support (returns within +-reward_g_max);
        # a support sized from the scaler's first, short-horizon statistics would be ten times too wide.
        scaled = "'fixed' for FlashSAC, whose reward scaler fits returns to [v_min, v_max]"
        check_field(self.value_range == "fixed", "value_range", scaled, self.value_range)
        check_field(0.0 < self.batch_norm_momentum <= 1.0, "batch_norm_momentum", "in (0, 1]", self.batch_norm_momentum)
        check_field(self.noise_max_length >= 1, "noise_max_length", ">= 1", self.noise_max_length)


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
    actor: FlashActor
    critic: TwinFlashCritic
    target_critic: TwinFlashCritic

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
        dev = torch.device("cpu" if device is None else device)
        self.num_envs = num_envs
        actor = FlashActor(
            policy_obs_dim,
            act_dim,
            cfg.actor_hidden_dim,
            cfg.actor_num_blocks,
            cfg.log_std_min,
            cfg.log_std_max,
            cfg.batch_norm_momentum,
        ).to(dev)
        critic = TwinFlashCritic(
            critic_obs_dim,
            act_dim,
            cfg.critic_hidden_dim,
            cfg.critic_num_blocks,
            cfg.num_atoms,
            cfg.batch_norm_momentum,
        ).to(dev)
        self.reward_scaler = RewardScaler(num_envs, cfg.gamma, cfg.reward_g_max, device=dev)
        self.noise = HeldNoise(num_envs, act_dim, cfg.noise_zeta_exponent, cfg.noise_max_length, dev, generator)
        per_env = {"reward_scaler": self.reward_scaler, "noise": self.noise}
        super().__init__(cfg, policy_obs_dim, critic_obs_dim, act_dim, dev, actor, critic, per_env)
        # (unit-norm weights, fixed-norm affine groups) of each network
        self._actor_norms = (unit_norm_weights(self.actor), normalization_affines(self.actor))
        self._critic_norms = (unit_norm_weights(self.critic), normalization_affines(self.critic))
        self._target_norms = (unit_norm_weights(self.target_critic), normalization_affines(self.target_critic))
        for norms in (self._actor_norms, self._critic_norms, self._target_norms):
            constrain_norms(*norms)
        on = cfg.compile
        self._critic_loss = maybe_compile(self._critic_loss_impl, on, compile_backend)
        self._actor_loss = maybe_compile(self._actor_loss_impl, on, compile_backend)
        self._target_update = maybe_compile(self._target_update_impl, on, compile_backend)
        self._policy = maybe_compile(self._policy_impl, on, compile_backend)
        self._project_actor = maybe_compile(self._project_actor_impl, on, compile_backend)
        self._project_critic = maybe_compile(self._project_critic_impl, on, compile_backend)

    def observe_step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Feed one env step ``(num_envs,)`` to the reward scaler and end the held exploration
        noise of rows whose episode ended (a new episode starts with a fresh draw); call once per
        env step."""
        self.reward_scaler.update(reward, terminated, truncated)
        self.noise.reset(terminated | truncated)

    # -- the update ----------------------------------------------------------------------------
    def update_body(self, batch: dict[str, torch.Tensor], actor_step: bool) -> dict[str, torch.Tensor]:
        """One FlashSAC update from a replay batch (keys :data:`~unilab_gpu.rl.off_policy.BATCH_KEYS`),
        with an actor and a temperature step if ``actor_step``; see
        :meth:`OffPolicyAgent.update_body <unilab_gpu.rl.off_policy.OffPolicyAgent.update_body>`."""
        # Prepare: mirror images, rewards in the scaler's units (returns fit the fixed support).
        batch = self._scaled_rewards(self._mirrored(batch))
        # Critic: cross-entropy to the projected soft target, one step, back onto the norms.
        critic_loss, q_mean = self._critic_loss(batch)
        self.optimizers.step("critic", critic_loss, self.data_parallel)
        self._project_critic()
        # Actor and temperature, one in every actor_update_period updates.
        if actor_step:
            actor_loss, entropy = self._actor_loss(batch)
            self.optimizers.step("actor", actor_loss, self.data_parallel)
            self._project_actor()
            self.optimizers.step("temperature", self.temperature.loss(entropy), self.data_parallel)
            self._record_actor_step(actor_loss, entropy)
        # Target critic: Polyak average, back onto the norms; then the learning-rate schedule.
        self._target_update()
        self.schedule.step()
        return self._metrics(critic_loss, q_mean)

    def _scaled_rewards(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with its n-step rewards ``(B,)`` times the reward scaler's scale."""
        return {**batch, "reward": batch["reward"] * self.reward_scaler.scale()}

    def _critic_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic loss and mean predicted Q (0-d each): the joint BatchNorm forward of ``(s, a)``
        and ``(s', a')``, against the target critic's clipped double-Q soft target."""
        obs, action = batch["critic_obs"], batch["action"]
        next_obs = batch["next_critic_obs"]
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch["next_policy_obs"], batch_stats=False)
            _, next_logits = self.target_critic.joint(obs, action, next_obs, next_action)
            alpha = self.temperature.alpha()
            target = bootstrap_target(
                next_logits, batch["reward"], batch["discount"], next_log_prob, alpha, self.support
            )
        logits, _ = self.critic.joint(obs, action, next_obs, next_action)
        return distributional_loss(logits, target, self.support)

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor loss ``E[alpha * log pi - min Q]`` and the policy entropy estimate ``-E[log pi]``
        (0-d each): the actor's joint BatchNorm forward of ``s`` and ``s'``, the critic with
        running statistics."""
        size = batch["policy_obs"].shape[0]
        both = torch.cat([batch["policy_obs"], batch["next_policy_obs"]])
        action, log_prob = self.actor.sample(both, batch_stats=True)
        action, log_prob = action[:size], log_prob[:size]
        frozen = {name: p.detach() for name, p in self.critic.named_parameters()}
        logits = functional_call(self.critic, frozen, (batch["critic_obs"], action), {"batch_stats": False})
        loss = (self.temperature.alpha() * log_prob - twin_q(logits, self.support)).mean()
        return loss, -log_prob.detach().mean()

    def _project_actor_impl(self) -> None:
        constrain_norms(*self._actor_norms)

    def _project_critic_impl(self) -> None:
        constrain_norms(*self._critic_norms)

    def _target_update_impl(self) -> None:
        polyak_update_(self._target_params, self._critic_params, self.cfg.tau)
        constrain_norms(*self._target_norms)

    # -- acting --------------------------------------------------------------------------------
    def _policy_impl(self, policy_obs: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        mean, log_std = self.actor(policy_obs, batch_stats=False)
        return torch.tanh(mean if noise is None else mean + log_std.exp() * noise)

    @torch.no_grad()
    def action_std(self, policy_obs: torch.Tensor) -> torch.Tensor:
        """The policy's standard deviation before the tanh, ``(batch, act_dim)``: its exploration."""
        return self.actor(policy_obs, batch_stats=False)[1].exp()

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

    def deterministic_policy(self) -> nn.Module:
        """A copy of the deterministic policy (the actor with its running BatchNorm statistics)."""
        return FlashSacPolicy(self)


class FlashSacPolicy(nn.Module):
    """``agent.act(obs, deterministic=True)`` as a self-contained module: ``(batch, obs_dim)``
    raw ``policy`` observations -> ``(batch, act_dim)`` actions in ``[-1, 1]``."""

    def __init__(self, agent: FlashSacAgent) -> None:
        super().__init__()
        self.actor = copy.deepcopy(agent.actor)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.actor(obs, batch_stats=False)[0])  # running BatchNorm statistics
