"""``unilab-sim2sim``: run an exported policy in plain MuJoCo (C) from its ONNX file alone.

Usage::

    unilab-sim2sim POLICY.onnx [--command vx,vy,wz] [--motion FILE] [--seconds S]
                   [--video OUT.mp4] [--out report.json] [--model MJCF] [--force] [--format NAME]
                   [--terrain NAME|FILE.yaml] [--terrain-level L] [--terrain-column C | --sub-terrain NAME]
    unilab-sim2sim POLICY.onnx --robustness [--command vx,vy,wz] [--motion FILE] [--seconds S]
                   [--out grid.json] [--plot grid.png] [--model MJCF] [--force] [--format NAME]

The run itself is :func:`unilab_gpu.export.sim2sim.sim2sim` of a
:class:`~unilab_gpu.export.sim2sim.Scenario` (this module parses and prints). The policy runs
through the robot-side runtime (:mod:`unilab_gpu.deploy`: observation, action map, PD targets and
rates from the file's metadata) on the project's MJCF of the robot it names (``--model`` for
another, or where the metadata names none), stepped by MuJoCo C instead of the MJWarp it was
trained on. A velocity policy starts at the model's keyframe and follows ``--command``; a tracking
policy starts at the reference's first frame and follows ``--motion`` (any format ``unilab-motion``
reads; default: the clip the metadata names, looked for beside the policy file and in the current
folder, or its synthetic clip). Reported per second and in all: falls (the failure terminations of
the policy's task config that have a runtime twin, thresholds read from it: velocity policies the
root too low or a body tilted too far, ``root_height_below`` and ``body_tilt_above``; tracking
policies the anchor too far above or below the reference's or tilted differently,
``anchor_height_error_above`` and ``anchor_orientation_error_above``; the robot is then put back at
its start, or at the reference's current frame, and goes on), the velocity errors as the velocity
task defines them (``||c_xy - v_xy||``, ``|c_z - omega_z|``, root frame) or the tracked bodies'
position errors (world frame, and against the reference re-anchored at the robot's anchor as the
tracking task scores them), the largest joint-limit excursion and the largest PD torque beyond a
joint's force limit. ``--out`` writes the report as JSON (atomically). A long run prints its
progress every ``PROGRESS_SECONDS``; Ctrl-C (or SIGTERM, SIGHUP) ends it and reports (and writes)
the control steps taken, exit status 130.

A policy of a task on a generated terrain (docs/terrain.md) runs on the ground it trained on,
rebuilt from its metadata and checked against its sha256; a velocity policy starts on the
sub-terrain ``--terrain-level`` (default: the top level) and ``--terrain-column`` or
``--sub-terrain`` (the first column of that type; default: column 0). ``--terrain NAME`` or
``--terrain FILE.yaml`` (``configs/terrain/NAME.yaml``, or a file with a ``terrain:`` mapping, e.g.
an evaluation terrain) replaces the ground for the run. ``--out`` and ``--video`` never replace an
input of the run (the policy, ``--motion``, ``--model``, the terrain file), ``--force`` or not. The report's
``terrain`` names the ground and the start.

A policy trained by another framework runs through its format (``--format holosoma``, or detected
from its metadata; :mod:`unilab_gpu.deploy.foreign`): its observation, action map and default pose
from the format's data, judged by the project task the format names; a tracking network that
embeds its reference (a ``time_step`` input) follows that reference unless ``--motion`` is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mujoco

from unilab_gpu.cli.arguments import MAX_COMMAND, MAX_SECONDS, Bound, check_bounds, velocity_command
from unilab_gpu.deploy import Faults
from unilab_gpu.deploy.foreign import format_names
from unilab_gpu.export.sim2sim import Scenario, sim2sim
from unilab_gpu.export.sim2sim.report import write_report
from unilab_gpu.paths import terrain_file
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_signals_interrupt
from unilab_gpu.utils.files import OutputPathError, check_output, write_atomic, write_error

BOUNDS = {
    "--command": Bound(-MAX_COMMAND, MAX_COMMAND, meaning="each of vx, vy, wz, m/s and rad/s"),
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="simulated seconds"),
}
"""The range of each numeric option (:func:`~unilab_gpu.cli.arguments.check_bounds`); a level or
column is checked against the terrain, which the run reads."""

PROGRESS_SECONDS = 10.0
"""Wall-clock seconds between progress lines of a run."""


class _Progress:
    """Prints the control steps done, and the falls so far, every ``PROGRESS_SECONDS`` of wall time."""

    def __init__(self) -> None:
        self.next = time.monotonic() + PROGRESS_SECONDS

    def __call__(self, done: int, steps: int, falls: int) -> None:
        now = time.monotonic()
        if now >= self.next:
            self.next = now + PROGRESS_SECONDS
            print(f"  step {done} of {steps} ({100.0 * done / steps:.1f} %), {falls} falls; Ctrl-C stops and reports")


def _joined_command(argv: list[str]) -> list[str]:
    """``--command -0.3,0,0`` as ``--command=-0.3,0,0``: argparse takes a value that starts with
    ``-`` and is no plain negative number for an option, and would say "expected one argument"."""
    joined, i = [], 0
    while i < len(argv):
        if argv[i] == "--command" and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            joined.append(f"--command={argv[i + 1]}")
            i += 2
        else:
            joined.append(argv[i])
            i += 1
    return joined


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-sim2sim", description=__doc__.split("\n")[0])
    parser.add_argument("policy", help="exported policy (unilab-export)")
    parser.add_argument("--command", type=velocity_command, default=None, help="velocity command vx,vy,wz (m/s, rad/s)")
    parser.add_argument(
        "--motion", default=None, help="reference motion of a tracking policy (any unilab-motion format)"
    )
    parser.add_argument("--seconds", type=float, default=None, help="default: 20 (velocity), the clip (tracking)")
    parser.add_argument("--video", default=None, help="write an MP4 of the run")
    parser.add_argument("--out", default=None, help="write the report as JSON")
    parser.add_argument("--model", default=None, help="MJCF to run on (default: the project's model of the robot)")
    parser.add_argument("--force", action="store_true", help="replace existing --out / --video files")
    parser.add_argument(
        "--format",
        default=None,
        choices=format_names(),
        help="the policy file's format (default: detected from its metadata; foreign formats: docs/deploy.md)",
    )
    parser.add_argument(
        "--terrain",
        default=None,
        help="terrain name (configs/terrain/NAME.yaml) or file (a terrain: mapping) in place of the policy's terrain",
    )
    parser.add_argument("--terrain-level", type=int, default=None, help="start on this level (default: the top one)")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--terrain-column", type=int, default=None, help="start in this column (default: 0)")
    start.add_argument("--sub-terrain", default=None, help="start in the first column of this sub-terrain type")
    faults = parser.add_argument_group("robot-side faults for the whole run (docs/deploy.md, robustness)")
    faults.add_argument("--delay-steps", type=int, default=0, help="control steps of latency in the command path")
    faults.add_argument("--encoder-bias", type=float, default=0.0, help="rad added to every observed joint position")
    faults.add_argument("--noise-scale", type=float, default=0.0, help="times the training observation noise")
    parser.add_argument("--robustness", action="store_true", help="run the robustness grid (docs/deploy.md)")
    parser.add_argument("--plot", default=None, help="with --robustness: write the grid's heat map (PNG)")
    args = parser.parse_args(_joined_command(sys.argv[1:] if argv is None else list(argv)))
    check_bounds(parser, args, BOUNDS)
    if args.robustness:
        return _robustness(parser, args)
    if args.plot is not None:
        parser.error("--plot draws the robustness grid: add --robustness")
    if args.out is not None and args.video is not None and _same_file(args.out, args.video):
        parser.error(f"--out and --video name the same file ({args.out}): the report would replace the video")
    try:
        for option, path, example in (("--out", args.out, "report.json"), ("--video", args.video, "sim2sim.mp4")):
            if path is not None:
                check_output(path, option, force=args.force, inputs=_inputs(args), example=example)
        scenario = Scenario(
            args.policy,
            faults=Faults(delay_steps=args.delay_steps, encoder_bias=args.encoder_bias, noise_scale=args.noise_scale),
            command=args.command,
            motion=args.motion,
            seconds=args.seconds,
            model_path=args.model,
            terrain=args.terrain,
            terrain_level=args.terrain_level,
            terrain_column=args.terrain_column,
            sub_terrain=args.sub_terrain,
            format=args.format,
        )
        with stop_signals_interrupt():  # SIGTERM and SIGHUP stop the run and report as Ctrl-C does
            report = sim2sim(scenario, args.video, on_step=_Progress())
    except (ValueError, KeyError, FileNotFoundError) as error:  # DeploymentError and MotionFormatError are ValueErrors
        print(f"unilab-sim2sim: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("unilab-sim2sim: interrupted before the first control step; nothing written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    if report["summary"] is None:  # Ctrl-C before one control step was complete
        print("unilab-sim2sim: interrupted before the first control step; nothing written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    _print(report)
    if report["interrupted"]:
        print(f"unilab-sim2sim: interrupted; the report covers the {report['seconds']:g} s simulated before it")
    if args.out is not None:
        try:
            write_report(args.out, report, exclusive=not args.force)
        except (OSError, OutputPathError) as error:  # a full disk, or a concurrent run wrote --out first
            print(f"unilab-sim2sim: error: --out: {write_error(error)}; nothing written", file=sys.stderr)
            return 1
        print(f"report: {args.out}")
    if args.video is not None:
        print(f"video: {args.video}")
    return INTERRUPTED_EXIT_CODE if report["interrupted"] else 0


def _robustness(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--robustness``: the grid, a line per cell, the first failing levels, ``--out`` and ``--plot``."""
    from unilab_gpu.export.sim2sim.robustness import VELOCITY_COMMANDS, plot_grid, robustness_grid

    refused = [o for o, v in (("--video", args.video), ("--terrain", args.terrain)) if v is not None]
    refused += [o for o, v in (("--delay-steps", args.delay_steps), ("--encoder-bias", args.encoder_bias)) if v]
    refused += ["--noise-scale"] if args.noise_scale else []
    refused += [
        o
        for o, v in (
            ("--terrain-level", args.terrain_level),
            ("--terrain-column", args.terrain_column),
            ("--sub-terrain", args.sub_terrain),
        )
        if v is not None
    ]
    if refused:
        parser.error(
            f"--robustness runs on the policy's MJCF ground without a video, each fault at the grid's levels; "
            f"drop {', '.join(refused)}"
        )
    try:
        for option, path, example in (("--out", args.out, "grid.json"), ("--plot", args.plot, "grid.png")):
            if path is not None:
                check_output(path, option, force=args.force, inputs=_inputs(args), example=example)
        print(f"unilab-sim2sim: robustness grid of {args.policy} in MuJoCo {mujoco.__version__} (C)")

        def line(cell: dict[str, Any], done: int, total: int) -> None:
            error = "diverged" if cell["error"] is None else f"{cell['error']:.4f}"
            print(
                f"  [{done:>2}/{total}] {cell['fault']:>16} {cell['level']:>6g}: {cell['falls']} falls, "
                f"{cell['diverged']} diverged, error {error}" + ("  FAIL" if cell["failed"] else ""),
                flush=True,
            )

        with stop_signals_interrupt():
            report = robustness_grid(
                args.policy,
                motion=args.motion,
                seconds=args.seconds,
                model_path=args.model,
                commands=[args.command] if args.command is not None else VELOCITY_COMMANDS,
                on_cell=line,
                format=args.format,
            )
    except (ValueError, KeyError, FileNotFoundError) as error:
        print(f"unilab-sim2sim: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("unilab-sim2sim: interrupted; nothing written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    first = ", ".join(f"{k} {'none' if v is None else f'{v:g}'}" for k, v in report["first_failing_level"].items())
    print(f"first failing level: {first}")
    for fault, reason in report["inert_faults"].items():
        print(f"{fault} not injected: {reason}")
    report["machine"] = machine_info("cpu")
    try:
        if args.out is not None:
            write_report(args.out, report, exclusive=not args.force)
            print(f"report: {args.out}")
        if args.plot is not None:
            figure = plot_grid(report)
            write_atomic(args.plot, lambda file: figure.savefig(file, format="png", dpi=110), exclusive=not args.force)
            print(f"heat map: {args.plot}")
    except (OSError, OutputPathError) as error:  # a full disk, or a concurrent run wrote the file first
        print(f"unilab-sim2sim: error: {write_error(error)}; that file not written", file=sys.stderr)
        return 1
    return 0


def _inputs(args: argparse.Namespace) -> list[str]:
    """Every file the run reads: ``--out`` and ``--video`` may replace none of them, ``--force`` or not."""
    given = [args.policy, args.motion, args.model, args.terrain]
    if args.terrain is not None:
        try:
            given.append(str(terrain_file(args.terrain)))  # a terrain name reads configs/terrain/NAME.yaml
        except FileNotFoundError:  # the run names it in its own error
            pass
    return [path for path in given if path is not None]


def _same_file(a: str, b: str) -> bool:
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


PRINTED_ROWS = 60
"""A longer run prints its summary alone (every row is in ``--out``'s report)."""


def _print(report: dict[str, Any]) -> None:
    if report["faults"] is not None:
        print("  faults: " + ", ".join(f"{key} {value}" for key, value in report["faults"].items()))
    rows = report["per_second"]
    keys = [k for k in rows[0] if k != "second"]
    print("  second  " + "  ".join(f"{k:>24}" for k in keys))
    for row in rows if len(rows) <= PRINTED_ROWS else []:
        print(f"  {row['second']:>6}  " + "  ".join(f"{row[k]:>24.4g}" for k in keys))
    if len(rows) > PRINTED_ROWS:
        print(f"  ({len(rows)} seconds: the rows are in the report, --out)")
    print("  all     " + "  ".join(f"{report['summary'].get(k, float('nan')):>24.4g}" for k in keys))


if __name__ == "__main__":
    sys.exit(main())
