"""Merging a batch into running mean/variance statistics, in place on the device.

The parallel algorithm of Chan, Golub and LeVeque (1979): exact for any batch sizes, and stable
where the naive sum-of-squares update is not.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


@torch.no_grad()
def merge_moments_(
    mean: torch.Tensor,
    var: torch.Tensor,
    count: torch.Tensor,
    batch: torch.Tensor,
    all_reduce: Callable[[torch.Tensor], None] | None = None,
) -> None:
    """Fold ``batch`` (samples along dim 0, or all elements for a scalar ``mean``) into
    ``mean``/``var`` (population variance) and the scalar ``count``, in place.

    ``all_reduce`` (data-parallel training, :mod:`unilab_gpu.rl.distributed`) sums a flat tensor
    over all ranks in place; the batch folded in is then the union of every rank's ``batch``.
    """
    if mean.dim() == 0:
        batch = batch.reshape(-1)
    if all_reduce is None:
        batch_count: torch.Tensor | int = batch.shape[0]
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, correction=0)
    else:
        batch_count, batch_mean, batch_var = _union_moments(batch, mean, all_reduce)
    total = count + batch_count
    delta = batch_mean - mean
    m2 = var * count + batch_var * batch_count + delta.square() * count * batch_count / total
    mean.add_(delta * batch_count / total)
    var.copy_(m2 / total)
    count.copy_(total)


def _union_moments(
    batch: torch.Tensor, center: torch.Tensor, all_reduce: Callable[[torch.Tensor], None]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Count (0-d), mean and population variance (``center``'s shape) of the union of every
    rank's ``batch`` ``(B, *center.shape)``, from one ``all_reduce`` of ``1 + 2 * center.numel()``
    sums. ``center`` (the running mean) is equal on every rank and near the data, so the sums of
    ``x - center`` and ``(x - center)^2`` combine without the cancellation of raw sums of squares."""
    shifted = batch.to(center.dtype) - center
    sums = torch.cat(
        [
            torch.full((1,), float(batch.shape[0]), dtype=center.dtype, device=center.device),
            shifted.sum(dim=0).reshape(-1),
            shifted.square().sum(dim=0).reshape(-1),
        ]
    )
    all_reduce(sums)
    dim = center.numel()
    total = sums[0]
    offset = sums[1 : 1 + dim].view_as(center) / total
    var = sums[1 + dim :].view_as(center) / total - offset.square()
    return total, center + offset, var.clamp_min(0.0)
