"""holosoma motion ``.npz``: the free joint's state is stored in front of the joint columns.

Keys: ``fps``; ``joint_names (J,)``; ``joint_pos (T, 7 + J)`` = root position (3), root
quaternion wxyz (4), joints in ``joint_names`` order; ``joint_vel (T, 6 + J)`` = root linear
velocity (3), root angular velocity (3), joint velocities, all world frame; ``body_names (B,)``;
``body_pos_w (T, B, 3)``, ``body_quat_w (T, B, 4)`` wxyz, world frame. The body list may hold bodies
the robot model lacks; they are ignored.

The files also hold ``body_lin_vel_w`` and ``body_ang_vel_w``, which are **not read**: in the
published clips they disagree with the finite differences of the body poses (by up to 2.9 m/s and
4.2 rad/s in ``largebox_carry``; the angular one equals the world angular velocity rotated by the
root orientation a second time), while ``joint_vel`` agrees with them to 1e-6. Body velocities
are therefore derived from the body poses.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from unilab_gpu.motion.npzfile import stored_fps
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError, check_array, check_names, frame_count, require

NAME = "holosoma"


def looks_like(data: dict[str, Any]) -> bool:
    if "joint_names" not in data or "joint_pos" not in data:
        return False
    shape = np.shape(data["joint_pos"])
    return len(shape) == 2 and shape[1] == np.size(data["joint_names"]) + 7


def read(data: dict[str, Any], input_fps: float | None, source: str) -> MotionSource:
    fps = stored_fps(data, input_fps, source)
    joint_names = check_names("joint_names", require(data, "joint_names", source))
    body_names = check_names("body_names", require(data, "body_names", source))
    t, j, b = frame_count(data, "joint_pos", source), len(joint_names), len(body_names)
    for key, root in (
        ("joint_pos", "7 root columns (position, quaternion wxyz)"),
        ("joint_vel", "6 root columns (linear, angular velocity)"),
    ):
        width = np.shape(require(data, key, source))[1:2]
        expected = (7 if key == "joint_pos" else 6) + j
        if width != (expected,):
            raise MotionFormatError(
                f"{source}: holosoma '{key}' has {width[0] if width else 'no'} columns, expected {expected}: {root} "
                f"and one per name in 'joint_names' ({j})"
            )
    qpos = check_array("joint_pos", data["joint_pos"], (t, 7 + j))
    qvel = check_array("joint_vel", data["joint_vel"], (t, 6 + j))
    bodies = {
        key: check_array(key, require(data, key, source), shape)
        for key, shape in {"body_pos_w": (t, b, 3), "body_quat_w": (t, b, 4)}.items()
    }
    return MotionSource(
        format=NAME,
        fps=fps,
        joint_names=joint_names,
        joint_pos=qpos[:, 7:],
        joint_vel=qvel[:, 6:],
        root_pos=qpos[:, :3],
        root_quat=qpos[:, 3:7],
        root_lin_vel=qvel[:, :3],
        root_ang_vel=qvel[:, 3:6],
        body_names=body_names,
        **bodies,
    )
