"""The term table: every manager's terms in aligned text columns, for ``env.describe()``.

One section per manager in build order: the name of each term, what the step does with it
(the action term's kind and clip; observation widths, history, noise, clip and scale; reward
weights; termination kinds; event modes) and the ``func`` it calls, so a run's log says exactly
which terms it trained on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from unilab_gpu.managers.action_manager import ActionManager
    from unilab_gpu.managers.command_manager import CommandManager
    from unilab_gpu.managers.event_manager import EventManager
    from unilab_gpu.managers.observation_manager import ObservationManager
    from unilab_gpu.managers.reward_manager import RewardManager
    from unilab_gpu.managers.term_cfg import NoiseCfg
    from unilab_gpu.managers.termination_manager import TerminationManager


def term_table(
    actions: ActionManager,
    commands: CommandManager,
    terminations: TerminationManager,
    rewards: RewardManager,
    events: EventManager,
    observations: ObservationManager,
) -> str:
    """The managers' terms as text, one aligned table per manager (cold path: reads config only)."""
    sections = [
        _table(
            f"actions ({actions.action_dim})",
            ["term", "kind", "clip", "func"],
            [["action", actions.term.kind, _range(actions.cfg.clip), actions.cfg.func]],
        ),
        _table("commands", ["term", "func"], [[name, t.cfg.func] for name, t in commands.terms.items()]),
        _table(
            "terminations",
            ["term", "ends as", "func"],
            [[t.name, "time-out" if t.cfg.time_out else "failure", t.cfg.func] for t in terminations.terms],
        ),
        _table(
            "rewards (weight x term x step_dt)",
            ["term", "weight", "func"],
            [[t.name, f"{t.cfg.weight:g}", t.cfg.func] for t in rewards.terms],
        ),
        _table(
            "events",
            ["term", "mode", "func"],
            [[t.name, _event_mode(t.cfg), t.cfg.func] for terms in events.by_mode.values() for t in terms],
        ),
    ]
    for name, group in observations.groups.items():
        rows = [
            [
                term.name,
                str(layout.dim),
                str(layout.history),
                _noise(cfg.noise) if group.enable_noise else "off",
                _range(cfg.clip),
                f"{cfg.scale:g}",
                cfg.func,
            ]
            for term, cfg, layout in zip(group.terms, group.cfgs, group.layouts, strict=True)
        ]
        header = ["term", "dim", "history", "noise", "clip", "scale", "func"]
        sections.append(_table(f"observations.{name} ({group.dim})", header, rows))
    return "\n".join(sections)


def _event_mode(cfg) -> str:
    if cfg.mode != "interval":
        return cfg.mode
    low, high = cfg.interval_range_s
    return f"interval {low:g}-{high:g} s"


def _range(clip: list[float] | None) -> str:
    return "-" if clip is None else f"[{clip[0]:g}, {clip[1]:g}]"


def _noise(noise: NoiseCfg | None) -> str:
    if noise is None:
        return "-"
    if noise.kind == "uniform":
        return f"U[{noise.low:g}, {noise.high:g}]"
    return f"N(0, {noise.std:g})"


def _table(title: str, header: Sequence[str], rows: list[list[str]]) -> str:
    """``title`` and ``rows`` under ``header``, columns padded to their widest cell."""
    if not rows:
        return f"{title}: none"
    widths = [max(len(row[i]) for row in [list(header), *rows]) for i in range(len(header))]
    lines = [title] + [
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [list(header), *rows]
    ]
    return "\n".join(lines)
