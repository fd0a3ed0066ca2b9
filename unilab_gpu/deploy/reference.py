"""A reference motion for a tracking policy: a canonical clip at the control rate, played by time.

The canonical clip is the project's own motion file (``format = "unilab-motion"``, written by
``unilab-motion convert``; docs/motion.md): float64 arrays in world coordinates, quaternions
wxyz, joints and bodies named. Other formats need the training package to convert them (FK,
resampling), so the runtime reads only this one; ``unilab-sim2sim`` converts on the fly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .policy_file import DeploymentError
from .rotations import rotate_inverse

FORMAT_TAG = "unilab-motion"
FIELDS = (
    "joint_pos",
    "joint_vel",
    "root_pos",
    "root_quat",
    "root_lin_vel",
    "root_ang_vel",
    "body_pos_w",
    "body_quat_w",
)
"""The clip's arrays the runtime reads (``T`` frames each)."""


class ReferenceMotion:
    """``T`` frames at ``fps`` of a clip: ``joint_pos``/``joint_vel`` ``(T, J)`` in ``joint_names``
    order, ``root_pos``/``root_lin_vel``/``root_ang_vel`` ``(T, 3)`` (world frame), ``root_quat``
    ``(T, 4)``, ``body_pos_w`` ``(T, B, 3)`` and ``body_quat_w`` ``(T, B, 4)`` in ``body_names``
    order (world frame, wxyz).

    Frame ``k`` is shown at ``k / fps`` seconds; :meth:`frame_at` holds the last frame past the end.
    """

    def __init__(self, fps: float, joint_names: Sequence[str], body_names: Sequence[str], **arrays: np.ndarray) -> None:
        missing = [name for name in FIELDS if name not in arrays]
        if missing:
            raise DeploymentError(f"reference motion: arrays {missing} are missing")
        self.fps = float(fps)
        self.joint_names = [str(n) for n in joint_names]
        self.body_names = [str(n) for n in body_names]
        for name in FIELDS:
            setattr(self, name, np.asarray(arrays[name], dtype=np.float64))
        self.num_frames = len(self.joint_pos)
        joints, bodies = len(self.joint_names), len(self.body_names)
        expected = {
            "joint_pos": (joints,),
            "joint_vel": (joints,),
            "root_pos": (3,),
            "root_quat": (4,),
            "root_lin_vel": (3,),
            "root_ang_vel": (3,),
            "body_pos_w": (bodies, 3),
            "body_quat_w": (bodies, 4),
        }
        # Checked here so that a malformed clip is one line, not a broadcast error in the first step.
        for name, tail in expected.items():
            shape = getattr(self, name).shape
            if shape != (self.num_frames, *tail):
                want = ", ".join(("T", *map(str, tail)))
                raise DeploymentError(
                    f"reference motion: '{name}' has shape {shape}, expected ({want}) with T = {self.num_frames} "
                    f"frames, {joints} joint_names and {bodies} body_names"
                )

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    root_pos: np.ndarray
    root_quat: np.ndarray
    root_lin_vel: np.ndarray
    root_ang_vel: np.ndarray
    body_pos_w: np.ndarray
    body_quat_w: np.ndarray

    @classmethod
    def load(cls, path: str | os.PathLike) -> ReferenceMotion:
        """Read a canonical ``.npz`` clip (no pickles).

        Raises:
          DeploymentError: not a canonical clip (convert it with ``unilab-motion convert``).
        """
        try:
            with np.load(path, allow_pickle=False) as data:
                contents = {key: data[key] for key in data.files}
        except (OSError, ValueError) as error:
            raise DeploymentError(f"motion {path}: not a readable .npz file ({error})") from None
        if str(contents.get("format", "")) != FORMAT_TAG:
            raise DeploymentError(
                f"motion {path}: not a canonical clip (format '{FORMAT_TAG}'); convert it with unilab-motion convert"
            )
        try:
            names = {key: contents[key].tolist() for key in ("fps", "joint_names", "body_names")}
            arrays = {name: contents[name] for name in FIELDS}
        except KeyError as error:
            raise DeploymentError(f"motion {path}: the canonical clip lacks '{error.args[0]}'") from None
        return cls(float(names["fps"]), names["joint_names"], names["body_names"], **arrays)

    def for_robot(
        self, joint_names: Sequence[str], body_names: Sequence[str], fps: float, source: str
    ) -> ReferenceMotion:
        """This clip with its joints in ``joint_names`` order, checked against the policy's robot:
        every joint and tracked body present, ``fps`` the control rate.

        Raises:
          DeploymentError: a joint or body the policy needs is missing (a clip of another robot),
            or the frame rate differs.
        """
        missing = [n for n in joint_names if n not in self.joint_names]
        missing_bodies = [n for n in body_names if n not in self.body_names]
        if missing or missing_bodies:
            shown = (missing + missing_bodies)[:4]
            raise DeploymentError(
                f"motion {source}: a clip of another robot? it lacks {len(missing)} of the policy's "
                f"{len(joint_names)} joints and {len(missing_bodies)} of its {len(body_names)} tracked bodies "
                f"(e.g. {shown}); its joints: {self.joint_names[:4]}..."
            )
        if abs(self.fps - fps) > 1e-6 * fps:
            raise DeploymentError(
                f"motion {source}: {self.fps:g} fps, the policy runs at {fps:g} Hz; "
                f"resample it (unilab-motion convert IN OUT --fps {fps:g})"
            )
        columns = [self.joint_names.index(n) for n in joint_names]
        arrays = {name: getattr(self, name) for name in FIELDS}
        arrays["joint_pos"], arrays["joint_vel"] = self.joint_pos[:, columns], self.joint_vel[:, columns]
        return ReferenceMotion(self.fps, joint_names, self.body_names, **arrays)

    @property
    def duration(self) -> float:
        """Seconds from the first frame to the last."""
        return (self.num_frames - 1) / self.fps

    def frame_at(self, seconds: float) -> int:
        """The frame shown at ``seconds`` from the clip's start (the last one past its end)."""
        return int(min(max(round(seconds * self.fps), 0), self.num_frames - 1))

    def body_column(self, name: str) -> int:
        if name not in self.body_names:
            raise DeploymentError(f"reference motion has no body '{name}' (bodies: {self.body_names[:4]}...)")
        return self.body_names.index(name)

    def state(self, frame: int) -> tuple[np.ndarray, np.ndarray]:
        """The reference as a free-floating robot's ``qpos`` ``(7 + J,)`` and ``qvel`` ``(6 + J,)``
        (joints in this clip's order; MuJoCo's free joint takes the angular velocity in the body
        frame)."""
        quat = self.root_quat[frame]
        ang_vel_b = rotate_inverse(quat, self.root_ang_vel[frame])
        qpos = np.concatenate([self.root_pos[frame], quat, self.joint_pos[frame]])
        qvel = np.concatenate([self.root_lin_vel[frame], ang_vel_b, self.joint_vel[frame]])
        return qpos, qvel
