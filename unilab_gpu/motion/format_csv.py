"""Retargeted motion CSV (e.g. the LAFAN1 G1 retargets): one frame per row, no header, no names.

Columns: root position x, y, z; root quaternion **x, y, z, w**; then one angle per joint in the
robot model's joint order (29 for the G1, Unitree's order). The file stores no frame rate: it is
``input_fps``, 30 by default. Velocities are derived and body states computed by forward kinematics.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unilab_gpu.motion.format_motrixlab import xyzw_to_wxyz
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError, check_array, check_fps

NAME = "csv"
DEFAULT_FPS = 30.0


def read(path: str | Path, input_fps: float | None) -> MotionSource:
    fps = check_fps(DEFAULT_FPS if input_fps is None else input_fps, "input_fps")
    try:
        text = Path(path).read_text()
    except UnicodeDecodeError:
        raise MotionFormatError(
            f"{path}: not a text CSV file: it holds binary data (an .npz file named .csv? rename it to .npz)"
        ) from None
    if not text.strip():
        raise MotionFormatError(f"{path}: the CSV file is empty, expected one row of numbers per frame")
    try:
        rows = np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64)
    except ValueError as err:
        raise MotionFormatError(f"{path}: every CSV row must hold comma-separated numbers ({err})") from err
    if rows.shape[1] < 8:
        raise MotionFormatError(
            f"{path}: CSV rows have {rows.shape[1]} columns, expected 7 root columns "
            "(xyz, quaternion xyzw) + one per joint"
        )
    rows = check_array("csv rows", rows, (None, rows.shape[1]))
    return MotionSource(
        format=NAME, fps=fps, root_pos=rows[:, :3], root_quat=xyzw_to_wxyz(rows[:, 3:7]), joint_pos=rows[:, 7:]
    )
