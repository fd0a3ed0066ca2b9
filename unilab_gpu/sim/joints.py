"""MuJoCo joint kinds as the robot views and the motion kinematics see them (no Warp import)."""

from __future__ import annotations

import mujoco

SCALAR_JOINT_TYPES = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
"""Joint types with one qpos and one qvel column: the joints a robot's joint space holds."""


def has_free_root(model: mujoco.MjModel) -> bool:
    """Whether the model's first joint is a free joint (a floating base)."""
    return model.njnt > 0 and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE)
