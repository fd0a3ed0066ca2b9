"""Synthetic reference clips: smooth joint motion of the project's robot, feet kept on the floor.

The built-in default motion, so tracking runs with no external data. Each joint follows a sum of
sines around the robot's ``stand`` keyframe pose, within its range less a margin; the root turns
and drifts gently; the root height of each frame puts the lowest foot-sole point exactly on the
floor (z = 0). Body states and velocities come from the same pipeline as loaded files.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import torch

from unilab_gpu.motion.assemble import CONTROL_FPS, build_clip
from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError, check_clip_size, check_fps
from unilab_gpu.utils.rotations import quat_from_euler_xyz

LIMIT_MARGIN = 0.1
"""Distance (rad) kept from each joint limit (less for joints whose range is under 4 margins)."""
MAX_AMPLITUDE = 0.5
"""Largest swing (rad) of a joint about its nominal position."""
NUM_SINES = 3
FREQUENCY_RANGE = (0.1, 0.6)
"""Hz: slow enough for a position-controlled G1 to follow."""


def _sum_of_sines(rng: np.random.Generator, t: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` random signals ``(T, count)`` in [-1, 1] and their time derivatives."""
    freq = 2.0 * np.pi * rng.uniform(*FREQUENCY_RANGE, size=(NUM_SINES, count))
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(NUM_SINES, count))
    weight = rng.uniform(0.2, 1.0, size=(NUM_SINES, count))
    weight /= weight.sum(axis=0)  # |signal| <= 1 whatever the phases
    arg = freq[None] * t[:, None, None] + phase[None]
    return (weight * np.sin(arg)).sum(axis=1), (weight * freq * np.cos(arg)).sum(axis=1)


def sole_geoms(model: mujoco.MjModel) -> np.ndarray:
    """Ids of the foot-sole spheres: the robot's sphere geoms with ``condim = 3`` (friction contacts)."""
    ids = [
        g
        for g in range(model.ngeom)
        if model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE and model.geom_condim[g] == 3 and model.geom_bodyid[g] > 0
    ]
    if not ids:
        raise ValueError("the robot model has no condim-3 sphere geoms to stand on")
    return np.array(ids, dtype=np.int64)


def _nominal_pose(kinematics: RobotKinematics) -> np.ndarray:
    model = kinematics.model
    for k in range(model.nkey):
        if model.key(k).name == "stand":
            return model.key_qpos[k, 7:].copy()
    return kinematics.joint_range.mean(axis=1)


def synthesize_clip(
    seconds: float = 10.0, seed: int = 0, fps: float = CONTROL_FPS, *, kinematics: RobotKinematics
) -> MotionClip:
    """A smooth random clip of ``seconds`` (``round(seconds * fps) + 1`` frames) for the robot.

    Joints: ``nominal + amplitude * s(t)`` with ``s`` a normalized sum of ``NUM_SINES`` sines, the
    nominal pose the ``stand`` keyframe (mid-range without one) and the amplitude at most
    ``MAX_AMPLITUDE`` and at most the distance to each limit less ``LIMIT_MARGIN``; joint velocities
    are the exact derivatives. Root: yaw within ±0.6 rad, roll/pitch within ±0.05 rad, x/y within
    ±0.4 m, all sums of sines; height such that the lowest point of the foot-sole spheres is on the
    floor. Root velocities and body states are derived as for a loaded file (finite differences,
    forward kinematics).
    """
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise MotionFormatError(f"synthetic clip: 'seconds' must be a finite number > 0, got {seconds!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise MotionFormatError(f"synthetic clip: 'seed' must be a whole number >= 0, got {seed!r}")
    check_fps(fps)
    num_frames = round(seconds * fps) + 1
    check_clip_size(num_frames, kinematics.num_joints, kinematics.num_bodies, f"a synthetic clip of {seconds:g} s")
    rng = np.random.default_rng(seed)
    t = np.arange(num_frames) / fps

    lo, hi = kinematics.joint_range.T
    margin = np.minimum(LIMIT_MARGIN, 0.25 * (hi - lo))
    lo, hi = lo + margin, hi - margin
    nominal = np.clip(_nominal_pose(kinematics), lo, hi)
    amplitude = np.minimum.reduce([np.full_like(lo, MAX_AMPLITUDE), nominal - lo, hi - nominal])
    amplitude *= rng.uniform(0.5, 1.0, size=amplitude.shape)
    signal, rate = _sum_of_sines(rng, t, kinematics.num_joints)
    joint_pos, joint_vel = nominal + amplitude * signal, amplitude * rate

    root, _ = _sum_of_sines(rng, t, 5)
    roll, pitch, yaw = 0.05 * root[:, 0], 0.05 * root[:, 1], 0.6 * root[:, 2]
    root_quat = quat_from_euler_xyz(*(torch.from_numpy(a) for a in (roll, pitch, yaw))).numpy()
    root_pos = np.stack((0.4 * root[:, 3], 0.4 * root[:, 4], np.zeros(num_frames)), axis=1)

    soles = sole_geoms(kinematics.model)
    centers = kinematics.geom_positions(root_pos, root_quat, joint_pos, soles)
    lowest = (centers[..., 2] - kinematics.model.geom_size[soles, 0]).min(axis=1)
    root_pos[:, 2] = -lowest

    source = MotionSource(
        format="synthetic",
        fps=fps,
        joint_names=kinematics.joint_names,
        joint_pos=joint_pos,
        joint_vel=joint_vel,
        root_pos=root_pos,
        root_quat=root_quat,
    )
    return build_clip(source, kinematics, fps=None)
