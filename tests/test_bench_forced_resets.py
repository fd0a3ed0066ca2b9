"""``ForcedResets`` / ``--force-resets K``: K rows, a different block each step, sync-free."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from unilab_gpu.cli.bench import main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.forced_resets import forced_resets_override
from unilab_gpu.utils.sync_audit import no_host_sync

# No natural episode ends within a test: only forced ones.
STEADY = ["episode_length_s=100", "randomize_initial_episode_length=false"]


def test_forced_resets_end_a_rotating_block_of_rows_every_step() -> None:
    n, k, steps = 10, 3, 7
    env = make_env("pendulum", num_envs=n, compile=False, overrides=[forced_resets_override(k), *STEADY])
    assert env.reset_capacity >= k
    env.reset()
    actions = torch.zeros(n, env.action_dim)
    seen = []
    with no_host_sync():
        for _ in range(steps):
            env.step(actions)
            seen.append(env.reset_rows.reset_mask.clone())
    for s, mask in enumerate(seen):
        expected = torch.zeros(n, dtype=torch.bool)
        expected[[(s * k + j) % n for j in range(k)]] = True
        assert torch.equal(mask, expected), s
        assert not torch.equal(mask, seen[s - 1]) or s == 0
    summary = env.stats.summary()
    assert summary["episode/count"] == steps * k
    assert summary["termination/forced_resets"] > 0
    assert torch.all(env.episode_length[seen[-1]] == 0)  # the last block starts new episodes


def test_bench_reports_forced_resets_and_their_deferral(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    base = ["--task", "pendulum", "--num-envs", "16", "--steps", "5", "--warmup", "2", "--no-compile"]
    base += ["--override", *STEADY, "--out", str(out)]
    main(base + ["--force-resets", "5"])
    row = json.loads(out.read_text())["results"][0]
    assert row["resets_per_step"] == 5.0 and row["deferred_resets"] == 0
    # 12 per step against a capacity of 8 (max(8, 16 // 8)): 8 are reset, the rest wait.
    main(base + ["--force-resets", "12", "--force"])  # the same --out again
    row = json.loads(out.read_text())["results"][0]
    assert row["reset_capacity"] == 8 and row["resets_per_step"] == 8.0 and row["deferred_resets"] > 0


def test_forced_resets_reject_a_bad_count() -> None:
    with pytest.raises(ValueError, match=r"rows_per_step must be an int in \[0, num_envs=4\], got 5"):
        make_env("pendulum", num_envs=4, compile=False, overrides=[forced_resets_override(5)])
