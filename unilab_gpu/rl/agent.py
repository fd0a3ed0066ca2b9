"""Shared update loop of the distributional SAC agents (SAC and FlashSAC).

Both agents are soft actor-critic (Haarnoja et al., ICML 2018; learned temperature from
arXiv:1812.05905) with twin categorical critics (C51, Bellemare et al. 2017) and clipped
double-Q (Fujimoto et al., ICML 2018): the bootstrap distribution is that of the member with
the lower mean, shifted by the entropy bonus,

    Z_target = r_n + discount * (Z'_min - alpha * log pi(a' | s')),

projected onto the support. One :meth:`OffPolicyAgent.update` does a critic step, every
``actor_update_period`` updates an actor and a temperature step, a Polyak target update and a
learning-rate schedule step. It reads nothing back to the host: the returned metrics are 0-d
device tensors.

Subclasses provide the networks, :meth:`_prepare` (batch preprocessing), the two loss
functions and optional post-step hooks.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from unilab_gpu.rl.compiling import maybe_compile
from unilab_gpu.rl.config import OffPolicyConfig
from unilab_gpu.rl.distributional import categorical_support, expected_value, project_categorical
from unilab_gpu.rl.optimization import clip_gradients_, make_adamw, polyak_update_
from unilab_gpu.rl.schedules import CosineSchedule
from unilab_gpu.rl.temperature import Temperature

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
                "resolved by unilab-train: set it with rl.config.run_updates(cfg, iterations)"
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
        self.num_updates = 0
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

    def _after_actor_step(self) -> None:
        """Hook run after each actor optimizer step."""

    def _after_critic_step(self) -> None:
        """Hook run after each critic optimizer step."""

    # -- shared math --------------------------------------------------------------------------
    def _bootstrap_target(
        self, next_logits: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, next_log_prob: torch.Tensor
    ) -> torch.Tensor:
        """Projected soft target ``(B, atoms)`` from target-critic logits ``(2, B, atoms)``."""
        next_probs = torch.softmax(next_logits, dim=-1)
        lower = expected_value(next_probs, self.support).argmin(dim=0)  # (B,)
        index = lower.view(1, -1, 1).expand(1, -1, next_probs.shape[-1])
        chosen = next_probs.gather(0, index).squeeze(0)
        # r + d * (z - alpha * log pi) = (r - d * alpha * log pi) + d * z
        shifted_reward = reward - discount * self.temperature.alpha() * next_log_prob
        return project_categorical(chosen, shifted_reward, discount, self.support)

    def _min_q(self, logits: torch.Tensor) -> torch.Tensor:
        """Clipped double-Q value ``(B,)`` from twin logits ``(2, B, atoms)``."""
        return expected_value(torch.softmax(logits, dim=-1), self.support).min(dim=0).values

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
        if name != "temperature":
            clip_gradients_(params, self.cfg.max_grad_norm)
        self.optimizers[name].step()

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One gradient update from a replay batch (keys :data:`BATCH_KEYS`).

        Returns 0-d device tensors ``critic_loss``, ``actor_loss``, ``alpha``, ``entropy`` and
        ``q_mean``; actor values are those of the latest actor step.
        """
        self._check_batch(batch)
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
