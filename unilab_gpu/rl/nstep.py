"""n-step returns over a window of consecutive steps with episode ends.

For a window of ``n`` steps starting at ``t`` the return sums rewards up to and including the
first step whose transition ended the episode (terminated or truncated), and none after it:

    m      = number of rewards summed (1..n): index of the first ended step + 1, else n
    G      = sum_{k < m} gamma^k r_{t+k}
    disc   = gamma^m * (1 - terminated_{t+m-1})
    target = G + disc * V(s')   with s' the observation after step t+m-1

A truncated episode (time limit) still bootstraps from its true final observation, a terminated
one does not (Sutton and Barto, "Reinforcement Learning: An Introduction", 2nd ed., ch. 7;
Pardo et al., "Time Limits in Reinforcement Learning", ICML 2018, for the truncation rule).
The computation is masks and cumulative products only, so shapes never depend on the data.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class NStepReturn(NamedTuple):
    """Output of :func:`nstep_return`; every field has shape ``(batch,)``."""

    reward: torch.Tensor
    """Discounted reward sum ``G`` (float)."""
    discount: torch.Tensor
    """Bootstrap factor ``gamma^m * (1 - terminated)`` (float)."""
    last: torch.Tensor
    """Window index ``m - 1`` of the last step summed (int64); its successor obs is ``s'``."""
    ended: torch.Tensor
    """Whether the window stops at an episode end (bool); ``s'`` is then that step's final obs."""


def nstep_return(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, gamma: float) -> NStepReturn:
    """n-step return of each column of a ``(n, batch)`` window (time first).

    Args:
        reward: ``(n, batch)`` float rewards of steps ``t .. t+n-1``.
        terminated: ``(n, batch)`` bool, the step's transition reached a terminal state.
        truncated: ``(n, batch)`` bool, the step's transition hit a time limit.
        gamma: per-step discount.
    """
    if reward.dim() != 2 or terminated.shape != reward.shape or truncated.shape != reward.shape:
        raise ValueError(
            "reward, terminated and truncated must all have shape (n, batch); got "
            f"{tuple(reward.shape)}, {tuple(terminated.shape)}, {tuple(truncated.shape)}"
        )
    n = reward.shape[0]
    ended = (terminated | truncated).to(reward.dtype)
    # alive[k] = 1 while no step before k ended the episode: it gates which rewards are summed.
    not_ended_before = torch.cumprod(1.0 - ended, dim=0)
    alive = torch.cat([torch.ones_like(ended[:1]), not_ended_before[:-1]], dim=0)
    powers = gamma ** torch.arange(n, device=reward.device, dtype=reward.dtype)
    total = (alive * powers.unsqueeze(-1) * reward).sum(dim=0)
    count = alive.sum(dim=0)
    last = (count - 1).long()
    terminated_last = terminated.gather(0, last.unsqueeze(0)).squeeze(0)
    ended_last = ended.gather(0, last.unsqueeze(0)).squeeze(0) > 0
    discount = torch.pow(gamma, count) * (~terminated_last).to(reward.dtype)
    return NStepReturn(reward=total, discount=discount, last=last, ended=ended_last)
