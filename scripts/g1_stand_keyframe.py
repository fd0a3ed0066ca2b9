"""Compute the G1 ``stand`` keyframe: a knees-bent pose in exact static equilibrium.

With gains set from reflected inertia at 10 Hz (see docs/robots.md) the two ankles are far softer
than the inverted-pendulum load of the body above them, so holding plain joint targets the G1
sags and falls within a second. The keyframe therefore stores, besides the pose, PD targets that
include the static torques (``ctrl = q + tau / kp``): standing on them is an equilibrium.

Procedure: level the soles on the floor, then solve ``qacc(pelvis height/roll/pitch, ctrl) = 0``
at rest by Newton's method on finite-difference Jacobians, joint angles fixed. Prints the ``<key>``
element to paste into ``assets/robots/g1/g1.xml``.

Usage: python scripts/g1_stand_keyframe.py
"""

from __future__ import annotations

import mujoco
import numpy as np

from unilab_gpu.paths import robot_asset

# BeyondMimic's init pose (legs, waist, arms); ankle pitch then levels the soles.
HIP_PITCH, KNEE, SHOULDER_PITCH, SHOULDER_ROLL, ELBOW = -0.312, 0.669, 0.2, 0.2, 0.6


def initial_pose(model: mujoco.MjModel) -> np.ndarray:
    qpos = model.qpos0.copy()
    joint = {model.joint(j).name: model.jnt_qposadr[j] for j in range(model.njnt)}
    for side, sign in (("left", 1.0), ("right", -1.0)):
        qpos[joint[f"{side}_hip_pitch_joint"]] = HIP_PITCH
        qpos[joint[f"{side}_knee_joint"]] = KNEE
        qpos[joint[f"{side}_ankle_pitch_joint"]] = -(HIP_PITCH + KNEE)
        qpos[joint[f"{side}_shoulder_pitch_joint"]] = SHOULDER_PITCH
        qpos[joint[f"{side}_shoulder_roll_joint"]] = sign * SHOULDER_ROLL
        qpos[joint[f"{side}_elbow_joint"]] = ELBOW
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_kinematics(model, data)
    foot = [g for g in range(model.ngeom) if model.geom_condim[g] == 3]
    qpos[2] -= min(data.geom_xpos[g, 2] - model.geom_size[g, 0] for g in foot)
    return qpos


def equilibrium(model: mujoco.MjModel, qpos: np.ndarray, ctrl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Newton on pelvis height, roll, pitch and ctrl (32 unknowns) so that qacc = 0 at rest.

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

    def residual(x: np.ndarray) -> np.ndarray:
        data.qpos[:] = pose(x)
        data.qvel[:] = 0.0
        data.ctrl[:] = x[3:]
        mujoco.mj_forward(model, data)
        return data.qacc.copy()

    x = np.concatenate([[qpos[2], 0.0, 0.0], ctrl])
    for _ in range(8):
        r = residual(x)
        jac = np.stack([(residual(x + 1e-6 * e) - r) / 1e-6 for e in np.eye(x.size)], axis=1)
        x = x - np.linalg.lstsq(jac, r, rcond=None)[0]
    print(f"max |qacc| at rest: {np.abs(residual(x)).max():.2e}")
    return pose(x), x[3:]


def main() -> None:
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    qpos = initial_pose(model)
    qpos, ctrl = equilibrium(model, qpos, qpos[7:].copy())
    fmt = lambda v: " ".join(f"{a:.8f}".rstrip("0").rstrip(".") for a in v)  # noqa: E731
    print(f'<key name="stand"\n     qpos="{fmt(qpos)}"\n     ctrl="{fmt(ctrl)}"/>')


if __name__ == "__main__":
    main()
