"""Typed views of the controlled robot: joint space, root, bodies (no copies)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from unilab_gpu.sim.joints import SCALAR_JOINT_TYPES, has_free_root
from unilab_gpu.sim.names import resolve_names
from unilab_gpu.sim.simulator import Simulator


class Robot:
    """The robot's state as term functions read it.

    Joint space is every hinge/slide joint in model order (29 for the G1, 1 for the pendulum);
    its qpos and qvel columns must be contiguous, which holds for a free-floating or fixed-base
    robot and keeps ``joint_pos``/``joint_vel`` zero-copy views. Root fields exist when the model
    starts with a free joint (``has_root``).
    """

    def __init__(self, sim: Simulator, keyframe: str | None = None) -> None:
        m = sim.mj_model
        joints = [j for j in range(m.njnt) if int(m.jnt_type[j]) in SCALAR_JOINT_TYPES]
        if not joints:
            raise ValueError("the model has no hinge or slide joints to control")
        qpos_cols = m.jnt_qposadr[joints]
        dof_cols = m.jnt_dofadr[joints]
        if np.any(np.diff(qpos_cols) != 1) or np.any(np.diff(dof_cols) != 1):
            raise ValueError("hinge/slide joints must occupy contiguous qpos and qvel columns")
        q0, v0, count = int(qpos_cols[0]), int(dof_cols[0]), len(joints)
        self.sim = sim
        self.keyframe = keyframe
        """The model keyframe of the default pose (``None``: ``qpos0``)."""
        self.joint_names = [sim.joint_names[j] for j in joints]
        self.num_joints = count
        self.qpos_slice = slice(q0, q0 + count)
        """Columns of qpos holding the joint positions."""
        self.qvel_slice = slice(v0, v0 + count)
        """Columns of qvel holding the joint velocities."""
        s = sim.state
        self.joint_pos = s.qpos[:, self.qpos_slice]
        """Joint positions, ``(num_envs, num_joints)`` view of qpos."""
        self.joint_vel = s.qvel[:, self.qvel_slice]
        """Joint velocities, ``(num_envs, num_joints)`` view of qvel."""
        device = sim.torch_device
        key_qpos = m.key(keyframe).qpos if keyframe is not None else m.qpos0
        self.default_joint_pos = torch.tensor(key_qpos[qpos_cols], dtype=torch.float32, device=device)
        """Joint positions of the keyframe (or qpos0), ``(num_joints,)``."""
        limited = m.jnt_limited[joints].astype(bool)
        limits = np.where(limited[:, None], m.jnt_range[joints], [-np.inf, np.inf])
        self.joint_limits = torch.tensor(limits, dtype=torch.float32, device=device)
        """Lower/upper joint limits, ``(num_joints, 2)``; unlimited joints are +-inf."""
        self.default_qpos = torch.tensor(key_qpos, dtype=torch.float32, device=device)
        """Full default qpos (keyframe or qpos0), ``(nq,)``."""

        self.has_root = has_free_root(m)
        if self.has_root:
            self.root_body_id = int(m.jnt_bodyid[0])
            self.root_pos_w = s.qpos[:, 0:3]
            """Root position in the world frame, ``(num_envs, 3)`` view."""
            self.root_quat_w = s.qpos[:, 3:7]
            """Root orientation (wxyz), ``(num_envs, 4)`` view."""
            self.root_lin_vel_w = s.qvel[:, 0:3]
            """Root linear velocity in the world frame, ``(num_envs, 3)`` view (MuJoCo free joint)."""
            self.root_ang_vel_b = s.qvel[:, 3:6]
            """Root angular velocity in the root body frame, ``(num_envs, 3)`` view (MuJoCo free joint)."""

    def soft_joint_limits(self, ratio: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Lower and upper limits shrunk about each range's middle to ``ratio`` of its width,
        ``(num_joints,)`` each (unlimited joints stay +-inf)."""
        lo, hi = self.joint_limits[:, 0], self.joint_limits[:, 1]
        mid, half = (lo + hi) / 2, (hi - lo) / 2 * ratio
        finite = torch.isfinite(lo) & torch.isfinite(hi)
        return torch.where(finite, mid - half, lo), torch.where(finite, mid + half, hi)

    def joint_columns(self, names: str | Sequence[str]) -> list[int]:
        """Columns of ``joint_pos`` / ``joint_vel`` (not MuJoCo joint ids, see
        ``Simulator.joint_ids``) for joint names or regular expressions."""
        return resolve_names("joint", names, self.joint_names)
