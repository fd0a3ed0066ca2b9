"""Update time and training throughput of the off-policy trainer: eager, compiled and (on CUDA)
captured updates, at named presets of G1 tracking.

For every preset and mode it builds the env, the agent (``configs/algo/<algo>.yaml`` with the
preset's overrides) and the trainer, fills replay with the warm-up iterations, runs
``--warm-updates`` updates and two iterations (``torch.compile`` and the CUDA graph captures
happen there) and then
measures, in this one process so that the ratios compare like with like:

- ``update_ms``: one update (replay sampling, losses, backward, optimizer, target and temperature
  steps: :class:`~unilab_gpu.rl.update_step.UpdateStep`), the median over ``--blocks`` blocks of
  ``--updates`` updates each, the device synchronized around each block;
- ``env_steps_per_s``: whole training iterations (act, env step, replay write, updates), from
  the median over ``--blocks`` blocks of ``--iterations`` iterations each.

Each also comes as the best block (``update_ms_min``, ``env_steps_per_s_best``), and the ratios
against eager are given for both.

The modes' blocks alternate, so a load that comes and goes on a shared machine weighs on every
mode alike.

Modes: ``eager`` (``algo.compile=false``), ``compiled`` (``algo.compile=true``, Inductor) and,
on CUDA only, ``captured`` (``algo.compile=true``, ``algo.capture_update=true``) and
``captured_eager`` (the captured update without ``torch.compile``, where Triton is missing). The env step is
the same in every mode (eager terms; captured as one CUDA graph on CUDA). Each row says how its
updates actually ran, ``update_mode`` (``captured`` only where the CUDA graphs were made). ``--out``
is checked before any work and written atomically after every mode's warm-up and every timed block
(``complete: false`` until the end), and on ``SIGINT``/``SIGTERM`` (``interrupted: true``, exit
status 130), so that a cut run keeps what it measured; the ratios go to stdout too.

Presets:
  learning_curve  FlashSAC at the CPU learning curve's settings (16 envs, batch 512, 2 updates
                  per step, critic width 128: docs/benchmarks/learning/g1_tracking_flashsac.json)
  main_job        FlashSAC as ``python -m unilab_gpu`` runs on a CPU (its CPU_OVERRIDES: 16 envs,
                  batch 256, 1 update per step)
  gpu             FlashSAC at its G1 defaults, 4096 envs (batch 2048, 2 updates per step)

Usage:
  python scripts/bench_update.py --device cpu --presets learning_curve main_job --out docs/benchmarks/update_cpu.json
  python scripts/bench_update.py --device cuda --presets gpu --modes eager compiled captured --out update_gpu.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.__main__ import CPU_ENVS, CPU_OVERRIDES
from unilab_gpu.cli.arguments import SEED, Bound, check_bounds, whole
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.off_policy_config import steps_before_updates
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.training.config import algo_preset
from unilab_gpu.training.signals import stop_signals_interrupt
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_json_atomic

PRESETS: dict[str, dict[str, Any]] = {
    "learning_curve": {
        "algo": "flashsac",
        "num_envs": 16,
        "overrides": {
            "batch_size": 512,
            "updates_per_step": 2,
            "buffer_capacity_per_env": 8192,
            "critic_hidden_dim": 128,
        },
    },
    "main_job": {
        "algo": "flashsac",
        "num_envs": CPU_ENVS,
        "overrides": {
            key.removeprefix("algo."): int(value)
            for key, value in (item.split("=", 1) for item in CPU_OVERRIDES)
            if key.startswith("algo.")
        },
    },
    "gpu": {"algo": "flashsac", "num_envs": 4096, "overrides": {}},
}
"""Preset name -> algorithm, envs and ``algo.*`` overrides (see the module docstring)."""

MODES = {
    "eager": {"compile": False, "capture_update": False},
    "compiled": {"compile": True, "capture_update": False},
    "captured": {"compile": True, "capture_update": True},
    "captured_eager": {"compile": False, "capture_update": True},
}
"""Mode name -> the two ``algo`` switches it sets."""


def synchronized(device: torch.device) -> Callable[[], None]:
    """A function that waits for ``device``'s queued work (nothing to wait for on a CPU)."""
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def build_trainer(preset: dict[str, Any], mode: str, device: str, seed: int) -> OffPolicyTrainer:
    env = make_env("g1_tracking", num_envs=preset["num_envs"], device=device, compile=False, seed=seed, announce=False)
    values = algo_preset(preset["algo"])  # configs/algo/<algo>.yaml with its defaults list resolved
    values.update(preset["overrides"], **MODES[mode])
    if not values.get("learning_rate_decay_steps"):  # 0: "the whole run", which a benchmark does not have
        values["learning_rate_decay_steps"] = 100_000
    cfg = algo_config(values)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(iterations=1, log_every=10**9, seed=seed)
    return OffPolicyTrainer(env, agent, settings)


def timed_ms(run: Callable[[], None], count: int, wait: Callable[[], None]) -> float:
    """Milliseconds per call of ``count`` calls of ``run``, the device synchronized around them."""
    wait()
    start = time.perf_counter()
    for _ in range(count):
        run()
    wait()
    return 1e3 * (time.perf_counter() - start) / count


def measure_preset(
    preset_name: str, args: argparse.Namespace, publish: Callable[[list[dict[str, Any]]], None] = lambda rows: None
) -> list[dict[str, Any]]:
    """One row per mode of ``args.modes``. The modes' timed blocks alternate (eager, compiled, ...,
    eager, compiled, ...), so that a load that comes and goes on a shared machine weighs on every
    mode alike and the ratios stay fair. ``publish`` gets the rows so far after every mode's
    warm-up and every round of timed blocks."""
    preset = PRESETS[preset_name]
    trainers, warm_s = {}, {}
    update_ms: dict[str, list[float]] = {mode: [] for mode in args.modes}
    iteration_ms: dict[str, list[float]] = {mode: [] for mode in args.modes}

    def rows() -> list[dict[str, Any]]:
        return [
            preset_row(preset_name, mode, trainer, warm_s[mode], update_ms[mode], iteration_ms[mode])
            for mode, trainer in trainers.items()
        ]

    for mode in args.modes:
        torch.manual_seed(args.seed)
        trainer = build_trainer(preset, mode, args.device, args.seed)
        wait = synchronized(trainer.device)
        # The iterations before the first update: the env resets, random actions fill replay.
        trainer.settings.iterations = steps_before_updates(trainer.algo.warmup_steps, trainer.algo.n_step) - 1
        trainer.train()
        start = time.perf_counter()
        for _ in range(args.warm_updates):
            trainer.update_step()
        for _ in range(2):  # the policy's first actions (compiled in the compiled modes)
            trainer.run_iteration()
        wait()
        trainers[mode], warm_s[mode] = trainer, time.perf_counter() - start
        publish(rows())
    for _ in range(args.blocks):
        for mode, trainer in trainers.items():
            wait = synchronized(trainer.device)
            update_ms[mode].append(timed_ms(trainer.update_step, args.updates, wait))
            iteration_ms[mode].append(timed_ms(trainer.run_iteration, args.iterations, wait))
        publish(rows())
    for row in rows():
        print(
            f"{preset_name:15s} {row['mode']:9s} update {row['update_ms']:9.2f} ms   {row['env_steps_per_s']:10.0f} "
            f"env-steps/s (warm-up {row['warm_up_s']:.0f} s; updates {row['update_mode']})",
            flush=True,
        )
    return rows()


def preset_row(
    preset_name: str,
    mode: str,
    trainer: OffPolicyTrainer,
    warm_s: float,
    update_ms: list[float],
    iteration_ms: list[float],
) -> dict[str, Any]:
    """A mode's row from its timed blocks so far (timings ``None`` before the first block)."""
    preset = PRESETS[preset_name]
    row = {
        "preset": preset_name,
        "mode": mode,
        "algo": preset["algo"],
        "num_envs": preset["num_envs"],
        "overrides": preset["overrides"],
        "batch_size": trainer.algo.batch_size,
        "updates_per_step": trainer.algo.updates_per_step,
        "captured": bool(trainer.update_step.graphs),
        "update_mode": trainer.update_step.mode,
        "warm_up_s": warm_s,
        "update_ms_blocks": list(update_ms),
        "iteration_ms_blocks": list(iteration_ms),
    }
    timed = bool(update_ms and iteration_ms)
    iteration = statistics.median(iteration_ms) if timed else None
    row.update(
        update_ms=statistics.median(update_ms) if timed else None,
        update_ms_min=min(update_ms) if timed else None,
        iteration_ms=iteration,
        env_steps_per_s=preset["num_envs"] / (iteration / 1e3) if timed else None,
        env_steps_per_s_best=preset["num_envs"] / (min(iteration_ms) / 1e3) if timed else None,
    )
    return row


RATIOS = {
    "update_time_over_eager": "update_ms",
    "best_update_time_over_eager": "update_ms_min",
    "env_steps_per_s_over_eager": "env_steps_per_s",
    "best_env_steps_per_s_over_eager": "env_steps_per_s_best",
}
"""Ratio name (after the mode's name) -> the row value it divides by eager's. The medians, and the
best blocks: on a loaded machine the least disturbed block of each mode is the fairer estimate."""


def ratios(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per preset, each mode's :data:`RATIOS` against the eager mode's (rows not timed yet left out)."""
    out: dict[str, dict[str, float]] = {}
    for row in rows:
        eager = next((r for r in rows if r["preset"] == row["preset"] and r["mode"] == "eager"), None)
        if eager is None or row["mode"] == "eager" or row.get("update_ms") is None or eager.get("update_ms") is None:
            continue
        for name, key in RATIOS.items():
            out.setdefault(row["preset"], {})[f"{row['mode']}_{name}"] = row[key] / eager[key]
    return out


BOUNDS = {
    "--warm-updates": Bound(1, integer=True, meaning="untimed updates"),
    "--updates": Bound(1, integer=True, meaning="updates per timed block"),
    "--blocks": Bound(1, integer=True, meaning="timed blocks"),
    "--iterations": Bound(1, integer=True, meaning="training iterations per timed block"),
    "--seed": SEED,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bench_update", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--presets", nargs="+", choices=sorted(PRESETS), default=["learning_curve", "main_job"])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=["eager", "compiled"])
    parser.add_argument("--warm-updates", type=whole, default=4, help="untimed updates first (compile, capture)")
    parser.add_argument("--updates", type=whole, default=10, help="updates per timed block")
    parser.add_argument("--blocks", type=whole, default=5, help="timed blocks of updates (the median is reported)")
    parser.add_argument("--iterations", type=whole, default=5, help="training iterations per timed block")
    parser.add_argument("--seed", type=whole, default=0)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    try:  # a CUDA device this machine lacks is one line, not a traceback from the first trainer
        args.device = str(resolve_device(args.device))
    except ValueError as error:
        raise SystemExit(f"bench_update: error: --device: {error}") from None
    captured = [mode for mode in args.modes if mode.startswith("captured")]
    if captured and not args.device.startswith("cuda"):
        raise SystemExit(f"bench_update: error: --modes {captured[0]} needs a CUDA --device, got '{args.device}'")
    try:  # found out now, not after minutes of measuring
        check_output(args.out, "--out", force=args.force, example="update.json")
    except OutputPathError as error:
        raise SystemExit(f"bench_update: error: {error}") from None

    head = {
        "benchmark": "update",
        "task": "g1_tracking",
        "presets": {name: PRESETS[name] for name in args.presets},
        "settings": {k: getattr(args, k) for k in ("warm_updates", "updates", "blocks", "iterations", "seed")},
        "machine": machine_info(args.device),
    }
    done: list[dict[str, Any]] = []  # the finished presets' rows
    latest: list[dict[str, Any]] = []  # the running preset's rows so far

    def publish(rows: list[dict[str, Any]], **status: Any) -> None:
        latest[:] = rows
        report = {**head, "results": done + rows, "ratios": ratios(done + rows), "complete": False, **status}
        write_json_atomic(args.out, portable_paths(report))

    try:
        with stop_signals_interrupt():  # a cut from outside ends as Ctrl-C does
            for preset in args.presets:
                done.extend(measure_preset(preset, args, publish))
                latest.clear()
    except KeyboardInterrupt:
        publish(latest, interrupted=True)
        print(f"bench_update: INTERRUPTED; what was measured is in {args.out}")
        print(f"bench_update: ratios {json.dumps(ratios(done + latest))}", flush=True)
        raise SystemExit(130) from None
    publish([], complete=True)
    print(f"bench_update: ratios {json.dumps(ratios(done))}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
