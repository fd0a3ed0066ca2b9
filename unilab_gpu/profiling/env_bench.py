"""One benchmark row: build a task's env at one size, time its real step, profile its phases."""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.profiling.forced_resets import forced_resets_override
from unilab_gpu.profiling.ms_stats import ms_stats
from unilab_gpu.profiling.phase_profile import PhaseProfile
from unilab_gpu.profiling.phase_profiler import PhaseProfiler
from unilab_gpu.profiling.physics_timer import PhysicsTimer


@dataclass(frozen=True)
class EnvBench:
    row: dict[str, Any]
    """JSON-ready: ``num_envs``, ``env_steps_per_s``, ``step_ms`` {median, p10, p90},
    ``phases_ms`` (mean per phase), ``physics_only_ms`` (median), ``overhead_ratio``,
    ``resets_per_step``, ``reset_capacity``, ``deferred_resets``, ``captured`` and
    ``capture_skipped`` (why a CUDA step ran eagerly, else ``None``); for a task on a generated
    terrain also ``physics_only_flat_ms`` (physics alone on the same task without its terrain
    section, on the scene's flat floor) and ``terrain_physics_ratio`` (rough over flat physics)."""
    profile: PhaseProfile
    config: dict[str, Any]
    """The resolved ``EnvCfg`` as a dict."""


def bench_env(
    task: str,
    num_envs: int,
    device: str = "cpu",
    *,
    steps: int = 100,
    warmup: int = 10,
    window: int = 10,
    compile: bool = True,
    capture: bool = True,
    force_resets: int = 0,
    overrides: Sequence[str] = (),
    seed: int = 0,
) -> EnvBench:
    """Build ``task`` with ``num_envs`` rows, warm it up, then time ``steps`` real steps,
    ``steps`` profiled steps and ``steps`` physics-only steps in interleaved windows.

    Actions are uniform in [-1, 1], drawn once and held, so the robots move and fall (and
    reset) as under an untrained policy, without random draws in the timed loop.

    Args:
      force_resets: if > 0, add :class:`ForcedResets` ending this many rows per step.
    """
    overrides = list(overrides) + ([forced_resets_override(force_resets)] if force_resets else [])
    # "auto": a device that cannot capture is measured eagerly (and says so in the row), not lost.
    env_capture = "auto" if capture else False
    env = make_env(task, num_envs, device, overrides, seed=seed, compile=compile, capture=env_capture, announce=False)
    env.reset()
    generator = torch.Generator().manual_seed(seed)
    actions = (torch.rand(num_envs, env.action_dim, generator=generator) * 2 - 1).to(env.device)
    profiler = PhaseProfiler(env, window=window, capture=env.captured, compiled=compile)
    profile = profiler.run(steps, actions, warmup=warmup)
    step = ms_stats(profile.env_step_ms)
    physics_only = float(np.median(profile.physics_only_ms))
    row = {
        "num_envs": num_envs,
        "env_steps_per_s": num_envs / (step["median"] / 1e3),
        "step_ms": {k: step[k] for k in ("median", "p10", "p90")},
        "phases_ms": profile.phase_means(),
        "profiled_step_ms": float(profile.profiled_step_ms.mean()),
        "physics_only_ms": physics_only,
        "overhead_ratio": step["median"] / physics_only,
        "resets_per_step": profile.resets_per_step,
        "reset_capacity": env.reset_capacity,
        "deferred_resets": int(env.reset_rows.deferred_count),
        "captured": env.captured,
        "capture_skipped": env.capture_skipped,
    }
    config = dataclasses.asdict(env.cfg)
    on_terrain = env.terrain is not None
    del env
    if on_terrain:
        flat_ms = _flat_physics_ms(
            task, num_envs, device, overrides, seed, compile, profiler.capture, steps, warmup, actions
        )
        row["physics_only_flat_ms"] = flat_ms
        row["terrain_physics_ratio"] = physics_only / flat_ms
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return EnvBench(row=row, profile=profile, config=config)


def _flat_physics_ms(
    task: str,
    num_envs: int,
    device: str,
    overrides: Sequence[str],
    seed: int,
    compile: bool,
    capture: bool,
    steps: int,
    warmup: int,
    actions: torch.Tensor,
) -> float:
    """Median ms of physics alone for ``task`` on the scene's flat floor (no terrain section), the
    robots driven as in the measured env: ``warmup`` real steps under the same held actions first,
    so they stand, fall and lie as they do there; timed as the measured env's physics is (from a
    CUDA graph of its own when ``capture``)."""
    cfg = load_task_cfg(task, overrides)
    cfg.terrain = None
    torch.manual_seed(seed)
    flat = ManagerBasedRlEnv(cfg, num_envs, device, compile=compile, capture=False, announce=False, name=task)
    flat.reset()
    for _ in range(max(warmup, 1)):
        flat.step(actions)
    ms = float(np.median(PhysicsTimer(flat.sim, flat.cfg.decimation, capture).time(steps)))
    del flat
    gc.collect()
    return ms
