"""Velocity-task observation terms: ``f(env, **params) -> (num_envs, d)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.utils.rotations import quat_apply_inverse

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def velocity_command(env: EnvView, command_name: str = "twist") -> torch.Tensor:
    """The commanded ``[v_x, v_y, omega_z]`` (base frame), ``(num_envs, 3)``."""
    return env.command_manager.get(command_name).command


def gait_phase(env: EnvView, command_name: str = "twist") -> torch.Tensor:
    """``[sin phi, cos phi]`` of the left foot's gait phase, ``(num_envs, 2)``."""
    phase = env.command_manager.get(command_name).phase
    return torch.stack([torch.sin(phase), torch.cos(phase)], dim=1)


def root_lin_vel_b(env: EnvView) -> torch.Tensor:
    """Linear velocity of the root frame's origin in the root frame, ``(num_envs, 3)`` m/s."""
    robot = env.robot
    return quat_apply_inverse(robot.root_quat_w, robot.root_lin_vel_w)
