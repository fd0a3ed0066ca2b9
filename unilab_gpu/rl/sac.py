"""FastSAC-style soft actor-critic for massively parallel envs.

SAC (Haarnoja et al., ICML 2018, and arXiv:1812.05905 for the learned temperature) with the
recipe of FastTD3/FastSAC (Seo et al., 2025): large batches from thousands of parallel envs,
distributional C51 critics (Bellemare et al., 2017) with LayerNorm + SiLU MLPs, running
observation normalisation, AdamW and a fast Polyak target. The critics see the critic
observation group (which may be privileged); the actor sees the policy group.

Observation statistics are updated from each training batch (the distribution the networks
are trained on) and frozen in :meth:`SacAgent.act`. The whole update reads top to bottom in
:meth:`SacAgent.update_body`, made of the pieces in :mod:`unilab_gpu.rl.off_policy`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call

from unilab_gpu.rl.config import check_field, preset_values
from unilab_gpu.rl.off_policy import OffPolicyAgent, bootstrap_target, distributional_loss, twin_q
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.optimization import polyak_update_
from unilab_gpu.rl.running_moments import merge_moments_
from unilab_gpu.rl.squashed_gaussian import SquashedGaussian
from unilab_gpu.rl.value_range import value_bound
from unilab_gpu.utils.compiling import maybe_compile

_SAC = preset_values("sac")


@dataclass
class SacConfig(OffPolicyConfig):
    """FastSAC-style SAC: LayerNorm MLPs, C51 critics, observation normalisation. Defaults:
    ``configs/algo/sac.yaml``'s values (:class:`OffPolicyConfig`)."""

    name: str = _SAC["name"]
    critic_target: str = _SAC["critic_target"]
    """``"per_member"``: each twin critic learns from its own target member (holosoma's FastSAC);
    ``"min"``: both from the member with the lower mean (clipped double-Q, as FlashSAC)."""
    actor_q: str = _SAC["actor_q"]
    """How the actor loss combines the twin Q values: ``"mean"`` (holosoma) or ``"min"``."""
    actor_hidden_dims: tuple[int, ...] = tuple(_SAC["actor_hidden_dims"])
    critic_hidden_dims: tuple[int, ...] = tuple(_SAC["critic_hidden_dims"])
    normalize_obs: bool = _SAC["normalize_obs"]
    obs_norm_clip: float = _SAC["obs_norm_clip"]

    def __post_init__(self) -> None:
        super().__post_init__()
        self.actor_hidden_dims = tuple(self.actor_hidden_dims)
        self.critic_hidden_dims = tuple(self.critic_hidden_dims)
        check_field(
            self.critic_target in ("per_member", "min"), "critic_target", "'per_member' or 'min'", self.critic_target
        )
        check_field(self.actor_q in ("mean", "min"), "actor_q", "'mean' or 'min'", self.actor_q)
        check_field(len(self.actor_hidden_dims) > 0, "actor_hidden_dims", "at least one layer", self.actor_hidden_dims)
        check_field(
            len(self.critic_hidden_dims) > 0, "critic_hidden_dims", "at least one layer", self.critic_hidden_dims
        )


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
    actor: SquashedGaussianActor
    critic: TwinCategoricalCritic
    target_critic: TwinCategoricalCritic

    def __init__(
        self,
        cfg: SacConfig,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        device: torch.device | str | None = None,
        compile_backend: str = "inductor",
    ) -> None:
        dev = torch.device("cpu" if device is None else device)
        actor = SquashedGaussianActor(
            policy_obs_dim, act_dim, cfg.actor_hidden_dims, cfg.log_std_min, cfg.log_std_max
        ).to(dev)
        critic = TwinCategoricalCritic(critic_obs_dim, act_dim, cfg.critic_hidden_dims, cfg.num_atoms).to(dev)
        clip = cfg.obs_norm_clip
        self.policy_norm = ObsNormalizer(policy_obs_dim, clip=clip, enabled=cfg.normalize_obs, device=dev)
        self.critic_norm = ObsNormalizer(critic_obs_dim, clip=clip, enabled=cfg.normalize_obs, device=dev)
        norms = {"policy_norm": self.policy_norm, "critic_norm": self.critic_norm}
        super().__init__(cfg, policy_obs_dim, critic_obs_dim, act_dim, dev, actor, critic, norms)
        self._support_sized = False  # host flag: a captured update must not record the one-time sizing
        on = cfg.compile
        self._critic_loss = maybe_compile(self._critic_loss_impl, on, compile_backend)
        self._actor_loss = maybe_compile(self._actor_loss_impl, on, compile_backend)
        self._target_update = maybe_compile(self._target_update_impl, on, compile_backend)
        self._policy = maybe_compile(self._policy_impl, on, compile_backend)

    # -- the update ----------------------------------------------------------------------------
    def update_body(self, batch: dict[str, torch.Tensor], actor_step: bool) -> dict[str, torch.Tensor]:
        """One SAC update from a replay batch (keys :data:`~unilab_gpu.rl.off_policy.BATCH_KEYS`),
        with an actor and a temperature step if ``actor_step``; see
        :meth:`OffPolicyAgent.update_body <unilab_gpu.rl.off_policy.OffPolicyAgent.update_body>`."""
        # Prepare: mirror images; observation statistics from the batch the networks train on,
        # then normalised observations; the first update sizes the support (value_range).
        batch = self._mirrored(batch)
        self.policy_norm.update(batch["policy_obs"])
        self.critic_norm.update(batch["critic_obs"])
        batch = dict(batch)
        for key, norm in (("policy_obs", self.policy_norm), ("critic_obs", self.critic_norm)):
            batch[key], batch[f"next_{key}"] = norm(batch[key]), norm(batch[f"next_{key}"])
        if self.cfg.value_range == "reward_scale" and self.num_updates == 0 and not self._support_sized:
            self._size_support(batch["reward"])
            self._support_sized = True
        # Critic: cross-entropy to the projected soft target, one step.
        critic_loss, q_mean = self._critic_loss(batch)
        self.optimizers.step("critic", critic_loss, self.data_parallel)
        # Actor and temperature, one in every actor_update_period updates.
        if actor_step:
            actor_loss, entropy = self._actor_loss(batch)
            self.optimizers.step("actor", actor_loss, self.data_parallel)
            self.optimizers.step("temperature", self.temperature.loss(entropy), self.data_parallel)
            self._record_actor_step(actor_loss, entropy)
        # Target critic: Polyak average; then the learning-rate schedule.
        self._target_update()
        self.schedule.step()
        return self._metrics(critic_loss, q_mean)

    def _size_support(self, reward: torch.Tensor) -> None:
        """``value_range: reward_scale``: respace the support from the first batch's n-step
        rewards ``(B,)``, the largest bound of all ranks in a data-parallel run."""
        cfg = self.cfg
        bound = value_bound(reward, cfg.gamma, cfg.n_step, cfg.value_range_margin)
        if self.data_parallel is not None:
            bound = self.data_parallel.all_gather(bound.view(1), "value range").max()
        self.value_support.resize_(bound)

    def _critic_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic loss and mean predicted Q (0-d each) of a normalised batch: cross-entropy of the
        twin critics to the projected soft target of the target critic (``cfg.critic_target``)."""
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(batch["next_policy_obs"])
            next_logits = self.target_critic(batch["next_critic_obs"], next_action)
            alpha, per_member = self.temperature.alpha(), self.cfg.critic_target == "per_member"
            target = bootstrap_target(
                next_logits, batch["reward"], batch["discount"], next_log_prob, alpha, self.support, per_member
            )
        logits = self.critic(batch["critic_obs"], batch["action"])
        return distributional_loss(logits, target, self.support)

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor loss ``E[alpha * log pi - Q]`` (twin Q by ``cfg.actor_q``) and the policy entropy
        estimate ``-E[log pi]`` (0-d each) of a normalised batch."""
        action, log_prob = self.actor.sample(batch["policy_obs"])
        # Critic weights enter as constants so the actor loss builds no critic gradients.
        frozen = {name: p.detach() for name, p in self.critic.named_parameters()}
        logits = functional_call(self.critic, frozen, (batch["critic_obs"], action))
        loss = (self.temperature.alpha() * log_prob - twin_q(logits, self.support, self.cfg.actor_q)).mean()
        return loss, -log_prob.detach().mean()

    def _target_update_impl(self) -> None:
        polyak_update_(self._target_params, self._critic_params, self.cfg.tau)

    # -- acting --------------------------------------------------------------------------------
    def _policy_impl(self, policy_obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        obs = self.policy_norm(policy_obs)
        return self.actor.mode(obs) if deterministic else self.actor.sample(obs)[0]

    @torch.no_grad()
    def action_std(self, policy_obs: torch.Tensor) -> torch.Tensor:
        """The policy's standard deviation before the tanh, ``(batch, act_dim)``: its exploration."""
        return self.actor(self.policy_norm(policy_obs))[1].exp()

    @torch.no_grad()
    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]`` for ``policy_obs`` ``(num_envs, dim)``."""
        self._check_policy_obs(policy_obs)
        return self._policy(policy_obs, deterministic)

    def deterministic_policy(self) -> nn.Module:
        """A copy of the deterministic policy (normaliser and actor's mode) as one module."""
        return SacPolicy(self)


class SacPolicy(nn.Module):
    """``agent.act(obs, deterministic=True)`` as a self-contained module: ``(batch, obs_dim)``
    raw ``policy`` observations -> ``(batch, act_dim)`` actions in ``[-1, 1]``."""

    def __init__(self, agent: SacAgent) -> None:
        super().__init__()
        self.norm = copy.deepcopy(agent.policy_norm)
        self.actor = copy.deepcopy(agent.actor)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor.mode(self.norm(obs))


# ================================================================================================
# FastSAC-style networks: LayerNorm + SiLU MLPs, squashed-Gaussian actor, twin C51 critics.
#
# Following FastTD3/FastSAC (Seo et al., "FastTD3: Simple, Fast, and Capable Reinforcement
# Learning for Humanoid Control", 2025, and its SAC variant), each hidden layer is
# ``Linear -> LayerNorm -> SiLU`` and the critics are distributional (C51, Bellemare et al. 2017)
# over ``num_atoms`` atoms. The two critics of clipped double-Q (Fujimoto et al. 2018) take the
# critic observation group, which may carry privileged state the actor does not see.


def layer_norm_mlp(in_dim: int, hidden_dims: Sequence[int], out_dim: int) -> nn.Sequential:
    """``[Linear -> LayerNorm -> SiLU] * len(hidden_dims) -> Linear``."""
    if not hidden_dims:
        raise ValueError("hidden_dims must name at least one hidden layer")
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_dims:
        layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.SiLU()]
        width = hidden
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class SquashedGaussianActor(SquashedGaussian):
    """Policy ``pi(a | o)``: ``tanh`` of a diagonal Gaussian whose parameters an MLP predicts.

    The output layer starts at zero (holosoma's FastSAC): every state's first action is the
    centre of the action range (the default pose under ``bounds: joint_limits``) with the
    log-std at the middle of its range, instead of PyTorch's random offsets of about a third of
    the range per joint.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_dims: Sequence[int],
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__(log_std_min, log_std_max)
        self.act_dim = act_dim
        self.net = layer_norm_mlp(obs_dim, hidden_dims, 2 * act_dim)
        head = self.net[-1]
        assert isinstance(head, nn.Linear)
        nn.init.zeros_(head.weight)
        nn.init.zeros_(head.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(batch, obs_dim)`` -> pre-tanh ``mean`` and ``log_std``, each ``(batch, act_dim)``."""
        mean, raw_log_std = self.net(obs).chunk(2, dim=-1)
        return mean, self.bounded(raw_log_std)

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action ``tanh(mean)`` ``(batch, act_dim)``."""
        return torch.tanh(self(obs)[0])


class TwinCategoricalCritic(nn.Module):
    """Two independent C51 critics ``Z_i(o, a)``; logits ``(2, batch, num_atoms)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_dims: Sequence[int], num_atoms: int) -> None:
        super().__init__()
        self.members = nn.ModuleList([layer_norm_mlp(obs_dim + act_dim, hidden_dims, num_atoms) for _ in range(2)])

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([member(x) for member in self.members])


# ================================================================================================
# Running observation normalisation (per-feature mean and variance).
#
# Statistics are merged batch by batch with the parallel algorithm of Chan, Golub and LeVeque
# (1979), entirely on the device. Normalising inputs by running statistics is standard in
# massively parallel off-policy RL (e.g. FastTD3, Seo et al. 2025).
#
# The denominator is the standard deviation plus a floor, ``std + std_floor``, as in the
# ``EmpiricalNormalization`` of holosoma's FastSAC, FastTD3 and rsl_rl (``eps=1e-2``): a feature
# that is (nearly) constant, such as a joint that never moves or a one-hot that rarely changes, is
# amplified at most ``1 / std_floor`` times instead of pinned at the clip, which
# ``sqrt(var + 1e-8)`` (up to 10^4) does to any fluctuation of it.


class ObsNormalizer(nn.Module):
    """``(x - mean) / (sqrt(var) + std_floor)`` with running statistics over ``(batch, dim)`` inputs.

    Args:
        dim: feature size.
        std_floor: added to the standard deviation (the denominator is never below it).
        clip: normalised values are clipped to ``[-clip, clip]`` (``None`` disables).
        enabled: ``False`` makes the module the identity (no statistics kept up to date).
    """

    mean: torch.Tensor  # (dim,) running statistics
    var: torch.Tensor  # (dim,)
    count: torch.Tensor  # () samples merged so far

    def __init__(
        self,
        dim: int,
        std_floor: float = 1e-2,
        clip: float | None = 10.0,
        enabled: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.dim = dim
        if not std_floor > 0:
            raise ValueError(f"ObsNormalizer: std_floor must be > 0, got {std_floor!r}")
        self.std_floor = std_floor
        self.clip = clip
        self.enabled = enabled
        self.register_buffer("mean", torch.zeros(dim, device=device))
        self.register_buffer("var", torch.ones(dim, device=device))
        self.register_buffer("count", torch.zeros((), device=device))
        self.all_reduce: Callable[[torch.Tensor], None] | None = None
        """Set by data-parallel training (:mod:`unilab_gpu.rl.distributed`): sums a flat tensor over
        all ranks in place, so that :meth:`update` merges the batches of every rank."""

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() != 2 or x.shape[-1] != self.dim:
            raise ValueError(f"observations must have shape (batch, {self.dim}), got {tuple(x.shape)}")

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the statistics of a batch ``(batch, dim)`` (of every rank's, data-parallel)."""
        self._check(x)
        if not self.enabled:
            return
        merge_moments_(self.mean, self.var, self.count, x, self.all_reduce)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised copy of ``x`` ``(batch, dim)``."""
        self._check(x)
        if not self.enabled:
            return x
        y = (x - self.mean) / (self.var.sqrt() + self.std_floor)
        return y if self.clip is None else y.clamp(-self.clip, self.clip)
