"""Norm constraints of FlashSAC's networks, re-imposed after every optimizer step.

SimbaV2 (Lee et al., "Hyperspherical Normalization for Scalable Deep Reinforcement Learning",
ICML 2025) and FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) keep the parameters that
set the scale of the features at a fixed norm, so that no norm can grow during training and
effective learning rates stay constant:

- every row of a linear layer's weight is a unit vector over the inputs
  (:func:`project_rows_to_unit_norm_`);
- the affine parameters of every normalisation layer, ``(gamma, beta)`` of a BatchNorm and
  ``gamma`` of an RMSNorm, together have the norm ``sqrt(dim)`` they have at initialisation
  (``gamma = 1``, ``beta = 0``) (:func:`rescale_to_fixed_norm_`). This is the authors'
  ``normalize_parameters`` of ``UnitBatchNorm``/``UnitRMSNorm`` (github.com/leeyngdo/FlashSAC,
  ``flash_rl/agents/flashSAC/layer.py``).

Both are plain rescalings after the gradient step, not reparameterisations.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def linear_weights(module: nn.Module) -> list[nn.Parameter]:
    """Weights ``(out, in)`` of every ``nn.Linear`` inside ``module``, in module order."""
    return [m.weight for m in module.modules() if isinstance(m, nn.Linear)]


@torch.no_grad()
def project_rows_to_unit_norm_(weights: list[torch.Tensor], eps: float = 1e-8) -> None:
    """Rescale each row (last axis) of each weight to unit L2 norm, in place."""
    for weight in weights:
        weight.div_(torch.linalg.vector_norm(weight, dim=-1, keepdim=True).clamp_min(eps))


@torch.no_grad()
def rescale_to_fixed_norm_(groups: list[tuple[torch.Tensor, ...]], eps: float = 1e-8) -> None:
    """Rescale each group of ``(dim,)`` vectors by one common factor, in place, so that the
    group's joint L2 norm ``sqrt(sum_i |v_i|^2)`` is ``sqrt(dim)``.

    A group is the affine parameters of one normalisation layer, e.g. ``(gamma, beta)``; one
    factor per group keeps the direction of the concatenated vector.
    """
    for group in groups:
        square_sum = sum(v.square().sum() for v in group)
        factor = math.sqrt(group[0].shape[-1]) * torch.rsqrt(square_sum + eps)
        for v in group:
            v.mul_(factor)
