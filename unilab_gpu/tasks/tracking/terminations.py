"""Tracking terminations: the robot lost the reference (BeyondMimic's thresholds in the YAML),
each threshold times the motion command's termination curriculum scale (1 without one)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terminations as twins
from unilab_gpu.envs.mdp.observations import gravity_in_frame
from unilab_gpu.managers.term_spec import term

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


# The anchor terms read the re-anchored anchor target, whose height and tilt are the reference
# anchor's (only xy and yaw move): the frame the step scored, also after the command advanced.


@term(deploy=twins.anchor_height_error_above)
def anchor_height_error_above(env: EnvView, threshold: float, command_name: str = "motion") -> torch.Tensor:
    """``|z_ref - z|`` of the anchor exceeds ``threshold`` metres."""
    cmd = env.command_manager.get(command_name)
    ref = cmd.body_pos_relative_w[:, cmd.anchor_index, 2]
    return torch.abs(ref - cmd.robot_anchor_pos_w[:, 2]) > threshold * cmd.termination_curriculum.scale


@term(deploy=twins.anchor_orientation_error_above)
def anchor_orientation_error_above(env: EnvView, threshold: float, command_name: str = "motion") -> torch.Tensor:
    """The z components of gravity seen from the reference and the robot anchor differ by more than ``threshold``."""
    cmd = env.command_manager.get(command_name)
    ref = gravity_in_frame(cmd.body_quat_relative_w[:, cmd.anchor_index])[:, 2]
    robot = gravity_in_frame(cmd.robot_anchor_quat_w)[:, 2]
    return torch.abs(ref - robot) > threshold * cmd.termination_curriculum.scale


@term(deploy=None)  # sim-to-sim reports list it as not counted
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
        threshold = self.threshold * cmd.termination_curriculum.scale
        return torch.any(torch.abs(ref - robot) > threshold, dim=1)


def motion_clip_end(env: EnvView, command_name: str = "motion") -> torch.Tensor:
    """The reference reached the last frame of its clip (configure with ``time_out: true``)."""
    return env.command_manager.get(command_name).at_end.clone()


class ThresholdCurriculum:
    """One scale (0-d, in ``[1, start_scale]``) on every tracking failure threshold: loose while the
    policy cannot yet follow the clip, tightened to the thresholds as written as it learns to, as
    GMT and ProtoMotions do. Early on, the strict thresholds end most episodes within a few steps
    of a start, so little of the clip past a hard passage is ever seen.

    ``failure_rate`` (0-d) is an exponential moving average over ended episodes of the share that
    failed (a termination, not a time-out), starting at 1. After each reset batch with ``n``
    ended episodes the scale moves by ``step · n``: down while ``failure_rate < tighten_below``,
    up while ``failure_rate > loosen_above``, clamped to ``[1, start_scale]``. All on the device
    (no host reads), so it runs inside the captured step; ``start_scale = 1`` is no curriculum.

    Args:
        device: where the state lives.
        start_scale: the first scale (>= 1), also the loosest.
        tighten_below: failure rate under which the thresholds tighten, in [0, 1].
        loosen_above: failure rate over which they loosen again, in [tighten_below, 1].
        step: scale change per ended episode (> 0).
        ema_rate: weight of one reset batch's failure share in ``failure_rate``, in (0, 1].
    """

    def __init__(
        self,
        device: torch.device | str,
        start_scale: float = 2.0,
        tighten_below: float = 0.3,
        loosen_above: float = 0.7,
        step: float = 0.002,
        ema_rate: float = 0.02,
    ) -> None:
        where = "commands.motion.params.termination_curriculum"
        if not start_scale >= 1.0:
            raise ValueError(f"{where}.start_scale must be >= 1 (a factor on the thresholds), got {start_scale}")
        if not 0.0 <= tighten_below <= loosen_above <= 1.0:
            raise ValueError(
                f"{where}: need 0 <= tighten_below <= loosen_above <= 1 (failure rates), "
                f"got {tighten_below} and {loosen_above}"
            )
        if not step > 0.0:
            raise ValueError(f"{where}.step must be > 0 (scale per ended episode), got {step}")
        if not 0.0 < ema_rate <= 1.0:
            raise ValueError(f"{where}.ema_rate must be in (0, 1], got {ema_rate}")
        self.start_scale = float(start_scale)
        self.tighten_below, self.loosen_above = tighten_below, loosen_above
        self.step, self.ema_rate = step, ema_rate
        self.scale = torch.full((), self.start_scale, device=device)
        self.failure_rate = torch.ones((), device=device)

    def update(self, failed: torch.Tensor, valid: torch.Tensor) -> None:
        """Learn from one reset batch: ``(N,)`` bool failed and valid (padding rows are invalid)."""
        if self.start_scale == 1.0:
            return
        ended = valid.sum().to(self.scale.dtype)
        share = (failed & valid).sum().to(self.scale.dtype) / ended.clamp_min(1.0)
        moved = self.failure_rate + self.ema_rate * (share - self.failure_rate)
        rate = torch.where(ended > 0, moved, self.failure_rate)
        self.failure_rate.copy_(rate)
        direction = (rate > self.loosen_above).to(rate.dtype) - (rate < self.tighten_below).to(rate.dtype)
        self.scale.copy_((self.scale + self.step * ended * direction).clamp(1.0, self.start_scale))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"scale": self.scale.detach().clone(), "failure_rate": self.failure_rate.detach().clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore in place (same addresses, so a captured step keeps working)."""
        self.scale.copy_(state["scale"])
        self.failure_rate.copy_(state["failure_rate"])
