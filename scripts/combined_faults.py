"""Combined-faults benchmark: exported policies in plain MuJoCo C with command latency and encoder
bias **together**, the pair the robustness grid (one fault at a time) cannot show.

Usage::

    python scripts/combined_faults.py POLICY.onnx [POLICY.onnx ...] --out faults.json \\
        [--commands 0.5,0,0 -0.4,0,0 ...] [--seconds 20] [--delay-steps 1] [--encoder-bias 0.02]
    python scripts/combined_faults.py TRACKING.onnx ... --motion CLIP --out faults.json
    python scripts/combined_faults.py PEER.onnx --format holosoma --out faults.json

Each policy runs once per velocity command (default: the grid's four, forward, backward, left,
right; a tracking policy runs its reference once from the first frame) and per sign of the encoder
bias (``+B`` and ``-B`` rad on every joint), each run with ``--delay-steps`` control steps of
latency, injected by the robot-side runtime as ``unilab-sim2sim --delay-steps D --encoder-bias B``
does. A row holds the run's falls, divergences and the task's errors (the sim-to-sim summary's
``*_error_*`` values). JSON with machine info, written atomically.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unilab_gpu.cli.arguments import MAX_COMMAND, MAX_SECONDS, Bound, check_bounds, take_command_lists, velocity_command
from unilab_gpu.deploy import DeploymentError, Faults
from unilab_gpu.deploy.foreign import format_names, open_policy
from unilab_gpu.export.sim2sim import Scenario, sim2sim
from unilab_gpu.export.sim2sim.robustness import VELOCITY_COMMANDS
from unilab_gpu.export.sim2sim.scenario import policy_kind
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_error, write_json_atomic

BOUNDS = {
    "--commands": Bound(-MAX_COMMAND, MAX_COMMAND, meaning="each of vx, vy, wz, m/s and rad/s"),
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="simulated seconds per run"),
    "--delay-steps": Bound(0, 10, integer=True, meaning="control steps of latency"),
    "--encoder-bias": Bound(0, 0.5, low_open=True, meaning="rad; both signs are run"),
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="combined_faults", description=__doc__.split("\n")[0])
    parser.add_argument("policies", nargs="+", type=Path)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--commands", nargs="*", type=velocity_command, default=None, help="vx,vy,wz each")
    parser.add_argument("--motion", default=None, help="tracking: the reference (default: the policy's)")
    parser.add_argument("--seconds", type=float, default=None, help="default: 20 s (velocity), the clip (tracking)")
    parser.add_argument("--delay-steps", type=int, default=1)
    parser.add_argument("--encoder-bias", type=float, default=0.02)
    parser.add_argument("--format", default=None, choices=format_names(), help="default: detected (docs/deploy.md)")
    parser.add_argument("--force", action="store_true")
    take_command_lists(parser)
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    return args


def fault_runs(policy: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """One row per command and bias sign: the run's faults, falls, divergences and errors."""
    tracking = policy_kind(open_policy(policy, args.format).metadata) == "tracking"
    commands: Sequence[Sequence[float] | None] = [None] if tracking else (args.commands or VELOCITY_COMMANDS)
    motion = args.motion if tracking else None
    rows = []
    for command in commands:
        for bias in (args.encoder_bias, -args.encoder_bias):
            faults = Faults(delay_steps=args.delay_steps, encoder_bias=bias)
            scenario = Scenario(policy, command, motion, args.seconds, faults=faults, format=args.format)
            report = sim2sim(scenario)
            summary = report["summary"]
            errors = {name: round(value, 4) for name, value in summary.items() if "_error_" in name}
            rows.append(
                {"policy": policy.stem, "command": report["command"], "faults": report["faults"]}
                | {"seconds": report["seconds"], "falls": summary["falls"], "diverged": summary["diverged"]}
                | errors
            )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_output(args.out, "--out", force=args.force, inputs=args.policies, example="faults.json")
        runs = [row for policy in args.policies for row in fault_runs(policy, args)]
    except (DeploymentError, OutputPathError, FileNotFoundError) as error:  # a bad policy or clip
        print(f"combined_faults: error: {error}", file=sys.stderr)
        return 2
    result = {
        "benchmark": "combined_faults",
        "what": (
            f"each policy in MuJoCo C, {args.delay_steps} control step(s) of latency together with an "
            f"encoder bias of +{args.encoder_bias:g} or -{args.encoder_bias:g} rad on every joint"
        ),
        "command": " ".join(["python", "scripts/combined_faults.py", *(sys.argv[1:] if argv is None else argv)]),
        "runs": runs,
        "machine": machine_info("cpu"),
    }
    try:
        write_json_atomic(args.out, portable_paths(result))
    except (OSError, OutputPathError) as error:  # a full disk
        print(f"combined_faults: error: --out: {write_error(error)}; nothing written", file=sys.stderr)
        return 1
    falls = sum(row["falls"] for row in runs)
    print(f"wrote {args.out}: {len(runs)} runs, {falls} falls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
