"""Termination terms: ``f(env, **params) -> (num_envs,)`` bool."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.deploy import terminations as twins
from unilab_gpu.managers.term_spec import term

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def time_out(env: EnvView) -> torch.Tensor:
    """The episode has lasted ``episode_length_s`` (configure with ``time_out: true``)."""
    return env.episode_length >= env.max_episode_length


@term(deploy=twins.root_height_below)
def root_height_below(env: EnvView, min_height: float) -> torch.Tensor:
    """The root fell below ``min_height`` metres above the ground under it (the world's z = 0 on a
    flat floor, the terrain's surface on a generated terrain)."""
    root = env.robot.root_pos_w
    height = root[:, 2] if env.terrain is None else root[:, 2] - env.terrain.heights_at(root[:, :2])
    return height < min_height
