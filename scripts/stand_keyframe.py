"""Compute a robot's ``stand`` keyframe: a standing pose and the PD targets that hold it at rest.

A position actuator pulls its joint toward ``ctrl`` with ``kp (ctrl - q)``, so targets equal to the
pose hold nothing: under gravity the joints sag until ``kp`` times the sag pays the load, and soft
gains (the G1's ankles, docs/robots.md) let the robot fall. The keyframe therefore stores, besides
the pose, targets that include the static torques (``ctrl = q + tau / kp``): standing on them is
an equilibrium, and the robot contract (``unilab_gpu.sim.robot_contract``) checks that it is.

Procedure: set the joint angles, lower the base until the lowest foot touches the floor (the feet
are the sphere geoms with friction, ``condim`` above 1), then solve ``qacc(base height/roll/pitch,
ctrl) = 0`` at rest by Newton's method on finite-difference Jacobians, joint angles fixed. Prints
the ``<key>`` element to paste into the robot's MJCF, and exits with status 1 instead (the key on
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
import re
import sys
from pathlib import Path

import mujoco
import numpy as np

from unilab_gpu.envs.robot_model import load_robot_cfg, robot_edit
from unilab_gpu.paths import robot_asset
from unilab_gpu.sim.robot_contract import hold_error


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
    """``["REGEX=ANGLE", ...]`` -> ``{REGEX: ANGLE}``; raises ValueError naming a malformed entry."""
    pose = {}
    for entry in entries:
        pattern, sep, value = entry.rpartition("=")
        try:
            pose[pattern] = float(value)
            re.compile(pattern)
        except (ValueError, re.error):
            sep = ""
        if not sep or not pattern:
            raise ValueError(f"--pose: '{entry}' must be REGEX=ANGLE (a joint-name regex and radians)")
    return pose


def initial_pose(model: mujoco.MjModel, pose: dict[str, float], keyframe: str = "stand") -> np.ndarray:
    """qpos with the hinges set by ``pose`` (regex -> rad) and the lowest foot sphere on the floor.

    Raises:
      ValueError: a pattern that matches no hinge; a robot without sphere feet (condim 3).
    """
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe)
    qpos = model.qpos0.copy()  # the base as the MJCF places it, upright
    if key >= 0:
        qpos[7:] = model.key_qpos[key, 7:]
    hinges = {
        model.joint(j).name: model.jnt_qposadr[j]
        for j in range(model.njnt)
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE
    }
    for pattern, angle in pose.items():
        matched = [name for name in hinges if re.fullmatch(pattern, name)]
        if not matched:
            raise ValueError(f"--pose: '{pattern}' matches no hinge joint; joints: {', '.join(hinges)}")
        for name in matched:
            qpos[hinges[name]] = angle
    feet = [g for g in range(model.ngeom) if model.geom_condim[g] > 1 and model.geom_bodyid[g] > 0]
    if not feet or any(model.geom_type[g] != mujoco.mjtGeom.mjGEOM_SPHERE for g in feet):
        raise ValueError(
            "the feet (the robot's geoms with friction, condim > 1) must be spheres for the tool to set them on the "
            "floor; give every other geom condim 1"
        )
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    qpos[2] -= min(data.geom_xpos[g, 2] - model.geom_size[g, 0] for g in feet)
    return qpos


def holds(model: mujoco.MjModel, qpos: np.ndarray, ctrl: np.ndarray) -> str | None:
    """Why the robot at rest in ``qpos`` on targets ``ctrl`` does not hold (the robot contract's
    rule, ``hold_error``); ``None`` when it holds."""
    data = mujoco.MjData(model)
    data.qpos[:], data.ctrl[:] = qpos, ctrl
    mujoco.mj_forward(model, data)
    return hold_error(model, data)


def equilibrium(model: mujoco.MjModel, qpos: np.ndarray, ctrl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Newton on base height, roll, pitch and ctrl (3 + nu unknowns) so that qacc = 0 at rest.

    Horizontal position and yaw are left out: they do not change the dynamics of a robot on a
    flat floor, so their Jacobian columns are zero.
    """
    data = mujoco.MjData(model)

    def pose(x: np.ndarray) -> np.ndarray:
        q = qpos.copy()
        q[2] = x[0]
        rot = np.array([1.0, 0.0, 0.0, 0.0])
        mujoco.mju_quatIntegrate(rot, np.array([x[1], x[2], 0.0]), 1.0)
        mujoco.mju_mulQuat(q[3:7], rot, qpos[3:7])
        return q

    # Targets whose torque at rest, kp (ctrl - q), stays inside forcerange: past it the actuator
    # saturates, its Jacobian column vanishes and Newton stalls there.
    kp = model.actuator_gainprm[:, 0]
    reach = np.where(model.actuator_forcelimited, np.abs(model.actuator_forcerange).min(axis=1), np.inf) / kp
    ctrl_low, ctrl_high = qpos[7:] - 0.999 * reach, qpos[7:] + 0.999 * reach

    def residual(x: np.ndarray) -> np.ndarray:
        data.qpos[:] = pose(x)
        data.qvel[:] = 0.0
        data.ctrl[:] = x[3:]
        mujoco.mj_forward(model, data)
        return data.qacc.copy()

    # Start with the feet pressed 1 mm into the floor: the contact forces exist there and vary
    # smoothly with the unknowns (at exactly touching they switch on and off under the
    # finite differences, and Newton can leave for nowhere).
    x = np.concatenate([[qpos[2] - 1e-3, 0.0, 0.0], ctrl])
    r = residual(x)
    for _ in range(20):
        if np.abs(r).max() < 1e-9:
            break
        jac = np.stack([(residual(x + 1e-6 * e) - r) / 1e-6 for e in np.eye(x.size)], axis=1)
        step = np.linalg.lstsq(jac, r, rcond=None)[0]
        # Backtrack while the step makes things worse: a contact that opens or closes along the
        # way changes the Jacobian, and a full step can leave the basin.
        for _ in range(30):
            candidate = x - step
            candidate[3:] = np.clip(candidate[3:], ctrl_low, ctrl_high)
            trial = residual(candidate)
            if np.linalg.norm(trial) < np.linalg.norm(r):
                break
            step = step / 2
        x, r = candidate, trial
    print(f"max |qacc| at rest: {np.abs(residual(x)).max():.2e}", file=sys.stderr)
    return pose(x), x[3:]


def key_element(name: str, qpos: np.ndarray, ctrl: np.ndarray) -> str:
    """The ``<key>`` element, 8 decimals."""
    fmt = lambda v: " ".join(f"{a:.8f}".rstrip("0").rstrip(".") for a in v)  # noqa: E731
    return f'<key name="{name}"\n     qpos="{fmt(qpos)}"\n     ctrl="{fmt(ctrl)}"/>'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("robot", help="robot folder name (assets/robots/<name>) or MJCF path")
    parser.add_argument("--pose", nargs="*", default=[], metavar="REGEX=ANGLE", help="hinge angles (rad)")
    parser.add_argument("--name", default="stand", help="keyframe name (default: stand)")
    parser.add_argument("--config", default=None, help="robot config name (default: the one named ROBOT, if any)")
    args = parser.parse_args(argv)
    try:
        model = load_model(args.robot, args.config)
        if model.nu != model.nv - 6 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
            raise ValueError("the robot must have a free base and one actuator per hinge (docs/robots.md)")
        qpos = initial_pose(model, parse_pose(args.pose), args.name)
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
    print(key_element(args.name, qpos, ctrl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
