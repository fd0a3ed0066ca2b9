"""Where the motion command's episodes start, and in which state: the (clip, frame) each reset row
draws, and the robot state staged there (the reference's, plus reset noise)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.motion import ClipStartSampler, MotionFrame, MotionLibrary
from unilab_gpu.motion.sampler import StartSampler
from unilab_gpu.utils.ranges import clamp_to, low_and_span
from unilab_gpu.utils.rotations import quat_apply_inverse, quat_from_euler_xyz, quat_mul

if TYPE_CHECKING:
    from unilab_gpu.managers.reset_staging import ResetStaging
    from unilab_gpu.sim.robot import Robot


class EpisodeStarts:
    """The starts of the motion command's episodes (:class:`~unilab_gpu.tasks.tracking.motion_command.MotionCommand`).

    A start (clip, frame) comes from one pair of uniform numbers per row (:meth:`place`): a share
    ``first_frame_share`` of the rows start at frame 0 of a clip drawn by weight, the others where
    ``sampler`` puts them; fixed starts (:meth:`fix`) replace both. The state staged there is the
    reference's root and joint state plus uniform reset noise, the joints clipped to the soft limits.

    Args:
      library: the command's motion table.
      sampler: the start sampler (adaptive, uniform or clip starts).
      robot: the env's robot (joint columns of qpos and qvel, soft joint limits).
      where: the config key of the command's params, named in errors.
      device: where the starts and the noise ranges live.
      first_frame_share, pose_range, velocity_range, joint_position_range, soft_joint_limit_ratio:
        the command's params of those names (:class:`~unilab_gpu.tasks.tracking.motion_command.MotionCommand`).
    """

    def __init__(
        self,
        library: MotionLibrary,
        sampler: StartSampler,
        first_frame_share: float,
        robot: Robot,
        where: str,
        device: torch.device,
        pose_range: list[list[float]] | None = None,
        velocity_range: list[list[float]] | None = None,
        joint_position_range: list[float] | None = None,
        soft_joint_limit_ratio: float = 0.9,
    ) -> None:
        self.library, self.sampler, self.device = library, sampler, device
        self.first_frame_share = float(first_frame_share)
        self._first_frames = ClipStartSampler(library)
        self.fixed: tuple[torch.Tensor, torch.Tensor] | None = None
        """Fixed starts (clip, frame), ``(num_envs + 1,)`` int64 each (the padding row's last), or None."""
        zero6 = [[0.0, 0.0]] * 6
        self._pose_lo, self._pose_span = low_and_span(pose_range or zero6, 6, f"{where}.pose_range", device)
        self._vel_lo, self._vel_span = low_and_span(velocity_range or zero6, 6, f"{where}.velocity_range", device)
        self._joint_lo, self._joint_span = low_and_span(
            [joint_position_range or [0.0, 0.0]], 1, f"{where}.joint_position_range", device
        )
        self._soft_lo, self._soft_hi = robot.soft_joint_limits(soft_joint_limit_ratio)
        self._qpos_joints = robot.qpos_slice
        self._qvel_joints = robot.qvel_slice

    def place(self, u: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Episode starts (clip, frame), int64 ``(N,)`` each, from uniform numbers ``u``, ``v`` in
        [0, 1) ``(N,)``: ``u < first_frame_share`` picks frame 0 of a clip drawn by weight (from
        ``u / share``), the rest go to the sampler (with ``u`` stretched back over [0, 1)), so one
        number decides both and the sampler's distribution is unchanged."""
        share = self.first_frame_share
        first = u < share
        clip0, frame0 = self._first_frames.place(u / max(share, 1e-12), v)
        rest = ((u - share) / max(1.0 - share, 1e-12)).clamp(0.0, 1.0 - 1e-7)
        clip, frame = self.sampler.place(rest, v)
        return torch.where(first, clip0, clip), torch.where(first, frame0, frame)

    def draw(self, env_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Starts (clip, frame), int64 ``(K,)`` each, of the reset rows ``env_ids`` ``(K,)`` (padded
        with ``num_envs``): placed from fresh uniform numbers, or the fixed starts when set."""
        u = torch.rand(2, env_ids.shape[0], device=self.device)
        clip, frame = self.place(u[0], u[1])
        if self.fixed is not None:
            clip, frame = self.fixed[0][env_ids], self.fixed[1][env_ids]
        return clip, frame

    def fix(self, clip: torch.Tensor, frame: torch.Tensor, num_envs: int) -> None:
        """From the next reset on, row ``i`` starts at ``frame[i]`` of ``clip[i]`` (both
        ``(num_envs,)`` int64; checked here, cold path)."""
        if clip.shape != (num_envs,) or frame.shape != (num_envs,):
            raise ValueError(f"fix_starts: clip and frame must have shape ({num_envs},)")
        length = self.library.clip_length[clip]
        if bool(((frame < 0) | (frame >= length)).any()):
            raise ValueError("fix_starts: every frame must lie inside its clip")
        pad = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.fixed = (torch.cat([clip.to(self.device), pad]), torch.cat([frame.to(self.device), pad]))

    def stage_state(self, ref: MotionFrame, staging: ResetStaging) -> None:
        """Write the reference root and joint state ``ref`` (rows ``(K, ...)``, the staged rows'
        starts), plus reset noise, into the staged ``qpos (K, nq)`` and ``qvel (K, nv)``."""
        qpos, qvel, rows = staging.qpos, staging.qvel, staging.env_ids.shape[0]
        pose = self._pose_lo + self._pose_span * torch.rand(rows, 6, device=self.device)
        vel = self._vel_lo + self._vel_span * torch.rand(rows, 6, device=self.device)
        tilt = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
        root_quat = quat_mul(tilt, ref.root_quat)
        qpos[:, 0:3] = ref.root_pos + pose[:, :3]
        qpos[:, 3:7] = root_quat
        joints = ref.joint_pos + self._joint_lo + self._joint_span * torch.rand_like(ref.joint_pos)
        qpos[:, self._qpos_joints] = clamp_to(joints, self._soft_lo, self._soft_hi)
        qvel[:, 0:3] = ref.root_lin_vel + vel[:, :3]
        # The free joint's angular velocity is expressed in the root frame.
        qvel[:, 3:6] = quat_apply_inverse(root_quat, ref.root_ang_vel + vel[:, 3:])
        qvel[:, self._qvel_joints] = ref.joint_vel
