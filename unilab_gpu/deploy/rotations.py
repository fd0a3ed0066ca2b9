"""Quaternion helpers (wxyz, float64) on MuJoCo's own ``mju_*`` routines."""

from __future__ import annotations

import math

import mujoco
import numpy as np


def rotate(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``vec`` ``(3,)`` rotated by ``quat`` (wxyz), ``(3,)``."""
    out = np.empty(3)
    mujoco.mju_rotVecQuat(out, np.asarray(vec, dtype=np.float64), np.asarray(quat, dtype=np.float64))
    return out


def rotate_inverse(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """``vec`` ``(3,)`` seen from a frame with orientation ``quat`` (wxyz), ``(3,)``."""
    return rotate(quat_conjugate(quat), vec)


def quat_conjugate(quat: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_negQuat(out, np.asarray(quat, dtype=np.float64))
    return out


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.empty(4)
    mujoco.mju_mulQuat(out, np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return out


def rotmat(quat: np.ndarray) -> np.ndarray:
    """The rotation matrix ``(3, 3)`` of a unit quaternion (wxyz)."""
    out = np.empty(9)
    mujoco.mju_quat2Mat(out, np.asarray(quat, dtype=np.float64))
    return out.reshape(3, 3)


def yaw_quat(quat: np.ndarray) -> np.ndarray:
    """The heading of ``quat`` (wxyz): the rotation about world z by its yaw angle, ``(4,)``."""
    w, x, y, z = quat
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
