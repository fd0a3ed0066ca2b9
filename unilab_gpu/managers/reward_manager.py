"""Rewards: ``sum_i weight_i * term_i * step_dt`` with per-term episode sums on the device."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.row_buffers import rows_with_dummy
from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_cfg import RewardTermCfg

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


class RewardManager:
    """Evaluates the reward terms and keeps each row's running per-term episode sums."""

    def __init__(self, cfg: dict[str, RewardTermCfg | None], env: EnvView) -> None:
        self.terms = [Term(name, c, env, f"rewards.{name}") for name, c in cfg.items() if c is not None]
        n, device = env.num_envs, env.device
        self.weights = torch.tensor([t.cfg.weight for t in self.terms], dtype=torch.float32, device=device)
        self.step_dt = env.step_dt
        self._check_scaled_weights()
        self.reward = torch.zeros(n, device=device)
        """This step's reward, ``(num_envs,)``."""
        self.step_terms = torch.zeros(n, len(self.terms), device=device)
        """This step's weighted contribution of each term, ``(num_envs, num_terms)``."""
        self._sums_storage, self.episode_sums = rows_with_dummy(n, len(self.terms), device=device)
        """Per-term reward summed over the current episode, ``(num_envs, num_terms)``."""

    def _check_scaled_weights(self) -> None:
        """Each weight times ``step_dt`` must be a finite float32: 1e39 is finite in the YAML's float64
        but inf on the device, and would make every reward inf (construction only: one host read)."""
        scaled = (self.weights * self.step_dt).tolist()
        for term, value in zip(self.terms, scaled, strict=True):
            if not math.isfinite(value):
                limit = torch.finfo(torch.float32).max / max(self.step_dt, 1.0)
                raise ValueError(
                    f"env config: 'rewards.{term.name}.weight' must be a number whose product with step_dt "
                    f"({self.step_dt:g} s) is a finite float32 (|weight| <= {limit:.3g}), got {term.cfg.weight!r}"
                )

    @property
    def term_names(self) -> list[str]:
        return [t.name for t in self.terms]

    def compute(self, env: EnvView, invalid: torch.Tensor) -> torch.Tensor:
        """This step's reward; ``invalid`` (num_envs,) bool rows (state non-finite or outside the
        divergence envelope) earn 0, so their blow-up reaches neither the reward nor the episode sums."""
        for i, term in enumerate(self.terms):
            self.step_terms[:, i] = term(env)
        self.step_terms.mul_(self.weights * self.step_dt)
        self.step_terms.copy_(torch.where(invalid[:, None], torch.zeros_like(self.step_terms), self.step_terms))
        self.reward.copy_(self.step_terms.sum(dim=1))
        self.episode_sums.add_(self.step_terms)
        return self.reward

    def reset(self, env_ids: torch.Tensor) -> None:
        self._sums_storage.index_fill_(0, env_ids, 0.0)
        for term in self.terms:
            term.reset(env_ids)
