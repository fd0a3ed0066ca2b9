"""The motion table on the device: every clip's frames concatenated, read by one gather per field."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.names import column_order
from unilab_gpu.motion.validation import MIN_FRAMES, MotionFormatError, check_weights


class MotionFrame(NamedTuple):
    """Reference state at ``(...)`` (clip, frame) pairs; float32, world frame, quaternions wxyz.

    ``J`` joints in the library's joint order, ``Bt`` bodies in its ``body_names`` order.
    """

    joint_pos: torch.Tensor  # (..., J)
    joint_vel: torch.Tensor  # (..., J)
    root_pos: torch.Tensor  # (..., 3)
    root_quat: torch.Tensor  # (..., 4)
    root_lin_vel: torch.Tensor  # (..., 3)
    root_ang_vel: torch.Tensor  # (..., 3)
    body_pos_w: torch.Tensor  # (..., Bt, 3)
    body_quat_w: torch.Tensor  # (..., Bt, 4)
    body_lin_vel_w: torch.Tensor  # (..., Bt, 3)
    body_ang_vel_w: torch.Tensor  # (..., Bt, 3)


class MotionLibrary:
    """Frame-major float32 tables of ``C`` clips (``F`` frames in all) on one device.

    Row ``clip_start[c] + f`` holds frame ``f`` of clip ``c``. Every field of :class:`MotionFrame`
    is a table attribute of shape ``(F, ...)``: ``joint_pos (F, J)``, ``joint_vel (F, J)``,
    ``root_pos (F, 3)``, ``root_quat (F, 4)``, ``root_lin_vel (F, 3)``, ``root_ang_vel (F, 3)``,
    ``body_pos_w (F, Bt, 3)``, ``body_quat_w (F, Bt, 4)``, ``body_lin_vel_w (F, Bt, 3)``,
    ``body_ang_vel_w (F, Bt, 3)``; plus ``clip_start (C,)`` and ``clip_length (C,)`` int64 and
    ``clip_weight (C,)`` float32 (how much more often the start samplers draw each clip's frames).

    Args:
        clips: canonical clips, all at the same frame rate (the control rate).
        joint_names: the robot's joints in its actuation order; each clip's joints are mapped
            onto it by name. Default: the first clip's order.
        body_names: the bodies the task reads, in the order it wants them (``Bt`` of them);
            default: all of the first clip's bodies.
        device: where the tables live.
        clip_names: a name per clip (statistics keys); default ``clip0``, ``clip1``, ...
        clip_weights: a weight > 0 per clip; default all 1.

    Raises:
        MotionFormatError: no clips, differing frame rates, joint/body names a clip lacks, or
            names or weights of the wrong number.
    """

    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    clip_names: tuple[str, ...]
    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    root_pos: torch.Tensor
    root_quat: torch.Tensor
    root_lin_vel: torch.Tensor
    root_ang_vel: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor
    clip_start: torch.Tensor
    clip_length: torch.Tensor
    clip_weight: torch.Tensor

    def __init__(
        self,
        clips: Sequence[MotionClip],
        joint_names: Sequence[str] | None = None,
        body_names: Sequence[str] | None = None,
        device: str | torch.device = "cpu",
        clip_names: Sequence[str] | None = None,
        clip_weights: Sequence[float] | None = None,
    ) -> None:
        if not clips:
            raise MotionFormatError("MotionLibrary needs at least one clip")
        if clip_names is not None and len(clip_names) != len(clips):
            raise MotionFormatError(f"'clip_names' has {len(clip_names)} names, expected {len(clips)} (one per clip)")
        weights = [1.0] * len(clips) if clip_weights is None else check_weights(clip_weights, len(clips),
                                                                                "clip_weights", "clip")  # fmt: skip
        fps = clips[0].fps
        for i, clip in enumerate(clips):
            if clip.num_frames < MIN_FRAMES:
                raise MotionFormatError(f"clip {i} has {clip.num_frames} frame(s), expected at least {MIN_FRAMES}")
            if clip.fps != fps:
                raise MotionFormatError(f"clip {i} has 'fps' = {clip.fps:g}, expected {fps:g} like clip 0; resample it")
        self.fps = fps
        self.device = torch.device(device)
        self.joint_names = tuple(clips[0].joint_names if joint_names is None else joint_names)
        self.body_names = tuple(clips[0].body_names if body_names is None else body_names)
        columns: dict[str, list[np.ndarray]] = {name: [] for name in MotionFrame._fields}
        for clip in clips:
            joints = column_order("joint", clip.joint_names, self.joint_names)
            bodies = column_order("body", clip.body_names, self.body_names, extra_ok=True)
            arrays = clip.arrays()
            for name in columns:
                index = bodies if name.startswith("body_") else joints if name.startswith("joint_") else slice(None)
                columns[name].append(arrays[name][:, index])
        for name, parts in columns.items():
            setattr(self, name, torch.as_tensor(np.concatenate(parts), dtype=torch.float32, device=self.device))
        lengths = np.array([clip.num_frames for clip in clips], dtype=np.int64)
        self.clip_length = torch.as_tensor(lengths, device=self.device)
        self.clip_start = torch.as_tensor(np.concatenate(([0], np.cumsum(lengths)[:-1])), device=self.device)
        self.clip_weight = torch.tensor(weights, dtype=torch.float32, device=self.device)
        self.clip_names = tuple(f"clip{i}" for i in range(len(clips))) if clip_names is None else tuple(clip_names)
        self.num_clips = len(clips)
        self.num_frames = int(lengths.sum())

    @property
    def dt(self) -> float:
        """Seconds between consecutive frames."""
        return 1.0 / self.fps

    def frame_index(self, clip: torch.Tensor, frame: torch.Tensor) -> torch.Tensor:
        """Table row ``(...)`` of ``frame`` in ``clip`` (int64 ``(...)`` each); frames past either end of
        the clip are clamped to its first/last frame."""
        last = self.clip_length[clip] - 1
        return self.clip_start[clip] + torch.minimum(frame.clamp_min(0), last)

    def gather(self, clip: torch.Tensor, frame: torch.Tensor) -> MotionFrame:
        """Every field at ``(...)`` (clip, frame) pairs (clamped as in :meth:`frame_index`)."""
        rows = self.frame_index(clip, frame)
        return MotionFrame(*(getattr(self, name)[rows] for name in MotionFrame._fields))
