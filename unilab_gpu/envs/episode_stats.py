"""Episode statistics accumulated on the device; read them at logging time only."""

from __future__ import annotations

import torch


class EpisodeStats:
    """Running totals over every episode that ended since the last ``clear()``.

    All fields are device tensors updated in place inside the step (no host sync); ``summary()``
    reads them once, for logging.
    """

    def __init__(self, device: torch.device) -> None:
        """Created before the managers (terms may ``register`` extras); ``set_terms`` follows."""
        self.reward_terms: list[str] = []
        self.termination_terms: list[str] = []
        zeros = lambda *shape: torch.zeros(shape, device=device)  # noqa: E731
        self.episodes = zeros()
        """Episodes ended (terminated or truncated)."""
        self.return_sum = zeros()
        """Sum of the ended episodes' returns."""
        self.length_sum = zeros()
        """Sum of the ended episodes' lengths in steps."""
        self.reward_term_sums = zeros(0)
        """Per reward term, the sum over ended episodes of that term's episode total."""
        self.terminated = zeros()
        self.truncated = zeros()
        self.termination_term_counts = zeros(0)
        self.non_finite_states = zeros()
        """Worlds whose state turned non-finite (each was terminated and reset)."""
        self.extras: dict[str, torch.Tensor] = {}
        """Scalar device tensors that terms publish for logging (``register``), read by ``summary``."""

    def set_terms(self, reward_terms: list[str], termination_terms: list[str]) -> None:
        """Size the per-term accumulators (cold path, once the managers exist)."""
        self.reward_terms = list(reward_terms)
        self.termination_terms = list(termination_terms)
        device = self.episodes.device
        self.reward_term_sums = torch.zeros(len(reward_terms), device=device)
        self.termination_term_counts = torch.zeros(len(termination_terms), device=device)

    def register(self, name: str, value: torch.Tensor) -> None:
        """Publish a 0-d device tensor that a term keeps up to date (e.g. a sampler's entropy)."""
        if value.ndim != 0:
            raise ValueError(f"stats extra '{name}' must be a 0-d tensor, got shape {tuple(value.shape)}")
        self.extras[name] = value

    def accumulate(
        self,
        ended: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        episode_reward_sums: torch.Tensor,
        episode_length: torch.Tensor,
        term_flags: torch.Tensor,
        non_finite: torch.Tensor,
    ) -> None:
        """Add the rows that ended this step (all ``(num_envs, ...)``, ``ended`` bool)."""
        weight = ended.to(torch.float32)
        self.episodes.add_(weight.sum())
        self.return_sum.add_((episode_reward_sums.sum(dim=1) * weight).sum())
        self.length_sum.add_((episode_length.to(torch.float32) * weight).sum())
        self.reward_term_sums.add_((episode_reward_sums * weight[:, None]).sum(dim=0))
        self.terminated.add_(terminated.to(torch.float32).sum())
        self.truncated.add_(truncated.to(torch.float32).sum())
        self.termination_term_counts.add_((term_flags & ended[:, None]).to(torch.float32).sum(dim=0))
        self.non_finite_states.add_(non_finite.to(torch.float32).sum())

    def clear(self) -> None:
        """Zero the accumulators (published extras belong to their terms and are kept)."""
        for value in vars(self).values():
            if isinstance(value, torch.Tensor):
                value.zero_()

    def summary(self) -> dict[str, float]:
        """Means per ended episode (one host sync). Keys: ``episode/return``, ``episode/length``,
        ``reward/<term>``, ``termination/<term>`` (fraction of episodes), and counts."""
        count = max(float(self.episodes), 1.0)
        out = {
            "episode/count": float(self.episodes),
            "episode/return": float(self.return_sum) / count,
            "episode/length": float(self.length_sum) / count,
            "episode/terminated_rate": float(self.terminated) / count,
            "episode/time_out_rate": float(self.truncated) / count,
            "episode/non_finite_states": float(self.non_finite_states),
        }
        for name, value in zip(self.reward_terms, self.reward_term_sums.tolist(), strict=True):
            out[f"reward/{name}"] = value / count
        for name, value in zip(self.termination_terms, self.termination_term_counts.tolist(), strict=True):
            out[f"termination/{name}"] = value / count
        for name, value in self.extras.items():
            out[name] = float(value)
        return out
