"""MotrixLab motion NPZ, schema version 1: named joints and bodies, quaternions **xyzw**.

Keys (``T`` frames, ``J`` joints, ``B`` bodies; vectors in the world frame):

- required: ``schema_version`` (1), ``num_frames`` (``T``), ``fps``, ``joint_names (J,)``,
  ``joint_pos (T, J)``, ``root_pos (T, 3)``, ``root_rot (T, 4)`` xyzw;
- optional: ``joint_vel (T, J)``, ``root_lin_vel (T, 3)``, ``root_ang_vel (T, 3)``; and, as a group,
  ``body_names (B,)``, ``body_pos (T, B, 3)``, ``body_rot (T, B, 4)`` xyzw, with optional
  ``body_lin_vel (T, B, 3)`` and ``body_ang_vel (T, B, 3)``.

Missing velocities are derived from the poses, missing bodies by forward kinematics.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from unilab_gpu.motion.npzfile import stored_fps
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import (
    MotionFormatError,
    check_array,
    check_int,
    check_names,
    check_schema_version,
    frame_count,
    require,
)

NAME = "motrixlab"
SCHEMA_VERSION = 1


def looks_like(data: dict[str, Any]) -> bool:
    return {"schema_version", "num_frames", "root_rot"} <= data.keys()


def xyzw_to_wxyz(quat: np.ndarray) -> np.ndarray:
    """Reorder the last axis from (x, y, z, w) to (w, x, y, z)."""
    return np.concatenate((quat[..., 3:], quat[..., :3]), axis=-1)


def read(data: dict[str, Any], input_fps: float | None, source: str) -> MotionSource:
    check_schema_version(data, SCHEMA_VERSION, source)
    fps = stored_fps(data, input_fps, source)
    joint_names = check_names("joint_names", require(data, "joint_names", source))
    t, j = frame_count(data, "joint_pos", source), len(joint_names)
    declared = check_int(require(data, "num_frames", source), "num_frames", source)
    if declared != t:
        raise MotionFormatError(f"{source}: 'num_frames' is {declared} but 'joint_pos' has {t} frames")

    def optional(key: str, shape: tuple[int, ...]) -> np.ndarray | None:
        return check_array(key, data[key], shape) if key in data else None

    body_names = body_pos = body_quat = None
    b = 0
    if "body_names" in data:
        body_names = check_names("body_names", data["body_names"])
        b = len(body_names)
        body_pos = check_array("body_pos", require(data, "body_pos", source), (t, b, 3))
        body_quat = xyzw_to_wxyz(check_array("body_rot", require(data, "body_rot", source), (t, b, 4)))
    return MotionSource(
        format=NAME,
        fps=fps,
        joint_names=joint_names,
        joint_pos=check_array("joint_pos", data["joint_pos"], (t, j)),
        joint_vel=optional("joint_vel", (t, j)),
        root_pos=check_array("root_pos", require(data, "root_pos", source), (t, 3)),
        root_quat=xyzw_to_wxyz(check_array("root_rot", require(data, "root_rot", source), (t, 4))),
        root_lin_vel=optional("root_lin_vel", (t, 3)),
        root_ang_vel=optional("root_ang_vel", (t, 3)),
        body_names=body_names,
        body_pos_w=body_pos,
        body_quat_w=body_quat,
        body_lin_vel_w=optional("body_lin_vel", (t, b, 3)) if body_names else None,
        body_ang_vel_w=optional("body_ang_vel", (t, b, 3)) if body_names else None,
    )
