"""The off-policy training loop of SAC and FlashSAC (:class:`OffPolicyTrainer`, a
:class:`~unilab_gpu.rl.trainer.Trainer`).

The off-policy loop runs in one process on one device, with no host sync between logging points.
One iteration:

1. **act**: uniform random actions for the first ``warmup_steps`` iterations of a run, then the
   agent's (compiled) stochastic policy on the current ``policy`` observations;
2. **env**: ``env.step`` (captured as one CUDA graph by the env itself on CUDA);
3. **replay**: the transition is written into the device replay ring and the agent sees the
   step (``agent.observe_step``: FlashSAC's reward scaler and held noise);
4. **update**: ``updates_per_step`` gradient updates on uniform replay batches, once the buffer
   holds ``warmup_steps`` steps of this process (:class:`~unilab_gpu.rl.update_step.UpdateStep`:
   sampling and update replayed as CUDA graphs on CUDA with ``algo.capture_update``).

Learning rate and temperature live on the device, update metrics and the per-step reward are
summed into device accumulators, and the step counter is a Python int, so the loop issues no
``.item()``. Every ``log_every`` iterations the accumulators and the env's episode statistics
are read in one go (the only host syncs), reported, and cleared.

The replay buffer is not checkpointed (at 4096 envs it holds about a million transitions of a
few hundred floats each); a resumed run refills it for ``warmup_steps`` iterations with the
restored policy before updating again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import torch

from unilab_gpu.envs.constant_observations import ConstantObservations
from unilab_gpu.envs.env_step import no_phase_mark
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.profiling.phase_clock import make_phase_clock
from unilab_gpu.rl.checkpoint import NonFiniteStateError, describe_entries, non_finite_entries
from unilab_gpu.rl.distributed import DataParallel, FleetError
from unilab_gpu.rl.logger import TrainLogger
from unilab_gpu.rl.off_policy import OffPolicyAgent
from unilab_gpu.rl.off_policy_config import steps_before_updates
from unilab_gpu.rl.replay import ReplayBuffer
from unilab_gpu.rl.symmetry import MirrorAugmentation
from unilab_gpu.rl.trainer import TrainerSettings, due
from unilab_gpu.rl.update_step import UpdateStep

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


class OffPolicyTrainer:
    """Trains ``agent`` on ``env``; see the module docstring for the loop.

    Args:
        env: the vectorised env; its ``critic`` observation group feeds the critics when present,
            else the ``policy`` group does.
        agent: a :class:`~unilab_gpu.rl.off_policy.OffPolicyAgent` built for this env.
        settings: loop settings.
        logger: receives one set of scalars per logging point (optional).
        on_checkpoint: called with the trainer every ``checkpoint_every`` iterations.
        data_parallel: this rank's :class:`~unilab_gpu.rl.distributed.DataParallel` in a
            data-parallel run: :meth:`train` attaches it to the agent, and logging points report
            fleet totals, merge the env's learning state and agree on stopping.
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        agent: OffPolicyAgent,
        settings: TrainerSettings,
        logger: TrainLogger | None = None,
        on_checkpoint: Callable[[OffPolicyTrainer], None] | None = None,
        data_parallel: DataParallel | None = None,
    ) -> None:
        self.env, self.agent, self.settings = env, agent, settings
        self.data_parallel = data_parallel
        self.world_size = data_parallel.world_size if data_parallel is not None else 1
        self.algo = agent.cfg
        """The algorithm config: replay and update sizes as well as the agent's hyperparameters."""
        self.logger = logger
        self.on_checkpoint = on_checkpoint
        self.on_evaluation: Callable[[OffPolicyTrainer], None] | None = None
        """Called with the trainer every ``settings.eval_every`` iterations (periodic evaluation)."""
        self.after_iteration: Callable[[], None] | None = None
        """Called on the host after every iteration, outside the env step and the update (the live
        viewer's throttled state copy); it must not synchronize."""
        if not env.cfg.final_obs:
            # Without them a time-out would bootstrap from whatever observation the buffer last held.
            raise ValueError(
                "off-policy training: the task must compute final observations (final_obs: true) to bootstrap "
                "time-outs from the true last observation"
            )
        self.device = env.device
        dims = env.observation_dims
        self._critic_group = "critic" if "critic" in dims else "policy"
        if self.algo.mirror_fraction > 0:
            agent.mirror = MirrorAugmentation.for_env(env, self._critic_group, self.algo.mirror_fraction)
        self.replay = ReplayBuffer(
            self.algo.buffer_capacity_per_env,
            env.num_envs,
            dims["policy"],
            dims[self._critic_group],
            env.action_dim,
            n_step=self.algo.n_step,
            gamma=self.algo.gamma,
            final_obs_fraction=self.algo.final_obs_fraction,
            device=self.device,
        )
        self.generator = torch.Generator(self.device).manual_seed(settings.seed)
        self.iteration = 0
        """Completed iterations, including those of the run this one resumed."""
        # Observations the next action is taken from; the env overwrites its buffers in step().
        self._policy_obs = torch.zeros(env.num_envs, dims["policy"], device=self.device)
        self._critic_obs = torch.zeros(env.num_envs, dims[self._critic_group], device=self.device)
        self._random_action = torch.zeros(env.num_envs, env.action_dim, device=self.device)
        self._collected = 0  # steps added to replay by this process
        self._clock = make_phase_clock(PHASES, 1, self.device)
        self._update_sums = torch.zeros(len(UPDATE_METRICS), device=self.device)
        if self.algo.capture_update and data_parallel is not None:
            raise ValueError(
                "algo.capture_update: must be false in a data-parallel run (gradients are averaged between ranks "
                "inside the update)"
            )
        capture = self.algo.capture_update and self.device.type == "cuda"  # on the CPU it runs directly
        self.update_step = UpdateStep(
            agent, self.replay, self.algo.batch_size, self.generator, self._update_sums, UPDATE_METRICS, capture
        )
        """One gradient update from replay (sampling, update, metric sums); captured on CUDA with
        ``algo.capture_update``."""
        self._reward_sum = torch.zeros((), device=self.device)
        self._window_updates = 0
        self._window_start = (0, time.perf_counter())
        self.last_scalars: dict[str, float] = {}
        """Scalars of the latest logging point."""

    @property
    def steps_per_env(self) -> int:
        """Env steps per env in one iteration: one."""
        return 1

    @property
    def env_steps(self) -> int:
        """Env transitions collected over the run by all ranks (``iteration * num_envs * world_size``)."""
        return self.iteration * self.env.num_envs * self.world_size

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

        The iteration counter is the saved fleet env steps over this run's ``num_envs *
        world_size``, so a data-parallel run resumes with another number of ranks at the same env
        step (rounded down). Every rank of a data-parallel run reseeds its replay sampling from its
        own seed (``seed + rank``) and the iteration: the checkpoint holds rank 0's generator only.

        Captured updates are captured again: the loaded optimizer state lives in new tensors, which
        the graphs recorded before would not see (:meth:`UpdateStep.recapture
        <unilab_gpu.rl.update_step.UpdateStep.recapture>`).
        """
        self.agent.load_state_dict(state["agent"])
        self.update_step.recapture()
        self.env.load_learning_state(state.get("env", {}))
        env_steps = int(state.get("env_steps", int(state["iteration"]) * self.env.num_envs))
        self.iteration = env_steps // (self.env.num_envs * self.world_size)
        saved = state["generator"].cpu()
        if self.data_parallel is None and saved.numel() == self.generator.get_state().numel():
            self.generator.set_state(saved)
        else:
            self.generator.manual_seed(self.settings.seed + self.iteration)

    # -- loop ----------------------------------------------------------------------------------
    def train(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Run until ``settings.iterations`` are done or ``should_stop()`` turns true (checked
        after every iteration, on the host; in a data-parallel run at logging points, where the
        ranks agree: one rank's request stops them all after the same iteration). Returns whether
        the run is complete."""
        dp = self.data_parallel
        if dp is not None and self.agent.data_parallel is not dp:
            dp.attach(self.agent)  # here, so that a resume's loaded state is what rank 0 broadcasts
        obs = self.env.reset()
        self._policy_obs.copy_(obs["policy"])
        self._critic_obs.copy_(obs[self._critic_group])
        self.env.stats.clear()
        self._start_window()
        watch = ConstantObservations(self.env) if self.iteration == 0 else None  # a fresh run's first steps
        total, log_every = self.settings.iterations, self.settings.log_every
        asked = should_stop if should_stop is not None else lambda: False
        while self.iteration < total:
            if dp is None and asked():
                return False
            timed = (self.iteration + 1) % log_every == 0 or self.iteration + 1 == total
            self.run_iteration(timed)
            if watch is not None:
                watch.observe()
                if watch.done:
                    warning, watch = watch.warning(), None  # the one host read, once
                    if warning is not None and self.logger is not None:
                        self.logger.message(warning)
            if self.after_iteration is not None:
                self.after_iteration()
            stop = self._log(asked() if dp is not None else False) if timed else False
            if self.on_evaluation is not None and due(self.iteration, self.settings.eval_every):
                self.on_evaluation(self)
            if self.on_checkpoint is not None and due(self.iteration, self.settings.checkpoint_every):
                self.on_checkpoint(self)
            if stop:
                return False
        return True

    def run_iteration(self, timed: bool = False) -> None:
        """One iteration (act, env step, replay add, updates), no logging; host-sync free.

        ``timed`` stamps the phase clock (the logging point reads it).
        """
        # Only the last iteration of a logging window is timed; the others pay nothing.
        mark = self._clock.marker(0) if timed else no_phase_mark
        if timed:
            self._clock.start(0)
        if self.iteration < self.algo.warmup_steps:
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
        self.agent.observe_step(result.reward, result.terminated, result.truncated)
        self._reward_sum.add_(result.reward.mean())
        self._policy_obs.copy_(result.obs["policy"])
        self._critic_obs.copy_(result.obs[self._critic_group])
        self._collected += 1
        mark("replay")
        if self._collected >= steps_before_updates(self.algo.warmup_steps, self.replay.n_step):
            for _ in range(self.algo.updates_per_step):
                self.update_step()
            self._window_updates += self.algo.updates_per_step
        mark("update")
        self.iteration += 1

    # -- logging -------------------------------------------------------------------------------
    def _start_window(self) -> None:
        self._update_sums.zero_()
        self._reward_sum.zero_()
        self._window_updates = 0
        self._window_start = (self.iteration, time.perf_counter())

    def _log(self, stop_requested: bool = False) -> bool:
        """Read the device accumulators once, report, clear (the loop's only host syncs).

        In a data-parallel run the accumulators and the env's episode statistics are first summed
        over all ranks (one ``all_reduce``, with every rank's stop request, health and throughput)
        and the env's learning state is merged; returns whether any rank asked to stop.

        Raises:
            NonFiniteStateError: (one process) the window's losses, Q-values or reward, or the
                agent's state, hold NaN or inf (:meth:`_finite_flag`, read with the same sync).
            FleetError: (data-parallel) the same on any rank, raised on every rank.
        """
        start_iteration, start_time = self._window_start
        elapsed = max(time.perf_counter() - start_time, 1e-9)
        iterations = self.iteration - start_iteration
        rate = iterations * self.env.num_envs / elapsed
        overflow = self.replay.final_overflow.float()  # cumulative: reduce a copy
        finite = self._finite_flag().float()
        rank_rates, stop = [rate], False
        if self.data_parallel is not None:
            rank_rates, stop = self._reduce_window(overflow, rate, stop_requested, finite)
        tail = [self._reward_sum, self.agent.schedule.lr, overflow, finite]
        values = torch.cat([self._update_sums, *(t.view(1) for t in tail)]).tolist()
        if not values[-1]:
            self._raise_non_finite(values)
        phases = dict(zip(PHASES, self._clock.read()[0].tolist(), strict=True))
        world = self.world_size
        scalars: dict[str, float] = {
            "train/reward_mean": values[len(UPDATE_METRICS)] / (iterations * world),
            "train/learning_rate": values[len(UPDATE_METRICS) + 1],
            "train/iteration": float(self.iteration),
            "replay/final_obs_overflow": values[len(UPDATE_METRICS) + 2],
            "perf/env_steps_per_s": sum(rank_rates),
            "perf/iteration_ms": 1e3 * elapsed / iterations,
        }
        if world > 1:
            scalars.update({f"perf/rank{r}/env_steps_per_s": value for r, value in enumerate(rank_rates)})
        if self._window_updates:
            for key, value in zip(UPDATE_METRICS, values, strict=False):
                scalars[UPDATE_TAGS[key]] = value / (self._window_updates * world)
        for phase, ms in phases.items():
            scalars[f"perf/{phase}_ms"] = ms
        stats = self.env.stats.summary()
        self.env.stats.clear()
        scalars.update(self.env.stats.logged(stats))
        if self.logger is not None:
            self.logger.log(self.iteration, self.env_steps, scalars)
        self.last_scalars = scalars
        self._start_window()
        return stop

    def _finite_flag(self) -> torch.Tensor:
        """0-d bool on the device: this window's update metrics (losses, Q-values) and reward sum
        and every floating-point tensor of the agent's state (networks, targets, normalisers,
        temperature) are finite. Read with the logging point's one host sync."""
        tensors = [self._update_sums, self._reward_sum]
        for module in self.agent.stateful.values():
            tensors += [t for t in module.state_dict().values() if t.is_floating_point()]
        return torch.stack([torch.isfinite(t).all() for t in tensors]).all()

    def _raise_non_finite(self, values: list[float]) -> None:
        """Name what turned non-finite (cold path: the run stops here, nothing is saved)."""
        names = [key for key, value in zip(UPDATE_METRICS, values, strict=False) if not math.isfinite(value)]
        if not math.isfinite(values[len(UPDATE_METRICS)]):
            names.append("reward")
        entries = non_finite_entries(self.agent.state_dict())
        if entries:
            names.append(f"agent state ({describe_entries(entries)})")
        raise NonFiniteStateError(f"non-finite {', '.join(names)} by iteration {self.iteration}")

    def _reduce_window(
        self, overflow: torch.Tensor, rate: float, stop_requested: bool, finite: torch.Tensor
    ) -> tuple[list[float], bool]:
        """Fleet totals of this window in place (update and reward sums, episode statistics,
        ``overflow``); returns every rank's env-steps/s and whether any rank asked to stop.
        ``finite`` (1.0 or 0.0, :meth:`_finite_flag`) is this rank's health."""
        dp = self.data_parallel
        assert dp is not None
        flags = torch.cat([torch.tensor([float(stop_requested), rate], device=self.device), 1.0 - finite.view(1)])
        sums = [self._update_sums, self._reward_sum, overflow, *self.env.stats.accumulators()]
        table = dp.reduce_window_(sums, flags.reshape(-1)).tolist()
        dp.merge_learning_state_(self.env)
        bad = [r for r, row in enumerate(table) if row[2] > 0]
        if bad:
            raise FleetError(
                f"rank {dp.rank}: non-finite losses or agent state on rank(s) {bad} by iteration {self.iteration}; "
                "every rank stops and the last good checkpoint is kept"
            )
        return [row[1] for row in table], any(row[0] > 0 for row in table)
