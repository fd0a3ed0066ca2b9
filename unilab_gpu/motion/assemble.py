"""Turn what a reader found into a canonical clip: map names, resample, derive what is missing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.names import column_order, covers
from unilab_gpu.motion.resample import ResampleGrid
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import (
    BODY_FK_TOLERANCE_M,
    MIN_FRAMES,
    MotionFormatError,
    check_bodies_follow_joints,
    check_clip_size,
    check_fps,
    check_plausible,
    unit_quat,
)
from unilab_gpu.motion.velocities import angular_velocity, linear_velocity

CONTROL_FPS = 50.0
"""Default output rate: the tracking task's control rate (4 x 5 ms physics steps)."""

ORDERS = ("auto", "mjcf", "isaaclab_bfs")
"""Orders of a file's unnamed joint and body columns: the MuJoCo model's (depth first, as mjlab
writes them), Isaac Lab's (breadth first, as BeyondMimic's Isaac Lab scripts write them), or
``auto``: the one whose forward kinematics puts the bodies where the file has them."""

_DETECTION_FRAMES = 8
"""Frames (spread over the clip) on which ``order="auto"`` compares the two orders."""


def name_columns(source: MotionSource, kinematics: RobotKinematics, order: str = "auto") -> MotionSource:
    """``source`` with names given to its unnamed joint and body columns, in ``order`` (one of
    :data:`ORDERS`). Columns a file names keep their names; unnamed columns get names only when
    there is one per model joint (body). ``auto`` needs unnamed bodies to decide: it picks the
    order whose FK of the root and joints on a few frames lies closest to the file's body
    positions; when neither is within ``BODY_FK_TOLERANCE_M`` it keeps the model's order (and
    ``build_clip`` refuses the bodies, naming the frame and body). Without bodies: the model's order.
    """
    if order not in ORDERS:
        raise MotionFormatError(f"'order' must be one of {list(ORDERS)}, got {order!r}")
    candidates = {"mjcf": (kinematics.joint_names, kinematics.body_names), "isaaclab_bfs": kinematics.isaaclab_order()}
    if order != "auto":
        return _with_names(source, *candidates[order])
    if source.body_pos_w is None or source.body_names is not None:
        return _with_names(source, *candidates["mjcf"])
    distance = {name: _fk_distance(_with_names(source, *names), kinematics) for name, names in candidates.items()}
    best = min(distance, key=distance.__getitem__)
    return _with_names(source, *candidates[best if distance[best] <= BODY_FK_TOLERANCE_M else "mjcf"])


def _with_names(source: MotionSource, joint_names: tuple[str, ...], body_names: tuple[str, ...]) -> MotionSource:
    joints = source.joint_names
    if joints is None and source.joint_pos.shape[1] == len(joint_names):
        joints = joint_names
    bodies = source.body_names
    if bodies is None and source.body_pos_w is not None and source.body_pos_w.shape[1] == len(body_names):
        bodies = body_names
    return replace(source, joint_names=joints, body_names=bodies)


def _fk_distance(source: MotionSource, kinematics: RobotKinematics) -> float:
    """Largest distance (m) between the file's body positions and FK's on a few frames; inf when
    the columns cannot be mapped onto the model."""
    if source.joint_names is None or source.body_names is None or not covers(source.body_names, kinematics.body_names):
        return float("inf")
    frames = np.unique(np.linspace(0, source.num_frames - 1, _DETECTION_FRAMES).round().astype(int))
    joints = column_order("joint", source.joint_names, kinematics.joint_names)
    bodies = column_order("body", source.body_names, kinematics.body_names, extra_ok=True)
    root_pos, root_quat = source.root_pos[frames], source.root_quat[frames]
    joint_pos = source.joint_pos[frames][:, joints]
    still = np.zeros_like(root_pos), np.zeros_like(root_pos), np.zeros_like(joint_pos)
    fk = kinematics.body_states(root_pos, root_quat, joint_pos, *still).pos
    return float(np.linalg.norm(source.body_pos_w[frames][:, bodies] - fk, axis=-1).max())


def _joint_order(source: MotionSource, kinematics: RobotKinematics) -> np.ndarray:
    if source.joint_names is not None:  # named by the file or, one column per joint, by name_columns
        return column_order("joint", source.joint_names, kinematics.joint_names)
    if source.format == "csv":
        raise MotionFormatError(
            f"CSV rows have {7 + source.joint_pos.shape[1]} columns, expected {7 + kinematics.num_joints}: 7 root "
            f"columns (xyz, quaternion xyzw) and one per joint of the model ({kinematics.num_joints})"
        )
    raise MotionFormatError(
        f"{source.format}: 'joint_pos' has {source.joint_pos.shape[1]} joint columns and the file names no "
        f"joints; expected {kinematics.num_joints} in the robot model's order"
    )


def _body_order(source: MotionSource, kinematics: RobotKinematics) -> np.ndarray | None:
    """File body index of each model body, or ``None`` when the file's bodies cannot serve (FK then)."""
    if source.body_pos_w is None or source.body_quat_w is None:
        return None
    names = source.body_names  # named by the file or, one per model body, by name_columns
    if names is None or not covers(names, kinematics.body_names):
        return None
    return column_order("body", names, kinematics.body_names, extra_ok=True)


def _take(array: np.ndarray | None, index: np.ndarray) -> np.ndarray | None:
    return None if array is None else array[:, index]


def build_clip(
    source: MotionSource,
    kinematics: RobotKinematics,
    fps: float | None = CONTROL_FPS,
    derive_velocities: bool = False,
    order: str = "auto",
) -> MotionClip:
    """The canonical clip of ``source`` on the robot of ``kinematics``.

    1. Joints are reordered by name into the model's order (unnamed columns are named by
       :func:`name_columns` in ``order``: the model's or Isaac Lab's, or detected); bodies likewise
       when the file's bodies cover every model body, else body states are recomputed by forward
       kinematics of the root and joint trajectory.
    2. If ``fps`` differs from the file's, positions are linearly interpolated and orientations
       slerped onto the new time grid, and every velocity is derived again.
    3. Missing velocities come from finite differences of the positions (on SO(3) for angular
       ones); FK body velocities follow from the root and joint velocities.
    4. The result is checked for values no robot can follow (``validation.check_plausible``).

    Args:
        source: a reader's output.
        kinematics: the robot model.
        fps: output frame rate; ``None`` keeps the file's.
        derive_velocities: ignore the file's velocities and derive all of them from the poses.
        order: the order of unnamed joint and body columns, one of :data:`ORDERS`.
    """
    if source.num_frames < MIN_FRAMES:
        raise MotionFormatError(
            f"{source.format}: the clip has {source.num_frames} frame(s), expected at least {MIN_FRAMES} "
            "(a one-frame clip ends every episode on every step)"
        )
    if fps is not None:
        check_fps(fps, "fps")  # before resampling allocates fps * duration frames
        frames = (source.num_frames - 1) * fps / source.fps + 1
        check_clip_size(frames, kinematics.num_joints, kinematics.num_bodies, f"resampling to {fps:g} fps")
    if derive_velocities:
        source = source.without_velocities()
    source = name_columns(source, kinematics, order)
    joints = _joint_order(source, kinematics)
    bodies = _body_order(source, kinematics)
    rate = source.fps
    joint_pos, joint_vel = source.joint_pos[:, joints], _take(source.joint_vel, joints)
    root_pos, root_lin_vel, root_ang_vel = source.root_pos, source.root_lin_vel, source.root_ang_vel
    root_quat = unit_quat("root_quat", source.root_quat)
    body_pos = body_quat = body_lin_vel = body_ang_vel = None
    if bodies is not None:
        body_pos = source.body_pos_w[:, bodies]
        body_quat = unit_quat("body_quat_w", source.body_quat_w[:, bodies], body_names=kinematics.body_names)
        body_lin_vel, body_ang_vel = _take(source.body_lin_vel_w, bodies), _take(source.body_ang_vel_w, bodies)
        still = np.zeros_like(root_pos), np.zeros_like(root_pos), np.zeros_like(joint_pos)
        # Compared at the source rate, after check_plausible below: an absurd value gets its own message.
        source_body_pos, fk_pos = body_pos, kinematics.body_states(root_pos, root_quat, joint_pos, *still).pos

    if fps is not None and fps != source.fps:
        grid = ResampleGrid.between(source.num_frames, source.fps, fps)
        joint_pos, root_pos, root_quat = grid.lerp(joint_pos), grid.lerp(root_pos), grid.slerp(root_quat)
        if bodies is not None:
            body_pos, body_quat = grid.lerp(body_pos), grid.slerp(body_quat)
        joint_vel = root_lin_vel = root_ang_vel = body_lin_vel = body_ang_vel = None
        rate = fps

    if joint_vel is None:
        joint_vel = linear_velocity(joint_pos, rate, "joint_pos")
    if root_lin_vel is None:
        root_lin_vel = linear_velocity(root_pos, rate, "root_pos")
    if root_ang_vel is None:
        root_ang_vel = angular_velocity(root_quat, rate, "root_quat")
    if bodies is None:
        states = kinematics.body_states(root_pos, root_quat, joint_pos, root_lin_vel, root_ang_vel, joint_vel)
        body_pos, body_quat, body_lin_vel, body_ang_vel = states.pos, states.quat, states.lin_vel, states.ang_vel
    if body_lin_vel is None:
        body_lin_vel = linear_velocity(body_pos, rate, "body_pos_w")
    if body_ang_vel is None:
        body_ang_vel = angular_velocity(body_quat, rate, "body_quat_w")
    clip = MotionClip(
        fps=rate,
        joint_names=kinematics.joint_names,
        body_names=kinematics.body_names,
        joint_pos=joint_pos,
        joint_vel=joint_vel,
        root_pos=root_pos,
        root_quat=root_quat,
        root_lin_vel=root_lin_vel,
        root_ang_vel=root_ang_vel,
        body_pos_w=body_pos,
        body_quat_w=body_quat,
        body_lin_vel_w=body_lin_vel,
        body_ang_vel_w=body_ang_vel,
    )
    check_plausible(clip.arrays(), clip.joint_names, clip.body_names, kinematics.joint_range)
    if bodies is not None:
        check_bodies_follow_joints(source_body_pos, fk_pos, kinematics.body_names)
    return clip


def resample_clip(clip: MotionClip, fps: float, kinematics: RobotKinematics) -> MotionClip:
    """``clip`` at ``fps``: lerp/slerp of its poses, velocities derived again by finite differences."""
    return build_clip(MotionSource.from_clip(clip), kinematics, fps=fps)
