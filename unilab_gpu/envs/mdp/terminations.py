"""Termination terms: ``f(env, **params) -> (num_envs,)`` bool."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


def time_out(env: EnvView) -> torch.Tensor:
    """The episode has lasted ``episode_length_s`` (configure with ``time_out: true``)."""
    return env.episode_length >= env.max_episode_length


def root_height_below(env: EnvView, min_height: float) -> torch.Tensor:
    """The root fell below ``min_height`` metres."""
    return env.robot.root_pos_w[:, 2] < min_height
