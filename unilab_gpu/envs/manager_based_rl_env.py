"""The manager-based RL env: one sync-free, static-shape step, captured once on CUDA."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import mujoco_warp as mjw
import torch

from unilab_gpu.envs.env_cfg import EnvCfg, check_control_rate, check_env_cfg
from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.envs.reset_rows import ResetRowCompactor
from unilab_gpu.envs.robot_model import robot_edit
from unilab_gpu.envs.snapshot import EnvSnapshot, env_tensors
from unilab_gpu.managers.action_manager import ActionManager
from unilab_gpu.managers.command_manager import CommandManager
from unilab_gpu.managers.event_manager import EventManager
from unilab_gpu.managers.observation_manager import ObservationManager
from unilab_gpu.managers.reset_staging import ResetStaging
from unilab_gpu.managers.reward_manager import RewardManager
from unilab_gpu.managers.row_buffers import rows_with_dummy
from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_table import term_table
from unilab_gpu.managers.termination_manager import TerminationManager
from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph, capture_unsupported_reason
from unilab_gpu.sim.device import verbose_requested
from unilab_gpu.sim.robot import Robot
from unilab_gpu.sim.simulator import SOLVER_LIMITS, Simulator, load_mj_model
from unilab_gpu.terrain.curriculum import TerrainCurriculum
from unilab_gpu.terrain.generator import TerrainCfg, generate_terrain
from unilab_gpu.terrain.scene import add_terrain
from unilab_gpu.terrain.terrain import Terrain
from unilab_gpu.utils.compiling import maybe_compile


class CaptureReplayError(RuntimeError):
    """The captured step's first replay did not reproduce the eager step."""


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


class ManagerBasedRlEnv:
    """``num_envs`` copies of a task: a simulator plus action, command, event, termination, reward
    and observation managers built from an ``EnvCfg``.

    One ``step`` runs, in order: actions -> ``decimation`` physics substeps -> kinematics refresh
    -> evaluate (episode clock, command updates, terminations, rewards, stats, reset row compaction,
    command advance, final observations) -> reset of the compacted rows (staging state, commands, reset events, row
    writes, row-restricted refresh, per-row manager resets) -> observations. Nothing in it reads a
    value back to the host or changes a shape, so on CUDA the whole step is captured once as a
    CUDA graph and replayed; on CPU the same code runs directly.

    Every random draw uses torch's default generator of the env's device; the env never seeds it
    (``make_env(seed=...)`` does, before building the env), so building an env leaves a caller's
    seeding alone.
    """

    def __init__(
        self,
        cfg: EnvCfg,
        num_envs: int | None = None,
        device: str | torch.device = "cpu",
        *,
        compile: bool = True,
        capture: bool | str = "auto",
        debug: bool = False,
        deterministic: bool = False,
        verbose: bool | None = None,
        announce: bool = True,
        name: str = "env",
    ) -> None:
        """Args:
        num_envs: overrides ``cfg.num_envs``.
        device: ``"auto"``, ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (``self.device`` is indexed).
        compile: ``torch.compile`` the manager phases (``fullgraph=True, dynamic=False``).
        capture: ``"auto"`` (default): on CUDA, capture the whole step as one CUDA graph at the
          first ``reset``; if the device cannot capture, or capture or the first-replay check
          fails, warn once with the reason and run the step eagerly. ``True``: the same, but
          raise instead of falling back (for tests). ``False``: never capture.
        debug: check actions and states eagerly after every step and raise with the row ids
          (synchronizes the host; for debugging only).
        deterministic: MJWarp's deterministic mode (bitwise-repeatable physics; slower).
        verbose: show Warp's log lines (module loads) and, with ``announce``, the term table
          (:meth:`describe`); ``None`` reads ``UNILAB_VERBOSE``.
        announce: print one line describing the env when it is built (:meth:`headline`).
        name: the task's name, for that line and error messages.
        """
        if capture not in (True, False, "auto"):
            raise ValueError(f"capture must be true, false or 'auto', got {capture!r}")
        self.cfg = cfg
        self.name = name
        self.num_envs = num_envs if num_envs is not None else cfg.num_envs
        self.debug = debug
        check_env_cfg(cfg, self.num_envs)
        capacity = cfg.reset_capacity or max(8, self.num_envs // 8)
        self.reset_capacity = min(capacity, self.num_envs)
        self.terrain_grid = generate_terrain(cfg.terrain) if cfg.terrain is not None else None
        """The generated ground (``terrain.generator.TerrainGrid``), or None on the scene's flat floor."""
        self.model_edit = self._model_edit()
        """The edit of the MJCF's spec the env builds its model with: the robot config's physics
        options and MJCF edits (``envs.robot_model``), then the terrain."""
        mj_model = load_mj_model(cfg.sim.model, self.model_edit)
        check_control_rate(cfg, float(mj_model.opt.timestep))
        self.sim = Simulator(
            mj_model,
            self.num_envs,
            device,
            keyframe=cfg.sim.keyframe,
            njmax=cfg.sim.njmax,
            nconmax=cfg.sim.nconmax,
            refresh_capacity=self.reset_capacity,
            batched_model_fields=cfg.sim.batched_model_fields,
            deterministic=deterministic,
            verbose=verbose,
        )
        self.device = self.sim.torch_device
        self.robot = Robot(self.sim, cfg.sim.keyframe)
        self.physics_dt = float(self.sim.mj_model.opt.timestep)
        self.step_dt = cfg.decimation * self.physics_dt
        if cfg.episode_length_s < self.step_dt:  # every episode would be cut after its first step
            raise ValueError(
                f"env config: 'episode_length_s' must be at least one env step (decimation x timestep = "
                f"{self.step_dt:g} s), got {cfg.episode_length_s!r}"
            )
        self.max_episode_length = max(1, math.ceil(cfg.episode_length_s / self.step_dt))

        n, k = self.num_envs, self.reset_capacity
        self._length_storage, self.episode_length = rows_with_dummy(n, dtype=torch.int64, device=self.device)
        """Steps since each row's episode started, ``(num_envs,)`` int64."""
        self._compactor = ResetRowCompactor(n, k, self.device)
        self.reset_staging = ResetStaging(n, self._compactor.env_ids, self.sim.mj_model.nq, self.sim.mj_model.nv)
        """The rows reset in the current step and their new state (``env_ids (reset_capacity,)``
        padded with ``num_envs``, ``qpos``, ``qvel``, ``episode_failed``): filled by the env, the
        command terms and the reset events, in that order (``_stage_resets_eager``)."""

        grid = self.terrain_grid
        self.terrain = (
            None
            if grid is None
            else Terrain(grid, self.num_envs, self.device, max_initial_level=cfg.terrain.max_initial_level)
        )
        """The terrain on the device (heights, origins, each row's level), or None on flat ground."""

        self.state_valid = torch.ones(n, dtype=torch.bool, device=self.device)
        """Rows whose physics state after this step's physics is finite and inside
        ``cfg.divergence``, ``(num_envs,)``; set before the commands update. The other rows are
        reset at the step's end, so what terms compute on them means nothing (``EnvView``)."""
        self.stats = EpisodeStats(self.device)
        # Terms may read the managers built before theirs (``EnvView``): commands first (actions
        # may be residuals about a command's reference), the reward manager before the events
        # (a curriculum event rescales its weights).
        self.command_manager = CommandManager(cfg.commands, self)
        self.action_manager = ActionManager(cfg.actions, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self)
        self.event_manager = EventManager(cfg.events, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        if self.terrain is not None:
            self._bind_terrain(cfg.terrain)
        self.stats.set_terms(self.reward_manager.term_names, self.termination_manager.term_names)
        self._action_in = torch.zeros(n, self.action_manager.action_dim, device=self.device)
        self._non_finite = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._diverged = torch.zeros(n, dtype=torch.bool, device=self.device)
        """Rows whose finite state left ``cfg.divergence`` this step; handled like non-finite ones."""
        self._all_rows = torch.ones(n, dtype=torch.bool, device=self.device)
        self.transition_valid = torch.ones(n, dtype=torch.bool, device=self.device)
        """Rows whose transition of the current step belongs to one episode (``StepResult.valid``)."""
        self.result = StepResult(
            obs=self.observation_manager.obs,
            reward=self.reward_manager.reward,
            terminated=self.termination_manager.terminated,
            truncated=self.termination_manager.truncated,
            final_obs=self.observation_manager.final_obs,
            valid=self.transition_valid,
            stats=self.stats,
        )

        self.compiled = compile
        """Whether the manager phases run through ``torch.compile``."""

        # The region options and boundaries below work around torch.compile: docs/architecture.md,
        # "Compiler workarounds" (each, and the version it was seen on).
        options = {"fallback_random": True, "reorder_for_locality": False}
        if self.device.type == "cpu":
            # Not a workaround, a cost: Python's wrapper around a region's kernels (a size check,
            # an allocation and a release per buffer) costs more than the kernels at a few hundred
            # rows; in C++ it is cheap. On CUDA the step is replayed as a graph, without wrappers.
            options["cpp_wrapper"] = True

        def wrap(fn: Callable) -> Callable:
            return maybe_compile(fn, compile, options=options)

        # Every region call costs a Python-level entry (guards, loading its inputs, the wrapper)
        # that dwarfs its kernels at a few hundred rows and runs on cold caches after physics:
        # the step has as few regions as the workarounds allow.
        self._advance_apart = self.command_manager.advances
        """Whether a command's ``advance`` runs in a region of its own after evaluate (with the
        final observations); without one, evaluate ends with the final observations."""
        self._apply_actions = wrap(self._apply_actions_eager)
        self._evaluate = wrap(self._evaluate_eager)
        self._advance_and_observe_final = wrap(self._advance_and_observe_final_eager)
        self._stage_resets = wrap(self._stage_resets_eager)
        self._finish_resets_and_observe = wrap(self._finish_resets_and_observe_eager)
        self._observe = wrap(self._observe_eager)
        self._graph: CudaGraph | None = None
        self.capture_mode = capture
        """``"auto"``, ``True`` or ``False``, as given."""
        self.capture_skipped: str | None = None
        """Why the step runs eagerly on this CUDA device (``None`` when it is captured or on CPU)."""
        self._capture = capture is not False and self.device.type == "cuda"
        if self._capture and (reason := capture_unsupported_reason(self.device)) is not None:
            self._skip_capture(reason)
        self.event_manager.apply_startup(self)
        self._state = "built"
        """``"built"`` until the first :meth:`reset`, then ``"running"``; ``"closed"`` after :meth:`close`."""
        if announce:
            print(self.describe() if verbose_requested(verbose) else self.headline())

    # ------------------------------------------------------------------------------------------
    # Public API.

    @property
    def captured(self) -> bool:
        """Whether ``step`` replays a captured CUDA graph (after the first ``reset`` on CUDA)."""
        return self._graph is not None

    @property
    def step_frozen(self) -> bool:
        """Whether the step's Python-level choices are fixed: after the first ``reset`` of a
        compiled env (its regions were traced then) or of a captured one (the graph replays what
        the capture recorded). Eager steps re-read every Python branch; these do not."""
        return self._state != "built" and (self.compiled or self.captured)

    def describe(self) -> str:
        """:meth:`headline`, then the term table: every manager's terms with their dims, history,
        noise, clip and scale, weights, termination kinds, event modes and ``func``."""
        managers = (
            self.action_manager,
            self.command_manager,
            self.termination_manager,
            self.reward_manager,
            self.event_manager,
            self.observation_manager,
        )
        return f"{self.headline()}\n{term_table(*managers)}"

    def headline(self) -> str:
        """One line: task, size, device, how the step runs."""
        if self.device.type != "cuda":
            how = "no CUDA graph on CPU"
        elif self.capture_skipped is not None:
            how = "eager (capture skipped, see warning)"
        elif self._capture:
            how = "captured as one CUDA graph at reset()"
        else:
            how = "eager (capture=False)"
        mode = "compiled" if self.compiled else "eager terms"
        return (
            f"unilab-gpu: {self.name} x {self.num_envs} envs on {self.device} "
            f"({mode}, {how}); obs {self.observation_dims}, actions {self.action_dim}"
        )

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
        self._check_open("reset")
        self._reset_all_rows()
        if self._capture and self._graph is None:
            self._capture_step()
        self._state = "running"
        return self.observation_manager.obs

    def step(self, actions: torch.Tensor) -> StepResult:
        """Advance every row by one env step; rows whose episode ends are reset within it.

        Args:
          actions: ``(num_envs, action_dim)`` float32 on the env's device; copied into the
            persistent action buffer, so the caller may reuse it.
        """
        if self._state != "running":  # a Python flag: no host sync
            self._check_open("step")
            raise RuntimeError(f"{self.name}: call reset() before the first step()")
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

    def close(self) -> None:
        """Release the captured CUDA graph; the env cannot step or reset afterwards. Calling it
        again does nothing (the simulator's arrays are freed with the env object)."""
        self._graph = None
        self._state = "closed"

    def _check_open(self, call: str) -> None:
        if self._state == "closed":
            raise RuntimeError(f"{self.name}: {call}() after close(); build a new env")

    def learning_state(self) -> dict[str, dict[str, torch.Tensor]]:
        """What the env has learned over a run and a resume must restore, by term path.

        Every class term with ``state_dict()`` contributes (e.g. the adaptive motion sampler's
        failure rates under ``commands.motion``), and the terrain curriculum its rows' levels under
        ``terrain``; episodes themselves restart on resume.
        """
        state = {path: term.instance.state_dict() for path, term in self._stateful_terms()}
        if self.terrain is not None and self.terrain.curriculum is not None:
            state[TERRAIN_STATE] = {"level": self.terrain.level.detach().clone()}
        return state

    def load_learning_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Restore :meth:`learning_state` in place; a path this env does not have is an error."""
        terms = dict(self._stateful_terms())
        known = set(terms) | ({TERRAIN_STATE} if self.terrain is not None and self.terrain.curriculum else set())
        unknown = sorted(set(state) - known)
        if unknown:
            raise ValueError(f"learning state for terms {unknown}, which this env does not have: {sorted(known)}")
        for path, values in state.items():
            if path == TERRAIN_STATE:
                self._load_terrain_levels(values["level"])
            else:
                terms[path].instance.load_state_dict(values)

    def _load_terrain_levels(self, level: torch.Tensor) -> None:
        terrain = self.terrain
        if tuple(level.shape) != (self.num_envs,):
            raise ValueError(
                f"terrain curriculum state has {tuple(level.shape)} rows, this env {self.num_envs}: "
                "resume with the run's num_envs"
            )
        terrain.set_levels(level.to(self.device))

    def _stateful_terms(self) -> list[tuple[str, Term]]:
        managers = [
            ("commands", list(self.command_manager.terms.values())),
            ("rewards", self.reward_manager.terms),
            ("terminations", self.termination_manager.terms),
            ("events", [t for terms in self.event_manager.by_mode.values() for t in terms]),
        ]
        managers += [(f"observations.{g}", group.terms) for g, group in self.observation_manager.groups.items()]
        return [
            (f"{prefix}.{term.name}", term)
            for prefix, terms in managers
            for term in terms
            if callable(getattr(term.instance, "state_dict", None))
        ]

    def persistent_buffers(self) -> dict[str, torch.Tensor]:
        """Every tensor the step reads or writes, by name (for address-stability checks): the
        simulator's arrays and every tensor of the managers, terms and statistics."""
        return env_tensors(self)

    # ------------------------------------------------------------------------------------------
    # The step. Only tensor ops and Warp launches on persistent buffers from here on.

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

    # ------------------------------------------------------------------------------------------
    # Cold path.

    def _capture_step(self) -> None:
        """Capture the step, check one replay against the eager step, leave no trace.

        Warm-up, capture and check all run from a snapshot of the env's state (every tensor and
        the RNG states) that is restored afterwards, so a captured env continues exactly as one
        that never captured. On failure: raise with ``capture=True``, else warn and stay eager.
        """
        snapshot = EnvSnapshot(self)
        try:
            self._action_in.zero_()
            graph = self._make_graph(self.run_step_body)
            mismatch = self._first_replay_mismatch(graph, snapshot)
            if mismatch is not None:
                raise CaptureReplayError(f"the first replay differs from the eager step: {mismatch}")
            self._graph = graph
        except Exception as error:
            if self.capture_mode is True:
                raise
            self._skip_capture(f"capture failed ({type(error).__name__}: {error})")
        finally:
            snapshot.restore()

    def _make_graph(self, fn: Callable[[], None]) -> CudaGraph:
        return CudaGraph(fn, self.device, warmup=2)

    def _first_replay_mismatch(self, graph: CudaGraph, snapshot: EnvSnapshot) -> str | None:
        """Run one eager step and one replay from the snapshot; describe how they differ, if so.

        A graph that recorded the wrong stream or stale addresses replays nothing or garbage;
        one eager step and one replay from the same state agree to float precision otherwise
        (MJWarp's contact atomics may reorder sums: hence a tolerance, not equality).
        """
        outputs = {"qpos": self.sim.state.qpos, "qvel": self.sim.state.qvel, "reward": self.reward_manager.reward}
        outputs.update({f"obs.{k}": v for k, v in self.observation_manager.obs.items()})
        snapshot.restore()
        self.run_step_body()
        eager = {name: t.clone() for name, t in outputs.items()}
        snapshot.restore()
        graph.replay()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # surfaces a replay error here, on the cold path
        for name, expected in eager.items():
            got = outputs[name]
            if not torch.allclose(got, expected, rtol=1e-3, atol=1e-3, equal_nan=True):
                worst = (got - expected).abs().nan_to_num(float("inf")).max()
                return f"{name} differs by up to {float(worst):.3g}"
        return None

    def _skip_capture(self, reason: str) -> None:
        if self.capture_mode is True:
            raise CaptureUnsupportedError(reason)
        self._capture = False
        self.capture_skipped = reason
        warnings.warn(f"unilab-gpu: the env step runs eagerly on {self.device}: {reason}", stacklevel=3)

    def _model_edit(self) -> Callable[[mujoco.MjSpec], None]:
        robot = robot_edit(self.cfg.robot) if self.cfg.robot is not None else None
        grid = self.terrain_grid

        def edit(spec: mujoco.MjSpec) -> None:
            if robot is not None:
                robot(spec)
            if grid is not None:
                add_terrain(spec, grid)

        return edit

    def _bind_terrain(self, cfg: TerrainCfg) -> None:
        """Publish the mean terrain level and attach the curriculum, which reads the command term
        named in ``terrain.curriculum.command`` (built by now)."""
        terrain = self.terrain
        self.stats.register("terrain/mean_level", terrain.mean_level)
        self.stats.register("terrain/level_fraction", terrain.level_fraction)
        curriculum = cfg.curriculum
        if curriculum is None:
            return
        where = "terrain.curriculum.command"
        if curriculum.command not in self.command_manager.terms:
            raise ValueError(
                f"{where}: no command term {curriculum.command!r}; commands: {sorted(self.command_manager.terms)}"
            )
        command = self.command_manager.get(curriculum.command)
        if not isinstance(getattr(command, "commanded_displacement", None), torch.Tensor):
            raise ValueError(
                f"{where}: command {curriculum.command!r} ({type(command).__name__}) keeps no "
                "'commanded_displacement' (where its commands would have taken the row, e.g. VelocityCommand's)"
            )
        command.record_displacement = True
        size = cfg.sub_terrain_size
        promote = curriculum.promote_distance if curriculum.promote_distance is not None else min(size) / 2
        terrain.curriculum = TerrainCurriculum(
            self.robot.root_pos_w,
            self.episode_length,
            command.commanded_displacement,
            promote,
            curriculum.demote_ratio,
            demote_on_time_out=curriculum.demote_on_time_out,
            promote_ratio=curriculum.promote_ratio,
            min_promote_distance=curriculum.min_promote_distance,
        )

    def _reset_all_rows(self) -> None:
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


TERRAIN_STATE = "terrain"
"""The key of the terrain curriculum's levels in :meth:`ManagerBasedRlEnv.learning_state`."""

STEP_PHASES = ("actions", "physics", "refresh", "evaluate", "reset", "observe")
"""Phases of one env step in order; ``evaluate`` includes the final observations."""


def no_phase_mark(phase: str) -> None:
    """A ``marker(phase)`` that records nothing: for code timed only when a profiler asks."""


def _raise_on_bad_rows(what: str, bad: torch.Tensor) -> None:
    rows = torch.nonzero(bad).flatten().tolist()
    if rows:
        raise FloatingPointError(f"{what}: non-finite values in rows {rows[:16]}{' ...' if len(rows) > 16 else ''}")
