"""The deterministic actor of a trained agent as one self-contained ``nn.Module``.

The module maps the raw ``policy`` observation group ``(batch, obs_dim)`` to actions
``(batch, action_dim)`` in ``[-1, 1]``, exactly as ``agent.act(obs, deterministic=True)`` does:
the observation normaliser (SAC's running mean/var, FlashSAC's BatchNorm running statistics,
RSL-RL's empirical normaliser) is part of it, so an exported file needs no separate statistics.
Each agent builds its own (``deterministic_policy()``); export asks it.
"""

from __future__ import annotations

from typing import Protocol

from torch import nn


class PolicySource(Protocol):
    """An agent that can give its deterministic policy (``SacAgent``, ``FlashSacAgent``, ``PpoAgent``)."""

    def deterministic_policy(self) -> nn.Module: ...


def deterministic_policy(agent: PolicySource) -> nn.Module:
    """A CPU copy of ``agent``'s deterministic policy in eval mode (the agent is not changed)."""
    if not callable(getattr(agent, "deterministic_policy", None)):
        raise TypeError(f"no deterministic policy for {type(agent).__name__}")
    return agent.deterministic_policy().to("cpu").eval().requires_grad_(False)
