"""Forward kinematics: poses against mj_forward, velocities against finite differences of mj_integratePos."""

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.utils.rotations import quat_apply


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


def _random_states(model, n, seed=0):
    rng = np.random.default_rng(seed)
    qpos = np.zeros((n, model.nq))
    qpos[:, :3] = rng.normal(size=(n, 3))
    q = rng.normal(size=(n, 4))
    qpos[:, 3:7] = q / np.linalg.norm(q, axis=1, keepdims=True)
    lo, hi = model.jnt_range[1:].T
    qpos[:, 7:] = rng.uniform(lo, hi, size=(n, len(lo)))
    return qpos, rng.normal(size=(n, model.nv))


def test_names_and_ranges(kin):
    m = kin.model
    assert kin.num_joints == 29 and kin.num_bodies == 30
    assert kin.body_names[0] == "pelvis" and kin.body_names[-1] == "right_wrist_yaw_link"
    assert kin.joint_names[0] == "left_hip_pitch_joint" and kin.joint_names[14] == "waist_pitch_joint"
    np.testing.assert_array_equal(kin.joint_range, m.jnt_range[1:])


def test_body_states_match_mujoco(kin):
    m = kin.model
    qpos, qvel = _random_states(m, 5)
    # The clip layout has the root angular velocity in the world frame; MuJoCo's free joint, in the body frame.
    ang_world = quat_apply(torch.from_numpy(qpos[:, 3:7]), torch.from_numpy(qvel[:, 3:6])).numpy()
    states = kin.body_states(qpos[:, :3], qpos[:, 3:7], qpos[:, 7:], qvel[:, :3], ang_world, qvel[:, 6:])
    d = mujoco.MjData(m)
    h = 1e-7
    for t in range(len(qpos)):
        d.qpos[:], d.qvel[:] = qpos[t], qvel[t]
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(states.pos[t], d.xpos[1:], atol=1e-12)
        np.testing.assert_allclose(states.quat[t], d.xquat[1:], atol=1e-12)
        # Velocity of each body origin and body rotation rate: central differences of integrated poses.
        ahead, behind = qpos[t].copy(), qpos[t].copy()
        mujoco.mj_integratePos(m, ahead, qvel[t], h)
        mujoco.mj_integratePos(m, behind, qvel[t], -h)
        xpos, xquat = [], []
        for q in (ahead, behind):
            d.qpos[:] = q
            mujoco.mj_kinematics(m, d)
            xpos.append(d.xpos[1:].copy())
            xquat.append(d.xquat[1:].copy())
        np.testing.assert_allclose(states.lin_vel[t], (xpos[0] - xpos[1]) / (2 * h), atol=1e-6)
        for b in range(kin.num_bodies):
            w = np.zeros(3)
            dq = np.zeros(4)
            neg = np.zeros(4)
            mujoco.mju_negQuat(neg, xquat[1][b])
            mujoco.mju_mulQuat(dq, xquat[0][b], neg)  # world-frame increment
            mujoco.mju_quat2Vel(w, dq, 2 * h)
            np.testing.assert_allclose(states.ang_vel[t, b], w, atol=1e-6)


def test_matches_object_velocity_at_the_com(kin):
    # mj_objectVelocity reports the velocity at the body's centre of mass; shift ours there.
    m = kin.model
    qpos, qvel = _random_states(m, 1, seed=3)
    ang_world = quat_apply(torch.from_numpy(qpos[:, 3:7]), torch.from_numpy(qvel[:, 3:6])).numpy()
    states = kin.body_states(qpos[:, :3], qpos[:, 3:7], qpos[:, 7:], qvel[:, :3], ang_world, qvel[:, 6:])
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = qpos[0], qvel[0]
    mujoco.mj_forward(m, d)
    for b in range(1, m.nbody):
        ref = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, b, ref, 0)
        at_com = states.lin_vel[0, b - 1] + np.cross(states.ang_vel[0, b - 1], d.xipos[b] - d.xpos[b])
        np.testing.assert_allclose(ref[:3], states.ang_vel[0, b - 1], atol=1e-12)
        np.testing.assert_allclose(ref[3:], at_com, atol=1e-12)


def test_geom_positions(kin):
    m = kin.model
    qpos, _ = _random_states(m, 3, seed=1)
    ids = np.array([1, 5, 9])
    got = kin.geom_positions(qpos[:, :3], qpos[:, 3:7], qpos[:, 7:], ids)
    d = mujoco.MjData(m)
    for t in range(3):
        d.qpos[:] = qpos[t]
        mujoco.mj_forward(m, d)
        np.testing.assert_allclose(got[t], d.geom_xpos[ids], atol=1e-12)


def test_rejects_models_without_a_free_root():
    model = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><joint type='hinge'/><geom size='0.1'/></body></worldbody></mujoco>"
    )
    with pytest.raises(ValueError, match="first joint is a free joint"):
        RobotKinematics(model)


def test_root_from_body_inverts_forward_kinematics():
    """The root that puts a body where FK put it is the root FK started from (torso, via the waist)."""
    from unilab_gpu.motion import synthesize_clip

    kinematics = RobotKinematics.from_robot("g1")
    clip = synthesize_clip(seconds=0.5, seed=7, kinematics=kinematics)
    for body in ("torso_link", "left_wrist_yaw_link", "pelvis"):
        b = kinematics.body_names.index(body)
        root_pos, root_quat = kinematics.root_from_body(
            body, clip.body_pos_w[:, b], clip.body_quat_w[:, b], clip.joint_pos
        )
        np.testing.assert_allclose(root_pos, clip.root_pos, atol=1e-9)
        np.testing.assert_allclose(root_quat * np.sign(root_quat[:, :1] * clip.root_quat[:, :1]), clip.root_quat,
                                   atol=1e-9)  # fmt: skip
    with pytest.raises(ValueError, match="no body 'hat'"):
        kinematics.root_from_body("hat", clip.root_pos, clip.root_quat, clip.joint_pos)
