"""The support of the distributional critics, fixed or sized from the task's rewards.

C51 critics (:mod:`~unilab_gpu.rl.distributional`) clamp every target to ``[v_min, v_max]``: a
support narrower than the task's values biases them (every return past the end atom reads as the
end atom), a much wider one spends atoms on values never reached. A fixed ``[-20, 20]`` fits some
tasks and not others (an ``alive`` bonus of 0.2 per step alone is worth 20 at ``gamma = 0.99``).

``value_range: reward_scale`` sizes it from the rewards the critic is trained on, once, at the
first update. An n-step target is ``G + gamma^n V'``, so a value whose every n-step reward sum
stays within ``|G| <= g`` stays within ``g / (1 - gamma^n)``; the support is that bound for the
largest ``|G|`` of the first batch, times a margin for rewards not seen yet::

    v_max = -v_min = margin * max|G| / (1 - gamma^n)

The first batch is drawn after the warm-up, so its rewards are those of the warm-up's random
actions; penalties (action rate) are larger and task rewards smaller there than later, which the
margin and the symmetric range absorb. The support is written in place (same tensor, same shape),
so nothing compiled before sees another tensor, and it is saved with the agent's state.
SAC only: FlashSAC's reward scaler already fits its returns to its fixed support.
"""

from __future__ import annotations

import torch
from torch import nn


def value_bound(nstep_reward: torch.Tensor, gamma: float, n_step: int, margin: float) -> torch.Tensor:
    """Half-width of the support ``margin * max|G| / (1 - gamma^n)`` (0-d, on the device) from a
    batch of n-step reward sums ``(B,)``; at least ``1e-3`` so the support never collapses."""
    if not 0.0 <= gamma < 1.0:
        raise ValueError(f"value_range reward_scale needs gamma < 1 (a finite horizon), got {gamma}")
    bound = margin * nstep_reward.abs().max() / (1.0 - gamma**n_step)
    return bound.clamp_min(1e-3)


class ValueSupport(nn.Module):
    """Atom values ``(num_atoms,)`` as a buffer, so that a sized support is checkpointed."""

    atoms: torch.Tensor

    def __init__(self, atoms: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("atoms", atoms)

    @torch.no_grad()
    def resize_(self, bound: torch.Tensor) -> None:
        """Respace the atoms evenly over ``[-bound, bound]`` in place (no host sync)."""
        unit = torch.linspace(-1.0, 1.0, self.atoms.shape[0], device=self.atoms.device)
        self.atoms.copy_(unit * bound)
