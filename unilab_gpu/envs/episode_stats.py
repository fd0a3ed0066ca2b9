"""Episode statistics accumulated on the device; read them at logging time only."""

from __future__ import annotations

from collections.abc import Sequence

import torch

HEALTH_KEYS = (
    "env/non_finite_actions",
    "episode/non_finite_states",
    "episode/diverged_states",
    "env/deferred_resets",
    "env/solver_iteration_limits",
    "env/line_search_limits",
)
"""Keys of :meth:`EpisodeStats.summary` that count events, meaningful even when no episode ended."""


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
        """Per termination term, the ended episodes it ended."""
        self.non_finite_states = zeros()
        """Worlds whose state turned non-finite (each was terminated and reset)."""
        self.diverged_states = zeros()
        """Worlds whose finite state left the divergence envelope (each was terminated and reset)."""
        self.non_finite_actions = zeros()
        """Row-steps whose action had a non-finite entry (replaced by 0)."""
        self.deferred_resets = zeros()
        """Row-steps a reset waited because more rows ended than ``reset_capacity``."""
        self.solver_iteration_limits = zeros()
        """Row-steps in which MJWarp's constraint solver stopped at its iteration cap unconverged
        (in any substep): counted here instead of one printed line per world and substep."""
        self.line_search_limits = zeros()
        """Row-steps in which MJWarp's line search stopped at its iteration cap (in any substep)."""
        self.steps = zeros()
        """Steps accumulated since the last ``clear()`` (the denominator of ``step_sums``)."""
        self.step_sums: dict[str, torch.Tensor] = {}
        """Per-step quantities that terms add into every step (``add_step_mean``); reported per step."""
        self.extras: dict[str, torch.Tensor] = {}
        """Scalar device tensors that terms publish for logging (``register``), read by ``summary``;
        they belong to their terms and are not accumulators."""
        self.row_groups: dict[str, RowGroups] = {}
        """Per-group episode totals (``add_row_groups``), by key prefix."""

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

    def add_step_mean(self, name: str) -> torch.Tensor:
        """A 0-d accumulator that a term adds one value into every step; ``summary()`` reports its
        mean per step since the last ``clear()`` under ``name`` (e.g. a tracking error)."""
        if name in self.step_sums:
            raise ValueError(f"stats step mean '{name}' is registered twice")
        self.step_sums[name] = torch.zeros((), device=self.episodes.device)
        return self.step_sums[name]

    def add_row_groups(self, prefix: str, names: Sequence[str], row_group: torch.Tensor) -> None:
        """Also total the ended episodes per group: row ``i``'s episode belongs to group
        ``row_group[i]`` (``(num_envs,)`` int64 in ``[0, len(names))``, a buffer the term keeps up
        to date, e.g. each row's motion clip). ``summary()`` reports, for every group name,
        ``<prefix>/<name>/episodes``, ``<prefix>/<name>/episode_length`` (mean, steps) and
        ``<prefix>/<name>/failure_rate`` (share of its episodes that terminated)."""
        if prefix in self.row_groups:
            raise ValueError(f"stats row groups '{prefix}' are registered twice")
        self.row_groups[prefix] = RowGroups(tuple(names), row_group)

    def accumulate(
        self,
        ended: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        episode_reward_sums: torch.Tensor,
        episode_length: torch.Tensor,
        term_flags: torch.Tensor,
        non_finite: torch.Tensor,
        diverged: torch.Tensor,
        non_finite_actions: torch.Tensor,
    ) -> None:
        """Add the rows that ended this step (all ``(num_envs, ...)``, ``ended`` bool) and this
        step's health counts (bool rows: state newly non-finite, newly diverged, action non-finite)."""
        weight = ended.to(torch.float32)
        self.steps.add_(1.0)
        self.episodes.add_(weight.sum())
        self.return_sum.add_((episode_reward_sums.sum(dim=1) * weight).sum())
        self.length_sum.add_((episode_length.to(torch.float32) * weight).sum())
        self.reward_term_sums.add_((episode_reward_sums * weight[:, None]).sum(dim=0))
        self.terminated.add_(terminated.to(torch.float32).sum())
        self.truncated.add_(truncated.to(torch.float32).sum())
        self.termination_term_counts.add_((term_flags & ended[:, None]).to(torch.float32).sum(dim=0))
        self.non_finite_states.add_(non_finite.to(torch.float32).sum())
        self.diverged_states.add_(diverged.to(torch.float32).sum())
        self.non_finite_actions.add_(non_finite_actions.to(torch.float32).sum())
        for groups in self.row_groups.values():
            groups.add(weight, terminated, episode_length)

    def count_deferred(self, pending: torch.Tensor) -> None:
        """Add this step's rows whose reset was deferred (``(num_envs,)`` bool)."""
        self.deferred_resets.add_(pending.to(torch.float32).sum())

    def count_solver_limits(self, iterations: torch.Tensor, line_search: torch.Tensor) -> None:
        """Add this step's rows whose solver (``iterations``) or line search (``line_search``) hit
        its cap, ``(num_envs,)`` bool each."""
        self.solver_iteration_limits.add_(iterations.to(torch.float32).sum())
        self.line_search_limits.add_(line_search.to(torch.float32).sum())

    def accumulators(self) -> list[torch.Tensor]:
        """The tensors summed since the last ``clear()``, in a fixed order: summing each over the
        ranks of a data-parallel run gives the fleet's statistics. Published extras belong to
        their terms and are not among them."""
        return [
            self.episodes,
            self.return_sum,
            self.length_sum,
            self.reward_term_sums,
            self.terminated,
            self.truncated,
            self.termination_term_counts,
            self.non_finite_states,
            self.diverged_states,
            self.non_finite_actions,
            self.deferred_resets,
            self.solver_iteration_limits,
            self.line_search_limits,
            self.steps,
            *self.step_sums.values(),
            *(groups.totals for groups in self.row_groups.values()),
        ]

    def clear(self) -> None:
        """Zero the accumulators (published extras belong to their terms and are kept)."""
        for value in self.accumulators():
            value.zero_()

    def means(self, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """Every key of :meth:`summary` as a new 0-d device tensor of ``dtype`` (a copy: ``clear()``
        leaves it alone), without a host sync. With no ended episode the per-episode means read 0
        (and ``episode/count`` 0)."""

        def value(t: torch.Tensor) -> torch.Tensor:
            return t.to(dtype, copy=True)

        count = value(self.episodes).clamp(min=1.0)
        steps = value(self.steps).clamp(min=1.0)
        out = {
            "episode/count": value(self.episodes),
            "episode/return": value(self.return_sum) / count,
            "episode/length": value(self.length_sum) / count,
            "episode/terminated_rate": value(self.terminated) / count,
            "episode/time_out_rate": value(self.truncated) / count,
            "episode/non_finite_states": value(self.non_finite_states),
            "episode/diverged_states": value(self.diverged_states),
            "env/non_finite_actions": value(self.non_finite_actions),
            "env/deferred_resets": value(self.deferred_resets),
            "env/solver_iteration_limits": value(self.solver_iteration_limits),
            "env/line_search_limits": value(self.line_search_limits),
        }
        reward = value(self.reward_term_sums) / count
        out.update({f"reward/{name}": reward[i] for i, name in enumerate(self.reward_terms)})
        ends = value(self.termination_term_counts) / count
        out.update({f"termination/{name}": ends[i] for i, name in enumerate(self.termination_terms)})
        out.update({name: value(extra) for name, extra in self.extras.items()})
        out.update({name: value(total) / steps for name, total in self.step_sums.items()})
        for prefix, groups in self.row_groups.items():
            totals = value(groups.totals)
            episodes = totals[:, 0]
            per_episode = totals[:, 1:] / episodes.clamp(min=1.0)[:, None]
            for i, name in enumerate(groups.names):
                out[f"{prefix}/{name}/episodes"] = episodes[i]
                out[f"{prefix}/{name}/episode_length"] = per_episode[i, 0]
                out[f"{prefix}/{name}/failure_rate"] = per_episode[i, 1]
        return out

    def logged(self, summary: dict[str, float]) -> dict[str, float]:
        """The keys of ``summary`` (:meth:`summary`'s) a logging point reports: all of them once an
        episode ended; before that the ones that hold without one, the event counts
        (:data:`HEALTH_KEYS`) and the terms' step means (a mean over zero episodes would read as 0,
        not as missing)."""
        if summary["episode/count"] > 0:
            return summary
        kept = {*HEALTH_KEYS, *self.step_sums}
        return {key: value for key, value in summary.items() if key in kept}

    def summary(self) -> dict[str, float]:
        """:meth:`means` as Python floats, read with one device-to-host copy. Keys:
        ``episode/return``, ``episode/length``, ``reward/<term>``, ``termination/<term>`` (fraction
        of episodes), ``episode/terminated_rate``, ``episode/time_out_rate``, and counts:
        ``episode/count``, ``episode/non_finite_states`` and ``episode/diverged_states`` (rows
        terminated for a NaN or an implausible state), ``env/non_finite_actions`` (row-steps),
        ``env/deferred_resets``, ``env/solver_iteration_limits`` and ``env/line_search_limits``
        (row-steps); then the terms' extras, their step means
        (``add_step_mean``) and their per-group episode totals (``add_row_groups``). Computed in
        float64, as Python would from the float32 totals."""
        means = self.means(torch.float64)
        values = torch.stack(list(means.values())).to("cpu", copy=True).tolist()
        return dict(zip(means, values, strict=True))


class RowGroups:
    """Episode totals per group of rows, ``totals (G, 3)``: ended episodes, the sum of their
    lengths (steps) and how many of them terminated. Rows name their group in ``row_group
    (num_envs,)``; one ``index_add_`` per step, static shapes, no host sync."""

    def __init__(self, names: tuple[str, ...], row_group: torch.Tensor) -> None:
        self.names = names
        self.row_group = row_group
        self.totals = torch.zeros(len(names), 3, device=row_group.device)

    def add(self, ended: torch.Tensor, terminated: torch.Tensor, episode_length: torch.Tensor) -> None:
        """Add this step's ended rows: ``ended`` float ``(num_envs,)`` (1.0 where an episode ended),
        ``terminated`` bool and ``episode_length`` int64, ``(num_envs,)`` each."""
        rows = torch.stack([ended, episode_length.to(ended.dtype) * ended, terminated.to(ended.dtype) * ended], dim=1)
        self.totals.index_add_(0, self.row_group, rows)
