"""The manager-based RL env: one sync-free, static-shape step, captured once on CUDA.

The env is built in the phases of ``CONSTRUCTION_PHASES``; the step itself is one object,
``envs.env_step.EnvStep`` (its compiled regions are its methods). The env captures that step as one
CUDA graph at the first ``reset`` and replays it in ``step``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch

from unilab_gpu.envs.env_cfg import EnvCfg, check_control_rate, check_env_cfg
from unilab_gpu.envs.env_scene import bind_terrain, model_edit
from unilab_gpu.envs.env_step import EnvStep, StepResult
from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.envs.learning_state import learning_state, load_learning_state
from unilab_gpu.envs.reset_rows import ResetRowCompactor
from unilab_gpu.envs.snapshot import env_tensors
from unilab_gpu.managers.action_manager import ActionManager
from unilab_gpu.managers.command_manager import CommandManager
from unilab_gpu.managers.event_manager import EventManager
from unilab_gpu.managers.observation_manager import ObservationManager
from unilab_gpu.managers.reset_staging import ResetStaging
from unilab_gpu.managers.reward_manager import RewardManager
from unilab_gpu.managers.row_buffers import rows_with_dummy
from unilab_gpu.managers.term_table import term_table
from unilab_gpu.managers.termination_manager import TerminationManager
from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph, capture_unsupported_reason
from unilab_gpu.sim.device import verbose_requested
from unilab_gpu.sim.model_files import load_mj_model
from unilab_gpu.sim.robot import Robot
from unilab_gpu.sim.simulator import Simulator
from unilab_gpu.terrain.generator import generate_terrain
from unilab_gpu.terrain.terrain import Terrain

CONSTRUCTION_PHASES = (
    "_build_sim_and_scene",
    "_allocate_row_state",
    "_build_managers",
    "_allocate_step_buffers",
    "_prepare_compile_and_capture",
)
"""The methods ``ManagerBasedRlEnv.__init__`` calls, in order; each leaves what the next reads:
the simulator, robot and timing; the per-row state the terms read (episode clock, reset rows and
staging, terrain levels, validity, statistics); the managers; the step's buffers and result; the
step with its compiled regions, and the capture decision."""


class ManagerBasedRlEnv:
    """``num_envs`` copies of a task: a simulator plus action, command, event, termination, reward
    and observation managers built from an ``EnvCfg``.

    One ``step`` runs, in order: actions -> ``decimation`` physics substeps -> kinematics refresh
    -> evaluate (episode clock, command updates, terminations, rewards, stats, reset row compaction,
    command advance, final observations) -> reset of the compacted rows (staging state, commands, reset events, row
    writes, row-restricted refresh, per-row manager resets) -> observations (``EnvStep.run``).
    Nothing in it reads a value back to the host or changes a shape, so on CUDA the whole step is
    captured once as a CUDA graph and replayed; on CPU the same code runs directly.

    Every random draw uses torch's default generator of the env's device; the env never seeds it
    (``make_env(seed=...)`` does, before building the env), so building an env leaves a caller's
    seeding alone.
    """

    # The managers, built by ``_build_managers`` in this order (declared here for type checkers:
    # the step, ``EnvStep``, reads them through the env).
    command_manager: CommandManager
    action_manager: ActionManager
    termination_manager: TerminationManager
    reward_manager: RewardManager
    event_manager: EventManager
    observation_manager: ObservationManager

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
        self._build_sim_and_scene(device, deterministic=deterministic, verbose=verbose)
        self._allocate_row_state()
        self._build_managers()
        self._allocate_step_buffers()
        self._prepare_compile_and_capture(compile, capture)
        self.event_manager.apply_startup(self)
        self._state = "built"
        """``"built"`` until the first :meth:`reset`, then ``"running"``; ``"closed"`` after :meth:`close`."""
        if announce:
            print(self.describe() if verbose_requested(verbose) else self.headline())

    # ------------------------------------------------------------------------------------------
    # Construction phases (``CONSTRUCTION_PHASES``), in order.

    def _build_sim_and_scene(self, device: str | torch.device, *, deterministic: bool, verbose: bool | None) -> None:
        """The terrain, the MuJoCo model with the robot's edits, the simulator, the robot and the
        step's timing (``physics_dt``, ``step_dt``, ``max_episode_length``)."""
        cfg = self.cfg
        self.terrain_grid = generate_terrain(cfg.terrain) if cfg.terrain is not None else None
        """The generated ground (``terrain.generator.TerrainGrid``), or None on the scene's flat floor."""
        self.model_edit = model_edit(cfg.robot, self.terrain_grid)
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

    def _allocate_row_state(self) -> None:
        """The per-row state the managers' terms read: episode clock, reset rows and staging, the
        terrain on the device (each row's level), state validity and episode statistics."""
        cfg = self.cfg
        n, k = self.num_envs, self.reset_capacity
        self._length_storage, self.episode_length = rows_with_dummy(n, dtype=torch.int64, device=self.device)
        """Steps since each row's episode started, ``(num_envs,)`` int64."""
        self._compactor = ResetRowCompactor(n, k, self.device)
        self.reset_staging = ResetStaging(n, self._compactor.env_ids, self.sim.mj_model.nq, self.sim.mj_model.nv)
        """The rows reset in the current step and their new state (``env_ids (reset_capacity,)``
        padded with ``num_envs``, ``qpos``, ``qvel``, ``episode_failed``): filled by the env, the
        command terms and the reset events, in that order (``EnvStep.stage_resets``)."""

        grid, terrain_cfg = self.terrain_grid, cfg.terrain  # a grid exactly when the task has a terrain
        self.terrain = (
            None
            if grid is None or terrain_cfg is None
            else Terrain(grid, self.num_envs, self.device, max_initial_level=terrain_cfg.max_initial_level)
        )
        """The terrain on the device (heights, origins, each row's level), or None on flat ground."""

        self.state_valid = torch.ones(n, dtype=torch.bool, device=self.device)
        """Rows whose physics state after this step's physics is finite and inside
        ``cfg.divergence``, ``(num_envs,)``; set before the commands update. The other rows are
        reset at the step's end, so what terms compute on them means nothing (``EnvView``)."""
        self.stats = EpisodeStats(self.device)

    def _build_managers(self) -> None:
        """The six managers, in the order their terms may read each other (``EnvView``), then the
        terrain's statistics and curriculum (which read a command term)."""
        cfg = self.cfg
        # Terms may read the managers built before theirs (``EnvView``): commands first (actions
        # may be residuals about a command's reference), the reward manager before the events
        # (a curriculum event rescales its weights).
        self.command_manager = CommandManager(cfg.commands, self)
        self.action_manager = ActionManager(cfg.actions, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.reward_manager = RewardManager(cfg.rewards, self)
        self.event_manager = EventManager(cfg.events, self)
        self.observation_manager = ObservationManager(cfg.observations, self)
        if self.terrain is not None and cfg.terrain is not None:
            bind_terrain(self, cfg.terrain)
        self.stats.set_terms(self.reward_manager.term_names, self.termination_manager.term_names)

    def _allocate_step_buffers(self) -> None:
        """The step's own buffers, ``(num_envs, action_dim)`` actions (sized by the action manager)
        and ``(num_envs,)`` row flags, and the result every ``step`` returns."""
        n = self.num_envs
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

    def _prepare_compile_and_capture(self, compile: bool, capture: bool | str) -> None:
        """The step and its compiled regions, and whether ``reset`` captures the step (the device
        must be CUDA and able to capture); see ``__init__``."""
        self.compiled = compile
        """Whether the step's regions run through ``torch.compile``."""
        self._step = EnvStep(self, compile)
        self._graph: CudaGraph | None = None
        self.capture_mode = capture
        """``"auto"``, ``True`` or ``False``, as given."""
        self.capture_skipped: str | None = None
        """Why the step runs eagerly on this CUDA device (``None`` when it is captured or on CPU)."""
        self._capture = capture is not False and self.device.type == "cuda"
        if self._capture and (reason := capture_unsupported_reason(self.device)) is not None:
            self._skip_capture(reason, stacklevel=4)  # the warning points at the env's builder

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
        self._step.reset_all_rows()
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
            self._step.run()
        if self.debug:
            _raise_on_bad_rows("state (qpos/qvel)", self._non_finite)
        return self.result

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

    def run_step_body(self, marker: Callable[[str], None] | None = None) -> None:
        """One step on the actions already in the action buffer, without the CUDA graph (what the
        graph records): for profilers, whose ``marker(phase)`` is called after each phase."""
        self._step.run(marker)

    def close(self) -> None:
        """Release the captured CUDA graph; the env cannot step or reset afterwards. Calling it
        again does nothing (the simulator's arrays are freed with the env object)."""
        self._graph = None
        self._state = "closed"

    def _check_open(self, call: str) -> None:
        if self._state == "closed":
            raise RuntimeError(f"{self.name}: {call}() after close(); build a new env")

    # ------------------------------------------------------------------------------------------
    # Capture (the cold path: at the first ``reset``).

    def _capture_step(self) -> None:
        """Capture the step (``EnvStep.capture``: warm-up, capture and a first-replay check that
        leave no trace). On failure: raise with ``capture=True``, else warn and stay eager."""
        try:
            self._graph = self._step.capture(self._make_graph)
        except Exception as error:
            if self.capture_mode is True:
                raise
            self._skip_capture(f"capture failed ({type(error).__name__}: {error})")

    def _make_graph(self, fn: Callable[[], None]) -> CudaGraph:
        return CudaGraph(fn, self.device, warmup=2)

    def _skip_capture(self, reason: str, stacklevel: int = 3) -> None:
        if self.capture_mode is True:
            raise CaptureUnsupportedError(reason)
        self._capture = False
        self.capture_skipped = reason
        warnings.warn(f"unilab-gpu: the env step runs eagerly on {self.device}: {reason}", stacklevel=stacklevel)

    def learning_state(self) -> dict[str, dict[str, torch.Tensor]]:
        """What the env has learned over a run and a resume must restore, by term path
        (``envs.learning_state``): stateful terms (e.g. the adaptive motion sampler's failure
        rates under ``commands.motion``) and the terrain curriculum's levels under ``terrain``."""
        return learning_state(self)

    def load_learning_state(self, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Restore :meth:`learning_state` in place; a path this env does not have is an error."""
        load_learning_state(self, state)

    def persistent_buffers(self) -> dict[str, torch.Tensor]:
        """Every tensor the step reads or writes, by name (for address-stability checks): the
        simulator's arrays and every tensor of the managers, terms and statistics."""
        return env_tensors(self)


def _raise_on_bad_rows(what: str, bad: torch.Tensor) -> None:
    rows = torch.nonzero(bad).flatten().tolist()
    if rows:
        raise FloatingPointError(f"{what}: non-finite values in rows {rows[:16]}{' ...' if len(rows) > 16 else ''}")
