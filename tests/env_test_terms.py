"""Test-only terms, referenced from tests by dotted path (``env_test_terms.<name>``)."""

from __future__ import annotations

import time

import torch


class ForcedEnd:
    """Termination that fires for the rows the test marks in ``mask``."""

    def __init__(self, env) -> None:
        self.mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        return self.mask.clone()


def burn_time(env, milliseconds: float = 5.0) -> torch.Tensor:
    """An observation term that burns wall time (for profiler attribution tests)."""
    end = time.perf_counter() + milliseconds / 1e3
    while time.perf_counter() < end:
        pass
    return torch.zeros(env.num_envs, device=env.device)
