"""Terminations: which rows end, split into terminated (true end) and truncated (time-out)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_cfg import TerminationTermCfg

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


class TerminationManager:
    """``terminated`` = any non-time-out term; ``truncated`` = any time-out term and not terminated."""

    def __init__(self, cfg: dict[str, TerminationTermCfg | None], env: EnvView) -> None:
        self.terms = [Term(name, c, env, f"terminations.{name}") for name, c in cfg.items() if c is not None]
        n, device = env.num_envs, env.device
        self.time_out = torch.tensor([t.cfg.time_out for t in self.terms], dtype=torch.bool, device=device)
        self.term_flags = torch.zeros(n, len(self.terms), dtype=torch.bool, device=device)
        """Which term fired for each row this step, ``(num_envs, num_terms)``."""
        self.terminated = torch.zeros(n, dtype=torch.bool, device=device)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=device)

    @property
    def term_names(self) -> list[str]:
        return [t.name for t in self.terms]

    def compute(self, env: EnvView, non_finite: torch.Tensor) -> None:
        """Evaluate the terms; ``non_finite`` (num_envs,) bool rows always terminate."""
        for i, term in enumerate(self.terms):
            self.term_flags[:, i] = term(env)
        end = self.term_flags & ~self.time_out
        out = self.term_flags & self.time_out
        self.terminated.copy_(end.any(dim=1) | non_finite)
        self.truncated.copy_(out.any(dim=1) & ~self.terminated)

    def reset(self, env_ids: torch.Tensor) -> None:
        for term in self.terms:
            term.reset(env_ids)
