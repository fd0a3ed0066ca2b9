"""The robustness grid: one policy in MuJoCo C under one injected fault at a time, level by level.

Each row of the grid is one fault, each cell one level of it, every other fault off (a nominal
run: the policy's MJCF, no delay, bias, noise, payload or push). The robot-side faults go through
the runtime, where a robot has them (:class:`~unilab_gpu.deploy.faults.Faults`: latency in the
command path, encoder bias and observation noise in the state path); the physical ones change the
world the runtime runs in (:class:`WorldFaults`: every geom's sliding friction, a payload on the
torso, pushes of the root). A velocity policy runs every command of ``commands`` in each cell; a
tracking policy its reference from the first frame. A cell *fails* when its runs fall or diverge
(diverged runs are counted apart and never reported as a NaN error); each fault's first failing
level is the failing one nearest to the nominal (:data:`CENTRE`).

The grid is generic over the runtime: it sets ``controller.faults`` on whatever controller the
:class:`~.scenario.Scenario` prepared and steps it through :class:`~.run.Sim2Sim`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.deploy import DeploymentError, Faults
from unilab_gpu.deploy.foreign import open_policy
from unilab_gpu.export.sim2sim.run import Sim2Sim
from unilab_gpu.export.sim2sim.scenario import PreparedScenario, Scenario, policy_kind

LEVELS: dict[str, tuple[float, ...]] = {
    "delay_steps": (0, 1, 2, 3),
    "encoder_bias_rad": (-0.05, -0.02, 0.0, 0.02, 0.05),
    "noise_scale": (0.0, 1.0, 2.0),
    "friction": (0.3, 1.0, 1.6),
    "payload_kg": (0.0, 3.0, 6.0),
    "push_mps": (0.0, 0.5, 1.0, 1.5, 2.0, 3.0),
}
"""Each fault's levels: control steps of command latency; rad added to every joint encoder; a
multiple of the training observation noise; the sliding friction of every geom (``None`` level:
the MJCF's); kg added to the torso; the root velocity change of each push (m/s)."""

NOMINAL = {"delay_steps": 0, "encoder_bias_rad": 0.0, "noise_scale": 0.0, "payload_kg": 0.0, "push_mps": 0.0}
"""The level of each fault that equals the nominal run (friction has none: the MJCF's differs per geom)."""

CENTRE = NOMINAL | {"friction": 1.0}
"""Where each fault's levels are counted from when its first failing level is named: the nominal
level, and for friction the middle of its levels (lower and higher friction both move away from it)."""

VELOCITY_COMMANDS = ((0.5, 0.0, 0.0), (-0.4, 0.0, 0.0), (0.0, 0.3, 0.0), (0.0, -0.3, 0.0))
"""The commands a velocity policy runs in each cell: forward, backward, left, right."""

PUSH_PERIOD_S = 2.0
"""Seconds between pushes; the first comes after half a period. Their directions cycle through
+x, +y, -x, -y (world frame)."""

PUSH_DIRECTIONS = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])


@dataclass(frozen=True)
class WorldFaults:
    """The physical faults of a cell, applied to the model and the state the runtime runs in.

    Args:
      friction: the sliding friction of every geom (so every contact's, MuJoCo taking the larger
        of two geoms'); ``None``: the MJCF's.
      payload_kg: mass added to ``payload_body`` at its centre of mass (its inertia unchanged: a
        point load); the model's derived constants are recomputed (``mj_setConst``).
      push_mps: root velocity change of each push (m/s), every :data:`PUSH_PERIOD_S`.
      payload_body: the body that carries the payload.
    """

    friction: float | None = None
    payload_kg: float = 0.0
    push_mps: float = 0.0
    payload_body: str = ""

    def apply(self, model: mujoco.MjModel) -> Callable[[], None]:
        """Change ``model`` in place; returns the function that restores it."""
        friction, mass = model.geom_friction.copy(), model.body_mass.copy()
        if self.friction is not None:
            model.geom_friction[:, 0] = self.friction
        if self.payload_kg:
            body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, self.payload_body)
            if body < 0:
                raise DeploymentError(f"payload body '{self.payload_body}' is not a body of the model")
            model.body_mass[body] += self.payload_kg
            mujoco.mj_setConst(model, mujoco.MjData(model))

        def restore() -> None:
            model.geom_friction[:] = friction
            if self.payload_kg:
                model.body_mass[:] = mass
                mujoco.mj_setConst(model, mujoco.MjData(model))

        return restore

    def push(self, data: mujoco.MjData, step: int, control_dt: float) -> None:
        """After control step ``step`` (1-based), push the root if a push is due: add ``push_mps``
        to its world-frame planar velocity (the free joint's first two velocity coordinates)."""
        period = max(round(PUSH_PERIOD_S / control_dt), 1)
        if self.push_mps and (step - period // 2) % period == 0 and step >= period // 2:
            direction = PUSH_DIRECTIONS[((step - period // 2) // period) % len(PUSH_DIRECTIONS)]
            data.qvel[0:2] += self.push_mps * direction


@dataclass(frozen=True)
class Cell:
    """One cell: the fault, its level, and what it injects."""

    fault: str
    level: float
    faults: Faults = field(default_factory=Faults)
    world: WorldFaults = field(default_factory=WorldFaults)


def grid_cells(payload_body: str, seed: int = 0) -> list[Cell]:
    """Every cell of :data:`LEVELS` (a nominal level included: it is run once, :func:`robustness_grid`)."""
    base = WorldFaults(payload_body=payload_body)
    cells = []
    for level in LEVELS["delay_steps"]:
        cells.append(Cell("delay_steps", level, Faults(delay_steps=int(level)), base))
    for level in LEVELS["encoder_bias_rad"]:
        cells.append(Cell("encoder_bias_rad", level, Faults(encoder_bias=level), base))
    for level in LEVELS["noise_scale"]:
        cells.append(Cell("noise_scale", level, Faults(noise_scale=level, seed=seed), base))
    for level in LEVELS["friction"]:
        cells.append(Cell("friction", level, Faults(), replace(base, friction=level)))
    for level in LEVELS["payload_kg"]:
        cells.append(Cell("payload_kg", level, Faults(), replace(base, payload_kg=level)))
    for level in LEVELS["push_mps"]:
        cells.append(Cell("push_mps", level, Faults(), replace(base, push_mps=level)))
    return cells


def inert_faults(meta: dict[str, Any]) -> dict[str, str]:
    """The faults that cannot act on this policy, each with the reason: ``noise_scale`` when no
    observation term of the metadata names its training noise (a foreign policy's format carries
    none). Their cells are the nominal run, so a grid never reads "holds" where nothing was injected."""
    if any(term.get("noise") for term in meta.get("observation_terms", [])):
        return {}
    return {"noise_scale": "the policy's metadata names no training observation noise: every level is the nominal run"}


def payload_body_of(prepared: PreparedScenario) -> str:
    """The torso of the policy's robot config, else the body of the model's free root joint."""
    torso = getattr(getattr(prepared.cfg, "robot", None), "torso_body", None)
    if isinstance(torso, str) and torso not in ("", "???"):
        return torso
    model = prepared.model
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[0]))


def run_cell(
    prepared: PreparedScenario, cell: Cell, commands: Sequence[Sequence[float]] | None, seconds: float
) -> dict[str, Any]:
    """One cell: each command (velocity) or the reference (tracking) for ``seconds``; returns
    ``falls``, ``diverged``, the task's ``error`` (mean over the steps that did not diverge;
    ``None`` when every step diverged) and ``failed``."""
    controller, model = prepared.controller, prepared.model
    restore = cell.world.apply(model)
    falls = diverged = steps = 0
    errors: list[tuple[float, int]] = []
    error_name = "body_pos_error_anchored_m" if prepared.tracking else "lin_vel_error_mps"
    try:
        for command in [None] if prepared.tracking else commands:
            controller.faults = cell.faults
            run = Sim2Sim(controller, command, prepared.falls, prepared.origin, prepared.cfg.divergence, _quiet)

            def push(done: int, _steps: int, _falls: int, run: Sim2Sim = run) -> None:
                cell.world.push(run.data, done, controller.control_dt)

            result = run.run(seconds, on_step=push)
            summary = result["summary"]
            falls += summary["falls"]
            diverged += summary["diverged"]
            measured = result["steps"] - summary["diverged"]
            steps += result["steps"]
            if measured and math.isfinite(summary.get(error_name, math.nan)):
                errors.append((summary[error_name], measured))
    finally:
        controller.faults = Faults()
        restore()
    weight = sum(n for _, n in errors)
    error = sum(e * n for e, n in errors) / weight if weight else None
    return {
        "fault": cell.fault,
        "level": cell.level,
        "falls": falls,
        "diverged": diverged,
        "steps": steps,
        "error": None if error is None else round(error, 5),
        "failed": falls > 0 or diverged > 0,
    }


def _quiet(_line: str) -> None:
    """A cell's warnings stay out of the grid's output (its counts say what happened)."""


def failing_levels(cells: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per fault, every level whose cell failed, nearest to :data:`CENTRE` first (ties: the lower)."""
    return {
        fault: sorted(
            (c["level"] for c in cells if c["fault"] == fault and c["failed"]),
            key=lambda level, fault=fault: (abs(level - CENTRE[fault]), level),
        )
        for fault in LEVELS
    }


def first_failures(cells: list[dict[str, Any]]) -> dict[str, float | None]:
    """Per fault, the failing level nearest to :data:`CENTRE` (``None``: none failed)."""
    return {fault: levels[0] if levels else None for fault, levels in failing_levels(cells).items()}


def robustness_grid(
    policy_path: str | Path,
    motion: str | None = None,
    seconds: float | None = None,
    model_path: str | Path | None = None,
    commands: Sequence[Sequence[float]] = VELOCITY_COMMANDS,
    seed: int = 0,
    on_cell: Callable[[dict[str, Any], int, int], None] | None = None,
    format: str | None = None,
) -> dict[str, Any]:
    """The grid of ``policy_path`` (docs/deploy.md, "Robustness grid"): the report, its ``cells`` in
    :func:`grid_cells` order and ``first_failing_level`` per fault.

    Args:
      seconds: of each run (each command of a velocity policy); ``None``: 10 s, or a tracking
        policy's whole reference.
      on_cell: ``on_cell(cell_result, done, total)`` after each cell (progress).
      format: the policy file's format (``None``: detected), so a foreign policy gets the same grid.
    """
    tracking = policy_kind(open_policy(policy_path, format).metadata) == "tracking"
    first_command = None if tracking else list(commands[0])
    scenario = Scenario(
        policy_path, command=first_command, motion=motion, seconds=seconds, model_path=model_path, format=format
    )
    prepared = scenario.prepare(_quiet)
    if seconds is None:
        seconds = prepared.seconds if prepared.tracking else 10.0
    cells = grid_cells(payload_body_of(prepared), seed)
    inert = inert_faults(prepared.metadata)
    started, results, nominal = time.perf_counter(), [], None
    for i, cell in enumerate(cells):
        if nominal is not None and (NOMINAL.get(cell.fault) == cell.level or cell.fault in inert):
            result = nominal | {"fault": cell.fault, "level": cell.level}
        else:
            result = run_cell(prepared, cell, None if prepared.tracking else commands, seconds)
            if NOMINAL.get(cell.fault) == cell.level:
                nominal = result
        results.append(result)
        if on_cell is not None:
            on_cell(result, i + 1, len(cells))
    meta = prepared.metadata
    total_mass = float(prepared.model.body_subtreemass[0])
    return {
        "policy": str(policy_path),
        "task": meta.get("task"),
        "algo": meta.get("algo"),
        "engine": f"MuJoCo {mujoco.__version__} (C)",
        "motion": prepared.motion_name,
        "commands": None if prepared.tracking else [list(map(float, c)) for c in commands],
        "seconds_per_run": seconds,
        "error": "body_pos_error_anchored_m" if prepared.tracking else "lin_vel_error_mps",
        "falls_are": Sim2Sim(prepared.controller, first_command, prepared.falls, prepared.origin).falls_are,
        "payload_body": cells[0].world.payload_body,
        "robot_mass_kg": round(total_mass, 3),
        "push": {
            "period_s": PUSH_PERIOD_S,
            "directions": "+x, +y, -x, -y (world), in turn",
            "impulse_ns_per_level": {str(v): round(v * total_mass, 2) for v in LEVELS["push_mps"]},
        },
        "levels": {k: list(v) for k, v in LEVELS.items()},
        "cells": results,
        "inert_faults": inert,
        "first_failing_level": first_failures(results),
        "failing_levels": failing_levels(results),
        "wall_seconds": round(time.perf_counter() - started, 1),
    }


def plot_grid(report: dict[str, Any]):  # -> matplotlib Figure
    """The grid as a heat map: one row per fault, one cell per level, coloured by falls per run
    (diverged cells hatched and marked; an inert fault's row grey), each cell labelled with its
    level, falls and error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    faults = list(report["levels"])
    width = max(len(v) for v in report["levels"].values())
    runs = 1 if report["commands"] is None else len(report["commands"])
    figure, axes = plt.subplots(figsize=(2.0 * width + 2.5, 0.9 * len(faults) + 1.4))
    colours = plt.get_cmap("Reds")
    worst = max(1.0, max(c["falls"] / runs for c in report["cells"]))
    inert = report.get("inert_faults", {})  # grids written before the key have none
    for row, fault in enumerate(faults):
        cells = [c for c in report["cells"] if c["fault"] == fault]
        for col, cell in enumerate(cells):
            level = min(cell["falls"] / runs / worst, 1.0)
            shade = colours(0.15 + 0.85 * level) if cell["failed"] else "#d9f0d3"
            shade = "#e6e6e6" if fault in inert else shade  # grey: nothing was injected
            hatch = "//" if cell["diverged"] else ""
            axes.add_patch(plt.Rectangle((col, row), 1, 1, facecolor=shade, edgecolor="white", hatch=hatch))
            error = "diverged" if cell["error"] is None else f"{cell['error']:.3f}"
            text = f"{cell['level']:g}\n{cell['falls']} falls" + (
                f", {cell['diverged']} div." if cell["diverged"] else ""
            )
            ink = "white" if cell["failed"] and level > 0.5 else "black"
            axes.text(col + 0.5, row + 0.5, f"{text}\n{error}", ha="center", va="center", fontsize=8, color=ink)
    axes.set_xlim(0, width)
    axes.set_ylim(len(faults), 0)
    labels = [f"{fault}\n(not injected)" if fault in inert else fault for fault in faults]
    axes.set_yticks([r + 0.5 for r in range(len(faults))], labels)
    axes.set_xticks([])
    axes.set_title(
        f"{report['task']} ({Path(report['policy']).name}): falls and {report['error']} per cell "
        f"({runs} run(s) x {report['seconds_per_run']:g} s); green: no fall",
        fontsize=9,
    )
    figure.tight_layout()
    return figure
