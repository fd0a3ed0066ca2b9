"""Per-row buffers with one extra dummy row for padded reset ids.

Reset work runs over a fixed-capacity list of row ids padded with ``num_envs``. Buffers that are
written by those ids get ``num_envs + 1`` rows: padded slots write (and read) the last, dummy row,
so every index op is in range and has a static shape, and real rows are never written twice.
"""

from __future__ import annotations

import torch


def rows_with_dummy(
    num_envs: int, *shape: int, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Zeroed storage of ``(num_envs + 1, *shape)`` and its view of the real rows ``(num_envs, *shape)``."""
    storage = torch.zeros((num_envs + 1, *shape), dtype=dtype, device=device)
    return storage, storage[:num_envs]


def valid_row_mean(values: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """The mean of ``values (N, ...)`` over the rows where ``valid (N,)`` is true, ``(...)`` (0
    where none is): a diverged row's NaN or huge value must not poison a per-step metric.
    Sync-free: the invalid rows are masked, not removed."""
    mask = valid.view(-1, *([1] * (values.ndim - 1)))
    kept = torch.where(mask, values, torch.zeros_like(values))
    return kept.sum(dim=0) / valid.sum().clamp_min(1)
