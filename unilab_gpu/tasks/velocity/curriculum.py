"""Penalty-weight curriculum on episode length (UniLab ``g1_walk_flat``), updated on the device."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


class PenaltyCurriculum:
    """Reset event: scale the penalty (negative-weight) reward terms by a factor that grows while
    episodes are long and shrinks while they are short.

    A young policy falls within a few steps; full penalties would teach it to end episodes early.
    Each step that ends episodes, the mean length of the episodes ending (the reset rows, before
    their clock restarts) updates an exponential moving average ``L`` (rate ``ema_rate``; the
    first such mean sets it); then
    ``scale *= 1 + degree`` if ``L > level_up_threshold``, ``scale *= 1 - degree`` if
    ``L < level_down_threshold``, clipped to ``[min_scale, max_scale]``. Every penalty weight is
    ``scale`` times its configured value. All of it is tensor math on the device (``torch.where``
    on the number of ended rows), so it runs inside the captured step without a host sync.

    The reward manager (built before the event terms) keeps its weights in one device tensor; the
    penalty terms' slots in it are written by every call. The first call is the env's first
    ``reset()``, so no step ever sees unscaled penalties.

    Publishes ``curriculum/penalty_scale`` and ``curriculum/episode_length`` (steps) in the
    episode statistics.
    """

    def __init__(
        self,
        env: EnvView,
        initial_scale: float,
        min_scale: float,
        max_scale: float,
        level_down_threshold: float,
        level_up_threshold: float,
        degree: float,
        ema_rate: float = 0.05,
    ) -> None:
        where = "PenaltyCurriculum"
        if not 0 <= min_scale <= initial_scale <= max_scale:
            raise ValueError(
                f"{where}: need 0 <= min_scale <= initial_scale <= max_scale, got "
                f"{min_scale}, {initial_scale}, {max_scale}"
            )
        if not 0 < ema_rate <= 1 or degree < 0:
            raise ValueError(f"{where}: need 0 < ema_rate <= 1 and degree >= 0, got {ema_rate}, {degree}")
        terms = env.reward_manager.terms
        slots = [i for i, term in enumerate(terms) if term.cfg.weight < 0]
        self.term_names = [terms[i].name for i in slots]
        """The penalty terms this curriculum scales, in reward-manager order."""
        device = env.device
        self.slots = torch.tensor(slots, dtype=torch.int64, device=device)
        self.base_weights = torch.tensor([terms[i].cfg.weight for i in slots], dtype=torch.float32, device=device)
        self.scale = torch.tensor(float(initial_scale), device=device)
        """The current factor on every penalty weight, 0-d."""
        self.mean_length = torch.zeros((), device=device)
        """EMA of ended episodes' lengths in steps, 0-d."""
        self.min_scale, self.max_scale = min_scale, max_scale
        self.down, self.up = level_down_threshold, level_up_threshold
        self.degree, self.ema_rate = degree, ema_rate
        env.stats.register("curriculum/penalty_scale", self.scale)
        env.stats.register("curriculum/episode_length", self.mean_length)

    def __call__(self, env: EnvView, env_ids: torch.Tensor) -> None:
        n = env.num_envs
        lengths = env.episode_length[env_ids.clamp(max=n - 1)].to(torch.float32)
        # Padded slots and rows that never ran an episode (the very first reset) do not count.
        ended = (env_ids < n) & (lengths > 0)
        count = ended.sum()
        batch_mean = torch.where(ended, lengths, 0.0).sum() / count.clamp(min=1)
        any_ended = count > 0
        # The first ended batch sets the average (it is 0 only before any episode ended).
        rate = torch.where(self.mean_length > 0, self.ema_rate, 1.0)
        mean = torch.where(any_ended, self.mean_length + rate * (batch_mean - self.mean_length), self.mean_length)
        factor = torch.where(mean > self.up, 1.0 + self.degree, torch.where(mean < self.down, 1.0 - self.degree, 1.0))
        scale = torch.where(any_ended, self.scale * factor, self.scale).clamp(self.min_scale, self.max_scale)
        self.mean_length.copy_(mean)
        self.scale.copy_(scale)
        if self.slots.numel():
            env.reward_manager.weights.index_copy_(0, self.slots, self.base_weights * scale)
