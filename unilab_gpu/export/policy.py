"""The deterministic actor of a trained agent as one self-contained ``nn.Module``.

The module maps the raw ``policy`` observation group ``(batch, obs_dim)`` to actions
``(batch, action_dim)`` in ``[-1, 1]``, exactly as ``agent.act(obs, deterministic=True)`` does:
the observation normaliser (SAC's running mean/var, FlashSAC's BatchNorm running statistics,
RSL-RL's empirical normaliser) is part of it, so an exported file needs no separate statistics.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from unilab_gpu.rl.flashsac import FlashSacAgent
from unilab_gpu.rl.sac import SacAgent


class _SacPolicy(nn.Module):
    def __init__(self, agent: SacAgent) -> None:
        super().__init__()
        self.norm = copy.deepcopy(agent.policy_norm)
        self.actor = copy.deepcopy(agent.actor)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor.mode(self.norm(obs))


class _FlashSacPolicy(nn.Module):
    def __init__(self, agent: FlashSacAgent) -> None:
        super().__init__()
        self.actor = copy.deepcopy(agent.actor)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.actor(obs, batch_stats=False)[0])  # running BatchNorm statistics


def deterministic_policy(agent) -> nn.Module:
    """A CPU copy of ``agent``'s deterministic policy in eval mode (the agent is not changed).

    ``agent`` is a ``SacAgent``, a ``FlashSacAgent`` or RSL-RL's ``PPO`` algorithm object.
    """
    if isinstance(agent, SacAgent):
        module: nn.Module = _SacPolicy(agent)
    elif isinstance(agent, FlashSacAgent):
        module = _FlashSacPolicy(agent)
    elif hasattr(agent, "get_policy"):  # RSL-RL: normaliser, MLP and deterministic output on a tensor
        module = agent.get_policy().as_jit()
    else:
        raise TypeError(f"no deterministic policy for {type(agent).__name__}")
    return module.to("cpu").eval().requires_grad_(False)
