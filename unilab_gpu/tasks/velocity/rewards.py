"""Velocity-task reward terms (UniLab ``g1_walk_flat``): ``f(env, **params) -> (num_envs,)``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import mujoco
import torch

from unilab_gpu.envs.mdp.observations import gravity_in_frame
from unilab_gpu.tasks.velocity.observations import root_lin_vel_b

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def track_lin_vel_xy_exp(env: EnvView, sigma: float, command_name: str = "twist") -> torch.Tensor:
    """``exp(-||c_xy - v_xy||^2 / sigma)``, ``v`` the root velocity in the root frame."""
    command = env.command_manager.get(command_name).command
    error = torch.sum(torch.square(command[:, :2] - root_lin_vel_b(env)[:, :2]), dim=1)
    return torch.exp(-error / sigma)


def track_ang_vel_z_exp(env: EnvView, sigma: float, command_name: str = "twist") -> torch.Tensor:
    """``exp(-(c_yaw - omega_z)^2 / sigma)``, ``omega`` the root angular velocity in the root frame."""
    command = env.command_manager.get(command_name).command
    error = torch.square(command[:, 2] - env.robot.root_ang_vel_b[:, 2])
    return torch.exp(-error / sigma)


def ang_vel_xy_l2(env: EnvView) -> torch.Tensor:
    """``omega_x^2 + omega_y^2`` of the root (root frame): roll and pitch rates."""
    return torch.sum(torch.square(env.robot.root_ang_vel_b[:, :2]), dim=1)


def body_orientation_l2(env: EnvView, body_ids: torch.Tensor) -> torch.Tensor:
    """``sum_b ||g_xy||^2``, ``g`` world gravity in each body's frame: 0 when the bodies are level."""
    gravity = gravity_in_frame(env.sim.state.body_quat_w[:, body_ids])
    return torch.sum(torch.square(gravity[..., :2]), dim=(1, 2))


def feet_orientation_l2(env: EnvView, body_ids: torch.Tensor) -> torch.Tensor:
    """``sum_b (q_x^2 + q_y^2)`` of the bodies' world quaternions: 0 for soles flat on the ground
    (a pure yaw has ``q_x = q_y = 0``); ``sin^2(tilt / 2)`` for a tilt about a horizontal axis."""
    quat = env.sim.state.body_quat_w[:, body_ids]
    return torch.sum(torch.square(quat[..., 1:3]), dim=(1, 2))


class WeightedPose:
    """``sum_j w_j (q_j - q_default,j)^2`` with per-joint weights.

    Args:
      weights: joint-name regular expression -> weight; every joint must match exactly one entry
        (UniLab: legs light, waist and arms heavy, so the legs are free to walk).
    """

    def __init__(self, env: EnvView, weights: dict[str, float]) -> None:
        robot = env.robot
        values: list[float | None] = [None] * robot.num_joints
        for pattern, weight in weights.items():
            for j in robot.joint_columns([pattern]):
                if values[j] is not None:
                    raise ValueError(f"WeightedPose weights: joint '{robot.joint_names[j]}' matches two patterns")
                values[j] = float(weight)
        missing = [robot.joint_names[j] for j, v in enumerate(values) if v is None]
        if missing:
            raise ValueError(f"WeightedPose weights: no weight for joints {missing}")
        self.weights = torch.tensor(values, dtype=torch.float32, device=env.device)

    def __call__(self, env: EnvView) -> torch.Tensor:
        robot = env.robot
        return torch.sum(self.weights * torch.square(robot.joint_pos - robot.default_joint_pos), dim=1)


def swing_height_target(phase: torch.Tensor, swing_height: float) -> torch.Tensor:
    """Foot height target over one gait cycle: rises from 0 to ``swing_height`` over the first half
    and falls back over the second, along the cubic Bezier ``B(t) = 3t^2 - 2t^3``.

    Args:
      phase: ``(...)`` rad, any value (taken modulo ``2 pi``).
    """
    x = torch.remainder(phase, 2.0 * math.pi) / (2.0 * math.pi)
    rise = (2.0 * x).clamp(max=1.0)
    fall = (2.0 * x - 1.0).clamp(min=0.0)
    up = swing_height * rise * rise * (3.0 - 2.0 * rise)
    down = swing_height * (1.0 - fall * fall * (3.0 - 2.0 * fall))
    return torch.where(x <= 0.5, up, down)


class FootClearance:
    """``(num_envs, num_feet)`` m: each foot site's height above the ground under it, less its height
    on the keyframe pose, so a foot flat on the ground reads 0 whatever the site's offset from the
    sole, on flat ground or a generated terrain alike. The gait reward's swing height and the
    terrain evaluation's swing clearance are this quantity.

    Args:
      site_ids: ``(num_feet,)`` the foot sites.
    """

    def __init__(self, env: EnvView, site_ids: torch.Tensor) -> None:
        m = env.sim.mj_model
        data = mujoco.MjData(m)
        if env.robot.keyframe is not None:
            mujoco.mj_resetDataKeyframe(m, data, m.key(env.robot.keyframe).id)
        mujoco.mj_kinematics(m, data)
        self.site_ids = site_ids
        self.rest_height = torch.tensor(
            data.site_xpos[site_ids.cpu().numpy(), 2], dtype=torch.float32, device=env.device
        )

    def __call__(self, env: EnvView) -> torch.Tensor:
        feet = env.sim.state.site_pos_w[:, self.site_ids]
        height = feet[..., 2] - self.rest_height
        if env.terrain is not None:  # above the ground under each foot, not the world origin
            height = height - env.terrain.heights_at(feet[..., :2])
        return height


class FeetPhase:
    """``exp(-sum_f (h_f - h*_f)^2 / sigma)``: the feet follow the gait clock's swing heights.

    ``h_f`` is each foot's :class:`FootClearance`. Foot ``f``
    follows the command's gait phase plus its offset, ``phi + o_f``.

    Args:
      site_names: the N foot sites.
      swing_height: peak height of the target (m).
      sigma: error scale (m^2).
      phase_offsets: ``o_f`` per site (rad), e.g. ``[0, pi, pi, 0]`` for a trot (FL, FR, RL, RR).
        Default, for two sites only: ``[0, pi]``, a biped's alternating feet (left, right).
    """

    def __init__(
        self,
        env: EnvView,
        site_ids: torch.Tensor,
        swing_height: float,
        sigma: float,
        command_name: str = "twist",
        phase_offsets: list[float] | None = None,
    ) -> None:
        if phase_offsets is None:
            if site_ids.shape != (2,):
                raise ValueError(
                    f"FeetPhase phase_offsets: give one offset per foot for {site_ids.shape[0]} site_names "
                    "(the default [0, pi] is for two feet)"
                )
            phase_offsets = [0.0, math.pi]
        if len(phase_offsets) != site_ids.shape[0]:
            raise ValueError(
                f"FeetPhase phase_offsets: expected one offset per site ({site_ids.shape[0]}), got {len(phase_offsets)}"
            )
        self.clearance = FootClearance(env, site_ids)
        self.offsets = torch.tensor([float(o) for o in phase_offsets], dtype=torch.float32, device=env.device)
        self.swing_height, self.sigma, self.command_name = swing_height, sigma, command_name

    @property
    def site_ids(self) -> torch.Tensor:
        """``(num_feet,)`` the foot sites, in the order of ``offsets`` (the mirror map pairs them)."""
        return self.clearance.site_ids

    def __call__(self, env: EnvView) -> torch.Tensor:
        phase = env.command_manager.get(self.command_name).phase
        target = swing_height_target(phase[:, None] + self.offsets, self.swing_height)
        height = self.clearance(env)
        return torch.exp(-torch.sum(torch.square(height - target), dim=1) / self.sigma)
