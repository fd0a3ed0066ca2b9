"""What SAC and FlashSAC share: the pieces of a distributional soft actor-critic update.

Both agents are soft actor-critic (Haarnoja et al., ICML 2018; learned temperature from
arXiv:1812.05905) with twin categorical critics (C51, Bellemare et al. 2017) and clipped
double-Q (Fujimoto et al., ICML 2018): the bootstrap distribution is that of the member with
the lower mean, shifted by the entropy bonus,

    Z_target = r_n + discount * (Z'_min - alpha * log pi(a' | s')),

projected onto the support. Each agent's update reads top to bottom in its own file
(``update_body`` of :class:`~unilab_gpu.rl.sac.SacAgent` and
:class:`~unilab_gpu.rl.flashsac.FlashSacAgent`): a critic step, every ``actor_update_period``
updates an actor and a temperature step, a Polyak target update and a learning-rate schedule
step. It reads nothing back to the host: the returned metrics are 0-d device tensors. Its device
work is static-shape and writes only persistent tensors, so the trainer can capture it, replay
sampling included, as a CUDA graph (:mod:`unilab_gpu.rl.update_step`).

This module holds what those updates compose: the soft bootstrap target, the critics' loss and
the twin Q value as plain functions, the optimizers with their step (:class:`Optimizers`), and
:class:`OffPolicyAgent`, what every agent keeps (temperature, schedule, support, target critic,
last actor metrics) and the public API around its update (the batch check, the data-parallel
merge and the update count in :meth:`~OffPolicyAgent.update`, the checkpointed state).

The other pieces have a module each: :mod:`~unilab_gpu.rl.off_policy_config` (the config, keys
of ``configs/algo/*.yaml``), :mod:`~unilab_gpu.rl.temperature` (the learned temperature),
:mod:`~unilab_gpu.rl.distributional` (C51 projection), :mod:`~unilab_gpu.rl.squashed_gaussian`
(the actor's distribution), :mod:`~unilab_gpu.rl.optimization` (learning-rate schedule, AdamW,
clipping, Polyak averaging) and :mod:`~unilab_gpu.rl.running_moments` (observation and reward
statistics).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
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
from unilab_gpu.rl.optimization import CosineSchedule, clip_gradients_, make_adamw
from unilab_gpu.rl.temperature import Temperature
from unilab_gpu.rl.value_range import ValueSupport

if TYPE_CHECKING:
    from unilab_gpu.rl.symmetry import MirrorAugmentation


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


# ================================================================================================
# The distributional soft actor-critic math.


def bootstrap_target(
    next_logits: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    next_log_prob: torch.Tensor,
    alpha: torch.Tensor,
    support: torch.Tensor,
    per_member: bool = False,
) -> torch.Tensor:
    """Projected soft target from target-critic logits ``(2, B, atoms)``, n-step rewards and
    discounts ``(B,)``, the next action's log-density ``(B,)``, the temperature (0-d) and the
    atoms ``(atoms,)``.

    Clipped double-Q (default): the target of the member with the lower mean, ``(B, atoms)``,
    for both critics. ``per_member``: each member's own target, ``(2, B, atoms)``, so each
    critic learns from its own target network (holosoma's FastSAC).
    """
    next_probs = torch.softmax(next_logits, dim=-1)
    # r + d * (z - alpha * log pi) = (r - d * alpha * log pi) + d * z
    shifted_reward = reward - discount * alpha * next_log_prob
    if per_member:
        members = next_probs.shape[0]
        flat = project_categorical(
            next_probs.flatten(0, 1), shifted_reward.repeat(members), discount.repeat(members), support
        )
        return flat.view_as(next_probs)
    lower = expected_value(next_probs, support).argmin(dim=0)  # (B,)
    index = lower.view(1, -1, 1).expand(1, -1, next_probs.shape[-1])
    chosen = next_probs.gather(0, index).squeeze(0)
    return project_categorical(chosen, shifted_reward, discount, support)


def distributional_loss(
    logits: torch.Tensor, target: torch.Tensor, support: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Critic loss and mean predicted Q (0-d each) of twin logits ``(2, B, atoms)`` against a
    target ``(B, atoms)`` shared by both members or ``(2, B, atoms)``, one per member: the
    members' cross-entropies, each a mean over the batch, summed."""
    loss = categorical_cross_entropy(logits, target.expand_as(logits)).mean(dim=-1).sum()
    q_mean = expected_value(torch.softmax(logits.detach(), dim=-1), support).mean()
    return loss, q_mean


def twin_q(logits: torch.Tensor, support: torch.Tensor, reduce: str = "min") -> torch.Tensor:
    """Q value ``(B,)`` from twin logits ``(2, B, atoms)``: the members' minimum (clipped
    double-Q) or, with ``reduce="mean"``, their mean."""
    values = expected_value(torch.softmax(logits, dim=-1), support)
    return values.mean(dim=0) if reduce == "mean" else values.min(dim=0).values


# ================================================================================================
# The optimizers.


class Optimizers(Mapping[str, torch.optim.Optimizer]):
    """The agent's AdamW optimizers by name (``"actor"``, ``"critic"``, ``"temperature"``), all
    reading the schedule's learning-rate tensor ``lr``; :meth:`step` is one optimizer step.

    Args:
        actor_params, critic_params: the networks' parameters (their gradients are clipped).
        temperature: the temperature module (no weight decay, no clipping).
        lr: the schedule's 0-d learning rate.
        cfg: ``adam_betas``, ``weight_decay`` and ``max_grad_norm``.
    """

    def __init__(
        self,
        actor_params: Sequence[torch.Tensor],
        critic_params: Sequence[torch.Tensor],
        temperature: nn.Module,
        lr: torch.Tensor,
        cfg: OffPolicyConfig,
    ) -> None:
        self.lr = lr
        self.max_grad_norm = cfg.max_grad_norm
        self._clipped = {"actor": actor_params, "critic": critic_params}
        self._by_name = {
            "actor": make_adamw(actor_params, lr, cfg.adam_betas, cfg.weight_decay),
            "critic": make_adamw(critic_params, lr, cfg.adam_betas, cfg.weight_decay),
            "temperature": make_adamw(temperature.parameters(), lr, cfg.adam_betas, 0.0),
        }

    def __getitem__(self, name: str) -> torch.optim.Optimizer:
        return self._by_name[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def step(self, name: str, loss: torch.Tensor, data_parallel: Any = None) -> None:
        """Backward ``loss`` (0-d) into optimizer ``name``'s parameters and step it: gradients
        averaged over the ranks first (``data_parallel``, a
        :class:`~unilab_gpu.rl.distributed.DataParallel`, so that every rank clips the same mean
        gradient), then clipped to ``max_grad_norm`` (the networks, not the temperature)."""
        optimizer = self._by_name[name]
        optimizer.zero_grad(set_to_none=False)
        loss.backward()
        if data_parallel is not None:
            data_parallel.average_gradients(name)
        if name in self._clipped:
            clip_gradients_(self._clipped[name], self.max_grad_norm)
        optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return {name: optimizer.state_dict() for name, optimizer in self._by_name.items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for name, optimizer in self._by_name.items():
            optimizer.load_state_dict(state[name])
            # Loading replaces the lr entry with the saved tensor; re-link the schedule's tensor
            # so schedule steps keep reaching the optimizer. A checkpoint written before the
            # optimizers were capturable says capturable=False; the step must stay capturable.
            for group in optimizer.param_groups:
                group["lr"] = self.lr
                group["capturable"] = True


# ================================================================================================
# The agent: its shared state and the public API around each algorithm's update.


class OffPolicyAgent:
    """What every off-policy agent keeps and the API the trainer uses; see the module docstring.

    An agent builds its networks, then calls this constructor, which makes the target critic, the
    temperature, the schedule, the support and the optimizers. Its own ``update_body`` is the
    whole update; :meth:`update` wraps it.

    Args:
        cfg: hyperparameters.
        policy_obs_dim, critic_obs_dim, act_dim: sizes of the two observation groups and the
            action; actions are in ``[-1, 1]``.
        device: where networks and state live.
        actor, critic: the agent's networks, on ``device``; the target critic is a copy of ``critic``.
        state: the agent's own stateful modules (normalisers, reward scaler, noise), saved by
            :meth:`state_dict` with the shared ones.
    """

    actor: nn.Module
    critic: nn.Module
    target_critic: nn.Module

    def __init__(
        self,
        cfg: OffPolicyConfig,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        device: torch.device,
        actor: nn.Module,
        critic: nn.Module,
        state: Mapping[str, nn.Module],
    ) -> None:
        self.cfg = cfg
        self.policy_obs_dim = policy_obs_dim
        self.critic_obs_dim = critic_obs_dim
        self.act_dim = act_dim
        self.device = device
        self.actor = actor
        self.critic = critic
        self.target_critic = copy.deepcopy(critic).requires_grad_(False)
        self.temperature = Temperature(cfg.alpha_init, -cfg.target_entropy_ratio * act_dim).to(device)
        if cfg.learning_rate_decay_steps < 1:
            raise ValueError(
                "learning_rate_decay_steps must be >= 1 when an agent is built; 0 (decay over the whole run) is "
                "resolved by unilab-train: set it with rl.off_policy_config.run_updates(cfg, iterations)"
            )
        self.schedule = CosineSchedule(
            cfg.learning_rate, cfg.learning_rate_end, cfg.learning_rate_decay_steps, device=device
        )
        self.value_support = ValueSupport(categorical_support(cfg.num_atoms, cfg.v_min, cfg.v_max, device=device))
        self.support = self.value_support.atoms
        """Atom values ``(num_atoms,)``; ``value_range: reward_scale`` respaces them in place at the first update."""
        self.stateful: dict[str, nn.Module] = dict(state)
        """Every module whose state is the agent's (saved by :meth:`state_dict`), by name."""
        if cfg.value_range != "fixed":  # a fixed support is the config's: checkpoints stay as they were
            self.stateful["value_support"] = self.value_support
        self.stateful.update(
            actor=self.actor,
            critic=self.critic,
            target_critic=self.target_critic,
            temperature=self.temperature,
            schedule=self.schedule,
        )
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.target_critic.parameters())
        self.optimizers = Optimizers(
            list(self.actor.parameters()), self._critic_params, self.temperature, self.schedule.lr, cfg
        )
        self.num_updates = 0
        self.data_parallel: Any = None
        """A :class:`~unilab_gpu.rl.distributed.DataParallel` once attached (data-parallel training):
        it averages gradients after each backward and merges statistics before each update."""
        # Written in place by actor steps, so that a captured update keeps writing the same memory.
        self._last_actor_loss = torch.zeros((), device=self.device)
        self._last_entropy = torch.zeros((), device=self.device)
        self.mirror: MirrorAugmentation | None = None
        """Mirrors ``cfg.mirror_fraction`` of every batch (set by the trainer, which knows the env)."""

    # -- what each agent defines ---------------------------------------------------------------
    def update_body(self, batch: dict[str, torch.Tensor], actor_step: bool) -> dict[str, torch.Tensor]:
        """The device work of one update, without the batch check and the update count.

        Static-shape and host-sync free, and it writes only tensors that live as long as the agent
        (parameters, gradients, optimizer and normaliser state, the schedule, the last actor
        metrics), which is what lets :class:`~unilab_gpu.rl.update_step.UpdateStep` record it as a
        CUDA graph, one per value of ``actor_step``. Returns :meth:`update`'s metrics.
        """
        raise NotImplementedError

    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(num_envs, act_dim)`` in ``[-1, 1]`` for ``policy_obs`` ``(num_envs, dim)``: what
        the trainer steps the env with (exploring unless ``deterministic``)."""
        raise NotImplementedError

    def observe_step(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """See one env step ``(num_envs,)`` (reward, episode ends); the trainer calls it once per
        env step. Agents with per-env state (FlashSAC's reward scaler and held noise) define it."""

    # -- the update ----------------------------------------------------------------------------
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

    def _mirrored(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """``batch`` with ``cfg.mirror_fraction`` of it replaced by its mirror images (:attr:`mirror`)."""
        if self.cfg.mirror_fraction <= 0:
            return batch
        if self.mirror is None:
            raise RuntimeError(
                "algo.mirror_fraction > 0 needs the env's mirror maps: set agent.mirror = "
                "rl.symmetry.MirrorAugmentation.for_env(env, ...) (OffPolicyTrainer does)"
            )
        return self.mirror(batch)

    def _record_actor_step(self, actor_loss: torch.Tensor, entropy: torch.Tensor) -> None:
        """Hold an actor step's loss and entropy (0-d) until the next one, in place."""
        self._last_actor_loss.copy_(actor_loss.detach())
        self._last_entropy.copy_(entropy.detach())

    def _metrics(self, critic_loss: torch.Tensor, q_mean: torch.Tensor) -> dict[str, torch.Tensor]:
        """:meth:`update`'s metrics from this update's critic loss and mean Q (0-d each)."""
        return {
            "critic_loss": critic_loss.detach(),
            "actor_loss": self._last_actor_loss.clone(),
            "alpha": self.temperature.alpha(),
            "entropy": self._last_entropy.clone(),
            "q_mean": q_mean.detach(),
        }

    # -- acting --------------------------------------------------------------------------------
    def _check_policy_obs(self, policy_obs: torch.Tensor) -> None:
        if policy_obs.dim() != 2 or policy_obs.shape[-1] != self.policy_obs_dim:
            raise ValueError(
                f"policy_obs must have shape (num_envs, {self.policy_obs_dim}), got {tuple(policy_obs.shape)}"
            )

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Networks, targets, temperature, schedule, normalisers and optimizer states."""
        return {
            "modules": {name: module.state_dict() for name, module in self.stateful.items()},
            "optimizers": self.optimizers.state_dict(),
            "num_updates": self.num_updates,
            "last_actor_metrics": (self._last_actor_loss, self._last_entropy),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for name, module in self.stateful.items():
            module.load_state_dict(state["modules"][name])
        self.optimizers.load_state_dict(state["optimizers"])
        self.num_updates = int(state["num_updates"])
        for held, saved in zip((self._last_actor_loss, self._last_entropy), state["last_actor_metrics"], strict=True):
            held.copy_(saved)
