"""FlashSAC's reward scaler: rewards divided by the spread of the running discounted return, so
returns fit the critic's fixed support (:class:`RewardScaler`)."""

from __future__ import annotations

import torch
from torch import nn

from unilab_gpu.rl.running_moments import merge_moments_

# Reward scaling by the spread of the running discounted return (FlashSAC).
#
# FlashSAC (Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement Learning for
# High-Dimensional Robot Control", arXiv:2604.04539, 2026) divides rewards by a statistic of the
# per-env running discounted return, so that returns land inside the critic's fixed categorical
# support ``[-g_max, g_max]`` whatever the task's reward magnitude. The public reference scales by
#
#     denominator = max( sqrt(Var[G] + eps),  max|G| / g_max )
#
# where ``G_t = gamma * G_{t-1} + r_t`` per env, ``Var[G]`` is the variance of every ``G`` value
# seen so far (all envs, all steps; parallel moment merge of Chan et al. 1979) and ``max|G|`` is
# the largest magnitude seen. The second term keeps the largest observed return within
# ``g_max`` after scaling. Set ``g_max=None`` for the plain variance rule.
#
# One deliberate difference from the reference: ``G`` restarts *after* an episode's last reward
# (``G_t = gamma * G_{t-1} * (1 - done_{t-1}) + r_t``), so the final reward of an episode is
# accumulated into that episode's return rather than into the next one's.
#
# All state lives on the device; :meth:`update` and :meth:`scale` never sync with the host.
# Rewards are stored raw in replay and scaled at update time with the current statistics.


class RewardScaler(nn.Module):
    """Running-return reward scaler; state is a set of buffers, so ``state_dict`` covers it.

    Args:
        num_envs: number of parallel environments (one running return each).
        gamma: discount of the running return (the agent's gamma).
        g_max: bound on the scaled return (critic support half-width), or ``None``.
        eps: added to the variance before the square root.
    """

    running_return: torch.Tensor  # (num_envs,) discounted return of each env's episode so far
    mean: torch.Tensor  # () float64 moments of every running return seen
    var: torch.Tensor
    count: torch.Tensor
    abs_max: torch.Tensor  # () largest |running return| seen
    _pending_reset: torch.Tensor  # (num_envs,) 1 where the last step ended the episode

    def __init__(
        self,
        num_envs: int,
        gamma: float,
        g_max: float | None = 5.0,
        eps: float = 1e-8,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if g_max is not None and g_max <= 0:
            raise ValueError(f"g_max must be positive or None, got {g_max}")
        self.gamma = gamma
        self.g_max = g_max
        self.eps = eps
        self.register_buffer("running_return", torch.zeros(num_envs, device=device))
        # Moments in float64: the count reaches 1e9+ in long runs, where float32 stops moving.
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones((), dtype=torch.float64, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64, device=device))
        self.register_buffer("abs_max", torch.zeros((), device=device))
        self.register_buffer("_pending_reset", torch.zeros(num_envs, device=device))

    @torch.no_grad()
    def update(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Fold one env step into the statistics.

        Args:
            reward: ``(num_envs,)`` raw rewards of this step.
            terminated, truncated: ``(num_envs,)`` bool episode ends of this step.
        """
        if reward.shape != self.running_return.shape:
            raise ValueError(f"reward must have shape {tuple(self.running_return.shape)}, got {tuple(reward.shape)}")
        running = self.running_return * (1.0 - self._pending_reset) * self.gamma + reward
        self.running_return.copy_(running)
        self._pending_reset.copy_((terminated | truncated).to(self._pending_reset.dtype))

        merge_moments_(self.mean, self.var, self.count, running.to(torch.float64))
        self.abs_max.copy_(torch.maximum(self.abs_max, running.abs().max()))

    def scale(self) -> torch.Tensor:
        """Current multiplicative reward scale, a 0-d float32 device tensor."""
        denominator = torch.sqrt(self.var + self.eps).to(torch.float32)
        if self.g_max is not None:
            denominator = torch.maximum(denominator, self.abs_max / self.g_max)
        return 1.0 / denominator
