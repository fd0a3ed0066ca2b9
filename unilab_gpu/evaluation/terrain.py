"""Clean evaluation of a velocity policy on a terrain: does it walk the given time at the given
command on each sub-terrain without a fall (``unilab-eval RUN --terrain NAME|FILE``)?

The policy's training task is rebuilt on the terrain ``configs/terrain/<NAME>.yaml`` or a YAML file (for
example ``slopes_stairs_eval``: 15 degree slopes and 10 cm stairs, up and down) with
:data:`CLEAN_OVERRIDES`: no observation noise, no pushes, no randomized robot properties, no
curriculum, one fixed command for every row. ``rows_per_column`` rows start on each sub-terrain's
centre at rest (the task's root reset still spreads them 0.5 m around it; headings within
``yaw_range`` of +x, so a pyramid's slope or stairs lie ahead), and every row runs ``seconds``.
``levels`` picks the terrain's levels (difficulty rows of its grid) to evaluate, by default all of
them: each column gets ``rows_per_column`` rows on each evaluated level. The report gives every
level's own table under ``by_level`` (the sub-terrains and overall of that level) beside the tables
over all evaluated levels; a one-level evaluation terrain (``slopes_stairs_eval``) has level 0 only.
A row succeeds when none of the task's failure terminations fired in that time and it got at
least :data:`MIN_PROGRESS` of the way the command asks (``|c_xy| * seconds``) from its start: a
robot that stands stuck at the first stair has not walked. Reported per sub-terrain type and
overall: the success rate, the share of rows that did not fall, how far the rows got from their
start (m), the planar and yaw-rate errors of the command (means over the steps the rows were
standing), and, for a robot whose config names its feet, how high the feet swing: each foot's
:class:`~unilab_gpu.tasks.velocity.rewards.FootClearance` (above the ground under it) at its
:data:`CLEARANCE_QUANTILE` over the standing steps, averaged over the feet. Set beside a
sub-terrain's step height it says whether a row stuck at the first stair lifts its feet high enough
to clear it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.envs.mdp.actions import TORQUE_LIMIT_SHARE
from unilab_gpu.evaluation.policies import TrainedPolicy
from unilab_gpu.paths import USER_PATH_ENV
from unilab_gpu.tasks.velocity.rewards import FootClearance
from unilab_gpu.utils.progress import progress_bar

COMMAND = "twist"
"""The velocity command term of the velocity tasks."""

RANDOMIZATION_EVENTS = ("push", "pd_gains", "body_mass", "torso_com")
"""Events a clean evaluation turns off when the task has them (as the ``_play`` tasks do)."""

MIN_PROGRESS = 0.5
"""Share of the commanded distance a row must cover to succeed."""

CLEARANCE_QUANTILE = 0.95
"""Quantile over time of a foot's clearance that stands for its swing height: near the top of the
swings, not one stumble's peak."""

MAX_ROWS = 1 << 17
"""Most rows of one evaluation (``rows_per_column`` x columns x levels)."""

CLEAN_OVERRIDES = ("++observations.policy.enable_noise=false", "randomize_initial_episode_length=false")


def evaluation_overrides(
    task: str,
    overrides: Sequence[str],
    terrain: str,
    command: Sequence[float],
    seconds: float,
    yaw_range: float,
) -> list[str]:
    """The training ``overrides`` and the clean evaluation's on ``terrain``. The training's own
    terrain overrides (``terrain=...``, ``terrain.*``) are left out: the evaluation's terrain
    replaces that section whole (a training curriculum setting would land on the evaluation
    terrain, which has none).

    Raises:
        ValueError: the task has no velocity command ``twist``.
    """
    cfg = load_task_cfg(task, list(overrides))
    if cfg.commands.get(COMMAND) is None:
        raise ValueError(
            f"--terrain: the policy's task '{task}' has no velocity command '{COMMAND}'; the terrain evaluation "
            "walks velocity policies (tracking policies: unilab-eval without --terrain)"
        )
    events = [f"events.{name}=null" for name in RANDOMIZATION_EVENTS if cfg.events.get(name) is not None]
    # A task trained on flat ground has no terrain default to replace: add one.
    select = f"terrain={terrain}" if cfg.terrain is not None else f"+terrain={terrain}"
    vx, vy, wz = (float(c) for c in command)
    kept = [o for o in overrides if not _is_terrain_override(o)]
    return [
        *kept,
        select,
        "terrain.curriculum=null",
        "terrain.max_initial_level=0",
        *CLEAN_OVERRIDES,
        *events,
        f"commands.{COMMAND}.params.fixed=[{vx},{vy},{wz}]",
        f"episode_length_s={seconds + 1.0}",  # no time-out inside the evaluated span
        f"events.root_state.params.pose_range=[[-0.5,0.5],[-0.5,0.5],[0,0],[0,0],[0,0],[{-yaw_range},{yaw_range}]]",
        "events.root_state.params.velocity_range=[[0,0],[0,0],[0,0],[0,0],[0,0],[0,0]]",  # at rest: no reset kicks
    ]


def _is_terrain_override(override: str) -> bool:
    key = override.lstrip("+~").split("=", 1)[0]
    return key == "terrain" or key.startswith("terrain.")


FILE_CHOICE = "given_terrain_file"
"""The name a ``--terrain`` file takes as a terrain config choice during the evaluation."""


@contextlib.contextmanager
def terrain_choice(terrain: str | Path) -> Iterator[str]:
    """The terrain config choice (``terrain=<choice>``) for ``terrain``, a name or a YAML file, as
    ``unilab-sim2sim --terrain`` takes them.

    Either is read first within bounds (:func:`~unilab_gpu.export.sim2sim.terrain.read_terrain_file`):
    Hydra's own reader would follow a hostile file's YAML aliases without end. A file's terrain
    mapping is written as ``configs/terrain/<FILE_CHOICE>.yaml`` of a temporary config folder on
    ``UNILAB_PATH`` for the block (Hydra composes config groups from folders only).

    Raises:
        DeploymentError: no such file or name, or a file that is not a terrain config; one line.
    """
    from unilab_gpu.export.sim2sim.terrain import read_terrain_file  # the deployment side's reader

    plain = read_terrain_file(terrain)
    if not Path(terrain).expanduser().is_file():
        yield str(terrain)  # a name of configs/terrain/
        return
    saved = os.environ.get(USER_PATH_ENV)
    with tempfile.TemporaryDirectory(prefix="unilab_terrain_") as folder:
        group = Path(folder) / "configs" / "terrain"
        group.mkdir(parents=True)
        (group / f"{FILE_CHOICE}.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(plain)))
        os.environ[USER_PATH_ENV] = os.pathsep.join(filter(None, (saved, folder)))  # after the user's folders
        try:
            yield FILE_CHOICE
        finally:
            if saved is None:
                os.environ.pop(USER_PATH_ENV, None)
            else:
                os.environ[USER_PATH_ENV] = saved


@torch.no_grad()
def evaluate_on_terrain(
    trained: TrainedPolicy,
    terrain: str,
    command: Sequence[float] = (0.5, 0.0, 0.0),
    seconds: float = 10.0,
    rows_per_column: int = 16,
    device: str = "cpu",
    seed: int = 0,
    yaw_range: float = 0.3,
    progress: bool = False,
    verbose: bool = False,
    levels: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Run ``trained`` on ``terrain`` as the module docstring says; returns the report.

    Args:
        levels: the terrain levels to evaluate (``None``: all of them), each ``rows_per_column``
            rows per column.

    Raises:
        ValueError: a bad argument, a level the terrain does not have, a terrain that does not
            exist, or a task without ``twist``.
    """
    if rows_per_column < 1:
        raise ValueError(f"--rows-per-column must be >= 1, got {rows_per_column}")
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"--seconds must be > 0, got {seconds}")
    if len(command) != 3 or not all(math.isfinite(float(c)) for c in command):
        raise ValueError(f"--command: three finite numbers v_x v_y omega_z, got {list(command)}")
    with terrain_choice(terrain) as choice:
        overrides = evaluation_overrides(trained.task, trained.env_overrides, choice, command, seconds, yaw_range)
        terrain_cfg = load_task_cfg(trained.task, overrides).terrain
        levels = _levels(levels, terrain_cfg.num_levels, terrain)
        columns = terrain_cfg.num_cols
        if rows_per_column * columns * len(levels) > MAX_ROWS:
            raise ValueError(
                f"--rows-per-column {rows_per_column}: {columns} columns x {len(levels)} levels make "
                f"{rows_per_column * columns * len(levels):,} rows, more than {MAX_ROWS:,}; give fewer rows per column"
            )
        env = make_env(
            trained.task,
            rows_per_column * columns * len(levels),
            device,
            overrides,
            seed=seed,
            compile=False,
            capture=False,
            announce=verbose,
        )
    # Each column's block of rows cycles through the levels: rows_per_column rows per (level, column).
    row_levels = torch.tensor(levels, device=env.device).repeat(rows_per_column * env.terrain.num_cols)
    env.terrain.set_levels(row_levels)  # the reset below puts every row on its level
    policy = trained.policy_for(env, trained.task)
    twist = env.command_manager.get(COMMAND)
    steps = max(1, round(seconds / env.step_dt))
    obs = env.reset()
    env.stats.clear()  # the torque demand of the evaluated steps alone
    start = env.robot.root_pos_w[:, :2].clone()
    standing = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    walked = torch.zeros(env.num_envs, device=env.device)
    errors = {name: torch.zeros(env.num_envs, device=env.device) for name in ("lin_vel_error", "yaw_rate_error")}
    standing_steps = torch.zeros(env.num_envs, device=env.device)
    feet = env.cfg.robot.feet if env.cfg.robot is not None else None
    clearance = None
    if feet is not None:
        clearance = FootClearance(env, torch.tensor(env.sim.site_ids(feet.sites), dtype=torch.int64, device=env.device))
    clearances: list[torch.Tensor] = []  # (num_envs, num_feet) per step, NaN once a row fell
    done = 0
    try:
        for _ in progress_bar(range(steps), "unilab-eval", "step") if progress else range(steps):
            result = env.step(policy(obs))
            obs = result.obs
            # Before this step's resets touched a row: a row that fell is scored up to its fall.
            fell = result.terminated & result.valid
            standing &= ~fell
            still = standing.float()
            for name, value in twist.row_errors().items():  # where, not a product: a diverged row's NaN
                errors[name] += torch.where(standing, value, torch.zeros_like(value))
            standing_steps += still
            walked = torch.where(standing, torch.linalg.vector_norm(env.robot.root_pos_w[:, :2] - start, dim=1), walked)
            if clearance is not None:
                height = clearance(env)
                clearances.append(torch.where(standing[:, None], height, torch.full_like(height, math.nan)))
            done += 1
    except KeyboardInterrupt:  # Ctrl-C: the report covers the steps completed, as a shorter run would
        if done == 0:
            raise
    interrupted, steps = done < steps, done
    grid = env.terrain_grid
    types = [grid.column_types[c] for c in env.terrain.column.tolist()]
    required = MIN_PROGRESS * math.hypot(float(command[0]), float(command[1])) * steps * env.step_dt
    per_row = {
        "success": (standing & (walked >= required)).cpu().numpy(),
        "no_fall": standing.cpu().numpy(),
        "distance_m": walked.cpu().numpy(),
        "lin_vel_error_mps": (errors["lin_vel_error"] / standing_steps.clamp_min(1)).cpu().numpy(),
        "yaw_rate_error_radps": (errors["yaw_rate_error"] / standing_steps.clamp_min(1)).cpu().numpy(),
    }
    if clearances:
        swing = torch.nanquantile(torch.stack(clearances), CLEARANCE_QUANTILE, dim=0)  # (num_envs, num_feet)
        per_row["swing_clearance_m"] = swing.mean(dim=1).cpu().numpy()  # NaN: a row that fell at once
    row_level = env.terrain.level.cpu().numpy()
    by_type = {name: _summary(per_row, np.array([t == name for t in types])) for name in dict.fromkeys(types)}
    by_level = {
        str(level): {
            "sub_terrains": {
                name: _summary(per_row, np.array([t == name for t in types]) & (row_level == level))
                for name in dict.fromkeys(types)
            },
            "overall": _summary(per_row, row_level == level),
        }
        for level in levels
    }
    return {
        "benchmark": "terrain_evaluation",
        "policy": trained.source,
        "task": trained.task,
        "terrain": terrain,
        "terrain_config": dataclasses.asdict(env.cfg.terrain),
        "command": [float(c) for c in command],
        "seconds": steps * env.step_dt,
        "interrupted": interrupted,
        "rows_per_column": rows_per_column,
        "levels": list(levels),
        "num_levels": env.terrain.num_levels,
        "yaw_range_rad": yaw_range,
        "required_distance_m": required,
        "env_overrides": overrides,
        "device": device,
        "seed": seed,
        "sub_terrains": by_type,
        "overall": _summary(per_row, np.ones(len(types), dtype=bool)),
        "by_level": by_level,
        "torque_limit_share": env.stats.summary().get(TORQUE_LIMIT_SHARE),
    }


def _levels(levels: Sequence[int] | None, num_levels: int, terrain: str | Path) -> list[int]:
    """The levels to evaluate: ``levels`` checked against the terrain's ``num_levels``, or all of them."""
    if levels is None or len(levels) == 0:
        return list(range(num_levels))
    bad = [level for level in levels if not 0 <= level < num_levels]
    if bad:
        raise ValueError(
            f"--terrain-level {bad[0]}: terrain '{terrain}' has levels 0 to {num_levels - 1}; give levels in that range"
        )
    return sorted(set(levels))


def _summary(per_row: dict[str, np.ndarray], rows: np.ndarray) -> dict[str, float | None]:
    swing = per_row.get("swing_clearance_m")
    return {
        "rows": int(rows.sum()),
        "success_rate": float(per_row["success"][rows].mean()),
        "no_fall_rate": float(per_row["no_fall"][rows].mean()),
        **{
            key: float(per_row[key][rows].mean()) for key in ("distance_m", "lin_vel_error_mps", "yaw_rate_error_radps")
        },
        **({} if swing is None else {"swing_clearance_m": _finite_mean(swing[rows])}),
    }


def _finite_mean(values: np.ndarray) -> float | None:
    """The mean over the finite values; ``None`` (JSON null) when there is none."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None
