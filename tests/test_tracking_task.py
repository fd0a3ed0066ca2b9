"""G1 tracking task: terms against NumPy, reset reproduces the reference, teleport earns ~max."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from motion_helpers import REAL_CLIP

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.utils.sync_audit import no_host_sync

QUIET = ["events.push=null", "commands.motion.params.synthetic_seconds=4.0"]
NO_NOISE = [
    "commands.motion.params.pose_range=[[0,0],[0,0],[0,0],[0,0],[0,0],[0,0]]",
    "commands.motion.params.velocity_range=[[0,0],[0,0],[0,0],[0,0],[0,0],[0,0]]",
    "commands.motion.params.joint_position_range=[0,0]",
]


# Independent NumPy quaternion math (wxyz), written here so the test does not reuse the code under test.
def q_mul(a, b):
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        -1,
    )


def q_conj(q):
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def q_rot(q, v):
    vq = np.concatenate([np.zeros(v.shape[:-1] + (1,)), v], -1)
    return q_mul(q_mul(q, vq), q_conj(q))[..., 1:]


def q_angle(a, b):
    d = q_mul(q_conj(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(d[..., 1:], axis=-1), np.abs(d[..., 0]))


def q_yaw(q):
    w, x, y, z = np.moveaxis(q, -1, 0)
    yaw = np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)


@pytest.fixture(scope="module")
def env():
    env = make_env("g1_tracking", num_envs=6, compile=False, overrides=QUIET)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(3):
        env.step(torch.from_numpy(rng.uniform(-1, 1, (6, 29)).astype(np.float32)))
    # The step ended by advancing the reference to the frame it observes next; score that frame,
    # so the relative targets and the reference fields below describe one and the same frame.
    env.command_manager.get("motion").update(env)
    return env


def _arrays(env):
    cmd = env.command_manager.get("motion")
    n = lambda t: t.double().numpy()  # noqa: E731
    return cmd, {
        "ref_pos": n(cmd.body_pos_w),
        "ref_quat": n(cmd.body_quat_w),
        "ref_lin": n(cmd.body_lin_vel_w),
        "ref_ang": n(cmd.body_ang_vel_w),
        "pos": n(cmd.robot_body_pos_w),
        "quat": n(cmd.robot_body_quat_w),
        "lin": n(cmd.robot_body_lin_vel_w),
        "ang": n(cmd.robot_body_ang_vel_w),
        "a": cmd.anchor_index,
    }


def test_dimensions(env) -> None:
    assert env.observation_dims == {"policy": 160, "critic": 286}
    assert env.action_dim == 29
    no_se = make_env("g1_tracking_no_state_estimation", num_envs=1, compile=False, overrides=QUIET)
    assert no_se.observation_dims == {"policy": 154, "critic": 286}


def test_relative_targets_and_rewards_against_numpy(env) -> None:
    from unilab_gpu.tasks.tracking import rewards as R

    cmd, x = _arrays(env)
    a = x["a"]
    heading = q_yaw(q_mul(x["quat"][:, a], q_conj(x["ref_quat"][:, a])))[:, None]
    shift = np.concatenate([x["pos"][:, a, None, :2], x["ref_pos"][:, a, None, 2:]], -1)
    rel_pos = shift + q_rot(np.broadcast_to(heading, x["ref_quat"].shape), x["ref_pos"] - x["ref_pos"][:, a, None])
    rel_quat = q_mul(np.broadcast_to(heading, x["ref_quat"].shape), x["ref_quat"])
    np.testing.assert_allclose(cmd.body_pos_relative_w.numpy(), rel_pos, atol=1e-5)
    dots = np.abs((cmd.body_quat_relative_w.numpy() * rel_quat).sum(-1))
    np.testing.assert_allclose(dots, 1.0, atol=1e-5)

    expected = {
        "anchor_position_exp": np.exp(-np.sum((x["ref_pos"][:, a] - x["pos"][:, a]) ** 2, -1) / 0.3**2),
        "anchor_orientation_exp": np.exp(-(q_angle(x["ref_quat"][:, a], x["quat"][:, a]) ** 2) / 0.4**2),
        "relative_body_position_exp": np.exp(-np.mean(np.sum((rel_pos - x["pos"]) ** 2, -1), -1) / 0.3**2),
        "relative_body_orientation_exp": np.exp(-np.mean(q_angle(rel_quat, x["quat"]) ** 2, -1) / 0.4**2),
        "body_linear_velocity_exp": np.exp(-np.mean(np.sum((x["ref_lin"] - x["lin"]) ** 2, -1), -1) / 1.0),
        "body_angular_velocity_exp": np.exp(-np.mean(np.sum((x["ref_ang"] - x["ang"]) ** 2, -1), -1) / 3.14**2),
    }
    stds = {
        "anchor_position_exp": 0.3,
        "anchor_orientation_exp": 0.4,
        "relative_body_position_exp": 0.3,
        "relative_body_orientation_exp": 0.4,
        "body_linear_velocity_exp": 1.0,
        "body_angular_velocity_exp": 3.14,
    }
    for name, value in expected.items():
        got = getattr(R, name)(env, std=stds[name]).double().numpy()
        np.testing.assert_allclose(got, value, rtol=1e-4, atol=1e-6, err_msg=name)
        assert np.ptp(value) > 0  # the random states really differ


def test_terminations_against_numpy(env) -> None:
    from unilab_gpu.tasks.tracking import terminations as T

    cmd, x = _arrays(env)
    a = x["a"]
    for threshold in (0.001, 0.01, 0.25):
        height = np.abs(x["ref_pos"][:, a, 2] - x["pos"][:, a, 2]) > threshold
        assert T.anchor_height_error_above(env, threshold).numpy().tolist() == height.tolist()
        down = np.array([0.0, 0.0, -1.0])
        g_ref = q_rot(q_conj(x["ref_quat"][:, a]), np.broadcast_to(down, (6, 3)))[:, 2]
        g_rob = q_rot(q_conj(x["quat"][:, a]), np.broadcast_to(down, (6, 3)))[:, 2]
        assert (
            T.anchor_orientation_error_above(env, threshold).numpy().tolist()
            == (np.abs(g_ref - g_rob) > threshold).tolist()
        )
    ee = env.sim.body_ids(["left_ankle_roll_link", "right_wrist_yaw_link"])
    term = T.BodyHeightErrorAbove(env, torch.tensor(ee), threshold=0.01)
    index = [cmd.body_names.index(n) for n in ("left_ankle_roll_link", "right_wrist_yaw_link")]
    rel_z = cmd.body_pos_relative_w.double().numpy()[:, index, 2]
    expected = np.any(np.abs(rel_z - x["pos"][:, index, 2]) > 0.01, axis=1)
    assert term(env).numpy().tolist() == expected.tolist()
    with pytest.raises(ValueError, match="not tracked"):
        T.BodyHeightErrorAbove(env, torch.tensor(env.sim.body_ids(["waist_yaw_link"])), threshold=0.1)


def test_observations_against_numpy(env) -> None:
    from unilab_gpu.tasks.tracking import observations as O

    cmd, x = _arrays(env)
    a = x["a"]
    anchor_pos_b = q_rot(q_conj(x["quat"][:, a]), x["ref_pos"][:, a] - x["pos"][:, a])
    np.testing.assert_allclose(O.motion_anchor_pos_b(env).numpy(), anchor_pos_b, atol=1e-5)
    rel = q_mul(q_conj(x["quat"][:, a]), x["ref_quat"][:, a])
    # Columns 0 and 1 of R(rel) are R(rel) applied to e_x and e_y; flattened row-major as (3, 2).
    cols = np.stack([q_rot(rel, np.broadcast_to(e, (6, 3))) for e in np.eye(3)[:2]], -1).reshape(6, 6)
    np.testing.assert_allclose(O.motion_anchor_ori_b(env).numpy(), cols, atol=1e-5)
    body_b = q_rot(np.broadcast_to(q_conj(x["quat"][:, a])[:, None], x["quat"].shape), x["pos"] - x["pos"][:, a, None])
    np.testing.assert_allclose(O.robot_body_pos_b(env).numpy(), body_b.reshape(6, -1), atol=1e-5)


def test_zero_noise_reset_reproduces_reference_frame() -> None:
    env = make_env("g1_tracking", num_envs=4, compile=False, overrides=QUIET + NO_NOISE)
    env.reset()
    cmd = env.command_manager.get("motion")
    ref = cmd.library.gather(cmd.clip, cmd.frame)
    np.testing.assert_allclose(cmd.robot_body_pos_w.numpy(), ref.body_pos_w.numpy(), atol=2e-5)
    np.testing.assert_allclose((cmd.robot_body_quat_w * ref.body_quat_w).sum(-1).abs().numpy(), 1.0, atol=2e-5)
    np.testing.assert_allclose(cmd.robot_body_lin_vel_w.numpy(), ref.body_lin_vel_w.numpy(), atol=2e-3)
    assert len(set(cmd.frame.tolist())) > 1  # rows started at different frames


def test_teleported_robot_earns_near_max_reward_and_never_fails() -> None:
    env = make_env("g1_tracking", num_envs=4, compile=False, overrides=QUIET + NO_NOISE + ["episode_length_s=100"])
    env.reset()
    cmd = env.command_manager.get("motion")
    ids = torch.arange(4)
    lib = cmd.library
    qpos_cols, qvel_cols = env.robot.qpos_slice, env.robot.qvel_slice

    def teleport(phase: str) -> None:
        if phase != "physics":
            return
        # Put the robot exactly on the frame it observed, the one the rewards then score.
        ref = lib.gather(cmd.clip, cmd.frame)
        qpos = torch.zeros(4, env.sim.mj_model.nq)
        qvel = torch.zeros(4, env.sim.mj_model.nv)
        qpos[:, :3], qpos[:, 3:7], qpos[:, qpos_cols] = ref.root_pos, ref.root_quat, ref.joint_pos
        from unilab_gpu.utils.rotations import quat_apply_inverse

        qvel[:, :3], qvel[:, 3:6] = ref.root_lin_vel, quat_apply_inverse(ref.root_quat, ref.root_ang_vel)
        qvel[:, qvel_cols] = ref.joint_vel
        env.sim.write_rows(ids, qpos, qvel)

    positive = env.reward_manager.weights.clamp(min=0).sum() * env.step_dt
    for _ in range(40):
        env.set_actions(torch.zeros(4, 29))
        env.run_step_body(teleport)
        assert not env.termination_manager.terminated.any()
        ended = env.termination_manager.truncated
        reward = env.reward_manager.reward[~ended]
        assert torch.all(reward > 0.97 * positive), reward / positive


def test_the_step_scores_the_frame_the_policy_observed() -> None:
    """The policy observes frame f (its ``command`` observation, the residual actions' offset);
    that step's errors, rewards and terminations score f; its next observation shows f + 1."""
    overrides = QUIET + NO_NOISE + ["randomize_initial_episode_length=false"]
    env = make_env("g1_tracking", num_envs=3, compile=False, overrides=overrides)
    cmd, lib, j = env.command_manager.get("motion"), env.command_manager.get("motion").library, env.robot.num_joints
    cmd.fix_starts(torch.zeros(3, dtype=torch.int64), torch.tensor([10, 60, 120]))  # clear of the clip's end
    obs = env.reset()
    rng = np.random.default_rng(1)
    for _ in range(4):
        observed = cmd.frame.clone()
        table = lib.joint_pos.double().numpy()
        np.testing.assert_allclose(obs["policy"][:, :j].numpy(), table[lib.clip_start[cmd.clip] + observed], atol=1e-6)
        env.step(torch.from_numpy(rng.uniform(-0.2, 0.2, (3, 29)).astype(np.float32)))
        assert (env.episode_length > 0).all()  # no row was reset: one episode throughout
        q = env.robot.joint_pos.double().numpy()
        rows = (lib.clip_start[cmd.clip] + observed).numpy()
        scored = np.abs(table[rows] - q).mean(axis=1)
        np.testing.assert_allclose(cmd.row_errors()["joint_pos_error"].numpy(), scored, rtol=1e-5)
        next_frame = np.abs(table[rows + 1] - q).mean(axis=1)
        assert not np.allclose(scored, next_frame, rtol=1e-3)  # the check tells the two frames apart
        anchor = lib.body_pos_w.double().numpy()[rows, cmd.anchor_index]
        anchor_error = np.linalg.norm(anchor - cmd.robot_anchor_pos_w.double().numpy(), axis=1)
        np.testing.assert_allclose(cmd.row_errors()["anchor_pos_error"].numpy(), anchor_error, rtol=1e-5)
        assert cmd.frame.tolist() == (observed + 1).tolist()


def test_fixed_starts_start_every_row_at_its_frame() -> None:
    env = make_env("g1_tracking", num_envs=3, compile=False, overrides=QUIET + NO_NOISE)
    cmd = env.command_manager.get("motion")
    frames = torch.tensor([0, 17, 150])
    cmd.fix_starts(torch.zeros(3, dtype=torch.int64), frames)
    env.reset()
    assert cmd.frame.tolist() == frames.tolist()
    ref = cmd.library.gather(cmd.clip, cmd.frame)
    np.testing.assert_allclose(env.robot.joint_pos.numpy(), ref.joint_pos.numpy(), atol=1e-5)
    length = int(cmd.library.clip_length[0])
    with pytest.raises(ValueError, match="every frame must lie inside its clip"):
        cmd.fix_starts(torch.zeros(3, dtype=torch.int64), torch.tensor([0, 1, length]))
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        cmd.fix_starts(torch.zeros(2, dtype=torch.int64), torch.tensor([0, 1]))


@pytest.mark.slow
def test_fixing_starts_on_a_compiled_env_after_its_first_reset_raises() -> None:
    """Whether starts are fixed is a Python branch of the reset: a compiled env traced it at its
    first reset (a captured one records it in the graph), so a later fix_starts would be ignored
    there and raises instead; before the first reset it is taken, and an eager env takes it any time."""
    zeros = torch.zeros(2, dtype=torch.int64)
    env = make_env("g1_tracking", num_envs=2, compile=True, overrides=QUIET + NO_NOISE)
    cmd = env.command_manager.get("motion")
    cmd.fix_starts(zeros, torch.tensor([5, 9]))
    env.reset()
    assert env.step_frozen and cmd.frame.tolist() == [5, 9]
    with pytest.raises(RuntimeError, match=r"fix_starts: the env's step is already compiled or captured"):
        cmd.fix_starts(zeros, torch.tensor([3, 4]))
    eager = make_env("g1_tracking", num_envs=2, compile=False, overrides=QUIET + NO_NOISE)
    eager.reset()
    assert not eager.step_frozen
    eager.command_manager.get("motion").fix_starts(zeros, torch.tensor([3, 4]))
    eager.reset()
    assert eager.command_manager.get("motion").frame.tolist() == [3, 4]


def test_residual_actions_need_a_command_with_reference_joints() -> None:
    with pytest.raises(KeyError, match="actions.params.reference_command: no command term 'dance'"):
        make_env("g1_tracking", num_envs=1, compile=False, overrides=QUIET + ["actions.params.reference_command=dance"])
    with pytest.raises(ValueError, match="actions.params.bounds: residuals about a reference .* span no fixed range"):
        make_env("g1_tracking", num_envs=1, compile=False, overrides=QUIET + ["+actions.params.bounds=joint_limits"])
    no_reference = ["+actions.params.reference_command=twist"]
    with pytest.raises(ValueError, match="has no reference joint positions"):
        make_env("g1_velocity", num_envs=1, compile=False, overrides=no_reference)


def test_adaptive_sampler_learns_from_failures() -> None:
    env = make_env(
        "g1_tracking", num_envs=8, compile=False, overrides=QUIET + ["commands.motion.params.adaptive.ema_rate=0.05"]
    )
    env.reset()
    sampler = env.command_manager.get("motion").sampler
    uniform_entropy = float(sampler.entropy)
    with no_host_sync():
        for _ in range(30):  # zero actions: the robot soon loses the reference and fails
            env.step(torch.zeros(8, 29))
    assert float(env.stats.terminated) > 0
    assert float(sampler.failure_ema.sum()) > 0 and float(sampler.entropy) < uniform_entropy
    assert "motion/sampling_entropy" in env.stats.summary()


@pytest.mark.skipif(not REAL_CLIP.is_file(), reason=f"real clip not found at {REAL_CLIP} (../shared absent)")
def test_real_clip_runs() -> None:
    env = make_env(
        "g1_tracking", num_envs=2, compile=False, overrides=[f"commands.motion.params.motion_files=[{REAL_CLIP}]"]
    )
    env.reset()
    cmd = env.command_manager.get("motion")
    assert cmd.library.num_frames == 325
    for _ in range(5):
        result = env.step(torch.zeros(2, 29))
    assert torch.isfinite(result.obs["policy"]).all() and torch.isfinite(result.reward).all()


def test_first_frame_share_splits_one_uniform_between_frame_zero_and_the_sampler() -> None:
    env = make_env(
        "g1_tracking",
        num_envs=2,
        compile=False,
        overrides=QUIET + ["commands.motion.params.first_frame_share=0.25", "commands.motion.params.sampling=uniform"],
    )
    cmd = env.command_manager.get("motion")
    u = torch.tensor([0.0, 0.1, 0.2499, 0.25, 0.5, 0.9999])
    v = torch.tensor([0.3, 0.6, 0.9, 0.2, 0.5, 0.7])
    clip, frame = cmd.place_start(u, v)
    assert frame[:3].tolist() == [0, 0, 0] and clip.tolist() == [0] * 6
    length = int(cmd.library.clip_length[0])
    # The rest: u stretched from [0.25, 1) back over [0, 1), then the uniform sampler's frame u * length.
    expected = [int((x - 0.25) / 0.75 * length) for x in (0.25, 0.5, 0.9999)]
    assert frame[3:].tolist() == expected
    # Over many resets a quarter start at frame 0 (plus the sampler's own 1 / length of the rest).
    draws = torch.rand(2, 20_000, generator=torch.Generator().manual_seed(0))
    share = float((cmd.place_start(draws[0], draws[1])[1] == 0).double().mean())
    assert abs(share - (0.25 + 0.75 / length)) < 0.015  # binomial sd ~0.003
    with pytest.raises(
        ValueError,
        match=r"'first_frame_share' must be a number in \[0, 1\] \(share of episodes that start at frame 0\), got 1.5",
    ):
        overrides = QUIET + ["commands.motion.params.first_frame_share=1.5"]
        make_env("g1_tracking", num_envs=1, compile=False, overrides=overrides)


def test_threshold_curriculum_moves_by_step_per_ended_episode() -> None:
    from unilab_gpu.tasks.tracking.terminations import ThresholdCurriculum

    cur = ThresholdCurriculum("cpu", start_scale=2.0, tighten_below=0.3, loosen_above=0.7, step=0.01, ema_rate=0.5)
    assert float(cur.scale) == 2.0 and float(cur.failure_rate) == 1.0
    valid = torch.tensor([True, True, True, True, False])
    none_failed = torch.zeros(5, dtype=torch.bool)
    with no_host_sync():
        cur.update(none_failed, valid)  # rate 1 -> 0.5: between the bounds, scale kept
    assert float(cur.failure_rate) == pytest.approx(0.5) and float(cur.scale) == pytest.approx(2.0)
    cur.update(none_failed, valid)  # rate 0.25 < 0.3: tighten by 4 episodes x 0.01
    assert float(cur.failure_rate) == pytest.approx(0.25) and float(cur.scale) == pytest.approx(1.96)
    cur.update(none_failed, torch.zeros(5, dtype=torch.bool))  # no episode ended: nothing moves
    assert float(cur.failure_rate) == pytest.approx(0.25) and float(cur.scale) == pytest.approx(1.96)
    for _ in range(100):
        cur.update(none_failed, valid)
    assert float(cur.scale) == 1.0  # clamped at the thresholds as written
    all_failed = torch.ones(5, dtype=torch.bool)
    cur.update(all_failed, valid), cur.update(all_failed, valid)  # rate 0.5 then 0.75 > 0.7: loosen
    assert float(cur.failure_rate) == pytest.approx(0.75, abs=1e-6) and float(cur.scale) == pytest.approx(1.04)
    with pytest.raises(ValueError, match="start_scale must be >= 1"):
        ThresholdCurriculum("cpu", start_scale=0.5)
    with pytest.raises(ValueError, match="tighten_below <= loosen_above"):
        ThresholdCurriculum("cpu", tighten_below=0.8, loosen_above=0.2)


def test_termination_curriculum_scales_every_threshold_and_resumes() -> None:
    from unilab_gpu.tasks.tracking import terminations as T

    curriculum = ["commands.motion.params.termination_curriculum={start_scale: 3.0}"]
    env = make_env("g1_tracking", num_envs=4, compile=False, overrides=QUIET + curriculum)
    env.reset()
    for _ in range(3):
        env.step(torch.rand(4, 29) * 2 - 1)
    cmd = env.command_manager.get("motion")
    cmd.update(env)
    a = cmd.anchor_index
    height_error = (cmd.body_pos_relative_w[:, a, 2] - cmd.robot_anchor_pos_w[:, 2]).abs().numpy()
    threshold = float(np.median(height_error)) / 2.0  # some rows above it, some below, at scale 1
    for scale in (1.0, 3.0):
        cmd.termination_curriculum.scale.fill_(scale)
        expected = height_error > threshold * scale
        assert T.anchor_height_error_above(env, threshold).numpy().tolist() == expected.tolist()
    assert "motion/termination_scale" in env.stats.summary()
    cmd.termination_curriculum.scale.fill_(2.5)
    state = cmd.state_dict()
    fresh = make_env("g1_tracking", num_envs=4, compile=False, overrides=QUIET + curriculum)
    fresh_cmd = fresh.command_manager.get("motion")
    address = fresh_cmd.termination_curriculum.scale.data_ptr()
    fresh_cmd.load_state_dict(state)
    assert float(fresh_cmd.termination_curriculum.scale) == 2.5
    assert fresh_cmd.termination_curriculum.scale.data_ptr() == address
    fresh_cmd.load_state_dict({k: v for k, v in state.items() if k.startswith("sampler.")})  # an older checkpoint
    assert float(fresh_cmd.termination_curriculum.scale) == 2.5


def test_evaluation_uses_the_thresholds_as_written() -> None:
    from unilab_gpu.evaluation.tracking import EVAL_OVERRIDES

    curriculum = ["commands.motion.params.termination_curriculum={start_scale: 3.0}"]
    env = make_env("g1_tracking", num_envs=1, compile=False, overrides=QUIET + curriculum + list(EVAL_OVERRIDES))
    assert float(env.command_manager.get("motion").termination_curriculum.scale) == 1.0
