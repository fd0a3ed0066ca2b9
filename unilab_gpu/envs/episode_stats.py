"""Episode statistics accumulated on the device; read them at logging time only."""

from __future__ import annotations

import torch


class EpisodeStats:
    """Running totals over every episode that ended since the last ``clear()``.

    All fields are device tensors updated in place inside the step (no host sync); ``summary()``
    reads them once, for logging.
    """

    def __init__(self, reward_terms: list[str], termination_terms: list[str], device: torch.device) -> None:
        self.reward_terms = reward_terms
        self.termination_terms = termination_terms
        zeros = lambda *shape: torch.zeros(shape, device=device)  # noqa: E731
        self.episodes = zeros()
        """Episodes ended (terminated or truncated)."""
        self.return_sum = zeros()
        """Sum of the ended episodes' returns."""
        self.length_sum = zeros()
        """Sum of the ended episodes' lengths in steps."""
        self.reward_term_sums = zeros(len(reward_terms))
        """Per reward term, the sum over ended episodes of that term's episode total."""
        self.terminated = zeros()
        self.truncated = zeros()
        self.termination_term_counts = zeros(len(termination_terms))
        self.non_finite_states = zeros()
        """Worlds whose state turned non-finite (each was terminated and reset)."""

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
        return out
