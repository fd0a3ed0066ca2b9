"""FlashSAC: soft actor-critic with norm-bounded residual networks.

Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement Learning for
High-Dimensional Robot Control" (arXiv:2604.04539, 2026). On top of the distributional SAC
update (:mod:`unilab_gpu.rl.off_policy`) it uses

- BatchNorm/inverted-residual/RMSNorm networks (:class:`FlashActor`, :class:`TwinFlashCritic`) whose
  norms are re-imposed after every optimizer step (SimbaV2, Lee et al. 2025): unit-norm linear
  weight rows (all but the actor's heads) and BatchNorm ``(gamma, beta)`` / RMSNorm ``gamma``
  at their initial norm ``sqrt(dim)`` (:func:`project_rows_to_unit_norm_`, :func:`rescale_to_fixed_norm_`);
- joint BatchNorm forwards: the critic sees ``(s, a)`` and ``(s', a')`` in one batch, the actor
  sees ``s`` and ``s'`` in one batch, so training and bootstrap inputs share statistics;
- rewards scaled by the running discounted-return statistics (:class:`RewardScaler`)
  so returns fit the fixed support ``[-g_max, g_max]``;
- a cosine learning-rate decay and an actor/temperature step every ``actor_update_period``
  critic steps;
- exploration noise held for zeta-distributed durations (:class:`HeldNoise`).

The critic loss evaluates the actor with running statistics at ``s'`` (as an evaluation) and
the actor loss evaluates the critic with running statistics (its batch is actor samples only).

The target critic is held to the same norms after each Polyak update (the authors' code only
normalises it at initialisation; a Polyak average of two unit vectors is shorter than either,
by about tau/2 times their squared angle, so projecting keeps the target on the critic's sphere
without changing its direction).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from unilab_gpu.rl.config import check_field
from unilab_gpu.rl.off_policy import OffPolicyAgent, OffPolicyConfig
from unilab_gpu.rl.running_moments import merge_moments_
from unilab_gpu.rl.squashed_gaussian import SquashedGaussian
from unilab_gpu.utils.compiling import maybe_compile


@dataclass
class FlashSacConfig(OffPolicyConfig):
    """FlashSAC: BatchNorm residual networks, unit-norm weights, reward scaling, held noise.

    Defaults are the authors' G1 tracking run where it sets a value (each value's source is in
    ``configs/algo/flashsac.yaml``); fields not listed here keep :class:`OffPolicyConfig`'s.
    """

    name: str = "flashsac"
    batch_size: int = 2048
    buffer_capacity_per_env: int = 256
    warmup_steps: int = 25
    updates_per_step: int = 2
    n_step: int = 3
    tau: float = 0.01
    learning_rate_end: float = 1.5e-4
    adam_betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    num_atoms: int = 101
    v_min: float = -5.0
    v_max: float = 5.0
    alpha_init: float = 0.01
    target_entropy_ratio: float = 0.478
    actor_hidden_dim: int = 128
    actor_num_blocks: int = 2
    critic_hidden_dim: int = 256
    critic_num_blocks: int = 2
    reward_g_max: float = 5.0
    noise_zeta_exponent: float = 2.0
    noise_max_length: int = 16
    batch_norm_momentum: float = 0.01

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

    def observe_step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
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
        return self._distributional_loss(logits, target)

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        size = batch["policy_obs"].shape[0]
        both = torch.cat([batch["policy_obs"], batch["next_policy_obs"]])
        action, log_prob = self.actor.sample(both, batch_stats=True)
        action, log_prob = action[:size], log_prob[:size]
        frozen = {name: p.detach() for name, p in self.critic.named_parameters()}
        logits = functional_call(self.critic, frozen, (batch["critic_obs"], action), {"batch_stats": False})
        loss = (self.temperature.alpha() * log_prob - self._twin_q(logits)).mean()
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


def _constrain_norms(weights: list[torch.Tensor], affines: list[tuple[torch.Tensor, ...]]) -> None:
    project_rows_to_unit_norm_(weights)
    rescale_to_fixed_norm_(affines)


# ================================================================================================
# FlashSAC networks: BatchNorm embedder, inverted residual blocks, RMSNorm, categorical critic.
#
# Architecture of FlashSAC (Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement
# Learning for High-Dimensional Robot Control", arXiv:2604.04539, 2026), which builds on SimBa
# (Lee et al., ICLR 2025: residual MLP blocks with input normalisation) and SimbaV2 (Lee et al.,
# ICML 2025: norm-bounded features and unit-norm weights):
#
#     x -> BatchNorm -> Linear(in, h)                                   (embedder)
#       -> [ x + ReLU(BN(Linear(4h, h)(ReLU(BN(Linear(h, 4h)(x)))))) ] * num_blocks
#       -> RMSNorm -> head
#
# BatchNorm sits before each nonlinearity so that large replay batches, not per-sample scale,
# set the feature statistics. Hidden linears carry no bias (the BatchNorm that follows has one).
# After each optimizer step (:func:`_constrain_norms`) every trunk and critic-head linear
# weight row is projected back to unit norm (:func:`unit_norm_weights`) and the affine parameters
# of every BatchNorm and RMSNorm are rescaled to their initial norm (:func:`normalization_affines`).
# The actor's mean and log-std heads stay outside both, as in the authors' code.
#
# Initialisation follows the authors' code (github.com/leeyngdo/FlashSAC,
# ``flash_rl/agents/flashSAC/layer.py``): orthogonal linear weights (then unit rows), zero critic
# head bias, and actor heads that start near zero (see :class:`FlashActor`).
#
# Running statistics (used wherever ``batch_stats=False``: acting, the actor's next-state
# sample in the critic loss, the critic inside the actor loss) follow the batch statistics with
# ``momentum`` (paper: 0.01, a memory of about 100 updates). They must keep up with the weights:
# at a high learning rate and a few thousand updates (small tasks) a 100-update lag lets the
# acting policy and the critic the actor climbs drift far from the networks being trained, so
# small tasks raise it (``batch_norm_momentum`` of the FlashSAC config).
#
# BatchNorm mode is an explicit ``batch_stats`` argument instead of ``module.train()`` so that
# one compiled update can use batch statistics for some forwards and running statistics for
# others without recompiling. ``batch_stats=True`` also updates the running statistics.


def _orthogonal_linear(in_dim: int, out_dim: int, bias: bool = False) -> nn.Linear:
    linear = nn.Linear(in_dim, out_dim, bias=bias)
    nn.init.orthogonal_(linear.weight)
    if bias:
        nn.init.zeros_(linear.bias)
    return linear


class BatchNorm(nn.Module):
    """Per-feature batch normalisation over ``(batch, dim)`` with an explicit mode flag."""

    def __init__(self, dim: int, momentum: float = 0.01, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, batch_stats, self.momentum, self.eps
        )


class InvertedResidualBlock(nn.Module):
    """``x + ReLU(BN(W2 ReLU(BN(W1 x))))`` with ``W1: h -> expansion*h``, ``W2: expansion*h -> h``."""

    def __init__(self, hidden_dim: int, expansion: int = 4, momentum: float = 0.01) -> None:
        super().__init__()
        self.expand = _orthogonal_linear(hidden_dim, expansion * hidden_dim)
        self.norm1 = BatchNorm(expansion * hidden_dim, momentum)
        self.contract = _orthogonal_linear(expansion * hidden_dim, hidden_dim)
        self.norm2 = BatchNorm(hidden_dim, momentum)

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        y = F.relu(self.norm1(self.expand(x), batch_stats))
        y = F.relu(self.norm2(self.contract(y), batch_stats))
        return x + y


class FlashTrunk(nn.Module):
    """Embedder, ``num_blocks`` inverted residual blocks and a final RMSNorm: ``(B, in) -> (B, h)``.

    ``momentum`` is that of every BatchNorm's running statistics.
    """

    def __init__(self, in_dim: int, hidden_dim: int, num_blocks: int, momentum: float = 0.01) -> None:
        super().__init__()
        self.input_norm = BatchNorm(in_dim, momentum)
        self.embed = _orthogonal_linear(in_dim, hidden_dim)
        self.blocks = nn.ModuleList([InvertedResidualBlock(hidden_dim, momentum=momentum) for _ in range(num_blocks)])
        self.output_norm = nn.RMSNorm(hidden_dim, eps=1e-6)

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        x = self.embed(self.input_norm(x, batch_stats))
        for block in self.blocks:
            x = block(x, batch_stats)
        return self.output_norm(x)


class FlashActor(SquashedGaussian):
    """Squashed-Gaussian policy on a FlashSAC trunk.

    The mean and log-std heads are free linears (no unit-norm rows) that start near zero, after
    the authors' fix of the head initialisation (github.com/leeyngdo/FlashSAC, commit 9100e66,
    ``NormalTanhPolicy``): mean weights ``N(0, 1e-3^2)``, log-std weights and both biases 0, and
    log-std bounded to ``[-5, 0]`` (the defaults here). Every initial pre-tanh mean is then about
    0 and every log-std the middle of its range (-2.5: std 0.08), instead of the means of SD ~1
    and log-stds spread over the whole range that unit-norm heads over RMS-normalised features
    give.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_dim: int,
        num_blocks: int,
        log_std_min: float = -5.0,
        log_std_max: float = 0.0,
        momentum: float = 0.01,
    ) -> None:
        super().__init__(log_std_min, log_std_max)
        self.act_dim = act_dim
        self.trunk = FlashTrunk(obs_dim, hidden_dim, num_blocks, momentum)
        self.mean_head = nn.Linear(hidden_dim, act_dim)
        self.log_std_head = nn.Linear(hidden_dim, act_dim)
        nn.init.normal_(self.mean_head.weight, std=1e-3)
        for p in (self.mean_head.bias, self.log_std_head.weight, self.log_std_head.bias):
            nn.init.zeros_(p)

    def forward(self, obs: torch.Tensor, batch_stats: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``(batch, obs_dim)`` -> pre-tanh ``mean`` and ``log_std``, each ``(batch, act_dim)``."""
        h = self.trunk(obs, batch_stats)
        return self.mean_head(h), self.bounded(self.log_std_head(h))


class TwinFlashCritic(nn.Module):
    """Two categorical critics on FlashSAC trunks; logits ``(2, batch, num_atoms)``."""

    def __init__(
        self, obs_dim: int, act_dim: int, hidden_dim: int, num_blocks: int, num_atoms: int, momentum: float = 0.01
    ) -> None:
        super().__init__()
        self.trunks = nn.ModuleList([FlashTrunk(obs_dim + act_dim, hidden_dim, num_blocks, momentum) for _ in range(2)])
        self.heads = nn.ModuleList([_orthogonal_linear(hidden_dim, num_atoms, bias=True) for _ in range(2)])

    def forward(self, obs: torch.Tensor, action: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([head(trunk(x, batch_stats)) for trunk, head in zip(self.trunks, self.heads, strict=True)])

    def joint(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        next_action: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits for ``(s, a)`` and ``(s', a')`` from one batch-statistics forward.

        Concatenating the two batches makes every BatchNorm normalise both with the same
        statistics, so current and bootstrap values live on one feature scale (the joint forward
        of CrossQ, Bhatt et al., ICLR 2024, used by FlashSAC). Returns two ``(2, batch, atoms)``.
        """
        logits = self(torch.cat([obs, next_obs]), torch.cat([action, next_action]), batch_stats=True)
        return logits.split(obs.shape[0], dim=1)


def unit_norm_weights(network: FlashActor | TwinFlashCritic) -> list[nn.Parameter]:
    """Linear weights ``(out, in)`` kept at unit-norm rows: the trunks' and the critic heads',
    not the actor heads' (see :class:`FlashActor`)."""
    if isinstance(network, FlashActor):
        return linear_weights(network.trunk)
    return linear_weights(network)


def normalization_affines(network: nn.Module) -> list[tuple[nn.Parameter, ...]]:
    """Affine parameters kept at a fixed norm: ``(gamma, beta)`` of each BatchNorm and
    ``(gamma,)`` of each RMSNorm in ``network``, in module order."""
    groups: list[tuple[nn.Parameter, ...]] = []
    for module in network.modules():
        if isinstance(module, BatchNorm):
            groups.append((module.weight, module.bias))
        elif isinstance(module, nn.RMSNorm):
            groups.append((module.weight,))
    return groups


# ================================================================================================
# Norm constraints of FlashSAC's networks, re-imposed after every optimizer step.
#
# SimbaV2 (Lee et al., "Hyperspherical Normalization for Scalable Deep Reinforcement Learning",
# ICML 2025) and FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) keep the parameters that
# set the scale of the features at a fixed norm, so that no norm can grow during training and
# effective learning rates stay constant:
#
# - every row of a linear layer's weight is a unit vector over the inputs
#   (:func:`project_rows_to_unit_norm_`);
# - the affine parameters of every normalisation layer, ``(gamma, beta)`` of a BatchNorm and
#   ``gamma`` of an RMSNorm, together have the norm ``sqrt(dim)`` they have at initialisation
#   (``gamma = 1``, ``beta = 0``) (:func:`rescale_to_fixed_norm_`). This is the authors'
#   ``normalize_parameters`` of ``UnitBatchNorm``/``UnitRMSNorm`` (github.com/leeyngdo/FlashSAC,
#   ``flash_rl/agents/flashSAC/layer.py``).
#
# Both are plain rescalings after the gradient step, not reparameterisations.


def linear_weights(module: nn.Module) -> list[nn.Parameter]:
    """Weights ``(out, in)`` of every ``nn.Linear`` inside ``module``, in module order."""
    return [m.weight for m in module.modules() if isinstance(m, nn.Linear)]


@torch.no_grad()
def project_rows_to_unit_norm_(weights: list[torch.Tensor], eps: float = 1e-8) -> None:
    """Rescale each row (last axis) of each weight to unit L2 norm, in place."""
    for weight in weights:
        weight.div_(torch.linalg.vector_norm(weight, dim=-1, keepdim=True).clamp_min(eps))


@torch.no_grad()
def rescale_to_fixed_norm_(groups: list[tuple[torch.Tensor, ...]], eps: float = 1e-8) -> None:
    """Rescale each group of ``(dim,)`` vectors by one common factor, in place, so that the
    group's joint L2 norm ``sqrt(sum_i |v_i|^2)`` is ``sqrt(dim)``.

    A group is the affine parameters of one normalisation layer, e.g. ``(gamma, beta)``; one
    factor per group keeps the direction of the concatenated vector.
    """
    for group in groups:
        square_sum = sum(v.square().sum() for v in group)
        factor = math.sqrt(group[0].shape[-1]) * torch.rsqrt(square_sum + eps)
        for v in group:
            v.mul_(factor)


# ================================================================================================
# Reward scaling by the spread of the running discounted return (FlashSAC).
#
# FlashSAC (Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement Learning for
# High-Dimensional Robot Control", arXiv:2604.04539, 2026) divides rewards by a statistic of the
# per-env running discounted return, so that returns land inside the critic's fixed categorical
# support ``[-g_max, g_max]`` whatever the task's reward magnitude. The public reference scales by
#
#     denominator = max( sqrt(Var[G] + eps),  max|G| / g_max )
#
# where ``G_t = gamma * G_{t-1} + r_t`` per env, ``Var[G]`` is the variance of every ``G`` value
# seen so far (all envs, all steps; parallel moment merge of Chan et al. 1979) and ``max|G|`` is
# the largest magnitude seen. The second term keeps the largest observed return within
# ``g_max`` after scaling. Set ``g_max=None`` for the plain variance rule.
#
# One deliberate difference from the reference: ``G`` restarts *after* an episode's last reward
# (``G_t = gamma * G_{t-1} * (1 - done_{t-1}) + r_t``), so the final reward of an episode is
# accumulated into that episode's return rather than into the next one's.
#
# All state lives on the device; :meth:`update` and :meth:`scale` never sync with the host.
# Rewards are stored raw in replay and scaled at update time with the current statistics.


class RewardScaler(nn.Module):
    """Running-return reward scaler; state is a set of buffers, so ``state_dict`` covers it.

    Args:
        num_envs: number of parallel environments (one running return each).
        gamma: discount of the running return (the agent's gamma).
        g_max: bound on the scaled return (critic support half-width), or ``None``.
        eps: added to the variance before the square root.
    """

    def __init__(
        self,
        num_envs: int,
        gamma: float,
        g_max: float | None = 5.0,
        eps: float = 1e-8,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if g_max is not None and g_max <= 0:
            raise ValueError(f"g_max must be positive or None, got {g_max}")
        self.gamma = gamma
        self.g_max = g_max
        self.eps = eps
        self.register_buffer("running_return", torch.zeros(num_envs, device=device))
        # Moments in float64: the count reaches 1e9+ in long runs, where float32 stops moving.
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones((), dtype=torch.float64, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64, device=device))
        self.register_buffer("abs_max", torch.zeros((), device=device))
        self.register_buffer("_pending_reset", torch.zeros(num_envs, device=device))

    @torch.no_grad()
    def update(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Fold one env step into the statistics.

        Args:
            reward: ``(num_envs,)`` raw rewards of this step.
            terminated, truncated: ``(num_envs,)`` bool episode ends of this step.
        """
        if reward.shape != self.running_return.shape:
            raise ValueError(f"reward must have shape {tuple(self.running_return.shape)}, got {tuple(reward.shape)}")
        running = self.running_return * (1.0 - self._pending_reset) * self.gamma + reward
        self.running_return.copy_(running)
        self._pending_reset.copy_((terminated | truncated).to(self._pending_reset.dtype))

        merge_moments_(self.mean, self.var, self.count, running.to(torch.float64))
        self.abs_max.copy_(torch.maximum(self.abs_max, running.abs().max()))

    def scale(self) -> torch.Tensor:
        """Current multiplicative reward scale, a 0-d float32 device tensor."""
        denominator = torch.sqrt(self.var + self.eps).to(torch.float32)
        if self.g_max is not None:
            denominator = torch.maximum(denominator, self.abs_max / self.g_max)
        return 1.0 / denominator


# ================================================================================================
# Temporally correlated exploration: Gaussian noise held for zeta-distributed durations.
#
# FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) repeats each standard-normal noise draw of
# the policy for ``L`` consecutive steps, ``L`` drawn from a zeta (Zipf) distribution truncated to
# ``{1, ..., max_length}``: ``P(L = l) = l^-s / sum_{k <= max_length} k^-s``. Most holds are short,
# a heavy tail is long, which gives the coverage of temporally extended exploration without a
# fixed time scale (the idea follows "temporally extended eps-greedy", Dabney, Ostrovski and
# Barreto, ICLR 2021). Here every env holds its own noise and duration.
#
# Lengths are drawn by inverse CDF (``searchsorted`` of a uniform draw in the precomputed CDF),
# so sampling is static-shape and stays on the device.


def truncated_zeta_pmf(exponent: float, max_length: int) -> torch.Tensor:
    """``P(L = l)`` for ``l = 1 .. max_length``, shape ``(max_length,)``, float64."""
    if exponent <= 0:
        raise ValueError(f"exponent must be positive, got {exponent}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    weights = torch.arange(1, max_length + 1, dtype=torch.float64) ** (-exponent)
    return weights / weights.sum()


class HeldNoise(nn.Module):
    """Per-env standard-normal noise ``(num_envs, act_dim)`` redrawn after zeta-distributed holds.

    Args:
        num_envs, act_dim: noise shape.
        exponent: zeta exponent ``s`` (FlashSAC uses 2).
        max_length: longest hold in steps (FlashSAC uses 16).
        generator: torch generator on ``device`` for reproducible draws (optional).
    """

    def __init__(
        self,
        num_envs: int,
        act_dim: int,
        exponent: float = 2.0,
        max_length: int = 16,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.generator = generator
        cdf = torch.cumsum(truncated_zeta_pmf(exponent, max_length), 0).to(torch.float32)
        # The last entry is 1 up to rounding; force it so every uniform draw maps to a length.
        cdf[-1] = 1.0
        self.register_buffer("cdf", cdf.to(device))
        self.register_buffer("noise", torch.zeros(num_envs, act_dim, device=device))
        self.register_buffer("remaining", torch.zeros(num_envs, dtype=torch.int64, device=device))

    def sample_lengths(self, count: int) -> torch.Tensor:
        """``count`` independent hold lengths in ``[1, max_length]``, int64."""
        uniform = torch.rand(count, device=self.cdf.device, generator=self.generator)
        return torch.searchsorted(self.cdf, uniform, right=True).clamp(max=self.cdf.numel() - 1) + 1

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        """Advance one env step and return the noise to use now, ``(num_envs, act_dim)``.

        Rows whose hold ran out get a fresh normal vector and a fresh length. The returned
        tensor is the persistent buffer (overwritten by the next call).
        """
        redraw = self.remaining <= 0
        fresh = torch.randn(self.noise.shape, device=self.noise.device, generator=self.generator)
        self.noise.copy_(torch.where(redraw.unsqueeze(-1), fresh, self.noise))
        lengths = self.sample_lengths(self.remaining.numel())
        self.remaining.copy_(torch.where(redraw, lengths, self.remaining) - 1)
        return self.noise

    @torch.no_grad()
    def reset(self, done: torch.Tensor) -> None:
        """Force a redraw on the next :meth:`step` for rows where ``done`` ``(num_envs,)`` is set."""
        self.remaining.masked_fill_(done, 0)
