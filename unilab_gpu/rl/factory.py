"""Build an agent from an ``algo`` config mapping (a ``configs/algo/*.yaml`` file)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from unilab_gpu.rl.agent import OffPolicyAgent
from unilab_gpu.rl.config import FlashSacConfig, OffPolicyConfig, SacConfig, config_from_dict
from unilab_gpu.rl.flashsac import FlashSacAgent
from unilab_gpu.rl.sac import SacAgent

ALGORITHMS: dict[str, type[OffPolicyConfig]] = {"sac": SacConfig, "flashsac": FlashSacConfig}
"""Algorithm name (the ``name`` key of an algo config) -> its config class."""


def algo_config(values: Mapping[str, Any], compile: bool = True) -> OffPolicyConfig:
    """Typed config from a mapping with a ``name`` key; ``compile=False`` turns compilation off
    whatever the mapping says (the mapping's ``compile`` can only turn it off, not on)."""
    name = values.get("name")
    if name not in ALGORITHMS:
        raise ValueError(f"algo.name must be one of {sorted(ALGORITHMS)}, got {name!r}")
    cfg = config_from_dict(ALGORITHMS[name], values)
    return dataclasses.replace(cfg, compile=cfg.compile and compile)


def make_agent(
    cfg: OffPolicyConfig,
    observation_dims: Mapping[str, int],
    act_dim: int,
    num_envs: int,
    device: torch.device | str,
) -> OffPolicyAgent:
    """The agent for ``cfg``; the actor reads the ``policy`` group and the critics the
    ``critic`` group, or ``policy`` when the task has no ``critic`` group."""
    if "policy" not in observation_dims:
        raise ValueError(f"the env needs a 'policy' observation group, got groups {sorted(observation_dims)}")
    policy_dim = observation_dims["policy"]
    critic_dim = observation_dims.get("critic", policy_dim)
    if isinstance(cfg, FlashSacConfig):
        return FlashSacAgent(cfg, policy_dim, critic_dim, act_dim, num_envs=num_envs, device=device)
    if isinstance(cfg, SacConfig):
        return SacAgent(cfg, policy_dim, critic_dim, act_dim, device=device)
    raise TypeError(f"no agent for config type {type(cfg).__name__}")
