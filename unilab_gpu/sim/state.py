"""Zero-copy torch views of the simulator state that managers read and write."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SimState:
    """Views that share memory with MJWarp's device arrays (no copies, stable addresses).

    Writing into ``qpos``, ``qvel`` or ``ctrl`` writes the simulator's state. Body and site fields
    are outputs: they hold the kinematics of the last ``Simulator.refresh`` (or of the start of
    the last physics substep). Quaternions are wxyz; body ids are MuJoCo body ids (0 = world).
    """

    qpos: torch.Tensor
    """Generalized positions, ``(num_envs, nq)``."""
    qvel: torch.Tensor
    """Generalized velocities, ``(num_envs, nv)``."""
    ctrl: torch.Tensor
    """Actuator controls (position targets for the G1), ``(num_envs, nu)``."""
    body_pos_w: torch.Tensor
    """Body frame origins in the world frame, ``(num_envs, nbody, 3)``."""
    body_quat_w: torch.Tensor
    """Body frame orientations in the world frame (wxyz), ``(num_envs, nbody, 4)``."""
    body_rotmat_w: torch.Tensor
    """Body frame rotation matrices, ``(num_envs, nbody, 3, 3)``."""
    body_lin_vel_w: torch.Tensor
    """Linear velocity of each body origin in the world frame, ``(num_envs, nbody, 3)``."""
    body_ang_vel_w: torch.Tensor
    """Angular velocity of each body in the world frame, ``(num_envs, nbody, 3)``."""
    site_pos_w: torch.Tensor
    """Site positions in the world frame, ``(num_envs, nsite, 3)``."""
    site_rotmat_w: torch.Tensor
    """Site rotation matrices, ``(num_envs, nsite, 3, 3)``."""
    sensordata: torch.Tensor
    """All sensor outputs, ``(num_envs, nsensordata)``; see ``Simulator.sensor_slice``."""
    body_contact: torch.Tensor
    """1.0 where a body touches anything in the last physics substep, else 0.0, ``(num_envs, nbody)``."""

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every view by name (for address-stability checks)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}
