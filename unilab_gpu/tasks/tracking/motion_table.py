"""The motion command's motion table: the clips of its motion set (or one synthetic clip),
resampled to the control rate, mapped onto the robot by joint and body name and, when asked, blended
in from the robot's standing keyframe, as one device :class:`~unilab_gpu.motion.MotionLibrary`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from unilab_gpu.motion import ORDERS, MotionLibrary, RobotKinematics, load_motion, synthesize_clip
from unilab_gpu.motion.blend import blend_in_from_keyframe
from unilab_gpu.motion.motion_set import resolve_motion_set

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def load_motion_table(
    env: EnvView,
    body_names: list[str],
    where: str,
    motion_files: list[str] | None,
    motion_weights: list[float] | None,
    motion_order: str,
    synthetic_seconds: float,
    synthetic_seed: int,
    blend_in_seconds: float,
    blend_in_keyframe: str | None,
) -> MotionLibrary:
    """The motion table of the command's params (named as in
    :class:`~unilab_gpu.tasks.tracking.motion_command.MotionCommand`), its bodies ``body_names`` in
    that order; a bad param raises one line naming ``<where>.<param>``."""
    fps = 1.0 / env.step_dt
    kinematics = RobotKinematics(env.sim.mj_model)
    # Checked with or without files: a typo must not wait for the day files are added.
    if motion_order not in ORDERS:
        raise ValueError(f"{where}.motion_order must be one of {list(ORDERS)}, got {motion_order!r}")
    if motion_files:
        motion_set = resolve_motion_set(
            motion_files, motion_weights, key=f"{where}.motion_files", weights_key=f"{where}.motion_weights"
        )
        clips = [load_motion(c.path, fps=fps, kinematics=kinematics, order=motion_order) for c in motion_set]
        names, weights = [c.name for c in motion_set], [c.weight for c in motion_set]
    else:
        if motion_weights is not None:
            raise ValueError("commands.motion.params.motion_weights needs motion_files (one weight per entry)")
        clips = [synthesize_clip(synthetic_seconds, synthetic_seed, fps=fps, kinematics=kinematics)]
        names, weights = ["synthetic"], None
    if blend_in_seconds:
        standing = _keyframe_qpos(env.sim.mj_model, blend_in_keyframe, f"{where}.blend_in_keyframe")
        clips = [blend_in_from_keyframe(c, kinematics, standing, blend_in_seconds) for c in clips]
    return MotionLibrary(
        clips,
        joint_names=env.robot.joint_names,
        body_names=body_names,
        device=env.device,
        clip_names=names,
        clip_weights=weights,
    )


def _keyframe_qpos(model, name: str | None, key: str) -> np.ndarray:
    """``qpos (nq,)`` of the model's keyframe ``name``, or a one-line error naming ``key``."""
    names = [model.key(k).name for k in range(model.nkey)]
    if name not in names:
        raise ValueError(f"{key}: the model has no keyframe {name!r}; its keyframes: {names}")
    return model.key(name).qpos.copy()
