"""The project's own motion file: a :class:`MotionClip` saved as ``.npz`` (``format = "unilab-motion"``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from unilab_gpu.motion.clip import MotionClip, array_shapes
from unilab_gpu.motion.npzfile import stored_fps
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import (
    MotionFormatError,
    check_array,
    check_names,
    check_schema_version,
    frame_count,
    require,
)
from unilab_gpu.utils.files import write_atomic

NAME = "canonical"
FORMAT_TAG = "unilab-motion"
SCHEMA_VERSION = 1


def save_motion(clip: MotionClip, path: str | Path) -> Path:
    """Write ``clip`` to ``path``, which must end in ``.npz``, atomically; returns the path.

    Keys: ``format`` (``"unilab-motion"``), ``schema_version`` (1), ``fps``, ``joint_names``,
    ``body_names`` and every per-frame array of :class:`MotionClip` under its field name (float64).
    The file appears whole or not at all (``utils.files.write_atomic``): a full disk leaves an
    earlier clip at ``path`` as it was.

    Raises:
        MotionFormatError: ``path`` does not end in ``.npz`` (it is never renamed silently).
    """
    path = Path(path)
    if path.suffix != ".npz":
        raise MotionFormatError(f"motion output {path} must end in .npz, e.g. {path.with_name(path.name + '.npz')}")
    arrays = {
        "format": np.array(FORMAT_TAG),
        "schema_version": np.array(SCHEMA_VERSION),
        "fps": np.array(clip.fps),
        "joint_names": np.array(clip.joint_names),
        "body_names": np.array(clip.body_names),
        **clip.arrays(),
    }
    return write_atomic(path, lambda file: np.savez(file, **arrays))


def looks_like(data: dict[str, Any]) -> bool:
    return "format" in data and str(data["format"]) == FORMAT_TAG


def read(data: dict[str, Any], input_fps: float | None, source: str) -> MotionSource:
    """A canonical file's contents (validated against :class:`MotionClip`'s layout)."""
    check_schema_version(data, SCHEMA_VERSION, source)
    fps = stored_fps(data, input_fps, source)
    joint_names = check_names("joint_names", require(data, "joint_names", source))
    body_names = check_names("body_names", require(data, "body_names", source))
    t = frame_count(data, "joint_pos", source)
    j, b = len(joint_names), len(body_names)
    arrays = {k: check_array(k, require(data, k, source), s) for k, s in array_shapes(t, j, b).items()}
    return MotionSource(format=NAME, fps=fps, joint_names=joint_names, body_names=body_names, **arrays)
