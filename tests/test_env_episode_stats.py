"""EpisodeStats: named accumulators, and ``summary()`` reads them with one device-to-host copy."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from unilab_gpu.envs.episode_stats import EpisodeStats
from unilab_gpu.utils.sync_audit import no_host_sync


class _HostReads(TorchDispatchMode):
    """Counts the ops that bring device values to the host: scalar reads (``float(t)``,
    ``t.item()``) and copies asked to land on the CPU (``t.to("cpu", copy=True)``; on a CUDA
    tensor also ``t.cpu()``). A dtype conversion (``t.to(torch.float64)``) stays where it is."""

    def __init__(self) -> None:
        super().__init__()
        self.scalar_reads = 0
        self.copies_to_host = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in (torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default):
            self.scalar_reads += 1
        elif func is torch.ops.aten._to_copy.default and (kwargs or {}).get("device") == torch.device("cpu"):
            self.copies_to_host += 1
        return out


def _stats_after_two_steps() -> EpisodeStats:
    stats = EpisodeStats(torch.device("cpu"))
    stats.set_terms(["alive", "effort"], ["time_out", "fell"])
    entropy = torch.tensor(0.75)
    stats.register("motion/entropy", entropy)
    error = stats.add_step_mean("tracking/error")
    sums = torch.tensor([[1.0, -0.5], [2.0, -1.0], [4.0, -2.0]])  # (3 rows, 2 reward terms)
    length = torch.tensor([10, 20, 30])
    flags = torch.tensor([[True, False], [False, True], [False, False]])
    no = torch.zeros(3, dtype=torch.bool)
    # step 1: rows 0 (time-out) and 1 (fell) end; row 2 goes non-finite and its action too
    ended = torch.tensor([True, True, False])
    stats.accumulate(ended, flags[:, 1], flags[:, 0], sums, length, flags, torch.tensor([False, False, True]), no, ~no)
    error.add_(0.5)
    # step 2: row 2 ends by the fall term; one row diverged, one reset deferred
    flags2 = torch.tensor([[False, False], [False, False], [False, True]])
    stats.accumulate(flags2[:, 1], flags2[:, 1], no, sums, length, flags2, no, torch.tensor([True, False, False]), no)
    stats.count_deferred(torch.tensor([False, True, False]))
    error.add_(1.5)
    return stats


def test_summary_is_one_copy_to_the_host_and_matches_hand_computed_means() -> None:
    stats = _stats_after_two_steps()
    with _HostReads() as reads:
        summary = stats.summary()
    assert (reads.copies_to_host, reads.scalar_reads) == (1, 0)
    # 3 episodes: returns 0.5, 1.0, 2.0; lengths 10, 20, 30; ended by time_out once, fell twice
    expected = {
        "episode/count": 3.0,
        "episode/return": (0.5 + 1.0 + 2.0) / 3,
        "episode/length": 20.0,
        "episode/terminated_rate": 2 / 3,
        "episode/time_out_rate": 1 / 3,
        "episode/non_finite_states": 1.0,
        "episode/diverged_states": 1.0,
        "env/non_finite_actions": 3.0,
        "env/deferred_resets": 1.0,
        "env/solver_iteration_limits": 0.0,
        "env/line_search_limits": 0.0,
        "reward/alive": (1.0 + 2.0 + 4.0) / 3,
        "reward/effort": (-0.5 - 1.0 - 2.0) / 3,
        "termination/time_out": 1 / 3,
        "termination/fell": 2 / 3,
        "motion/entropy": 0.75,
        "tracking/error": (0.5 + 1.5) / 2,
    }
    assert list(summary) == list(expected)
    for key, value in expected.items():
        assert abs(summary[key] - value) < 1e-12, key
    device_means = stats.means()
    assert all(v.ndim == 0 and v.dtype == torch.float32 for v in device_means.values())
    assert list(device_means) == list(expected)
    stats.clear()  # the means are copies: clearing the totals leaves them as they were
    assert float(device_means["episode/count"]) == 3.0 and float(device_means["motion/entropy"]) == 0.75
    assert float(device_means["env/deferred_resets"]) == 1.0


def test_accumulators_are_named_and_clear_keeps_the_published_extras() -> None:
    stats = _stats_after_two_steps()
    named = [
        stats.episodes,
        stats.return_sum,
        stats.length_sum,
        stats.reward_term_sums,
        stats.terminated,
        stats.truncated,
        stats.termination_term_counts,
        stats.non_finite_states,
        stats.diverged_states,
        stats.non_finite_actions,
        stats.deferred_resets,
        stats.solver_iteration_limits,
        stats.line_search_limits,
        stats.steps,
        stats.step_sums["tracking/error"],
    ]
    got = stats.accumulators()
    assert len(got) == len(named) and all(a is b for a, b in zip(got, named, strict=True))
    stats.scratch = torch.ones(())  # an unrelated tensor attribute is no accumulator
    assert len(stats.accumulators()) == len(named)
    stats.clear()
    assert all(float(t.abs().sum()) == 0.0 for t in named)
    assert float(stats.extras["motion/entropy"]) == 0.75 and float(stats.scratch) == 1.0
    assert stats.summary()["episode/return"] == 0.0  # no episode: the means read 0


def test_row_groups_total_each_groups_episodes_without_a_host_sync() -> None:
    stats = EpisodeStats(torch.device("cpu"))
    stats.set_terms([], ["time_out", "fell"])
    rng = np.random.default_rng(3)
    group = torch.zeros(6, dtype=torch.int64)
    stats.add_row_groups("motion", ["walk", "run", "jump"], group)
    ended_all, failed_all, length_all, group_all = [], [], [], []
    no = torch.zeros(6, dtype=torch.bool)
    for _ in range(20):
        group.copy_(torch.from_numpy(rng.integers(0, 2, 6)))  # group 2 ("jump") never ends an episode
        ended = torch.from_numpy(rng.random(6) < 0.4)
        failed = ended & torch.from_numpy(rng.random(6) < 0.5)
        length = torch.from_numpy(rng.integers(1, 500, 6))
        with no_host_sync():
            stats.accumulate(ended, failed, ended & ~failed, torch.zeros(6, 0), length,
                             torch.stack([ended & ~failed, failed], dim=1), no, no, no)  # fmt: skip
        for store, value in zip((ended_all, failed_all, length_all, group_all), (ended, failed, length, group),
                                strict=True):  # fmt: skip
            store.append(value.numpy().copy())
    ended, failed, length, group_ids = (np.concatenate(v) for v in (ended_all, failed_all, length_all, group_all))
    summary = stats.summary()
    for g, name in enumerate(["walk", "run", "jump"]):
        mine = ended & (group_ids == g)
        assert summary[f"motion/{name}/episodes"] == mine.sum()
        count = max(mine.sum(), 1)
        assert abs(summary[f"motion/{name}/episode_length"] - length[mine].sum() / count) < 1e-9
        assert abs(summary[f"motion/{name}/failure_rate"] - failed[mine].sum() / count) < 1e-12
    assert summary["motion/jump/episodes"] == 0 and summary["motion/walk/episodes"] > 0
    assert stats.accumulators()[-1] is stats.row_groups["motion"].totals  # summed over ranks, cleared
    stats.clear()
    assert stats.summary()["motion/walk/episodes"] == 0.0
