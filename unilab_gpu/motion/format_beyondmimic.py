"""BeyondMimic / mjlab motion ``.npz``: joints and bodies stored in the robot model's order.

Keys: ``fps``, ``joint_pos (T, J)``, ``joint_vel (T, J)``, ``body_pos_w (T, B, 3)``,
``body_quat_w (T, B, 4)`` wxyz, ``body_lin_vel_w (T, B, 3)``, ``body_ang_vel_w (T, B, 3)``, all world
frame; optional ``joint_names (J,)`` and ``body_names (B,)``. The root is body 0.
"""

from __future__ import annotations

from typing import Any

from unilab_gpu.motion.npzfile import stored_fps
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError, check_array, check_names, frame_count, require

NAME = "beyondmimic"


def looks_like(data: dict[str, Any]) -> bool:
    return {"joint_pos", "body_pos_w", "body_quat_w"} <= data.keys()


def read(data: dict[str, Any], input_fps: float | None, source: str) -> MotionSource:
    fps = stored_fps(data, input_fps, source)
    t = frame_count(data, "joint_pos", source)
    frame_count(data, "body_pos_w", source)
    j, b = data["joint_pos"].shape[1], data["body_pos_w"].shape[1]
    joint_names = check_names("joint_names", data["joint_names"]) if "joint_names" in data else None
    body_names = check_names("body_names", data["body_names"]) if "body_names" in data else None
    if joint_names is not None and len(joint_names) != j:
        # Also what a holosoma file with a column too many or too few looks like: name both layouts.
        raise MotionFormatError(
            f"{source}: 'joint_pos' has {j} columns and 'joint_names' names {len(joint_names)} joints; expected "
            f"{len(joint_names)} (BeyondMimic: one column per joint) or {len(joint_names) + 7} (holosoma: 7 root "
            "columns, position and quaternion wxyz, in front of the joints)"
        )
    if body_names is not None:
        b = len(body_names)
    arrays = {
        key: check_array(key, require(data, key, source), shape)
        for key, shape in {
            "joint_pos": (t, j), "joint_vel": (t, j), "body_pos_w": (t, b, 3), "body_quat_w": (t, b, 4),
            "body_lin_vel_w": (t, b, 3), "body_ang_vel_w": (t, b, 3),
        }.items()
    }  # fmt: skip
    return MotionSource(
        format=NAME,
        fps=fps,
        joint_names=joint_names,
        body_names=body_names,
        root_pos=arrays["body_pos_w"][:, 0],
        root_quat=arrays["body_quat_w"][:, 0],
        root_lin_vel=arrays["body_lin_vel_w"][:, 0],
        root_ang_vel=arrays["body_ang_vel_w"][:, 0],
        **arrays,
    )
