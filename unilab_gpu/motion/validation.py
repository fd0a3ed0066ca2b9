"""Checks for motion data read from files, with errors that name the field and what was expected."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MIN_FRAMES = 2
"""Frames a clip needs at least: a one-frame clip ends (truncates) every row on every step."""

MAX_FPS = 1000.0
"""Highest frame rate accepted (a typo such as ``--fps 1e9`` would otherwise allocate hundreds of GiB)."""


JOINT_LIMIT_MARGIN = math.pi
"""How far (rad) a clip's joint angle may lie beyond the model's joint range: retargeted clips
overshoot limits a little, an angle of 1e30 rad (or a unit mix-up, degrees for radians) is a broken file."""

WORKSPACE_M = 1000.0
"""Largest ``|x|``, ``|y|``, ``|z|`` of a body position (m): the env's default divergence envelope
(``divergence.max_qpos``), so that a reference start never begins outside it."""

MAX_SPEED = 1000.0
"""Largest ``|velocity|`` entry (m/s, rad/s): the env's default ``divergence.max_qvel``."""

BODY_FK_TOLERANCE_M = 0.25
"""How far (m) a file's body position may lie from where its root and joints put that body (the
model's forward kinematics). The published clips agree to about 1 cm; bodies all at the origin, or
another robot's bodies, are off by tens of cm."""

CLIP_MEMORY_FRACTION = 0.5
"""Share of the machine's physical memory one clip's arrays may take (estimated before allocating)."""


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


def unit_quat(
    name: str, quat: np.ndarray, tolerance: float = 1e-2, body_names: Sequence[str] | None = None
) -> np.ndarray:
    """``quat`` ``(T, 4)`` or ``(T, B, 4)`` normalized; rejects entries whose norm is off 1 by more
    than ``tolerance``, naming the frame and, for ``(T, B, 4)``, the body (``body_names``, else its index).

    Files store float32 or rounded quaternions, so small norm errors are renormalized away; a large
    one means the columns are not a quaternion (wrong layout, or a zero row).
    """
    norm = np.linalg.norm(quat, axis=-1, keepdims=True)
    error = np.abs(norm[..., 0] - 1.0).reshape(quat.shape[0], -1)
    if (error > tolerance).any():
        frame, column = np.unravel_index(int(np.argmax(error > tolerance)), error.shape)
        where = f"frame {frame}"
        if quat.ndim == 3:
            where += f", body '{body_names[column]}'" if body_names is not None else f", body {column}"
        raise MotionFormatError(
            f"'{name}' is not a unit quaternion at {where} "
            f"(norm {norm.reshape(quat.shape[0], -1)[frame, column]:.4g}, expected 1)"
        )
    return quat / norm


def check_plausible(
    arrays: Mapping[str, np.ndarray],
    joint_names: Sequence[str],
    body_names: Sequence[str],
    joint_range: np.ndarray,
) -> None:
    """Reject a clip no robot can follow: a joint angle more than :data:`JOINT_LIMIT_MARGIN` beyond
    the model's range ``joint_range (J, 2)``, a body outside the :data:`WORKSPACE_M` box, or a
    velocity above :data:`MAX_SPEED`. Such values (1e30 rad, a root at 1e12 m) are finite, pass
    every shape check and would otherwise reach the observations and the learner's normaliser.

    Args:
        arrays: a clip's per-frame arrays by :class:`~unilab_gpu.motion.clip.MotionClip` field name.

    Raises:
        MotionFormatError: naming the field, the first bad frame and the joint or body.
    """
    joint_pos = arrays["joint_pos"]
    lo, hi = joint_range[:, 0] - JOINT_LIMIT_MARGIN, joint_range[:, 1] + JOINT_LIMIT_MARGIN
    limited = joint_range[:, 1] > joint_range[:, 0]  # MuJoCo writes [0, 0] for an unlimited joint
    outside = ((joint_pos < lo) | (joint_pos > hi)) & limited
    if outside.any():
        frame, joint = np.unravel_index(int(np.argmax(outside)), outside.shape)
        raise MotionFormatError(
            f"'joint_pos' at frame {frame}, joint '{joint_names[joint]}': {joint_pos[frame, joint]:.4g} rad is far "
            f"outside the model's range [{joint_range[joint, 0]:.4g}, {joint_range[joint, 1]:.4g}] "
            f"(more than {JOINT_LIMIT_MARGIN:.3g} rad beyond it; radians expected)"
        )
    for name, bound, unit in (
        ("root_pos", WORKSPACE_M, "m"),
        ("body_pos_w", WORKSPACE_M, "m"),
        ("joint_vel", MAX_SPEED, "rad/s"),
        ("root_lin_vel", MAX_SPEED, "m/s"),
        ("root_ang_vel", MAX_SPEED, "rad/s"),
        ("body_lin_vel_w", MAX_SPEED, "m/s"),
        ("body_ang_vel_w", MAX_SPEED, "rad/s"),
    ):
        values = arrays[name]
        bad = np.abs(values) > bound
        if not bad.any():
            continue
        index = np.unravel_index(int(np.argmax(bad)), bad.shape)
        where = f"frame {index[0]}"
        if name == "joint_vel":
            where += f", joint '{joint_names[index[1]]}'"
        elif values.ndim == 3:
            where += f", body '{body_names[index[1]]}'"
        raise MotionFormatError(
            f"'{name}' at {where}: {values[index]:.4g} {unit} is outside the plausible range "
            f"[-{bound:g}, {bound:g}] {unit}"
        )


def check_bodies_follow_joints(body_pos: np.ndarray, fk_pos: np.ndarray, body_names: Sequence[str]) -> None:
    """Refuse a file whose body positions ``(T, B, 3)`` are not where its own root and joint
    trajectory put those bodies (``fk_pos``, the model's forward kinematics, same shape and body
    order ``body_names``) by more than :data:`BODY_FK_TOLERANCE_M`. Such bodies (all at the origin,
    a mis-ordered or another robot's body list) would be tracked as the reference while the joint
    targets say something else.

    Raises:
        MotionFormatError: naming the frame, the body and both positions.
    """
    distance = np.linalg.norm(body_pos - fk_pos, axis=-1)
    if not (distance > BODY_FK_TOLERANCE_M).any():
        return
    frame, body = np.unravel_index(int(np.argmax(distance)), distance.shape)
    spread = float(np.ptp(body_pos[frame], axis=0).max())
    hint = " (every body at one point: are the bodies missing?)" if spread < 1e-6 else ""
    raise MotionFormatError(
        f"'body_pos_w' at frame {frame}, body '{body_names[body]}': {np.round(body_pos[frame, body], 3).tolist()} m "
        f"is {distance[frame, body]:.3g} m from {np.round(fk_pos[frame, body], 3).tolist()} m, where the clip's own "
        f"root and joint positions put it (the model's forward kinematics; at most {BODY_FK_TOLERANCE_M:g} m "
        f"allowed){hint}"
    )


def check_clip_size(num_frames: float, num_joints: int, num_bodies: int, what: str) -> None:
    """Refuse, before allocating, a clip whose arrays would take more than
    :data:`CLIP_MEMORY_FRACTION` of the machine's memory (``what`` names the setting behind ``num_frames``)."""
    per_frame = 8 * (2 * num_joints + 13 + 13 * num_bodies)  # float64: the MotionClip fields
    need = num_frames * per_frame
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf: assume a modest machine
        memory = 16 * 2**30
    if need > CLIP_MEMORY_FRACTION * memory:
        raise MotionFormatError(
            f"{what} asks for {num_frames:.4g} frames, about {need / 2**30:,.3g} GiB of clip data, more than "
            f"{CLIP_MEMORY_FRACTION:.0%} of this machine's {memory / 2**30:,.0f} GiB of memory; use a shorter clip"
        )


ARRAY_LAYOUTS = {"joint_pos": "(frames, joint columns)", "body_pos_w": "(frames, bodies, 3)"}
"""The axes of the arrays whose sizes a loader reads first (frames, joints, bodies)."""


def frame_count(data: Mapping[str, Any], key: str, source: str) -> int:
    """Number of frames (length of axis 0) of ``data[key]``, a ``key`` of ``ARRAY_LAYOUTS``: at least
    one, and exactly its axes (a 3-D ``joint_pos`` would otherwise be read as if it had columns)."""
    shape = np.shape(require(data, key, source))
    layout = ARRAY_LAYOUTS[key]
    if len(shape) != layout.count(",") + 1 or shape[0] < 1:
        raise MotionFormatError(f"'{key}' has shape {shape}, expected {layout} with at least one frame")
    return shape[0]


def check_weights(weights: Sequence[float], count: int, key: str, per: str) -> list[float]:
    """``weights`` as floats: ``count`` of them (one ``per`` item), each finite and > 0.

    Raises:
        MotionFormatError: naming ``key``, e.g. ``'motion_weights' has 3 weights, expected 2 (one
            per motion_files entry)`` or ``'motion_weights[1]' must be a finite number > 0, got 0``.
    """
    if isinstance(weights, str) or not isinstance(weights, Sequence):
        raise MotionFormatError(f"'{key}' must be a list of {count} numbers > 0 (one per {per}), got {weights!r}")
    if len(weights) != count:
        raise MotionFormatError(f"'{key}' has {len(weights)} weights, expected {count} (one per {per})")
    out = []
    for i, weight in enumerate(weights):
        try:
            value = float(weight)
        except (TypeError, ValueError):
            value = math.nan
        if not (math.isfinite(value) and value > 0):
            raise MotionFormatError(f"'{key}[{i}]' must be a finite number > 0, got {weight!r}")
        out.append(value)
    return out
