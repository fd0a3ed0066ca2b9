"""``unilab-robot init``: draft a robot config from an MJCF, for the user to review (docs/robots.md).

Usage::

    unilab-robot init path/to/scene.xml [--name NAME] [--out configs/robot/NAME.yaml] [--force]

Reads the MJCF (never writes it) and drafts ``configs/robot/<name>.yaml``:

- ``torso_body``: the body of the free joint;
- ``feet``: the leaf bodies of the kinematic tree whose sphere geoms touch the floor standing, their
  sites (bare ``FL``/``FR``/``RL``/``RR`` names too; a site may share its geom's name), in name order;
- ``imu``: the torso's site named ``imu`` (or ``*imu*``) and the ``<gyro>``/``<velocimeter>`` on it,
  or the names the config adds them under;
- ``mirror_name_pairs``: the left/right name fragments that map joints onto joints;
- ``stand``: the standing pose (from the MJCF's first keyframe, ``home`` in Menagerie, or its
  default pose) and the PD targets that hold it (:mod:`unilab_gpu.sim.stand_pose`), so that the
  MJCF's own key, which may not hold, is left as it is; ``base_height`` and ``fall_height`` (half
  of it) from that pose;
- ``physics``: only the options the task needs that the MJCF's differ from (the 5 ms timestep of the
  project's 50 Hz tasks at decimation 4; MuJoCo's own solver defaults are kept);
- a comment with the task's ``effort_scale`` from the actuators' kp and forcerange (the docs' rule:
  a unit action moves the swing joints' targets about 0.3 rad, never past the motor's limit).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np

from unilab_gpu.sim.stand_pose import equilibrium, holds, initial_pose
from unilab_gpu.utils.files import OutputPathError, check_output, write_atomic

TASK_TIMESTEP = 0.005
"""The physics step of the project's tasks: 50 Hz control (``control_dt`` 0.02 s) at decimation 4."""

FOOT_CONDIM = 3
"""The feet's contact dimension in the drafted config: sliding friction only, as the project's robots."""

TARGET_SWING_RAD = 0.3
"""The docs' rule for ``effort_scale``: a unit action moves a swing joint's target about this far."""

MIRROR_CANDIDATES = (
    ("left_", "right_"),
    ("left", "right"),
    ("FL_", "FR_"),
    ("RL_", "RR_"),
    ("FL", "FR"),
    ("RL", "RR"),
    ("L_", "R_"),
    ("l_", "r_"),
)
"""Name fragments of left and right parts, tried in this order (a pair inside a longer one is skipped)."""


class DraftError(ValueError):
    """The MJCF lacks what a robot config needs (a free base, position actuators, feet); one line."""


def draft(mjcf: Path, name: str) -> str:
    """The robot config text for the MJCF at ``mjcf``, named ``name`` (see the module docstring)."""
    try:
        spec = mujoco.MjSpec.from_file(str(mjcf))
    except ValueError as error:
        raise DraftError(f"{mjcf}: {' '.join(str(error).split())}") from None
    spec.option.timestep = TASK_TIMESTEP  # the pose is solved under the physics the task runs
    model = spec.compile()
    free = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if len(free) != 1 or model.nu != model.nv - 6:
        raise DraftError(f"{mjcf}: a robot config needs a free base and one actuator per hinge (docs/robots.md)")
    torso = int(model.jnt_bodyid[free[0]])
    feet_bodies, feet_geoms = _feet(model)
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) for g in feet_geoms]
    if not all(names):
        raise DraftError(f"{mjcf}: name every foot geom (the robot config's feet.geoms names them)")
    for name in names:  # the feet as the drafted config sets them (feet.condim), which the targets must balance
        spec.geom(name).condim = FOOT_CONDIM
    model = spec.compile()
    body_name = lambda b: mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)  # noqa: E731
    geom_name = lambda g: mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g)  # noqa: E731
    sites = [s for s in range(model.nsite) if model.site_bodyid[s] in feet_bodies]
    site_names = sorted(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in sites)
    key = "home" if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0 else None
    if key is None and model.nkey:
        key = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_KEY, 0)
    qpos = initial_pose(model, {}, key or "", feet=list(feet_geoms))
    qpos, ctrl = equilibrium(model, qpos, qpos[7:].copy())
    problem = holds(model, qpos, ctrl)
    if problem is not None:
        raise DraftError(
            f"{mjcf}: the standing pose of key '{key}' does not hold ({problem}); give a pose a robot stands in"
        )
    base = round(float(qpos[2]), 3)
    lines = [
        f'# {name}: drafted by unilab-robot init from {mjcf}; review every line (docs/robots.md, "Adding a robot").',
        f"model: {_model_name(mjcf)}",
        "keyframe: stand            # written at load from the stand: block below (the MJCF stays untouched)",
        f"torso_body: {body_name(torso)}",
        f"imu: {_imu(model, torso)}",
        f"base_height: {base}         # the torso's height standing (m)",
        f"fall_height: {round(base / 2, 3)}         # below this: fallen (m)",
        "feet:                      # gait order: by name",
        f"  sites: [{', '.join(site_names)}]",
        f"  bodies: [{', '.join(sorted({body_name(b) for b in feet_bodies}))}]",
        f"  geoms: [{', '.join(sorted(re.escape(geom_name(g)) for g in feet_geoms))}]",
        f"  swing_height: {round(base / 4, 3)}     # peak foot height of the gait (m)",
        f"  condim: {FOOT_CONDIM}                # sliding friction only: the solver's cheapest (Menagerie's feet: 6)",
    ]
    pairs = _mirror_pairs(model)
    lines.append(f"pose_weights: {{{', '.join(f'{p!r}: 1.0' for p in _pose_patterns(model, pairs))}}}   # review")
    if pairs:
        lines.append(f"mirror_name_pairs: [{', '.join(f'[{a}, {b}]' for a, b in pairs)}]")
    physics = mujoco.MjSpec.from_file(str(mjcf)).option
    if abs(physics.timestep - TASK_TIMESTEP) > 1e-12:
        lines.append(
            f"physics: {{timestep: {TASK_TIMESTEP}}}    # the MJCF's {physics.timestep:g} s; 50 Hz at decimation 4"
        )
    lines.append(f"# task: actions.params.effort_scale: {effort_scale(model):.2f}   (the docs' rule, docs/robots.md)")
    numbers = lambda v: ", ".join(f"{a:.8f}".rstrip("0").rstrip(".") for a in v)  # noqa: E731
    lines += [
        "stand:                     # pose + holding targets (recomputed by scripts/stand_keyframe.py --write-config)",
        f"  qpos: [{numbers(qpos)}]",
        f"  ctrl: [{numbers(ctrl)}]",
    ]
    return "\n".join(lines) + "\n"


def _model_name(mjcf: Path) -> str:
    """``<name>`` for ``.../assets/robots/<name>/scene.xml`` (found on the project's or a ``UNILAB_PATH``
    folder's robots), else the MJCF's absolute path."""
    path = mjcf.resolve()
    if path.name == "scene.xml" and path.parent.parent.name == "robots" and path.parents[2].name == "assets":
        return path.parent.name
    return str(path)


def effort_scale(model: mujoco.MjModel) -> float:
    """``effort_scale`` by the docs' rule: ``TARGET_SWING_RAD x kp / effort`` (median over the
    force-limited actuators), at most 1 (a unit action never asks more than the motor's limit)."""
    limited = [a for a in range(model.nu) if model.actuator_forcelimited[a]]
    if not limited:
        return 0.25
    ratios = [
        TARGET_SWING_RAD * model.actuator_gainprm[a, 0] / np.abs(model.actuator_forcerange[a]).min() for a in limited
    ]
    return float(min(1.0, np.median(ratios)))


def _feet(model: mujoco.MjModel) -> tuple[set[int], list[int]]:
    """Leaf bodies (no child body) with a sphere geom, and those spheres: the feet of a legged robot."""
    parents = set(model.body_parentid[1:].tolist())
    leaves = {b for b in range(1, model.nbody) if b not in parents}
    spheres = [
        g
        for g in range(model.ngeom)
        if model.geom_bodyid[g] in leaves
        and model.geom_type[g] == mujoco.mjtGeom.mjGEOM_SPHERE
        and model.geom_contype[g] | model.geom_conaffinity[g]
    ]
    if not spheres:
        raise DraftError("no feet found: a foot is a colliding sphere geom on a leaf body of the kinematic tree")
    return {int(model.geom_bodyid[g]) for g in spheres}, spheres


def _imu(model: mujoco.MjModel, torso: int) -> str:
    """The ``imu:`` mapping: the torso's IMU site and the sensors on it, or the sensors to add."""
    sites = [s for s in range(model.nsite) if model.site_bodyid[s] == torso]
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SITE, s) for s in sites]
    site = next((n for n in names if n == "imu"), next((n for n in names if "imu" in n.lower()), None))
    if site is None:
        torso_name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, torso)
        return f"{{gyro: imu_gyro, velocimeter: imu_linvel, site: imu, body: {torso_name}}}   # added at load"
    site_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, site)
    kinds = {mujoco.mjtSensor.mjSENS_GYRO: "gyro", mujoco.mjtSensor.mjSENS_VELOCIMETER: "velocimeter"}
    found = {
        kinds[model.sensor_type[s]]: mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_SENSOR, s)
        for s in range(model.nsensor)
        if model.sensor_objtype[s] == mujoco.mjtObj.mjOBJ_SITE
        and model.sensor_objid[s] == site_id
        and model.sensor_type[s] in kinds
    }
    gyro, velocimeter = found.get("gyro", "imu_gyro"), found.get("velocimeter", "imu_linvel")
    return f"{{gyro: {gyro}, velocimeter: {velocimeter}, site: {site}}}"


def _mirror_pairs(model: mujoco.MjModel) -> list[tuple[str, str]]:
    """The pairs of :data:`MIRROR_CANDIDATES` that map every joint naming one side onto a joint."""
    joints = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) or "" for j in range(model.njnt)}
    pairs: list[tuple[str, str]] = []
    for left, right in MIRROR_CANDIDATES:
        sided = [j for j in joints if left in j]
        if sided and all(j.replace(left, right) in joints for j in sided):
            if not any(left in a and right in b for a, b in pairs):  # FL inside FL_: one pair suffices
                pairs.append((left, right))
    return pairs


def _pose_patterns(model: mujoco.MjModel, pairs: list[tuple[str, str]]) -> list[str]:
    """One joint-name pattern per joint kind: ``FL_hip_joint`` -> ``.*_hip_joint`` where a side's
    fragment leads the name, else the name itself."""
    fragments = [f for pair in pairs for f in pair]
    patterns = []
    for j in range(model.njnt):
        if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            continue
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
        lead = next((f for f in fragments if name.startswith(f)), None)
        pattern = (
            ".*" + re.escape(name[len(lead) - 1 :] if lead.endswith("_") else name[len(lead) :])
            if lead
            else re.escape(name)
        )
        if pattern not in patterns:
            patterns.append(pattern)
    return patterns


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-robot", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="draft a robot config from an MJCF")
    init.add_argument("mjcf", type=Path, help="the robot's MJCF (scene.xml); it is only read")
    init.add_argument("--name", default=None, help="robot name (default: the MJCF's folder name)")
    init.add_argument("--out", type=Path, default=None, help="default: configs/robot/NAME.yaml")
    init.add_argument("--force", action="store_true", help="replace an existing --out file")
    args = parser.parse_args(argv)
    name = args.name or args.mjcf.resolve().parent.name
    out = args.out or Path("configs") / "robot" / f"{name}.yaml"
    try:
        if not args.mjcf.is_file():
            raise DraftError(f"{args.mjcf}: no such MJCF file")
        check_output(out, "--out", force=args.force, inputs=[args.mjcf], example=f"{name}.yaml")
        text = draft(args.mjcf, name)
        write_atomic(out, lambda file: file.write(text.encode()), exclusive=not args.force)
    except (DraftError, OutputPathError) as error:
        print(f"unilab-robot: error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        print(f"unilab-robot: error: cannot write {error.filename}: {error.strerror or error}", file=sys.stderr)
        return 1
    print(f"unilab-robot: drafted {out}; review it, then: export UNILAB_PATH=<the folder holding configs/>")
    return 0


if __name__ == "__main__":
    sys.exit(main())
