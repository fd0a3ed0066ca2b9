"""Tracking rewards: ``exp(-error / std^2)`` of the pose and velocity errors (BeyondMimic).

The anchor terms score one error per row; the body terms the mean over the tracked bodies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.utils.rotations import quat_error_magnitude

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def _squared_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``||a - b||^2`` over the last axis: ``(..., 3)`` -> ``(...)``."""
    return torch.sum(torch.square(a - b), dim=-1)


def _squared_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Squared rotation angle between wxyz quaternions: ``(..., 4)`` -> ``(...)``."""
    return torch.square(quat_error_magnitude(a, b))


def _score(error: torch.Tensor, std: float) -> torch.Tensor:
    """``exp(-error / std^2)``: ``(num_envs,)``, or ``(num_envs, B)`` averaged over the bodies first."""
    if error.ndim == 2:
        error = error.mean(dim=-1)
    return torch.exp(-error / std**2)


def anchor_position_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-||p_ref - p||^2 / std^2)`` of the anchor position (world frame)."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_distance(cmd.anchor_pos_w, cmd.robot_anchor_pos_w), std)


def anchor_orientation_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-angle(q_ref, q)^2 / std^2)`` of the anchor orientation."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_angle(cmd.anchor_quat_w, cmd.robot_anchor_quat_w), std)


def relative_body_position_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||p_rel,b - p_b||^2 / std^2)`` against the re-anchored targets."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_distance(cmd.body_pos_relative_w, cmd.robot_body_pos_w), std)


def relative_body_orientation_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b angle(q_rel,b, q_b)^2 / std^2)`` against the re-anchored targets."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_angle(cmd.body_quat_relative_w, cmd.robot_body_quat_w), std)


def body_linear_velocity_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||v_ref,b - v_b||^2 / std^2)`` (world frame)."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_distance(cmd.body_lin_vel_w, cmd.robot_body_lin_vel_w), std)


def body_angular_velocity_exp(env: EnvView, std: float, command_name: str = "motion") -> torch.Tensor:
    """``exp(-mean_b ||w_ref,b - w_b||^2 / std^2)`` (world frame)."""
    cmd = env.command_manager.get(command_name)
    return _score(_squared_distance(cmd.body_ang_vel_w, cmd.robot_body_ang_vel_w), std)
