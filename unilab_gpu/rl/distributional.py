"""Categorical return distributions (C51).

The critic predicts a categorical distribution over a fixed, evenly spaced support
``z_j = v_min + j * dz``. The Bellman target ``r + discount * z`` falls between atoms, so it is
projected back onto the support by splitting each atom's probability between its two
neighbours in proportion to distance (Bellemare, Dabney and Munos, "A Distributional Perspective
on Reinforcement Learning", ICML 2017, Algorithm 1).

All functions are batched and static-shape (gather/scatter only), so they trace into a single
``torch.compile(fullgraph=True)`` graph.
"""

from __future__ import annotations

import torch


def categorical_support(
    num_atoms: int, v_min: float, v_max: float, device: torch.device | str | None = None
) -> torch.Tensor:
    """Evenly spaced atom values ``(num_atoms,)`` from ``v_min`` to ``v_max`` inclusive."""
    if num_atoms < 2:
        raise ValueError(f"num_atoms must be >= 2, got {num_atoms}")
    if not v_max > v_min:
        raise ValueError(f"v_max must be greater than v_min, got v_min={v_min}, v_max={v_max}")
    return torch.linspace(v_min, v_max, num_atoms, device=device, dtype=torch.float32)


def project_categorical(
    next_probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """Project the distribution of ``reward + discount * Z`` onto ``support``.

    Args:
        next_probs: probabilities of ``Z`` on ``support``, ``(batch, num_atoms)``.
        reward: ``(batch,)``.
        discount: ``(batch,)``; 0 at terminal transitions puts all mass next to ``reward``.
        support: atom values ``(num_atoms,)``, evenly spaced.

    Returns:
        Projected probabilities ``(batch, num_atoms)``; each row sums to the row sum of
        ``next_probs``. Values outside ``[v_min, v_max]`` are clamped to the end atoms, +-inf
        too; a NaN target goes to the first atom. The scatter indices stay in range whatever
        the input: an out-of-range index is a device-side assert on CUDA, and the trainer stops
        on the NaN losses at its next logging point instead.
    """
    num_atoms = support.shape[0]
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    target = reward.unsqueeze(-1) + discount.unsqueeze(-1) * support
    position = ((target - v_min) / delta).nan_to_num(nan=0.0).clamp(0, num_atoms - 1)
    # Take the lower neighbour in [0, num_atoms - 2] so the upper one always exists; a target
    # exactly on an atom then gets weight 1 on one side and 0 on the other, which avoids the
    # lower == upper special case of the original algorithm.
    lower = position.floor().clamp(0, num_atoms - 2)
    upper_weight = position - lower
    lower_index = lower.long()
    projected = torch.zeros_like(next_probs)
    projected.scatter_add_(-1, lower_index, next_probs * (1.0 - upper_weight))
    projected.scatter_add_(-1, lower_index + 1, next_probs * upper_weight)
    return projected


def categorical_cross_entropy(logits: torch.Tensor, target_probs: torch.Tensor) -> torch.Tensor:
    """``-sum_j target_j * log softmax(logits)_j`` over the last axis, shape ``logits.shape[:-1]``."""
    return -(target_probs * torch.log_softmax(logits, dim=-1)).sum(dim=-1)


def expected_value(probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Mean of a categorical distribution ``(..., num_atoms)`` -> ``(...)``."""
    return (probs * support).sum(dim=-1)
