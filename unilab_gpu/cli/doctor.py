"""``unilab-doctor``: a self-check to run on your own machine before training.

It answers, for this machine and install: does every task's step stay free of host syncs and
host-to-device copies, does the training loop, and on a CUDA device: does the whole step
capture as one CUDA graph, does the replay give the eager step's numbers (MJWarp's
deterministic mode), does a replay never wait for the GPU, how fast is the captured step
against physics alone, and where does its time go (CUDA events inside the graph). What a CPU
cannot check is reported as ``skip`` with the reason. Prints a verdict table and writes JSON::

    unilab-doctor                       # the default device (cuda if available)
    unilab-doctor --device cpu --out doctor.json
    torchrun --nproc_per_node=N -m unilab_gpu.cli.doctor   # every rank on its cuda:LOCAL_RANK

Under ``torchrun`` every rank runs the checks on its own device at the same time, and one more:
data-parallel updates keep every rank's networks identical. Rank 0 writes the report: a check
fails if it fails on any rank, ``ranks`` holds every rank's checks, and the throughput check
gives each rank's env-steps/s and their sum.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab_gpu.cli.bench import write_json_atomic
from unilab_gpu.envs.make_env import list_tasks, make_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.distributed import DataParallel, launch_from_env, rank_device
from unilab_gpu.sim.capture import capture_unsupported_reason
from unilab_gpu.sim.device import VERBOSE_ENV, resolve_device
from unilab_gpu.utils.sync_audit import no_host_sync

AUDIT_ENVS, AUDIT_STEPS = 4, 6
"""Rows and steps of each task's step audit; episodes of 0.1 s make resets happen inside it."""

REPLAY_STEPS = 100
"""Steps of the replay-equals-eager comparison."""

FALLBACK_TOLERANCE = 1e-5
"""Largest |replay - eager| accepted in deterministic mode (same kernels, same order: 0 expected)."""


@dataclass
class Check:
    """One line of the verdict: ``pass``, ``fail``, ``skip`` (could not be checked here) or ``info``."""

    name: str
    status: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


def _violations(audit) -> dict[str, Any]:
    by_kind = {"host_sync": 0, "host_to_device": 0}
    for violation in audit.violations:
        by_kind[violation.kind] += 1
    return {**by_kind, "first": [str(v) for v in audit.violations[:3]]}


def _per_step(counts: dict[str, Any], steps: int) -> dict[str, Any]:
    return {
        "host_sync_ops_per_step": counts["host_sync"] / steps,
        "host_to_device_copies_per_step": counts["host_to_device"] / steps,
        "first_violations": counts["first"],
    }


def check_task_step(task: str, device: torch.device, overrides: Sequence[str] = ()) -> Check:
    """The eager step (what the CUDA graph records) under the host-sync audit, resets included."""
    env = make_env(
        task,
        num_envs=AUDIT_ENVS,
        device=device,
        overrides=["episode_length_s=0.1", *overrides],
        compile=False,
        capture=False,
        announce=False,
    )
    actions = torch.zeros(env.num_envs, env.action_dim, device=env.device)
    env.reset()
    env.step(actions)  # first use records Warp's CPU graphs / loads modules outside the audit
    with no_host_sync(record=True) as audit:
        for _ in range(AUDIT_STEPS):
            env.step(actions)
    counts = _violations(audit)
    resets = int(env.stats.episodes)
    data = {**_per_step(counts, AUDIT_STEPS), "episodes_ended": resets}
    clean = counts["host_sync"] == 0 and counts["host_to_device"] == 0
    detail = (
        f"{counts['host_sync']} host-sync ops, {counts['host_to_device']} host-to-device copies in {AUDIT_STEPS} "
        f"steps ({resets} episode ends)"
    )
    return Check(f"step audit: {task}", "pass" if clean else "fail", detail, data)


def check_training_loop(algo: str, device: torch.device) -> Check:
    """Act, env step, replay add and updates of a tiny pendulum run under the host-sync audit."""
    from unilab_gpu.rl.trainer import TINY_CONFIGS, Trainer, TrainerSettings, algo_config, make_agent

    env = make_env("pendulum", num_envs=4, device=device, compile=False, capture=False, announce=False)
    cfg = algo_config({**TINY_CONFIGS[algo], "warmup_steps": 2, "buffer_capacity_per_env": 16}, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(iterations=4, log_every=1000)
    trainer = Trainer(env, agent, settings)
    trainer.train()  # warm-up and the first updates outside the audit
    iterations = 3
    with no_host_sync(record=True) as audit:
        for _ in range(iterations):
            trainer.run_iteration()
    counts = _violations(audit)
    total = counts["host_sync"] + counts["host_to_device"]
    data = {"per_iteration_syncs": total / iterations, "first_violations": counts["first"]}
    detail = f"{total} host syncs / host-to-device copies in {iterations} iterations (act, step, replay, update)"
    return Check(f"training loop audit: {algo}", "pass" if total == 0 else "fail", detail, data)


def check_capture(task: str, num_envs: int, device: torch.device, compile: bool) -> tuple[Check, Any]:
    """Whether the whole step captures (``capture=True`` raises with the reason if not), under one
    CUDA capture id from torch's ``capture_begin`` to its ``capture_end`` (``sim.capture``: the id
    torch's graph pool and RNG state are keyed by; ``CudaGraph`` refuses a graph whose id changed)."""
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


def _rollout(env, actions: torch.Tensor) -> dict[str, torch.Tensor]:
    rewards, ends, obs = [], [], []
    for a in actions:
        result = env.step(a)
        rewards.append(result.reward.clone())
        ends.append(result.terminated | result.truncated)
        obs.append(result.obs["policy"].sum(dim=1))
    return {"reward": torch.stack(rewards), "ended": torch.stack(ends).float(), "obs": torch.stack(obs)}


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
        runs.append(_rollout(env, actions))
        del env
    eager, replayed = runs
    worst = {k: float((replayed[k] - eager[k]).abs().max()) for k in eager}
    ok = all(v <= FALLBACK_TOLERANCE for v in worst.values())
    ended = int(eager["ended"].sum())
    detail = f"max |replay - eager| over {REPLAY_STEPS} steps ({ended} episode ends): " + ", ".join(
        f"{k} {v:.2g}" for k, v in worst.items()
    )
    return Check("replay equals eager (deterministic)", "pass" if ok else "fail", detail, {"max_abs_diff": worst})


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


def check_data_parallel(dp: DataParallel, device: torch.device, updates: int = 3) -> Check:
    """Replicas stay identical: a tiny SAC agent built from this rank's own seed (so the ranks
    start apart), attached to the fleet, updated on rank-specific random batches; afterwards every
    rank's actor and critic parameters must equal rank 0's bit for bit."""
    from unilab_gpu.rl.off_policy import BATCH_KEYS
    from unilab_gpu.rl.trainer import TINY_CONFIGS, algo_config, make_agent

    torch.manual_seed(1000 + dp.rank)
    agent = make_agent(algo_config(TINY_CONFIGS["sac"], compile=False), {"policy": 3}, 1, 4, device)
    dp.attach(agent)
    generator = torch.Generator(device).manual_seed(dp.rank)
    size = agent.cfg.batch_size
    shapes = {"action": (size, 1), "reward": (size,), "discount": (size,)}
    for _ in range(updates):
        batch = {key: torch.rand(shapes.get(key, (size, 3)), device=device, generator=generator) for key in BATCH_KEYS}
        agent.update(batch)
    flat = torch.cat([p.detach().reshape(-1) for m in (agent.actor, agent.critic) for p in m.parameters()])
    spread = float((dp.all_gather(flat, "doctor parameter check") - flat).abs().max())
    detail = f"{dp.world_size} ranks, {updates} updates on different batches: largest parameter difference {spread:g}"
    return Check("data-parallel replicas", "pass" if spread == 0.0 else "fail", detail, {"max_difference": spread})


def fleet_checks(dp: DataParallel, checks: list[Check]) -> list[Check]:
    """Rank 0's view of every rank's ``checks`` (same names, same order): a check's status is
    the worst over the ranks; throughput rows list every rank and their sum."""
    ranks = dp.all_gather_object([asdict(c) for c in checks], "doctor reports")
    order = {"fail": 3, "pass": 2, "info": 1, "skip": 0}
    merged = []
    for i, check in enumerate(checks):
        per_rank = [r[i] for r in ranks]
        status = max((c["status"] for c in per_rank), key=order.__getitem__)
        failing = [rank for rank, c in enumerate(per_rank) if c["status"] == "fail"]
        detail = check.detail + (f" (fails on ranks {failing})" if failing else "")
        data = {**check.data, "ranks": per_rank}
        if check.name == "throughput and phases" and all("env_steps_per_s" in c["data"] for c in per_rank):
            total = sum(c["data"]["env_steps_per_s"] for c in per_rank)
            data["total_env_steps_per_s"] = total
            detail = f"{len(per_rank)} ranks, {total:,.0f} env-steps/s in total; rank 0: {check.detail}"
        merged.append(Check(check.name, status, detail, data))
    return merged


def _guarded(name: str, run: Callable[[], Check]) -> Check:
    try:
        return run()
    except Exception as error:  # a check that crashes is a failed check, and the others still run
        where = traceback.extract_tb(error.__traceback__)[-1]
        return Check(name, "fail", f"{type(error).__name__}: {error} (at {Path(where.filename).name}:{where.lineno})")


def run_checks(device: torch.device, tasks: Sequence[str], num_envs: int, compile: bool) -> list[Check]:
    """Every check that this device can run, in order; the rest as ``skip`` with the reason."""
    checks = [
        _guarded(f"step audit: {task}", lambda task=task: check_task_step(task, device)) for task in _progress(tasks)
    ]
    checks += [
        _guarded(f"training loop audit: {a}", lambda a=a: check_training_loop(a, device)) for a in ("sac", "flashsac")
    ]
    cuda_checks = ("whole step captures", "replay equals eager (deterministic)", "no host sync during replay")
    if device.type != "cuda":
        reason = "not checked: no CUDA device (run unilab-doctor on the GPU machine)"
        checks += [Check(name, "skip", reason) for name in cuda_checks]
        checks.append(_guarded("throughput and phases", lambda: check_throughput(_small_env(device))))
        return checks
    if (reason := capture_unsupported_reason(device)) is not None:
        checks += [Check(name, "fail", reason) for name in cuda_checks]
        return checks
    captured: list[Any] = []

    def capture() -> Check:
        check, env = check_capture("g1_tracking", num_envs, device, compile)
        captured.append(env)
        return check

    checks.append(_guarded("whole step captures", capture))
    # Eager terms: the captured kernels are the same either way (compiled == eager is tested on
    # CPU), and it spares two more Inductor compiles on a cold cache.
    replay_envs = min(num_envs, 1024)
    checks.append(
        _guarded(cuda_checks[1], lambda: check_replay_equals_eager("g1_tracking", replay_envs, device, False))
    )
    if captured:
        checks.append(_guarded(cuda_checks[2], lambda: check_replay_does_not_wait(captured[0])))
        checks.append(_guarded("throughput and phases", lambda: check_throughput(captured[0])))
        captured.clear()
    else:
        checks.append(Check(cuda_checks[2], "skip", "not checked: the step did not capture"))
        checks.append(Check("throughput and phases", "skip", "not checked: the step did not capture"))
    return checks


def _small_env(device: torch.device):
    """Tracking at 16 envs, eager terms: what a CPU measures in seconds."""
    env = make_env("g1_tracking", 16, device, compile=False, announce=False)
    env.reset()
    return env


def _progress(tasks: Sequence[str]):
    for i, task in enumerate(tasks):
        print(f"unilab-doctor: [{i + 1}/{len(tasks)}] auditing the {task} step ...", flush=True)
        yield task


def report(device: torch.device, checks: list[Check], seconds: float) -> dict[str, Any]:
    failed = [c.name for c in checks if c.status == "fail"]
    return {
        "tool": "unilab-doctor",
        "verdict": "fail" if failed else "pass",
        "failed": failed,
        "device": str(device),
        "seconds": seconds,
        "machine": machine_info(str(device)),
        "checks": [asdict(c) for c in checks],
    }


def table(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    return "\n".join(f"{c.status.upper():5}  {c.name:<{width}}  {c.detail}" for c in checks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Check this machine: host syncs, CUDA capture, replay, speed.")
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    parser.add_argument("--out", default="doctor.json", help="JSON report (default: doctor.json)")
    parser.add_argument("--num-envs", type=int, default=4096, help="envs of the capture and throughput checks (CUDA)")
    parser.add_argument("--tasks", nargs="*", default=None, help="tasks to audit (default: all)")
    parser.add_argument("--no-compile", action="store_true", help="CUDA checks without torch.compile (faster start)")
    parser.add_argument("--verbose", action="store_true", help="show Warp's log lines (module loads)")
    args = parser.parse_args(argv)
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"
    launch = launch_from_env()
    try:
        device = resolve_device(args.device) if launch is None else rank_device(args.device, launch)
    except ValueError as error:
        raise SystemExit(f"--device: {error}") from None
    tasks = args.tasks if args.tasks else list_tasks()
    unknown = sorted(set(tasks) - set(list_tasks()))
    if unknown:
        raise SystemExit(f"--tasks: unknown {unknown}; available: {list_tasks()}")
    if args.num_envs < 1:
        raise SystemExit(f"--num-envs must be >= 1, got {args.num_envs}")
    out = Path(args.out)
    if not out.parent.exists():
        raise SystemExit(f"--out: folder {out.parent} does not exist")
    dp = DataParallel.start(launch, device) if launch is not None else None
    where = f" rank {dp.rank}/{dp.world_size}" if dp is not None else ""
    print(f"unilab-doctor:{where} {platform.node()} on {device}, torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    checks = run_checks(device, tasks, args.num_envs, compile=device.type == "cuda" and not args.no_compile)
    if dp is not None:
        checks.append(_guarded("data-parallel replicas", lambda: check_data_parallel(dp, device)))
        checks = fleet_checks(dp, checks)
        if not dp.is_main:  # waits until rank 0 has written the report, then ends the process
            dp.finish(0 if all(c.status != "fail" for c in checks) else 1, "unilab-doctor")
    result = report(device, checks, time.perf_counter() - start)
    write_json_atomic(out, result)
    print(table(checks))
    print(f"unilab-doctor: {result['verdict'].upper()} in {result['seconds']:.0f} s; report written to {out}")
    status = 0 if result["verdict"] == "pass" else 1
    if dp is not None:
        dp.finish(status, "unilab-doctor")
    return status


if __name__ == "__main__":
    sys.exit(main())
