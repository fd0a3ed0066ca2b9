"""Event terms. Reset events edit the staged state ``env.reset_staging.qpos`` / ``qvel`` (slot
``i`` is row ``env_ids[i]``, after the command terms staged theirs; see ``managers.reset_staging``);
interval events act on the rows in ``mask``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import mujoco
import numpy as np
import torch

from unilab_gpu.utils.ranges import clamp_to, low_and_span
from unilab_gpu.utils.rotations import quat_apply_inverse, quat_from_euler_xyz, quat_mul

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def reset_joints_uniform(
    env: EnvView,
    env_ids: torch.Tensor,
    position_range: tuple[float, float] = (0.0, 0.0),
    velocity_range: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Add uniform offsets to the staged joint positions and velocities of the rows being reset,
    keeping positions inside the joint limits."""
    robot = env.robot
    j = robot.num_joints
    rows = env_ids.shape[0]
    qpos = env.reset_staging.qpos[:, robot.qpos_slice]
    qvel = env.reset_staging.qvel[:, robot.qvel_slice]
    lo_p, hi_p = position_range
    lo_v, hi_v = velocity_range
    noisy = qpos + lo_p + (hi_p - lo_p) * torch.rand(rows, j, device=env.device)
    qpos.copy_(clamp_to(noisy, robot.joint_limits[:, 0], robot.joint_limits[:, 1]))
    qvel.add_(lo_v + (hi_v - lo_v) * torch.rand(rows, j, device=env.device))


class PushRoot:
    """Interval event: add a random root velocity in the rows of ``mask``.

    Args:
      velocity_range: six ``[low, high]`` pairs for the world-frame linear (x, y, z, m/s) and
        angular (roll, pitch, yaw rates, rad/s) velocity change, drawn uniformly per row.
    """

    def __init__(self, env: EnvView, velocity_range: list[list[float]]) -> None:
        self.low, self.span = low_and_span(velocity_range, 6, "push velocity_range", env.device)

    def __call__(self, env: EnvView, mask: torch.Tensor) -> None:
        delta = self.low + self.span * torch.rand(env.num_envs, 6, device=env.device)
        delta = torch.where(mask[:, None], delta, torch.zeros_like(delta))
        robot = env.robot
        robot.root_lin_vel_w.add_(delta[:, :3])
        # The free joint's angular velocity is in the root frame.
        robot.root_ang_vel_b.add_(quat_apply_inverse(robot.root_quat_w, delta[:, 3:]))


def randomize_geom_friction(
    env: EnvView, env_ids: torch.Tensor, geom_ids: torch.Tensor, friction_range: list[float]
) -> None:
    """Draw the sliding friction of ``geom_names`` per world, uniform in ``friction_range``.

    Needs ``sim.batched_model_fields: [geom_friction]``; works as a ``startup`` or ``reset``
    event (``env_ids`` padded with ``num_envs``: padding rows change nothing).
    """
    friction = _batched_field(env, "geom_friction", "randomize_geom_friction")
    lo, hi = friction_range
    rows = friction[env_ids.clamp(max=env.num_envs - 1)].clone()
    rows[:, geom_ids, 0] = lo + (hi - lo) * torch.rand(rows.shape[0], geom_ids.shape[0], device=env.device)
    write_model_rows(friction, env_ids, rows)


class RandomizeRestitution:
    """Reset event: the bounciness of contacts, as a coefficient of restitution drawn per row.

    MuJoCo has no restitution coefficient: a contact is a spring-damper set by ``solref``
    ``[timeconst, dampratio]``, and a damped oscillator with damping ratio ``zeta < 1`` leaves a
    half-cycle with ``e = exp(-pi * zeta / sqrt(1 - zeta^2))`` of its speed. Each row's ``e`` is
    drawn in ``restitution_range`` and written as ``zeta = -ln e / sqrt(pi^2 + ln^2 e)`` (``e = 0``:
    ``zeta = 1``, critically damped, no bounce) to the ``dampratio`` of every geom of ``geom_names``
    (their time constants unchanged). A contact mixes its two geoms' ``solref``, so the default
    ``geom_names: [".*"]`` gives every contact exactly the drawn ratio. The rebound MuJoCo yields
    is near ``e``, not equal: the impedance (``solimp``) and the contact's other forces shape it too.

    Needs ``sim.batched_model_fields`` to include ``geom_solref``.

    Args:
      restitution_range: ``[low, high]`` within ``[0, 1)``.
    """

    def __init__(self, env: EnvView, geom_ids: torch.Tensor, restitution_range: list[float]) -> None:
        low, high = restitution_range
        if not 0.0 <= low <= high < 1.0:
            raise ValueError(f"restitution_range: [low, high] with 0 <= low <= high < 1, got {list(restitution_range)}")
        self.solref = _batched_field(env, "geom_solref", "RandomizeRestitution")
        self.geom_ids = geom_ids
        self.low, self.high = float(low), float(high)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        k = env_ids.shape[0]
        e = self.low + (self.high - self.low) * torch.rand(k, 1, device=env.device)
        log_e = torch.log(e.clamp(min=1e-30))
        zeta = torch.where(e > 0, -log_e / torch.sqrt(torch.pi**2 + log_e * log_e), 1.0)
        rows = self.solref[env_ids.clamp(max=env.num_envs - 1)].clone()
        rows[:, self.geom_ids, 1] = zeta.expand(k, self.geom_ids.shape[0])
        write_model_rows(self.solref, env_ids, rows)


def write_model_rows(field: torch.Tensor, env_ids: torch.Tensor, values: torch.Tensor) -> None:
    """``field[env_ids[i]] = values[i]`` for a per-world model field ``(num_envs, ...)``, static shape.

    ``env_ids`` ``(K,)`` is padded with ``num_envs`` (the env's reset id list); padded slots change
    nothing. Model fields have no dummy row, so padded slots are clamped onto row ``num_envs - 1``
    and write the value that row ends with (its new value if it is listed too, else its current
    one): duplicate writes then all agree, whichever lands last.
    """
    n = field.shape[0]
    per_slot = (-1,) + (1,) * (values.ndim - 1)
    is_last = (env_ids == n - 1).view(per_slot)
    last = torch.where(is_last.any(), torch.where(is_last, values, 0.0).sum(dim=0), field[n - 1])
    valid = (env_ids < n).view(per_slot)
    field.index_copy_(0, env_ids.clamp(max=n - 1), torch.where(valid, values, last))


def _batched_field(env: EnvView, name: str, term: str) -> torch.Tensor:
    field = env.sim.model_fields.get(name)
    if field is None:
        raise ValueError(f"{term} needs sim.batched_model_fields to include '{name}'")
    return field


class ResetRootUniform:
    """Reset event: offset the staged root pose and set the root velocity, uniformly per row.

    Args:
      pose_range: six ``[low, high]`` pairs: position offsets x, y, z (m) added to the default
        root position, and roll, pitch, yaw (rad) of a world-frame rotation applied on top of the
        default orientation (``q = q_offset ⊗ q_default``).
      velocity_range: six ``[low, high]`` pairs: world-frame linear (m/s) and angular (rad/s)
        root velocity; the angular part is stored in the root frame, as MuJoCo's free joint wants.
    """

    def __init__(self, env: EnvView, pose_range: list[list[float]], velocity_range: list[list[float]]) -> None:
        if not env.robot.has_root:
            raise ValueError("ResetRootUniform needs a robot with a free root joint")
        self.pose_low, self.pose_span = low_and_span(pose_range, 6, "pose_range", env.device)
        self.vel_low, self.vel_span = low_and_span(velocity_range, 6, "velocity_range", env.device)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        k = env_ids.shape[0]
        pose = self.pose_low + self.pose_span * torch.rand(k, 6, device=env.device)
        vel = self.vel_low + self.vel_span * torch.rand(k, 6, device=env.device)
        qpos, qvel = env.reset_staging.qpos, env.reset_staging.qvel
        qpos[:, 0:3].add_(pose[:, :3])
        offset = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
        quat = quat_mul(offset, qpos[:, 3:7])
        qpos[:, 3:7] = quat
        qvel[:, 0:3] = vel[:, :3]
        qvel[:, 3:6] = quat_apply_inverse(quat, vel[:, 3:])


class RandomizePdGains:
    """Reset event: scale each position actuator's stiffness kp and damping kd per row.

    MuJoCo's position actuator is ``force = kp * ctrl - kp * q - kd * qdot``: ``gainprm[0] = kp``,
    ``biasprm[1] = -kp``, ``biasprm[2] = -kd``. New gains are drawn around the model's nominal ones
    (so draws never compound over episodes), independently per row and actuator, and written for
    the reset rows only. Nothing derived needs recomputing: MJWarp reads these per world in its
    actuator kernels, and ``actuator_acc0`` (from ``set_const``) only enters through ``dampratio``,
    which these actuators do not use.

    Needs ``sim.batched_model_fields`` to include ``actuator_gainprm`` and ``actuator_biasprm``.

    Args:
      kp_range, kd_range: ``[low, high]`` scale factors.
      actuator_names: actuators to randomize (names or regular expressions).
    """

    def __init__(
        self,
        env: EnvView,
        kp_range: list[float],
        kd_range: list[float],
        actuator_names: list[str] | str = ".*",
    ) -> None:
        self.gain = _batched_field(env, "actuator_gainprm", "RandomizePdGains")
        self.bias = _batched_field(env, "actuator_biasprm", "RandomizePdGains")
        m = env.sim.mj_model
        ids = env.sim.actuator_ids([actuator_names] if isinstance(actuator_names, str) else list(actuator_names))
        for a in ids:
            position = (
                int(m.actuator_gaintype[a]) == int(mujoco.mjtGain.mjGAIN_FIXED)
                and int(m.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE)
                and m.actuator_gainprm[a, 0] == -m.actuator_biasprm[a, 1]
            )
            if not position:
                raise ValueError(f"RandomizePdGains: actuator '{env.sim.actuator_names[a]}' is not a position actuator")
        device = env.device
        self.ids = torch.tensor(ids, dtype=torch.int64, device=device)
        self.kp = torch.tensor(m.actuator_gainprm[ids, 0], dtype=torch.float32, device=device)
        self.kd = torch.tensor(-m.actuator_biasprm[ids, 2], dtype=torch.float32, device=device)
        self.kp_range, self.kd_range = tuple(kp_range), tuple(kd_range)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        k, a = env_ids.shape[0], self.ids.shape[0]
        kp = self.kp * _uniform(self.kp_range, (k, a), env.device)
        kd = self.kd * _uniform(self.kd_range, (k, a), env.device)
        rows = env_ids.clamp(max=env.num_envs - 1)
        gain, bias = self.gain[rows].clone(), self.bias[rows].clone()
        gain[:, self.ids, 0] = kp
        bias[:, self.ids, 1] = -kp
        bias[:, self.ids, 2] = -kd
        write_model_rows(self.gain, env_ids, gain)
        write_model_rows(self.bias, env_ids, bias)


class RandomizeBodyMass:
    """Reset event: scale the mass and rotational inertia of ``body_names`` per row.

    Inertia is scaled with the mass (same shape, denser material). MuJoCo and MJWarp normalize the
    centre-of-mass sums by the precomputed ``body_subtreemass``, so it is recomputed here for the
    reset rows (``mj_setConst``'s FIXED group does the same for one model). ``dof_invweight0`` and
    ``body_invweight0`` (the INERT0 group: they scale constraint softness) stay at the nominal
    model's values: recomputing them needs a mass-matrix solve at ``qpos0`` per world, and MJWarp's
    ``set_const`` runs over every world.

    Needs ``sim.batched_model_fields`` to include ``body_mass``, ``body_inertia`` and
    ``body_subtreemass``.

    Args:
      scale_range: ``[low, high]`` mass factor, drawn per row and body.
    """

    def __init__(self, env: EnvView, body_ids: torch.Tensor, scale_range: list[float]) -> None:
        term = "RandomizeBodyMass"
        self.mass = _batched_field(env, "body_mass", term)
        self.inertia = _batched_field(env, "body_inertia", term)
        self.subtree_mass = _batched_field(env, "body_subtreemass", term)
        m = env.sim.mj_model
        device = env.device
        self.body_ids = body_ids
        self.mass0 = torch.tensor(m.body_mass, dtype=torch.float32, device=device)
        self.inertia0 = torch.tensor(m.body_inertia, dtype=torch.float32, device=device)
        # in_subtree[j, b] = 1 where body b is body j or one of its ancestors.
        in_subtree = np.zeros((m.nbody, m.nbody), dtype=np.float32)
        for j in range(m.nbody):
            b = j
            while True:
                in_subtree[j, b] = 1.0
                if b == 0:
                    break
                b = int(m.body_parentid[b])
        self.in_subtree = torch.tensor(in_subtree, device=device)
        self.scale_range = tuple(scale_range)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        k = env_ids.shape[0]
        scale = torch.ones(k, self.mass0.shape[0], device=env.device)
        scale[:, self.body_ids] = _uniform(self.scale_range, (k, self.body_ids.shape[0]), env.device)
        mass = self.mass0 * scale
        write_model_rows(self.mass, env_ids, mass)
        write_model_rows(self.inertia, env_ids, self.inertia0 * scale[:, :, None])
        write_model_rows(self.subtree_mass, env_ids, mass @ self.in_subtree)


class RandomizeBodyCom:
    """Reset event: shift the centre of mass (``body_ipos``, body frame) of ``body_names`` per row.

    Nothing derived needs recomputing: MuJoCo and MJWarp place the centre of mass from
    ``body_ipos`` at every step. Needs ``sim.batched_model_fields`` to include ``body_ipos``.

    Args:
      offset_range: three ``[low, high]`` pairs (x, y, z, m), drawn per row and body.
    """

    def __init__(self, env: EnvView, body_ids: torch.Tensor, offset_range: list[list[float]]) -> None:
        self.ipos = _batched_field(env, "body_ipos", "RandomizeBodyCom")
        self.ipos0 = torch.tensor(env.sim.mj_model.body_ipos, dtype=torch.float32, device=env.device)
        self.body_ids = body_ids
        self.low, self.span = low_and_span(offset_range, 3, "offset_range", env.device)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        k, b = env_ids.shape[0], self.body_ids.shape[0]
        ipos = self.ipos0.expand(k, -1, -1).clone()
        ipos[:, self.body_ids] += self.low + self.span * torch.rand(k, b, 3, device=env.device)
        write_model_rows(self.ipos, env_ids, ipos)


def _uniform(bounds: Sequence[float], shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    lo, hi = bounds
    return lo + (hi - lo) * torch.rand(shape, device=device)
