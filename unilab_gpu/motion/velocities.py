"""Velocities of sampled trajectories by finite differences (central inside, one-sided at the ends)."""

from __future__ import annotations

import numpy as np
import torch

from unilab_gpu.motion.validation import MotionFormatError
from unilab_gpu.utils.rotations import quat_conjugate, quat_log, quat_mul


def _check_frames(name: str, num_frames: int) -> None:
    if num_frames < 2:
        raise MotionFormatError(f"'{name}' needs at least 2 frames to derive a velocity, got {num_frames}")


def linear_velocity(x: np.ndarray, fps: float, name: str = "positions") -> np.ndarray:
    """Rate of change ``(T, ...)`` of samples ``x`` ``(T, ...)`` taken at ``fps``.

    Central differences ``(x[t+1] - x[t-1]) / 2dt`` inside (second order), forward/backward
    differences at the first/last frame.
    """
    _check_frames(name, x.shape[0])
    return np.gradient(x, 1.0 / fps, axis=0)


def angular_velocity(quat: np.ndarray, fps: float, name: str = "orientations") -> np.ndarray:
    """World-frame angular velocity ``(T, ..., 3)`` of wxyz orientations ``quat`` ``(T, ..., 4)``.

    On SO(3): ``ω[t] = log(q[t+1] ⊗ q[t-1]⁻¹) / 2dt`` inside and ``log(q[1] ⊗ q[0]⁻¹) / dt`` (and
    its mirror) at the ends, the shortest arc each time, so a sign flip between consecutive
    quaternions (``q`` and ``-q`` are one rotation) does not show up as a spin.
    """
    _check_frames(name, quat.shape[0])
    q = torch.from_numpy(np.ascontiguousarray(quat, dtype=np.float64))
    after = torch.cat((q[1:2], q[2:], q[-1:]))
    before = torch.cat((q[:1], q[:-2], q[-2:-1]))
    steps = np.full(quat.shape[0], 2.0)
    steps[0] = steps[-1] = 1.0
    rotvec = quat_log(quat_mul(after, quat_conjugate(before))).numpy()
    return rotvec * (fps / steps).reshape((-1,) + (1,) * (quat.ndim - 1))
