"""Tracking observations: the reference, seen from the robot's anchor frame."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terms as twins
from unilab_gpu.envs import mirror_map
from unilab_gpu.managers.term_spec import term
from unilab_gpu.motion.mirror import REFLECT_VECTOR
from unilab_gpu.utils.rotations import quat_apply_inverse, quat_conjugate, quat_mul, quat_to_rotmat

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def _two_columns(quat: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix, ``(..., 6)``: continuous, unlike a quaternion."""
    return quat_to_rotmat(quat)[..., :2].flatten(-2)


@term(mirror=mirror_map.reference_joints, deploy=twins.motion_command)
def motion_command(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """Reference joint positions and velocities, ``(num_envs, 2 J)``."""
    cmd = env.command_manager.get(command_name)
    return torch.cat([cmd.joint_pos, cmd.joint_vel], dim=1)


@term(mirror=mirror_map.VECTOR, deploy=twins.motion_anchor_pos_b)
def motion_anchor_pos_b(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """Reference anchor position in the robot anchor frame, ``(num_envs, 3)``."""
    cmd = env.command_manager.get(command_name)
    return quat_apply_inverse(cmd.robot_anchor_quat_w, cmd.anchor_pos_w - cmd.robot_anchor_pos_w)


@term(mirror=mirror_map.ROTATION_COLUMNS, deploy=twins.motion_anchor_ori_b)
def motion_anchor_ori_b(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """Reference anchor orientation in the robot anchor frame, two rotation-matrix columns ``(num_envs, 6)``."""
    cmd = env.command_manager.get(command_name)
    return _two_columns(quat_mul(quat_conjugate(cmd.robot_anchor_quat_w), cmd.anchor_quat_w))


@term(mirror=mirror_map.tracked_bodies(REFLECT_VECTOR), deploy=None)  # privileged: world body positions
def robot_body_pos_b(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """Tracked robot bodies' positions in the robot anchor frame, ``(num_envs, 3 B)``."""
    cmd = env.command_manager.get(command_name)
    anchor_quat = cmd.robot_anchor_quat_w[:, None].expand_as(cmd.robot_body_quat_w)
    offset = cmd.robot_body_pos_w - cmd.robot_anchor_pos_w[:, None]
    return quat_apply_inverse(anchor_quat, offset).flatten(1)


@term(mirror=mirror_map.tracked_bodies(mirror_map.ROTATION_COLUMNS_SIGN), deploy=None)  # privileged
def robot_body_ori_b(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """Tracked robot bodies' orientations in the robot anchor frame, ``(num_envs, 6 B)``."""
    cmd = env.command_manager.get(command_name)
    anchor_quat = cmd.robot_anchor_quat_w[:, None].expand_as(cmd.robot_body_quat_w)
    return _two_columns(quat_mul(quat_conjugate(anchor_quat), cmd.robot_body_quat_w)).flatten(1)
