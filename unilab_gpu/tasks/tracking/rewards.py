"""Tracking rewards: ``exp(-error / std^2)`` of the pose and velocity errors (BeyondMimic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.utils.rotations import quat_error_magnitude

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv


def anchor_position_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-||p_ref - p||^2 / std^2)`` of the anchor position (world frame)."""
    cmd = env.command_manager.get(command_name)
    error = torch.sum(torch.square(cmd.anchor_pos_w - cmd.robot_anchor_pos_w), dim=-1)
    return torch.exp(-error / std**2)


def anchor_orientation_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-angle(q_ref, q)^2 / std^2)`` of the anchor orientation."""
    cmd = env.command_manager.get(command_name)
    error = torch.square(quat_error_magnitude(cmd.anchor_quat_w, cmd.robot_anchor_quat_w))
    return torch.exp(-error / std**2)


def relative_body_position_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||p_rel,b - p_b||^2 / std^2)`` against the re-anchored targets."""
    cmd = env.command_manager.get(command_name)
    error = torch.sum(torch.square(cmd.body_pos_relative_w - cmd.robot_body_pos_w), dim=-1)
    return torch.exp(-error.mean(dim=-1) / std**2)


def relative_body_orientation_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b angle(q_rel,b, q_b)^2 / std^2)`` against the re-anchored targets."""
    cmd = env.command_manager.get(command_name)
    error = torch.square(quat_error_magnitude(cmd.body_quat_relative_w, cmd.robot_body_quat_w))
    return torch.exp(-error.mean(dim=-1) / std**2)


def body_linear_velocity_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||v_ref,b - v_b||^2 / std^2)`` (world frame)."""
    cmd = env.command_manager.get(command_name)
    error = torch.sum(torch.square(cmd.body_lin_vel_w - cmd.robot_body_lin_vel_w), dim=-1)
    return torch.exp(-error.mean(dim=-1) / std**2)


def body_angular_velocity_exp(env: ManagerBasedRlEnv, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||w_ref,b - w_b||^2 / std^2)`` (world frame)."""
    cmd = env.command_manager.get(command_name)
    error = torch.sum(torch.square(cmd.body_ang_vel_w - cmd.robot_body_ang_vel_w), dim=-1)
    return torch.exp(-error.mean(dim=-1) / std**2)
