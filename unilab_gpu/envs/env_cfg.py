"""The schema of a task config (``configs/task/<task>.yaml``), checked on load.

Term tables (``rewards``, ``observations``, ...) are typed ``dict[str, Any]`` in the schema so that
Hydra overrides can add whole terms (``+rewards.extra={func: ..., weight: 1.0}``), which OmegaConf
cannot assign into a dict typed with a dataclass; ``typed_terms`` then checks every entry against
its term dataclass and names the key path of any unknown key or wrong type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.managers.term_cfg import (
    ActionCfg,
    CommandTermCfg,
    EventTermCfg,
    ObservationGroupCfg,
    ObservationTermCfg,
    RewardTermCfg,
    TerminationTermCfg,
)


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
class EnvCfg:
    sim: SimCfg = field(default_factory=SimCfg)
    num_envs: int = 64
    decimation: int = 4
    """Physics steps per env step."""
    episode_length_s: float = 10.0
    reset_capacity: int = 0
    """Rows reset per step at most (0: ``max(8, num_envs // 8)``); more wait a step, none is lost."""
    final_obs: bool = True
    """Compute pre-reset observations of ended rows (needed to bootstrap truncated episodes)."""
    randomize_initial_episode_length: bool = True
    """Start rows at random points of the episode so time-outs do not line up."""
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
    return cfg


def _typed(cls: type, value: Any, where: str) -> Any:
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a mapping for {cls.__name__}, got {value!r}")
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), value))
    except OmegaConfBaseException as error:
        key = f"{where}.{error.full_key}" if getattr(error, "full_key", "") else where
        message = " ".join(str(error).split("\n")[0].split())
        raise ValueError(f"bad config at '{key}': {message}") from None
