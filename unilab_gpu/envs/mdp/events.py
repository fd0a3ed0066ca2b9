"""Event terms. Reset events edit the staging state ``env.reset_qpos`` / ``env.reset_qvel``
(rows = slots of ``env.reset_ids``); interval events act on the rows in ``mask``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv


def reset_joints_uniform(
    env: ManagerBasedRlEnv,
    env_ids: torch.Tensor,
    position_range: tuple[float, float] = (0.0, 0.0),
    velocity_range: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Add uniform offsets to the staged joint positions and velocities of the rows being reset,
    keeping positions inside the joint limits."""
    robot = env.robot
    j = robot.num_joints
    rows = env_ids.shape[0]
    qpos = env.reset_qpos[:, robot.qpos_slice]
    qvel = env.reset_qvel[:, robot.qvel_slice]
    lo_p, hi_p = position_range
    lo_v, hi_v = velocity_range
    noisy = qpos + lo_p + (hi_p - lo_p) * torch.rand(rows, j, device=env.device)
    qpos.copy_(torch.maximum(torch.minimum(noisy, robot.joint_limits[:, 1]), robot.joint_limits[:, 0]))
    qvel.add_(lo_v + (hi_v - lo_v) * torch.rand(rows, j, device=env.device))


def push_root(env: ManagerBasedRlEnv, mask: torch.Tensor, velocity_range: tuple[float, float]) -> None:
    """Set a random horizontal root velocity (m/s, uniform per axis) in the rows of ``mask``."""
    lo, hi = velocity_range
    qvel = env.sim.state.qvel
    push = lo + (hi - lo) * torch.rand(env.num_envs, 2, device=env.device)
    qvel[:, 0:2] = torch.where(mask[:, None], push, qvel[:, 0:2])
