"""Tracking error metrics of one step, per row: the robot against the reference frame it tracked.

Pure tensor functions with no env in sight, so tests compare them with NumPy on hand-made poses.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from unilab_gpu.utils.rotations import quat_error_magnitude

METRICS = {
    "mpkpe": "mpkpe_m",
    "r_mpkpe": "r_mpkpe_m",
    "joint_pos_error": "joint_pos_error_rad",
    "joint_vel_sq_error": "joint_vel_rms_error_radps",
    "ee_pos_error": "ee_pos_error_m",
    "ee_ori_error": "ee_ori_error_rad",
}
""":func:`tracking_errors` key -> its report key. ``joint_vel_sq_error`` is the mean squared
error over joints; a report averages it over steps and rows before the square root (an RMS)."""


class TrackedState(NamedTuple):
    """Tracked bodies and joints of a robot or of its reference, world frame, quaternions wxyz."""

    body_pos_w: torch.Tensor  # (num_envs, num_bodies, 3), m
    body_quat_w: torch.Tensor  # (num_envs, num_bodies, 4)
    joint_pos: torch.Tensor  # (num_envs, num_joints), rad
    joint_vel: torch.Tensor  # (num_envs, num_joints), rad/s


def tracking_errors(
    robot: TrackedState, reference: TrackedState, anchor: int, end_effectors: torch.Tensor
) -> dict[str, torch.Tensor]:
    """This step's errors, each ``(num_envs,)``:

    - ``mpkpe``: mean over tracked bodies of ``‖p_b − p_b^ref‖`` (m, world frame: drift across the
      floor counts);
    - ``r_mpkpe``: the same with every body relative to the anchor body ``anchor`` (index into the
      tracked bodies), ``‖(p_b − p_a) − (p_b^ref − p_a^ref)‖`` (m): the posture, whatever the drift;
    - ``joint_pos_error``: mean over joints of ``|q − q^ref|`` (rad);
    - ``joint_vel_sq_error``: mean over joints of ``(q̇ − q̇^ref)²`` (rad²/s²);
    - ``ee_pos_error`` / ``ee_ori_error``: mean over the end effectors (``(E,)`` indices into the
      tracked bodies) of the world position error (m) and of the rotation angle between robot
      and reference (rad).
    """
    offset = robot.body_pos_w - reference.body_pos_w  # (num_envs, B, 3)
    relative = offset - offset[:, anchor : anchor + 1]
    ee_angle = quat_error_magnitude(reference.body_quat_w[:, end_effectors], robot.body_quat_w[:, end_effectors])
    return {
        "mpkpe": torch.linalg.vector_norm(offset, dim=-1).mean(dim=-1),
        "r_mpkpe": torch.linalg.vector_norm(relative, dim=-1).mean(dim=-1),
        "joint_pos_error": (robot.joint_pos - reference.joint_pos).abs().mean(dim=-1),
        "joint_vel_sq_error": (robot.joint_vel - reference.joint_vel).square().mean(dim=-1),
        "ee_pos_error": torch.linalg.vector_norm(offset[:, end_effectors], dim=-1).mean(dim=-1),
        "ee_ori_error": ee_angle.mean(dim=-1),
    }
