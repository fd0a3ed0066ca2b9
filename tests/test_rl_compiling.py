"""maybe_compile: identity when disabled; whole-graph capture enforced when enabled."""

import pytest
import torch

from unilab_gpu.utils.compiling import maybe_compile


def _graph_breaking(x: torch.Tensor) -> torch.Tensor:
    return x * 2 if x.sum().item() > 0 else x  # a host read: not capturable as one graph


def test_disabled_returns_function_unchanged():
    assert maybe_compile(_graph_breaking, enabled=False) is _graph_breaking


def test_enabled_compiles_and_rejects_graph_breaks():
    compiled = maybe_compile(lambda x: torch.sin(x) * 2, enabled=True, backend="eager")
    x = torch.linspace(0, 1, 5)
    torch.testing.assert_close(compiled(x), torch.sin(x) * 2)
    with pytest.raises(Exception, match="(?i)graph break|data-dependent|item"):
        maybe_compile(_graph_breaking, enabled=True, backend="eager")(x)
