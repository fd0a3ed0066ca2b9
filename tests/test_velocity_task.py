"""G1 velocity task: terms against NumPy / MuJoCo C on hand-made states, command timer and dead
zone, device-side curriculum, randomized model fields (per row, reset rows only, physics = MuJoCo C)."""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.managers.reset_staging import ResetStaging
from unilab_gpu.utils.sync_audit import no_host_sync

QUIET = ["events.push=null"]


@pytest.fixture(scope="module")
def env():
    return make_env("g1_velocity", num_envs=6, compile=False, overrides=QUIET, announce=False)


def _rot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """MuJoCo C's rotation of v by the unit quaternion q (wxyz)."""
    out = np.zeros(3)
    mujoco.mju_rotVecQuat(out, np.asarray(v, dtype=np.float64), np.asarray(q, dtype=np.float64))
    return out


def _rot_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    neg = np.zeros(4)
    mujoco.mju_negQuat(neg, np.asarray(q, dtype=np.float64))
    return _rot(neg, v)


def _random_state(env, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Upright-ish random root poses, random joint offsets and velocities, written and refreshed."""
    n, m = env.num_envs, env.sim.mj_model
    qpos = np.tile(m.key("stand").qpos, (n, 1))
    qvel = rng.uniform(-1.0, 1.0, (n, m.nv))
    for i in range(n):
        euler = rng.uniform([-0.6, -0.6, -math.pi], [0.6, 0.6, math.pi])
        quat = np.zeros(4)
        mujoco.mju_euler2Quat(quat, euler, "XYZ")
        qpos[i, 3:7] = quat
    qpos[:, 2] = rng.uniform(0.2, 0.9, n)
    qpos[:, 7:] += rng.uniform(-0.3, 0.3, (n, m.nq - 7))
    ids = torch.arange(n)
    env.sim.write_rows(ids, torch.tensor(qpos, dtype=torch.float32), torch.tensor(qvel, dtype=torch.float32))
    env.sim.refresh()
    return env.sim.state.qpos.numpy().astype(np.float64), env.sim.state.qvel.numpy().astype(np.float64)


def _term(manager, name):
    return next(t for t in manager.terms if t.name == name)


def test_dimensions(env) -> None:
    assert env.observation_dims == {"policy": 98, "critic": 101}
    assert env.action_dim == 29
    assert env.max_episode_length == 1000  # 20 s at 50 Hz


def test_joint_targets_scale_with_effort_over_gain(env) -> None:
    """target = stand pose + 0.25 * effort_limit / kp * action, clipped to the joint range, from
    MuJoCo C's model fields: the soft ankles get +-0.44 rad, not a uniform 0.25."""
    m = env.sim.mj_model
    rng = np.random.default_rng(3)
    action = rng.uniform(-1.0, 1.0, (env.num_envs, m.nu))
    env.action_manager.process(torch.tensor(action, dtype=torch.float32))
    joints = m.actuator_trnid[:, 0]
    default = m.key("stand").qpos[m.jnt_qposadr[joints]]
    scale = 0.25 * m.actuator_forcerange[:, 1] / m.actuator_gainprm[:, 0]
    want = np.clip(default + scale * action, m.jnt_range[joints, 0], m.jnt_range[joints, 1])
    ankle = m.actuator("left_ankle_pitch_joint").id
    assert scale[ankle] == pytest.approx(0.25 * 50.0 / 28.5, rel=0.01)
    np.testing.assert_allclose(env.sim.state.ctrl.numpy(), want, atol=1e-5)


def test_rewards_terminations_observations_against_numpy(env) -> None:
    rng = np.random.default_rng(0)
    env.reset()
    qpos, qvel = _random_state(env, rng)
    cmd = env.command_manager.get("twist")
    command = rng.uniform(-1, 1, (env.num_envs, 3))
    phase = rng.uniform(0, 2 * math.pi, env.num_envs)
    cmd.command.copy_(torch.tensor(command, dtype=torch.float32))
    cmd.phase.copy_(torch.tensor(phase, dtype=torch.float32))
    m, s = env.sim.mj_model, env.sim.state
    body_quat = s.body_quat_w.numpy().astype(np.float64)
    torso, feet = m.body("torso_link").id, [m.body("left_ankle_roll_link").id, m.body("right_ankle_roll_link").id]

    v_b = np.stack([_rot_inv(q[3:7], v[0:3]) for q, v in zip(qpos, qvel, strict=True)])
    w_b = qvel[:, 3:6]
    g_torso = np.stack([_rot_inv(q, [0, 0, -1]) for q in body_quat[:, torso]])
    rest = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, rest, m.key("stand").id)
    mujoco.mj_kinematics(m, rest)
    sites = [m.site("left_foot").id, m.site("right_foot").id]
    heights = s.site_pos_w.numpy()[:, sites, 2] - rest.site_xpos[sites, 2]

    def bezier_target(phi):  # 0 -> 0.09 -> 0 over one cycle, smoothstep halves
        x = np.mod(phi, 2 * math.pi) / (2 * math.pi)
        t = np.where(x <= 0.5, 2 * x, 2 * x - 1)
        smooth = 3 * t**2 - 2 * t**3
        return np.where(x <= 0.5, 0.09 * smooth, 0.09 * (1 - smooth))

    target = np.stack([bezier_target(phase), bezier_target(phase + math.pi)], axis=1)
    joint_names = env.robot.joint_names
    weight_of = {"hip_pitch": 0.01, "hip_roll": 1.0, "hip_yaw": 5.0, "knee": 0.01, "ankle": 5.0}
    pose_w = np.array([next((w for k, w in weight_of.items() if k in j), 50.0) for j in joint_names])
    dq = qpos[:, 7:] - m.key("stand").qpos[7:]
    expected = {
        "track_lin_vel": np.exp(-np.sum((command[:, :2] - v_b[:, :2]) ** 2, axis=1) / 0.25),
        "track_ang_vel": np.exp(-((command[:, 2] - w_b[:, 2]) ** 2) / 0.25),
        "ang_vel_xy": np.sum(w_b[:, :2] ** 2, axis=1),
        "flat_orientation": np.sum(g_torso[:, :2] ** 2, axis=1),
        "pose": np.sum(pose_w * dq**2, axis=1),
        "feet_orientation": np.sum(body_quat[:, feet][..., 1:3] ** 2, axis=(1, 2)),
        "feet_phase": np.exp(-np.sum((heights - target) ** 2, axis=1) / 0.008),
        "alive": np.ones(env.num_envs),
    }
    for name, value in expected.items():
        got = _term(env.reward_manager, name)(env).numpy()
        np.testing.assert_allclose(got, value, rtol=1e-4, atol=1e-5, err_msg=name)

    tilt = np.degrees(np.arccos(np.clip(-g_torso[:, 2], -1, 1)))
    np.testing.assert_array_equal(_term(env.termination_manager, "tilt")(env).numpy(), tilt > 65.0)
    np.testing.assert_array_equal(_term(env.termination_manager, "fell")(env).numpy(), qpos[:, 2] < 0.3)

    env.observation_manager.compute(env, torch.ones(env.num_envs, dtype=torch.bool), False)
    critic = env.observation_manager.obs["critic"].numpy()
    gyro = s.sensordata.numpy()[:, env.sim.sensor_slice("imu_pelvis_gyro")]
    np.testing.assert_allclose(critic[:, 0:3], 0.25 * gyro, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(critic[:, 35:64], 0.05 * qvel[:, 6:], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(critic[:, 93:96], command, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(critic[:, 96:98], np.stack([np.sin(phase), np.cos(phase)], 1), atol=1e-5)
    np.testing.assert_allclose(critic[:, 98:101], 2.0 * v_b, rtol=1e-4, atol=1e-5)
    policy = env.observation_manager.obs["policy"].numpy()
    np.testing.assert_allclose(policy[:, 93:98], critic[:, 93:98], atol=1e-6)  # command, phase: no noise
    assert np.abs(policy[:, 35:64] - critic[:, 35:64]).max() <= 0.05 * 0.1 + 1e-6  # noise before scaling


def test_base_at_commanded_velocity_earns_near_max_tracking_reward() -> None:
    env = make_env(
        "g1_velocity",
        num_envs=4,
        compile=False,
        overrides=[*QUIET, "commands.twist.params.resampling_time_range=[0.05,0.1]"],
        announce=False,
    )
    env.reset()
    rm, cmd = env.reward_manager, env.command_manager.get("twist")
    track = [rm.term_names.index("track_lin_vel"), rm.term_names.index("track_ang_vel")]
    best = (rm.weights[track] * env.step_dt).numpy()
    seen = []
    for _ in range(10):
        env.step(torch.zeros(4, env.action_dim))  # commands resample inside the step
        c = cmd.command.numpy().astype(np.float64)
        quat = env.robot.root_quat_w.numpy().astype(np.float64)
        # Drive the base at the command: planar velocity in the base frame, yaw rate about the base z.
        v_w = np.stack([_rot(q, [cx, cy, 0.0]) for q, (cx, cy, _) in zip(quat, c, strict=True)])
        env.robot.root_lin_vel_w.copy_(torch.tensor(v_w, dtype=torch.float32))
        env.robot.root_ang_vel_b.copy_(torch.tensor(np.c_[np.zeros((4, 2)), c[:, 2]], dtype=torch.float32))
        env.sim.refresh()
        rm.compute(env, torch.zeros(4, dtype=torch.bool))
        earned = rm.step_terms[:, track].numpy()
        assert (earned >= 0.97 * best).all(), (earned, best)
        seen.append(c)
    assert len(np.unique(np.round(np.concatenate(seen), 5), axis=0)) > 8  # the commands did change
    # Standing still against a brisk command earns far less.
    cmd.command.copy_(torch.tensor([[1.0, 0.0, 0.8]] * 4))
    env.robot.root_lin_vel_w.zero_()
    env.robot.root_ang_vel_b.zero_()
    rm.compute(env, torch.zeros(4, dtype=torch.bool))
    assert (rm.step_terms[:, track].numpy() < 0.2 * best).all()


def test_fallen_or_tilted_robot_terminates_and_the_step_is_sync_free(env) -> None:
    env.reset()
    m, n = env.sim.mj_model, env.num_envs
    qpos = np.tile(m.key("stand").qpos, (n, 1))
    lying, tilted = np.zeros(4), np.zeros(4)
    mujoco.mju_euler2Quat(lying, [math.pi / 2, 0, 0], "XYZ")
    mujoco.mju_euler2Quat(tilted, [0, math.radians(75), 0], "XYZ")
    qpos[0, 2], qpos[0, 3:7] = 0.15, lying  # on the ground
    qpos[1, 3:7] = tilted  # still high, but tilted past 65 degrees
    ids = torch.arange(n)
    env.sim.write_rows(ids, torch.tensor(qpos, dtype=torch.float32), torch.zeros(n, m.nv))
    env.sim.refresh()
    env.episode_length.fill_(10)
    with no_host_sync():
        result = env.step(torch.zeros(n, env.action_dim))
        terminated = result.terminated.clone()
        for _ in range(2):
            env.step(torch.zeros(n, env.action_dim))
    assert terminated.tolist() == [True, True] + [False] * (n - 2)
    assert env.robot.root_pos_w[0, 2] > 0.6  # the fallen row was reset within the step


def test_velocity_tracking_errors_against_numpy(env) -> None:
    rng = np.random.default_rng(4)
    env.reset()
    qpos, qvel = _random_state(env, rng)
    cmd = env.command_manager.get("twist")
    command = rng.uniform(-1, 1, (env.num_envs, 3))
    cmd.command.copy_(torch.tensor(command, dtype=torch.float32))
    with no_host_sync():
        errors = cmd.tracking_errors()
    v_b = np.stack([_rot_inv(q[3:7], v[0:3]) for q, v in zip(qpos, qvel, strict=True)])
    assert float(errors["lin_vel_error"]) == pytest.approx(np.linalg.norm(command[:, :2] - v_b[:, :2], axis=1).mean())
    assert float(errors["yaw_rate_error"]) == pytest.approx(np.abs(command[:, 2] - qvel[:, 5]).mean(), rel=1e-5)


def test_summary_reports_the_mean_per_step_velocity_errors(env) -> None:
    """``velocity/*`` step means in ``stats.summary()``: per step, the mean over rows of the errors
    against the state after physics (NumPy), averaged over the steps, summed without a host sync."""
    rng = np.random.default_rng(5)
    env.reset()
    env.stats.clear()
    cmd = env.command_manager.get("twist")
    cmd.command.copy_(torch.tensor(rng.uniform(-1, 1, (env.num_envs, 3)), dtype=torch.float32))
    cmd.time_left.fill_(100.0)  # no resample inside these steps: the command is the one set here
    lin, yaw = [], []
    for _ in range(3):
        with no_host_sync():
            env.step(torch.zeros(env.num_envs, env.action_dim))
        c = cmd.command.numpy().astype(np.float64)
        qpos, qvel = (t.numpy().astype(np.float64) for t in (env.sim.state.qpos, env.sim.state.qvel))
        v_b = np.stack([_rot_inv(q[3:7], v[0:3]) for q, v in zip(qpos, qvel, strict=True)])
        lin.append(np.linalg.norm(c[:, :2] - v_b[:, :2], axis=1).mean())
        yaw.append(np.abs(c[:, 2] - qvel[:, 5]).mean())  # free joint: angular velocity in the body frame
    summary = env.stats.summary()
    assert summary["episode/count"] == 0  # no reset moved a row after its errors were taken
    assert summary["velocity/lin_vel_error_mps"] == pytest.approx(float(np.mean(lin)), abs=1e-5)
    assert summary["velocity/yaw_rate_error_radps"] == pytest.approx(float(np.mean(yaw)), abs=1e-5)
    assert summary["velocity/lin_vel_error_mps"] > 0.1
    env.stats.clear()
    assert env.stats.summary()["velocity/lin_vel_error_mps"] == 0.0


def test_command_timer_dead_zone_and_fixed_command(env) -> None:
    env.reset()
    cmd = env.command_manager.get("twist")
    draws = cmd.draw(20000).numpy()
    planar = np.linalg.norm(draws[:, :2], axis=1)
    assert ((planar == 0) | (planar >= 0.2)).all() and ((draws[:, 2] == 0) | (np.abs(draws[:, 2]) >= 0.2)).all()
    # The disc |v| < 0.2 lies inside the box [-0.6, 1] x [-0.4, 0.4]: P = pi 0.2^2 / 1.28; P(|w| < 0.2) = 0.4 / 1.6.
    assert abs((planar == 0).mean() - math.pi * 0.04 / 1.28) < 0.01 and abs((draws[:, 2] == 0).mean() - 0.25) < 0.015
    assert draws[:, 0].min() >= -0.6 and draws[:, 0].max() <= 1.0 and np.abs(draws[:, 1]).max() <= 0.4
    assert np.abs(draws[:, 2]).max() <= 0.8
    before = cmd.command.clone()
    phase = cmd.phase.clone()
    cmd.time_left.copy_(torch.tensor([0.01, 5.0, 0.02, 5.0, 0.015, 5.0]))
    cmd.update(env)
    due = np.array([True, False, True, False, True, False])
    changed = (cmd.command != before).any(dim=1).numpy()
    np.testing.assert_array_equal(changed[~due], False)
    assert changed[due].all()
    left = cmd.time_left.numpy()
    assert ((left[due] >= 3.0) & (left[due] <= 8.0)).all()
    np.testing.assert_allclose(left[~due], 5.0 - env.step_dt, atol=1e-6)
    step = 2 * math.pi * 1.5 * env.step_dt
    np.testing.assert_allclose(np.mod(cmd.phase.numpy() - phase.numpy(), 2 * math.pi), step, atol=1e-5)

    fixed = make_env(
        "g1_velocity_play",
        num_envs=2,
        compile=False,
        overrides=["commands.twist.params.fixed=[0.8,0.0,0.3]"],
        announce=False,
    )
    fixed.reset()
    for _ in range(3):
        fixed.step(torch.zeros(2, fixed.action_dim))
    np.testing.assert_allclose(fixed.command_manager.get("twist").command.numpy(), [[0.8, 0.0, 0.3]] * 2, atol=1e-7)
    assert fixed.observation_manager.groups["policy"].enable_noise is False


def test_curriculum_follows_episode_length_on_the_device(env) -> None:
    env.reset()
    curriculum = next(t for t in env.event_manager.by_mode["reset"] if t.name == "penalty_curriculum").instance
    rm = env.reward_manager
    configured = {name: t.cfg.weight for name, t in zip(rm.term_names, rm.terms, strict=True)}
    assert curriculum.term_names == [k for k, w in configured.items() if w < 0]
    n = env.num_envs
    curriculum.scale.fill_(0.1)
    curriculum.mean_length.zero_()
    scale, mean = 0.1, 0.0
    batches = [([0, 3, n, n], [800, 900]), ([1, n, n, n], [760]), ([n, n, n, n], []), ([2, 4, n, n], [100, 40])]
    batches += [([5, n, n, n], [20])] * 40
    for ids, lengths in batches:
        env.episode_length.zero_()
        env.episode_length[ids[: len(lengths)]] = torch.tensor(lengths, dtype=torch.int64)
        env_ids = torch.tensor(ids)
        with no_host_sync():
            curriculum(env, env_ids)
        if lengths:  # NumPy reference of the rule
            mean = np.mean(lengths) if mean == 0 else mean + 0.05 * (np.mean(lengths) - mean)
            scale *= 1.001 if mean > 750 else 0.999 if mean < 150 else 1.0
            scale = min(max(scale, 0.0625), 0.125)
        assert float(curriculum.mean_length) == pytest.approx(mean, rel=1e-5)
        assert float(curriculum.scale) == pytest.approx(scale, rel=1e-5)
    for name, term_weight in zip(rm.term_names, rm.weights.tolist(), strict=True):
        factor = scale if configured[name] < 0 else 1.0
        assert term_weight == pytest.approx(configured[name] * factor, rel=1e-5), name
    assert env.stats.summary()["curriculum/penalty_scale"] == pytest.approx(scale, rel=1e-5)


def test_command_update_and_curriculum_compiled_equal_eager(env) -> None:
    env.reset()
    cmd = env.command_manager.get("twist")
    curriculum = next(t for t in env.event_manager.by_mode["reset"] if t.name == "penalty_curriculum").instance
    ids = torch.tensor([1, 4, env.num_envs, env.num_envs])
    staging = ResetStaging(env.num_envs, ids, env.sim.mj_model.nq, env.sim.mj_model.nv)
    env.episode_length.copy_(torch.arange(100, 700, 100))

    def phase_fn():
        cmd.update(env)
        cmd.reset(staging)
        curriculum(env, ids)

    buffers = [
        cmd._command,
        cmd._phase,
        cmd._time_left,
        curriculum.scale,
        curriculum.mean_length,
        env.reward_manager.weights,
    ]
    start = [b.clone() for b in buffers]
    cmd.time_left.copy_(torch.tensor([0.01, 5.0, 0.02, 5.0, 0.015, 5.0]))
    start[2] = cmd._time_left.clone()
    rng = torch.get_rng_state()
    phase_fn()
    eager = [b.clone() for b in buffers]
    for b, s in zip(buffers, start, strict=True):
        b.copy_(s)
    torch.set_rng_state(rng)
    # As the env compiles its phases: Inductor's fallback_random draws the eager random numbers.
    torch.compile(phase_fn, fullgraph=True, dynamic=False, options={"fallback_random": True})()
    for name, got, want in zip(["command", "phase", "time", "scale", "mean", "weights"], buffers, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=name)


def test_reset_root_uniform_against_numpy(env) -> None:
    root = next(t for t in env.event_manager.by_mode["reset"] if t.name == "root_state")
    k = env.reset_capacity
    env.reset_staging.begin(env.robot.default_qpos)
    torch.manual_seed(3)
    pose = torch.rand(k, 6).numpy()
    vel = torch.rand(k, 6).numpy()
    torch.manual_seed(3)
    root(env, torch.arange(k))
    lo_p = np.array([-0.5, -0.5, 0, 0, 0, -3.14159265])
    pose = lo_p + pose * (-2 * lo_p)
    vel = -0.5 + vel
    default = env.sim.mj_model.key("stand").qpos
    qpos, qvel = env.reset_staging.qpos.numpy(), env.reset_staging.qvel.numpy()
    for i in range(k):
        offset, quat = np.zeros(4), np.zeros(4)
        mujoco.mju_euler2Quat(offset, pose[i, 3:], "XYZ")
        mujoco.mju_mulQuat(quat, offset, default[3:7])
        np.testing.assert_allclose(qpos[i, :3], default[:3] + pose[i, :3], atol=1e-6)
        np.testing.assert_allclose(qpos[i, 3:7], quat, atol=1e-6)
        np.testing.assert_allclose(qvel[i, :3], vel[i, :3], atol=1e-6)
        np.testing.assert_allclose(qvel[i, 3:6], _rot_inv(quat, vel[i, 3:]), atol=1e-5)
    np.testing.assert_array_equal(qpos[:, 7:], np.broadcast_to(default[7:], qpos[:, 7:].shape).astype(np.float32))


FIELDS = ("actuator_gainprm", "actuator_biasprm", "body_mass", "body_inertia", "body_subtreemass", "body_ipos")


def _fields(env) -> dict[str, torch.Tensor]:
    return {name: env.sim.model_fields[name].clone() for name in FIELDS}


def test_randomized_model_fields_per_row_and_for_reset_rows_only(env) -> None:
    env.reset()
    m, n = env.sim.mj_model, env.num_envs
    f = _fields(env)
    kp0, kd0 = m.actuator_gainprm[:, 0], -m.actuator_biasprm[:, 2]
    kp, kd = f["actuator_gainprm"][:, :, 0].numpy(), -f["actuator_biasprm"][:, :, 2].numpy()
    assert ((kp / kp0 >= 0.9 - 1e-6) & (kp / kp0 <= 1.1 + 1e-6)).all() and (
        (kd / kd0 >= 0.9 - 1e-6) & (kd / kd0 <= 1.1 + 1e-6)
    ).all()
    np.testing.assert_array_equal(f["actuator_biasprm"][:, :, 1].numpy(), -kp)
    assert len({tuple(row) for row in np.round(kp, 4)}) == n  # every row has its own gains
    ratio = f["body_mass"].numpy()[:, 1:] / m.body_mass[1:]
    assert ((ratio >= 0.9 - 1e-6) & (ratio <= 1.1 + 1e-6)).all() and len({tuple(r) for r in np.round(ratio, 4)}) == n
    np.testing.assert_allclose(
        f["body_inertia"].numpy()[:, 1:] / m.body_inertia[1:], np.repeat(ratio[..., None], 3, axis=2), rtol=1e-5
    )
    torso = m.body("torso_link").id
    shift = f["body_ipos"].numpy() - m.body_ipos
    assert (np.abs(shift[:, torso]) <= [0.025 + 1e-6, 0.025 + 1e-6, 0.03 + 1e-6]).all() and np.abs(
        shift[:, torso]
    ).min() > 0
    np.testing.assert_allclose(np.delete(shift, torso, axis=1), 0.0, atol=1e-7)
    for row in range(n):  # subtree masses as mj_setConst computes them for that row's masses
        c = _c_model(m, f, row)
        mujoco.mj_setConst(c, mujoco.MjData(c))
        np.testing.assert_allclose(f["body_subtreemass"][row].numpy(), c.body_subtreemass, rtol=1e-5)

    # Fixed within an episode: steps without ends leave every row's fields alone.
    env.episode_length.zero_()
    for _ in range(3):
        env.step(torch.zeros(n, env.action_dim))
    assert not env.termination_manager.terminated.any()
    for name in FIELDS:
        torch.testing.assert_close(env.sim.model_fields[name], f[name], rtol=0, atol=0, msg=name)

    # A reset of rows 2 and n-1 (ids padded with n) redraws theirs and leaves the others bit for bit.
    events = [t for t in env.event_manager.by_mode["reset"] if t.name in ("pd_gains", "body_mass", "torso_com")]
    ids = torch.tensor([2, n - 1, n, n])
    for event in events:
        event(env, ids)
    after = _fields(env)
    for name in FIELDS:
        changed = (after[name] != f[name]).reshape(n, -1).any(dim=1).tolist()
        assert changed == [r in (2, n - 1) for r in range(n)], name

    # The row-restricted refresh after a reset (a scratch batch whose world i reads model row i) gives
    # the same poses, body velocities and IMU readings for randomized rows as a full refresh.
    rows = torch.full((env.reset_capacity,), n)
    rows[:2] = torch.tensor([2, n - 1])
    qvel = torch.rand(env.reset_capacity, m.nv) - 0.5
    env.sim.write_rows(rows, env.robot.default_qpos.expand(env.reset_capacity, -1).contiguous(), qvel)
    env.sim.refresh(rows)
    partial = {k: v.clone() for k, v in env.sim.state.tensors().items()}
    env.sim.refresh()
    for name, value in env.sim.state.tensors().items():
        if name != "body_contact":
            torch.testing.assert_close(partial[name][[2, n - 1]], value[[2, n - 1]], rtol=1e-5, atol=1e-5, msg=name)


def _c_model(m: mujoco.MjModel, fields: dict[str, torch.Tensor], row: int) -> mujoco.MjModel:
    """A MuJoCo C copy of the model with world ``row``'s values of the batched fields."""
    c = copy.deepcopy(m)
    for name in FIELDS:
        getattr(c, name)[:] = fields[name][row].numpy().astype(np.float64)
    return c


def test_randomized_row_physics_matches_mujoco_c(env) -> None:
    env.reset()
    m, n, sim = env.sim.mj_model, env.num_envs, env.sim
    f = _fields(env)
    rng = np.random.default_rng(1)
    qpos = np.tile(m.key("stand").qpos, (n, 1))
    qpos[:, 2] = 1.5  # in the air: no contacts, so the comparison is about masses and gains
    qvel = rng.uniform(-0.5, 0.5, (n, m.nv))
    ctrl = m.key("stand").qpos[7:] + rng.uniform(-0.3, 0.3, (n, m.nu))
    sim.write_rows(torch.arange(n), torch.tensor(qpos, dtype=torch.float32), torch.tensor(qvel, dtype=torch.float32))
    sim.state.ctrl.copy_(torch.tensor(ctrl, dtype=torch.float32))
    sim.step(4)
    got_qpos, got_qvel = sim.state.qpos.numpy(), sim.state.qvel.numpy()
    for row in (0, 3):
        errors = []
        for model in (_c_model(m, f, row), m):  # the row's fields, then the nominal model
            d = mujoco.MjData(model)
            d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[row], qvel[row], ctrl[row]
            for _ in range(4):
                mujoco.mj_step(model, d)
            errors.append((np.abs(got_qpos[row] - d.qpos).max(), np.abs(got_qvel[row] - d.qvel).max()))
        (pos_err, vel_err), (nominal_pos_err, nominal_vel_err) = errors
        assert pos_err < 1e-5 and vel_err < 1e-4, errors
        assert nominal_vel_err > 1e-2, errors  # the randomization is what made them agree


def test_heading_control_steers_the_yaw_rate() -> None:
    env = make_env(
        "g1_velocity", num_envs=3, compile=False, overrides=[*QUIET, "commands.twist.params.heading_fraction=1.0"]
    )
    env.reset()
    cmd = env.command_manager.get("twist")
    yaw = np.array([0.3, -2.0, 3.0])
    heading = np.array([0.5, 2.5, -3.0])
    quat = np.stack([[np.cos(a / 2), 0, 0, np.sin(a / 2)] for a in yaw])
    env.robot.root_quat_w.copy_(torch.tensor(quat, dtype=torch.float32))
    cmd.heading.copy_(torch.tensor(heading, dtype=torch.float32))
    cmd.time_left.fill_(10.0)
    cmd.update(env)
    wrapped = np.angle(np.exp(1j * (heading - yaw)))  # [0.2, 4.5 - 2 pi, -6 + 2 pi]
    np.testing.assert_allclose(cmd.command[:, 2].numpy(), np.clip(0.5 * wrapped, -0.8, 0.8), atol=1e-5)
    assert cmd.heading_rows.all()


def test_bad_pose_weights_name_the_joint() -> None:
    with pytest.raises(ValueError, match="joint 'left_hip_pitch_joint' matches two patterns"):
        make_env(
            "g1_velocity",
            num_envs=1,
            compile=False,
            overrides=["+robot.pose_weights.left_hip_pitch_joint=2.0"],  # the G1's weights live in its robot config
        )
