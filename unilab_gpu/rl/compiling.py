"""Optional ``torch.compile`` of agent update pieces.

Losses (forward passes and target computation), target updates and weight projections compile
as whole graphs (``fullgraph=True, dynamic=False``). ``backward`` and the optimizer step stay
outside them: autograd's entry point and ``Optimizer.step`` are graph breaks for Dynamo, and
the fused AdamW kernel is already a single launch per parameter group. Eager and compiled paths
run the same Python functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

FnT = TypeVar("FnT", bound=Callable)


def maybe_compile(fn: FnT, enabled: bool, backend: str = "inductor", fullgraph: bool = True) -> FnT:
    """``torch.compile(fn)`` when ``enabled`` (static shapes), else ``fn`` unchanged."""
    if not enabled:
        return fn
    return torch.compile(fn, fullgraph=fullgraph, dynamic=False, backend=backend)  # type: ignore[return-value]
