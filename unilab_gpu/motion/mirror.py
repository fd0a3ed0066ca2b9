"""The left-right mirror image of a clip, for a robot symmetric about its sagittal (x-z) plane.

Mirroring reflects the world through the x-z plane, ``y → −y``, and swaps every left part of the
robot with its right counterpart. A reflection maps positions and linear velocities by
``M = diag(1, −1, 1)``; a rotation about axis ``a`` by ``θ`` becomes the rotation about ``−M a``
by ``θ`` (angular velocities are axial vectors: ``ω → −M ω``), so a wxyz quaternion
``(w, x, y, z)`` becomes ``(w, −x, y, −z)``. A hinge's angle keeps its sign when its mirror joint
turns about the mirrored axis ``−M a`` and flips it when that joint's axis is ``+M a`` (pitch
axes keep theirs, roll and yaw axes flip for the usual conventions): the sign is read from the
model's joint axes, not assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import mujoco
import numpy as np

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.validation import MotionFormatError

REFLECT_VECTOR = np.array([1.0, -1.0, 1.0])
"""Positions and linear velocities: ``M v``."""
REFLECT_AXIAL = np.array([-1.0, 1.0, -1.0])
"""Angular velocities and rotation axes (axial vectors): ``−M ω``."""
REFLECT_QUAT = np.array([1.0, -1.0, 1.0, -1.0])
"""wxyz quaternions: ``(w, x, y, z) → (w, −x, y, −z)``, i.e. ``R → M R M``."""

SYMMETRY_TOLERANCE = 1e-3
"""How far (m, rad for joint ranges, and in axis-alignment ``1 − |cos|``) the model may be from mirror-symmetric."""

DEFAULT_NAME_PAIRS: tuple[tuple[str, str], ...] = (("left", "right"),)
"""Name fragments that mark mirrored parts: ``left_knee_joint`` ↔ ``right_knee_joint``."""


class RobotMirror:
    """How a mirror-symmetric robot's joints and bodies map onto their mirror images.

    A joint or body whose name holds one fragment of a ``name_pairs`` entry is paired with the
    one whose name holds the other fragment instead; any other joint or body (the spine, the
    root) is its own mirror image. The pairs are checked on the model at ``qpos0`` with the root
    at the origin: paired bodies must sit at mirrored positions and orientations, and paired
    joints turn about mirrored axes (which gives each joint's sign) within mirrored ranges (a
    mirrored pose must never put a joint past its limit: such a robot is refused, not clamped).

    Attributes:
        joint_pair: ``(J,)`` int64, the mirror joint of each joint (itself for a centre joint).
        joint_sign: ``(J,)`` float64, ``+1`` or ``−1``: mirrored angle = sign · angle of the pair.
        body_pair: ``(B,)`` int64, the mirror body of each body.

    Raises:
        MotionFormatError: no joint pairs (an asymmetric or differently named robot), a part
            without its counterpart, or a model that is not mirror-symmetric.
    """

    def __init__(self, kinematics: RobotKinematics, name_pairs: Sequence[tuple[str, str]] = DEFAULT_NAME_PAIRS) -> None:
        self.joint_names, self.body_names = kinematics.joint_names, kinematics.body_names
        self.joint_pair = _pairs("joint", kinematics.joint_names, name_pairs)
        if np.array_equal(self.joint_pair, np.arange(kinematics.num_joints)):
            fragments = " / ".join(f"'{a}'-'{b}'" for a, b in name_pairs)
            raise MotionFormatError(
                f"the robot has no left/right joint pairs (no joint names with {fragments}); expected a robot "
                "symmetric about its x-z plane to mirror a clip"
            )
        self.body_pair = _pairs("body", kinematics.body_names, name_pairs)
        model = kinematics.model
        data = mujoco.MjData(model)
        data.qpos[:] = model.qpos0
        data.qpos[:7] = [0, 0, 0, 1, 0, 0, 0]
        mujoco.mj_kinematics(model, data)
        pos, quat = data.xpos[1:], data.xquat[1:]
        for b, p in enumerate(self.body_pair):
            offset = np.abs(pos[p] - REFLECT_VECTOR * pos[b]).max()
            alignment = 1.0 - abs(float(np.dot(quat[p], REFLECT_QUAT * quat[b])))
            if offset > SYMMETRY_TOLERANCE or alignment > SYMMETRY_TOLERANCE:
                raise MotionFormatError(
                    f"the robot is not mirror-symmetric: body '{self.body_names[p]}' is not the mirror image of "
                    f"'{self.body_names[b]}' (position off by {offset:.3g} m, orientation by {alignment:.3g}); "
                    f"expected mirrored poses within {SYMMETRY_TOLERANCE:g}"
                )
        axes = data.xaxis[1:]  # joint 0 is the free joint
        self.joint_sign = np.ones(kinematics.num_joints)
        for j, p in enumerate(self.joint_pair):
            cosine = float(np.dot(axes[p], REFLECT_AXIAL * axes[j]))
            if 1.0 - abs(cosine) > SYMMETRY_TOLERANCE:
                raise MotionFormatError(
                    f"the robot is not mirror-symmetric: joint '{self.joint_names[p]}' does not turn about the mirror "
                    f"image of the axis of '{self.joint_names[j]}' (cosine {cosine:.3g}, expected +-1)"
                )
            self.joint_sign[j] = np.sign(cosine)
        self._check_ranges(model)

    def _check_ranges(self, model: mujoco.MjModel) -> None:
        """Refuse twin joints whose ranges are not mirror images: the mirror of a pose inside one
        joint's range would put its twin past a limit (a state the robot cannot reach, an action
        target its twin's limit stops), so the mirrored data would teach what cannot happen."""
        limited, ranges = model.jnt_limited[1:].astype(bool), model.jnt_range[1:]  # joint 0 is the free joint
        for j, p in enumerate(self.joint_pair):
            mirrored = np.sort(ranges[p] * self.joint_sign[j])
            if limited[j] != limited[p] or (limited[j] and np.abs(mirrored - ranges[j]).max() > SYMMETRY_TOLERANCE):
                shown = [f"{ranges[i].round(4).tolist()} rad" if limited[i] else "unlimited" for i in (j, p)]
                raise MotionFormatError(
                    f"the robot is not mirror-symmetric: joint '{self.joint_names[j]}' has range {shown[0]}, its twin "
                    f"'{self.joint_names[p]}' {shown[1]}; expected the twin's range times the mirror sign "
                    f"({self.joint_sign[j]:+g}) to be the joint's, within {SYMMETRY_TOLERANCE:g} rad"
                )

    def mirror(self, clip: MotionClip) -> MotionClip:
        """The mirror image of ``clip`` (a clip of this robot, same rate and frames): mirroring it
        again gives ``clip`` back."""
        if clip.joint_names != self.joint_names or clip.body_names != self.body_names:
            raise MotionFormatError("the clip's joints and bodies are not the robot's; load it for this robot first")
        j, b = self.joint_pair, self.body_pair
        return replace(
            clip,
            joint_pos=clip.joint_pos[:, j] * self.joint_sign,
            joint_vel=clip.joint_vel[:, j] * self.joint_sign,
            root_pos=clip.root_pos * REFLECT_VECTOR,
            root_quat=clip.root_quat * REFLECT_QUAT,
            root_lin_vel=clip.root_lin_vel * REFLECT_VECTOR,
            root_ang_vel=clip.root_ang_vel * REFLECT_AXIAL,
            body_pos_w=clip.body_pos_w[:, b] * REFLECT_VECTOR,
            body_quat_w=clip.body_quat_w[:, b] * REFLECT_QUAT,
            body_lin_vel_w=clip.body_lin_vel_w[:, b] * REFLECT_VECTOR,
            body_ang_vel_w=clip.body_ang_vel_w[:, b] * REFLECT_AXIAL,
        )


def _pairs(kind: str, names: Sequence[str], name_pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Index of each name's mirror name, ``(len(names),)`` int64 (its own index when unpaired)."""
    index = {name: i for i, name in enumerate(names)}
    out = np.arange(len(names))
    for i, name in enumerate(names):
        for a, b in name_pairs:
            if a in name or b in name:
                twin = name.replace(a, "\0").replace(b, a).replace("\0", b)
                if twin not in index:
                    raise MotionFormatError(
                        f"the robot's {kind} '{name}' has no mirror {kind} '{twin}'; expected every "
                        f"'{a}' {kind} to have a '{b}' twin"
                    )
                out[i] = index[twin]
                break
    return out
