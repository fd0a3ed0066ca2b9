"""A robot's standing keyframe: a standing pose and the PD targets that hold it at rest.

A position actuator pulls its joint toward ``ctrl`` with ``kp (ctrl - q)``, so targets equal to the
pose hold nothing: under gravity the joints sag until ``kp`` times the sag pays the load, and soft
gains let the robot fall. The keyframe therefore stores, besides the pose, targets that include the
static torques (``ctrl = q + tau / kp``): standing on them is an equilibrium, and the robot contract
(:mod:`unilab_gpu.sim.robot_contract`) checks that it is. Used by ``scripts/stand_keyframe.py`` and
``unilab-robot init``.
"""

from __future__ import annotations

import math
import re

import mujoco
import numpy as np

from unilab_gpu.sim.robot_contract import hold_error


def initial_pose(
    model: mujoco.MjModel, pose: dict[str, float], keyframe: str = "stand", feet: list[int] | None = None
) -> np.ndarray:
    """qpos with the hinges set by ``pose`` (regex -> rad) and the lowest foot sphere on the floor.

    ``feet``: the foot sphere geoms (default: the robot's geoms with friction, condim > 1).

    Raises:
      ValueError: a pattern that matches no hinge; an angle outside a limited hinge's range; a robot
        without sphere feet (condim 3).
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
            joint = model.joint(name)
            low, high = joint.range if model.jnt_limited[joint.id] else (-math.inf, math.inf)
            if not low <= angle <= high:
                raise ValueError(f"--pose: {name} = {angle:g} rad is outside its range [{low:g}, {high:g}] rad")
            qpos[hinges[name]] = angle
    if feet is None:
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
    return pose(x), x[3:]
