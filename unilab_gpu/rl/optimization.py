"""Optimizer steps that stay on the device: a cosine learning-rate schedule held as a tensor, AdamW
reading it, gradient clipping and Polyak averaging.

The optimizer's ``lr`` is a 0-d tensor shared with the schedule, and :meth:`CosineSchedule.step`
rewrites it in place, so advancing the schedule costs one tiny kernel and never a host sync (a
Python float ``lr`` would have to be read back if it were computed on the device, and would be
baked into a captured graph). FlashSAC decays 3e-4 to 1.5e-4 with a cosine over training
(Kim, Lee et al., arXiv:2604.04539, 2026; cosine annealing after Loshchilov and Hutter,
"SGDR", ICLR 2017).

The fused AdamW kernel keeps its step counters on the parameters' device and accepts a shared
0-d tensor ``lr`` that a schedule rewrites in place (:class:`CosineSchedule`), so an
optimizer step reads nothing back to the host; it runs the same way on the CPU (AdamW:
Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019). The optimizers are
built ``capturable=True`` as well: torch 2.13 refuses to capture the ``step()`` of an optimizer
built without it (``Optimizer._cuda_graph_capture_health_check``), and the trainer can capture
the whole update as a CUDA graph (:mod:`unilab_gpu.rl.update_step`). The fused kernel ignores
the flag otherwise, so CPU and eager CUDA steps are unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import nn


class CosineSchedule(nn.Module):
    """``lr(k) = end + (start - end) * (1 + cos(pi * min(k / total_steps, 1))) / 2``.

    ``lr`` and ``num_steps`` are buffers (so they are saved in ``state_dict``); pass ``lr`` to
    optimizers that accept a tensor learning rate (``capturable=True`` or ``fused=True``).
    """

    lr: torch.Tensor  # () float32
    num_steps: torch.Tensor  # () int64

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


def make_adamw(
    params: Iterable[torch.Tensor], lr: torch.Tensor, betas: tuple[float, float], weight_decay: float
) -> torch.optim.AdamW:
    """AdamW over ``params`` reading its learning rate from the tensor ``lr``; its steps can be
    captured in a CUDA graph (``capturable=True``: step counters stay on the device)."""
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=True, capturable=True)


def clip_gradients_(params: Iterable[torch.Tensor], max_norm: float) -> None:
    """Clip the global gradient norm to ``max_norm``; ``0`` disables. Never syncs with the host."""
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=False)


@torch.no_grad()
def polyak_update_(target: Sequence[torch.Tensor], online: Sequence[torch.Tensor], tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online`` for each pair (target networks, Lillicrap
    et al., "Continuous control with deep reinforcement learning", ICLR 2016)."""
    torch._foreach_lerp_(list(target), list(online), tau)
