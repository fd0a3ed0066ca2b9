"""One optimizer's gradients packed into one flat buffer, so that averaging them over the ranks of a
data-parallel run is one collective (:meth:`~unilab_gpu.rl.distributed.DataParallel.average_gradients`)."""

from __future__ import annotations

import torch
from torch import nn


class GradientBucket:
    """Gradients of one optimizer's parameters, and floating buffers averaged with them, packed
    into one flat buffer so that averaging them is one collective."""

    def __init__(self, params: list[nn.Parameter], buffers: list[torch.Tensor]) -> None:
        self.params = params
        self.buffers = buffers
        sizes = [t.numel() for t in [*params, *buffers]]
        device = params[0].device if params else buffers[0].device
        self.flat = torch.zeros(sum(sizes), device=device)
        views = self.flat.split(sizes)
        self.grad_views = [v.view_as(p) for v, p in zip(views, params, strict=False)]
        self.buffer_views = [v.view_as(b) for v, b in zip(views[len(params) :], buffers, strict=True)]

    def pack(self) -> torch.Tensor:
        """Gradients (zeros where a parameter got none) and buffers into the flat buffer."""
        grads = [(p.grad, v) for p, v in zip(self.params, self.grad_views, strict=True) if p.grad is not None]
        missing = [v for p, v in zip(self.params, self.grad_views, strict=True) if p.grad is None]
        if grads:
            torch._foreach_copy_([v for _, v in grads], [g for g, _ in grads])
        if missing:
            torch._foreach_zero_(missing)
        if self.buffers:
            torch._foreach_copy_(self.buffer_views, self.buffers)
        return self.flat

    def unpack(self) -> None:
        """Averaged values back into the gradients and buffers."""
        grads = [(p.grad, v) for p, v in zip(self.params, self.grad_views, strict=True) if p.grad is not None]
        if grads:
            torch._foreach_copy_([g for g, _ in grads], [v for _, v in grads])
        if self.buffers:
            torch._foreach_copy_(self.buffers, self.buffer_views)


def float_buffers(*modules: nn.Module) -> list[torch.Tensor]:
    """The floating-point buffers of ``modules`` (BatchNorm running statistics), which forwards
    update and a data-parallel run averages with the gradients."""
    return [b for m in modules for b in m.buffers() if b.is_floating_point()]
