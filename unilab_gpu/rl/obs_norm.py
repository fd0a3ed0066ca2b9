"""Running observation normalisation (per-feature mean and variance).

Statistics are merged batch by batch with the parallel algorithm of Chan, Golub and LeVeque
(1979), entirely on the device. Normalising inputs by running statistics is standard in
massively parallel off-policy RL (e.g. FastTD3, Seo et al. 2025).

The denominator is the standard deviation plus a floor, ``std + std_floor``, as in the
``EmpiricalNormalization`` of holosoma's FastSAC, FastTD3 and rsl_rl (``eps=1e-2``): a feature
that is (nearly) constant, such as a joint that never moves or a one-hot that rarely changes, is
amplified at most ``1 / std_floor`` times instead of pinned at the clip, which
``sqrt(var + 1e-8)`` (up to 10^4) does to any fluctuation of it.
"""

from __future__ import annotations

import torch
from torch import nn

from unilab_gpu.rl.running_moments import merge_moments_


class ObsNormalizer(nn.Module):
    """``(x - mean) / (sqrt(var) + std_floor)`` with running statistics over ``(batch, dim)`` inputs.

    Args:
        dim: feature size.
        std_floor: added to the standard deviation (the denominator is never below it).
        clip: normalised values are clipped to ``[-clip, clip]`` (``None`` disables).
        enabled: ``False`` makes the module the identity (no statistics kept up to date).
    """

    def __init__(
        self,
        dim: int,
        std_floor: float = 1e-2,
        clip: float | None = 10.0,
        enabled: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self.dim = dim
        if not std_floor > 0:
            raise ValueError(f"ObsNormalizer: std_floor must be > 0, got {std_floor!r}")
        self.std_floor = std_floor
        self.clip = clip
        self.enabled = enabled
        self.register_buffer("mean", torch.zeros(dim, device=device))
        self.register_buffer("var", torch.ones(dim, device=device))
        self.register_buffer("count", torch.zeros((), device=device))

    def _check(self, x: torch.Tensor) -> None:
        if x.dim() != 2 or x.shape[-1] != self.dim:
            raise ValueError(f"observations must have shape (batch, {self.dim}), got {tuple(x.shape)}")

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the statistics of a batch ``(batch, dim)``."""
        self._check(x)
        if not self.enabled:
            return
        merge_moments_(self.mean, self.var, self.count, x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised copy of ``x`` ``(batch, dim)``."""
        self._check(x)
        if not self.enabled:
            return x
        y = (x - self.mean) / (self.var.sqrt() + self.std_floor)
        return y if self.clip is None else y.clamp(-self.clip, self.clip)
