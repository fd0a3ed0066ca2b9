"""Configuration of manager terms, as written in the task YAML under ``configs/task/``.

A term names a function ``f(env, **params) -> Tensor`` or a class by dotted path
(``"unilab_gpu.envs.mdp.rewards.joint_vel_l2"``, ``"unilab_gpu.envs.mdp.rewards:joint_vel_l2"``, or
for the project's own terms the short ``"mdp.rewards.joint_vel_l2"``: :data:`SHORT_PREFIXES`).
A class term is built once as ``cls(env, **params)``, called as ``term(env)`` every step and
``term.reset(env_ids)`` for rows that start a new episode. ``env`` is a ``managers.env_view.EnvView``.

Parameters whose names end in ``_names`` are resolved to indices when the manager is built, so
the hot path never sees a string; the term function takes the resolved name
(``managers.term.NAME_PARAMS``):

| YAML ``params`` key | the function's argument | what it holds |
|---|---|---|
| ``body_names`` | ``body_ids`` | MuJoCo body ids |
| ``joint_names`` | ``joint_cols`` | columns of ``env.robot.joint_pos`` / ``joint_vel`` |
| ``site_names`` | ``site_ids`` | MuJoCo site ids |
| ``geom_names`` | ``geom_ids`` | MuJoCo geom ids |
| ``sensor_names`` | ``sensor_cols`` | columns of ``sensordata`` |
| ``actuator_names`` | ``actuator_ids`` | MuJoCo actuator ids (= columns of ``ctrl``) |

all int64 tensors on the env's device. Entries are names or full-match regular expressions;
unknown ones fail with the closest matches. A missing or unexpected parameter fails naming the
YAML key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unilab_gpu.utils.imports import user_packages

SHORT_PREFIXES = {"mdp": "unilab_gpu.envs.mdp", "tasks": "unilab_gpu.tasks"}
"""The short spellings of the project's own terms: ``mdp.rewards.alive`` is
``unilab_gpu.envs.mdp.rewards.alive``, ``tasks.velocity.rewards.feet_orientation_l2`` is
``unilab_gpu.tasks.velocity.rewards.feet_orientation_l2``. A user's package of the same name
listed in ``UNILAB_TERM_MODULES`` keeps its own meaning."""


def canonical_func(path: Any) -> Any:
    """A term's ``func`` in its one canonical spelling, ``"package.module.attr"``, in full.

    The YAML may also write ``"package.module:attr"``, which names the same callable, and the
    project's own terms by their short spelling (:data:`SHORT_PREFIXES`); configs are canonicalised
    once when they are typed (``envs.env_cfg.typed_terms``), so exports record, and deployment
    runtimes compare, one spelling. Anything other than a string is returned as it is, for the
    resolver to refuse with its key path."""
    if not isinstance(path, str):
        return path
    path = path.replace(":", ".")
    head, dot, rest = path.partition(".")
    if head in SHORT_PREFIXES and dot and head not in user_packages():
        return f"{SHORT_PREFIXES[head]}.{rest}"
    return path


@dataclass
class TermCfg:
    func: str = "???"
    """Dotted path of the term function or class."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of the term (``*_names`` entries are resolved to ids)."""


@dataclass
class RewardTermCfg(TermCfg):
    weight: float = 1.0
    """The step reward adds ``weight * term * step_dt``."""


@dataclass
class TerminationTermCfg(TermCfg):
    time_out: bool = False
    """True: the episode is truncated (bootstrap from the final observation), not terminated."""


@dataclass
class NoiseCfg:
    kind: str = "uniform"
    """``uniform`` (on ``[low, high]``) or ``gaussian`` (``std``)."""
    low: float = 0.0
    high: float = 0.0
    std: float = 0.0


@dataclass
class ObservationTermCfg(TermCfg):
    noise: NoiseCfg | None = None
    """Added noise (policy groups; disable per group with ``enable_noise: false``)."""
    clip: list[float] | None = None
    """``[low, high]`` applied after noise."""
    scale: float = 1.0
    """Multiplies the term after clipping."""
    history: int = 1
    """Number of most recent values kept; the group holds them oldest first."""


@dataclass
class ObservationGroupCfg:
    terms: dict[str, ObservationTermCfg | None] = field(default_factory=dict)
    enable_noise: bool = True


@dataclass
class EventTermCfg(TermCfg):
    mode: str = "reset"
    """``startup`` (once at construction), ``reset`` (rows starting an episode) or ``interval``."""
    interval_range_s: list[float] | None = None
    """``[low, high]`` seconds between interval events, drawn per row."""


@dataclass
class CommandTermCfg(TermCfg):
    """A class term with ``update(env)`` (advance every step), ``reset(env_ids)`` and ``command``."""


@dataclass
class ActionCfg(TermCfg):
    """The action term: ``func`` names an ``ActionTerm`` class (``unilab_gpu.envs.mdp.actions.
    JointPositionAction``, ``ActuatorCtrlAction``), ``params`` its keyword arguments
    (``actuator_names``, ``scale``, ...)."""

    clip: list[float] | None = None
    """``[low, high]`` applied to the raw action before the term maps it (the manager's, for any term)."""
    delay_steps: list[int] | None = None
    """``[low, high]`` control steps by which the targets reach ``ctrl`` late (a robot's command
    latency), drawn per row at each episode start; ``null`` (or ``[0, 0]``): this step's targets."""
    target_bias: list[float] | None = None
    """``[low, high]`` offset added to every target (rad for joint-position targets: a miscalibrated
    default pose), drawn per row and actuator at each episode start; ``null``: none."""
