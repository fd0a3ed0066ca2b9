"""What a resumed run must share with its checkpoint, checked before anything is written.

Two passes, both pure functions returning one line per mismatch: :func:`recorded_mismatches`
compares the config with what the checkpoint records (cheap, before the env is built) and
:func:`built_mismatches` compares the built env and agent with the checkpoint's sizes and
tensor shapes. :func:`raise_on_mismatches` turns the lines into one error that says how to
resume instead.

The task and physics settings (the task config composed with the run's ``env.overrides``: rewards,
episode length, terrain curriculum, the robot's physics options) must be those the checkpoint was
trained with, or the record of how the earlier steps were trained would be lost:
:func:`task_setting_changes` lists the keys that differ, and a resume with changes is refused
unless it is asked for (``--allow-changed``), which keeps the earlier config beside the new one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from unilab_gpu import __version__
from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.training.run_folder import resume_command

CHANGE_LINES = 6
"""Changed task settings listed by key at most (the rest are counted)."""

SHAPE_LINES = 4
"""Mismatched tensors listed by name at most (the rest are counted)."""


class ResumeError(ValueError):
    """A resume was refused because the config does not match the checkpoint; nothing was written."""


def recorded_mismatches(checkpoint: Mapping[str, Any], cfg: Mapping[str, Any], num_envs: int) -> list[str]:
    """Task, algorithm, ``num_envs``, algo keys and package version: checkpoint vs. ``cfg``.

    Args:
        checkpoint: a loaded run checkpoint (``config``, ``num_envs``, ``package_version``).
        cfg: the resolved config of the resumed run, as plain containers.
        num_envs: the number of envs the resumed run would use.
    """
    saved = checkpoint.get("config") or {}
    saved_algo, algo = saved.get("algo") or {}, cfg.get("algo") or {}
    lines = []
    for name, before, now in (
        ("task", saved.get("task"), cfg.get("task")),
        ("algo", saved_algo.get("name"), algo.get("name")),
        ("env.num_envs", checkpoint.get("num_envs"), num_envs),
        ("package version", checkpoint.get("package_version"), __version__),
    ):
        if before != now:
            lines.append(f"{name}: checkpoint {before!r}, now {now!r}")
    if saved_algo.get("name") == algo.get("name"):
        # Keys that only steer training (batch size, learning rate...) may change; they are
        # listed so that a network-shape mismatch below can be traced to the key behind it.
        changed = sorted(k for k in set(saved_algo) | set(algo) if saved_algo.get(k) != algo.get(k))
        lines += [f"algo.{k}: checkpoint {saved_algo.get(k)!r}, now {algo.get(k)!r}" for k in changed if k != "compile"]
    return lines


def built_mismatches(
    checkpoint: Mapping[str, Any],
    observation_dims: Mapping[str, int],
    action_dim: int,
    agent_state: Mapping[str, Any],
) -> list[str]:
    """Observation and action sizes and network tensor shapes: checkpoint vs. the built run."""
    lines = []
    saved_dims = dict(checkpoint.get("observation_dims") or {})
    if saved_dims != dict(observation_dims):
        lines.append(f"observation sizes: checkpoint {saved_dims}, now {dict(observation_dims)}")
    if checkpoint.get("action_dim") != action_dim:
        lines.append(f"action size: checkpoint {checkpoint.get('action_dim')}, now {action_dim}")
    saved_modules = checkpoint.get("trainer", {}).get("agent", {}).get("modules", {})
    shapes = []
    for module, state in agent_state["modules"].items():
        saved = saved_modules.get(module, {})
        for key in sorted(set(state) | set(saved)):
            before, now = _shape(saved.get(key)), _shape(state.get(key))
            if before != now:
                shapes.append(f"{module}.{key} checkpoint {before}, now {now}")
    if shapes:
        more = f" (+{len(shapes) - SHAPE_LINES} more)" if len(shapes) > SHAPE_LINES else ""
        lines.append(f"network shapes: {len(shapes)} tensors differ: {'; '.join(shapes[:SHAPE_LINES])}{more}")
    return lines


def raise_on_mismatches(run_dir: str, lines: list[str]) -> None:
    """Raise :class:`ResumeError` listing ``lines`` (one per mismatch) if there are any."""
    changed = [line for line in lines if not line.startswith("algo.")]
    if not changed:
        return  # only training keys changed: a valid resume
    listing = "\n".join(f"  - {line}" for line in lines)
    raise ResumeError(
        f"resume of {run_dir} refused, nothing was written; the config does not match the checkpoint:\n"
        f"{listing}\n"
        f"Resume with the run's own settings ({resume_command(run_dir)}, plus overrides of training keys "
        "such as total_env_steps only), or start a new run without resume= to use the new settings."
    )


def task_setting_changes(task: str, saved_overrides: Sequence[str], overrides: Sequence[str]) -> list[str]:
    """``key: checkpoint X, now Y`` for every setting of ``task``'s composed config that differs
    between the checkpoint's ``env.overrides`` and the resumed run's (empty: the same settings).
    Overrides that compose to the same config (reordered, or a default written out) are no change."""
    before = _flat(load_task_cfg(task, list(saved_overrides)))
    now = _flat(load_task_cfg(task, list(overrides)))
    changed = [k for k in before.keys() | now.keys() if before.get(k, _ABSENT) != now.get(k, _ABSENT)]
    leaves = before.keys() | now.keys()
    # A section that is null on one side and a mapping on the other is one change, named by the section.
    keys = sorted({next((p for p in _prefixes(k) if p in leaves), k) for k in changed})
    return [f"{key}: checkpoint {_section(before, key)}, now {_section(now, key)}" for key in keys]


def _prefixes(key: str) -> list[str]:
    parts = key.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


_ABSENT = "(absent)"


def _section(flat: dict[str, Any], key: str) -> str:
    """The value of ``key`` in ``flat``: a leaf's repr, ``(a section)`` or ``(absent)``."""
    if key in flat:
        return repr(flat[key])
    return "(a section)" if any(k.startswith(f"{key}.") for k in flat) else _ABSENT


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """``value`` (a config dataclass, nested dicts) as ``{dotted key: leaf}``; lists are leaves."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(_flat(item, f"{prefix}{key}."))
        return flat or {prefix.rstrip("."): {}}
    if isinstance(value, list | tuple):
        value = [_flat(item) if dataclasses.is_dataclass(item) else item for item in value]
    return {prefix.rstrip("."): value}


def raise_on_task_changes(run_dir: str, changes: list[str], allow_changed: bool) -> None:
    """Raise :class:`ResumeError` for task-setting ``changes`` unless ``allow_changed``."""
    if not changes or allow_changed:
        return
    more = f"\n  (+{len(changes) - CHANGE_LINES} more)" if len(changes) > CHANGE_LINES else ""
    listing = "\n".join(f"  - {line}" for line in changes[:CHANGE_LINES]) + more
    raise ResumeError(
        f"resume of {run_dir} refused, nothing was written; the task settings differ from those the checkpoint "
        f"was trained with:\n{listing}\n"
        f"Resume with the run's own settings ({resume_command(run_dir)}), start a new run, or pass --allow-changed "
        "to train on with the new settings (the earlier config is kept in the run folder)."
    )


def _shape(value: Any) -> tuple[int, ...] | str | None:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return None if value is None else type(value).__name__
