"""The report of a sim-to-sim run: its control steps' numbers per second of simulated time, their
summary, and the report as a whole (docs/deploy.md), written as JSON atomically.

A :class:`SecondTally` takes each control step's :class:`StepNumbers` from the run
(:class:`~unilab_gpu.export.sim2sim.run.Sim2Sim`); :func:`sim2sim_report` puts its rows and summary
beside what was simulated (:class:`~unilab_gpu.export.sim2sim.scenario.PreparedScenario`);
:func:`write_report` writes it for ``unilab-sim2sim --out``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco

from unilab_gpu.deploy.physics import physics_options
from unilab_gpu.export.sim2sim.scenario import PreparedScenario
from unilab_gpu.utils.files import portable_paths, write_json_atomic


@dataclass(frozen=True)
class StepNumbers:
    """What one control step of a run measured."""

    measured: dict[str, float]
    """Its errors and root velocities (``Sim2Sim.errors`` and ``velocity``); empty when it diverged."""
    joint_excess: float
    """rad: the largest excursion of a joint past its range (negative: all inside; 0 when it diverged)."""
    torque_excess: float
    """N m: the largest PD torque beyond a joint's force limit over its physics steps (negative: within)."""
    torque_ratio: float
    """The largest ``|PD torque| / force limit`` over its physics steps."""
    unconverged: int
    """Its physics steps whose constraint solver stopped at the iteration cap without converging."""
    fell: bool
    """A counted failure termination, or a divergence."""
    diverged: bool


class SecondTally:
    """A run's control steps, tallied per second of simulated time: falls, divergences and
    unconverged physics steps counted, errors summed over the steps measured (those that did not
    diverge), limit excesses at their peak.

    Args:
      steps_per_second: control steps in one second of simulated time.
      decimation: physics steps per control step.
    """

    def __init__(self, steps_per_second: int, decimation: int) -> None:
        self.steps_per_second, self.decimation = steps_per_second, decimation
        self.seconds: list[dict[str, Any]] = []
        """Per second: the counts, ``sums`` of the measured numbers, ``joint``/``torque``/``ratio`` peaks."""
        self.steps = self.falls = self.diverged = self.unconverged = 0
        """Totals over the steps added."""

    def add(self, step: StepNumbers) -> None:
        """Count one control step, in the second it ends in."""
        if self.steps % self.steps_per_second == 0:
            counts = {"second": len(self.seconds), "falls": 0, "diverged": 0, "steps": 0, "measured": 0}
            self.seconds.append(counts | {"unconverged": 0, "sums": {}, "joint": 0.0, "torque": 0.0, "ratio": 0.0})
        second = self.seconds[-1]
        second["joint"] = max(second["joint"], step.joint_excess)
        second["torque"] = max(second["torque"], step.torque_excess)
        second["ratio"] = max(second["ratio"], step.torque_ratio)
        for name, value in step.measured.items():
            second["sums"][name] = second["sums"].get(name, 0.0) + value
        second["steps"] += 1
        second["measured"] += int(not step.diverged)
        second["unconverged"] += step.unconverged
        second["falls"] += int(step.fell)
        second["diverged"] += int(step.diverged)
        self.steps += 1
        self.falls += int(step.fell)
        self.diverged += int(step.diverged)
        self.unconverged += step.unconverged

    def rows(self) -> list[dict[str, Any]]:
        """One row per second (the report's ``per_second``); an error is NaN in a second whose every
        step diverged."""
        names = list(dict.fromkeys(name for s in self.seconds for name in s["sums"]))
        rows = []
        for second in self.seconds:
            row = {"second": second["second"], "falls": second["falls"], "diverged": second["diverged"]}
            measured = second["measured"]
            row.update({name: second["sums"][name] / measured if measured else math.nan for name in names})
            row["joint_limit_excess_rad"] = max(second["joint"], 0.0)
            row["torque_limit_excess_nm"] = max(second["torque"], 0.0)
            row["peak_torque_over_limit"] = second["ratio"]
            row["solver_unconverged_fraction"] = second["unconverged"] / (second["steps"] * self.decimation)
            rows.append(row)
        return rows

    def summary(self) -> dict[str, Any] | None:
        """The whole run (the report's ``summary``): falls and divergences counted, errors averaged
        over the measured steps, excesses at their peak, the solver's unconverged share of every
        physics step; ``None`` before one step was added."""
        if not self.steps:
            return None
        seconds = self.seconds
        measured = sum(s["measured"] for s in seconds)
        names = list(dict.fromkeys(name for s in seconds for name in s["sums"]))
        summary: dict[str, Any] = {"falls": self.falls, "diverged": self.diverged}
        # measured > 0 wherever a name was summed.
        summary.update({name: sum(s["sums"].get(name, 0.0) for s in seconds) / measured for name in names})
        summary["joint_limit_excess_rad"] = max(max(s["joint"] for s in seconds), 0.0)
        summary["torque_limit_excess_nm"] = max(max(s["torque"] for s in seconds), 0.0)
        summary["peak_torque_over_limit"] = max(s["ratio"] for s in seconds)
        summary["solver_unconverged_fraction"] = self.unconverged / (self.steps * self.decimation)
        return summary


def sim2sim_report(
    scenario: PreparedScenario, result: dict[str, Any], falls_are: str, warnings: list[str], wall_seconds: float
) -> dict[str, Any]:
    """The report of a run (docs/deploy.md): what was simulated, then the run's ``result``
    (``Sim2Sim.run``: ``steps``, ``interrupted``, ``per_second``, ``summary``; ``seconds`` is the
    time of the steps taken), the fall rule in words (``falls_are``), its ``warnings`` and the wall
    time it took (s)."""
    meta, controller, model, ground = scenario.metadata, scenario.controller, scenario.model, scenario.ground
    command = scenario.scenario.command
    return {
        "policy": str(scenario.scenario.policy_path),
        "task": meta.get("task"),
        "algo": meta.get("algo"),
        "format": meta.get("format", "unilab"),
        "mjcf": str(scenario.mjcf),
        "terrain": ground.report(placed=scenario.origin is not None) if ground is not None else None,
        "engine": f"MuJoCo {mujoco.__version__} (C)",
        "command": None if scenario.tracking else [float(c) for c in command],
        "faults": scenario.scenario.faults.report(),
        "motion": scenario.motion_name,
        "seconds": round(result["steps"] * controller.control_dt, 9),
        "control_dt": controller.control_dt,
        "physics_dt": float(model.opt.timestep),
        "physics": physics_options(model),
        "falls_are": falls_are,
        "falls_not_counted": [f"{name} ({func}): no runtime twin" for name, func in scenario.falls.uncounted],
        "wall_seconds": round(wall_seconds, 2),
        "warnings": warnings,
        **{key: value for key, value in result.items() if key != "steps"},
    }


def write_report(path: str | Path, report: dict[str, Any], exclusive: bool = False) -> None:
    """Write ``report`` to ``path`` as JSON, atomically (a reader never sees half of it), its paths
    inside the checkout relative to it (a committed report names no path of this machine);
    ``exclusive``: only if no file is there (:func:`~unilab_gpu.utils.files.write_atomic`)."""
    write_json_atomic(path, portable_paths(report), exclusive=exclusive)
