"""Off-policy training loop: one process, one device, no host sync between logging points.

One iteration:

1. **act**: uniform random actions for the first ``warmup_steps`` iterations of a run, then the
   agent's (compiled) stochastic policy on the current ``policy`` observations;
2. **env**: ``env.step`` (captured as one CUDA graph by the env itself on CUDA);
3. **replay**: the transition is written into the device replay ring; FlashSAC's reward scaler
   sees the step (``agent.observe_reward``);
4. **update**: ``updates_per_step`` gradient updates on uniform replay batches, once the buffer
   holds ``warmup_steps`` steps of this process.

Learning rate and temperature live on the device, update metrics and the per-step reward are
summed into device accumulators, and the step counter is a Python int, so the loop issues no
``.item()``. Every ``log_every`` iterations the accumulators and the env's episode statistics
are read in one go (the only host syncs), reported, and cleared.

The replay buffer is not checkpointed (at 4096 envs it holds about a million transitions of a
few hundred floats each); a resumed run refills it for ``warmup_steps`` iterations with the
restored policy before updating again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from unilab_gpu.envs.episode_stats import HEALTH_KEYS
from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv
from unilab_gpu.profiling.phase_clock import make_phase_clock
from unilab_gpu.rl.agent import OffPolicyAgent
from unilab_gpu.rl.config import OffPolicyConfig, steps_before_updates
from unilab_gpu.rl.logger import TrainLogger
from unilab_gpu.rl.replay import ReplayBuffer

PHASES = ("act", "env", "replay", "update")
"""Phases of one iteration, timed on the last iteration of each logging window."""

UPDATE_METRICS = ("critic_loss", "actor_loss", "entropy", "alpha", "q_mean")
"""Keys of ``agent.update``'s result that are averaged over each logging window."""

UPDATE_TAGS = {
    "critic_loss": "loss/critic",
    "actor_loss": "loss/actor",
    "entropy": "policy/entropy",
    "alpha": "policy/temperature",
    "q_mean": "critic/q_mean",
}
"""TensorBoard tag of each update metric."""


@dataclass
class TrainerSettings:
    """Loop settings (the algo config supplies the replay and update sizes)."""

    iterations: int
    """Total iterations of the run (one vectorised env step each), counting resumed ones."""
    batch_size: int
    updates_per_step: int
    warmup_steps: int
    buffer_capacity_per_env: int
    final_obs_fraction: float = 0.125
    log_every: int = 20
    """Iterations between logging points."""
    checkpoint_every: int = 0
    """Iterations between checkpoint callbacks (0: none during the run)."""
    seed: int = 0

    @classmethod
    def from_algo(cls, algo: OffPolicyConfig, iterations: int, **loop: Any) -> TrainerSettings:
        """Settings whose replay and update sizes are the algorithm config's; ``loop`` sets the
        rest (``log_every``, ``checkpoint_every``, ``seed``) or overrides a size."""
        sizes = {
            "batch_size": algo.batch_size,
            "updates_per_step": algo.updates_per_step,
            "warmup_steps": algo.warmup_steps,
            "buffer_capacity_per_env": algo.buffer_capacity_per_env,
            "final_obs_fraction": algo.final_obs_fraction,
        }
        return cls(iterations=iterations, **{**sizes, **loop})

    def __post_init__(self) -> None:
        for name in ("iterations", "batch_size", "updates_per_step", "log_every", "buffer_capacity_per_env"):
            if getattr(self, name) < 1:
                raise ValueError(f"trainer: '{name}' must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"trainer: '{name}' must be >= 0, got {getattr(self, name)}")


class Trainer:
    """Trains ``agent`` on ``env``; see the module docstring for the loop.

    Args:
        env: the vectorised env; its ``critic`` observation group feeds the critics when present,
            else the ``policy`` group does.
        agent: a :class:`~unilab_gpu.rl.agent.OffPolicyAgent` built for this env.
        settings: loop settings.
        logger: receives one set of scalars per logging point (optional).
        on_checkpoint: called with the trainer every ``checkpoint_every`` iterations.
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        agent: OffPolicyAgent,
        settings: TrainerSettings,
        logger: TrainLogger | None = None,
        on_checkpoint: Callable[[Trainer], None] | None = None,
    ) -> None:
        self.env, self.agent, self.settings = env, agent, settings
        self.logger = logger
        self.on_checkpoint = on_checkpoint
        self.device = env.device
        dims = env.observation_dims
        self._critic_group = "critic" if "critic" in dims else "policy"
        self.replay = ReplayBuffer(
            settings.buffer_capacity_per_env,
            env.num_envs,
            dims["policy"],
            dims[self._critic_group],
            env.action_dim,
            n_step=agent.cfg.n_step,
            gamma=agent.cfg.gamma,
            final_obs_fraction=settings.final_obs_fraction,
            device=self.device,
        )
        self.generator = torch.Generator(self.device).manual_seed(settings.seed)
        self.iteration = 0
        """Completed iterations, including those of the run this one resumed."""
        # Observations the next action is taken from; the env overwrites its buffers in step().
        self._policy_obs = torch.zeros(env.num_envs, dims["policy"], device=self.device)
        self._critic_obs = torch.zeros(env.num_envs, dims[self._critic_group], device=self.device)
        self._random_action = torch.zeros(env.num_envs, env.action_dim, device=self.device)
        self._observes_reward = hasattr(agent, "observe_reward")
        self._collected = 0  # steps added to replay by this process
        self._clock = make_phase_clock(PHASES, 1, self.device)
        self._update_sums = torch.zeros(len(UPDATE_METRICS), device=self.device)
        self._reward_sum = torch.zeros((), device=self.device)
        self._window_updates = 0
        self._window_start = (0, time.perf_counter())
        self.last_scalars: dict[str, float] = {}
        """Scalars of the latest logging point."""

    @property
    def env_steps(self) -> int:
        """Env transitions collected over the run (``iteration * num_envs``)."""
        return self.iteration * self.env.num_envs

    # -- state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Iteration counter, agent state (networks, optimizers, schedules), sampling RNG and the
        env's learning state (e.g. the adaptive motion sampler's failure rates)."""
        return {
            "iteration": self.iteration,
            "env_steps": self.env_steps,
            "agent": self.agent.state_dict(),
            "generator": self.generator.get_state(),
            "env": self.env.learning_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict`, also one saved on another device type (CPU <-> CUDA).

        Networks and optimizer state move to this trainer's device. A generator state does not:
        a CPU (Mersenne Twister) and a CUDA (Philox seed and offset) state are different things,
        so a run resumed on the other device type reseeds replay sampling from its seed and
        iteration (still reproducible, not the same draws as an uninterrupted run).
        """
        self.agent.load_state_dict(state["agent"])
        self.env.load_learning_state(state.get("env", {}))
        self.iteration = int(state["iteration"])
        saved = state["generator"].cpu()
        if saved.numel() == self.generator.get_state().numel():
            self.generator.set_state(saved)
        else:
            self.generator.manual_seed(self.settings.seed + self.iteration)

    # -- loop ----------------------------------------------------------------------------------
    def train(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Run until ``settings.iterations`` are done or ``should_stop()`` turns true (checked
        after every iteration, on the host). Returns whether the run is complete."""
        obs = self.env.reset()
        self._policy_obs.copy_(obs["policy"])
        self._critic_obs.copy_(obs[self._critic_group])
        self.env.stats.clear()
        self._start_window()
        total, log_every = self.settings.iterations, self.settings.log_every
        while self.iteration < total:
            if should_stop is not None and should_stop():
                return False
            timed = (self.iteration + 1) % log_every == 0 or self.iteration + 1 == total
            self.run_iteration(timed)
            if timed:
                self._log()
            every = self.settings.checkpoint_every
            if self.on_checkpoint is not None and every and self.iteration % every == 0:
                self.on_checkpoint(self)
        return True

    def run_iteration(self, timed: bool = False) -> None:
        """One iteration (act, env step, replay add, updates), no logging; host-sync free.

        ``timed`` stamps the phase clock (the logging point reads it).
        """
        # Only the last iteration of a logging window is timed; the others pay nothing.
        mark = self._clock.marker(0) if timed else _no_mark
        if timed:
            self._clock.start(0)
        if self.iteration < self.settings.warmup_steps:
            action = self._random_action.uniform_(-1.0, 1.0, generator=self.generator)
        else:
            action = self.agent.act(self._policy_obs)
        mark("act")
        result = self.env.step(action)
        mark("env")
        final = result.final_obs
        self.replay.add(
            self._policy_obs,
            self._critic_obs,
            action,
            result.reward,
            result.terminated,
            result.truncated,
            final["policy"],
            final[self._critic_group],
            result.valid,
        )
        if self._observes_reward:
            self.agent.observe_reward(result.reward, result.terminated, result.truncated)
        self._reward_sum.add_(result.reward.mean())
        self._policy_obs.copy_(result.obs["policy"])
        self._critic_obs.copy_(result.obs[self._critic_group])
        self._collected += 1
        mark("replay")
        if self._collected >= steps_before_updates(self.settings.warmup_steps, self.replay.n_step):
            for _ in range(self.settings.updates_per_step):
                metrics = self.agent.update(self.replay.sample(self.settings.batch_size, self.generator))
                self._update_sums.add_(torch.stack([metrics[key] for key in UPDATE_METRICS]))
            self._window_updates += self.settings.updates_per_step
        mark("update")
        self.iteration += 1

    # -- logging -------------------------------------------------------------------------------
    def _start_window(self) -> None:
        self._update_sums.zero_()
        self._reward_sum.zero_()
        self._window_updates = 0
        self._window_start = (self.iteration, time.perf_counter())

    def _log(self) -> None:
        """Read the device accumulators once, report, clear (the loop's only host syncs)."""
        tail = [self._reward_sum, self.agent.schedule.lr, self.replay.final_overflow.float()]
        values = torch.cat([self._update_sums, *(t.view(1) for t in tail)]).tolist()
        phases = dict(zip(PHASES, self._clock.read()[0].tolist(), strict=True))
        start_iteration, start_time = self._window_start
        elapsed = max(time.perf_counter() - start_time, 1e-9)
        iterations = self.iteration - start_iteration
        scalars: dict[str, float] = {
            "train/reward_mean": values[len(UPDATE_METRICS)] / iterations,
            "train/learning_rate": values[len(UPDATE_METRICS) + 1],
            "train/iteration": float(self.iteration),
            "replay/final_obs_overflow": values[len(UPDATE_METRICS) + 2],
            "perf/env_steps_per_s": iterations * self.env.num_envs / elapsed,
            "perf/iteration_ms": 1e3 * elapsed / iterations,
        }
        if self._window_updates:
            for key, value in zip(UPDATE_METRICS, values, strict=False):
                scalars[UPDATE_TAGS[key]] = value / self._window_updates
        for phase, ms in phases.items():
            scalars[f"perf/{phase}_ms"] = ms
        stats = self.env.stats.summary()
        self.env.stats.clear()
        if stats["episode/count"] > 0:  # means over zero episodes would read as 0, not as missing
            scalars.update(stats)
        else:
            scalars.update({key: stats[key] for key in HEALTH_KEYS})
        if self.logger is not None:
            self.logger.log(self.iteration, self.env_steps, scalars)
        self.last_scalars = scalars
        self._start_window()


def _no_mark(phase: str) -> None:
    pass
