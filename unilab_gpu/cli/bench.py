"""``unilab-bench``: env-steps/s, per-phase ms and the physics-only ratio of a task's env step.

For each ``--num-envs`` the env is built and warmed up; then, in interleaved windows, its real
step is timed (the captured CUDA graph on CUDA), a profiling variant of the step is timed phase
by phase (CUDA events inside a captured graph on CUDA, ``perf_counter`` on CPU) and physics
alone is timed on the same worlds. Writes one JSON report (``config`` is the resolved task
config of the first size; only ``num_envs`` differs between sizes); ``--plot`` also draws it.

Example:
  unilab-bench --task g1_stand --num-envs 16 64 --device cpu --steps 50 --out bench.json --plot bench.png

Under ``torchrun --nproc_per_node=N -m unilab_gpu.cli.bench ...`` every rank measures its own env
on its own device (``cuda:LOCAL_RANK``) at the same time; rank 0 writes the report, whose rows
add ``ranks`` (every rank's row) and ``total_env_steps_per_s`` (their sum).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.cli.arguments import SEED, Bound, check_bounds, whole
from unilab_gpu.paths import list_tasks
from unilab_gpu.profiling.env_bench import bench_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.distributed import DataParallel, launch_from_env, rank_device
from unilab_gpu.sim.capture import capture_unsupported_reason
from unilab_gpu.sim.device import VERBOSE_ENV, resolve_device
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_atomic, write_json_atomic
from unilab_gpu.utils.progress import progress_bar

BOUNDS = {
    "--num-envs": Bound(1, integer=True, meaning="each size"),
    "--steps": Bound(1, integer=True, meaning="timed steps per size"),
    "--warmup": Bound(0, integer=True, meaning="untimed steps"),
    "--window": Bound(1, integer=True, meaning="steps per profiling window"),
    "--seed": SEED,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.task not in list_tasks():
        raise SystemExit(f"--task: unknown task '{args.task}'; available: {list_tasks()}")
    if not 0 <= args.force_resets <= min(args.num_envs):
        raise SystemExit(
            f"--force-resets must be in [0, {min(args.num_envs)}] (the smallest --num-envs), got {args.force_resets}"
        )
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        raise SystemExit("--plot needs matplotlib (pip install matplotlib, or the dev extra)")
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"
    launch = launch_from_env()
    try:
        args.device = str(resolve_device(args.device) if launch is None else rank_device(args.device, launch))
    except ValueError as error:
        raise SystemExit(f"--device: {error}") from None
    # Found out now, not after minutes of measuring.
    for option, path, example in (("--out", args.out, "bench.json"), ("--plot", args.plot, "bench.png")):
        if path is not None:
            try:
                check_output(path, option, force=args.force, example=example)
            except OutputPathError as error:
                raise SystemExit(str(error)) from None
    dp = DataParallel.start(launch, torch.device(args.device)) if launch is not None else None
    main_rank = dp is None or dp.is_main
    capture = not args.no_capture and capture_unsupported_reason(args.device) is None
    compile = not args.no_compile
    mode = "+".join(m for m, on in (("compiled", compile), ("captured", capture)) if on) or "eager"
    report: dict[str, Any] = {
        "benchmark": "env_step",
        "command": "unilab-bench " + shlex.join(sys.argv[1:] if argv is None else list(argv)),
        "task": args.task,
        "device": args.device,
        "mode": mode,
        "compile": compile,
        "capture": capture,
        "steps": args.steps,
        "warmup": args.warmup,
        "window": args.window,
        "force_resets": args.force_resets,
        "overrides": args.override,
        "machine": machine_info(args.device),
        "config": None,
        "results": [],
    }
    plot_error: str | None = None
    for num_envs in progress_bar(args.num_envs, "unilab-bench", "size") if main_rank else args.num_envs:
        if main_rank:
            print(f"unilab-bench: {args.task} x {num_envs} envs on {args.device} ({mode}) ...", flush=True)
        try:
            bench = bench_env(
                args.task,
                num_envs,
                args.device,
                steps=args.steps,
                warmup=args.warmup,
                window=args.window,
                compile=compile,
                capture=capture,
                force_resets=args.force_resets,
                overrides=args.override,
                seed=args.seed,
            )
        except (ValueError, KeyError, TypeError) as error:  # a bad --override: the env config names the key
            raise SystemExit(f"unilab-bench: error: --task {args.task} --num-envs {num_envs}: {error}") from None
        row = bench.row
        if dp is not None:  # every rank measured at once; rank 0 reports them all and their sum
            ranks = dp.all_gather_object(row, "bench rows")
            row = {**row, "ranks": ranks, "total_env_steps_per_s": sum(r["env_steps_per_s"] for r in ranks)}
            if not main_rank:
                continue
            print(f"  {len(ranks)} ranks: {row['total_env_steps_per_s']:12,.0f} env-steps/s in total", flush=True)
        report["config"] = report["config"] or bench.config
        report["results"].append(row)
        print(
            f"  {row['env_steps_per_s']:12,.0f} env-steps/s  {row['step_ms']['median']:9.3f} ms/step  "
            f"physics only {row['physics_only_ms']:9.3f} ms  overhead x{row['overhead_ratio']:.2f}  "
            f"resets/step {row['resets_per_step']:.2f}",
            flush=True,
        )
        if "physics_only_flat_ms" in row:
            print(
                f"  on flat ground: physics only {row['physics_only_flat_ms']:9.3f} ms "
                f"(terrain x{row['terrain_physics_ratio']:.2f})",
                flush=True,
            )
        # Rewritten after every size, so a later size failing or timing out keeps the earlier ones.
        write_json_atomic(args.out, portable_paths(report))
        if args.plot is not None and plot_error is None:
            try:
                _save_plot(report, args.plot)
            except Exception as error:  # the measurements matter more than the chart: keep going
                plot_error = f"{type(error).__name__}: {error}"
                print(f"unilab-bench: warning: --plot {args.plot} failed ({plot_error}); measuring on", file=sys.stderr)
    if dp is not None and not main_rank:  # waits until rank 0 has written the report, then ends the process
        dp.finish(0, "unilab-bench")
    if plot_error is not None:
        print(f"wrote {args.out}; the plot failed: {plot_error}", file=sys.stderr)
    else:
        print(f"wrote {args.out}" + (f" and {args.plot}" if args.plot is not None else ""))
    status = 0 if plot_error is None else 1
    if dp is not None:
        dp.finish(status, "unilab-bench")
    return status


def _save_plot(report: dict[str, Any], path: Path) -> None:
    from unilab_gpu.profiling.plots import plot_bench  # matplotlib only when asked for

    figure = plot_bench(report)
    write_atomic(path, lambda file: figure.savefig(file, format=path.suffix.lstrip(".") or "png", dpi=110))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unilab-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--task", default="g1_stand", help="a configs/task/<task>.yaml name")
    parser.add_argument("--num-envs", type=whole, nargs="+", default=[64], help="one row per size")
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    parser.add_argument("--steps", type=whole, default=100, help="timed steps per size (and profiled steps)")
    parser.add_argument("--warmup", type=whole, default=10, help="untimed steps first")
    parser.add_argument("--window", type=whole, default=10, help="steps per profiling window (one sync each)")
    parser.add_argument("--out", type=Path, required=True, help="JSON report path")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the report to this PNG")
    parser.add_argument("--force", action="store_true", help="replace existing --out / --plot files")
    parser.add_argument("--force-resets", type=whole, default=0, metavar="K", help="end K rows every step")
    parser.add_argument("--no-compile", action="store_true", help="run the manager phases eagerly")
    parser.add_argument("--no-capture", action="store_true", help="on CUDA, launch the step without a CUDA graph")
    parser.add_argument("--verbose", action="store_true", help="show Warp's log lines (module loads)")
    parser.add_argument("--override", nargs="*", default=[], help="Hydra overrides of the task config")
    parser.add_argument("--seed", type=whole, default=0)
    return parser


if __name__ == "__main__":
    sys.exit(main())
