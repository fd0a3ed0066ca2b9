"""The result of profiling env steps phase by phase: per-step times, a table, a chart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from unilab_gpu.profiling.ms_stats import ms_stats

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class PhaseProfile:
    """Per-step times of the profiled step's phases, of the real ``env.step`` and of physics
    alone, all measured in interleaved windows of the same run on the same worlds."""

    phases: tuple[str, ...]
    """Phase names, in step order (``STEP_PHASES``)."""
    phase_ms: np.ndarray
    """Milliseconds per phase of the profiled step variant, ``(steps, num_phases)``."""
    env_step_ms: np.ndarray
    """Milliseconds per real ``env.step`` (no timing inside), ``(steps,)``."""
    physics_only_ms: np.ndarray
    """Milliseconds of ``decimation`` physics substeps alone, ``(steps,)``."""
    resets_per_step: float
    """Mean rows reset per real step."""
    num_envs: int
    device: str
    mode: str
    """How the step ran: ``"eager"``, ``"compiled"``, ``"captured"`` or ``"compiled+captured"``."""

    @property
    def profiled_step_ms(self) -> np.ndarray:
        """Milliseconds per profiled step (the sum of its phases), ``(steps,)``."""
        return self.phase_ms.sum(axis=1)

    def phase_means(self) -> dict[str, float]:
        """phase -> mean ms. Means add up to the mean step, so they are what shares are taken of."""
        return {phase: float(self.phase_ms[:, i].mean()) for i, phase in enumerate(self.phases)}

    @property
    def overhead_ratio(self) -> float:
        """Median ``env.step`` over median physics-only step (1.0: the step is all physics)."""
        return float(np.median(self.env_step_ms) / np.median(self.physics_only_ms))

    @property
    def env_steps_per_s(self) -> float:
        """``num_envs`` over the median ``env.step`` time."""
        return self.num_envs / (float(np.median(self.env_step_ms)) / 1e3)

    def summary(self) -> str:
        """A plain-text table: phase, ms mean, p50, p90, share of the profiled step."""
        total = float(self.profiled_step_ms.mean())
        lines = [
            f"{self.num_envs} envs on {self.device} ({self.mode}), {len(self.env_step_ms)} steps",
            f"{'phase':<14}{'mean ms':>10}{'p50 ms':>10}{'p90 ms':>10}{'share %':>10}",
        ]
        for i, phase in enumerate(self.phases):
            s = ms_stats(self.phase_ms[:, i])
            share = 100.0 * s["mean"] / total
            lines.append(f"{phase:<14}{s['mean']:>10.3f}{s['median']:>10.3f}{s['p90']:>10.3f}{share:>10.1f}")
        for label, ms in (
            ("profiled step", self.profiled_step_ms),
            ("env.step", self.env_step_ms),
            ("physics only", self.physics_only_ms),
        ):
            s = ms_stats(ms)
            lines.append(f"{label:<14}{s['mean']:>10.3f}{s['median']:>10.3f}{s['p90']:>10.3f}")
        lines.append(f"overhead ratio (env.step / physics only, medians): {self.overhead_ratio:.2f}")
        lines.append(f"env-steps/s: {self.env_steps_per_s:,.0f}; resets per step: {self.resets_per_step:.2f}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def plot(self) -> Figure:
        """One stacked bar of the mean phase times, with a tick at the physics-only time."""
        from unilab_gpu.profiling.plots import plot_profiles

        return plot_profiles({self.mode: self})
