"""Tracking terminations: the robot lost the reference (BeyondMimic's thresholds in the YAML)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.envs.mdp.observations import gravity_in_frame

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


# The anchor terms read the re-anchored anchor target, whose height and tilt are the reference
# anchor's (only xy and yaw move): the frame the step scored, also after the command advanced.


def anchor_height_error_above(env: EnvView, threshold: float, command_name: str = "motion") -> torch.Tensor:
    """``|z_ref - z|`` of the anchor exceeds ``threshold`` metres."""
    cmd = env.command_manager.get(command_name)
    ref = cmd.body_pos_relative_w[:, cmd.anchor_index, 2]
    return torch.abs(ref - cmd.robot_anchor_pos_w[:, 2]) > threshold


def anchor_orientation_error_above(env: EnvView, threshold: float, command_name: str = "motion") -> torch.Tensor:
    """The z components of gravity seen from the reference and the robot anchor differ by more than ``threshold``."""
    cmd = env.command_manager.get(command_name)
    ref = gravity_in_frame(cmd.body_quat_relative_w[:, cmd.anchor_index])[:, 2]
    robot = gravity_in_frame(cmd.robot_anchor_quat_w)[:, 2]
    return torch.abs(ref - robot) > threshold


class BodyHeightErrorAbove:
    """Any of ``body_names`` (tracked bodies, e.g. ankles and wrists) is more than ``threshold``
    metres above or below its re-anchored reference height."""

    def __init__(self, env: EnvView, body_ids: torch.Tensor, threshold: float, command_name: str = "motion"):
        self.command = env.command_manager.get(command_name)
        tracked = self.command.body_ids.tolist()
        missing = [env.sim.body_names[b] for b in body_ids.tolist() if b not in tracked]
        if missing:
            raise ValueError(f"terminations: bodies {missing} are not tracked by command '{command_name}'")
        self.index = torch.tensor([tracked.index(b) for b in body_ids.tolist()], device=env.device)
        self.threshold = threshold

    def __call__(self, env: EnvView) -> torch.Tensor:
        cmd = self.command
        ref = cmd.body_pos_relative_w[:, self.index, 2]
        robot = cmd.robot_body_pos_w[:, self.index, 2]
        return torch.any(torch.abs(ref - robot) > self.threshold, dim=1)


def motion_clip_end(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """The reference reached the last frame of its clip (configure with ``time_out: true``)."""
    return env.command_manager.get(command_name).at_end.clone()
