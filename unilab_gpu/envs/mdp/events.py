"""Event terms. Reset events edit the staging state ``env.reset_qpos`` / ``env.reset_qvel``
(rows = slots of ``env.reset_ids``); interval events act on the rows in ``mask``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.utils.rotations import quat_apply_inverse

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


class PushRoot:
    """Interval event: add a random root velocity in the rows of ``mask``.

    Args:
      velocity_range: six ``[low, high]`` pairs for the world-frame linear (x, y, z, m/s) and
        angular (roll, pitch, yaw rates, rad/s) velocity change, drawn uniformly per row.
    """

    def __init__(self, env: ManagerBasedRlEnv, velocity_range: list[list[float]]) -> None:
        # Built once: a host-to-device copy inside the step could not be recorded in a CUDA graph.
        bounds = torch.tensor(velocity_range, dtype=torch.float32, device=env.device)
        if bounds.shape != (6, 2):
            raise ValueError(f"push velocity_range must be 6 [low, high] pairs, got shape {tuple(bounds.shape)}")
        self.low, self.span = bounds[:, 0], bounds[:, 1] - bounds[:, 0]

    def __call__(self, env: ManagerBasedRlEnv, mask: torch.Tensor) -> None:
        delta = self.low + self.span * torch.rand(env.num_envs, 6, device=env.device)
        delta = torch.where(mask[:, None], delta, torch.zeros_like(delta))
        robot = env.robot
        robot.root_lin_vel_w.add_(delta[:, :3])
        # The free joint's angular velocity is in the root frame.
        robot.root_ang_vel_b.add_(quat_apply_inverse(robot.root_quat_w, delta[:, 3:]))


def randomize_geom_friction(
    env: ManagerBasedRlEnv, env_ids: torch.Tensor, geom_ids: torch.Tensor, friction_range: list[float]
) -> None:
    """Draw the sliding friction of ``geom_names`` per world, uniform in ``friction_range``.

    Needs ``sim.batched_model_fields: [geom_friction]``; meant for ``mode: startup``.
    """
    friction = env.sim.model_fields.get("geom_friction")
    if friction is None:
        raise ValueError("randomize_geom_friction needs sim.batched_model_fields to include 'geom_friction'")
    lo, hi = friction_range
    rows = env_ids.clamp(max=env.num_envs - 1)
    values = lo + (hi - lo) * torch.rand(rows.shape[0], geom_ids.shape[0], device=env.device)
    friction[rows[:, None], geom_ids[None, :], 0] = values
