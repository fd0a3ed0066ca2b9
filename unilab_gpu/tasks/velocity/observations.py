"""Velocity-task observation terms: ``f(env, **params) -> (num_envs, d)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terms as twins
from unilab_gpu.envs import mirror_map
from unilab_gpu.managers.term_spec import term
from unilab_gpu.utils.rotations import quat_apply_inverse

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


@term(mirror=mirror_map.fixed((1.0, -1.0, -1.0)), deploy=twins.velocity_command)  # (v_x, -v_y, -omega_z)
def velocity_command(env: EnvView, command_name: str = "twist") -> torch.Tensor:
    """The commanded ``[v_x, v_y, omega_z]`` (base frame), ``(num_envs, 3)``."""
    return env.command_manager.get(command_name).command


@term(mirror=mirror_map.gait_clock, deploy=twins.gait_phase)
def gait_phase(env: EnvView, command_name: str = "twist", phase_offsets: list[float] | None = None) -> torch.Tensor:
    """``[sin(phi + o_f), cos(phi + o_f)]`` per foot offset ``o_f``, foot after foot, ``(num_envs, 2 N)``.

    ``phi`` is the command's gait phase; the default (no offsets) observes it alone,
    ``[sin phi, cos phi]``, which suffices whenever the feet's offsets are fixed (the policy learns
    them); give ``FeetPhase``'s offsets to observe each foot's own clock.
    """
    phase = env.command_manager.get(command_name).phase
    # Offsets stay Python floats: no tensor is built inside the step (CUDA-graph capture).
    feet = [phase + float(o) for o in ([0.0] if phase_offsets is None else phase_offsets)]
    return torch.stack([f for foot in feet for f in (torch.sin(foot), torch.cos(foot))], dim=1)


@term(mirror=mirror_map.VECTOR, deploy=None)  # privileged: a robot estimates it at best
def root_lin_vel_b(env: EnvView) -> torch.Tensor:
    """Linear velocity of the root frame's origin in the root frame, ``(num_envs, 3)`` m/s."""
    robot = env.robot
    return quat_apply_inverse(robot.root_quat_w, robot.root_lin_vel_w)
