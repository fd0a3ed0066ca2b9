"""``load_motion``: any supported motion file to a canonical :class:`MotionClip`."""

from __future__ import annotations

from pathlib import Path

from unilab_gpu.motion import canonical, format_beyondmimic, format_csv, format_holosoma, format_motrixlab
from unilab_gpu.motion.assemble import CONTROL_FPS, build_clip
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.npzfile import read_npz
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError

# Detection order matters: a canonical or MotrixLab file also has the keys BeyondMimic's test looks for.
_NPZ_FORMATS = (canonical, format_motrixlab, format_holosoma, format_beyondmimic)
FORMATS: tuple[str, ...] = tuple(m.NAME for m in _NPZ_FORMATS) + (format_csv.NAME,)
"""Names accepted by ``load_motion(format=...)`` besides ``"auto"``."""


def read_source(path: str | Path, format: str = "auto", input_fps: float | None = None) -> MotionSource:
    """The raw contents of a motion file (file order and rate), detecting the format if ``"auto"``.

    Auto-detection: a ``.csv`` suffix is CSV; an ``.npz`` is canonical if its ``format`` key says
    ``"unilab-motion"``, MotrixLab if it has ``schema_version``, ``num_frames`` and ``root_rot``,
    holosoma if ``joint_pos`` has 7 more columns than ``joint_names`` has names, BeyondMimic if it
    has ``joint_pos``, ``body_pos_w`` and ``body_quat_w``.
    """
    path = Path(path)
    if format not in ("auto", *FORMATS):
        raise MotionFormatError(f"unknown motion format '{format}'; expected 'auto' or one of {list(FORMATS)}")
    if path.is_dir():
        raise MotionFormatError(f"{path} is a folder, expected a motion file (.npz or .csv)")
    if not path.is_file():
        raise FileNotFoundError(f"motion file not found: {path}")
    if format == format_csv.NAME or (format == "auto" and path.suffix.lower() == ".csv"):
        return format_csv.read(path, input_fps)
    data = read_npz(path)
    if format == "auto":
        matches = [m for m in _NPZ_FORMATS if m.looks_like(data)]
        if not matches:
            raise MotionFormatError(
                f"{path}: cannot tell the motion format from keys {sorted(data)}; pass format= one of {list(FORMATS)}"
            )
        module = matches[0]
    else:
        module = next(m for m in _NPZ_FORMATS if m.NAME == format)
    return module.read(data, input_fps, str(path))


def load_motion(
    path: str | Path,
    format: str = "auto",
    input_fps: float | None = None,
    fps: float | None = CONTROL_FPS,
    *,
    kinematics: RobotKinematics,
    derive_velocities: bool = False,
    order: str = "auto",
) -> MotionClip:
    """Load a motion file as a canonical clip of the robot whose ``kinematics`` are given.

    Args:
        path: ``.npz`` (canonical, BeyondMimic/mjlab, holosoma, MotrixLab v1) or ``.csv``.
        format: ``"auto"`` or one of :data:`FORMATS`.
        input_fps: frame rate of a CSV (default 30); for ``.npz`` files, which store ``fps``, it
            may only restate it.
        fps: output frame rate (default 50, the control rate); ``None`` keeps the file's.
        kinematics: the robot model, e.g. ``RobotKinematics.from_robot("g1")``; the file's joints
            and bodies are mapped to it by name.
        derive_velocities: ignore the file's velocities and derive them from the poses.
        order: the order of unnamed joint and body columns (BeyondMimic files name none):
            ``"mjcf"`` (the model's, as mjlab writes them), ``"isaaclab_bfs"`` (Isaac Lab's
            breadth-first order, as BeyondMimic's Isaac Lab scripts write them) or ``"auto"``
            (the one whose forward kinematics matches the file's body positions).

    Raises:
        MotionFormatError: the file is malformed; the message names the field.
        FileNotFoundError: no file at ``path``.
    """
    try:
        source = read_source(path, format, input_fps)
        return build_clip(source, kinematics, fps=fps, derive_velocities=derive_velocities, order=order)
    except MotionFormatError as error:  # name the file: it may be one of many in a config
        if str(path) in str(error):
            raise
        raise MotionFormatError(f"{path}: {error}") from None
