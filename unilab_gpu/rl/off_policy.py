"""What SAC and FlashSAC share: the distributional soft actor-critic update.

Both agents are soft actor-critic (Haarnoja et al., ICML 2018; learned temperature from
arXiv:1812.05905) with twin categorical critics (C51, Bellemare et al. 2017) and clipped
double-Q (Fujimoto et al., ICML 2018): the bootstrap distribution is that of the member with
the lower mean, shifted by the entropy bonus,

    Z_target = r_n + discount * (Z'_min - alpha * log pi(a' | s')),

projected onto the support. One :meth:`OffPolicyAgent.update` does a critic step, every
``actor_update_period`` updates an actor and a temperature step, a Polyak target update and a
learning-rate schedule step. It reads nothing back to the host: the returned metrics are 0-d
device tensors. Its device work (:meth:`OffPolicyAgent.update_body`) is static-shape and writes
only persistent tensors, so the trainer can capture it, replay sampling included, as a CUDA graph
(:mod:`unilab_gpu.rl.update_step`). Subclasses (:mod:`unilab_gpu.rl.sac`, :mod:`unilab_gpu.rl.flashsac`) provide
the networks, :meth:`OffPolicyAgent._prepare` (batch preprocessing), the two loss functions and
optional post-step hooks.

The pieces it is made of have a module each: :mod:`~unilab_gpu.rl.off_policy_config` (the
config, keys of ``configs/algo/*.yaml``), :mod:`~unilab_gpu.rl.temperature` (the learned
temperature), :mod:`~unilab_gpu.rl.distributional` (C51 projection), :mod:`~unilab_gpu.rl.squashed_gaussian`
(the actor's distribution), :mod:`~unilab_gpu.rl.optimization` (learning-rate schedule, AdamW,
clipping, Polyak averaging) and :mod:`~unilab_gpu.rl.running_moments` (observation and reward
statistics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from unilab_gpu.rl.distributional import (
    categorical_cross_entropy,
    categorical_support,
    expected_value,
    project_categorical,
)
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.optimization import CosineSchedule, clip_gradients_, make_adamw, polyak_update_
from unilab_gpu.rl.temperature import Temperature
from unilab_gpu.rl.value_range import ValueSupport, value_bound
from unilab_gpu.utils.compiling import maybe_compile

if TYPE_CHECKING:
    from unilab_gpu.rl.symmetry import MirrorAugmentation


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
                "resolved by unilab-train: set it with rl.off_policy_config.run_updates(cfg, iterations)"
            )
        self.schedule = CosineSchedule(
            cfg.learning_rate, cfg.learning_rate_end, cfg.learning_rate_decay_steps, device=self.device
        )
        self.value_support = ValueSupport(categorical_support(cfg.num_atoms, cfg.v_min, cfg.v_max, device=self.device))
        self.support = self.value_support.atoms
        """Atom values ``(num_atoms,)``; ``value_range: reward_scale`` respaces them in place at the first update."""
        if cfg.value_range != "fixed":  # a fixed support is the config's: checkpoints stay as they were
            self.stateful["value_support"] = self.value_support
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
        # Written in place by actor steps, so that a captured update keeps writing the same memory.
        self._last_actor_loss = torch.zeros((), device=self.device)
        self._last_entropy = torch.zeros((), device=self.device)
        self.mirror: MirrorAugmentation | None = None
        """Mirrors ``cfg.mirror_fraction`` of every batch (set by the trainer, which knows the env)."""
        self._support_sized = False  # host flag: a captured update must not record the one-time sizing

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

    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]`` for ``policy_obs`` ``(num_envs, dim)``: what
        the trainer steps the env with (exploring unless ``deterministic``)."""
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

    def _size_support(self, reward: torch.Tensor) -> None:
        """``value_range: reward_scale``: respace the support from the first batch's (prepared)
        n-step rewards ``(B,)``, the largest bound of all ranks in a data-parallel run."""
        cfg = self.cfg
        bound = value_bound(reward, cfg.gamma, cfg.n_step, cfg.value_range_margin)
        if self.data_parallel is not None:
            bound = self.data_parallel.all_gather(bound.view(1), "value range").max()
        self.value_support.resize_(bound)

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

    def _optimize(self, name: str, loss: torch.Tensor, params: Sequence[torch.Tensor]) -> None:
        self.optimizers[name].zero_grad(set_to_none=False)
        loss.backward()
        if self.data_parallel is not None:  # before clipping: every rank clips the same mean gradient
            self.data_parallel.average_gradients(name)
        if name != "temperature":
            clip_gradients_(params, self.cfg.max_grad_norm)
        self.optimizers[name].step()

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient update from a replay batch (keys :data:`BATCH_KEYS`).

        With ``cfg.mirror_fraction`` part of the batch is first replaced by its mirror images
        (:attr:`mirror`); with ``cfg.value_range: reward_scale`` the first update sizes the support.

        Returns 0-d device tensors ``critic_loss``, ``actor_loss``, ``alpha``, ``entropy`` and
        ``q_mean``; actor values are those of the latest actor step.
        """
        self._check_batch(batch)
        if self.data_parallel is not None:
            self.data_parallel.before_update()
        metrics = self.update_body(batch, self.actor_step_due())
        self.num_updates += 1
        return metrics

    def actor_step_due(self) -> bool:
        """Whether the next update takes an actor and a temperature step (one in every
        ``actor_update_period``); decided on the host from the update count."""
        return self.num_updates % self.cfg.actor_update_period == 0

    def update_body(self, batch: dict[str, torch.Tensor], actor_step: bool) -> dict[str, torch.Tensor]:
        """The device work of one update, without the batch check and the update count.

        Static-shape and host-sync free, and it writes only tensors that live as long as the agent
        (parameters, gradients, optimizer and normaliser state, the schedule, the last actor
        metrics), which is what lets :class:`~unilab_gpu.rl.update_step.UpdateStep` record it as a
        CUDA graph, one per value of ``actor_step``. Returns :meth:`update`'s metrics.
        """
        if self.cfg.mirror_fraction > 0:
            if self.mirror is None:
                raise RuntimeError(
                    "algo.mirror_fraction > 0 needs the env's mirror maps: set agent.mirror = "
                    "rl.symmetry.MirrorAugmentation.for_env(env, ...) (OffPolicyTrainer does)"
                )
            batch = self.mirror(batch)
        batch = self._prepare(batch)
        if self.cfg.value_range == "reward_scale" and self.num_updates == 0 and not self._support_sized:
            self._size_support(batch["reward"])
            self._support_sized = True
        critic_loss, q_mean = self._critic_loss(batch)
        self._optimize("critic", critic_loss, self._critic_params)
        self._after_critic_step()
        if actor_step:
            actor_loss, entropy = self._actor_loss(batch)
            self._optimize("actor", actor_loss, self._actor_params)
            self._after_actor_step()
            self._optimize("temperature", self.temperature.loss(entropy), [])
            self._last_actor_loss.copy_(actor_loss.detach())
            self._last_entropy.copy_(entropy.detach())
        self._target_update()
        self.schedule.step()
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._last_actor_loss.clone(),
            "alpha": self.temperature.alpha(),
            "entropy": self._last_entropy.clone(),
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
            # so schedule steps keep reaching the optimizer. A checkpoint written before the
            # optimizers were capturable says capturable=False; the step must stay capturable.
            for group in opt.param_groups:
                group["lr"] = self.schedule.lr
                group["capturable"] = True
        self.num_updates = int(state["num_updates"])
        for held, saved in zip((self._last_actor_loss, self._last_entropy), state["last_actor_metrics"], strict=True):
            held.copy_(saved)
