"""Sim-to-sim benchmark: one exported policy in plain MuJoCo C (``unilab-sim2sim``) beside the same
file in its training env (``unilab-play --onnx``, MJWarp, the ``_play`` variant of its task).

Usage::

    python scripts/sim2sim_benchmark.py POLICY.onnx --out docs/benchmarks/sim2sim/g1_velocity.json \\
        --commands 0.5,0,0 0,0,0.6 [--seconds 20] [--frame docs/images/sim2sim_g1_velocity.png]
    python scripts/sim2sim_benchmark.py POLICY.onnx --out docs/benchmarks/sim2sim/g1_tracking.json \\
        [--motion CLIP] [--frame ...]

Per velocity command (or once, for a tracking policy): the sim-to-sim report's summary and per
second rows, and the training env's statistics over the same time (16 worlds, no observation
noise, no pushes, the command fixed; tracking: every world from the clip's first frame). With
``--frame``, a PNG of the MuJoCo C run (the last frame of a ``--frame-seconds`` video of the
first case). JSON with machine info, written atomically.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import imageio.v3 as iio

from unilab_gpu.cli.arguments import MAX_COMMAND, MAX_SECONDS, Bound, check_bounds, take_command_lists, velocity_command
from unilab_gpu.cli.play import play
from unilab_gpu.deploy import DeploymentError, PolicyFile
from unilab_gpu.export.sim2sim import Scenario, sim2sim
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_atomic, write_json_atomic

TRAINING_ENV_KEYS = (
    "velocity/lin_vel_error_mps",
    "velocity/yaw_rate_error_radps",
    "tracking/body_pos_error_m",
    "tracking/body_pos_error_anchored_m",
    "episode/count",
    "episode/terminated_rate",
    "episode/length",
)
"""The training env's statistics kept beside the sim-to-sim numbers (those the task has)."""


def training_env(policy: Path, meta: dict, seconds: float, command: list[float] | None, motion: str | None) -> dict:
    """``unilab-play --onnx`` statistics of ``policy`` on the ``_play`` variant of its task."""
    # A *_sim2real task's randomizations are training's; its play variant is the base task's.
    task = meta["task"].removesuffix("_play").removesuffix("_sim2real") + "_play"
    overrides = []
    if command is not None:
        overrides.append("commands.twist.params.fixed=[{},{},{}]".format(*command))
    if motion is not None:
        overrides.append(f"commands.motion.params.motion_files=[{motion}]")
    steps = math.ceil(seconds / meta["control_dt"])
    stats = play(None, steps=steps, num_envs=16, device="cpu", task=task, onnx=policy, overrides=overrides)
    return {"task": task, "overrides": overrides, "worlds": 16, "steps": steps} | {
        key: stats[key] for key in TRAINING_ENV_KEYS if key in stats
    }


BOUNDS = {
    "--commands": Bound(-MAX_COMMAND, MAX_COMMAND, meaning="each of vx, vy, wz, m/s and rad/s"),
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="simulated seconds per case"),
    "--frame-seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="simulated seconds before the frame"),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sim2sim_benchmark", description=__doc__.split("\n")[0])
    parser.add_argument("policy", type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--commands", nargs="*", type=velocity_command, default=[], help="velocity commands vx,vy,wz")
    parser.add_argument("--motion", default=None, help="tracking: the reference (default: the policy's)")
    parser.add_argument("--seconds", type=float, default=None, help="default: 20 s (velocity), the clip (tracking)")
    parser.add_argument("--frame", type=Path, default=None, help="also write a PNG frame of the MuJoCo C run")
    parser.add_argument("--frame-seconds", type=float, default=4.0)
    parser.add_argument("--force", action="store_true")
    take_command_lists(parser)
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return benchmark(args, argv)
    except (DeploymentError, OutputPathError, OSError) as error:  # a bad policy or --seconds, a full disk
        print(f"sim2sim_benchmark: error: {error}", file=sys.stderr)
        return 2


def benchmark(args: argparse.Namespace, argv: list[str] | None) -> int:
    """Run the cases of ``args`` and write the report."""
    for option, path in (("--out", args.out), ("--frame", args.frame)):
        if path is not None:
            check_output(path, option, force=args.force, inputs=[args.policy], example=f"out{path.suffix}")
    meta = PolicyFile(args.policy).metadata
    commands = args.commands or [None]
    cases = []
    for command in commands:
        report = sim2sim(Scenario(args.policy, command, args.motion, args.seconds))
        env = training_env(args.policy, meta, report["seconds"], command, args.motion)
        cases.append({"command": command, "sim2sim": report, "training_env": env})
    if args.frame is not None:
        with tempfile.TemporaryDirectory() as folder:
            video = Path(folder) / "run.mp4"
            sim2sim(Scenario(args.policy, commands[0], args.motion, args.frame_seconds), video)
            last = None
            for last in iio.imiter(video):  # noqa: B007 (the last frame is kept)
                pass
            png = iio.imwrite("<bytes>", last, extension=".png")
        write_atomic(args.frame, lambda file: file.write(png))
    result = {
        "what": "the same exported policy in plain MuJoCo C (unilab-sim2sim) and in its training env (MJWarp)",
        "policy": str(args.policy),
        "task": meta["task"],
        "algo": meta["algo"],
        "command": " ".join(["python", "scripts/sim2sim_benchmark.py", *(argv or sys.argv[1:])]),
        "cases": cases,
        "machine": machine_info("cpu"),
    }
    # Committed reports name the model and clip relative to the repository, not by this machine's paths.
    write_json_atomic(args.out, portable_paths(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
