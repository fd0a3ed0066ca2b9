"""The physics options a policy trained with, as its metadata records them (``physics``).

A robot config writes them over its MJCF's ``<option>`` at load (``envs.robot_model``); the export
records the options of the model the env ran, and a runtime that simulates the robot (``unilab-sim2sim``)
writes the same onto its model, so the solver's budget and friction cone match training's.
"""

from __future__ import annotations

from typing import Any

import mujoco

CONES = {"pyramidal": int(mujoco.mjtCone.mjCONE_PYRAMIDAL), "elliptic": int(mujoco.mjtCone.mjCONE_ELLIPTIC)}
"""Friction cone names (as the MJCF and robot configs write them) -> MuJoCo's ``mjtCone``."""

PHYSICS_KEYS = ("timestep", "iterations", "ls_iterations", "cone", "impratio")
"""The options of metadata ``physics``, in this order."""


def physics_options(model: mujoco.MjModel) -> dict[str, Any]:
    """The metadata's ``physics`` of ``model``: timestep (s), solver and line-search iterations,
    cone name and impratio."""
    opt = model.opt
    cone = next(name for name, value in CONES.items() if value == int(opt.cone))
    return {
        "timestep": float(opt.timestep),
        "iterations": int(opt.iterations),
        "ls_iterations": int(opt.ls_iterations),
        "cone": cone,
        "impratio": float(opt.impratio),
    }


def apply_physics_options(model: mujoco.MjModel, options: dict[str, Any]) -> None:
    """Write metadata ``physics`` over ``model.opt`` (all of them are runtime options of MuJoCo C:
    no recompile is needed)."""
    opt = model.opt
    opt.timestep = float(options["timestep"])
    opt.iterations = int(options["iterations"])
    opt.ls_iterations = int(options["ls_iterations"])
    opt.cone = CONES[options["cone"]]
    opt.impratio = float(options["impratio"])


def physics_mismatch(model: mujoco.MjModel, options: dict[str, Any], rtol: float) -> str | None:
    """The first option where ``model`` differs from metadata ``physics``, in words; ``None`` if none."""
    have = physics_options(model)
    for key in PHYSICS_KEYS:
        got, want = have[key], options[key]
        same = got == want if isinstance(want, str) else abs(got - want) <= rtol * max(abs(want), 1e-12)
        if not same:
            return f"{key} {got}, the policy's {want} (metadata physics.{key})"
    return None
