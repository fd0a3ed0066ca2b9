"""The norm constraints of FlashSAC's networks, re-imposed after every optimizer step: unit-norm
linear weight rows and fixed-norm normalisation affines (:func:`constrain_norms`)."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import torch
from torch import nn

from unilab_gpu.rl.flashsac_networks import BatchNorm, FlashActor, TwinFlashCritic

# Norm constraints of FlashSAC's networks, re-imposed after every optimizer step.
#
# SimbaV2 (Lee et al., "Hyperspherical Normalization for Scalable Deep Reinforcement Learning",
# ICML 2025) and FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) keep the parameters that
# set the scale of the features at a fixed norm, so that no norm can grow during training and
# effective learning rates stay constant:
#
# - every row of a linear layer's weight is a unit vector over the inputs
#   (:func:`project_rows_to_unit_norm_`);
# - the affine parameters of every normalisation layer, ``(gamma, beta)`` of a BatchNorm and
#   ``gamma`` of an RMSNorm, together have the norm ``sqrt(dim)`` they have at initialisation
#   (``gamma = 1``, ``beta = 0``) (:func:`rescale_to_fixed_norm_`). This is the authors'
#   ``normalize_parameters`` of ``UnitBatchNorm``/``UnitRMSNorm`` (github.com/leeyngdo/FlashSAC,
#   ``flash_rl/agents/flashSAC/layer.py``).
#
# Both are plain rescalings after the gradient step, not reparameterisations.


def linear_weights(module: nn.Module) -> list[torch.Tensor]:
    """Weights ``(out, in)`` of every ``nn.Linear`` inside ``module``, in module order."""
    return [m.weight for m in module.modules() if isinstance(m, nn.Linear)]


@torch.no_grad()
def project_rows_to_unit_norm_(weights: Sequence[torch.Tensor], eps: float = 1e-8) -> None:
    """Rescale each row (last axis) of each weight to unit L2 norm, in place."""
    for weight in weights:
        weight.div_(torch.linalg.vector_norm(weight, dim=-1, keepdim=True).clamp_min(eps))


@torch.no_grad()
def rescale_to_fixed_norm_(groups: Sequence[tuple[torch.Tensor, ...]], eps: float = 1e-8) -> None:
    """Rescale each group of ``(dim,)`` vectors by one common factor, in place, so that the
    group's joint L2 norm ``sqrt(sum_i |v_i|^2)`` is ``sqrt(dim)``.

    A group is the affine parameters of one normalisation layer, e.g. ``(gamma, beta)``; one
    factor per group keeps the direction of the concatenated vector.
    """
    for group in groups:
        square_sum: torch.Tensor = functools.reduce(operator.add, (v.square().sum() for v in group))
        factor = math.sqrt(group[0].shape[-1]) * torch.rsqrt(square_sum + eps)
        for v in group:
            v.mul_(factor)


def unit_norm_weights(network: FlashActor | TwinFlashCritic) -> list[torch.Tensor]:
    """Linear weights ``(out, in)`` kept at unit-norm rows: the trunks' and the critic heads',
    not the actor heads' (see :class:`FlashActor`)."""
    if isinstance(network, FlashActor):
        return linear_weights(network.trunk)
    return linear_weights(network)


def normalization_affines(network: nn.Module) -> list[tuple[torch.Tensor, ...]]:
    """Affine parameters kept at a fixed norm: ``(gamma, beta)`` of each BatchNorm and
    ``(gamma,)`` of each RMSNorm in ``network``, in module order."""
    groups: list[tuple[torch.Tensor, ...]] = []
    for module in network.modules():
        if isinstance(module, BatchNorm):
            groups.append((module.weight, module.bias))
        elif isinstance(module, nn.RMSNorm):
            groups.append((module.weight,))
    return groups


def constrain_norms(weights: Sequence[torch.Tensor], affines: Sequence[tuple[torch.Tensor, ...]]) -> None:
    """Re-impose both constraints: ``weights``' rows to unit norm, each group of ``affines`` to
    its initial norm (:func:`unit_norm_weights`, :func:`normalization_affines` list them)."""
    project_rows_to_unit_norm_(weights)
    rescale_to_fixed_norm_(affines)
