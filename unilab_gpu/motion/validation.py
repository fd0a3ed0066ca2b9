"""Checks for motion data read from files, with errors that name the field and what was expected."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

MIN_FRAMES = 2
"""Frames a clip needs at least: a one-frame clip ends (truncates) every row on every step."""

MAX_FPS = 1000.0
"""Highest frame rate accepted (a typo such as ``--fps 1e9`` would otherwise allocate hundreds of GiB)."""


class MotionFormatError(ValueError):
    """A motion file or array is malformed: the message names the field and the expected value."""


def require(data: Mapping[str, Any], key: str, source: str) -> Any:
    """``data[key]``, or a :class:`MotionFormatError` listing the keys ``source`` does have."""
    if key not in data:
        raise MotionFormatError(f"{source}: missing key '{key}' (keys present: {sorted(data)})")
    return data[key]


def check_schema_version(data: Mapping[str, Any], expected: int, source: str) -> None:
    """Raise ``MotionFormatError`` naming ``schema_version`` unless it equals ``expected``."""
    version = check_int(require(data, "schema_version", source), "schema_version", source)
    if version != expected:
        raise MotionFormatError(f"{source}: 'schema_version' is {version}, expected {expected}")


def check_array(name: str, value: Any, shape: tuple[int | None, ...]) -> np.ndarray:
    """``value`` as a finite float64 array of ``shape`` (``None`` = any size on that axis).

    Raises:
        MotionFormatError: wrong rank or size (with the expected shape), or a NaN/inf entry
            (with the first bad frame, i.e. index on axis 0).
    """
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise MotionFormatError(f"'{name}' must be numeric, got {np.asarray(value).dtype}") from err
    expected = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
    if array.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, array.shape, strict=False)):
        raise MotionFormatError(f"'{name}' has shape {array.shape}, expected {expected}")
    finite = np.isfinite(array).reshape(array.shape[0], -1).all(axis=1) if array.ndim else np.isfinite(array)
    if not np.all(finite):
        frame = int(np.argmin(finite))
        raise MotionFormatError(f"'{name}' has a NaN or inf value at frame {frame}")
    return array


def check_int(value: Any, name: str, source: str) -> int:
    """A single whole number from a scalar or one-element array (a header field such as ``num_frames``)."""
    array = np.asarray(value).reshape(-1)
    whole = array.size == 1 and (array.dtype.kind in "iu" or (array.dtype.kind == "f" and float(array[0]).is_integer()))
    if not whole:
        raise MotionFormatError(f"{source}: '{name}' must be a single whole number, got {_show(value)}")
    return int(array[0])


def check_fps(value: Any, name: str = "fps") -> float:
    """A single positive, finite frame rate up to :data:`MAX_FPS` from a scalar or a one-element array."""
    try:
        array = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise MotionFormatError(f"'{name}' must be a number of frames per second, got {_show(value)}") from None
    if array.size != 1:
        raise MotionFormatError(f"'{name}' must be a single number, got shape {np.shape(value)}")
    fps = float(array[0])
    if not np.isfinite(fps) or not 0 < fps <= MAX_FPS:
        raise MotionFormatError(
            f"'{name}' must be a positive number of frames per second up to {MAX_FPS:g}, got {fps:g}"
        )
    return fps


def _show(value: Any) -> str:
    text = repr(value.tolist() if isinstance(value, np.ndarray) else value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_names(name: str, value: Any) -> tuple[str, ...]:
    """A tuple of unique non-empty strings from a 1-D array or sequence."""
    names = tuple(str(n) for n in np.asarray(value).reshape(-1))
    if not names or any(not n for n in names):
        raise MotionFormatError(f"'{name}' must be a non-empty list of non-empty names")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise MotionFormatError(f"'{name}' repeats names {duplicates}")
    return names


def unit_quat(name: str, quat: np.ndarray, tolerance: float = 1e-2) -> np.ndarray:
    """``quat`` ``(T, ..., 4)`` normalized; rejects entries whose norm is off 1 by more than ``tolerance``.

    Files store float32 or rounded quaternions, so small norm errors are renormalized away; a large
    one means the columns are not a quaternion (wrong layout, or a zero row).
    """
    norm = np.linalg.norm(quat, axis=-1, keepdims=True)
    bad = np.abs(norm - 1.0).reshape(quat.shape[0], -1).max(axis=1) > tolerance
    if bad.any():
        frame = int(np.argmax(bad))
        worst = norm.reshape(quat.shape[0], -1)[frame].min()
        raise MotionFormatError(f"'{name}' is not a unit quaternion at frame {frame} (norm {worst:.4g})")
    return quat / norm


def frame_count(data: Mapping[str, Any], key: str, source: str) -> int:
    """Number of frames (length of axis 0) of ``data[key]``; at least one."""
    shape = np.shape(require(data, key, source))
    if len(shape) < 2 or shape[0] < 1:
        raise MotionFormatError(f"'{key}' has shape {shape}, expected (frames >= 1, ...)")
    return shape[0]
