"""Change a trajectory's frame rate: lerp for positions, slerp for orientations."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from unilab_gpu.motion.validation import MotionFormatError
from unilab_gpu.utils.rotations import quat_slerp


@dataclass(frozen=True)
class ResampleGrid:
    """Where each output frame falls between two input frames: ``(1 - alpha) x[lo] + alpha x[lo + 1]``.

    Output frame ``k`` is at time ``k / fps_out``; the output spans the input's duration
    ``(T - 1) / fps_in`` and ends on or before its last frame. ``lo``: ``(T',)`` int64;
    ``alpha``: ``(T',)`` in ``[0, 1]``.
    """

    lo: np.ndarray
    alpha: np.ndarray

    @classmethod
    def between(cls, num_frames: int, fps_in: float, fps_out: float) -> ResampleGrid:
        if num_frames < 2:
            raise MotionFormatError(
                f"cannot resample from {fps_in:g} to {fps_out:g} fps: 'joint_pos' has {num_frames} frame(s), "
                "at least 2 are needed"
            )
        # The small tolerance keeps a last frame that lands exactly on the input's end.
        count = math.floor((num_frames - 1) * fps_out / fps_in + 1e-9) + 1
        if count < 2:
            raise MotionFormatError(
                f"cannot resample from {fps_in:g} to {fps_out:g} fps: {num_frames} frames "
                f"({(num_frames - 1) / fps_in:g} s) yield fewer than 2 output frames"
            )
        source = np.arange(count) * (fps_in / fps_out)
        lo = np.minimum(np.floor(source + 1e-9).astype(np.int64), num_frames - 2)
        return cls(lo=lo, alpha=np.clip(source - lo, 0.0, 1.0))

    def lerp(self, x: np.ndarray) -> np.ndarray:
        """Linear interpolation of ``x`` ``(T, ...)`` to ``(T', ...)``."""
        a = self.alpha.reshape((-1,) + (1,) * (x.ndim - 1))
        return (1.0 - a) * x[self.lo] + a * x[self.lo + 1]

    def slerp(self, quat: np.ndarray) -> np.ndarray:
        """Spherical interpolation (shortest arc) of wxyz ``quat`` ``(T, ..., 4)`` to ``(T', ..., 4)``."""
        q = torch.from_numpy(np.ascontiguousarray(quat, dtype=np.float64))
        lo = torch.from_numpy(self.lo)
        a = torch.from_numpy(self.alpha).reshape((-1,) + (1,) * (quat.ndim - 2))
        return quat_slerp(q[lo], q[lo + 1], a).numpy()
