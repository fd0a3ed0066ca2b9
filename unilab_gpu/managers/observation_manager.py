"""Observation groups written term by term into preallocated buffers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_cfg import NoiseCfg, ObservationGroupCfg, ObservationTermCfg

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


@dataclass(frozen=True)
class _Layout:
    """Where one term lives: ``step`` columns hold its newest value, ``group`` columns its history."""

    step: slice
    group: slice
    dim: int
    history: int


class ObservationGroup:
    """One group (e.g. ``policy``): terms -> ``(num_envs, dim)`` with noise, clip, scale, history.

    Each step the terms are evaluated into a ``(num_envs, sum of term dims)`` scratch buffer, then
    each term's slice of the group buffer is filled: the newest value for history 1, or the
    previous history shifted by one with the newest value last. Rows that start an episode get
    their history filled with the current value instead.
    """

    def __init__(self, name: str, cfg: ObservationGroupCfg, env: EnvView) -> None:
        self.name = name
        self.terms: list[Term[ObservationTermCfg]] = []
        self.cfgs: list[ObservationTermCfg] = []
        self.layouts: list[_Layout] = []
        self.enable_noise = cfg.enable_noise
        step_col = group_col = 0
        for term_name, term_cfg in cfg.terms.items():
            if term_cfg is None:
                continue
            where = f"observations.{name}.terms.{term_name}"
            term = Term(term_name, term_cfg, env, where)
            value = term(env)  # cold path: learn the term's width
            if value.ndim not in (1, 2) or value.shape[0] != env.num_envs:
                raise ValueError(f"{where}: expected a (num_envs,) or (num_envs, d) tensor, got {tuple(value.shape)}")
            dim = 1 if value.ndim == 1 else value.shape[1]
            self.terms.append(term)
            self.cfgs.append(term_cfg)
            self.layouts.append(
                _Layout(
                    slice(step_col, step_col + dim),
                    slice(group_col, group_col + dim * term_cfg.history),
                    dim,
                    term_cfg.history,
                )
            )
            step_col += dim
            group_col += dim * term_cfg.history
        if not self.terms:
            raise ValueError(f"observations.{name} has no enabled terms")
        self.dim = group_col
        self._step_values = torch.zeros(env.num_envs, step_col, device=env.device)
        self.raw_values = torch.zeros(env.num_envs, step_col, device=env.device)
        """``(num_envs, sum of term dims)``: each term's newest value before noise, clip and scale,
        at ``layouts[i].step`` (what ``envs.constant_observations`` watches)."""

    @property
    def term_names(self) -> list[str]:
        return [t.name for t in self.terms]

    def evaluate(self, env: EnvView) -> None:
        """Compute every term's newest (noisy, clipped, scaled) value into the scratch buffer."""
        for term, cfg, layout in zip(self.terms, self.cfgs, self.layouts, strict=True):
            value = term(env).reshape(env.num_envs, layout.dim)
            self.raw_values[:, layout.step] = value
            if self.enable_noise and cfg.noise is not None:
                value = value + _noise(cfg.noise, value)
            if cfg.clip is not None:
                value = value.clamp(cfg.clip[0], cfg.clip[1])
            if cfg.scale != 1.0:
                value = value * cfg.scale
            self._step_values[:, layout.step] = value

    def write(self, out: torch.Tensor, previous: torch.Tensor, fresh: torch.Tensor | None) -> None:
        """Fill ``out`` from the scratch values and the ``previous`` group buffer.

        Args:
          out: ``(num_envs, dim)`` buffer to write (may be ``previous`` itself).
          previous: ``(num_envs, dim)`` buffer holding last step's observation (history source).
          fresh: ``(num_envs,)`` bool rows whose history restarts, or None.
        """
        n = out.shape[0]
        for layout in self.layouts:
            newest = self._step_values[:, layout.step]
            if layout.history == 1:
                out[:, layout.group] = newest
                continue
            h, d = layout.history, layout.dim
            old = previous[:, layout.group].reshape(n, h, d)
            shifted = torch.cat([old[:, 1:], newest[:, None]], dim=1)
            if fresh is not None:
                shifted = torch.where(fresh[:, None, None], newest[:, None].expand(n, h, d), shifted)
            out[:, layout.group] = shifted.reshape(n, h * d)


class ObservationManager:
    """All observation groups, with ``obs`` and ``final_obs`` buffers per group."""

    def __init__(self, cfg: dict[str, ObservationGroupCfg], env: EnvView) -> None:
        if not cfg:
            raise ValueError("observations: at least one group (e.g. 'policy') is required")
        self.groups = {name: ObservationGroup(name, group, env) for name, group in cfg.items()}
        n, device = env.num_envs, env.device
        self.obs = {name: torch.zeros(n, g.dim, device=device) for name, g in self.groups.items()}
        """Observations after this step's resets, group -> ``(num_envs, dim)``."""
        self.final_obs = {name: torch.zeros(n, g.dim, device=device) for name, g in self.groups.items()}
        """Observations before this step's resets, group -> ``(num_envs, dim)``."""
        self._scratch = {name: torch.zeros(n, g.dim, device=device) for name, g in self.groups.items()}

    @property
    def group_dims(self) -> dict[str, int]:
        return {name: g.dim for name, g in self.groups.items()}

    def compute_final(self, env: EnvView) -> None:
        """Pre-reset pass: ``final_obs`` = last step's history advanced by this step's values."""
        for name, group in self.groups.items():
            group.evaluate(env)
            group.write(self.final_obs[name], self.obs[name], None)

    def compute(self, env: EnvView, reset_mask: torch.Tensor, after_final: bool) -> None:
        """Post-reset pass into ``obs``.

        Rows in ``reset_mask`` (``(num_envs,)`` bool) restart their history from the new episode's
        first value. Other rows take ``final_obs`` when it was computed this step (their state did
        not change since), else last step's history advanced by the current values.
        """
        for name, group in self.groups.items():
            group.evaluate(env)
            if after_final:
                scratch, final = self._scratch[name], self.final_obs[name]
                group.write(scratch, final, reset_mask)
                self.obs[name].copy_(torch.where(reset_mask[:, None], scratch, final))
            else:
                group.write(self.obs[name], self.obs[name], reset_mask)


def _noise(cfg: NoiseCfg, like: torch.Tensor) -> torch.Tensor:
    """``uniform`` on ``[low, high]``, else ``gaussian`` (kinds checked with the config: ``envs.env_cfg``)."""
    if cfg.kind == "uniform":
        return torch.rand_like(like) * (cfg.high - cfg.low) + cfg.low
    return torch.randn_like(like) * cfg.std
