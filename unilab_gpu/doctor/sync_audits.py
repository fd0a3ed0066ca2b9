"""The doctor's host-sync audits: each task's eager step (what the CUDA graph records), resets
included, and the training loop's iteration (captured on CUDA), under ``utils.sync_audit``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from unilab_gpu.doctor.report import Check
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.utils.sync_audit import no_host_sync

AUDIT_ENVS, AUDIT_STEPS = 4, 6
"""Rows and steps of each task's step audit; episodes of 0.1 s make resets happen inside it."""


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
    from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
    from unilab_gpu.rl.trainer import TrainerSettings

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
