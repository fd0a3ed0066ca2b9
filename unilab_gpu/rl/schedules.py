"""Learning-rate schedules held as device tensors.

The optimizer's ``lr`` is a 0-d tensor shared with the schedule, and :meth:`CosineSchedule.step`
rewrites it in place, so advancing the schedule costs one tiny kernel and never a host sync (a
Python float ``lr`` would have to be read back if it were computed on the device, and would be
baked into a captured graph). FlashSAC decays 3e-4 to 1.5e-4 with a cosine over training
(Kim, Lee et al., arXiv:2604.04539, 2026; cosine annealing after Loshchilov and Hutter,
"SGDR", ICLR 2017).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class CosineSchedule(nn.Module):
    """``lr(k) = end + (start - end) * (1 + cos(pi * min(k / total_steps, 1))) / 2``.

    ``lr`` and ``num_steps`` are buffers (so they are saved in ``state_dict``); pass ``lr`` to
    optimizers that accept a tensor learning rate (``capturable=True`` or ``fused=True``).
    """

    def __init__(self, start: float, end: float, total_steps: int, device: torch.device | str | None = None) -> None:
        super().__init__()
        if total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        if start <= 0 or end <= 0:
            raise ValueError(f"learning rates must be positive, got start={start}, end={end}")
        self.start = start
        self.end = end
        self.total_steps = total_steps
        self.register_buffer("lr", torch.tensor(start, dtype=torch.float32, device=device))
        self.register_buffer("num_steps", torch.zeros((), dtype=torch.int64, device=device))

    @torch.no_grad()
    def step(self) -> None:
        """Advance one step and rewrite ``lr`` in place."""
        self.num_steps.add_(1)
        progress = (self.num_steps.to(torch.float32) / self.total_steps).clamp(max=1.0)
        self.lr.copy_(self.end + 0.5 * (self.start - self.end) * (1.0 + torch.cos(math.pi * progress)))
