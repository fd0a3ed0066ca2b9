"""The env step as one object: :class:`EnvStep` runs it top to bottom, its regions are methods.

``EnvStep.run`` is the whole step. The methods named in ``REGIONS`` are its compiled regions:
``EnvStep.__init__`` replaces each by its ``torch.compile`` in one loop, so a region is a ``def``
to read and, compiled or not, the same Python code. Everything else in ``run`` is a Warp launch
(physics, kinematics refresh, row writes). Only tensor ops and launches on persistent buffers run
in a step; ``reset_all_rows`` is ``reset``'s cold path, and so is ``capture``, which records ``run``
as one CUDA graph at the env's first ``reset``. :class:`StepResult` is what a step returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mujoco_warp as mjw
import torch

from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.envs.snapshot import EnvSnapshot
from unilab_gpu.sim.capture import CudaGraph
from unilab_gpu.sim.overflow import SOLVER_LIMITS
from unilab_gpu.utils.compiling import maybe_compile

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


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
"""Phases of one env step in order, as a profiler's ``marker`` sees them; ``evaluate`` includes
the final observations."""

REGIONS = (
    "apply_actions",
    "evaluate",
    "advance_and_observe_final",
    "stage_resets",
    "finish_resets_and_observe",
    "observe",
)
"""The methods of :class:`EnvStep` that run as compiled regions. Every region call costs a
Python-level entry (guards, loading its inputs, the wrapper) that dwarfs its kernels at a few
hundred rows and runs on cold caches after physics, so the step has as few regions as the
workarounds allow (docs/architecture.md, "Compiler workarounds"). A region calls no other region."""


class CaptureReplayError(RuntimeError):
    """The captured step's first replay did not reproduce the eager step."""


def no_phase_mark(phase: str) -> None:
    """A ``marker(phase)`` that records nothing: for code timed only when a profiler asks."""


class EnvStep:
    """One step of a :class:`~unilab_gpu.envs.manager_based_rl_env.ManagerBasedRlEnv`.

    It holds no state of its own: it reads and writes the env's simulator, managers and buffers,
    which the env's construction phases allocate (so their addresses never change).
    """

    def __init__(self, env: ManagerBasedRlEnv, compile: bool) -> None:
        self.env = env
        self.advance_apart: bool = env.command_manager.advances
        """Whether a command's ``advance`` runs in a region of its own after ``evaluate`` (with the
        final observations); without one, ``evaluate`` ends with the final observations."""
        # The region options work around torch.compile: docs/architecture.md, "Compiler
        # workarounds" (each, and the version it was seen on).
        options: dict[str, Any] = {"fallback_random": True, "reorder_for_locality": False}
        if env.device.type == "cpu":
            # Not a workaround, a cost: Python's wrapper around a region's kernels (a size check,
            # an allocation and a release per buffer) costs more than the kernels at a few hundred
            # rows; in C++ it is cheap. On CUDA the step is replayed as a graph, without wrappers.
            options["cpp_wrapper"] = True
        for name in REGIONS:
            setattr(self, name, maybe_compile(getattr(self, name), compile, options=options))

    def run(self, marker: Callable[[str], None] | None = None) -> None:
        """One step on the actions already in the env's action buffer.

        ``marker(phase)`` is called right after each phase of ``STEP_PHASES``, for profilers (it
        may record a CUDA event, also while this runs under a CUDA graph capture).
        """
        env, mark = self.env, marker or no_phase_mark
        self.apply_actions()
        mark("actions")
        env.sim.step(env.cfg.decimation)
        mark("physics")
        env.sim.refresh()
        mark("refresh")
        self.evaluate()
        if self.advance_apart:
            self.advance_and_observe_final()
        mark("evaluate")
        self._stage_and_write_resets()
        mark("reset")
        self.finish_resets_and_observe(env._compactor.reset_mask, env.cfg.final_obs)
        mark("observe")

    def capture(self, make_graph: Callable[[Callable[[], None]], CudaGraph]) -> CudaGraph:
        """``make_graph(self.run)`` (warm-up and capture), checked by one replay against one eager
        step; raises :class:`CaptureReplayError` when they differ.

        Warm-up, capture and check all run from a snapshot of the env's state (every tensor and
        the RNG states) that is restored afterwards, so a captured env continues exactly as one
        that never captured, also when this raises.
        """
        snapshot = EnvSnapshot(self.env)
        try:
            self.env._action_in.zero_()
            graph = make_graph(self.run)
            mismatch = self._first_replay_mismatch(graph, snapshot)
            if mismatch is not None:
                raise CaptureReplayError(f"the first replay differs from the eager step: {mismatch}")
            return graph
        finally:
            snapshot.restore()

    def _first_replay_mismatch(self, graph: CudaGraph, snapshot: EnvSnapshot) -> str | None:
        """Run one eager step and one replay from the snapshot; describe how they differ, if so.

        A graph that recorded the wrong stream or stale addresses replays nothing or garbage;
        one eager step and one replay from the same state agree to float precision otherwise
        (MJWarp's contact atomics may reorder sums: hence a tolerance, not equality).
        """
        env = self.env
        outputs = {"qpos": env.sim.state.qpos, "qvel": env.sim.state.qvel, "reward": env.reward_manager.reward}
        outputs.update({f"obs.{k}": v for k, v in env.observation_manager.obs.items()})
        snapshot.restore()
        self.run()
        eager = {name: t.clone() for name, t in outputs.items()}
        snapshot.restore()
        graph.replay()
        if env.device.type == "cuda":
            torch.cuda.synchronize(env.device)  # surfaces a replay error here, on the cold path
        for name, expected in eager.items():
            got = outputs[name]
            if not torch.allclose(got, expected, rtol=1e-3, atol=1e-3, equal_nan=True):
                worst = (got - expected).abs().nan_to_num(float("inf")).max()
                return f"{name} differs by up to {float(worst):.3g}"
        return None

    # ------------------------------------------------------------------------------------------
    # Regions (``REGIONS``), in step order.

    def apply_actions(self) -> None:
        """The action terms write the simulator's controls; interval events (pushes) fire."""
        env = self.env
        env.action_manager.process(env._action_in)
        env.event_manager.apply_interval(env)

    def evaluate(self) -> None:
        """Score the step's outcome: episode clocks, state checks, commands, terminations, rewards,
        statistics and the rows to reset; then, unless apart, the commands' advance and the final
        observations."""
        env = self.env
        env.episode_length.add_(1)
        invalid = self._check_state()
        self._count_solver_limits()
        env.command_manager.update(env)
        ended = self._end_episodes(invalid)
        env._compactor.compact(ended)
        env.stats.count_deferred(env._compactor.pending)
        if not self.advance_apart:
            self._advance_and_observe_final()

    def advance_and_observe_final(self) -> None:
        """``evaluate``'s end, as a region of its own when a command advances (``advance_apart``)."""
        self._advance_and_observe_final()

    def stage_resets(self) -> None:
        """Assemble the new episode starts of the staged rows, each writer on top of the last:
        the default pose and zero velocity, then the terrain (curriculum and origin), then the
        command terms (e.g. a motion reference's pose), then the reset events (e.g. noise). See
        ``managers.reset_staging``."""
        env = self.env
        staging = env.reset_staging
        staging.begin(env.robot.default_qpos)
        if env.terrain is not None:
            env.terrain.stage(staging)
        env.command_manager.reset(staging)
        env.event_manager.apply_reset(env, staging)

    def finish_resets_and_observe(self, reset_mask: torch.Tensor, after_final: bool) -> None:
        """The per-row manager resets of the staged rows, then the observations of every row."""
        self._finish_resets()
        self.env.observation_manager.compute(self.env, reset_mask, after_final)

    def observe(self, reset_mask: torch.Tensor, after_final: bool) -> None:
        """The observations of every row (``reset``'s first ones)."""
        self.env.observation_manager.compute(self.env, reset_mask, after_final)

    # ------------------------------------------------------------------------------------------
    # The regions' parts, and reset's cold path.

    def _check_state(self) -> torch.Tensor:
        """Flag rows whose state is non-finite or diverged; returns ``(num_envs,)`` bool invalid."""
        env = self.env
        state = env.sim.state
        env._non_finite.copy_(~(torch.isfinite(state.qpos).all(dim=1) & torch.isfinite(state.qvel).all(dim=1)))
        # A finite blow-up (|qvel| = 1e4) would earn huge penalties every step and never end.
        bounds = env.cfg.divergence
        outside = (state.qpos.abs() > bounds.max_qpos).any(dim=1) | (state.qvel.abs() > bounds.max_qvel).any(dim=1)
        env._diverged.copy_(outside & ~env._non_finite)
        invalid = env._non_finite | env._diverged
        env.state_valid.copy_(~invalid)  # before the commands: their step metrics skip these rows
        return invalid

    def _count_solver_limits(self) -> None:
        """Count MJWarp's solver caps into the statistics (rather than printed per substep)."""
        env = self.env
        flags = env.sim.overflow
        env.stats.count_solver_limits((flags & SOLVER_ITERATIONS) != 0, (flags & SOLVER_LINE_SEARCH) != 0)
        flags.bitwise_and_(~SOLVER_LIMITS)

    def _end_episodes(self, invalid: torch.Tensor) -> torch.Tensor:
        """Terminations, rewards and the statistics of ended episodes; returns ``(num_envs,)`` ended."""
        env = self.env
        terms = env.termination_manager
        terms.compute(env, invalid)
        # Rows still waiting for a deferred reset already reported their end; don't end them twice.
        waiting = env._compactor.pending
        env.transition_valid.copy_(~waiting)
        terms.terminated.logical_and_(~waiting)
        terms.truncated.logical_and_(~waiting)
        env.reward_manager.compute(env, invalid | waiting)  # past its end a row earns nothing
        ended = terms.terminated | terms.truncated
        env.reset_staging.record_ends(ended, terms.terminated)
        env.stats.accumulate(
            ended,
            terms.terminated,
            terms.truncated,
            env.reward_manager.episode_sums,
            env.episode_length,
            terms.term_flags,
            env._non_finite & ~waiting,  # a row waiting for its reset was counted when it went bad
            env._diverged & ~waiting,
            env.action_manager.non_finite_rows,
        )
        return ended

    def _advance_and_observe_final(self) -> None:
        env = self.env
        env.command_manager.advance(env)  # the next observation shows what the next step scores
        if env.cfg.final_obs:
            env.observation_manager.compute_final(env)
            # A world that blew up is terminated and reset; keep its NaNs (or 1e4s) out of the learner's data.
            invalid = (env._non_finite | env._diverged)[:, None]
            for final in env.observation_manager.final_obs.values():
                final.copy_(torch.where(invalid, torch.zeros_like(final), final))

    def _stage_and_write_resets(self) -> None:
        staging = self.env.reset_staging
        self.stage_resets()
        self.env.sim.write_rows(staging.env_ids, staging.qpos, staging.qvel)
        self.env.sim.refresh(staging.env_ids)

    def _finish_resets(self) -> None:
        env = self.env
        ids = env.reset_staging.env_ids
        env._length_storage.index_fill_(0, ids, 0)
        env.action_manager.reset(ids)
        env.reward_manager.reset(ids)
        env.termination_manager.reset(ids)
        for group in env.observation_manager.groups.values():
            for term in group.terms:
                term.reset(ids)

    def reset_all_rows(self) -> None:
        """``reset``'s cold path: every row through the step's reset phases, ``reset_capacity`` rows
        at a time, then a full refresh and the first observations of all rows."""
        env = self.env
        n, k = env.num_envs, env.reset_capacity
        for start in range(0, n, k):
            ids = torch.arange(start, start + k, device=env.device).clamp_(max=n)  # pad with n
            env.reset_staging.env_ids.copy_(ids)
            self._stage_and_write_resets()
            self._finish_resets()  # cold path: not worth a compiled region of its own
        env._compactor.clear_pending()
        env.sim.refresh()
        if env.cfg.randomize_initial_episode_length:
            env.episode_length.copy_(torch.randint_like(env.episode_length, 0, env.max_episode_length))
        env.stats.clear()
        env.action_manager.non_finite_count.zero_()
        env.state_valid.fill_(True)  # every row starts afresh: none carries a diverged state
        self.observe(env._all_rows, False)
