"""What a robot-side runtime needs besides the network, read from a built env.

The exported network maps the ``policy`` observation group to actions ``a`` (``(batch,
action_dim)``); the robot turns them into targets as the env does (``ActionManager``)::

    a = min(max(a, action_low), action_high)       # per action, as the env bounds it
    scale = action_scale if a >= 0 else action_scale_negative   # equal unless params.bounds: joint_limits
    target = action_offset + scale * a             # joint_position: offsets are default_joint_pos
    target = min(max(target, action_bounds[:, 0]), action_bounds[:, 1])

When ``action_offset_observation_columns`` is set (actions are residuals about a motion
reference, ``actions.params.reference_command``), the offset is read from the observation instead:
``action_offset = obs[action_offset_observation_columns]``, the reference joint positions the
policy observes (raw, before any normalisation), one column per action.

and, for ``joint_position`` actions, a PD law ``tau = stiffness * (target - q) - damping * qd``
(MuJoCo position actuators with ``kp``/``kv``), clipped to ``effort_limit``; ``null`` in a bound
or a limit means unbounded. The observation layout lists each term of the group with its column
slice, history length, scale and clip, and the term's function and parameters (defaults filled
in), so the robot side can assemble the same vector (``[start, stop)`` columns, oldest history
first); the commands those terms read (a velocity command's gait clock, a motion command's
anchor and bodies) are listed with theirs. :mod:`unilab_gpu.deploy` is such a robot side.

A task on a generated terrain records its resolved ``terrain`` config (``terrain.terrain_cfg.TerrainCfg``
as plain JSON; ``null`` on flat ground) and ``terrain_sha256``, the sha256 of the generated float32
heights: a runtime that rebuilds the ground from the config (``generate_terrain`` and
``add_terrain`` on the robot's MJCF, as ``unilab-sim2sim`` does) proves it is the same ground.

``physics`` holds the options the env's model ran with (``deploy.physics``: timestep, solver and
line-search iterations, friction cone, impratio: the robot config's over its MJCF's), which
``unilab-sim2sim`` writes onto its MuJoCo model.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import mujoco

from unilab_gpu.deploy.ground import heights_sha256
from unilab_gpu.deploy.physics import physics_options
from unilab_gpu.deploy.policy_file import METADATA_VERSION
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.managers.term import NAME_PARAMS, resolve_callable

__all__ = ["METADATA_VERSION", "deployment_metadata"]

REFERENCE_OBSERVATION = "unilab_gpu.tasks.tracking.observations.motion_command"
"""The observation term whose first ``J`` columns are a motion command's reference joint positions."""


def deployment_metadata(
    env: ManagerBasedRlEnv, task: str, algo: str, env_overrides: list[str], group: str = "policy"
) -> dict[str, Any]:
    """JSON-ready deployment metadata of ``env`` (built from ``task`` with the Hydra
    ``env_overrides``) for a policy reading observation ``group``."""
    m = env.sim.mj_model
    actions = env.action_manager
    action_term = actions.term
    actuators = action_term.ctrl_cols.tolist()
    joint_names = [env.sim.joint_names[int(m.actuator_trnid[a, 0])] for a in actuators]
    joint_cols = env.robot.joint_columns(joint_names)
    stiffness, damping, effort = [], [], []
    for a in actuators:
        is_position = int(m.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
        stiffness.append(float(-m.actuator_biasprm[a, 1]) if is_position else 0.0)
        damping.append(float(-m.actuator_biasprm[a, 2]) if is_position else 0.0)
        effort.append(float(m.actuator_forcerange[a, 1]) if m.actuator_forcelimited[a] else None)
    obs_group = env.observation_manager.groups[group]
    terms = [
        {
            "name": term.name,
            "start": layout.group.start,
            "stop": layout.group.stop,
            "dim": layout.dim,
            "history": layout.history,
            "scale": cfg.scale,
            "clip": cfg.clip,
            "func": _defined_at(cfg.func, f"observations.{group}.terms.{term.name}.func"),
            "params": _term_params(cfg.func, cfg.params, f"observations.{group}.terms.{term.name}"),
            "noise": _plain(vars(cfg.noise)) if cfg.noise is not None else None,
        }
        for term, cfg, layout in zip(obs_group.terms, obs_group.cfgs, obs_group.layouts, strict=True)
    ]
    commands = {
        name: {
            "func": _defined_at(cfg.func, f"commands.{name}.func"),
            "params": _term_params(cfg.func, cfg.params, f"commands.{name}"),
        }
        for name, cfg in env.cfg.commands.items()
        if cfg is not None
    }
    return {
        "metadata_version": METADATA_VERSION,
        "task": task,
        "env_overrides": _portable_overrides(env, env_overrides),
        "algo": algo,
        "motion": _motion_name(env),
        "observation_group": group,
        "observation_dim": obs_group.dim,
        "observation_terms": terms,
        "commands": commands,
        "robot_model": env.cfg.sim.model,
        "keyframe": env.cfg.sim.keyframe,
        "observed_joint_names": list(env.robot.joint_names),
        "observed_default_joint_pos": env.robot.default_joint_pos.tolist(),
        "action_dim": env.action_dim,
        "action_kind": action_term.kind,
        "joint_names": joint_names,
        "actuator_names": [env.sim.actuator_names[a] for a in actuators],
        "default_joint_pos": env.robot.default_joint_pos[joint_cols].tolist(),
        "action_scale": action_term.scale.tolist(),
        "action_scale_negative": action_term.scale_negative.tolist(),
        "action_offset": action_term.offset.tolist(),
        "action_offset_observation_columns": _reference_columns(env, obs_group, terms),
        "action_low": actions.action_low.tolist(),
        "action_high": actions.action_high.tolist(),
        "action_bounds": [[_finite(lo), _finite(hi)] for lo, hi in action_term.limits.tolist()],
        "stiffness": stiffness,
        "damping": damping,
        "effort_limit": effort,
        "control_dt": env.step_dt,
        "physics_dt": env.physics_dt,
        "decimation": env.cfg.decimation,
        "physics": physics_options(m),
        "terrain": _plain(dataclasses.asdict(env.cfg.terrain)) if env.cfg.terrain is not None else None,
        "terrain_sha256": heights_sha256(env.terrain_grid.heights) if env.terrain_grid is not None else None,
    }


def defining_path(target: Any) -> str:
    """The canonical path of a resolved term, where it is defined (``module.qualname``): one
    spelling whether a config wrote ``a.b:c``, ``a.b.c`` or a module that re-exports it."""
    return f"{target.__module__}.{target.__qualname__}"


def _defined_at(func: str, where: str) -> str:
    """The :func:`defining_path` of the term a config's ``func`` names (what the metadata records
    and a runtime looks its twin up by)."""
    return defining_path(resolve_callable(func, where))


def _reference_columns(env: ManagerBasedRlEnv, group, terms: list[dict[str, Any]]) -> list[int] | None:
    """Observation columns of the reference joint positions that residual actions are offsets
    from, in action order; ``None`` for actions about a fixed offset.

    Raises:
      ValueError: the actions follow a reference that the observation group does not carry raw
        (unscaled, unclipped, noise-free, without history): a robot could not rebuild the targets.
    """
    action_term = env.action_manager.term
    if action_term.reference_cols is None:
        return None
    command = action_term.reference_command
    reference_term = resolve_callable(REFERENCE_OBSERVATION, "export")
    for term, cfg, layout in zip(terms, group.cfgs, group.layouts, strict=True):
        same_command = cfg.params.get("command_name", "motion") == command
        raw = cfg.scale == 1.0 and cfg.clip is None and cfg.noise is None and layout.history == 1
        where = f"observations.{group.name}.terms.{term['name']}.func"
        if resolve_callable(cfg.func, where) is reference_term and same_command and raw:
            return [term["start"] + int(c) for c in action_term.reference_cols.tolist()]
    raise ValueError(
        f"export: actions are residuals about command '{command}', but observation group '{group.name}' has no raw "
        f"{REFERENCE_OBSERVATION} term of it (no scale, clip, noise or history) to read the reference from"
    )


def _term_params(func: str, params: dict[str, Any], where: str) -> dict[str, Any]:
    """A term's parameters as its function sees them, JSON-ready: the configured ones (names,
    such as ``sensor_names``, before they become ids) over the function's own defaults, so a
    robot side needs no copy of the defaults (``command_name``, a gait frequency)."""
    target = resolve_callable(func, f"{where}.func")
    resolved = {resolved for resolved, _ in NAME_PARAMS.values()}
    defaults = {
        p.name: p.default
        for p in list(inspect.signature(target).parameters.values())[1:]
        if p.default is not inspect.Parameter.empty and p.name not in resolved
    }
    params = _plain({**defaults, **params})
    if params.get("motion_files"):  # names, not this machine's paths (the runtime looks for them: docs/deploy.md)
        params["motion_files"] = [portable_name(f) for f in params["motion_files"]]
    return params


def portable_name(path: Any) -> str:
    """How an exported file names a motion file: its file name alone, not the path it had on the
    machine that trained (which another machine lacks); ``unilab-sim2sim`` looks for it beside the
    policy file and in the current folder, or takes ``--motion``."""
    return Path(str(path)).name


def _portable_overrides(env: ManagerBasedRlEnv, overrides: list[str]) -> list[str]:
    """The training overrides with each motion file's path replaced by its :func:`portable_name`."""
    command = env.cfg.commands.get("motion")
    files = [str(f) for f in (command.params.get("motion_files") or [])] if command is not None else []
    portable = []
    for override in overrides:
        for path in sorted(files, key=len, reverse=True):  # a longer path first: it may contain a shorter one
            override = override.replace(path, portable_name(path))
        portable.append(override)
    return portable


def _plain(value: Any) -> Any:
    """``value`` with tuples and config containers as lists and dicts (JSON-ready)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__iter__") and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    return value


def _finite(value: float) -> float | None:
    """JSON has no infinity: an unbounded side is ``null``."""
    return value if abs(value) != float("inf") else None


def _motion_name(env: ManagerBasedRlEnv) -> str | None:
    """The reference motion of a tracking task: its files, or the built-in synthetic clip."""
    command = env.cfg.commands.get("motion")
    if command is None:
        return None
    params = command.params
    if params.get("motion_files"):
        return ",".join(portable_name(f) for f in params["motion_files"])
    synthetic = {k: params[k] for k in ("synthetic_seconds", "synthetic_seed") if k in params}
    return "synthetic" + (f" {synthetic}" if synthetic else "")
