"""Unit-norm projection of linear weight rows, applied after every optimizer step.

SimbaV2 (Lee et al., "Hyperspherical Normalization for Scalable Deep Reinforcement Learning",
ICML 2025) and FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) keep every row of a linear
layer's weight on the unit sphere: each output feature is a unit vector over the inputs, so the
weight norm cannot grow during training and effective learning rates stay constant. The
projection is a plain renormalisation after the gradient step, not a reparameterisation.
"""

from __future__ import annotations

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
