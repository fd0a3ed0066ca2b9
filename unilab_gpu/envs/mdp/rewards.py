"""Reward terms: ``f(env, **params) -> (num_envs,)``, before weight and ``step_dt``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.envs.mdp.observations import projected_gravity

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def alive(env: EnvView) -> torch.Tensor:
    """1 for every row (a constant bonus for not having ended)."""
    return torch.ones(env.num_envs, device=env.device)


def action_rate_l2(env: EnvView) -> torch.Tensor:
    """``||a_t - a_{t-1}||^2`` (0 at an episode's first step)."""
    am = env.action_manager
    return torch.sum(torch.square(am.last_action - am.prev_action), dim=1)


def action_l2(env: EnvView) -> torch.Tensor:
    """``||a_t||^2``."""
    return torch.sum(torch.square(env.action_manager.last_action), dim=1)


def joint_vel_l2(env: EnvView) -> torch.Tensor:
    """``||qdot||^2`` over the robot's joints."""
    return torch.sum(torch.square(env.robot.joint_vel), dim=1)


def joint_pos_limits(env: EnvView, soft_ratio: float = 1.0) -> torch.Tensor:
    """Sum over joints of how far each is outside its (soft) limits, ``>= 0``.

    Soft limits shrink the range symmetrically about its middle to ``soft_ratio`` of its width.
    """
    lo, hi = env.robot.soft_joint_limits(soft_ratio)
    q = env.robot.joint_pos
    return torch.sum((lo - q).clamp(min=0.0) + (q - hi).clamp(min=0.0), dim=1)


def upright(env: EnvView) -> torch.Tensor:
    """``1 - ||g_xy||^2`` in the root frame: 1 upright, 0 lying (``g`` the projected gravity)."""
    return 1.0 - torch.sum(torch.square(projected_gravity(env)[:, :2]), dim=1)


def root_height_l2(env: EnvView, target: float) -> torch.Tensor:
    """``(z_root - target)^2``."""
    return torch.square(env.robot.root_pos_w[:, 2] - target)


def undesired_contacts(env: EnvView, body_ids: torch.Tensor) -> torch.Tensor:
    """Number of the given bodies touching anything in the last physics substep."""
    return torch.sum(env.sim.state.body_contact[:, body_ids], dim=1)
