"""Trainers: what ``unilab-train`` needs of one (:class:`Trainer`, a protocol that SAC/FlashSAC's
:class:`~unilab_gpu.rl.off_policy_trainer.OffPolicyTrainer` and PPO's
:class:`~unilab_gpu.rl.ppo.PpoTrainer` both follow), of the agent it trains (:class:`Agent`), and
their settings (:class:`TrainerSettings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.rl.logger import TrainLogger


@dataclass
class TrainerSettings:
    """How long a run is and how often it reports, for either trainer. The off-policy replay and
    update sizes (``batch_size``, ``updates_per_step``, ``warmup_steps``, ``buffer_capacity_per_env``,
    ``final_obs_fraction``) are the algorithm config's: the trainer reads them from ``agent.cfg``."""

    iterations: int
    """Total iterations of the run, counting resumed ones: one vectorised env step each off-policy,
    one rollout and update (``steps_per_env`` env steps per env) for PPO."""
    log_every: int = 20
    """Iterations between logging points."""
    checkpoint_every: int = 0
    """Iterations between checkpoint callbacks (0: none during the run)."""
    eval_every: int = 0
    """Iterations between evaluation callbacks (0: none)."""
    seed: int = 0
    """Seeds the off-policy trainer's warm-up actions and replay sampling. PPO draws from torch's
    default generator, which building the env seeds."""

    def __post_init__(self) -> None:
        for name in ("iterations", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer: '{name}' must be >= 1, got {getattr(self, name)}")
        for name in ("checkpoint_every", "eval_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"trainer: '{name}' must be >= 0, got {getattr(self, name)}")


def due(iteration: int, every: int) -> bool:
    """Whether a callback run every ``every`` iterations (0: never) is due after ``iteration``."""
    return every > 0 and iteration % every == 0


class Agent(Protocol):
    """What a run, play and export need of a trained agent of any algorithm."""

    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(batch, action_dim)`` for ``policy_obs`` ``(batch, dim)``."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class Trainer(Protocol):
    """A training loop as ``unilab-train`` drives it (:mod:`unilab_gpu.training.run`): it trains
    ``agent`` on ``env`` for ``settings.iterations``, calls ``on_checkpoint`` every
    ``settings.checkpoint_every`` iterations, ``on_evaluation`` every ``settings.eval_every``
    and ``after_iteration`` after each, reports to
    ``logger`` at logging points, and saves and restores its state."""

    env: ManagerBasedRlEnv
    agent: Agent
    settings: TrainerSettings
    logger: TrainLogger | None
    on_checkpoint: Callable[[Any], None] | None
    """Called with the trainer every ``settings.checkpoint_every`` iterations."""
    on_evaluation: Callable[[Any], None] | None
    """Called with the trainer every ``settings.eval_every`` iterations, between iterations
    (outside the env step and the update; it may read the device, as a logging point does)."""
    after_iteration: Callable[[], None] | None
    """Called on the host after every iteration (the live viewer's throttled state copy); it must
    not synchronize."""
    iteration: int
    """Completed iterations, including those of the run this one resumed."""
    last_scalars: dict[str, float]
    """Scalars of the latest logging point."""

    @property
    def steps_per_env(self) -> int:
        """Env steps per env in one iteration."""
        ...

    @property
    def env_steps(self) -> int:
        """Env transitions collected over the run (all ranks of a data-parallel run)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...

    def train(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Run until ``settings.iterations`` are done or ``should_stop()`` turns true; returns
        whether the run is complete."""
        ...
