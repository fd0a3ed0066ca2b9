"""The env's scene around the robot: the model edit that adds the terrain, and the terrain's
binding to the managers (its statistics and curriculum)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import mujoco
import torch

from unilab_gpu.envs.robot_cfg import RobotCfg
from unilab_gpu.envs.robot_model import robot_edit
from unilab_gpu.terrain.curriculum import TerrainCurriculum
from unilab_gpu.terrain.generator import TerrainGrid
from unilab_gpu.terrain.scene import add_terrain
from unilab_gpu.terrain.terrain_cfg import TerrainCfg

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


def model_edit(robot_cfg: RobotCfg | None, grid: TerrainGrid | None) -> Callable[[mujoco.MjSpec], None]:
    """The edit of the MJCF's spec an env builds its model with: the robot config's physics options
    and MJCF edits (``envs.robot_model``), then the terrain (none on the scene's flat floor)."""
    robot = robot_edit(robot_cfg) if robot_cfg is not None else None

    def edit(spec: mujoco.MjSpec) -> None:
        if robot is not None:
            robot(spec)
        if grid is not None:
            add_terrain(spec, grid)

    return edit


def bind_terrain(env: ManagerBasedRlEnv, cfg: TerrainCfg) -> None:
    """Publish the mean terrain level and attach the curriculum, which reads the command term
    named in ``terrain.curriculum.command`` (built by now)."""
    terrain = env.terrain
    if terrain is None:
        raise ValueError("terrain: bind_terrain needs an env built with a terrain ('terrain' is null)")
    env.stats.register("terrain/mean_level", terrain.mean_level)
    env.stats.register("terrain/level_fraction", terrain.level_fraction)
    curriculum = cfg.curriculum
    if curriculum is None:
        return
    where = "terrain.curriculum.command"
    if curriculum.command not in env.command_manager.terms:
        raise ValueError(
            f"{where}: no command term {curriculum.command!r}; commands: {sorted(env.command_manager.terms)}"
        )
    command = env.command_manager.get(curriculum.command)
    if not isinstance(getattr(command, "commanded_displacement", None), torch.Tensor):
        raise ValueError(
            f"{where}: command {curriculum.command!r} ({type(command).__name__}) keeps no "
            "'commanded_displacement' (where its commands would have taken the row, e.g. VelocityCommand's)"
        )
    command.record_displacement = True
    size = cfg.sub_terrain_size
    promote = curriculum.promote_distance if curriculum.promote_distance is not None else min(size) / 2
    terrain.curriculum = TerrainCurriculum(
        env.robot.root_pos_w,
        env.episode_length,
        command.commanded_displacement,
        promote,
        curriculum.demote_ratio,
        demote_on_time_out=curriculum.demote_on_time_out,
        promote_ratio=curriculum.promote_ratio,
        min_promote_distance=curriculum.min_promote_distance,
    )
