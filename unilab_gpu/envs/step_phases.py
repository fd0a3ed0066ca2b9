"""The env step's phases: the code ``ManagerBasedRlEnv.step`` runs, eagerly or captured.

``StepPhases`` holds the phase functions of ``ManagerBasedRlEnv`` (a mixin: it reads the sim, the
managers and the buffers the env's construction phases leave); :class:`StepResult` is what a step
returns. Only tensor ops and Warp launches on persistent buffers run here, except in
``_reset_all_rows`` (the cold path of ``reset``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco_warp as mjw
import torch

from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.sim.simulator import SOLVER_LIMITS


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
    valid: torch.Tensor
    """``(num_envs,)`` bool: this step's transition of the row belongs to one episode. False for
    rows whose episode ended in an earlier step but whose reset was deferred (more rows ended at
    once than ``reset_capacity``): they keep simulating past their end until a later step resets
    them, and that step's next observation is already the new episode's. Such transitions must
    not be learned from (the replay skips them), their rewards and end flags are zero."""
    stats: EpisodeStats
    """Device-side accumulators over ended episodes."""


SOLVER_ITERATIONS = int(mjw.OverflowType.ITERATIONS)
SOLVER_LINE_SEARCH = int(mjw.OverflowType.LS_ITERATIONS)

STEP_PHASES = ("actions", "physics", "refresh", "evaluate", "reset", "observe")
"""Phases of one env step in order; ``evaluate`` includes the final observations."""


def no_phase_mark(phase: str) -> None:
    """A ``marker(phase)`` that records nothing: for code timed only when a profiler asks."""


class StepPhases:
    """The step of :class:`~unilab_gpu.envs.manager_based_rl_env.ManagerBasedRlEnv`, phase by phase.

    ``run_step_body`` calls the compiled regions (``_apply_actions``, ``_evaluate``, ...) that
    ``StepCapture._prepare_compile_and_capture`` wraps around the ``*_eager`` functions below.
    """

    def run_step_body(self, marker: Callable[[str], None] | None = None) -> None:
        """Run one step on the actions already in the action buffer, without the CUDA graph.

        For profilers: ``marker(phase)`` is called right after each phase of ``STEP_PHASES``
        (it may record a CUDA event, also while this runs under a CUDA graph capture).
        """
        mark = marker or no_phase_mark
        self._apply_actions()
        mark("actions")
        self.sim.step(self.cfg.decimation)
        mark("physics")
        self.sim.refresh()
        mark("refresh")
        self._evaluate()
        if self._advance_apart:
            self._advance_and_observe_final()
        mark("evaluate")
        self._stage_and_write_resets()
        mark("reset")
        self._finish_resets_and_observe(self._compactor.reset_mask, self.cfg.final_obs)
        mark("observe")

    def set_actions(self, actions: torch.Tensor) -> None:
        """Copy ``actions`` (num_envs, action_dim) into the persistent action buffer.

        The copy is detached: an action that requires grad must not link the env's persistent
        buffers into its autograd graph (which would then grow with every step).
        """
        if not isinstance(actions, torch.Tensor):
            kind = f"{type(actions).__module__}.{type(actions).__name__}"
            raise TypeError(f"actions must be a torch.Tensor on {self.device}, got a {kind}")
        if actions.shape != self._action_in.shape or actions.device != self.device:
            raise ValueError(
                f"actions must have shape {tuple(self._action_in.shape)} on {self.device}, "
                f"got {tuple(actions.shape)} on {actions.device}"
            )
        self._action_in.copy_(actions.detach())

    def _stage_and_write_resets(self) -> None:
        staging = self.reset_staging
        self._stage_resets()
        self.sim.write_rows(staging.env_ids, staging.qpos, staging.qvel)
        self.sim.refresh(staging.env_ids)

    def _apply_actions_eager(self) -> None:
        self.action_manager.process(self._action_in)
        self.event_manager.apply_interval(self)

    def _evaluate_eager(self) -> None:
        self.episode_length.add_(1)
        state = self.sim.state
        self._non_finite.copy_(~(torch.isfinite(state.qpos).all(dim=1) & torch.isfinite(state.qvel).all(dim=1)))
        # A finite blow-up (|qvel| = 1e4) would earn huge penalties every step and never end.
        bounds = self.cfg.divergence
        outside = (state.qpos.abs() > bounds.max_qpos).any(dim=1) | (state.qvel.abs() > bounds.max_qvel).any(dim=1)
        self._diverged.copy_(outside & ~self._non_finite)
        invalid = self._non_finite | self._diverged
        self.state_valid.copy_(~invalid)  # before the commands: their step metrics skip these rows
        flags = self.sim.overflow  # MJWarp's solver caps, counted here rather than printed per substep
        self.stats.count_solver_limits((flags & SOLVER_ITERATIONS) != 0, (flags & SOLVER_LINE_SEARCH) != 0)
        flags.bitwise_and_(~SOLVER_LIMITS)
        self.command_manager.update(self)
        terms = self.termination_manager
        terms.compute(self, invalid)
        # Rows still waiting for a deferred reset already reported their end; don't end them twice.
        waiting = self._compactor.pending
        self.transition_valid.copy_(~waiting)
        terms.terminated.logical_and_(~waiting)
        terms.truncated.logical_and_(~waiting)
        self.reward_manager.compute(self, invalid | waiting)  # past its end a row earns nothing
        ended = terms.terminated | terms.truncated
        self.reset_staging.record_ends(ended, terms.terminated)
        self.stats.accumulate(
            ended,
            terms.terminated,
            terms.truncated,
            self.reward_manager.episode_sums,
            self.episode_length,
            terms.term_flags,
            self._non_finite & ~waiting,  # a row waiting for its reset was counted when it went bad
            self._diverged & ~waiting,
            self.action_manager.non_finite_rows,
        )
        self._compactor.compact(ended)
        self.stats.count_deferred(self._compactor.pending)
        if not self._advance_apart:
            self._advance_and_observe_final_eager()

    def _advance_and_observe_final_eager(self) -> None:
        self.command_manager.advance(self)  # the next observation shows what the next step scores
        if self.cfg.final_obs:
            self._observe_final_eager()

    def _observe_final_eager(self) -> None:
        self.observation_manager.compute_final(self)
        # A world that blew up is terminated and reset; keep its NaNs (or 1e4s) out of the learner's data.
        invalid = (self._non_finite | self._diverged)[:, None]
        for final in self.observation_manager.final_obs.values():
            final.copy_(torch.where(invalid, torch.zeros_like(final), final))

    def _stage_resets_eager(self) -> None:
        """Assemble the new episode starts of the staged rows, each writer on top of the last:
        the default pose and zero velocity, then the terrain (curriculum and origin), then the
        command terms (e.g. a motion reference's pose), then the reset events (e.g. noise). See
        ``managers.reset_staging``."""
        staging = self.reset_staging
        staging.begin(self.robot.default_qpos)
        if self.terrain is not None:
            self.terrain.stage(staging)
        self.command_manager.reset(staging)
        self.event_manager.apply_reset(self, staging)

    def _finish_resets_and_observe_eager(self, reset_mask: torch.Tensor, after_final: bool) -> None:
        self._finish_resets_eager()
        self._observe_eager(reset_mask, after_final)

    def _finish_resets_eager(self) -> None:
        ids = self.reset_staging.env_ids
        self._length_storage.index_fill_(0, ids, 0)
        self.action_manager.reset(ids)
        self.reward_manager.reset(ids)
        self.termination_manager.reset(ids)
        for group in self.observation_manager.groups.values():
            for term in group.terms:
                term.reset(ids)

    def _observe_eager(self, reset_mask: torch.Tensor, after_final: bool) -> None:
        self.observation_manager.compute(self, reset_mask, after_final)

    def _reset_all_rows(self) -> None:
        """``reset``'s cold path: every row through the step's reset phases, ``reset_capacity`` rows
        at a time, then a full refresh and the first observations of all rows."""
        n, k = self.num_envs, self.reset_capacity
        for start in range(0, n, k):
            ids = torch.arange(start, start + k, device=self.device).clamp_(max=n)  # pad with n
            self.reset_staging.env_ids.copy_(ids)
            self._stage_and_write_resets()
            self._finish_resets_eager()  # cold path: not worth a compiled region of its own
        self._compactor.clear_pending()
        self.sim.refresh()
        if self.cfg.randomize_initial_episode_length:
            self.episode_length.copy_(torch.randint_like(self.episode_length, 0, self.max_episode_length))
        self.stats.clear()
        self.action_manager.non_finite_count.zero_()
        self.state_valid.fill_(True)  # every row starts afresh: none carries a diverged state
        self._observe(self._all_rows, False)
