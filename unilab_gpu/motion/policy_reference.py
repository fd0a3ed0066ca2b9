"""The reference motion a whole-body-tracking ONNX policy embeds behind a ``time_step`` input.

holosoma's tracking policies (and ours exported with ``--convention holosoma``) hold their motion
inside the network file: given ``time_step = k`` they return the reference joint angles and
velocities and the root pose of frame ``k``, and past the last frame they hold it. Sweeping
``k = 0, 1, 2, ...`` reads the motion back out; the sweep ends when the outputs have stopped
changing for ``hold_seconds``, and the clip ends at the last step that changed.

Outputs read (the whole-body-tracking convention): ``joint_pos``, ``joint_vel`` ``(1, J)`` in the
order of the metadata's ``dof_names``, ``ref_pos_xyz`` ``(1, 3)``, ``ref_quat_xyzw`` ``(1, 4)``:
the world pose of the **reference body** (holosoma's ``body_name_ref``, ``torso_link`` for the
G1; holosoma's exporter gathers ``body_pos_w`` / ``body_quat_w`` at that body), not of the root.
The root pose follows from it and the joint angles by the model's kinematics. Every other input
(the observation) is fed zeros; the reference must not depend on it, which is checked on a few
steps with a random observation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unilab_gpu.motion.clip import MotionClip
from unilab_gpu.motion.format_motrixlab import xyzw_to_wxyz
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.names import column_order
from unilab_gpu.motion.source import MotionSource
from unilab_gpu.motion.validation import MotionFormatError
from unilab_gpu.motion.velocities import linear_velocity
from unilab_gpu.utils.rotations import quat_error_magnitude

NAME = "onnx"
TIME_STEP_INPUT = "time_step"
REFERENCE_OUTPUTS = ("joint_pos", "joint_vel", "ref_pos_xyz", "ref_quat_xyzw")
"""Output names of the embedded reference, in the order :func:`read_policy_reference` reads them."""

REF_BODY = "torso_link"
"""The body whose pose ``ref_pos_xyz`` / ``ref_quat_xyzw`` hold in holosoma's G1 tracking policies
(``body_name_ref`` of its motion command)."""

HOLD_SECONDS = 10.0
"""How long (s) the outputs must stay unchanged before the sweep decides the motion has ended."""

MAX_SECONDS = 3600.0
"""Longest motion (s) the sweep reads before it gives up: a reference still changing after an hour
is not a clip that ends."""

_OBS_CHECK_STEPS = 8
"""Steps (spread over the motion) at which a random observation must give the same reference."""


@dataclass(frozen=True)
class PolicyReference:
    """What a sweep of ``time_step`` found.

    Attributes:
        source: the motion, frames ``0 .. last_step`` (``dof_names`` order, wxyz, world frame), the
            root pose solved from the reference body's.
        ref_pos, ref_quat: ``(T, 3)``, ``(T, 4)`` wxyz, the reference body's pose as the file holds it.
        last_step: the last ``time_step`` whose outputs differ from the step before.
        swept_steps: how many steps the sweep ran (``last_step + 1`` plus the hold).
    """

    source: MotionSource
    ref_pos: np.ndarray
    ref_quat: np.ndarray
    last_step: int
    swept_steps: int


def read_policy_reference(
    path: str | os.PathLike,
    fps: float,
    kinematics: RobotKinematics,
    ref_body: str = REF_BODY,
    hold_seconds: float = HOLD_SECONDS,
    max_seconds: float = MAX_SECONDS,
    seed: int = 0,
) -> PolicyReference:
    """Sweep ``time_step`` of the ONNX at ``path`` and return the motion it embeds, at ``fps``, the
    root placed so that ``ref_body`` of the robot of ``kinematics`` has the stored reference pose.

    Raises:
        MotionFormatError: the file lacks the ``time_step`` input, a reference output or the
            ``dof_names`` metadata; the reference depends on the observation; it never changes;
            or it still changes after ``max_seconds``.
    """
    import onnxruntime  # the export extra; imported here so that reading other formats does not need it

    path = Path(path)
    if ref_body not in kinematics.body_names:
        raise MotionFormatError(f"ref_body {ref_body!r} is not a body of the robot: {list(kinematics.body_names)}")
    if not path.is_file():
        raise FileNotFoundError(f"policy file not found: {path}")
    try:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime has its own exception types for unreadable files
        reason = " ".join(str(error).split())[:160]
        raise MotionFormatError(f"{path}: not a readable ONNX file ({type(error).__name__}: {reason})") from None
    joint_names = _dof_names(session, path)
    sweep = _Sweep(session, path, len(joint_names))
    hold = max(1, round(hold_seconds * fps))
    limit = round(max_seconds * fps)
    frames = [sweep.reference(0)]
    last_step, step = 0, 1
    while step - last_step <= hold:
        if step > limit:
            raise MotionFormatError(
                f"{path}: the reference still changes at time_step {last_step} ({max_seconds:g} s at {fps:g} fps); "
                "expected it to hold its last frame"
            )
        outputs = sweep.reference(step)
        if any(not np.array_equal(a, b) for a, b in zip(outputs, frames[-1], strict=True)):
            frames.extend([frames[-1]] * (step - last_step - 1))  # a held stretch inside the motion
            frames.append(outputs)
            last_step = step
        step += 1
    if last_step == 0:
        raise MotionFormatError(f"{path}: the reference outputs never change over time_step 0 .. {step - 1}")
    sweep.check_independent_of_obs(np.linspace(0, last_step, _OBS_CHECK_STEPS).round().astype(int), frames, seed)
    joint_pos, joint_vel, ref_pos, ref_quat_xyzw = (np.stack([f[i] for f in frames]) for i in range(4))
    ref_quat = xyzw_to_wxyz(ref_quat_xyzw)
    model_joints = joint_pos[:, column_order("joint", joint_names, kinematics.joint_names)]
    root_pos, root_quat = kinematics.root_from_body(ref_body, ref_pos, ref_quat, model_joints)
    source = MotionSource(
        format=NAME,
        fps=fps,
        joint_names=joint_names,
        joint_pos=joint_pos,
        joint_vel=joint_vel,
        root_pos=root_pos,
        root_quat=root_quat,
    )
    return PolicyReference(source, ref_pos, ref_quat, last_step=last_step, swept_steps=step)


def _dof_names(session, path: Path) -> tuple[str, ...]:
    metadata = session.get_modelmeta().custom_metadata_map
    if "dof_names" not in metadata:
        raise MotionFormatError(f"{path}: the metadata has no 'dof_names' (keys: {sorted(metadata)})")
    try:
        names = json.loads(metadata["dof_names"])
    except json.JSONDecodeError:
        names = None
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise MotionFormatError(f"{path}: metadata 'dof_names' must be a JSON list of joint names")
    return tuple(names)


class _Sweep:
    """Runs the policy at one ``time_step`` with zero observations and returns the reference outputs."""

    def __init__(self, session, path: Path, num_joints: int) -> None:
        self.session, self.path = session, path
        inputs = {i.name: i for i in session.get_inputs()}
        if TIME_STEP_INPUT not in inputs:
            raise MotionFormatError(f"{path}: no '{TIME_STEP_INPUT}' input (inputs: {sorted(inputs)}); "
                                    "expected a tracking policy with its motion embedded")  # fmt: skip
        outputs = [o.name for o in session.get_outputs()]
        missing = [name for name in REFERENCE_OUTPUTS if name not in outputs]
        if missing:
            raise MotionFormatError(f"{path}: missing reference output(s) {missing} (outputs: {outputs})")
        self.time_dtype = _dtype(inputs[TIME_STEP_INPUT].type)
        self.feeds = {
            name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], _dtype(i.type))
            for name, i in inputs.items()
            if name != TIME_STEP_INPUT
        }
        self.widths = (num_joints, num_joints, 3, 4)

    def reference(self, step: int, feeds: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
        """The four reference outputs at ``step``, float64, each flattened to its width."""
        time_step = np.full((1, 1), step, self.time_dtype)
        values = self.session.run(list(REFERENCE_OUTPUTS), {**(feeds or self.feeds), TIME_STEP_INPUT: time_step})
        out = []
        for name, value, width in zip(REFERENCE_OUTPUTS, values, self.widths, strict=True):
            value = np.asarray(value, dtype=np.float64).reshape(-1)
            if value.shape != (width,):
                raise MotionFormatError(f"{self.path}: output '{name}' has {value.size} values, expected {width}")
            out.append(value)
        return tuple(out)

    def check_independent_of_obs(self, steps: np.ndarray, frames: list[tuple[np.ndarray, ...]], seed: int) -> None:
        """Refuse a reference that changes with the observation (it would not be a fixed motion)."""
        rng = np.random.default_rng(seed)
        for step in steps:
            feeds = {name: rng.standard_normal(zero.shape).astype(zero.dtype) for name, zero in self.feeds.items()}
            for name, a, b in zip(REFERENCE_OUTPUTS, self.reference(int(step), feeds), frames[step], strict=True):
                if not np.array_equal(a, b):
                    raise MotionFormatError(
                        f"{self.path}: output '{name}' at time_step {step} depends on the observation; "
                        "expected a reference motion that depends on time_step only"
                    )


def _dtype(onnx_type: str) -> np.dtype:
    """NumPy dtype of an onnxruntime input type such as ``tensor(float)``."""
    names = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32}  # fmt: skip
    if onnx_type not in names:
        raise MotionFormatError(f"input type {onnx_type} is not supported; expected one of {sorted(names)}")
    return np.dtype(names[onnx_type])


@dataclass(frozen=True)
class ReferenceChecks:
    """What the extracted motion looks like against the robot model (reported, not corrected).

    The joint angles are kept as the policy holds them, also beyond the model's range (the peer's
    policy was trained to track these values; ``build_clip`` still refuses angles more than pi
    beyond it). ``joint_limit_excess`` is how far the worst one lies beyond (negative: the margin
    left inside the range).

    Attributes:
        quat_norm_error: largest ``| |q| - 1 |`` of the stored reference-body quaternions.
        joint_limit_excess: rad, ``joint_limit_joint`` the joint, ``joint_limit_frames`` how many
            frames lie beyond its range.
        max_joint_step: largest change of one joint angle between two frames (rad), at frame
            ``max_joint_step_frame`` of joint ``max_joint_step_joint``.
        max_root_step: largest root displacement between two frames (m); ``max_root_turn`` the
            largest root rotation (rad).
        joint_vel_mismatch: largest gap (rad/s) between the stored joint velocities and the
            central differences of the joint angles.
    """

    quat_norm_error: float
    joint_limit_excess: float
    joint_limit_joint: str
    joint_limit_frames: int
    max_joint_step: float
    max_joint_step_joint: str
    max_joint_step_frame: int
    max_root_step: float
    max_root_turn: float
    joint_vel_mismatch: float

    @classmethod
    def of(cls, ref_quat: np.ndarray, clip: MotionClip, joint_range: np.ndarray) -> ReferenceChecks:
        """Checks of ``clip`` (the model's joint order, ``joint_range`` ``(J, 2)``) built from a
        reference whose stored quaternions are ``ref_quat`` ``(T, 4)``."""
        lower, upper = joint_range[:, 0], joint_range[:, 1]
        excess = np.maximum(clip.joint_pos - upper, lower - clip.joint_pos)  # (T, J)
        worst = int(np.argmax(excess.max(axis=0)))
        step = np.abs(np.diff(clip.joint_pos, axis=0))  # (T - 1, J)
        frame, joint = np.unravel_index(int(np.argmax(step)), step.shape)
        quat = torch.from_numpy(clip.root_quat)
        return cls(
            quat_norm_error=float(np.abs(np.linalg.norm(ref_quat, axis=-1) - 1.0).max()),
            joint_limit_excess=float(excess[:, worst].max()),
            joint_limit_joint=clip.joint_names[worst],
            joint_limit_frames=int((excess[:, worst] > 0).sum()),
            max_joint_step=float(step[frame, joint]),
            max_joint_step_joint=clip.joint_names[joint],
            max_joint_step_frame=int(frame) + 1,
            max_root_step=float(np.linalg.norm(np.diff(clip.root_pos, axis=0), axis=-1).max()),
            max_root_turn=float(quat_error_magnitude(quat[1:], quat[:-1]).max()),
            joint_vel_mismatch=float(np.abs(clip.joint_vel - linear_velocity(clip.joint_pos, clip.fps)).max()),
        )

    def summary(self) -> str:
        """One line for the user."""
        limits = (
            f"joint limits: {self.joint_limit_joint} {self.joint_limit_excess:.3f} rad beyond on "
            f"{self.joint_limit_frames} frames (kept)"
            if self.joint_limit_excess > 0
            else f"joint limits: inside (closest {-self.joint_limit_excess:.4f} rad, {self.joint_limit_joint})"
        )
        return (
            f"checks: reference quaternion norm error {self.quat_norm_error:.1e}; {limits}; largest step per frame "
            f"{self.max_joint_step:.3f} rad ({self.max_joint_step_joint}, frame {self.max_joint_step_frame}), "
            f"root {self.max_root_step:.3f} m, {self.max_root_turn:.3f} rad; joint_vel vs differences "
            f"{self.joint_vel_mismatch:.3f} rad/s"
        )
