"""The doctor's checks: what this machine and install do with the env step.

Each check returns a :class:`Check` (``pass``, ``fail``, ``skip`` with the reason, or ``info``);
:func:`run_checks` runs them in the order that yields the key facts first and hands each one to
a callback as soon as it is done (the report is rewritten after every check: ``doctor.report``).

On CUDA the order is: physics alone at ``num_envs``; the whole step captured (and its capture
ids); replay equals eager over steps that include resets (MJWarp's deterministic mode); no host
sync during replay; the captured step's throughput and phases; MJWarp's early-exit solver against
the fixed-iteration solver the capture uses (physics only); then the host-sync audits of every
task's step and of the training loop (on CUDA with the env step and the update captured). A
capture failure that ends the process's use of CUDA (``CaptureAbortedError``, a ``SystemExit``)
fails the capture check and skips the other CUDA checks with that reason; the report is still
written.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.physics_timer import PhysicsTimer
from unilab_gpu.profiling.solver_ab import solver_early_exit_ab
from unilab_gpu.rl.distributed import DataParallel
from unilab_gpu.sim.capture import CaptureAbortedError, capture_unsupported_reason
from unilab_gpu.utils.sync_audit import no_host_sync

AUDIT_ENVS, AUDIT_STEPS = 4, 6
"""Rows and steps of each task's step audit; episodes of 0.1 s make resets happen inside it."""

REPLAY_STEPS = 100
"""Steps of the replay-equals-eager comparison (episodes of 1 s: resets happen inside it)."""

REPLAY_TOLERANCE = 1e-5
"""Largest |replay - eager| accepted in deterministic mode (same kernels, same order: 0 expected)."""

KEY_TASK = "g1_tracking"
"""The default task of the CUDA checks (capture, replay, throughput, physics alone, solver A/B)."""

CUDA_CHECKS = (
    "physics only",
    "whole step captures",
    "replay equals eager (deterministic)",
    "no host sync during replay",
    "throughput and phases",
    "solver early exit A/B",
)
"""The checks only a CUDA device can run, in the order :func:`run_checks` runs them."""


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
    data = {
        "host_sync_ops_per_step": counts["host_sync"] / AUDIT_STEPS,
        "host_to_device_copies_per_step": counts["host_to_device"] / AUDIT_STEPS,
        "first_violations": counts["first"],
        "episodes_ended": resets,
    }
    clean = counts["host_sync"] == 0 and counts["host_to_device"] == 0
    detail = (
        f"{counts['host_sync']} host-sync ops, {counts['host_to_device']} host-to-device copies in {AUDIT_STEPS} "
        f"steps ({resets} episode ends)"
    )
    return Check(f"step audit: {task}", "pass" if clean else "fail", detail, data)


def check_training_loop(algo: str, device: torch.device) -> Check:
    """Act, env step, replay add and updates of a tiny pendulum run under the host-sync audit.

    On CUDA the iteration runs as it trains there at its fastest: the env step and the update
    (``algo.capture_update``) replayed from CUDA graphs, under torch's sync debug mode ``error``
    as well, so the audit covers the whole iteration between two logging points. On the CPU the
    same code runs directly and every op is audited.
    """
    from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
    from unilab_gpu.rl.trainer import OffPolicyTrainer, TrainerSettings

    cuda = device.type == "cuda"
    capture = "auto" if cuda else False
    env = make_env("pendulum", num_envs=4, device=device, compile=False, capture=capture, announce=False)
    values = {**TINY_CONFIGS[algo], "warmup_steps": 2, "buffer_capacity_per_env": 16, "capture_update": cuda}
    cfg = algo_config(values, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    # Enough iterations for each actor phase's warm-up runs and capture (update_step.WARM_RUNS).
    trainer = OffPolicyTrainer(env, agent, TrainerSettings(iterations=10, log_every=1000))
    trainer.train()  # warm-up, the first updates and the captures outside the audit
    iterations = 3
    with no_host_sync(record=True) as audit:
        if cuda:
            torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(iterations):
                trainer.run_iteration()
        finally:
            if cuda:
                torch.cuda.set_sync_debug_mode("default")
    counts = _violations(audit)
    total = counts["host_sync"] + counts["host_to_device"]
    captured = {"env_step_captured": env.captured, "update_captured": bool(trainer.update_step.graphs)}
    data = {"per_iteration_syncs": total / iterations, "first_violations": counts["first"], **captured}
    detail = f"{total} host syncs / host-to-device copies in {iterations} iterations (act, step, replay, update)"
    missed = missed_captures(captured) if cuda else []
    if cuda:
        detail += f"; env step captured: {env.captured}, update captured: {captured['update_captured']}"
    if missed:
        detail += f"; requested but not captured: {', '.join(missed)}"
    return Check(f"training loop audit: {algo}", "pass" if total == 0 and not missed else "fail", detail, data)


def missed_captures(captured: dict[str, bool]) -> list[str]:
    """The captures a CUDA training-loop audit asked for (env step, update) that did not happen: an
    audit of uncaptured iterations would pass without showing that the captured loop is sync-free."""
    names = {"env_step_captured": "env step", "update_captured": "update"}
    return [names[key] for key, done in captured.items() if not done]


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


def check_data_parallel(dp: DataParallel, device: torch.device, updates: int = 3) -> Check:
    """Replicas stay identical: a tiny SAC agent built from this rank's own seed (so the ranks
    start apart), attached to the fleet, updated on rank-specific random batches; afterwards every
    rank's actor and critic parameters must equal rank 0's bit for bit."""
    from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
    from unilab_gpu.rl.off_policy import BATCH_KEYS

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


class CudaUnusable(Exception):
    """A check ended this process's use of CUDA (``CaptureAbortedError``); the message says why."""


def guarded(name: str, run: Callable[[], Check]) -> Check:
    """``run()``, or a failed check naming the error: one crashing check does not stop the others.

    ``CaptureAbortedError`` is a ``SystemExit`` (so that ordinary ``except Exception`` fallbacks
    never run on the CUDA state it leaves): it becomes a failed check too, and :class:`CudaUnusable`
    is raised from it for :func:`run_checks` to skip the remaining CUDA checks.
    """
    try:
        return run()
    except CaptureAbortedError as error:
        raise CudaUnusable(str(error)) from error
    except Exception as error:
        where = traceback.extract_tb(error.__traceback__)[-1]
        return Check(name, "fail", f"{type(error).__name__}: {error} (at {Path(where.filename).name}:{where.lineno})")


def run_checks(
    device: torch.device,
    tasks: Sequence[str],
    num_envs: int,
    compile: bool,
    done: Callable[[Check], None] = lambda check: None,
    starting: Callable[[str], None] = lambda name: None,
    capture_task: str = KEY_TASK,
) -> list[Check]:
    """Every check this device can run, key facts first; the rest as ``skip`` with the reason.

    Args:
      tasks: tasks whose step is audited for host syncs.
      num_envs: envs of the CUDA checks (the replay comparison uses at most 1024).
      compile: ``torch.compile`` the env's terms in the capture and replay checks.
      done: called with each check as soon as it is finished (the report rewrites itself).
      starting: called with each check's name before it starts (a cut run names the one it was in).
      capture_task: the task of the physics, capture, replay, throughput and solver A/B checks (default
        ``g1_tracking``; e.g. ``go2_velocity_rough`` to check a terrain inside the captured step).
    """
    checks: list[Check] = []
    running: list[str] = []

    def record(check: Check) -> None:
        checks.append(check)
        done(check)

    def run(name: str, fn: Callable[[], Check]) -> None:
        running[:] = [name]
        starting(name)
        record(guarded(name, fn))

    if device.type == "cuda":
        try:
            _run_cuda_checks(capture_task, device, num_envs, compile, run, record)
        except CudaUnusable as error:
            failed = running[0]
            record(Check(failed, "fail", str(error)))
            for name in CUDA_CHECKS[CUDA_CHECKS.index(failed) + 1 :]:
                record(Check(name, "skip", "not checked: CUDA state untrusted after the failed capture"))
            return checks  # the audits below would run on that state too
    for task in _progress(tasks):
        run(f"step audit: {task}", lambda task=task: check_task_step(task, device))
    for algo in ("sac", "flashsac"):
        run(f"training loop audit: {algo}", lambda algo=algo: check_training_loop(algo, device))
    if device.type != "cuda":
        reason = "not checked: no CUDA device (run unilab-doctor on the GPU machine)"
        for name in CUDA_CHECKS:
            if name != "throughput and phases":
                record(Check(name, "skip", reason))
        run("throughput and phases", lambda: check_throughput(_small_env(capture_task, device)))
    return checks


def _run_cuda_checks(
    task: str,
    device: torch.device,
    num_envs: int,
    compile: bool,
    run: Callable[[str, Callable[[], Check]], None],
    record: Callable[[Check], None],
) -> None:
    """The CUDA checks in :data:`CUDA_CHECKS` order on ``task`` (see :func:`run_checks`)."""
    physics, capture, replay, no_sync, throughput, solver = CUDA_CHECKS
    run(physics, lambda: check_physics_only(task, num_envs, device))
    if (reason := capture_unsupported_reason(device)) is not None:
        for name in (capture, replay, no_sync, throughput):
            record(Check(name, "fail", reason))
        run(solver, lambda: check_solver_ab(task, num_envs, device))
        return
    captured: list[Any] = []

    def capture_check() -> Check:
        check, env = check_capture(task, num_envs, device, compile)
        captured.append(env)
        return check

    run(capture, capture_check)
    # Eager terms by default: the captured kernels are the same either way (compiled == eager is
    # tested on CPU), and a cold Inductor compile costs minutes at first contact.
    run(replay, lambda: check_replay_equals_eager(task, min(num_envs, 1024), device, compile))
    if captured:
        run(no_sync, lambda: check_replay_does_not_wait(captured[0]))
        run(throughput, lambda: check_throughput(captured[0]))
        captured.clear()
    else:
        record(Check(no_sync, "skip", "not checked: the step did not capture"))
        record(Check(throughput, "skip", "not checked: the step did not capture"))
    run(solver, lambda: check_solver_ab(task, num_envs, device))


def _small_env(task: str, device: torch.device):
    """The task at 16 envs, eager terms: what a CPU measures in seconds."""
    env = make_env(task, 16, device, compile=False, announce=False)
    env.reset()
    return env


def _progress(tasks: Sequence[str]) -> Iterator[str]:
    for i, task in enumerate(tasks):
        print(f"unilab-doctor: [{i + 1}/{len(tasks)}] auditing the {task} step ...", flush=True)
        yield task
