"""Events: startup (once), reset (rows starting an episode) and interval (per-row timers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_cfg import EventTermCfg

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView
    from unilab_gpu.managers.reset_staging import ResetStaging

EVENT_MODES = ("startup", "reset", "interval")


class EventManager:
    """Calls event terms by mode.

    ``startup`` and ``reset`` terms are called as ``f(env, env_ids)``: every row at startup, the
    rows being reset (``env.reset_staging.env_ids``, padded with ``num_envs``) at reset. Reset
    terms run after the command terms' resets and edit the staged state
    ``env.reset_staging.qpos`` / ``qvel`` (slot ``i`` is row ``env_ids[i]``) on top of what the
    commands staged, or randomize the model fields of those rows. ``interval`` terms are called as
    ``f(env, mask)`` every step with ``mask`` the ``(num_envs,)`` rows whose timer expired, and
    must act only on those rows (``torch.where``), so the step keeps a static shape.
    """

    def __init__(self, cfg: dict[str, EventTermCfg | None], env: EnvView) -> None:
        self.by_mode: dict[str, list[Term[EventTermCfg]]] = {mode: [] for mode in EVENT_MODES}
        self.intervals: list[tuple[float, float]] = []
        for name, c in cfg.items():
            if c is None:
                continue
            if c.mode == "interval":  # mode and range checked with the config (envs.env_cfg)
                if c.interval_range_s is None:
                    raise ValueError(f"events.{name}.interval_range_s: an interval event needs [low, high] seconds")
                low, high = c.interval_range_s
                self.intervals.append((float(low), float(high)))
            call_args = ("mask",) if c.mode == "interval" else ("env_ids",)
            self.by_mode[c.mode].append(Term(name, c, env, f"events.{name}", call_args))
        n = env.num_envs
        self.step_dt = env.step_dt
        self.time_left = torch.zeros(n, len(self.intervals), device=env.device)
        """Seconds until each row's next interval event, ``(num_envs, num_interval_terms)``."""
        self._low = torch.tensor([lo for lo, _ in self.intervals], device=env.device)
        self._span = torch.tensor([hi - lo for lo, hi in self.intervals], device=env.device)
        if self.intervals:
            self.time_left.copy_(self._draw(n))

    def apply_startup(self, env: EnvView) -> None:
        ids = torch.arange(env.num_envs, device=env.device)
        for term in self.by_mode["startup"]:
            term(env, ids)

    def apply_reset(self, env: EnvView, staging: ResetStaging) -> None:
        """Run the reset terms on the staged rows (step 3 of ``managers.reset_staging``)."""
        for term in self.by_mode["reset"]:
            term(env, staging.env_ids)

    def apply_interval(self, env: EnvView) -> None:
        if not self.intervals:
            return
        self.time_left.sub_(self.step_dt)
        due = self.time_left <= 0.0
        for i, term in enumerate(self.by_mode["interval"]):
            term(env, due[:, i])
        self.time_left.copy_(torch.where(due, self._draw(self.time_left.shape[0]), self.time_left))

    def _draw(self, rows: int) -> torch.Tensor:
        return self._low + self._span * torch.rand(rows, len(self.intervals), device=self._low.device)
