"""Tanh-squashed diagonal Gaussian policy distribution (SAC).

An action is ``a = tanh(u)`` with ``u ~ N(mean, std^2)``. By the change of variables, its
density is ``log p(a) = log N(u; mean, std) - sum_i log(1 - tanh(u_i)^2)`` (Haarnoja et al.,
"Soft Actor-Critic: Off-Policy Maximum Entropy Deep RL with a Stochastic Actor", ICML 2018,
appendix C). The Jacobian term is evaluated as ``2 (log 2 - u - softplus(-2u))``, which equals
``log(1 - tanh(u)^2)`` but stays finite where ``tanh(u)`` rounds to +-1.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def bounded_log_std(raw: torch.Tensor, log_std_min: float, log_std_max: float) -> torch.Tensor:
    """Map an unbounded head output to ``[log_std_min, log_std_max]`` smoothly (tanh)."""
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)


def tanh_log_det_jacobian(pre_tanh: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log(1 - tanh(u)^2)``, numerically stable for large ``|u|``."""
    return 2.0 * (math.log(2.0) - pre_tanh - F.softplus(-2.0 * pre_tanh))


def sample_squashed_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised sample and its log-density.

    Args:
        mean, log_std: ``(batch, act_dim)`` parameters of the pre-tanh Gaussian.
        noise: ``(batch, act_dim)`` standard-normal draws.

    Returns:
        ``action`` in ``(-1, 1)``, ``(batch, act_dim)``, and ``log_prob`` ``(batch,)``.
    """
    pre_tanh = mean + log_std.exp() * noise
    gaussian = -0.5 * noise.square() - log_std - _LOG_SQRT_2PI
    log_prob = (gaussian - tanh_log_det_jacobian(pre_tanh)).sum(dim=-1)
    return torch.tanh(pre_tanh), log_prob


class SquashedGaussian(nn.Module):
    """Base of both agents' actors: ``forward(obs, **mode)`` returns the pre-tanh ``mean`` and the
    bounded ``log_std`` (each ``(batch, act_dim)``; :meth:`bounded` maps a raw head output into
    ``[log_std_min, log_std_max]``), and :meth:`sample` draws from the squashed Gaussian."""

    def __init__(self, log_std_min: float, log_std_max: float) -> None:
        super().__init__()
        self.log_std_min, self.log_std_max = log_std_min, log_std_max

    def bounded(self, raw_log_std: torch.Tensor) -> torch.Tensor:
        return bounded_log_std(raw_log_std, self.log_std_min, self.log_std_max)

    def sample(self, obs: torch.Tensor, **mode: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterised ``action`` ``(batch, act_dim)`` in (-1, 1) and ``log_prob`` ``(batch,)``;
        ``mode`` goes to ``forward`` (FlashSAC's ``batch_stats``)."""
        mean, log_std = self(obs, **mode)
        return sample_squashed_gaussian(mean, log_std, torch.randn_like(mean))
