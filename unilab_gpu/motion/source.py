"""What a format reader found in a file, before it is mapped onto the robot model."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from unilab_gpu.motion.clip import MotionClip


@dataclass(frozen=True)
class MotionSource:
    """One file's trajectory in the file's own joint/body order and frame rate (float64, wxyz).

    Readers fill what the file has and leave the rest ``None``; :func:`~unilab_gpu.motion.assemble.build_clip`
    maps names, resamples and derives the rest. ``joint_names``/``body_names`` are ``None`` when
    the format stores columns in the robot model's order without names.

    Attributes:
        format: the reader's format name (for messages and ``unilab-motion info``).
        fps: frames per second of the stored frames.
        joint_pos: ``(T, J)``; ``root_pos``: ``(T, 3)``; ``root_quat``: ``(T, 4)`` wxyz.
        joint_vel: ``(T, J)``; ``root_lin_vel``, ``root_ang_vel``: ``(T, 3)`` world frame.
        body_pos_w: ``(T, B, 3)``; ``body_quat_w``: ``(T, B, 4)`` wxyz.
        body_lin_vel_w, body_ang_vel_w: ``(T, B, 3)`` world frame.
    """

    format: str
    fps: float
    joint_pos: np.ndarray
    root_pos: np.ndarray
    root_quat: np.ndarray
    joint_names: tuple[str, ...] | None = None
    joint_vel: np.ndarray | None = None
    root_lin_vel: np.ndarray | None = None
    root_ang_vel: np.ndarray | None = None
    body_names: tuple[str, ...] | None = None
    body_pos_w: np.ndarray | None = None
    body_quat_w: np.ndarray | None = None
    body_lin_vel_w: np.ndarray | None = None
    body_ang_vel_w: np.ndarray | None = None

    @property
    def num_frames(self) -> int:
        return self.joint_pos.shape[0]

    @classmethod
    def from_clip(cls, clip: MotionClip, format: str = "canonical") -> MotionSource:
        """A source holding everything ``clip`` has."""
        return cls(format=format, fps=clip.fps, joint_names=clip.joint_names, body_names=clip.body_names,
                   **clip.arrays())  # fmt: skip

    def without_velocities(self) -> MotionSource:
        """The same poses with every velocity dropped (to be derived from the poses)."""
        return replace(self, joint_vel=None, root_lin_vel=None, root_ang_vel=None,
                       body_lin_vel_w=None, body_ang_vel_w=None)  # fmt: skip
