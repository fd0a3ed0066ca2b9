"""``unilab-motion``: convert motion files to the project's canonical ``.npz``, inspect, synthesize, mirror.

Examples::

    unilab-motion convert walk.csv walk.npz --input-fps 30
    unilab-motion convert dance_beyondmimic.npz dance.npz
    unilab-motion info dance.npz
    unilab-motion synth synthetic.npz --seconds 20 --seed 3
    unilab-motion mirror dance.npz dance_mirrored.npz
    unilab-motion convert walk.csv walk.npz --robot my_robot
    unilab-motion from-onnx fastsac_g1_29dof_dancing.onnx dance.npz
    unilab-motion split dance.npz dance_windows/ --seconds 10 --overlap 1

Every command works on one robot's joints and bodies: ``--robot`` (a folder under
``assets/robots/`` or a ``UNILAB_PATH`` folder's; default g1, named in the output).

Outputs must end in ``.npz``; an existing output is replaced only with ``--force`` (never the
input itself or a run folder's files), and is written atomically. Bad input ends with a one-line
``unilab-motion: error: ...`` on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from omegaconf import OmegaConf

from unilab_gpu.motion.assemble import CONTROL_FPS, ORDERS, build_clip
from unilab_gpu.motion.canonical import save_motion
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import FORMATS, load_motion, read_source
from unilab_gpu.motion.mirror import DEFAULT_NAME_PAIRS, RobotMirror
from unilab_gpu.motion.policy_reference import HOLD_SECONDS, REF_BODY, ReferenceChecks, read_policy_reference
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MAX_FPS, MotionFormatError
from unilab_gpu.motion.windows import clip_windows
from unilab_gpu.paths import robot_config_file
from unilab_gpu.utils.files import OutputPathError, check_output


def _check_output(args: argparse.Namespace, inputs: tuple[Path, ...] = ()) -> None:
    """Refuse a bad output path before reading or computing anything."""
    check_output(args.output, "output", force=args.force, inputs=inputs, example="clip.npz")
    if args.output.suffix != ".npz":
        raise MotionFormatError(f"output {args.output} must end in .npz, e.g. {args.output}.npz")


def _convert(args: argparse.Namespace) -> None:
    _check_output(args, (args.input,))
    kinematics = _kinematics(args.robot)
    clip = load_motion(
        args.input,
        args.format,
        args.input_fps,
        args.fps,
        kinematics=kinematics,
        derive_velocities=args.derive_velocities,
        order=args.order,
    )
    path = save_motion(clip, args.output)
    print(f"wrote {path}: {clip.num_frames} frames at {clip.fps:g} fps ({clip.duration:.2f} s) of robot {args.robot}")


def _info(args: argparse.Namespace) -> None:
    source = read_source(args.file, args.format, args.input_fps)
    clip = build_clip(source, _kinematics(args.robot), fps=None, order=args.order)
    summary = {
        "frames": clip.num_frames,
        "fps": clip.fps,
        "duration_s": round(clip.duration, 6),
        "joints": len(clip.joint_names),
        "bodies": len(clip.body_names),
        "format": source.format,
        "robot": args.robot,
    }
    print(json.dumps(summary))


def _synth(args: argparse.Namespace) -> None:
    _check_output(args)
    kinematics = _kinematics(args.robot)
    clip = synthesize_clip(seconds=args.seconds, seed=args.seed, fps=args.fps, kinematics=kinematics)
    path = save_motion(clip, args.output)
    print(f"wrote {path}: {clip.num_frames} frames at {clip.fps:g} fps ({clip.duration:.2f} s) of robot {args.robot}")


def _from_onnx(args: argparse.Namespace) -> None:
    _check_output(args, (args.policy,))
    kinematics = _kinematics(args.robot)
    reference = read_policy_reference(
        args.policy, args.policy_fps, kinematics, ref_body=args.ref_body, hold_seconds=args.hold_seconds
    )
    clip = build_clip(reference.source, kinematics, fps=None)
    checks = ReferenceChecks.of(reference.ref_quat, clip, kinematics.joint_range)
    path = save_motion(clip, args.output)
    print(
        f"wrote {path}: the reference of {args.policy}, {clip.num_frames} frames at {clip.fps:g} fps "
        f"({clip.duration:.2f} s) of robot {args.robot}; it holds its last frame from time_step {reference.last_step}"
    )
    print(checks.summary())


def _split(args: argparse.Namespace) -> None:
    if args.output.exists() and not args.output.is_dir():
        raise MotionFormatError(f"output {args.output} exists and is not a folder")
    clip = load_motion(args.input, args.format, args.input_fps, fps=None, kinematics=_kinematics(args.robot))
    windows = clip_windows(clip, args.seconds, args.overlap)
    paths = [args.output / f"{args.input.stem}_{i:03d}.npz" for i in range(len(windows))]
    existing = [p for p in paths if p.exists()]
    if existing and not args.force:
        raise OutputPathError(f"output {existing[0]} exists; pass --force to replace it")
    args.output.mkdir(parents=True, exist_ok=True)
    for window, path in zip(windows, paths, strict=True):
        save_motion(window, path)
    print(
        f"wrote {len(windows)} windows of {args.input} ({clip.duration:.2f} s) to {args.output}: "
        f"{args.seconds:g} s each, {args.overlap:g} s overlap, the last {windows[-1].duration:.2f} s"
    )


def _kinematics(robot: str) -> RobotKinematics:
    """The forward kinematics of ``--robot``; a robot clips cannot describe is one line naming it."""
    try:
        return RobotKinematics.from_robot(robot)
    except ValueError as error:  # e.g. the pendulum: no free root joint, so no clip of it
        raise MotionFormatError(f"--robot {robot}: {error}; motion clips are of floating-base robots") from None


def _mirror_name_pairs(robot: str) -> list[tuple[str, str]]:
    """``mirror_name_pairs`` of the robot config of the same name (``configs/robot/<robot>.yaml``),
    else ``left`` / ``right``."""
    path = robot_config_file(robot)
    pairs = OmegaConf.load(path).get("mirror_name_pairs") if path is not None else None
    return list(DEFAULT_NAME_PAIRS) if pairs is None else [(str(a), str(b)) for a, b in pairs]


def _mirror(args: argparse.Namespace) -> None:
    _check_output(args, (args.input,))
    kinematics = _kinematics(args.robot)
    # A robot without pairs is refused before the input is read.
    mirror = RobotMirror(kinematics, _mirror_name_pairs(args.robot))
    source = load_motion(args.input, args.format, args.input_fps, fps=None, kinematics=kinematics, order=args.order)
    clip = mirror.mirror(source)
    path = save_motion(clip, args.output)
    print(
        f"wrote {path}: the mirror image of {args.input}, {clip.num_frames} frames at {clip.fps:g} fps "
        f"({clip.duration:.2f} s) of robot {args.robot}"
    )


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _fps(text: str) -> float:
    value = _positive(text)
    if value > MAX_FPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_FPS:g} frames per second, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="unilab-motion", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    formats = ["auto", *FORMATS]

    convert = commands.add_parser("convert", help="convert a motion file to the canonical .npz")
    convert.add_argument("input", type=Path)
    convert.add_argument("output", type=Path)
    convert.add_argument("--format", choices=formats, default="auto")
    convert.add_argument("--input-fps", type=_fps, default=None, help="frame rate of a CSV (default 30)")
    convert.add_argument("--fps", type=_fps, default=CONTROL_FPS, help="output frame rate (default %(default)g)")
    convert.add_argument(
        "--derive-velocities", action="store_true", help="ignore the file's velocities; derive them from the poses"
    )
    convert.add_argument("--force", action="store_true", help="replace an existing output file")
    convert.set_defaults(run=_convert)

    info = commands.add_parser("info", help="print a motion file's summary as one JSON object")
    info.add_argument("file", type=Path)
    info.add_argument("--format", choices=formats, default="auto")
    info.add_argument("--input-fps", type=_fps, default=None)
    info.set_defaults(run=_info)

    synth = commands.add_parser("synth", help="write a synthetic clip of the robot")
    synth.add_argument("output", type=Path)
    synth.add_argument("--seconds", type=_positive, default=10.0)
    synth.add_argument("--seed", type=_seed, default=0)
    synth.add_argument("--fps", type=_fps, default=CONTROL_FPS)
    synth.add_argument("--force", action="store_true", help="replace an existing output file")
    synth.set_defaults(run=_synth)

    mirror = commands.add_parser(
        "mirror", help="write the left-right mirror image of a clip (at its own frame rate) for a symmetric robot"
    )
    mirror.add_argument("input", type=Path)
    mirror.add_argument("output", type=Path)
    mirror.add_argument("--format", choices=formats, default="auto")
    mirror.add_argument("--input-fps", type=_fps, default=None, help="frame rate of a CSV (default 30)")
    mirror.add_argument("--force", action="store_true", help="replace an existing output file")
    mirror.set_defaults(run=_mirror)
    from_onnx = commands.add_parser(
        "from-onnx", help="extract the reference motion a tracking policy's ONNX embeds behind its time_step input"
    )
    from_onnx.add_argument("policy", type=Path)
    from_onnx.add_argument("output", type=Path)
    from_onnx.add_argument(
        "--policy-fps", type=_fps, default=CONTROL_FPS, help="the policy's control rate, one time_step per frame "
        "(default %(default)g)"
    )  # fmt: skip
    from_onnx.add_argument(
        "--hold-seconds", type=_positive, default=HOLD_SECONDS,
        help="the motion has ended when the outputs stay unchanged this long (default %(default)g)",
    )  # fmt: skip
    from_onnx.add_argument(
        "--ref-body", default=REF_BODY, help="the body whose pose ref_pos_xyz, ref_quat_xyzw hold (default %(default)s)"
    )
    from_onnx.add_argument("--force", action="store_true", help="replace an existing output file")
    from_onnx.set_defaults(run=_from_onnx)
    split = commands.add_parser(
        "split", help="cut a clip into overlapping windows written as separate clips into a folder (a motion set)"
    )
    split.add_argument("input", type=Path)
    split.add_argument("output", type=Path, help="folder for <input name>_000.npz, _001.npz, ...")
    split.add_argument("--format", choices=formats, default="auto")
    split.add_argument("--input-fps", type=_fps, default=None, help="frame rate of a CSV (default 30)")
    split.add_argument("--seconds", type=_positive, default=10.0, help="window length (default %(default)g)")
    split.add_argument("--overlap", type=float, default=1.0, help="seconds shared by neighbours (default %(default)g)")
    split.add_argument("--force", action="store_true", help="replace existing window files")
    split.set_defaults(run=_split)
    for command in (convert, info, mirror):
        command.add_argument(
            "--order",
            choices=ORDERS,
            default="auto",
            help="order of a file's unnamed joint and body columns: the model's (mjcf), Isaac Lab's breadth-first "
            "(isaaclab_bfs), or detected by forward kinematics (default: %(default)s)",
        )
    for command in (convert, info, synth, mirror, from_onnx, split):
        command.add_argument(
            "--robot", default="g1", help="the robot's folder under assets/robots or UNILAB_PATH (default: %(default)s)"
        )
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except (MotionFormatError, OutputPathError, OSError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
