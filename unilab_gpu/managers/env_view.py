"""What a term sees of the env: the attributes terms and managers may read and write.

Terms are called with the env, ``f(env, **params)``; this Protocol declares which of the env's
attributes they may use, so a term written against it works with any env that satisfies it,
and the managers need not know the env class (``managers/`` never imports ``envs/``). The parts of
the managers and of the terrain that terms use are Protocols here too, so this module names no
manager and no terrain module: they import it, never the other way.
``ManagerBasedRlEnv`` satisfies it (tested). Everything listed is built before the first
term, except where noted; every tensor is a persistent buffer (write it in place, never
rebind it: the step is captured as a CUDA graph).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from unilab_gpu.managers.reset_staging import ResetStaging
    from unilab_gpu.managers.term_cfg import RewardTermCfg
    from unilab_gpu.sim.robot import Robot
    from unilab_gpu.sim.simulator import Simulator


class StatsRegistry(Protocol):
    """The part of the env's episode statistics that terms use: publish device scalars."""

    step_sums: dict[str, torch.Tensor]
    """The accumulators of ``add_step_mean`` by name (terms that add into one shared accumulator find it here)."""

    def register(self, name: str, value: torch.Tensor) -> None:
        """Report the 0-d tensor ``value`` (kept up to date by the term) under ``name``."""
        ...

    def add_step_mean(self, name: str) -> torch.Tensor:
        """A 0-d accumulator the term adds one value into every step; reported as a mean per step."""
        ...

    def add_row_groups(self, prefix: str, names: Sequence[str], row_group: torch.Tensor) -> None:
        """Also total ended episodes per group (``row_group (num_envs,)`` int64 names each row's
        group): reported as ``<prefix>/<name>/episodes``, ``episode_length``, ``failure_rate``."""
        ...


class ActionHistory(Protocol):
    """The part of the action manager that terms read: the last two actions, ``(N, action_dim)``."""

    last_action: torch.Tensor
    prev_action: torch.Tensor


class Commands(Protocol):
    """The part of the command manager that terms use."""

    def get(self, name: str) -> Any:
        """The command term ``name`` (a class term: its state and methods)."""
        ...


class RewardTerm(Protocol):
    """A reward term as a curriculum sees it: its name and config (``cfg.weight``)."""

    @property
    def name(self) -> str: ...

    @property
    def cfg(self) -> RewardTermCfg: ...


class Rewards(Protocol):
    """The part of the reward manager that terms use: its terms and their weights, which a curriculum
    may rescale in place."""

    weights: torch.Tensor

    @property
    def terms(self) -> Sequence[RewardTerm]: ...


class Ground(Protocol):
    """The part of a generated terrain (``terrain.terrain.Terrain``) that terms read."""

    level: torch.Tensor
    env_origin: torch.Tensor

    def heights_at(self, xy: torch.Tensor) -> torch.Tensor:
        """The ground height under each point of ``xy (..., 2)``, shape ``(...)``."""
        ...


@runtime_checkable
class EnvView(Protocol):
    """The term-facing env. Shapes: ``N = num_envs``, ``J`` robot joints, ``K`` reset capacity.

    Read:
      num_envs: ``N`` parallel worlds (rows of every per-row buffer).
      device: the indexed torch device of every buffer.
      step_dt: seconds per env step (``decimation`` physics steps).
      max_episode_length: steps after which the ``time_out`` term fires.
      episode_length: ``(N,)`` int64, steps since each row's episode started.
      sim: the simulator: ``sim.state`` (zero-copy ``(N, ...)`` views of qpos, qvel, ctrl, body
        and site poses and velocities, sensordata, body contacts), ``sim.model_fields``
        (per-world model arrays, ``(N, ...)``), ``sim.mj_model`` and MuJoCo-id lookups by name
        (``body_ids``, ``site_ids``, ...; cold path).
      robot: typed views of the robot: ``joint_pos``/``joint_vel (N, J)``, ``default_joint_pos
        (J,)``, ``joint_limits (J, 2)``, ``root_pos_w (N, 3)``, ``root_quat_w (N, 4)`` wxyz,
        ``root_lin_vel_w (N, 3)``, ``root_ang_vel_b (N, 3)``, ``default_qpos (nq,)``,
        ``joint_columns(names)`` (cold path).
      action_manager: ``last_action``/``prev_action (N, action_dim)``.
      command_manager: ``get(name)`` returns a command term (built before the event,
        termination, reward and observation terms, which may read it).
      state_valid: ``(N,)`` bool, rows whose physics state after this step's physics is finite
        and inside the divergence bounds; set before the commands update. The other rows are
        reset at the step's end: a step metric averages over the valid rows only
        (``row_buffers.valid_row_mean``).
      terrain: the generated ground (``terrain.terrain.Terrain``: ``heights_at(xy)``, each row's
        ``level``, ``env_origin (N, 3)``), or None on a flat floor; built before every term.
      step_frozen: whether the step's Python-level choices are fixed (its compiled regions traced
        or its CUDA graph captured, at the first ``reset``): a term setting that the step reads
        through a Python branch can no longer change, so a term's cold-path setter raises then.
    Write:
      reset_staging: the episode starts of the rows being reset (``env_ids (K,)``,
        ``qpos (K, nq)``, ``qvel (K, nv)``, ``episode_failed (K,)``); reset events edit it.
      robot / sim.state views: interval events may change the state (e.g. push the root).
      sim.model_fields: events randomize the rows they are given.
      reward_manager: ``weights (num_reward_terms,)``, which a curriculum may rescale, and the
        ``terms`` they weight (each one's ``name`` and ``cfg``; built before the event terms).
      stats: publish device scalars (``register``, ``add_step_mean``, ``add_row_groups``) at
        construction.
    """

    num_envs: int
    device: torch.device
    step_dt: float
    max_episode_length: int
    episode_length: torch.Tensor
    sim: Simulator
    robot: Robot
    reset_staging: ResetStaging
    state_valid: torch.Tensor

    # The parts the env holds as richer objects (its managers, its terrain) are read-only here, so
    # that a type checker accepts the env's own classes for the narrower Protocols above.
    @property
    def action_manager(self) -> ActionHistory: ...

    @property
    def command_manager(self) -> Commands: ...

    @property
    def reward_manager(self) -> Rewards: ...

    @property
    def stats(self) -> StatsRegistry: ...

    @property
    def terrain(self) -> Ground | None: ...

    @property
    def step_frozen(self) -> bool: ...


def env_view_members() -> list[str]:
    """The names :class:`EnvView` declares (attributes and read-only properties)."""
    properties = [name for name, value in vars(EnvView).items() if isinstance(value, property)]
    return [*EnvView.__annotations__, *properties]
