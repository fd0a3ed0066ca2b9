"""The doctor's run of its checks: what this machine and install do with the env step.

Each check returns a :class:`~unilab_gpu.doctor.report.Check` (``pass``, ``fail``, ``skip`` with
the reason, or ``info``). The checks live by group: the captured step's in
:mod:`~unilab_gpu.doctor.captured_step`, the host-sync audits in
:mod:`~unilab_gpu.doctor.sync_audits`, the data-parallel replica check here beside
:func:`fleet_checks`, which merges every rank's checks. :func:`run_checks` runs them in the order
that yields the key facts first and hands each one to a callback as soon as it is done (the report
is rewritten after every check: ``doctor.report``).

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

import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.doctor.captured_step import (
    check_capture,
    check_physics_only,
    check_replay_does_not_wait,
    check_replay_equals_eager,
    check_solver_ab,
    check_throughput,
)
from unilab_gpu.doctor.report import Check
from unilab_gpu.doctor.sync_audits import check_task_step, check_training_loop
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.distributed import DataParallel
from unilab_gpu.sim.capture import CaptureAbortedError, capture_unsupported_reason

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
