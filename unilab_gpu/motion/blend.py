"""A blend-in from the robot's standing keyframe into a clip's first frame.

A retargeted clip's first frame is rarely a pose the robot stands in: the deployed robot starts
from its standing keyframe, and a policy that only ever begins at frame 0 on the reference must
also learn a jump it will never be given. Prepending a short transition from the keyframe into
frame 0 lets episodes begin standing and be led into the clip.

The keyframe is placed under the clip's frame 0 in the plane: its root xy is frame 0's and its
heading is frame 0's (the keyframe's own roll, pitch and height are kept). Over ``n`` frames the
root position and joint positions move by a smoothstep ``s = 3x² − 2x³`` (zero rate at both ends,
so the reference does not jerk at the seam) and the root orientation is slerped by ``s``; body
states and every velocity, the clip's own frames' included, follow from these poses as for a
loaded file (forward kinematics, finite differences).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from unilab_gpu.motion.assemble import build_clip
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.utils.rotations import quat_mul, quat_slerp, yaw_quat


def blend_in_from_keyframe(
    clip: MotionClip, kinematics: RobotKinematics, keyframe_qpos: np.ndarray, seconds: float
) -> MotionClip:
    """``clip`` with ``round(seconds · fps)`` frames prepended that lead from the standing
    keyframe to its first frame (module docstring); frame ``n`` of the result is the clip's frame 0.

    Args:
        clip: a canonical clip of the robot of ``kinematics``.
        keyframe_qpos: ``(7 + J,)`` the keyframe's free-joint position, wxyz quaternion and joints.
        seconds: length of the blend (> 0).
    """
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"blend-in: seconds must be a finite number > 0, got {seconds!r}")
    num = max(1, round(seconds * clip.fps))
    x = np.arange(num) / num
    s = 3.0 * x**2 - 2.0 * x**3  # (n,), 0 at the keyframe; 1 would be the clip's frame 0

    key_pos, key_quat, key_joints = keyframe_qpos[:3], keyframe_qpos[3:7], keyframe_qpos[7:]
    first_quat = torch.from_numpy(clip.root_quat[0])
    # The keyframe turned to frame 0's heading: yaw(q0) ⊗ key (the keyframe stands facing +x).
    start_quat = quat_mul(yaw_quat(first_quat), torch.from_numpy(key_quat / np.linalg.norm(key_quat)))
    start_pos = np.array([clip.root_pos[0, 0], clip.root_pos[0, 1], key_pos[2]])

    root_pos = start_pos + s[:, None] * (clip.root_pos[0] - start_pos)
    root_quat = quat_slerp(start_quat.expand(num, 4), first_quat.expand(num, 4), torch.from_numpy(s)).numpy()
    joint_pos = key_joints + s[:, None] * (clip.joint_pos[0] - key_joints)
    source = MotionSource(
        format="blend-in",
        fps=clip.fps,
        joint_names=clip.joint_names,
        joint_pos=np.concatenate([joint_pos, clip.joint_pos]),
        root_pos=np.concatenate([root_pos, clip.root_pos]),
        root_quat=np.concatenate([root_quat, clip.root_quat]),
    )
    return build_clip(source, kinematics, fps=None)
