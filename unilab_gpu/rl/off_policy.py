"""What SAC and FlashSAC share: the config base, the distributional soft actor-critic update and
its building blocks.

Both agents are soft actor-critic (Haarnoja et al., ICML 2018; learned temperature from
arXiv:1812.05905) with twin categorical critics (C51, Bellemare et al. 2017) and clipped
double-Q (Fujimoto et al., ICML 2018): the bootstrap distribution is that of the member with
the lower mean, shifted by the entropy bonus,

    Z_target = r_n + discount * (Z'_min - alpha * log pi(a' | s')),

projected onto the support. One :meth:`OffPolicyAgent.update` does a critic step, every
``actor_update_period`` updates an actor and a temperature step, a Polyak target update and a
learning-rate schedule step. It reads nothing back to the host: the returned metrics are 0-d
device tensors. Subclasses (:mod:`unilab_gpu.rl.sac`, :mod:`unilab_gpu.rl.flashsac`) provide
the networks, :meth:`OffPolicyAgent._prepare` (batch preprocessing), the two loss functions and
optional post-step hooks.

Read top to bottom: the config (:class:`OffPolicyConfig`, keys of ``configs/algo/*.yaml``), the
agent base, then the pieces it is made of (C51 projection, squashed Gaussian, temperature,
learning-rate schedule, optimizer helpers, running moments).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from unilab_gpu.utils.compiling import maybe_compile


@dataclass
class OffPolicyConfig:
    """Settings shared by SAC and FlashSAC (replay, schedule, optimisation, temperature).

    ``batch_size``, ``buffer_capacity_per_env``, ``final_obs_fraction``, ``warmup_steps`` and
    ``updates_per_step`` are read by the training loop; the agents read the rest. Defaults are
    holosoma's FastSAC G1 tracking preset where it sets a value, at 4096 envs (sources in
    ``configs/algo/sac.yaml``); :class:`~unilab_gpu.rl.flashsac.FlashSacConfig` overrides its own.
    """

    batch_size: int = 8192
    buffer_capacity_per_env: int = 1024
    final_obs_fraction: float = 0.125
    warmup_steps: int = 10
    updates_per_step: int = 4
    gamma: float = 0.99
    n_step: int = 1
    tau: float = 0.05
    learning_rate: float = 3e-4
    learning_rate_end: float = 3e-4
    learning_rate_decay_steps: int = 100_000
    """Updates over which the cosine schedule decays; ``0`` in a preset: the whole run
    (``unilab-train`` sets it from ``total_env_steps``, see :func:`run_updates`)."""
    adam_betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.001
    max_grad_norm: float = 0.0
    actor_update_period: int = 2
    num_atoms: int = 501
    v_min: float = -20.0
    v_max: float = 20.0
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    alpha_init: float = 0.001
    target_entropy_ratio: float = 0.75
    compile: bool = True

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)  # YAML gives a list
        check_field(self.batch_size >= 1, "batch_size", ">= 1", self.batch_size)
        check_field(self.n_step >= 1, "n_step", ">= 1", self.n_step)
        check_field(
            self.buffer_capacity_per_env > self.n_step,
            "buffer_capacity_per_env",
            f"> n_step ({self.n_step})",
            self.buffer_capacity_per_env,
        )
        check_field(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]", self.gamma)
        check_field(0.0 < self.tau <= 1.0, "tau", "in (0, 1]", self.tau)
        check_field(self.num_atoms >= 2, "num_atoms", ">= 2", self.num_atoms)
        check_field(self.v_max > self.v_min, "v_max", f"> v_min ({self.v_min})", self.v_max)
        low = self.log_std_min
        check_field(self.log_std_max > low, "log_std_max", f"> log_std_min ({low})", self.log_std_max)
        check_field(self.actor_update_period >= 1, "actor_update_period", ">= 1", self.actor_update_period)
        check_field(self.updates_per_step >= 1, "updates_per_step", ">= 1", self.updates_per_step)
        check_field(self.alpha_init > 0, "alpha_init", "> 0", self.alpha_init)
        check_field(self.max_grad_norm >= 0, "max_grad_norm", ">= 0 (0 disables clipping)", self.max_grad_norm)
        check_field(len(self.adam_betas) == 2, "adam_betas", "two numbers", self.adam_betas)


def check_field(ok: bool, name: str, expected: str, value: object) -> None:
    if not ok:
        raise ValueError(f"algo config: '{name}' must be {expected}, got {value!r}")


ConfigT = TypeVar("ConfigT", bound=OffPolicyConfig)


def config_from_dict(cls: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
    """Build ``cls`` from a plain mapping (e.g. ``OmegaConf.to_container(cfg.algo)``).

    Unknown keys are an error that names them, so a typo in a YAML override cannot be ignored.
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {unknown}; valid keys are {sorted(known)}")
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        _check_type(name, hints[name], value)
    return cls(**values)


def _check_type(name: str, hint: Any, value: Any) -> None:
    """Raise naming ``name`` unless ``value`` fits ``hint`` (bool, int, float, str, tuple[...] of
    those); other annotations are left to the config's own checks."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not set(args) - {Ellipsis} <= set(_KINDS):
            return
        ok = isinstance(value, (list, tuple)) and all(
            _fits(args[0] if args[-1] is Ellipsis else args[min(i, len(args) - 1)], v) for i, v in enumerate(value)
        )
        expected = f"a list of {_KINDS[args[0]]}s"
    elif hint in _KINDS:
        ok, expected = _fits(hint, value), f"a {_KINDS[hint]}"
    else:
        return
    if not ok:
        raise ValueError(f"algo config: 'algo.{name}' must be {expected}, got {value!r}")


_KINDS = {bool: "boolean", int: "whole number", float: "finite number", str: "string"}


def _fits(hint: type, value: Any) -> bool:
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def steps_before_updates(warmup_steps: int, n_step: int) -> int:
    """Env steps in replay before the trainer's first update: the warm-up, and at least one full
    n-step window with its successor observation."""
    return max(warmup_steps, n_step + 1)


def run_updates(cfg: OffPolicyConfig, iterations: int) -> int:
    """Gradient updates of a run of ``iterations`` (from :func:`steps_before_updates` on), at least 1."""
    first = steps_before_updates(cfg.warmup_steps, cfg.n_step)
    return max(1, (iterations - first + 1) * cfg.updates_per_step)


# ================================================================================================
# The agent base: the update of the module docstring.

BATCH_KEYS = (
    "policy_obs",
    "critic_obs",
    "action",
    "reward",
    "next_policy_obs",
    "next_critic_obs",
    "discount",
)
"""Keys of a training batch, as returned by :meth:`unilab_gpu.rl.replay.ReplayBuffer.sample`."""


class OffPolicyAgent:
    """Base class; see the module docstring. Subclasses set ``actor``, ``critic`` and
    ``target_critic`` in :meth:`_build_networks` and may add stateful modules to
    ``self.stateful`` (they are saved by :meth:`state_dict`)."""

    actor: nn.Module
    critic: nn.Module
    target_critic: nn.Module

    def __init__(
        self,
        cfg: OffPolicyConfig,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        device: torch.device | str | None = None,
        compile_backend: str = "inductor",
    ) -> None:
        self.cfg = cfg
        self.policy_obs_dim = policy_obs_dim
        self.critic_obs_dim = critic_obs_dim
        self.act_dim = act_dim
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.stateful: dict[str, nn.Module] = {}
        self._build_networks()
        self.target_critic.load_state_dict(self.critic.state_dict())
        self.target_critic.requires_grad_(False)
        self.temperature = Temperature(cfg.alpha_init, -cfg.target_entropy_ratio * act_dim).to(self.device)
        if cfg.learning_rate_decay_steps < 1:
            raise ValueError(
                "learning_rate_decay_steps must be >= 1 when an agent is built; 0 (decay over the whole run) is "
                "resolved by unilab-train: set it with rl.off_policy.run_updates(cfg, iterations)"
            )
        self.schedule = CosineSchedule(
            cfg.learning_rate, cfg.learning_rate_end, cfg.learning_rate_decay_steps, device=self.device
        )
        self.support = categorical_support(cfg.num_atoms, cfg.v_min, cfg.v_max, device=self.device)
        self.stateful.update(
            actor=self.actor,
            critic=self.critic,
            target_critic=self.target_critic,
            temperature=self.temperature,
            schedule=self.schedule,
        )

        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.target_critic.parameters())
        self.optimizers = {
            "actor": make_adamw(self._actor_params, self.schedule.lr, cfg.adam_betas, cfg.weight_decay),
            "critic": make_adamw(self._critic_params, self.schedule.lr, cfg.adam_betas, cfg.weight_decay),
            "temperature": make_adamw(self.temperature.parameters(), self.schedule.lr, cfg.adam_betas, 0.0),
        }
        on = cfg.compile
        self._critic_loss = maybe_compile(self._critic_loss_impl, on, compile_backend)
        self._actor_loss = maybe_compile(self._actor_loss_impl, on, compile_backend)
        self._target_update = maybe_compile(self._target_update_impl, on, compile_backend)
        self._policy = maybe_compile(self._policy_impl, on, compile_backend)
        self.num_updates = 0
        self.data_parallel: Any = None
        """A :class:`~unilab_gpu.rl.distributed.DataParallel` once attached (data-parallel training):
        it averages gradients after each backward and merges statistics before each update."""
        zero = torch.zeros((), device=self.device)
        self._last_actor_loss, self._last_entropy = zero, zero.clone()

    # -- subclass interface -------------------------------------------------------------------
    def _build_networks(self) -> None:
        raise NotImplementedError

    def _prepare(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Batch preprocessing outside the compiled losses (normalisation, reward scaling)."""
        return batch

    def _critic_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the critic loss and the mean predicted Q (0-d each)."""
        raise NotImplementedError

    def _actor_loss_impl(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Return the actor loss and the policy entropy estimate ``-E[log pi]`` (0-d each)."""
        raise NotImplementedError

    def _policy_impl(self, policy_obs: torch.Tensor, *args: Any) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]`` (compiled as ``self._policy``)."""
        raise NotImplementedError

    def _after_actor_step(self) -> None:
        """Hook run after each actor optimizer step."""

    def _after_critic_step(self) -> None:
        """Hook run after each critic optimizer step."""

    def observe_step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """See one env step ``(num_envs,)`` (reward, episode ends); the trainer calls it once per
        env step. Agents with per-env state (FlashSAC's reward scaler and held noise) override it."""

    # -- shared math --------------------------------------------------------------------------
    def _bootstrap_target(
        self,
        next_logits: torch.Tensor,
        reward: torch.Tensor,
        discount: torch.Tensor,
        next_log_prob: torch.Tensor,
        per_member: bool = False,
    ) -> torch.Tensor:
        """Projected soft target from target-critic logits ``(2, B, atoms)``.

        Clipped double-Q (default): the target of the member with the lower mean, ``(B, atoms)``,
        for both critics. ``per_member``: each member's own target, ``(2, B, atoms)``, so each
        critic learns from its own target network (holosoma's FastSAC).
        """
        next_probs = torch.softmax(next_logits, dim=-1)
        # r + d * (z - alpha * log pi) = (r - d * alpha * log pi) + d * z
        shifted_reward = reward - discount * self.temperature.alpha() * next_log_prob
        if per_member:
            members = next_probs.shape[0]
            flat = project_categorical(
                next_probs.flatten(0, 1), shifted_reward.repeat(members), discount.repeat(members), self.support
            )
            return flat.view_as(next_probs)
        lower = expected_value(next_probs, self.support).argmin(dim=0)  # (B,)
        index = lower.view(1, -1, 1).expand(1, -1, next_probs.shape[-1])
        chosen = next_probs.gather(0, index).squeeze(0)
        return project_categorical(chosen, shifted_reward, discount, self.support)

    def _distributional_loss(self, logits: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Critic loss and mean predicted Q (0-d each) of twin logits ``(2, B, atoms)`` against a
        target ``(B, atoms)`` shared by both members or ``(2, B, atoms)``, one per member: the
        members' cross-entropies, each a mean over the batch, summed."""
        loss = categorical_cross_entropy(logits, target.expand_as(logits)).mean(dim=-1).sum()
        q_mean = expected_value(torch.softmax(logits.detach(), dim=-1), self.support).mean()
        return loss, q_mean

    def _twin_q(self, logits: torch.Tensor, reduce: str = "min") -> torch.Tensor:
        """Q value ``(B,)`` from twin logits ``(2, B, atoms)``: the members' minimum (clipped
        double-Q) or, with ``reduce="mean"``, their mean."""
        values = expected_value(torch.softmax(logits, dim=-1), self.support)
        return values.mean(dim=0) if reduce == "mean" else values.min(dim=0).values

    def _target_update_impl(self) -> None:
        polyak_update_(self._target_params, self._critic_params, self.cfg.tau)

    # -- public API ---------------------------------------------------------------------------
    def _check_batch(self, batch: dict[str, torch.Tensor]) -> None:
        missing = [k for k in BATCH_KEYS if k not in batch]
        if missing:
            raise KeyError(f"update batch is missing keys {missing}; expected {list(BATCH_KEYS)}")
        size = batch["reward"].shape[0]
        expected = {
            "policy_obs": (size, self.policy_obs_dim),
            "next_policy_obs": (size, self.policy_obs_dim),
            "critic_obs": (size, self.critic_obs_dim),
            "next_critic_obs": (size, self.critic_obs_dim),
            "action": (size, self.act_dim),
            "reward": (size,),
            "discount": (size,),
        }
        for key, shape in expected.items():
            if tuple(batch[key].shape) != shape:
                raise ValueError(f"update batch '{key}' must have shape {shape}, got {tuple(batch[key].shape)}")

    def _optimize(self, name: str, loss: torch.Tensor, params: list[nn.Parameter]) -> None:
        self.optimizers[name].zero_grad(set_to_none=False)
        loss.backward()
        if self.data_parallel is not None:  # before clipping: every rank clips the same mean gradient
            self.data_parallel.average_gradients(name)
        if name != "temperature":
            clip_gradients_(params, self.cfg.max_grad_norm)
        self.optimizers[name].step()

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient update from a replay batch (keys :data:`BATCH_KEYS`).

        Returns 0-d device tensors ``critic_loss``, ``actor_loss``, ``alpha``, ``entropy`` and
        ``q_mean``; actor values are those of the latest actor step.
        """
        self._check_batch(batch)
        if self.data_parallel is not None:
            self.data_parallel.before_update()
        batch = self._prepare(batch)
        critic_loss, q_mean = self._critic_loss(batch)
        self._optimize("critic", critic_loss, self._critic_params)
        self._after_critic_step()
        if self.num_updates % self.cfg.actor_update_period == 0:
            actor_loss, entropy = self._actor_loss(batch)
            self._optimize("actor", actor_loss, self._actor_params)
            self._after_actor_step()
            self._optimize("temperature", self.temperature.loss(entropy), [])
            self._last_actor_loss, self._last_entropy = actor_loss.detach(), entropy.detach()
        self._target_update()
        self.schedule.step()
        self.num_updates += 1
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._last_actor_loss,
            "alpha": self.temperature.alpha(),
            "entropy": self._last_entropy,
            "q_mean": q_mean.detach(),
        }

    def _check_policy_obs(self, policy_obs: torch.Tensor) -> None:
        if policy_obs.dim() != 2 or policy_obs.shape[-1] != self.policy_obs_dim:
            raise ValueError(
                f"policy_obs must have shape (num_envs, {self.policy_obs_dim}), got {tuple(policy_obs.shape)}"
            )

    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, temperature, schedule, normalisers and optimizer states."""
        return {
            "modules": {name: module.state_dict() for name, module in self.stateful.items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "num_updates": self.num_updates,
            "last_actor_metrics": (self._last_actor_loss, self._last_entropy),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, module in self.stateful.items():
            module.load_state_dict(state["modules"][name])
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
            # Loading replaces the lr entry with the saved tensor; re-link the schedule's tensor
            # so schedule steps keep reaching the optimizer.
            for group in opt.param_groups:
                group["lr"] = self.schedule.lr
        self.num_updates = int(state["num_updates"])
        self._last_actor_loss, self._last_entropy = (t.to(self.device) for t in state["last_actor_metrics"])


# ================================================================================================
# Categorical return distributions (C51).
#
# The critic predicts a categorical distribution over a fixed, evenly spaced support
# ``z_j = v_min + j * dz``. The Bellman target ``r + discount * z`` falls between atoms, so it is
# projected back onto the support by splitting each atom's probability between its two
# neighbours in proportion to distance (Bellemare, Dabney and Munos, "A Distributional Perspective
# on Reinforcement Learning", ICML 2017, Algorithm 1).
#
# All functions are batched and static-shape (gather/scatter only), so they trace into a single
# ``torch.compile(fullgraph=True)`` graph.


def categorical_support(
    num_atoms: int, v_min: float, v_max: float, device: torch.device | str | None = None
) -> torch.Tensor:
    """Evenly spaced atom values ``(num_atoms,)`` from ``v_min`` to ``v_max`` inclusive."""
    if num_atoms < 2:
        raise ValueError(f"num_atoms must be >= 2, got {num_atoms}")
    if not v_max > v_min:
        raise ValueError(f"v_max must be greater than v_min, got v_min={v_min}, v_max={v_max}")
    return torch.linspace(v_min, v_max, num_atoms, device=device, dtype=torch.float32)


def project_categorical(
    next_probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``reward + discount * Z`` onto ``support``.

    Args:
        next_probs: probabilities of ``Z`` on ``support``, ``(batch, num_atoms)``.
        reward: ``(batch,)``.
        discount: ``(batch,)``; 0 at terminal transitions puts all mass next to ``reward``.
        support: atom values ``(num_atoms,)``, evenly spaced.

    Returns:
        Projected probabilities ``(batch, num_atoms)``; each row sums to the row sum of
        ``next_probs``. Values outside ``[v_min, v_max]`` are clamped to the end atoms, +-inf
        too; a NaN target goes to the first atom. The scatter indices stay in range whatever
        the input: an out-of-range index is a device-side assert on CUDA, and the trainer stops
        on the NaN losses at its next logging point instead.
    """
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    target = reward.unsqueeze(-1) + discount.unsqueeze(-1) * support
    position = ((target - v_min) / delta).nan_to_num(nan=0.0).clamp(0, num_atoms - 1)
    # Take the lower neighbour in [0, num_atoms - 2] so the upper one always exists; a target
    # exactly on an atom then gets weight 1 on one side and 0 on the other, which avoids the
    # lower == upper special case of the original algorithm.
    lower = position.floor().clamp(0, num_atoms - 2)
    upper_weight = position - lower
    lower_index = lower.long()
    projected = torch.zeros_like(next_probs)
    projected.scatter_add_(-1, lower_index, next_probs * (1.0 - upper_weight))
    projected.scatter_add_(-1, lower_index + 1, next_probs * upper_weight)
    return projected


def categorical_cross_entropy(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """``-sum_j target_j * log softmax(logits)_j`` over the last axis, shape ``logits.shape[:-1]``."""
    return -(target_probs * torch.log_softmax(logits, dim=-1)).sum(dim=-1)


def expected_value(probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Mean of a categorical distribution ``(..., num_atoms)`` -> ``(...)``."""
    return (probs * support).sum(dim=-1)


# ================================================================================================
# Tanh-squashed diagonal Gaussian policy distribution (SAC).
#
# An action is ``a = tanh(u)`` with ``u ~ N(mean, std^2)``. By the change of variables, its
# density is ``log p(a) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2)`` (Haarnoja et al.,
# "Soft Actor-Critic: Off-Policy Maximum Entropy Deep RL with a Stochastic Actor", ICML 2018,
# appendix C). The Jacobian term is evaluated as ``2 (log 2 - u - softplus(-2u))``, which equals
# ``log(1 - tanh(u)^2)`` but stays finite where ``tanh(u)`` rounds to +-1.

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def bounded_log_std(raw: torch.Tensor, log_std_min: float, log_std_max: float) -> torch.Tensor:
    """Map an unbounded head output to ``[log_std_min, log_std_max]`` smoothly (tanh)."""
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)


def tanh_log_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log(1 - tanh(u)^2)``, numerically stable for large ``|u|``."""
    return 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))


def sample_squashed_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised sample and its log-density.

    Args:
        mean, log_std: ``(batch, act_dim)`` parameters of the pre-tanh Gaussian.
        noise: ``(batch, act_dim)`` standard-normal draws.

    Returns:
        ``action`` in ``(-1, 1)``, ``(batch, act_dim)``, and ``log_prob`` ``(batch,)``.
    """
    pre_tanh = mean + log_std.exp() * noise
    gaussian = -0.5 * noise.square() - log_std - _LOG_SQRT_2PI
    log_prob = (gaussian - tanh_log_det_jacobian(pre_tanh)).sum(dim=-1)
    return torch.tanh(pre_tanh), log_prob


class SquashedGaussian(nn.Module):
    """Base of both agents' actors: ``forward(obs, **mode)`` returns the pre-tanh ``mean`` and the
    bounded ``log_std`` (each ``(batch, act_dim)``; :meth:`bounded` maps a raw head output into
    ``[log_std_min, log_std_max]``), and :meth:`sample` draws from the squashed Gaussian."""

    def __init__(self, log_std_min: float, log_std_max: float) -> None:
        super().__init__()
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def bounded(self, raw_log_std: torch.Tensor) -> torch.Tensor:
        return bounded_log_std(raw_log_std, self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor, **mode: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised ``action`` ``(batch, act_dim)`` in (-1, 1) and ``log_prob`` ``(batch,)``;
        ``mode`` goes to ``forward`` (FlashSAC's ``batch_stats``)."""
        mean, log_std = self(obs, **mode)
        return sample_squashed_gaussian(mean, log_std, torch.randn_like(mean))


# ================================================================================================
# Learned SAC temperature ``alpha`` with a target entropy.
#
# Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (arXiv:1812.05905, 2018),
# section 5: alpha is tuned by minimising ``E[alpha * (H(pi) - H_target)]`` -- it grows when the
# policy's entropy falls below the target and shrinks above it. ``log_alpha`` is the parameter,
# which keeps alpha positive and makes the step size independent of alpha's magnitude. The
# target is ``-ratio * act_dim`` (``ratio = 1`` is the paper's heuristic).


class Temperature(nn.Module):
    """Entropy coefficient ``alpha = exp(log_alpha)``."""

    def __init__(self, init: float, target_entropy: float) -> None:
        super().__init__()
        if init <= 0:
            raise ValueError(f"initial temperature must be positive, got {init}")
        self.target_entropy = target_entropy
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init)))

    def alpha(self) -> torch.Tensor:
        """Current ``alpha``, 0-d, detached (it is a constant for actor and critic losses)."""
        return self.log_alpha.detach().exp()

    def loss(self, entropy: torch.Tensor) -> torch.Tensor:
        """Temperature loss for the batch policy entropy estimate ``entropy`` (0-d, no grad)."""
        return self.log_alpha * (entropy.detach() - self.target_entropy)


# ================================================================================================
# Learning-rate schedules held as device tensors.
#
# The optimizer's ``lr`` is a 0-d tensor shared with the schedule, and :meth:`CosineSchedule.step`
# rewrites it in place, so advancing the schedule costs one tiny kernel and never a host sync (a
# Python float ``lr`` would have to be read back if it were computed on the device, and would be
# baked into a captured graph). FlashSAC decays 3e-4 to 1.5e-4 with a cosine over training
# (Kim, Lee et al., arXiv:2604.04539, 2026; cosine annealing after Loshchilov and Hutter,
# "SGDR", ICLR 2017).


class CosineSchedule(nn.Module):
    """``lr(k) = end + (start - end) * (1 + cos(pi * min(k / total_steps, 1))) / 2``.

    ``lr`` and ``num_steps`` are buffers (so they are saved in ``state_dict``); pass ``lr`` to
    optimizers that accept a tensor learning rate (``capturable=True`` or ``fused=True``).
    """

    def __init__(self, start: float, end: float, total_steps: int, device: torch.device | str | None = None) -> None:
        super().__init__()
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        if start <= 0 or end <= 0:
            raise ValueError(f"learning rates must be positive, got start={start}, end={end}")
        self.start = start
        self.end = end
        self.total_steps = total_steps
        self.register_buffer("lr", torch.tensor(start, dtype=torch.float32, device=device))
        self.register_buffer("num_steps", torch.zeros((), dtype=torch.int64, device=device))

    @torch.no_grad()
    def step(self) -> None:
        """Advance one step and rewrite ``lr`` in place."""
        self.num_steps.add_(1)
        progress = (self.num_steps.to(torch.float32) / self.total_steps).clamp(max=1.0)
        self.lr.copy_(self.end + 0.5 * (self.start - self.end) * (1.0 + torch.cos(math.pi * progress)))


# ================================================================================================
# Optimizer steps that stay on the device: AdamW with a tensor learning rate, Polyak averaging.
#
# The fused AdamW kernel keeps its step counters on the parameters' device and accepts a shared
# 0-d tensor ``lr`` that a schedule rewrites in place (:class:`CosineSchedule`), so an
# optimizer step reads nothing back to the host; it runs the same way on the CPU (AdamW:
# Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019). The trainer runs
# updates eagerly, outside any CUDA graph: capturing ``step()`` would also need
# ``capturable=True`` (torch 2.13 refuses to capture a step of an optimizer built without it).


def make_adamw(
    params: Iterable[nn.Parameter], lr: torch.Tensor, betas: tuple[float, float], weight_decay: float
) -> torch.optim.AdamW:
    """AdamW over ``params`` reading its learning rate from the tensor ``lr``."""
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=True)


def clip_gradients_(params: list[nn.Parameter], max_norm: float) -> None:
    """Clip the global gradient norm to ``max_norm``; ``0`` disables. Never syncs with the host."""
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=False)


@torch.no_grad()
def polyak_update_(target: list[torch.Tensor], online: list[torch.Tensor], tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online`` for each pair (target networks, Lillicrap
    et al., "Continuous control with deep reinforcement learning", ICLR 2016)."""
    torch._foreach_lerp_(target, online, tau)


# ================================================================================================
# Merging a batch into running mean/variance statistics, in place on the device.
#
# The parallel algorithm of Chan, Golub and LeVeque (1979): exact for any batch sizes, and stable
# where the naive sum-of-squares update is not.


@torch.no_grad()
def merge_moments_(
    mean: torch.Tensor,
    var: torch.Tensor,
    count: torch.Tensor,
    batch: torch.Tensor,
    all_reduce: Callable[[torch.Tensor], None] | None = None,
) -> None:
    """Fold ``batch`` (samples along dim 0, or all elements for a scalar ``mean``) into
    ``mean``/``var`` (population variance) and the scalar ``count``, in place.

    ``all_reduce`` (data-parallel training, :mod:`unilab_gpu.rl.distributed`) sums a flat tensor
    over all ranks in place; the batch folded in is then the union of every rank's ``batch``.
    """
    if mean.dim() == 0:
        batch = batch.reshape(-1)
    if all_reduce is None:
        batch_count: torch.Tensor | int = batch.shape[0]
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, correction=0)
    else:
        batch_count, batch_mean, batch_var = _union_moments(batch, mean, all_reduce)
    total = count + batch_count
    delta = batch_mean - mean
    m2 = var * count + batch_var * batch_count + delta.square() * count * batch_count / total
    mean.add_(delta * batch_count / total)
    var.copy_(m2 / total)
    count.copy_(total)


def _union_moments(
    batch: torch.Tensor, center: torch.Tensor, all_reduce: Callable[[torch.Tensor], None]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count (0-d), mean and population variance (``center``'s shape) of the union of every
    rank's ``batch`` ``(B, *center.shape)``, from one ``all_reduce`` of ``1 + 2 * center.numel()``
    sums. ``center`` (the running mean) is equal on every rank and near the data, so the sums of
    ``x - center`` and ``(x - center)^2`` combine without the cancellation of raw sums of squares."""
    shifted = batch.to(center.dtype) - center
    sums = torch.cat(
        [
            torch.full((1,), float(batch.shape[0]), dtype=center.dtype, device=center.device),
            shifted.sum(dim=0).reshape(-1),
            shifted.square().sum(dim=0).reshape(-1),
        ]
    )
    all_reduce(sums)
    dim = center.numel()
    total = sums[0]
    offset = sums[1 : 1 + dim].view_as(center) / total
    var = sums[1 + dim :].view_as(center) / total - offset.square()
    return total, center + offset, var.clamp_min(0.0)
