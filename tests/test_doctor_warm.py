"""unilab_gpu.doctor.warm: worker processes fill Warp's kernel cache with exactly the modules a
real run then loads (checked on CPU, where Warp compiles its CPU modules the same way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from unilab_gpu.doctor.warm import LoadOnly, owner

REAL_RUN = """
import torch
from unilab_gpu.envs.make_env import make_env
env = make_env("pendulum", 4, "cpu", compile=False, capture=False, announce=False)
env.reset()
for _ in range(2):
    env.step(torch.zeros(env.num_envs, env.action_dim))
"""


def test_owner_splits_modules_stably_over_workers() -> None:
    names = [f"mujoco_warp._src.m{i}" for i in range(200)]
    assert [owner(n, 4) for n in names] == [owner(n, 4) for n in names]
    assert set(owner(n, 4) for n in names) == {0, 1, 2, 3}
    assert all(owner(n, 1) == 0 for n in names)


def test_load_only_restores_warps_launch_functions() -> None:
    import warp as wp
    from warp._src import context

    saved = (wp.launch, context.launch, wp.capture_while, wp.capture_if)
    load_only = LoadOnly(0, 1)
    load_only.install()
    assert wp.launch is not saved[0] and context.launch is wp.launch
    load_only.remove()
    assert (wp.launch, context.launch, wp.capture_while, wp.capture_if) == saved


@pytest.mark.slow
def test_warmed_cache_leaves_nothing_for_the_real_run_to_compile(tmp_path) -> None:
    """Two workers warm a fresh kernel cache for the pendulum's step; a real run on that cache
    then loads every module from it ("(cached)" in Warp's log, never "(compiled)"), and between
    them the workers loaded each module the real run loads."""
    env = {**os.environ, "WARP_CACHE_PATH": str(tmp_path / "cache"), "CUDA_VISIBLE_DEVICES": ""}
    out = tmp_path / "warm.json"
    command = [sys.executable, "-m", "unilab_gpu.doctor.warm", "--device", "cpu", "--task", "pendulum"]
    command += ["--num-envs", "4", "--workers", "2", "--walks", "task", "--out", str(out)]
    warm = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert warm.returncode == 0, warm.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["complete"] and summary["failed_workers"] == [] and len(summary["results"]) == 2
    assert all(r["errors"] == {} for r in summary["results"])
    assert summary["compiled"] == summary["modules"] > 0  # a fresh cache: every load compiled
    warmed = {m.rsplit("@", 1)[0] for r in summary["results"] for m in r["modules"]}
    assert "warm: " in warm.stdout and f"{summary['modules']} Warp modules" in warm.stdout

    real = subprocess.run(
        [sys.executable, "-c", REAL_RUN],
        env={**env, "UNILAB_VERBOSE": "1"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert real.returncode == 0, real.stderr[-2000:]
    loads = [
        line for line in (real.stdout + real.stderr).splitlines() if line.startswith("Module ") and " load on " in line
    ]
    assert loads, real.stdout[-2000:]
    assert not [line for line in loads if "(compiled)" in line]
    assert {line.split()[1] for line in loads} <= warmed
