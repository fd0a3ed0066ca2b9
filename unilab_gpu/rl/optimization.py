"""Optimizer steps that stay on the device: AdamW with a tensor learning rate, Polyak averaging.

The fused AdamW kernel keeps its step counters on the parameters' device and accepts a shared
0-d tensor ``lr`` that a schedule rewrites in place (:mod:`unilab_gpu.rl.schedules`), so an
optimizer step reads nothing back to the host; it runs the same way on the CPU (AdamW:
Loshchilov and Hutter, "Decoupled Weight Decay Regularization", ICLR 2019). The trainer runs
updates eagerly, outside any CUDA graph: capturing ``step()`` would also need
``capturable=True`` (torch 2.13 refuses to capture a step of an optimizer built without it).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def make_adamw(
    params: Iterable[nn.Parameter], lr: torch.Tensor, betas: tuple[float, float], weight_decay: float
) -> torch.optim.AdamW:
    """AdamW over ``params`` reading its learning rate from the tensor ``lr``."""
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=True)


def clip_gradients_(params: list[nn.Parameter], max_norm: float) -> None:
    """Clip the global gradient norm to ``max_norm``; ``0`` disables. Never syncs with the host."""
    if max_norm > 0:
        torch.nn.utils.clip_grad_norm_(params, max_norm, error_if_nonfinite=False)


@torch.no_grad()
def polyak_update_(target: list[torch.Tensor], online: list[torch.Tensor], tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online`` for each pair (target networks, Lillicrap
    et al., "Continuous control with deep reinforcement learning", ICLR 2016)."""
    torch._foreach_lerp_(target, online, tau)
