"""The doctor's checks of the captured step on ``capture_task``: physics alone, whether the whole
step captures, replay equals eager (MJWarp's deterministic mode), no host sync during replay, the
step's throughput and phases (on the CPU too), and MJWarp's early-exit solver against the
fixed-iteration one the capture uses."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from unilab_gpu.doctor.report import Check
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.physics_timer import PhysicsTimer
from unilab_gpu.profiling.solver_ab import solver_early_exit_ab
from unilab_gpu.sim.capture import capture_unsupported_reason

REPLAY_STEPS = 100
"""Steps of the replay-equals-eager comparison (episodes of 1 s: resets happen inside it)."""

REPLAY_TOLERANCE = 1e-5
"""Largest |replay - eager| accepted in deterministic mode (same kernels, same order: 0 expected)."""


def check_physics_only(task: str, num_envs: int, device: torch.device, steps: int = 50) -> Check:
    """The task's physics alone (``decimation`` MJWarp substeps, captured on CUDA): env-steps/s.

    Measured before anything else touches the step, so that it is known even if capture fails.
    """
    env = make_env(task, num_envs, device, compile=False, capture=False, announce=False)
    env.reset()
    timer = PhysicsTimer(env.sim, env.cfg.decimation, capture=capture_unsupported_reason(device) is None)
    timer.time(3)  # warm
    ms = float(np.median(timer.time(steps)))
    rate = num_envs / (ms / 1e3)
    detail = f"{task} x {num_envs}: {env.cfg.decimation} substeps in {ms:.3f} ms, {rate:,.0f} env-steps/s"
    data = {"task": task, "num_envs": num_envs, "physics_ms": ms, "physics_only_env_steps_per_s": rate}
    return Check("physics only", "info", detail, data)


def check_capture(task: str, num_envs: int, device: torch.device, compile: bool) -> tuple[Check, Any]:
    """Whether the whole step captures (``capture=True`` raises with the reason if not), in one
    capture that nothing paused (``sim.capture``: torch's graph pool and RNG state are keyed by
    the capture id read at ``capture_begin``; ``CudaGraph`` refuses a paused capture)."""
    start = time.perf_counter()
    env = make_env(task, num_envs, device, compile=compile, capture=True, announce=False)
    env.reset()
    seconds = time.perf_counter() - start
    begin, end = env._graph.capture_ids  # the env's CudaGraph
    detail = (
        f"{task} x {num_envs}: captured in {seconds:.0f} s; capture id {begin} after capture_begin, {end} before "
        "capture_end"
    )
    status = "pass" if begin == end != 0 else "fail"
    return Check("whole step captures", status, detail, {"capture_ids": [begin, end]}), env


def rollout(env, actions: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per step of ``actions`` ``(steps, num_envs, action_dim)``: ``reward``, ``ended`` (terminated or
    truncated) and the policy observation summed per row, each stacked ``(steps, num_envs)``."""
    rewards, ends, obs = [], [], []
    for a in actions:
        result = env.step(a)
        rewards.append(result.reward.clone())
        ends.append(result.terminated | result.truncated)
        obs.append(result.obs["policy"].sum(dim=1))
    return {"reward": torch.stack(rewards), "ended": torch.stack(ends).float(), "obs": torch.stack(obs)}


def compare_rollouts(
    eager: dict[str, torch.Tensor],
    replayed: dict[str, torch.Tensor],
    name: str = "replay equals eager (deterministic)",
    tolerance: float = REPLAY_TOLERANCE,
    rtol: float = 0.0,
) -> Check:
    """The verdict ``name`` on two rollouts of ``(steps, num_envs)`` tensors (``eager`` the reference).

    Passes only if every output agrees within ``tolerance + rtol * |eager|`` **and** episodes
    ended inside the compared steps: a comparison without resets would not test the reset path, the
    part of the step most likely to differ (compaction, staging, row writes, kinematics refresh).
    ``max_abs_diff`` reports the largest plain difference of each output.
    """
    worst = {k: float((replayed[k] - eager[k]).abs().max()) for k in eager}
    excess = {k: float(((replayed[k] - eager[k]).abs() - rtol * eager[k].abs()).max()) for k in eager}
    steps_with_resets = int((eager["ended"].sum(dim=1) > 0).sum())
    ended = int(eager["ended"].sum())
    equal = all(v <= tolerance for v in excess.values())
    steps = eager["ended"].shape[0]
    detail = f"max |{name.split(' equals ')[0]} - eager| over {steps} steps, {steps_with_resets} with resets "
    detail += f"({ended} episode ends): " + ", ".join(f"{k} {v:.2g}" for k, v in worst.items())
    if not steps_with_resets:
        detail += "; FAILED: no step of the comparison reset a row"
    data = {"max_abs_diff": worst, "steps": steps, "steps_with_resets": steps_with_resets, "episode_ends": ended}
    data.update(tolerance=tolerance, rtol=rtol)
    return Check(name, "pass" if equal and steps_with_resets else "fail", detail, data)


def check_replay_equals_eager(task: str, num_envs: int, device: torch.device, compile: bool) -> Check:
    """100 steps with resets, eager and replayed, in MJWarp's deterministic mode, same seed."""
    generator = torch.Generator(device).manual_seed(0)
    actions = None
    runs = []
    for capture in (False, True):
        env = make_env(
            task,
            num_envs,
            device,
            overrides=["episode_length_s=1.0"],
            seed=5,
            compile=compile,
            capture=capture,
            deterministic=True,
            announce=False,
        )
        env.reset()
        if actions is None:  # its own generator: drawing it moves none of the env's random numbers
            actions = 0.3 * torch.randn(REPLAY_STEPS, num_envs, env.action_dim, device=device, generator=generator)
        runs.append(rollout(env, actions))
        del env
    return compare_rollouts(*runs)


def check_replay_does_not_wait(env) -> Check:
    """The eager step under ``set_sync_debug_mode("error")``, then host vs device time of replays.

    A replay that waited for the GPU (a sync outside torch's view, e.g. a Warp host loop) would
    take as long on the host as on the device; an asynchronous one takes a launch.
    """
    actions = torch.zeros(env.num_envs, env.action_dim, device=env.device)
    torch.cuda.synchronize(env.device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            env.set_actions(actions)
            env.run_step_body()  # the code the graph recorded, eagerly: torch syncs raise here
    finally:
        torch.cuda.set_sync_debug_mode("default")
    steps = 50
    stream = torch.cuda.current_stream(env.device)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(env.device)
    begin.record(stream)
    host_start = time.perf_counter()
    for _ in range(steps):
        env.step(actions)
    host_ms = (time.perf_counter() - host_start) * 1e3 / steps
    end.record(stream)
    torch.cuda.synchronize(env.device)
    device_ms = begin.elapsed_time(end) / steps
    ok = host_ms < max(0.5 * device_ms, 0.2)
    detail = f"eager step ran under sync debug 'error'; replay: host {host_ms:.3f} ms vs device {device_ms:.3f} ms"
    return Check(
        "no host sync during replay", "pass" if ok else "fail", detail, {"host_ms": host_ms, "device_ms": device_ms}
    )


def check_throughput(env) -> Check:
    """The env's real step vs physics alone in one run, and the per-phase split (CUDA events
    inside the captured graph on CUDA, ``perf_counter`` on CPU)."""
    from unilab_gpu.profiling.phase_profiler import PhaseProfiler

    profile = PhaseProfiler(env, window=10).run(steps=60, warmup=5)
    physics_ms = float(np.median(profile.physics_only_ms))
    row = {
        "task": env.name,
        "num_envs": env.num_envs,
        "mode": profile.mode,
        "env_steps_per_s": profile.env_steps_per_s,
        "physics_only_env_steps_per_s": env.num_envs / (physics_ms / 1e3),
        "overhead_ratio": profile.overhead_ratio,
        "phases_ms": profile.phase_means(),
    }
    phases = ", ".join(f"{k} {v:.2f}" for k, v in row["phases_ms"].items())
    detail = (
        f"{env.name} x {env.num_envs} ({profile.mode}): {row['env_steps_per_s']:,.0f} env-steps/s vs physics only "
        f"{row['physics_only_env_steps_per_s']:,.0f} (x{row['overhead_ratio']:.2f}); phases ms: {phases}"
    )
    return Check("throughput and phases", "info", detail, row)


def check_solver_ab(task: str, num_envs: int, device: torch.device) -> Check:
    """MJWarp's early-exit solver (conditional nodes, Warp's own capture) against the
    fixed-iteration solver our single-graph capture uses: the physics of ``task``'s step on a
    batch that walks with random actions and resets rows every step, same worlds and seed.
    Above a 5 % saving of physics time, splitting our capture around the physics is worth it."""
    result = solver_early_exit_ab(task, num_envs, device)
    if result["skipped"]:
        return Check("solver early exit A/B", "skip", f"not checked: {result['skipped']}", result)
    detail = (
        f"{task} x {num_envs}, {result['substeps']} substeps, random actions, {result['resets_per_step']} forced "
        f"resets per step: early exit {result['early_exit_ms']:.3f} ms "
        f"({result['early_exit_mean_iterations']:.1f} iterations on average) vs fixed {result['fixed_ms']:.3f} ms "
        f"(up to {result['max_iterations']}): saves {100 * result['saving']:.1f} % of physics; "
        + ("split the capture around physics" if result["split_capture"] else "keep one graph")
    )
    return Check("solver early exit A/B", "info", detail, result)
