"""FlashSAC's exploration noise: per-env Gaussian noise held for zeta-distributed durations
(:class:`HeldNoise`)."""

from __future__ import annotations

import torch
from torch import nn

# Temporally correlated exploration: Gaussian noise held for zeta-distributed durations.
#
# FlashSAC (Kim, Lee et al., arXiv:2604.04539, 2026) repeats each standard-normal noise draw of
# the policy for ``L`` consecutive steps, ``L`` drawn from a zeta (Zipf) distribution truncated to
# ``{1, ..., max_length}``: ``P(L = l) = l^-s / sum_{k <= max_length} k^-s``. Most holds are short,
# a heavy tail is long, which gives the coverage of temporally extended exploration without a
# fixed time scale (the idea follows "temporally extended eps-greedy", Dabney, Ostrovski and
# Barreto, ICLR 2021). Here every env holds its own noise and duration.
#
# Lengths are drawn by inverse CDF (``searchsorted`` of a uniform draw in the precomputed CDF),
# so sampling is static-shape and stays on the device.


def truncated_zeta_pmf(exponent: float, max_length: int) -> torch.Tensor:
    """``P(L = l)`` for ``l = 1 .. max_length``, shape ``(max_length,)``, float64."""
    if exponent <= 0:
        raise ValueError(f"exponent must be positive, got {exponent}")
    if max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    weights = torch.arange(1, max_length + 1, dtype=torch.float64) ** (-exponent)
    return weights / weights.sum()


class HeldNoise(nn.Module):
    """Per-env standard-normal noise ``(num_envs, act_dim)`` redrawn after zeta-distributed holds.

    Args:
        num_envs, act_dim: noise shape.
        exponent: zeta exponent ``s`` (FlashSAC uses 2).
        max_length: longest hold in steps (FlashSAC uses 16).
        generator: torch generator on ``device`` for reproducible draws (optional).
    """

    cdf: torch.Tensor  # (max_length,) cumulative hold-length probabilities
    noise: torch.Tensor  # (num_envs, act_dim) the noise held now
    remaining: torch.Tensor  # (num_envs,) int64 steps left in each row's hold

    def __init__(
        self,
        num_envs: int,
        act_dim: int,
        exponent: float = 2.0,
        max_length: int = 16,
        device: torch.device | str | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        self.generator = generator
        cdf = torch.cumsum(truncated_zeta_pmf(exponent, max_length), 0).to(torch.float32)
        # The last entry is 1 up to rounding; force it so every uniform draw maps to a length.
        cdf[-1] = 1.0
        self.register_buffer("cdf", cdf.to(device))
        self.register_buffer("noise", torch.zeros(num_envs, act_dim, device=device))
        self.register_buffer("remaining", torch.zeros(num_envs, dtype=torch.int64, device=device))

    def sample_lengths(self, count: int) -> torch.Tensor:
        """``count`` independent hold lengths in ``[1, max_length]``, int64."""
        uniform = torch.rand(count, device=self.cdf.device, generator=self.generator)
        return torch.searchsorted(self.cdf, uniform, right=True).clamp(max=self.cdf.numel() - 1) + 1

    @torch.no_grad()
    def step(self) -> torch.Tensor:
        """Advance one env step and return the noise to use now, ``(num_envs, act_dim)``.

        Rows whose hold ran out get a fresh normal vector and a fresh length. The returned
        tensor is the persistent buffer (overwritten by the next call).
        """
        redraw = self.remaining <= 0
        fresh = torch.randn(self.noise.shape, device=self.noise.device, generator=self.generator)
        self.noise.copy_(torch.where(redraw.unsqueeze(-1), fresh, self.noise))
        lengths = self.sample_lengths(self.remaining.numel())
        self.remaining.copy_(torch.where(redraw, lengths, self.remaining) - 1)
        return self.noise

    @torch.no_grad()
    def reset(self, done: torch.Tensor) -> None:
        """Force a redraw on the next :meth:`step` for rows where ``done`` ``(num_envs,)`` is set."""
        self.remaining.masked_fill_(done, 0)
