"""The one ``torch.compile`` switch used by the env's manager phases and the agents' updates.

Everything that compiles here compiles as a whole graph with static shapes
(``fullgraph=True, dynamic=False``): a graph break or a shape-dependent recompile would be a
silent slowdown, so it is an error instead. ``backward`` and ``Optimizer.step`` stay outside
(autograd's entry point and the optimizer step are graph breaks for Dynamo; the fused AdamW
kernel is already one launch per parameter group). Eager and compiled paths run the same Python
functions, which is what lets every test compare them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import torch

FnT = TypeVar("FnT", bound=Callable)


def maybe_compile(fn: FnT, enabled: bool, backend: str = "inductor", options: Mapping[str, Any] | None = None) -> FnT:
    """``torch.compile(fn, fullgraph=True, dynamic=False)`` when ``enabled``, else ``fn`` unchanged.

    ``options`` are Inductor options scoped to this function (e.g. ``{"fallback_random": True}``),
    so one caller's setting never leaks into another's compiled code.
    """
    if not enabled:
        return fn
    kwargs: dict[str, Any] = {"fullgraph": True, "dynamic": False, "backend": backend}
    if options:
        kwargs["options"] = dict(options)
    return torch.compile(fn, **kwargs)  # type: ignore[return-value]
