"""Merging a batch into running mean/variance statistics, in place on the device.

The parallel algorithm of Chan, Golub and LeVeque (1979): exact for any batch sizes, and stable
where the naive sum-of-squares update is not.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def merge_moments_(mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor, batch: torch.Tensor) -> None:
    """Fold ``batch`` (samples along dim 0, or all elements for a scalar ``mean``) into
    ``mean``/``var`` (population variance) and the scalar ``count``, in place."""
    if mean.dim() == 0:
        batch = batch.reshape(-1)
    batch_count = batch.shape[0]
    batch_mean = batch.mean(dim=0)
    batch_var = batch.var(dim=0, correction=0)
    total = count + batch_count
    delta = batch_mean - mean
    m2 = var * count + batch_var * batch_count + delta.square() * count * batch_count / total
    mean.add_(delta * batch_count / total)
    var.copy_(m2 / total)
    count.copy_(total)
