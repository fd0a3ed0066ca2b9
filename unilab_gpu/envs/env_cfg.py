"""The schema of a task config (``configs/task/<task>.yaml``), checked on load.

Term tables (``rewards``, ``observations``, ...) are typed ``dict[str, Any]`` in the schema so that
Hydra overrides can add whole terms (``+rewards.extra={func: ..., weight: 1.0}``), which OmegaConf
cannot assign into a dict typed with a dataclass; ``typed_terms`` then checks every entry against
its term dataclass and names the key path of any unknown key or wrong type.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.envs.robot_cfg import RobotCfg, check_robot_values
from unilab_gpu.managers.event_manager import EVENT_MODES
from unilab_gpu.managers.term_cfg import (
    ActionCfg,
    CommandTermCfg,
    EventTermCfg,
    NoiseCfg,
    ObservationGroupCfg,
    ObservationTermCfg,
    RewardTermCfg,
    TermCfg,
    TerminationTermCfg,
    canonical_func,
)
from unilab_gpu.terrain.terrain_cfg import TerrainCfg
from unilab_gpu.utils.checks import check_range, is_number, require

# The shared number checks, worded for this config (``env config: '<key>' must be ...``).
_require = functools.partial(require, config="env config")
_check_range = functools.partial(check_range, config="env config")

MAX_DELAY_STEPS = 50
"""The longest command latency ``actions.delay_steps`` may draw, control steps (1 s at 50 Hz)."""


@dataclass
class SimCfg:
    model: str = "???"
    """Robot name under ``assets/robots`` (its ``scene.xml``) or a path to an MJCF file."""
    keyframe: str | None = None
    """Keyframe for the default state (reset staging and default joint positions)."""
    njmax: int = 300
    nconmax: int = 48
    batched_model_fields: list[str] = field(default_factory=list)
    """MJWarp model fields with one copy per world (e.g. ``geom_friction``), for randomization."""


@dataclass
class DivergenceCfg:
    """The physically plausible envelope of a row's state. A row outside it is treated like one
    whose state turned NaN: terminated, its reward zeroed, reset, and counted in the stats; a
    finite blow-up would otherwise earn huge penalties every step and never end."""

    max_qpos: float = 1000.0
    """Largest ``|qpos|`` entry (m for free-joint positions, rad for hinges)."""
    max_qvel: float = 1000.0
    """Largest ``|qvel|`` entry (m/s, rad/s)."""


@dataclass
class EnvCfg:
    robot: RobotCfg | None = None
    """The robot config the task reads (``configs/robot/<name>.yaml``); None for a task that
    names its model itself (the pendulum)."""
    sim: SimCfg = field(default_factory=SimCfg)
    terrain: TerrainCfg | None = None
    """A generated terrain in place of the scene's floor plane (``unilab_gpu.terrain``,
    docs/terrain.md); None: the scene's own floor."""
    num_envs: int = 64
    decimation: int = 4
    """Physics steps per env step."""
    control_dt: float | None = None
    """The task's control period (s): the env refuses a model whose ``decimation * timestep``
    differs (a 2 ms MJCF would otherwise run a 50 Hz task at 125 Hz). ``None``: not checked."""
    episode_length_s: float = 10.0
    reset_capacity: int = 0
    """Rows reset per step at most (0: ``max(8, num_envs // 8)``); more wait a step, none is lost."""
    final_obs: bool = True
    """Compute pre-reset observations of ended rows (needed to bootstrap truncated episodes)."""
    randomize_initial_episode_length: bool = True
    """Start rows at random points of the episode so time-outs do not line up."""
    divergence: DivergenceCfg = field(default_factory=DivergenceCfg)
    actions: ActionCfg = field(default_factory=ActionCfg)
    observations: dict[str, Any] = field(default_factory=dict)
    """group name -> ``ObservationGroupCfg`` (a term set to null is disabled)."""
    rewards: dict[str, Any] = field(default_factory=dict)
    """name -> ``RewardTermCfg`` or null."""
    terminations: dict[str, Any] = field(default_factory=dict)
    """name -> ``TerminationTermCfg`` or null."""
    commands: dict[str, Any] = field(default_factory=dict)
    """name -> ``CommandTermCfg`` or null."""
    events: dict[str, Any] = field(default_factory=dict)
    """name -> ``EventTermCfg`` or null."""


_TERM_TABLES = {
    "rewards": RewardTermCfg,
    "terminations": TerminationTermCfg,
    "commands": CommandTermCfg,
    "events": EventTermCfg,
}


def typed_terms(cfg: EnvCfg) -> EnvCfg:
    """Turn the plain term tables of ``cfg`` into term dataclasses, in place; returns ``cfg``.

    Raises:
      ValueError: naming the key path (e.g. ``rewards.upright.wieght``) of a bad entry.
    """
    for table, cls in _TERM_TABLES.items():
        entries = getattr(cfg, table)
        setattr(cfg, table, {name: _typed(cls, value, f"{table}.{name}") for name, value in entries.items()})
    groups = {}
    for name, group in cfg.observations.items():
        where = f"observations.{name}"
        if isinstance(group, ObservationGroupCfg):
            groups[name] = group
            continue
        group = dict(group or {})
        terms = group.pop("terms", {}) or {}
        typed_group = _typed(ObservationGroupCfg, group, where)
        typed_group.terms = {t: _typed(ObservationTermCfg, v, f"{where}.terms.{t}") for t, v in terms.items()}
        groups[name] = typed_group
    cfg.observations = groups
    cfg.actions.func = canonical_func(cfg.actions.func)
    return cfg


def _typed(cls: type, value: Any, where: str) -> Any:
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping for {cls.__name__}, got {value!r}")
    try:
        typed = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), value))
    except OmegaConfBaseException as error:
        key = f"{where}.{error.full_key}" if getattr(error, "full_key", "") else where
        message = " ".join(str(error).split("\n")[0].split())
        raise ValueError(f"bad config at '{key}': {message}") from None
    if isinstance(typed, TermCfg):
        typed.func = canonical_func(typed.func)  # one spelling from here on (export, sim-to-sim)
    return typed


def check_env_cfg(cfg: EnvCfg, num_envs: int) -> None:
    """Reject numeric settings that would build a silent, useless env (``episode_length_s <= 0``
    truncates every step, a NaN weight makes every reward NaN, a reversed clip pins every
    control...). Call after :func:`typed_terms`.

    Raises:
      ValueError: ``env config: '<key path>' must be <expected>, got <value>``.
    """
    _require(
        isinstance(num_envs, int) and not isinstance(num_envs, bool) and num_envs >= 1, "num_envs", ">= 1", num_envs
    )
    for key in ("njmax", "nconmax"):
        _require(getattr(cfg.sim, key) >= 1, f"sim.{key}", ">= 1", getattr(cfg.sim, key))
    # MJWarp keeps the contacts of all worlds in one array, and a Warp array axis holds < 2**31 entries.
    most = (WARP_MAX_AXIS - 1) // max(cfg.sim.nconmax, 1)
    _require(
        num_envs <= most,
        "num_envs",
        f"at most {most:,} (Warp's 2**31 array limit at sim.nconmax = {cfg.sim.nconmax})",
        num_envs,
    )
    _require(cfg.decimation >= 1, "decimation", ">= 1", cfg.decimation)
    if cfg.control_dt is not None:
        _require(
            is_number(cfg.control_dt) and cfg.control_dt > 0, "control_dt", "a finite number > 0 (s)", cfg.control_dt
        )
    if cfg.robot is not None:
        check_robot_values(cfg.robot)
    _require(
        is_number(cfg.episode_length_s) and cfg.episode_length_s > 0, "episode_length_s", "> 0", cfg.episode_length_s
    )
    _require(cfg.reset_capacity >= 0, "reset_capacity", ">= 0 (0: automatic)", cfg.reset_capacity)
    for key in ("max_qpos", "max_qvel"):
        value = getattr(cfg.divergence, key)
        _require(is_number(value) and value > 0, f"divergence.{key}", "a finite number > 0", value)
    if cfg.actions.clip is not None:
        _check_range("actions.clip", cfg.actions.clip, strict=True)
    delay = cfg.actions.delay_steps
    if delay is not None:
        _require(
            len(delay) == 2 and all(type(d) is int for d in delay) and 0 <= delay[0] <= delay[1] <= MAX_DELAY_STEPS,
            "actions.delay_steps",
            f"[low, high] whole control steps with 0 <= low <= high <= {MAX_DELAY_STEPS}",
            list(delay),
        )
    if cfg.actions.target_bias is not None:
        _check_range("actions.target_bias", cfg.actions.target_bias, strict=False)
    _check_params("actions.params", cfg.actions.params)
    for name, term in cfg.rewards.items():
        if term is not None:
            _require(is_number(term.weight), f"rewards.{name}.weight", "a finite number", term.weight)
    for table in ("rewards", "terminations", "commands", "events"):
        for name, term in getattr(cfg, table).items():
            if term is not None:
                _check_params(f"{table}.{name}.params", term.params)
    for name, group in cfg.observations.items():
        for term_name, term in group.terms.items():
            if term is None:
                continue
            where = f"observations.{name}.terms.{term_name}"
            _require(term.history >= 1, f"{where}.history", ">= 1", term.history)
            _require(is_number(term.scale), f"{where}.scale", "a finite number", term.scale)
            if term.clip is not None:
                _check_range(f"{where}.clip", term.clip, strict=True)
            if term.noise is not None:
                _check_noise(f"{where}.noise", term.noise)
            _check_params(f"{where}.params", term.params)
    for name, event in cfg.events.items():
        if event is None:
            continue
        where = f"events.{name}"
        _require(event.mode in EVENT_MODES, f"{where}.mode", f"one of {', '.join(EVENT_MODES)}", event.mode)
        if event.mode == "interval" or event.interval_range_s is not None:
            _check_range(f"{where}.interval_range_s", event.interval_range_s, strict=False)
            low = event.interval_range_s[0]
            _require(low > 0, f"{where}.interval_range_s", "[low, high] with low > 0", event.interval_range_s)


def check_control_rate(cfg: EnvCfg, timestep: float) -> None:
    """Refuse a model whose physics ``timestep`` makes ``decimation * timestep`` differ from the
    task's ``control_dt`` (a 2 ms MJCF under a 5 ms task would silently control at 125 Hz, not 50).

    Raises:
      ValueError: one line with both periods and the two ways to agree.
    """
    if cfg.control_dt is None:
        return
    period = cfg.decimation * timestep
    if abs(period - cfg.control_dt) <= 1e-6 * cfg.control_dt:
        return
    fixes = [f"the robot config's physics.timestep: {cfg.control_dt / cfg.decimation:g}"]
    steps = cfg.control_dt / timestep
    if abs(steps - round(steps)) <= 1e-6 * steps and round(steps) >= 1:
        fixes.insert(0, f"decimation: {round(steps)}")
    raise ValueError(
        f"env config: 'decimation' x timestep = {cfg.decimation} x {timestep:g} s = {period:g} s "
        f"({1 / period:g} Hz), but the task's 'control_dt' is {cfg.control_dt:g} s ({1 / cfg.control_dt:g} Hz); "
        f"set {' or '.join(fixes)}"
    )


def _check_noise(where: str, noise: NoiseCfg) -> None:
    _require(noise.kind in ("uniform", "gaussian"), f"{where}.kind", "uniform or gaussian", noise.kind)
    if noise.kind == "uniform":
        _check_range(where, [noise.low, noise.high], strict=False)
    else:
        _require(is_number(noise.std) and noise.std >= 0, f"{where}.std", "a finite number >= 0", noise.std)


def _check_params(where: str, params: Any) -> None:
    """Every number in a term's params is finite; every ``*_range`` is ``[low, high]`` with low <= high
    (or a list of such pairs, one per axis); every width of an ``exp(-err / std^2)`` kernel (``std``,
    ``sigma``, ``*_std``, ``*_sigma``) is > 0 (0 divides by zero, a negative one is meaningless)."""
    if isinstance(params, dict):
        for key, value in params.items():
            path = f"{where}.{key}"
            if _is_width(str(key)) and not isinstance(value, (list, tuple, dict)):
                _require(is_number(value) and value > 0, path, "a finite number > 0", value)
            elif str(key).endswith("_range") and isinstance(value, (list, tuple)):
                pairs = value if value and all(isinstance(v, (list, tuple)) for v in value) else [value]
                for i, pair in enumerate(pairs):
                    _check_range(path if len(pairs) == 1 and pair is value else f"{path}[{i}]", pair, strict=False)
            else:
                _check_params(path, value)
    elif isinstance(params, (list, tuple)):
        for i, value in enumerate(params):
            _check_params(f"{where}[{i}]", value)
    elif isinstance(params, float):
        _require(is_number(params), where, "a finite number", params)


def _is_width(key: str) -> bool:
    return key in ("std", "sigma") or key.endswith(("_std", "_sigma"))


WARP_MAX_AXIS = 2**31
"""Warp array axes and ``wp.tid()`` extents are signed 32-bit."""
