"""``[low, high]`` ranges as the terms use them: parsed once, drawn and clamped on the step."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def low_and_span(
    pairs: Sequence[Sequence[float]], count: int, name: str, device: torch.device | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` ``[low, high]`` pairs -> ``low`` and ``span = high - low``, ``(count,)`` float32 each.

    Built once, at construction: a host-to-device copy inside the step could not be recorded in a
    CUDA graph. A draw is then ``low + span * torch.rand(..., count)``.

    Args:
      name: the config key, named in the error for a wrong number of pairs.
    """
    bounds = torch.tensor(pairs, dtype=torch.float32, device=device)
    if bounds.shape != (count, 2):
        raise ValueError(f"{name} must be {count} [low, high] pairs, got {list(pairs)}")
    return bounds[:, 0], bounds[:, 1] - bounds[:, 0]


def clamp_to(value: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """``value`` limited to ``[low, high]`` elementwise (tensors that broadcast; infinities allowed)."""
    return torch.maximum(torch.minimum(value, high), low)
