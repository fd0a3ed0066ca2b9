"""Observation terms: ``f(env, **params) -> (num_envs, d)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def joint_pos_rel(env: EnvView) -> torch.Tensor:
    """Joint positions minus the default pose, ``(num_envs, num_joints)``."""
    return env.robot.joint_pos - env.robot.default_joint_pos


def joint_vel(env: EnvView) -> torch.Tensor:
    """Joint velocities, ``(num_envs, num_joints)``."""
    return env.robot.joint_vel


def joint_pos_cos_sin(env: EnvView) -> torch.Tensor:
    """``[cos q, sin q]`` of every joint, ``(num_envs, 2 * num_joints)`` (continuous in q)."""
    q = env.robot.joint_pos
    return torch.cat([torch.cos(q), torch.sin(q)], dim=1)


def last_action(env: EnvView) -> torch.Tensor:
    """The action applied this step, ``(num_envs, action_dim)``."""
    return env.action_manager.last_action


def sensor(env: EnvView, sensor_cols: torch.Tensor) -> torch.Tensor:
    """Raw sensor values (``sensor_names`` in the config), ``(num_envs, len(cols))``."""
    return env.sim.state.sensordata[:, sensor_cols]


def gravity_in_frame(quat: torch.Tensor) -> torch.Tensor:
    """World ``[0, 0, -1]`` seen from frames with orientation ``quat`` (wxyz), ``(..., 3)``.

    Closed form (minus the third row of the rotation matrix), so the step builds no host-side
    constant tensor: a host-to-device copy cannot be recorded in a CUDA graph.
    """
    w, x, y, z = quat.unbind(-1)
    return -torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1)


def projected_gravity(env: EnvView) -> torch.Tensor:
    """World gravity direction in the root frame, ``(num_envs, 3)``; ``[0, 0, -1]`` upright."""
    return gravity_in_frame(env.robot.root_quat_w)


def root_height(env: EnvView) -> torch.Tensor:
    """Root height above the world origin, ``(num_envs, 1)``."""
    return env.robot.root_pos_w[:, 2:3]
