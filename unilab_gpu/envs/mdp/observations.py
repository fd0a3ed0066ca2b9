"""Observation terms: ``f(env, **params) -> (num_envs, d)``, each with its mirror rule and numpy twin
(``@term``, :mod:`unilab_gpu.managers.term_spec`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terms as twins
from unilab_gpu.envs import mirror_map
from unilab_gpu.managers.term_spec import term
from unilab_gpu.terrain.terrain import ground_height

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


@term(mirror=mirror_map.joints_about_default, deploy=twins.joint_pos_rel)
def joint_pos_rel(env: EnvView) -> torch.Tensor:
    """Joint positions minus the default pose, ``(num_envs, num_joints)``."""
    return env.robot.joint_pos - env.robot.default_joint_pos


@term(mirror=mirror_map.biased_joints_about_default, deploy=twins.biased_joint_pos_rel)
class BiasedJointPosRel:
    """Joint positions minus the default pose as miscalibrated encoders report them,
    ``(num_envs, num_joints)``: ``joint_pos_rel`` plus a constant bias per row and joint, drawn
    uniformly in ``bias_range`` (rad) at every episode start. A policy trained on it deploys
    reading ``joint_pos_rel`` (the robot's encoders bring their own bias).

    Args:
      bias_range: ``[low, high]`` rad.
    """

    def __init__(self, env: EnvView, bias_range: list[float]) -> None:
        self.low, self.high = float(bias_range[0]), float(bias_range[1])
        self.bias = torch.full((env.num_envs + 1, env.robot.num_joints), self.low, device=env.device)
        """``(num_envs + 1, num_joints)``: each row's bias (the extra row takes padded reset ids)."""

    def __call__(self, env: EnvView) -> torch.Tensor:
        return joint_pos_rel(env) + self.bias[:-1]

    def reset(self, env_ids: torch.Tensor) -> None:
        if self.high > self.low:  # a fixed bias draws nothing, so the env's other draws stay as they were
            draw = torch.rand(env_ids.shape[0], self.bias.shape[1], device=env_ids.device)
            self.bias.index_copy_(0, env_ids, self.low + (self.high - self.low) * draw)


@term(mirror=mirror_map.joints, deploy=twins.joint_vel)
def joint_vel(env: EnvView) -> torch.Tensor:
    """Joint velocities, ``(num_envs, num_joints)``."""
    return env.robot.joint_vel


@term(mirror=mirror_map.joint_cos_sin, deploy=None)  # critic only (no runtime reader yet)
def joint_pos_cos_sin(env: EnvView) -> torch.Tensor:
    """``[cos q, sin q]`` of every joint, ``(num_envs, 2 * num_joints)`` (continuous in q)."""
    q = env.robot.joint_pos
    return torch.cat([torch.cos(q), torch.sin(q)], dim=1)


@term(mirror=mirror_map.action, deploy=twins.last_action)
def last_action(env: EnvView) -> torch.Tensor:
    """The action applied this step, ``(num_envs, action_dim)``."""
    return env.action_manager.last_action


@term(mirror=mirror_map.imu_sensors, deploy=twins.sensor)
def sensor(env: EnvView, sensor_cols: torch.Tensor) -> torch.Tensor:
    """Raw sensor values (``sensor_names`` in the config), ``(num_envs, len(cols))``."""
    return env.sim.state.sensordata[:, sensor_cols]


def gravity_in_frame(quat: torch.Tensor) -> torch.Tensor:
    """World ``[0, 0, -1]`` seen from frames with orientation ``quat`` (wxyz), ``(..., 3)``.

    Closed form (minus the third row of the rotation matrix), so the step builds no host-side
    constant tensor: a host-to-device copy cannot be recorded in a CUDA graph.
    """
    w, x, y, z = quat.unbind(-1)
    return -torch.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], dim=-1)


@term(mirror=mirror_map.VECTOR, deploy=twins.projected_gravity)
def projected_gravity(env: EnvView) -> torch.Tensor:
    """World gravity direction in the root frame, ``(num_envs, 3)``; ``[0, 0, -1]`` upright."""
    return gravity_in_frame(env.robot.root_quat_w)


@term(mirror=mirror_map.fixed((1.0,)), deploy=None)  # privileged: no robot measures it
def root_height(env: EnvView) -> torch.Tensor:
    """Root height above the world origin, ``(num_envs, 1)``."""
    return env.robot.root_pos_w[:, 2:3]


@term(mirror=mirror_map.height_scan, deploy=twins.height_scan)
class HeightScan:
    """The ground around the root, ``(num_envs, rows * cols)``: a grid of vertical rays in the
    root's heading (yaw-only) frame, each returning ``ground height - root height + offset`` (m).

    The grid is ``size = [length, width]`` metres (x forward, y left) with points every
    ``resolution`` metres, centred on the root: ``rows = floor(width / resolution) + 1`` lines of
    ``cols = floor(length / resolution) + 1`` points, ordered with x fastest (back to front, then
    right to left). Rays hit only the terrain (``env.terrain.heights_at``: MuJoCo's heightfield
    surface, equal to ``mj_ray`` against the terrain geom), never the robot; a task without a
    terrain section stands on the scene's floor at z = 0, which every ray then reads. With
    ``offset`` the root's standing height, flat ground reads 0 under a standing robot.

    Args:
      size: ``[length, width]`` of the grid (m), each >= 0.
      resolution: spacing of the points (m), > 0.
      offset: added to every value (m).
    """

    def __init__(
        self,
        env: EnvView,
        size: list[float] | tuple[float, float] = (1.6, 1.0),
        resolution: float = 0.1,
        offset: float = 0.0,
    ) -> None:
        if not (isinstance(resolution, (int, float)) and resolution > 0):
            raise ValueError(f"resolution: the spacing of the scan's rays must be > 0 m, got {resolution!r}")
        if len(size) != 2 or not all(isinstance(v, (int, float)) and v >= 0 for v in size):
            raise ValueError(f"size: [length, width] of the scan in metres, each >= 0, got {list(size)!r}")
        # A tiny epsilon keeps a size that is a whole multiple of the resolution from losing its
        # last line to float rounding (1.6 / 0.1 = 15.999...).
        cols = int(size[0] / resolution + 1e-6) + 1
        rows = int(size[1] / resolution + 1e-6) + 1
        x = (torch.arange(cols, dtype=torch.float32) - (cols - 1) / 2) * resolution
        y = (torch.arange(rows, dtype=torch.float32) - (rows - 1) / 2) * resolution
        gy, gx = torch.meshgrid(y, x, indexing="ij")
        self.points_b = torch.stack([gx.reshape(-1), gy.reshape(-1)], dim=1).to(env.device)
        """``(rows * cols, 2)`` ray positions in the heading frame (m)."""
        self.offset = float(offset)

    def __call__(self, env: EnvView) -> torch.Tensor:
        root = env.robot.root_pos_w
        w, z = env.robot.root_quat_w[:, 0], env.robot.root_quat_w[:, 3]
        x, y = env.robot.root_quat_w[:, 1], env.robot.root_quat_w[:, 2]
        yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
        cos, sin = torch.cos(yaw)[:, None], torch.sin(yaw)[:, None]
        px, py = self.points_b[:, 0], self.points_b[:, 1]
        world = torch.stack([root[:, 0:1] + cos * px - sin * py, root[:, 1:2] + sin * px + cos * py], dim=-1)
        return ground_height(env.terrain, world) - root[:, 2:3] + self.offset
