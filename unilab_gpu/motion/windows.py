"""Cut a clip into overlapping windows of fixed length, each its own clip (a motion set of one motion)."""

from __future__ import annotations

import math
from dataclasses import replace

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.validation import MIN_FRAMES, MotionFormatError


def clip_windows(clip: MotionClip, seconds: float, overlap_seconds: float) -> list[MotionClip]:
    """Windows of ``clip``: frames ``[k * step, k * step + length)`` with ``length = round(seconds *
    fps) + 1`` and ``step = length - 1 - round(overlap_seconds * fps)`` (neighbours share at least
    their boundary frame), the last one ending at the clip's last frame (shorter; it still holds at
    least two frames, the shared ones). Every array is sliced, not recomputed: frame ``i`` of a
    window is frame ``start + i`` of the clip, velocities and body states included.

    Raises:
        MotionFormatError: ``seconds`` under two frames, or an overlap that is negative or not
            shorter than a window.
    """
    length = round(seconds * clip.fps) + 1
    if length < MIN_FRAMES:
        raise MotionFormatError(f"'seconds' must span at least {MIN_FRAMES} frames at {clip.fps:g} fps, got {seconds}")
    # round() of NaN or inf raises: -1 fails the range check below, which names the value.
    overlap = round(overlap_seconds * clip.fps) if math.isfinite(overlap_seconds) else -1
    if not 0 <= overlap < length - 1:
        raise MotionFormatError(
            f"'overlap_seconds' must be >= 0 and shorter than a window ({seconds:g} s), got {overlap_seconds}"
        )
    step = length - 1 - overlap
    starts = list(range(0, max(clip.num_frames - length, 0) + 1, step))
    if starts[-1] + length < clip.num_frames:  # the tail: a shorter last window
        starts.append(starts[-1] + step)
    bounds = [(start, min(start + length, clip.num_frames)) for start in starts]
    return [replace(clip, **{k: v[a:b] for k, v in clip.arrays().items()}) for a, b in bounds]
