"""The manager-based RL env: one sync-free, static-shape step, captured once on CUDA."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._inductor.config as inductor_config

from unilab_gpu.envs.env_cfg import EnvCfg
from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.envs.reset_rows import ResetRowCompactor
from unilab_gpu.envs.robot import Robot
from unilab_gpu.envs.row_buffers import rows_with_dummy
from unilab_gpu.managers.action_manager import ActionManager
from unilab_gpu.managers.command_manager import CommandManager
from unilab_gpu.managers.event_manager import EventManager
from unilab_gpu.managers.observation_manager import ObservationManager
from unilab_gpu.managers.reward_manager import RewardManager
from unilab_gpu.managers.termination_manager import TerminationManager
from unilab_gpu.sim.capture import CudaGraph, capture_unsupported_reason
from unilab_gpu.sim.simulator import Simulator

# Compiled code draws the same random numbers as eager code (inductor's own RNG differs), which
# is what makes compiled and eager steps comparable and a seeded run reproducible either way.
inductor_config.fallback_random = True


@dataclass(frozen=True)
class StepResult:
    """What ``step`` returns. Every tensor is a persistent buffer, overwritten by the next step:
    copy what you keep (the replay buffer does)."""

    obs: dict[str, torch.Tensor]
    """group -> ``(num_envs, dim)``, after this step's resets (new episodes' first observations)."""
    reward: torch.Tensor
    """``(num_envs,)`` float."""
    terminated: torch.Tensor
    """``(num_envs,)`` bool: the episode ended for good (no bootstrap)."""
    truncated: torch.Tensor
    """``(num_envs,)`` bool: the episode was cut (time-out); bootstrap from ``final_obs``."""
    final_obs: dict[str, torch.Tensor]
    """group -> ``(num_envs, dim)``, observations before this step's resets; valid for rows that
    ended this step (and for all other rows equal to ``obs``)."""
    stats: EpisodeStats
    """Device-side accumulators over ended episodes."""


class ManagerBasedRlEnv:
    """``num_envs`` copies of a task: a simulator plus action, command, event, termination, reward
    and observation managers built from an ``EnvCfg``.

    One ``step`` runs, in order: actions -> ``decimation`` physics substeps -> kinematics refresh
    -> evaluate (episode clock, commands, terminations, rewards, stats, final observations, reset
    row compaction) -> reset of the compacted rows (staging state, commands, reset events, row
    writes, row-restricted refresh, per-row manager resets) -> observations. Nothing in it reads a
    value back to the host or changes a shape, so on CUDA the whole step is captured once as a
    CUDA graph and replayed; on CPU the same code runs directly.
    """

    def __init__(
        self,
        cfg: EnvCfg,
        num_envs: int | None = None,
        device: str = "cpu",
        *,
        seed: int = 0,
        compile: bool = True,
        capture: bool = True,
        debug: bool = False,
    ) -> None:
        """Args:
        num_envs: overrides ``cfg.num_envs``.
        seed: seeds torch's generators (the step's randomness comes from the device's default
          generator, which CUDA graphs and ``torch.compile`` both handle).
        compile: ``torch.compile`` the manager phases (``fullgraph=True, dynamic=False``).
        capture: on CUDA, capture the whole step as one CUDA graph after warm-up.
        debug: check actions and states eagerly after every step and raise with the row ids
          (synchronizes the host; for debugging only).
        """
        self.cfg = cfg
        self.num_envs = num_envs if num_envs is not None else cfg.num_envs
        self.debug = debug
        torch.manual_seed(seed)
        if cfg.decimation < 1:
            raise ValueError(f"decimation must be >= 1, got {cfg.decimation}")
        capacity = cfg.reset_capacity or max(8, self.num_envs // 8)
        self.reset_capacity = min(capacity, self.num_envs)
        self.sim = Simulator.from_file(
            cfg.sim.model,
            self.num_envs,
            device,
            keyframe=cfg.sim.keyframe,
            njmax=cfg.sim.njmax,
            nconmax=cfg.sim.nconmax,
            refresh_capacity=self.reset_capacity,
            batched_model_fields=cfg.sim.batched_model_fields,
        )
        self.device = self.sim.torch_device
        self.robot = Robot(self.sim, cfg.sim.keyframe)
        self.physics_dt = float(self.sim.mj_model.opt.timestep)
        self.step_dt = cfg.decimation * self.physics_dt
        self.max_episode_length = max(1, math.ceil(cfg.episode_length_s / self.step_dt))

        n, k = self.num_envs, self.reset_capacity
        self._length_storage, self.episode_length = rows_with_dummy(n, dtype=torch.int64, device=self.device)
        """Steps since each row's episode started, ``(num_envs,)`` int64."""
        self.episode_failed_padded, self.episode_failed = rows_with_dummy(n, dtype=torch.bool, device=self.device)
        """True where the row's last episode ended by a termination (not a time-out), ``(num_envs,)``.
        At reset, index ``episode_failed_padded`` (one dummy row more) with ``reset_ids``."""
        self._compactor = ResetRowCompactor(n, k, self.device)
        self.reset_ids = self._compactor.env_ids
        """Rows reset in the current step, ``(reset_capacity,)`` int64 padded with ``num_envs``."""
        self.reset_qpos = torch.zeros(k, self.sim.mj_model.nq, device=self.device)
        """Staging state of the rows being reset, ``(reset_capacity, nq)``; reset events edit it."""
        self.reset_qvel = torch.zeros(k, self.sim.mj_model.nv, device=self.device)
        """Staging velocities of the rows being reset, ``(reset_capacity, nv)``."""

        self.stats = EpisodeStats(self.device)
        self.action_manager = ActionManager(cfg.actions, self)
        self.command_manager = CommandManager(cfg.commands, self)
        self.event_manager = EventManager(cfg.events, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        self.stats.set_terms(self.reward_manager.term_names, self.termination_manager.term_names)
        self._action_in = torch.zeros(n, self.action_manager.action_dim, device=self.device)
        self._non_finite = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._all_rows = torch.ones(n, dtype=torch.bool, device=self.device)
        self.result = StepResult(
            obs=self.observation_manager.obs,
            reward=self.reward_manager.reward,
            terminated=self.termination_manager.terminated,
            truncated=self.termination_manager.truncated,
            final_obs=self.observation_manager.final_obs,
            stats=self.stats,
        )

        self.compiled = compile
        """Whether the manager phases run through ``torch.compile``."""
        wrap = _compiler(compile)
        self._apply_actions = wrap(self._apply_actions_eager)
        # Separate regions: Inductor 2.13's CPU codegen failed on evaluate + final observations
        # fused into one graph (KeyError on a buffer name), and splitting costs one launch.
        self._evaluate = wrap(self._evaluate_eager)
        self._observe_final = wrap(self._observe_final_eager)
        self._stage_resets = wrap(self._stage_resets_eager)
        self._finish_resets = wrap(self._finish_resets_eager)
        self._observe = wrap(self._observe_eager)
        self._graph: CudaGraph | None = None
        self._capture = capture and self.device.type == "cuda"
        if self._capture and (reason := capture_unsupported_reason(self.device)) is not None:
            warnings.warn(f"CUDA graph capture disabled: {reason}", stacklevel=2)
            self._capture = False
        self.event_manager.apply_startup(self)

    # ------------------------------------------------------------------------------------------
    # Public API.

    @property
    def captured(self) -> bool:
        """Whether ``step`` replays a captured CUDA graph (after the first ``reset`` on CUDA)."""
        return self._graph is not None

    @property
    def reset_rows(self) -> ResetRowCompactor:
        """The reset-row compactor: ``reset_mask``, ``env_ids``, ``pending``, ``deferred_count``."""
        return self._compactor

    @property
    def action_dim(self) -> int:
        return self.action_manager.action_dim

    @property
    def observation_dims(self) -> dict[str, int]:
        return self.observation_manager.group_dims

    def reset(self) -> dict[str, torch.Tensor]:
        """Start a new episode in every row; returns the observations (persistent buffers).

        Episode clocks start at random points when ``randomize_initial_episode_length`` is set,
        so that time-outs spread over steps instead of arriving all at once. On CUDA the first
        call also warms up and captures the step, then resets again.
        """
        self._reset_all_rows()
        if self._capture and self._graph is None:
            self._action_in.zero_()
            self._graph = CudaGraph(self.run_step_body, self.device, warmup=2)
            self._reset_all_rows()
        return self.observation_manager.obs

    def step(self, actions: torch.Tensor) -> StepResult:
        """Advance every row by one env step; rows whose episode ends are reset within it.

        Args:
          actions: ``(num_envs, action_dim)`` float32 on the env's device; copied into the
            persistent action buffer, so the caller may reuse it.
        """
        if self.debug:
            _raise_on_bad_rows("actions", ~torch.isfinite(actions).all(dim=1))
        self.set_actions(actions)
        if self._graph is not None:
            self._graph.replay()
        else:
            self.run_step_body()
        if self.debug:
            _raise_on_bad_rows("state (qpos/qvel)", self._non_finite)
        return self.result

    def persistent_buffers(self) -> dict[str, torch.Tensor]:
        """Every tensor the step reads or writes, by name (for address-stability checks)."""
        buffers = {f"sim.{k}": v for k, v in self.sim.state.tensors().items()}
        buffers.update({f"obs.{k}": v for k, v in self.observation_manager.obs.items()})
        buffers.update({f"final_obs.{k}": v for k, v in self.observation_manager.final_obs.items()})
        for name in ("_action_in", "_non_finite", "episode_length", "reset_ids", "reset_qpos", "reset_qvel"):
            buffers[name] = getattr(self, name)
        for owner in (self.action_manager, self.reward_manager, self.termination_manager, self.stats):
            for name, value in vars(owner).items():
                if isinstance(value, torch.Tensor):
                    buffers[f"{type(owner).__name__}.{name}"] = value
        return buffers

    # ------------------------------------------------------------------------------------------
    # The step. Only tensor ops and Warp launches on persistent buffers from here on.

    def run_step_body(self, marker: Callable[[str], None] | None = None) -> None:
        """Run one step on the actions already in the action buffer, without the CUDA graph.

        For profilers: ``marker(phase)`` is called right after each phase of ``STEP_PHASES``
        (it may record a CUDA event, also while this runs under a CUDA graph capture).
        """
        mark = marker or _no_marker
        self._apply_actions()
        mark("actions")
        self.sim.step(self.cfg.decimation)
        mark("physics")
        self.sim.refresh()
        mark("refresh")
        self._evaluate()
        if self.cfg.final_obs:
            self._observe_final()
        mark("evaluate")
        self._reset_selected_rows()
        mark("reset")
        self._observe(self._compactor.reset_mask, self.cfg.final_obs)
        mark("observe")

    def set_actions(self, actions: torch.Tensor) -> None:
        """Copy ``actions`` (num_envs, action_dim) into the persistent action buffer."""
        if actions.shape != self._action_in.shape or actions.device != self.device:
            raise ValueError(
                f"actions must have shape {tuple(self._action_in.shape)} on {self.device}, "
                f"got {tuple(actions.shape)} on {actions.device}"
            )
        self._action_in.copy_(actions)

    def _reset_selected_rows(self) -> None:
        self._stage_resets()
        self.sim.write_rows(self.reset_ids, self.reset_qpos, self.reset_qvel)
        self.sim.refresh(self.reset_ids)
        self._finish_resets()

    def _apply_actions_eager(self) -> None:
        self.action_manager.process(self._action_in)
        self.event_manager.apply_interval(self)

    def _evaluate_eager(self) -> None:
        self.episode_length.add_(1)
        self.command_manager.update(self)
        state = self.sim.state
        self._non_finite.copy_(~(torch.isfinite(state.qpos).all(dim=1) & torch.isfinite(state.qvel).all(dim=1)))
        terms = self.termination_manager
        terms.compute(self, self._non_finite)
        # Rows still waiting for a deferred reset already reported their end; don't end them twice.
        waiting = self._compactor.pending
        terms.terminated.logical_and_(~waiting)
        terms.truncated.logical_and_(~waiting)
        rewards = self.reward_manager.compute(self)
        rewards.copy_(torch.where(self._non_finite, torch.zeros_like(rewards), rewards))
        ended = terms.terminated | terms.truncated
        self.episode_failed.copy_(torch.where(ended, terms.terminated, self.episode_failed))
        self.stats.accumulate(
            ended,
            terms.terminated,
            terms.truncated,
            self.reward_manager.episode_sums,
            self.episode_length,
            terms.term_flags,
            self._non_finite,
        )
        self._compactor.compact(ended)

    def _observe_final_eager(self) -> None:
        self.observation_manager.compute_final(self)
        # A world that blew up is terminated and reset; keep its NaNs out of the learner's data.
        for final in self.observation_manager.final_obs.values():
            final.copy_(torch.where(self._non_finite[:, None], torch.zeros_like(final), final))

    def _stage_resets_eager(self) -> None:
        self.reset_qpos.copy_(self.robot.default_qpos.expand_as(self.reset_qpos))
        self.reset_qvel.zero_()
        self.command_manager.reset(self.reset_ids)
        self.event_manager.apply_reset(self, self.reset_ids)

    def _finish_resets_eager(self) -> None:
        ids = self.reset_ids
        self._length_storage.index_fill_(0, ids, 0)
        self.action_manager.reset(ids)
        self.reward_manager.reset(ids)
        self.termination_manager.reset(ids)
        for group in self.observation_manager.groups.values():
            for term in group.terms:
                term.reset(ids)

    def _observe_eager(self, reset_rows: torch.Tensor, after_final: bool) -> None:
        self.observation_manager.compute(self, reset_rows, after_final)

    # ------------------------------------------------------------------------------------------
    # Cold path.

    def _reset_all_rows(self) -> None:
        n, k = self.num_envs, self.reset_capacity
        for start in range(0, n, k):
            ids = torch.arange(start, start + k, device=self.device).clamp_(max=n)  # pad with n
            self.reset_ids.copy_(ids)
            self._reset_selected_rows()
        self._compactor.clear_pending()
        self.sim.refresh()
        if self.cfg.randomize_initial_episode_length:
            self.episode_length.copy_(torch.randint_like(self.episode_length, 0, self.max_episode_length))
        self.stats.clear()
        self.action_manager.non_finite_count.zero_()
        self._observe(self._all_rows, False)


STEP_PHASES = ("actions", "physics", "refresh", "evaluate", "reset", "observe")
"""Phases of one env step in order; ``evaluate`` includes the final observations."""


def _no_marker(phase: str) -> None:
    pass


def _compiler(enabled: bool) -> Callable[[Callable], Callable]:
    if not enabled:
        return lambda fn: fn
    return lambda fn: torch.compile(fn, fullgraph=True, dynamic=False)


def _raise_on_bad_rows(what: str, bad: torch.Tensor) -> None:
    rows = torch.nonzero(bad).flatten().tolist()
    if rows:
        raise FloatingPointError(f"{what}: non-finite values in rows {rows[:16]}{' ...' if len(rows) > 16 else ''}")
