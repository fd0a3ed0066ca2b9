"""Compute a robot's ``stand`` keyframe: a standing pose and the PD targets that hold it at rest.

A position actuator pulls its joint toward ``ctrl`` with ``kp (ctrl - q)``, so targets equal to the
pose hold nothing: under gravity the joints sag until ``kp`` times the sag pays the load, and soft
gains (the G1's ankles, docs/robots.md) let the robot fall. The keyframe therefore stores, besides
the pose, targets that include the static torques (``ctrl = q + tau / kp``): standing on them is
an equilibrium, and the robot contract (``unilab_gpu.sim.robot_contract``) checks that it is.

Procedure: set the joint angles, lower the base until the lowest foot touches the floor (the feet
are the sphere geoms with friction, ``condim`` above 1), then solve ``qacc(base height/roll/pitch,
ctrl) = 0`` at rest by Newton's method on finite-difference Jacobians, joint angles fixed. Prints
the ``<key>`` element to paste into the robot's MJCF, or with ``--write-config`` writes pose and
targets into the robot config's ``stand:`` block (``RobotCfg.stand``: the MJCF is never edited, and
a Menagerie update cannot drop the key), and exits with status 1 instead (the key on
stderr, for inspection) when the solution does not hold the pose within the contract's tolerance.

The model is the one training runs: the robot config's physics options and MJCF edits are applied
(``unilab_gpu.envs.robot_model``; the contact solution, hence the holding targets, depends on the
friction cone and impratio).

Usage:
  python scripts/stand_keyframe.py ROBOT [--pose REGEX=ANGLE ...] [--name stand] [--config NAME]
ROBOT is a robot folder name (``assets/robots/<name>/scene.xml`` or a ``UNILAB_PATH`` folder's) or
an MJCF path; ``--config`` names its robot config (default: the one named ROBOT, if any).
``--pose`` sets every hinge whose name matches REGEX in full to ANGLE (rad); later entries win;
joints no entry matches keep the angle of the model's current keyframe of that name (or 0
without one). The G1's key:
  python scripts/stand_keyframe.py g1 --pose '.*_hip_pitch_joint=-0.312' '.*_knee_joint=0.669' \
    '.*_ankle_pitch_joint=-0.357' '.*_shoulder_pitch_joint=0.2' 'left_shoulder_roll_joint=0.2' \
    'right_shoulder_roll_joint=-0.2' '.*_elbow_joint=0.6'
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from xml.sax.saxutils import quoteattr

import mujoco
import numpy as np

from unilab_gpu.envs.robot_model import load_robot_cfg, robot_edit
from unilab_gpu.paths import CONFIGS_DIR, robot_asset, robot_config_file
from unilab_gpu.sim.stand_pose import equilibrium, holds, initial_pose
from unilab_gpu.utils.files import write_atomic, write_error


def load_model(robot: str, config: str | None = None) -> mujoco.MjModel:
    """Compile ``robot`` (a robot folder name or an MJCF path) with the physics options and MJCF
    edits of robot config ``config`` (``None``: the one named ``robot``, when there is one)."""
    path = Path(robot) if robot.endswith(".xml") else robot_asset(robot)
    name = config if config is not None else (None if robot.endswith(".xml") else robot)
    loaded = load_robot_cfg(name) if name is not None else None
    if config is not None and loaded is None:
        raise ValueError(f"--config: no robot config '{config}.yaml' in the configs/robot/ folders")
    spec = mujoco.MjSpec.from_file(str(path))
    if loaded is not None:
        try:
            robot_edit(loaded[0])(spec)
        except ValueError as error:
            raise ValueError(f"robot config {loaded[1]}: {error}") from None
    return spec.compile()


def parse_pose(entries: list[str]) -> dict[str, float]:
    """``["REGEX=ANGLE", ...]`` -> ``{REGEX: ANGLE}``; raises ValueError naming a malformed entry
    (an angle that is not a finite number included: a NaN pose made NaN targets)."""
    pose = {}
    for entry in entries:
        pattern, sep, value = entry.rpartition("=")
        try:
            pose[pattern] = float(value)
            re.compile(pattern)
        except (ValueError, re.error):
            sep = ""
        if sep and not math.isfinite(pose[pattern]):
            sep = ""
        if not sep or not pattern:
            raise ValueError(f"--pose: '{entry}' must be REGEX=ANGLE (a joint-name regex and radians)")
    return pose


def _numbers(values: np.ndarray) -> list[str]:
    return [f"{a:.8f}".rstrip("0").rstrip(".") for a in values]


def key_element(name: str, qpos: np.ndarray, ctrl: np.ndarray) -> str:
    """The ``<key>`` element, 8 decimals (the name escaped for XML)."""
    fmt = lambda v: " ".join(_numbers(v))  # noqa: E731
    return f'<key name={quoteattr(name)}\n     qpos="{fmt(qpos)}"\n     ctrl="{fmt(ctrl)}"/>'


def stand_block(qpos: np.ndarray, ctrl: np.ndarray) -> str:
    """The robot config's ``stand:`` block (``RobotCfg.stand``), 8 decimals."""
    return (
        "stand:                     # pose + holding targets (scripts/stand_keyframe.py --write-config)\n"
        f"  qpos: [{', '.join(_numbers(qpos))}]\n  ctrl: [{', '.join(_numbers(ctrl))}]\n"
    )


def write_stand(config: Path, qpos: np.ndarray, ctrl: np.ndarray) -> None:
    """Put :func:`stand_block` into the robot config file ``config`` in place of its ``stand:`` block
    (the other lines, comments included, are kept), atomically."""
    lines = config.read_text().splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("stand:")), None)
    if start is not None:
        end = start + 1
        while end < len(lines) and (lines[end][:1] in (" ", "\t") or not lines[end].strip()):
            end += 1
        lines[start:end] = []
    text = "".join(lines)
    text = (text if text.endswith("\n") or not text else text + "\n") + stand_block(qpos, ctrl)
    write_atomic(config, lambda file: file.write(text.encode()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("robot", help="robot folder name (assets/robots/<name>) or MJCF path")
    parser.add_argument("--pose", nargs="*", default=[], metavar="REGEX=ANGLE", help="hinge angles (rad)")
    parser.add_argument("--name", default="stand", help="keyframe name (default: stand)")
    parser.add_argument("--config", default=None, help="robot config name (default: the one named ROBOT, if any)")
    parser.add_argument(
        "--write-config",
        action="store_true",
        help="write the pose and targets into the robot config's stand: block (the MJCF stays untouched)",
    )
    args = parser.parse_args(argv)
    try:
        model = load_model(args.robot, args.config)
        if model.nu != model.nv - 6 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError("the robot must have a free base and one actuator per hinge (docs/robots.md)")
        qpos = initial_pose(model, parse_pose(args.pose), args.name, feet=config_feet(model, args))
        config = _config_file(args) if args.write_config else None
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"stand_keyframe: {args.robot}: {' '.join(str(error).split())}") from None
    qpos, ctrl = equilibrium(model, qpos, qpos[7:].copy())
    error = holds(model, qpos, ctrl)
    if error is not None:
        print(key_element(args.name, qpos, ctrl), file=sys.stderr)
        print(
            f"stand_keyframe: {args.robot}: the key above does not hold its pose ({error}); change the pose "
            "(feet under the base, within the joint ranges) or the gains and forcerange",
            file=sys.stderr,
        )
        return 1
    if config is not None:
        try:
            write_stand(config, qpos, ctrl)
        except OSError as error:  # a full disk or a read-only folder: the config is intact
            raise SystemExit(f"stand_keyframe: --write-config: {write_error(error)}; nothing written") from None
        print(f"stand_keyframe: wrote the stand: block of {config} (keyframe '{args.name}')")
        return 0
    print(key_element(args.name, qpos, ctrl))
    return 0


def config_feet(model: mujoco.MjModel, args: argparse.Namespace) -> list[int] | None:
    """The foot geoms the robot config names (``feet.geoms`` patterns); ``None``: the MJCF's condim > 1 geoms."""
    name = args.config if args.config is not None else (None if args.robot.endswith(".xml") else args.robot)
    loaded = load_robot_cfg(name) if name is not None else None
    if loaded is None or loaded[0].feet is None:
        return None
    patterns = list(loaded[0].feet.geoms)
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom)]
    return [g for g, geom in enumerate(names) if any(re.fullmatch(p, geom) for p in patterns)]


def _config_file(args: argparse.Namespace) -> Path:
    """The robot config file ``--write-config`` writes: ``--config``'s, else the one named ROBOT."""
    name = args.config if args.config is not None else (None if args.robot.endswith(".xml") else args.robot)
    path = robot_config_file(name)
    if path is None:
        raise ValueError("--write-config: no robot config to write; give --config NAME (configs/robot/NAME.yaml)")
    if path.resolve().is_relative_to(CONFIGS_DIR.resolve()):
        raise ValueError(f"--write-config: {path} is one of the project's configs; write a robot config of your own")
    loaded = load_robot_cfg(name)
    if loaded is not None and loaded[0].keyframe != args.name:
        raise ValueError(
            f"--write-config: {path} names keyframe '{loaded[0].keyframe}', not '{args.name}'; give --name "
            f"{loaded[0].keyframe} (the stand: block is written as the config's keyframe)"
        )
    return path


if __name__ == "__main__":
    sys.exit(main())
