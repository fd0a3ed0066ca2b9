"""Velocity-task termination terms: ``f(env, **params) -> (num_envs,)`` bool."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terminations as twins
from unilab_gpu.envs.mdp.observations import gravity_in_frame
from unilab_gpu.managers.term_spec import term

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


@term(deploy=twins.body_tilt_above)
def body_tilt_above(env: EnvView, body_ids: torch.Tensor, max_degrees: float) -> torch.Tensor:
    """Any of the bodies tilts more than ``max_degrees`` from upright (angle between its z axis and
    the world's: ``cos(tilt) = -g_z``, ``g`` world gravity in the body frame)."""
    gravity = gravity_in_frame(env.sim.state.body_quat_w[:, body_ids])
    return torch.any(-gravity[..., 2] < math.cos(math.radians(max_degrees)), dim=1)
