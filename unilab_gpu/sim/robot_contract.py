"""The MJCF contract: what the env, its tasks, export and the deploy runtime assume of a robot model.

A robot model (``assets/robots/<name>/scene.xml``) must have

1. a floating base: its first joint is a free joint, and every other joint is a hinge, so that
   ``qpos[7:]``, ``qvel[6:]`` and the joint observations share one index;
2. actuators: one per hinge, in joint order, so that ``ctrl`` shares that index too;
3. position actuators (``<position kp=...>``: torque ``kp (ctrl - q) - kd qdot``), which the
   joint-position actions and the deploy runtime's PD model assume;
4. a ``forcerange`` on every actuator (the motor's torque limit; the action scale divides it by kp);
5. an IMU: a site carrying a ``<gyro>`` and a ``<velocimeter>`` sensor (the base velocity observations);
6. a standing keyframe (``stand``) whose ``ctrl`` holds its pose: at rest on it ``qacc`` is 0,
   which ``scripts/stand_keyframe.py`` computes.

``contract_errors`` returns one line per broken rule; ``tests/test_robot_contract.py`` runs it on
every folder under ``assets/robots/``.
"""

from __future__ import annotations

import mujoco
import numpy as np

HOLD_TOLERANCE = 1e-2
"""Largest ``|qacc|`` (m/s^2, rad/s^2) at rest on the keyframe that still counts as holding the pose;
the keyframe tool's solutions, written with 8 decimals, stay below 1e-4 (G1 and Go2: 3e-5, 4e-5)."""


def contract_errors(model: mujoco.MjModel, keyframe: str = "stand") -> list[str]:
    """One line per rule of the contract that ``model`` breaks (empty: it keeps them all)."""
    errors = [_joints(model), _actuators(model), _imu(model), _keyframe(model, keyframe)]
    return [error for error in errors if error is not None]


def _name(model: mujoco.MjModel, kind: mujoco.mjtObj, index: int) -> str:
    if kind == mujoco.mjtObj.mjOBJ_JOINT:
        return joint_label(model, index)
    return mujoco.mj_id2name(model, kind, index) or f"#{index}"


def joint_label(model: mujoco.MjModel, joint: int) -> str:
    """A joint's name, or for an unnamed one (Menagerie's ``<freejoint/>``) what it is and whose:
    ``free joint of body 'trunk'``."""
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
    if name:
        return name
    kind = mujoco.mjtJoint(model.jnt_type[joint]).name.removeprefix("mjJNT_").lower()
    body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[joint])) or "world"
    return f"{kind} joint of body '{body}'"


def hold_error(model: mujoco.MjModel, data: mujoco.MjData) -> str | None:
    """Why the state of ``data`` (after ``mj_forward``, at rest) does not hold its pose: the largest
    ``|qacc|`` and its joint when it passes :data:`HOLD_TOLERANCE`; ``None`` when it holds."""
    worst = int(np.argmax(np.abs(data.qacc)))
    if abs(data.qacc[worst]) <= HOLD_TOLERANCE:
        return None
    joint = int(model.dof_jntid[worst])
    where = joint_label(model, joint)
    if model.jnt_type[joint] == mujoco.mjtJoint.mjJNT_FREE:
        where += f", {FREE_DOF_NAMES[worst - int(model.jnt_dofadr[joint])]}"
    return f"|qacc| {abs(data.qacc[worst]):.3g} at joint '{where}' > {HOLD_TOLERANCE}"


FREE_DOF_NAMES = ("x", "y", "z", "roll rate", "pitch rate", "yaw rate")
"""The six degrees of freedom of a free joint, in ``qvel`` order (world-frame linear, body-frame angular)."""


def _joints(model: mujoco.MjModel) -> str | None:
    if model.njnt == 0 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
        return "joints: the first joint must be the floating base's free joint (<freejoint/> on the root body)"
    for j in range(1, model.njnt):
        if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_HINGE:
            kind = mujoco.mjtJoint(model.jnt_type[j]).name.removeprefix("mjJNT_").lower()
            name = _name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
            return f"joints: joint '{name}' is a {kind} joint; every joint after the floating base must be a hinge"
    return None


def _actuators(model: mujoco.MjModel) -> str | None:
    hinges = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    if model.nu == 0:
        return "actuators: none; the contract needs one <position> actuator per hinge joint"
    if model.nu != len(hinges):
        return f"actuators: {model.nu} actuators for {len(hinges)} hinge joints; give one <position> actuator per hinge"
    for a, joint in enumerate(hinges):
        name = _name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT or model.actuator_trnid[a, 0] != joint:
            expected = _name(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
            return (
                f"actuators: actuator '{name}' must drive joint '{expected}' (one actuator per hinge, in joint order)"
            )
        kind = _actuator_kind(model, a)
        if kind != "position":
            return (
                f"actuators: actuator '{name}' is a {kind} actuator; the contract needs position actuators "
                '(<position kp="..." kv="..." forcerange="-effort effort"/>)'
            )
        low, high = model.actuator_forcerange[a]
        if not model.actuator_forcelimited[a] or not low < 0 < high:
            return (
                f"actuators: actuator '{name}' has no forcerange; give the motor's torque limit, "
                'forcerange="-effort effort"'
            )
    return None


def _actuator_kind(model: mujoco.MjModel, a: int) -> str:
    """``position``, ``velocity``, ``motor`` or ``general``, from MuJoCo's gain and bias of the shortcuts."""
    gain, bias = model.actuator_gainprm[a], model.actuator_biasprm[a]
    fixed = model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED and model.actuator_dyntype[a] == 0
    if fixed and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE:
        return "motor (torque)"
    if fixed and model.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE:
        if gain[0] > 0 and bias[0] == 0 and bias[1] == -gain[0]:
            return "position"
        if gain[0] > 0 and bias[0] == 0 and bias[1] == 0 and bias[2] == -gain[0]:
            return "velocity"
    return "general"


def _imu(model: mujoco.MjModel) -> str | None:
    on_site = model.sensor_objtype == mujoco.mjtObj.mjOBJ_SITE
    gyro = {int(s) for s in model.sensor_objid[on_site & (model.sensor_type == mujoco.mjtSensor.mjSENS_GYRO)]}
    linvel = {int(s) for s in model.sensor_objid[on_site & (model.sensor_type == mujoco.mjtSensor.mjSENS_VELOCIMETER)]}
    if not gyro & linvel:
        return "sensors: no site carries both a <gyro> and a <velocimeter> sensor (the IMU the observations read)"
    return None


def _keyframe(model: mujoco.MjModel, keyframe: str) -> str | None:
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe)
    if key < 0:
        return f"keyframe: no keyframe named '{keyframe}' (the standing pose, with the holding targets as its ctrl)"
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, key)
    data.qvel[:] = 0.0
    mujoco.mj_forward(model, data)
    error = hold_error(model, data)
    if error is not None:
        return (
            f"keyframe: '{keyframe}' does not hold its pose ({error}); write the holding targets that "
            "scripts/stand_keyframe.py computes (with the robot config's physics options) as its ctrl"
        )
    return None
