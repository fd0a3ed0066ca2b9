"""Pendulum-specific terms (Gymnasium Pendulum-v1's cost, on the project's MJWarp stack)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def angle_from_upright_sq(env: EnvView) -> torch.Tensor:
    """Squared hinge angle wrapped to ``[-pi, pi)`` (0 upright), ``(num_envs,)``."""
    angle = env.robot.joint_pos[:, 0]
    wrapped = torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi
    return torch.square(wrapped)
