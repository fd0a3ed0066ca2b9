"""``unilab-eval``: full-clip evaluation of a motion-tracking policy, or a velocity policy on a terrain.

Usage::

    unilab-eval RUN_DIR_OR_CHECKPOINT [--trials N] [--motion FILE ...] [--out report.json] [--force]
    unilab-eval --onnx policy.onnx [...]      # an exported policy (unilab-export), via onnxruntime
    unilab-eval RUN --terrain slopes_stairs_eval|FILE.yaml [--command 0.5 0 0] [--seconds 10] [--rows-per-column 16]
                    [--terrain-level L ...]

Two sets of ``--trials`` trials (default 1024 on a GPU, 64 on a CPU): from frame 0 of each clip,
and from frames spread evenly over each clip, on the training task without observation noise,
pushes or reset noise and kicks. A trial succeeds when it reaches its clip's end without one of
the task's failure terminations. Reported per set, overall and per clip: the success rate, MPKPE
(world frame, mean over tracked bodies), R-MPKPE (relative to the anchor body), joint-position
error, joint-velocity RMS error and end-effector position and orientation errors, means over the
steps before each trial ended (:mod:`unilab_gpu.evaluation.tracking`). ``--out`` writes the
report as JSON (atomically; an existing file needs ``--force``, and no input of the evaluation, the
checkpoint, ``--onnx``, ``--motion`` or the terrain file, is ever replaced). Ctrl-C, SIGTERM or
SIGHUP stops it (exit status 130): a terrain evaluation then reports, and writes, the seconds walked before it;
before the first step, or in a tracking evaluation, nothing is written.

With ``--terrain NAME`` (or a YAML file, as ``unilab-sim2sim --terrain`` takes) a velocity policy
walks ``--seconds`` at ``--command`` on each sub-terrain of ``configs/terrain/NAME.yaml``,
``--rows-per-column`` rows each on every level of the terrain (or the ``--terrain-level`` levels
given), without noise, pushes or randomized robot properties; reported per level and sub-terrain
type: the share of rows that did not fall, how far they got, and their velocity errors
(:mod:`unilab_gpu.evaluation.terrain`).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from unilab_gpu.cli.arguments import MAX_COMMAND, MAX_SECONDS, SEED, Bound, check_bounds, whole
from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.evaluation.policies import load_policy
from unilab_gpu.evaluation.terrain import COMMAND as VELOCITY_COMMAND
from unilab_gpu.evaluation.terrain import evaluate_on_terrain
from unilab_gpu.evaluation.tracking import SETS, evaluate_policy
from unilab_gpu.paths import terrain_file
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.checkpoint import CheckpointError, resolve_checkpoint
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_signals_interrupt
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_error, write_json_atomic

DEFAULT_TRIALS = {"cuda": 1024, "cpu": 64}
"""Trials per set by device type."""

MAX_TRIALS = 1 << 16
"""Most ``--trials`` per set: the env has two rows per trial (both sets), 131,072 rows in all."""


BOUNDS = {
    "--trials": Bound(1, MAX_TRIALS, integer=True, meaning="trials per set, each a row of the env"),
    "--seed": SEED,
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="seconds each row walks"),
    "--command": Bound(-MAX_COMMAND, MAX_COMMAND, meaning="each of v_x v_y omega_z, m/s and rad/s"),
    "--rows-per-column": Bound(1, integer=True),
}
"""The range of each numeric option (:func:`~unilab_gpu.cli.arguments.check_bounds`); the rows of all
columns and levels, and the levels, are checked against the terrain (``evaluation.terrain``)."""

COLUMNS = (
    ("success_rate", "success", "{:>8.1%}"),
    ("mpkpe_m", "MPKPE m", "{:>8.3f}"),
    ("r_mpkpe_m", "R-MPKPE m", "{:>9.3f}"),
    ("joint_pos_error_rad", "joint rad", "{:>9.3f}"),
    ("joint_vel_rms_error_radps", "jvel RMS rad/s", "{:>14.3f}"),
    ("ee_pos_error_m", "EE pos m", "{:>8.3f}"),
    ("ee_ori_error_rad", "EE ori rad", "{:>10.3f}"),
)
"""(report key, header, format) of the printed table."""

SET_LABELS = {"start": "from frame 0", "spread": "spread starts"}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="unilab-eval", description=__doc__.split("\n")[0])
    parser.add_argument("run", nargs="?", help="run folder (uses its checkpoint.pt) or checkpoint file")
    parser.add_argument("--onnx", default=None, help="evaluate this exported policy instead (unilab-export)")
    parser.add_argument(
        "--trials", type=whole, default=None, help="trials per set (default: 1024 on a GPU, 64 on a CPU)"
    )
    parser.add_argument(
        "--motion", action="append", default=[], metavar="FILE", help="clip to follow (repeatable; default: the run's)"
    )
    parser.add_argument(
        "--terrain", default=None, help="walk a velocity policy on a terrain: configs/terrain/NAME.yaml or a file"
    )
    parser.add_argument("--command", type=float, nargs=3, default=[0.5, 0.0, 0.0], metavar=("VX", "VY", "WZ"))
    parser.add_argument("--seconds", type=float, default=10.0, help="terrain evaluation: seconds each row walks")
    parser.add_argument(
        "--rows-per-column", type=whole, default=16, help="terrain evaluation: rows per sub-terrain and level"
    )
    parser.add_argument(
        "--terrain-level",
        type=whole,
        action="append",
        default=None,
        metavar="L",
        help="terrain evaluation: evaluate this level (repeatable; default: every level of the terrain)",
    )
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument("--seed", type=whole, default=0, help="seeds the env (startup randomization)")
    parser.add_argument("--out", default=None, help="write the report as JSON")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("--verbose", action="store_true", help="also print the env's construction messages")
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    terrain_only = {"--seconds": args.seconds != 10.0, "--terrain-level": args.terrain_level is not None}
    tracking_only = {"--trials": args.trials is not None, "--motion": bool(args.motion)}
    unused = [name for name, given in (tracking_only if args.terrain else terrain_only).items() if given]
    if unused:
        mode = "a terrain evaluation (--terrain)" if args.terrain else "a tracking evaluation (no --terrain)"
        parser.error(f"{unused[0]} has no effect in {mode}; leave it out")
    try:
        with stop_signals_interrupt():  # SIGTERM and SIGHUP stop it as Ctrl-C does, with the same report
            if args.out is not None:  # checked before anything is built
                check_output(args.out, "--out", force=args.force, inputs=_inputs(args), example="eval.json")
            trained = load_policy(args.run, args.onnx)
            device = str(resolve_device(args.device))
            if args.terrain is not None:
                return _terrain(args, argv, trained, device)
            if load_task_cfg(trained.task, trained.env_overrides).commands.get(VELOCITY_COMMAND) is not None:
                raise ValueError(
                    f"{trained.source} is a velocity policy (task {trained.task}), which has no clips to track; "
                    "walk it on a terrain: unilab-eval ... --terrain slopes_stairs_eval"
                )
            trials = args.trials or DEFAULT_TRIALS["cuda" if device.startswith("cuda") else "cpu"]
            print(f"unilab-eval: {trained.task} / {trained.source}: 2 x {trials} trials on {device}", flush=True)
            report = evaluate_policy(
                trained, trials, device, args.motion, args.seed, progress=True, verbose=args.verbose
            )
    except (CheckpointError, ValueError, KeyError, FileNotFoundError) as error:
        print(f"unilab-eval: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("unilab-eval: interrupted; no report written", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    report["command"] = "unilab-eval " + shlex.join(argv)
    report["machine"] = machine_info(device)
    _print(report)
    return _write(args, report) or 0


def _inputs(args: argparse.Namespace) -> list[str]:
    """Every file the evaluation reads: ``--out`` may replace none of them, ``--force`` or not."""
    given = [args.run and str(resolve_checkpoint(args.run)), args.onnx, *args.motion]
    if args.terrain is not None:
        try:
            given.append(str(terrain_file(args.terrain)))
        except FileNotFoundError:  # the evaluation names it in its own error
            pass
    return [path for path in given if path]


def _terrain(args: argparse.Namespace, argv: list[str], trained, device: str) -> int:
    """The terrain evaluation (``--terrain``): run, print, write."""
    print(f"unilab-eval: {trained.task} / {trained.source} on terrain '{args.terrain}' ({device})", flush=True)
    report = evaluate_on_terrain(
        trained,
        args.terrain,
        args.command,
        args.seconds,
        args.rows_per_column,
        device,
        args.seed,
        progress=True,
        verbose=args.verbose,
        levels=args.terrain_level,
    )
    report["command_line"] = "unilab-eval " + shlex.join(argv)
    report["machine"] = machine_info(device)
    print(f"  command {report['command']}, {report['seconds']:.0f} s, {report['rows_per_column']} rows per column")
    print(f"  success: no fall and at least {report['required_distance_m']:.2f} m from the start")
    levels = report["levels"]
    print(f"  levels {', '.join(map(str, levels))} of the terrain's 0 to {report['num_levels'] - 1}")
    print(
        f"  {'':<32}{'rows':>6}{'success':>9}{'no fall':>9}{'distance m':>12}{'v_xy err m/s':>14}{'yaw err rad/s':>15}"
        f"{'swing cm':>10}"
    )
    tables = [(f"level {level} ", report["by_level"][str(level)]) for level in levels]
    if len(levels) > 1:
        tables.append(("all levels ", report))
    for prefix, table in tables:
        for name, row in [*table["sub_terrains"].items(), ("overall", table["overall"])]:
            _print_terrain_row(prefix + name, row)
    _print_torque_share(report)
    failed = _write(args, report)
    if failed:
        return failed
    if report["interrupted"]:
        print(f"unilab-eval: interrupted; the report covers the {report['seconds']:g} s walked before it")
        return INTERRUPTED_EXIT_CODE
    return 0


def _write(args: argparse.Namespace, report: dict[str, Any]) -> int | None:
    """Write ``--out`` (without ``--force`` only if no other run wrote it meanwhile); the exit status
    if that failed, else ``None``. A committed report names no path of this machine."""
    if args.out is None:
        return None
    try:
        write_json_atomic(args.out, portable_paths(report), exclusive=not args.force)
    except (OSError, OutputPathError) as error:
        print(f"unilab-eval: error: --out: {write_error(error)}; nothing written", file=sys.stderr)
        return 1
    print(f"report: {args.out}")
    return None


def _print_terrain_row(name: str, row: dict[str, Any]) -> None:
    print(
        f"  {name:<32}{row['rows']:>6}{row['success_rate']:>9.1%}{row['no_fall_rate']:>9.1%}"
        f"{row['distance_m']:>12.2f}{row['lin_vel_error_mps']:>14.3f}{row['yaw_rate_error_radps']:>15.3f}"
        f"{_centimetres(row.get('swing_clearance_m')):>10}"
    )


def _centimetres(metres: float | None) -> str:
    """A swing clearance for the table: ``-`` where the report has none (no feet, or every row fell)."""
    return "-" if metres is None else f"{100.0 * metres:.1f}"


def _print_torque_share(report: dict[str, Any]) -> None:
    """The share of actuator-steps whose PD torque demand reached the motor's limit, when the policy's
    action term measures it (joint-position actions)."""
    share = report.get("torque_limit_share")
    if share is not None:
        print(f'  torque demand at the motor limit: {share:.1%} of actuator-steps (docs/robots.md, "Torque demand")')


def _print(report: dict[str, Any]) -> None:
    clips = report["clips"]
    steps = ", ".join(f"{name} {frames} frames" for name, frames in clips.items())
    print(f"  {len(clips)} clip(s): {steps}; {report['seconds']:.0f} s")
    print(f"  {'':<28}" + " ".join(header.rjust(len(fmt.format(0.0))) for _, header, fmt in COLUMNS))
    for name in SETS:
        rows = [(f"{SET_LABELS[name]} ({report[name]['overall']['trials']})", report[name]["overall"])]
        if len(clips) > 1:
            rows += [(f"  {clip}", result) for clip, result in report[name]["clips"].items()]
        for label, result in rows:
            print(f"  {label:<28}" + " ".join(fmt.format(result[key]) for key, _, fmt in COLUMNS))
    _print_torque_share(report)


if __name__ == "__main__":
    sys.exit(main())
