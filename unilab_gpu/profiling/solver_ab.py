"""Physics-only A/B of MJWarp's two solver loops: is splitting our capture around physics worth it?

On CUDA the env's single graph runs MJWarp's solver for a fixed number of iterations
(``opt.graph_conditional = False``: worlds that converged skip the rest, but every iteration's
kernels are launched), because MJWarp's early-exit loop (``wp.capture_while``, a conditional node)
pauses the capture, which torch's capture cannot follow (``sim/capture.py``). The early exit could
only be had by capturing physics in a Warp graph of its own, between two torch graphs. This A/B
times both loops inside the same task's step, on the same seeded worlds driven by the same random
actions with rows ending every step (so the solver sees walking, falling and freshly reset robots,
not a quiet standing batch): each arm's physics is captured by Warp itself (``wp.ScopedCapture``,
as MJWarp's own benchmarks do) and replayed with ``wp.capture_launch`` in place of the env's
physics call, the rest of the step runs eagerly, and CUDA events around the physics phase time it
(``profiling.phase_clock``). Only the solver loop differs. DESIGN.md sets the bar: split when the
early exit saves more than :data:`SPLIT_THRESHOLD` of physics time.

Each arm runs on a torch stream of its own, as the env's capture does: CUDA refuses to capture
on the legacy default stream, which is torch's current stream unless one is entered.

On CPU MJWarp ignores ``graph_conditional`` (``solver.py`` enables it on CUDA devices only): both
arms run the same loop, eagerly, which checks the mechanics and nothing else.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import warp as wp

from unilab_gpu.envs.env_step import STEP_PHASES
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.profiling.forced_resets import forced_resets_override
from unilab_gpu.profiling.phase_clock import make_phase_clock
from unilab_gpu.sim.capture import capture_unsupported_reason
from unilab_gpu.sim.device import resolve_device, torch_stream_scope, warp_stream

SPLIT_THRESHOLD = 0.05
"""Fraction of physics time the early exit must save for a split capture to be worth it."""

ARMS = ("early_exit", "fixed")
"""``graph_conditional`` on (MJWarp's default) and off (what our single graph runs)."""

RESETS_PER_STEP = 1 / 32
"""Fraction of rows forced to end every step (besides the task's own terminations)."""


def split_capture_worth_it(early_exit_ms: float, fixed_ms: float) -> tuple[float, bool]:
    """The saving ``1 - early/fixed`` and whether it exceeds :data:`SPLIT_THRESHOLD`."""
    saving = 1.0 - early_exit_ms / fixed_ms
    return saving, saving > SPLIT_THRESHOLD


def solver_arm_env(task: str, num_envs: int, device: str | torch.device, arm: str, seed: int = 0) -> ManagerBasedRlEnv:
    """``task``'s eager env (no compile, no capture) for one arm: ``graph_conditional`` set for
    ``arm`` and :data:`RESETS_PER_STEP` of the rows forced to end every step. The warm tool
    (``doctor.warm``) builds the same env, so that it compiles the modules this A/B loads."""
    if arm not in ARMS:
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")
    rows = max(1, round(num_envs * RESETS_PER_STEP))
    env = make_env(
        task,
        num_envs,
        device,
        overrides=[forced_resets_override(rows)],
        seed=seed,
        compile=False,
        capture=False,
        announce=False,
    )
    env.sim.model.opt.graph_conditional = arm == "early_exit"
    return env


def solver_early_exit_ab(
    task: str,
    num_envs: int,
    device: str | torch.device,
    steps: int = 50,
    warmup: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Time the physics of ``task``'s step with each solver loop on the same seeded worlds.

    Every step draws uniform random actions in ``[-1, 1]`` (one generator per arm, same seed) and
    ends :data:`RESETS_PER_STEP` of the rows. Returns a dict with ``early_exit_ms`` and
    ``fixed_ms`` (median physics time per env step), the mean solver iterations of the last
    step's worlds (``*_mean_iterations``), ``max_iterations``, ``episodes_ended`` per arm,
    ``saving``, ``split_capture``, the largest ``|qpos|`` difference between the arms at the end
    (``qpos_max_diff``: 0 on CPU, where both arms run the same loop; on CUDA the arms stop their
    solvers at different iterations, so their worlds drift apart), and ``skipped`` (why the A/B
    could not run here, else ``None``).
    """
    device = resolve_device(device)
    result: dict[str, Any] = {"task": task, "num_envs": num_envs, "steps": steps, "warmup": warmup}
    result.update(device=str(device), skipped=None, resets_per_step=max(1, round(num_envs * RESETS_PER_STEP)))
    if device.type == "cuda":
        reason = capture_unsupported_reason(device)
        if reason is None and not wp.is_conditional_graph_supported():
            reason = "Warp or the CUDA driver is older than 12.4: no conditional graph nodes, no early exit"
        if reason is not None:
            result["skipped"] = reason
            return result
    qpos = {}
    for arm in ARMS:
        env = solver_arm_env(task, num_envs, device, arm, seed)
        with _arm_stream(device):
            env.reset()
            ms = _time_physics(env, steps, warmup, seed)
            iterations = wp.to_torch(env.sim.data.solver_niter).float().mean()
            result[f"{arm}_ms"] = float(np.median(ms))
            result[f"{arm}_mean_iterations"] = float(iterations)
            result[f"{arm}_episodes_ended"] = float(env.stats.episodes)
            result["substeps"] = env.cfg.decimation
            result["max_iterations"] = int(env.sim.model.opt.iterations)
            qpos[arm] = env.sim.state.qpos.clone()
        env.close()
        del env
    result["saving"], result["split_capture"] = split_capture_worth_it(result["early_exit_ms"], result["fixed_ms"])
    result["qpos_max_diff"] = float((qpos["early_exit"] - qpos["fixed"]).abs().max())
    return result


@contextlib.contextmanager
def _arm_stream(device: torch.device) -> Iterator[None]:
    """On CUDA: a fresh torch stream made current for the arm (after the caller's work), and the
    caller's stream made to wait for it at the end; on CPU nothing."""
    if device.type != "cuda":
        yield
        return
    with torch.cuda.device(device):
        caller = torch.cuda.current_stream(device)
        stream = torch.cuda.Stream(device)
        stream.wait_stream(caller)
        try:
            with torch.cuda.stream(stream):
                yield
        finally:
            caller.wait_stream(stream)
            torch.cuda.synchronize(device)


def _time_physics(env: ManagerBasedRlEnv, steps: int, warmup: int, seed: int) -> np.ndarray:
    """Milliseconds of the physics phase of each of ``steps`` env steps (after ``warmup`` steps),
    with the arm's physics replayed from its own Warp graph on CUDA."""
    generator = torch.Generator(env.device).manual_seed(seed)
    clock = make_phase_clock(STEP_PHASES, steps, env.device)
    with _physics_replayed(env):
        for i in range(warmup + steps):
            actions = torch.rand(env.num_envs, env.action_dim, device=env.device, generator=generator) * 2 - 1
            env.set_actions(actions)
            if i < warmup:
                env.run_step_body()
                continue
            clock.start(i - warmup)
            env.run_step_body(clock.marker(i - warmup))
        ms = clock.read()
    return ms[:, STEP_PHASES.index("physics")]


@contextlib.contextmanager
def _physics_replayed(env: ManagerBasedRlEnv) -> Iterator[None]:
    """The env's ``sim.step`` replaced, for the block, by a replay of Warp's own graph of it.

    The early-exit loop needs Warp's capture (its conditional nodes); eagerly, ``capture_while``
    would read its condition back to the host at every iteration. On CPU the simulator's step is
    kept (it already replays Warp CPU graphs). Must be entered on the arm's (non-default) stream.
    """
    sim = env.sim
    if sim.torch_device.type != "cuda":
        yield
        return
    substeps = env.cfg.decimation
    sim.step(substeps)  # loads the modules (eagerly: capture_while syncs here, outside the timing)
    stream = warp_stream(torch.cuda.current_stream(sim.torch_device))
    with torch_stream_scope(sim.wp_device):  # Warp's current stream is the arm's torch stream
        with wp.ScopedCapture(stream=stream, force_module_load=False) as capture:
            sim.step(substeps)
    graph = capture.graph

    def replay(count: int = substeps) -> None:
        if count != substeps:
            raise ValueError(f"the captured physics runs {substeps} substeps, asked for {count}")
        with torch_stream_scope(sim.wp_device):
            wp.capture_launch(graph)

    replaced: Callable[..., None] = replay
    sim.step = replaced  # type: ignore[method-assign]  # this instance only; removed below
    try:
        yield
    finally:
        del sim.step
