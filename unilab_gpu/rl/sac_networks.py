"""FastSAC-style networks: LayerNorm + SiLU MLPs, squashed-Gaussian actor, twin C51 critics.

Following FastTD3/FastSAC (Seo et al., "FastTD3: Simple, Fast, and Capable Reinforcement
Learning for Humanoid Control", 2025, and its SAC variant), each hidden layer is
``Linear -> LayerNorm -> SiLU`` and the critics are distributional (C51, Bellemare et al. 2017)
over ``num_atoms`` atoms. The two critics of clipped double-Q (Fujimoto et al. 2018) take the
critic observation group, which may carry privileged state the actor does not see.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from unilab_gpu.rl.squashed_gaussian import bounded_log_std, sample_squashed_gaussian


def layer_norm_mlp(in_dim: int, hidden_dims: Sequence[int], out_dim: int) -> nn.Sequential:
    """``[Linear -> LayerNorm -> SiLU] * len(hidden_dims) -> Linear``."""
    if not hidden_dims:
        raise ValueError("hidden_dims must name at least one hidden layer")
    layers: list[nn.Module] = []
    width = in_dim
    for hidden in hidden_dims:
        layers += [nn.Linear(width, hidden), nn.LayerNorm(hidden), nn.SiLU()]
        width = hidden
    layers.append(nn.Linear(width, out_dim))
    return nn.Sequential(*layers)


class SquashedGaussianActor(nn.Module):
    """Policy ``pi(a | o)``: ``tanh`` of a diagonal Gaussian whose parameters an MLP predicts."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_dims: Sequence[int],
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        self.net = layer_norm_mlp(obs_dim, hidden_dims, 2 * act_dim)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(batch, obs_dim)`` -> pre-tanh ``mean`` and ``log_std``, each ``(batch, act_dim)``."""
        mean, raw_log_std = self.net(obs).chunk(2, dim=-1)
        return mean, bounded_log_std(raw_log_std, self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised ``action`` ``(batch, act_dim)`` in (-1, 1) and ``log_prob`` ``(batch,)``."""
        mean, log_std = self(obs)
        return sample_squashed_gaussian(mean, log_std, torch.randn_like(mean))

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action ``tanh(mean)`` ``(batch, act_dim)``."""
        return torch.tanh(self(obs)[0])


class TwinCategoricalCritic(nn.Module):
    """Two independent C51 critics ``Z_i(o, a)``; logits ``(2, batch, num_atoms)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_dims: Sequence[int], num_atoms: int) -> None:
        super().__init__()
        self.members = nn.ModuleList([layer_norm_mlp(obs_dim + act_dim, hidden_dims, num_atoms) for _ in range(2)])

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([member(x) for member in self.members])
