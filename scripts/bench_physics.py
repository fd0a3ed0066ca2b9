"""Physics-only throughput of the G1 scene: decimation x MJWarp substeps, nothing else.

Writes one JSON with machine info and, per number of worlds, the median / p10 / p90 wall time of
one env step (``--substeps`` physics steps) and env-steps/s. On CUDA the step is captured as one
CUDA graph and timed with CUDA events; on CPU substeps replay from a Warp CPU graph and are timed
with perf_counter. ``--out`` is checked before any work (an existing file needs ``--force``) and
written atomically.

Usage:
  python scripts/bench_physics.py --device cpu --num-envs 16 64 256 --out docs/benchmarks/physics_cpu.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from unilab_gpu.cli.arguments import Bound, check_bounds, whole
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.profiling.physics_timer import PhysicsTimer
from unilab_gpu.sim.capture import capture_unsupported_reason
from unilab_gpu.sim.simulator import Simulator
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_json_atomic


def time_steps(sim: Simulator, substeps: int, steps: int) -> np.ndarray:
    """Milliseconds per env step, one entry per step (captured as one CUDA graph when possible)."""
    capture = sim.torch_device.type == "cuda" and capture_unsupported_reason(sim.torch_device) is None
    return PhysicsTimer(sim, substeps, capture).time(steps)


BOUNDS = {
    "--num-envs": Bound(1, integer=True, meaning="worlds of one row"),
    "--substeps": Bound(1, integer=True, meaning="physics steps per env step"),
    "--steps": Bound(1, integer=True, meaning="timed env steps per size"),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="bench_physics", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=whole, nargs="+", default=[16, 64, 256])
    parser.add_argument("--substeps", type=whole, default=4, help="physics steps per env step (decimation)")
    parser.add_argument("--steps", type=whole, default=30, help="timed env steps per size")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    try:  # found out now, not after minutes of measuring
        check_output(args.out, "--out", force=args.force, example="physics.json")
    except OutputPathError as error:
        raise SystemExit(f"bench_physics: error: {error}") from None

    results = []
    for num_envs in args.num_envs:
        sim = Simulator.from_file("g1", num_envs, args.device, keyframe="stand")
        ms = time_steps(sim, args.substeps, args.steps)
        sim.check()
        median = float(np.median(ms))
        row = {
            "num_envs": num_envs,
            "step_ms": {"median": median, "p10": float(np.percentile(ms, 10)), "p90": float(np.percentile(ms, 90))},
            "env_steps_per_s": num_envs / (median / 1e3),
            "substeps_per_s": num_envs * args.substeps / (median / 1e3),
        }
        print(f"{num_envs:6d} worlds: {median:9.3f} ms/step  {row['env_steps_per_s']:12.0f} env-steps/s", flush=True)
        results.append(row)

    report = {
        "benchmark": "physics_only",
        "model": "assets/robots/g1/scene.xml (stand keyframe)",
        "substeps": args.substeps,
        "timestep_s": 0.005,
        "steps": args.steps,
        "capture": args.device != "cpu" and capture_unsupported_reason(args.device) is None,
        "machine": machine_info(args.device),
        "results": results,
    }
    write_json_atomic(args.out, portable_paths(report))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
