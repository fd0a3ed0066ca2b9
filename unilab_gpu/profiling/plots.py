"""Charts of phase profiles and benchmark reports (matplotlib, no pyplot state)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure

if TYPE_CHECKING:
    from unilab_gpu.profiling.phase_profile import PhaseProfile

PHASE_COLORS = {
    "actions": "#8da0cb",
    "physics": "#66c2a5",
    "refresh": "#a6d854",
    "evaluate": "#fc8d62",
    "reset": "#e78ac3",
    "observe": "#ffd92f",
}


def plot_profiles(profiles: Mapping[str, PhaseProfile]) -> Figure:
    """One horizontal stacked bar of mean phase ms per profile (label -> profile), each with a
    black tick at its mean physics-only ms."""
    fig = Figure(figsize=(8, 1.2 + 0.6 * len(profiles)), layout="constrained")
    ax = fig.add_subplot()
    for y, profile in enumerate(profiles.values()):
        left = 0.0
        for phase, ms in profile.phase_means().items():
            ax.barh(y, ms, left=left, color=PHASE_COLORS.get(phase), label=phase if y == 0 else None)
            left += ms
        physics = float(profile.physics_only_ms.mean())
        ax.plot([physics, physics], [y - 0.45, y + 0.45], color="black", lw=2, label="physics only" if y == 0 else None)
    ax.set_yticks(range(len(profiles)), list(profiles))
    ax.invert_yaxis()
    ax.set_xlabel("ms per env step (mean)")
    first = next(iter(profiles.values()))
    ax.set_title(f"{first.num_envs} envs on {first.device}")
    ax.legend(ncols=4, loc="upper center", bbox_to_anchor=(0.5, -0.3 - 0.1 / len(profiles)), fontsize="small")
    return fig


def plot_bench(report: Mapping[str, Any]) -> Figure:
    """Left: phase ms per env step, stacked, per ``num_envs``. Right: env-steps/s vs ``num_envs``.
    A task on a generated terrain also shows physics alone on the flat floor beside its own.

    Args:
      report: a ``unilab-bench`` report (its ``results`` rows are read).
    """
    rows = report["results"]
    sizes = [str(r["num_envs"]) for r in rows]
    fig = Figure(figsize=(11, 4), layout="constrained")
    bars, line = fig.subplots(1, 2)
    bottom = [0.0] * len(rows)
    for phase in rows[0]["phases_ms"]:
        heights = [r["phases_ms"][phase] for r in rows]
        bars.bar(sizes, heights, bottom=bottom, color=PHASE_COLORS.get(phase), label=phase)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    physics_ms = [r["physics_only_ms"] for r in rows]
    bars.scatter(sizes, physics_ms, marker="_", s=900, color="black", label="physics only (median)")
    if all("physics_only_flat_ms" in r for r in rows):  # a task on a generated terrain
        flat_ms = [r["physics_only_flat_ms"] for r in rows]
        bars.scatter(sizes, flat_ms, marker="_", s=900, color="gray", label="physics only, flat floor")
    bars.set_xlabel("num_envs")
    bars.set_ylabel("ms per env step (phase means)")
    bars.set_title("Where the step goes")
    bars.legend(fontsize="small")

    num_envs = [r["num_envs"] for r in rows]
    line.plot(num_envs, [r["env_steps_per_s"] for r in rows], "o-", label="env step")
    physics = [n / (r["physics_only_ms"] / 1e3) for n, r in zip(num_envs, rows, strict=True)]
    line.plot(num_envs, physics, "s--", color=PHASE_COLORS["physics"], label="physics only")
    if all("physics_only_flat_ms" in r for r in rows):
        flat = [n / (r["physics_only_flat_ms"] / 1e3) for n, r in zip(num_envs, rows, strict=True)]
        line.plot(num_envs, flat, "^:", color="gray", label="physics only, flat floor")
    line.set_xscale("log", base=2)
    line.set_xticks(num_envs, [str(n) for n in num_envs])
    line.minorticks_off()
    line.set_ylim(bottom=0)
    line.set_xlabel("num_envs")
    line.set_ylabel("env-steps/s")
    line.set_title("Throughput")
    line.legend(fontsize="small")
    fig.suptitle(f"{report['task']} on {report['device']} ({report['mode']})")
    return fig
