"""What a resumed run must share with its checkpoint, checked before anything is written.

Two passes, both pure functions returning one line per mismatch: :func:`recorded_mismatches`
compares the config with what the checkpoint records (cheap, before the env is built) and
:func:`built_mismatches` compares the built env and agent with the checkpoint's sizes and
tensor shapes. :func:`raise_on_mismatches` turns the lines into one error that says how to
resume instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from unilab_gpu import __version__
from unilab_gpu.training.run_folder import resume_command

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


def _shape(value: Any) -> tuple[int, ...] | str | None:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return None if value is None else type(value).__name__
