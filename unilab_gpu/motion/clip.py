"""The canonical motion clip: one trajectory of the robot, in the robot model's joint and body order."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from unilab_gpu.motion.validation import MotionFormatError, check_array, check_fps, check_names


@dataclass(frozen=True)
class MotionClip:
    """``T`` frames of a floating-base robot's motion, sampled at ``fps``; NumPy float64 arrays.

    Joints (``J``) and bodies (``B``) are in the robot model's order and named by ``joint_names``
    and ``body_names`` (world body excluded; the root is the free joint's body, body 0 for the G1).
    Quaternions are wxyz; every vector is in world coordinates. Velocities at frame ``t`` are
    instantaneous rates at that frame (see ``docs/motion.md`` for how loaders derive them).

    Attributes:
        fps: frames per second.
        joint_names: ``J`` joint names.
        body_names: ``B`` body names.
        joint_pos: ``(T, J)`` joint positions (rad).
        joint_vel: ``(T, J)`` joint velocities (rad/s).
        root_pos: ``(T, 3)`` root body position.
        root_quat: ``(T, 4)`` root body orientation, wxyz.
        root_lin_vel: ``(T, 3)`` root linear velocity.
        root_ang_vel: ``(T, 3)`` root angular velocity.
        body_pos_w: ``(T, B, 3)`` body origins.
        body_quat_w: ``(T, B, 4)`` body orientations, wxyz.
        body_lin_vel_w: ``(T, B, 3)`` body origin velocities.
        body_ang_vel_w: ``(T, B, 3)`` body angular velocities.
    """

    fps: float
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    joint_pos: np.ndarray
    joint_vel: np.ndarray
    root_pos: np.ndarray
    root_quat: np.ndarray
    root_lin_vel: np.ndarray
    root_ang_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray
    body_lin_vel_w: np.ndarray
    body_ang_vel_w: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "fps", check_fps(self.fps))
        joint_names = check_names("joint_names", self.joint_names)
        body_names = check_names("body_names", self.body_names)
        object.__setattr__(self, "joint_names", joint_names)
        object.__setattr__(self, "body_names", body_names)
        num_frames = np.shape(self.joint_pos)[0] if np.ndim(self.joint_pos) else 0
        if num_frames < 1:
            raise MotionFormatError(f"'joint_pos' must hold at least one frame, got shape {np.shape(self.joint_pos)}")
        j, b = len(joint_names), len(body_names)
        for name, shape in array_shapes(num_frames, j, b).items():
            object.__setattr__(self, name, check_array(name, getattr(self, name), shape))

    @property
    def num_frames(self) -> int:
        return self.joint_pos.shape[0]

    @property
    def duration(self) -> float:
        """Seconds from the first to the last frame, ``(T - 1) / fps``."""
        return (self.num_frames - 1) / self.fps

    def arrays(self) -> dict[str, np.ndarray]:
        """The per-frame arrays by field name (every field but ``fps`` and the names)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _META}


_META = ("fps", "joint_names", "body_names")


def array_shapes(t: int, j: int, b: int) -> dict[str, tuple[int, ...]]:
    """Expected shape of each per-frame field for ``t`` frames, ``j`` joints and ``b`` bodies."""
    return {
        "joint_pos": (t, j),
        "joint_vel": (t, j),
        "root_pos": (t, 3),
        "root_quat": (t, 4),
        "root_lin_vel": (t, 3),
        "root_ang_vel": (t, 3),
        "body_pos_w": (t, b, 3),
        "body_quat_w": (t, b, 4),
        "body_lin_vel_w": (t, b, 3),
        "body_ang_vel_w": (t, b, 3),
    }
