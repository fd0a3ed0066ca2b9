"""Forward kinematics of a floating-base robot with MuJoCo C: body poses and velocities per frame."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
import torch

from unilab_gpu.paths import robot_asset
from unilab_gpu.sim.joints import SCALAR_JOINT_TYPES, has_free_root
from unilab_gpu.utils.rotations import quat_apply, quat_apply_inverse, quat_conjugate, quat_mul


@dataclass(frozen=True)
class BodyStates:
    """World-frame body states for ``T`` frames and ``B`` bodies (float64, model body order).

    ``pos (T, B, 3)`` origins, ``quat (T, B, 4)`` wxyz orientations, ``lin_vel (T, B, 3)`` velocity
    of the body origin and ``ang_vel (T, B, 3)`` angular velocity, both in world coordinates.
    """

    pos: np.ndarray
    quat: np.ndarray
    lin_vel: np.ndarray
    ang_vel: np.ndarray


class RobotKinematics:
    """Forward kinematics of a model whose first joint is a free joint and the rest are 1-dof hinges.

    Body order is the model's (depth first), world excluded; joint order is ``qpos[7:]``'s.
    """

    def __init__(self, model: mujoco.MjModel) -> None:
        if not has_free_root(model):
            raise ValueError("RobotKinematics needs a model whose first joint is a free joint")
        if any(int(model.jnt_type[j]) not in SCALAR_JOINT_TYPES for j in range(1, model.njnt)):
            raise ValueError("RobotKinematics supports one free joint followed by 1-dof joints only")
        self.model = model
        self._data = mujoco.MjData(model)
        self.joint_names: tuple[str, ...] = tuple(model.joint(j).name for j in range(1, model.njnt))
        self.body_names: tuple[str, ...] = tuple(model.body(b).name for b in range(1, model.nbody))
        self.joint_range: np.ndarray = model.jnt_range[1:].copy()
        """``(J, 2)`` lower and upper limits of each joint (rad)."""
        self._root_of_body = model.body_rootid[1:]

    @classmethod
    def from_robot(cls, robot: str) -> RobotKinematics:
        """Kinematics of a robot by folder name, e.g. ``from_robot("g1")`` loads
        ``assets/robots/g1/scene.xml`` (``paths.robot_asset``: the project's robots, then ``UNILAB_PATH``'s)."""
        return cls(mujoco.MjModel.from_xml_path(str(robot_asset(robot))))

    def isaaclab_order(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Joint and body names in Isaac Lab's order: breadth first over the kinematic tree (PhysX's
        articulation link order), children in the model's order, each body's joints with it.
        MuJoCo numbers bodies depth first; an Isaac Lab recording without names is in this order."""
        m = self.model
        queue = [b for b in range(1, m.nbody) if m.body_parentid[b] == 0]
        order: list[int] = []
        while queue:
            body = queue.pop(0)
            order.append(body)
            queue += [c for c in range(body + 1, m.nbody) if m.body_parentid[c] == body]
        joints = [j for b in order for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]) if j > 0]
        return tuple(m.joint(j).name for j in joints), tuple(m.body(b).name for b in order)

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)

    @property
    def num_bodies(self) -> int:
        return len(self.body_names)

    def _set_frame(self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray) -> None:
        qpos = self._data.qpos
        qpos[:3] = root_pos
        qpos[3:7] = root_quat / np.linalg.norm(root_quat)
        qpos[7:] = joint_pos

    def body_states(
        self,
        root_pos: np.ndarray,
        root_quat: np.ndarray,
        joint_pos: np.ndarray,
        root_lin_vel: np.ndarray,
        root_ang_vel: np.ndarray,
        joint_vel: np.ndarray,
    ) -> BodyStates:
        """Body poses and velocities of ``T`` frames of root and joint states.

        Args:
            root_pos: ``(T, 3)`` world position of the free joint's body.
            root_quat: ``(T, 4)`` its wxyz orientation (normalized here).
            joint_pos: ``(T, J)`` joint positions in :attr:`joint_names` order.
            root_lin_vel: ``(T, 3)`` root linear velocity, world frame.
            root_ang_vel: ``(T, 3)`` root angular velocity, world frame.
            joint_vel: ``(T, J)`` joint velocities.
        """
        m, d = self.model, self._data
        num_frames = root_pos.shape[0]
        # MuJoCo's free joint takes its angular velocity in the body frame.
        ang_local = quat_apply_inverse(torch.from_numpy(root_quat), torch.from_numpy(root_ang_vel)).numpy()
        out = BodyStates(*(np.zeros((num_frames, self.num_bodies, n)) for n in (3, 4, 3, 3)))
        for t in range(num_frames):
            self._set_frame(root_pos[t], root_quat[t], joint_pos[t])
            d.qvel[:3] = root_lin_vel[t]
            d.qvel[3:6] = ang_local[t]
            d.qvel[6:] = joint_vel[t]
            mujoco.mj_kinematics(m, d)
            mujoco.mj_comPos(m, d)
            mujoco.mj_comVel(m, d)
            pos = d.xpos[1:]
            # cvel = (angular, linear) of each body, the linear part taken at the centre of mass of
            # its kinematic tree; move it to the body origin: v_o = v_c + w x (o - c).
            ang, lin_c = d.cvel[1:, :3], d.cvel[1:, 3:]
            offset = pos - d.subtree_com[self._root_of_body]
            out.pos[t] = pos
            out.quat[t] = d.xquat[1:]
            out.ang_vel[t] = ang
            out.lin_vel[t] = lin_c + np.cross(ang, offset)
        return out

    def root_from_body(
        self, body: str, body_pos: np.ndarray, body_quat: np.ndarray, joint_pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The root poses that put ``body`` at ``body_pos`` ``(T, 3)``, ``body_quat`` ``(T, 4)`` wxyz
        (world frame) with joint angles ``joint_pos`` ``(T, J)``: ``(root_pos (T, 3), root_quat (T, 4))``.

        The body's pose in the root frame follows from the joints (FK with the root at the origin);
        the root is the body's pose composed with its inverse. A tracking policy that stores the pose
        of a reference body (holosoma's ``torso_link``) gives the root this way.
        """
        if body not in self.body_names:
            raise ValueError(f"no body {body!r} in the model (bodies: {list(self.body_names)})")
        index = self.body_names.index(body) + 1  # MuJoCo numbers the world body 0
        m, d = self.model, self._data
        rel_pos, rel_quat = np.zeros((len(joint_pos), 3)), np.zeros((len(joint_pos), 4))
        for t in range(len(joint_pos)):
            self._set_frame(np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]), joint_pos[t])
            mujoco.mj_kinematics(m, d)
            rel_pos[t], rel_quat[t] = d.xpos[index], d.xquat[index]
        quat = torch.from_numpy(body_quat / np.linalg.norm(body_quat, axis=-1, keepdims=True))
        root_quat = quat_mul(quat, quat_conjugate(torch.from_numpy(rel_quat)))
        root_pos = torch.from_numpy(body_pos) - quat_apply(root_quat, torch.from_numpy(rel_pos))
        return root_pos.numpy(), root_quat.numpy()

    def geom_positions(
        self, root_pos: np.ndarray, root_quat: np.ndarray, joint_pos: np.ndarray, geom_ids: np.ndarray
    ) -> np.ndarray:
        """World positions ``(T, G, 3)`` of the centres of geoms ``geom_ids`` over ``T`` frames."""
        m, d = self.model, self._data
        out = np.zeros((root_pos.shape[0], len(geom_ids), 3))
        for t in range(root_pos.shape[0]):
            self._set_frame(root_pos[t], root_quat[t], joint_pos[t])
            mujoco.mj_kinematics(m, d)
            out[t] = d.geom_xpos[geom_ids]
        return out
