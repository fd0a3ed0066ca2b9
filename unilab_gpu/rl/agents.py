"""Build an agent from an ``algo`` config mapping (a ``configs/algo/*.yaml`` file), or from a
checkpoint as it was trained; the smallest agents of each algorithm for checks of the loop."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from unilab_gpu.rl.config import config_from_dict
from unilab_gpu.rl.flashsac import FlashSacAgent, FlashSacConfig
from unilab_gpu.rl.off_policy import OffPolicyAgent
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.sac import SacAgent, SacConfig

ALGORITHMS: dict[str, type[OffPolicyConfig]] = {"sac": SacConfig, "flashsac": FlashSacConfig}
"""Algorithm name (the ``name`` key of an algo config) -> its config class."""

TINY_CONFIGS: dict[str, dict[str, Any]] = {
    "sac": dict(name="sac", actor_hidden_dims=[16], critic_hidden_dims=[16], num_atoms=11, batch_size=16),
    "flashsac": dict(
        name="flashsac",
        actor_hidden_dim=8,
        critic_hidden_dim=8,
        actor_num_blocks=1,
        critic_num_blocks=1,
        num_atoms=11,
        batch_size=16,
        learning_rate_decay_steps=40,
        n_step=1,
    ),
}
"""The smallest agents of each algorithm, for checks that exercise the loop, not learning
(``unilab-doctor``'s training-loop audit, tests); pass to :func:`algo_config`."""


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
    compile_backend: str = "inductor",
) -> OffPolicyAgent:
    """The agent for ``cfg``; the actor reads the ``policy`` group and the critics the
    ``critic`` group, or ``policy`` when the task has no ``critic`` group. ``compile_backend``
    is ``torch.compile``'s where ``cfg.compile`` is set."""
    if "policy" not in observation_dims:
        raise ValueError(f"the env needs a 'policy' observation group, got groups {sorted(observation_dims)}")
    policy_dim = observation_dims["policy"]
    critic_dim = observation_dims.get("critic", policy_dim)
    if isinstance(cfg, FlashSacConfig):
        return FlashSacAgent(cfg, policy_dim, critic_dim, act_dim, num_envs, device, compile_backend)
    if isinstance(cfg, SacConfig):
        return SacAgent(cfg, policy_dim, critic_dim, act_dim, device, compile_backend)
    raise TypeError(f"no agent for config type {type(cfg).__name__}")


def agent_from_checkpoint(checkpoint: Mapping[str, Any], device: torch.device | str, compile: bool = False):
    """The agent of a loaded checkpoint (``load_checkpoint``), built as it was trained.

    FlashSAC's per-env state (reward scaler, noise) is sized for the training envs;
    deterministic actions accept any batch. A PPO checkpoint gives a
    :class:`~unilab_gpu.rl.ppo.PpoAgent` (needs the ``rsl`` extra).
    """
    if checkpoint["config"]["algo"].get("name") == "ppo":
        from unilab_gpu.rl.ppo import agent_from_checkpoint as ppo_agent

        return ppo_agent(checkpoint, device)
    cfg = algo_config(checkpoint["config"]["algo"], compile=compile)
    agent = make_agent(cfg, checkpoint["observation_dims"], checkpoint["action_dim"], checkpoint["num_envs"], device)
    agent.load_state_dict(checkpoint["trainer"]["agent"])
    return agent
