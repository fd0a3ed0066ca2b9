"""Physics-only A/B of MJWarp's two solver loops: is splitting our capture around physics worth it?

On CUDA the env's single graph runs MJWarp's solver for a fixed number of iterations
(``opt.graph_conditional = False``: worlds that converged skip the rest, but every iteration's
kernels are launched), because MJWarp's early-exit loop (``wp.capture_while``, a conditional node)
pauses the capture, which torch's capture cannot follow (``sim/capture.py``). The early exit could
only be had by capturing physics in a Warp graph of its own, between two torch graphs. This A/B
times both loops on the same worlds from the same seeded start, each captured by Warp itself
(``wp.ScopedCapture``, as MJWarp's own benchmarks do) and replayed with ``wp.capture_launch``, so
that only the solver loop differs. DESIGN.md sets the bar: split when the early exit saves more
than :data:`SPLIT_THRESHOLD` of physics time.

On CPU MJWarp ignores ``graph_conditional`` (``solver.py`` enables it on CUDA devices only): both
arms run the same loop, eagerly, which checks the mechanics and nothing else.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import warp as wp

from unilab_gpu.sim.capture import capture_unsupported_reason
from unilab_gpu.sim.device import resolve_device, torch_stream_scope
from unilab_gpu.sim.simulator import Simulator

SPLIT_THRESHOLD = 0.05
"""Fraction of physics time the early exit must save for a split capture to be worth it."""

ARMS = ("early_exit", "fixed")
"""``graph_conditional`` on (MJWarp's default) and off (what our single graph runs)."""


def split_capture_worth_it(early_exit_ms: float, fixed_ms: float) -> tuple[float, bool]:
    """The saving ``1 - early/fixed`` and whether it exceeds :data:`SPLIT_THRESHOLD`."""
    saving = 1.0 - early_exit_ms / fixed_ms
    return saving, saving > SPLIT_THRESHOLD


def solver_early_exit_ab(
    robot: str,
    num_envs: int,
    device: str | torch.device,
    substeps: int = 4,
    steps: int = 50,
    seed: int = 0,
    keyframe: str = "stand",
) -> dict[str, Any]:
    """Time ``substeps`` physics steps with each solver loop on the same seeded worlds.

    Returns a dict with ``early_exit_ms`` and ``fixed_ms`` (median per env step), the mean
    solver iterations each used (``*_mean_iterations``), ``max_iterations``, ``saving``,
    ``split_capture``, the largest ``|qpos|`` difference between the arms after the timed steps
    (``qpos_max_diff``: the same physics, up to contact-order rounding), and ``skipped`` (why the
    A/B could not run here, else ``None``).
    """
    device = resolve_device(device)
    result: dict[str, Any] = {"robot": robot, "num_envs": num_envs, "substeps": substeps, "steps": steps}
    result["device"], result["skipped"] = str(device), None
    if device.type == "cuda":
        reason = capture_unsupported_reason(device)
        if reason is None and not wp.is_conditional_graph_supported():
            reason = "Warp or the CUDA driver is older than 12.4: no conditional graph nodes, no early exit"
        if reason is not None:
            result["skipped"] = reason
            return result
    qpos = {}
    for arm in ARMS:
        sim = Simulator.from_file(robot, num_envs, device, keyframe=keyframe)
        sim.model.opt.graph_conditional = arm == "early_exit"
        generator = torch.Generator(device).manual_seed(seed)  # the same start in both arms
        noise = torch.randn(sim.state.qvel.shape, device=device, generator=generator)
        sim.state.qvel.add_(0.5 * noise)
        step = _captured_step(sim, substeps)
        ms = _time(step, sim.torch_device, steps)
        iterations = wp.to_torch(sim.data.solver_niter).float().mean()
        result[f"{arm}_ms"] = float(np.median(ms))
        result[f"{arm}_mean_iterations"] = float(iterations)
        result["max_iterations"] = int(sim.model.opt.iterations)
        qpos[arm] = sim.state.qpos.clone()
        del sim, step
    result["saving"], result["split_capture"] = split_capture_worth_it(result["early_exit_ms"], result["fixed_ms"])
    result["qpos_max_diff"] = float((qpos["early_exit"] - qpos["fixed"]).abs().max())
    return result


def _captured_step(sim: Simulator, substeps: int):
    """``sim.step(substeps)`` as Warp's own graph on CUDA (after one eager step loads the
    modules); on CPU the eager step (the simulator replays its own Warp CPU graph)."""
    sim.step(substeps)
    if sim.torch_device.type != "cuda":
        return lambda: sim.step(substeps)
    with torch_stream_scope(sim.wp_device):  # Warp's current stream is torch's, as in the env
        with wp.ScopedCapture(device=sim.wp_device, force_module_load=False) as capture:
            sim.step(substeps)
    graph = capture.graph

    def replay() -> None:
        with torch_stream_scope(sim.wp_device):
            wp.capture_launch(graph)

    return replay


def _time(step, device: torch.device, steps: int) -> np.ndarray:
    """Milliseconds per call of ``step``: CUDA events read after one synchronize, else perf_counter."""
    step()  # one more warm call (the graph's first launch uploads it)
    if device.type == "cuda":
        stream = torch.cuda.current_stream(device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
        events[0].record(stream)
        for i in range(steps):
            step()
            events[i + 1].record(stream)
        torch.cuda.synchronize(device)
        return np.array([events[i].elapsed_time(events[i + 1]) for i in range(steps)])
    ms = np.empty(steps)
    for i in range(steps):
        start = time.perf_counter()
        step()
        ms[i] = (time.perf_counter() - start) * 1e3
    return ms
