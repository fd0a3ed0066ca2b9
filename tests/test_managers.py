"""Manager math against hand-computed / NumPy values on small configs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env


def _pendulum(overrides=(), num_envs: int = 4, **kwargs):
    return make_env("pendulum", num_envs=num_envs, overrides=list(overrides), compile=False, **kwargs)


def test_pendulum_reward_is_gymnasium_cost() -> None:
    """reward = -(theta^2 + 0.1 thetadot^2 + 0.001 u^2) with u = 2 a, theta wrapped, per step."""
    env = _pendulum(["episode_length_s=100"])
    env.reset()
    actions = torch.tensor([[-1.0], [-0.3], [0.5], [1.0]])
    result = env.step(actions)
    q = env.robot.joint_pos[:, 0].double().numpy()
    qd = env.robot.joint_vel[:, 0].double().numpy()
    theta = (q + np.pi) % (2 * np.pi) - np.pi
    u = 2.0 * actions[:, 0].double().numpy()
    expected = -(theta**2 + 0.1 * qd**2 + 0.001 * u**2)
    np.testing.assert_allclose(result.reward.numpy(), expected, rtol=1e-5, atol=1e-6)
    sums = env.reward_manager.episode_sums.double().numpy()
    np.testing.assert_allclose(sums.sum(axis=1), expected, rtol=1e-5, atol=1e-6)


def test_actuator_ctrl_action_is_scaled_and_clipped() -> None:
    env = _pendulum(["+actions.params.scale=0.5"])
    env.reset()
    env.step(torch.tensor([[3.0], [-0.4], [0.2], [-2.0]]))
    # clip to [-1, 1] first, then scale 0.5; the motor's ctrlrange is [-1, 1].
    np.testing.assert_allclose(env.sim.state.ctrl[:, 0].numpy(), [0.5, -0.2, 0.1, -0.5], atol=1e-7)
    np.testing.assert_allclose(env.action_manager.last_action[:, 0].numpy(), [1.0, -0.4, 0.2, -1.0], atol=1e-7)


def test_joint_position_action_on_g1() -> None:
    env = make_env("g1_stand", num_envs=2, compile=False)
    env.reset()
    rng = np.random.default_rng(0)
    raw = rng.uniform(-8, 8, (2, 29)).astype(np.float32)
    env.step(torch.from_numpy(raw))
    m = env.sim.mj_model
    default = m.key("stand").qpos[7:]
    expected = np.clip(default + 0.25 * raw, m.jnt_range[1:, 0], m.jnt_range[1:, 1])
    np.testing.assert_allclose(env.sim.state.ctrl.numpy(), expected, atol=1e-6)


@pytest.mark.parametrize(
    "device,compile",
    [
        ("cpu", False),
        ("cpu", True),
        pytest.param(
            "cuda",
            True,
            marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")],
            id="cuda-inductor",  # gpu_check.sh deselects "inductor" tests where Triton cannot build
        ),
    ],
)
def test_action_history_after_two_steps_and_a_row_reset(device: str, compile: bool) -> None:
    """``last_action``/``prev_action`` and ``action_rate`` against hand values, eager and compiled.

    torch 2.11's Inductor ran the compiled ``prev_action.copy_(last_action)`` after
    ``last_action.copy_(action)`` (prev came out equal to the new action, action_rate 0).
    """
    from unilab_gpu.envs.mdp.rewards import action_rate_l2
    from unilab_gpu.utils.compiling import maybe_compile

    env = make_env("g1_stand", num_envs=3, device=device, compile=False, capture=False, announce=False)
    am = env.action_manager
    process = maybe_compile(am.process, compile, options={"fallback_random": True})
    addresses = (am.last_action.data_ptr(), am.prev_action.data_ptr())
    a1 = torch.linspace(-0.1, 0.1, 3 * 29).view(3, 29)
    a2 = 0.05 - a1.flip(1)
    assert (a1.abs().max() < am.action_high.min()) and (a2.abs().max() < am.action_high.min())  # no clamping
    process(a1.to(device))
    process(a2.to(device))
    np.testing.assert_array_equal(am.last_action.cpu().numpy(), a2.numpy())
    np.testing.assert_array_equal(am.prev_action.cpu().numpy(), a1.numpy())
    expected = ((a2.double() - a1.double()) ** 2).sum(dim=1).numpy()
    np.testing.assert_allclose(action_rate_l2(env).cpu().numpy(), expected, rtol=1e-6)
    am.reset(torch.tensor([1, 3, 3], device=device))  # row 1 starts an episode; 3 pads the ids
    a3 = -a1
    process(a3.to(device))
    np.testing.assert_array_equal(am.last_action.cpu().numpy(), a3.numpy())
    np.testing.assert_array_equal(am.prev_action.cpu().numpy(), torch.stack([a2[0], torch.zeros(29), a2[2]]).numpy())
    assert (am.last_action.data_ptr(), am.prev_action.data_ptr()) == addresses


def test_non_finite_actions_are_replaced_and_counted() -> None:
    env = _pendulum(["episode_length_s=100"])
    env.reset()
    actions = torch.tensor([[0.5], [float("nan")], [float("inf")], [-0.5]])
    env.step(actions)
    assert env.action_manager.non_finite_count.tolist() == [0, 1, 1, 0]
    np.testing.assert_allclose(env.sim.state.ctrl[:, 0].numpy(), [0.5, 0.0, 0.0, -0.5])
    assert torch.isfinite(env.sim.state.qpos).all()


def test_debug_mode_names_bad_rows() -> None:
    env = _pendulum(debug=True)
    env.reset()
    with pytest.raises(FloatingPointError, match=r"actions: non-finite values in rows \[2\]"):
        env.step(torch.tensor([[0.0], [0.0], [float("nan")], [0.0]]))


def test_non_finite_world_is_terminated_and_reset_alone() -> None:
    env = _pendulum(["episode_length_s=100"])
    env.reset()
    env.step(torch.zeros(4, 1))
    before = env.sim.state.qpos.clone()
    env.sim.state.qvel[2, 0] = float("nan")
    result = env.step(torch.zeros(4, 1))
    assert result.terminated.tolist() == [False, False, True, False]
    assert result.reward[2] == 0.0 and torch.isfinite(result.reward).all()
    assert torch.all(result.final_obs["policy"][2] == 0.0)
    assert torch.isfinite(env.sim.state.qpos).all() and torch.isfinite(env.sim.state.qvel).all()
    assert float(env.stats.non_finite_states) == 1.0 and int(env.episode_length[2]) == 0
    assert not torch.equal(env.sim.state.qpos[0], before[0])  # others kept simulating


def test_observation_history_noise_clip_scale() -> None:
    overrides = [
        "+observations.policy.terms.velocity.history=3",
        "+observations.policy.terms.angle.clip=[-0.5, 0.5]",
        "episode_length_s=100",
    ]
    env = _pendulum(overrides)
    obs = env.reset()["policy"]
    assert obs.shape == (4, 2 + 3)
    velocities = []
    for _ in range(4):
        velocities.append(0.125 * env.robot.joint_vel[:, 0].clone())
        obs = env.step(torch.full((4, 1), 0.7)).obs["policy"]
    velocities.append(0.125 * env.robot.joint_vel[:, 0].clone())
    q = env.robot.joint_pos[:, 0]
    np.testing.assert_allclose(
        obs[:, :2].numpy(), torch.stack([q.cos(), q.sin()], 1).clamp(-0.5, 0.5).numpy(), atol=1e-6
    )
    # History oldest first: the last three velocities.
    np.testing.assert_allclose(obs[:, 2:].numpy(), torch.stack(velocities[-3:], 1).numpy(), atol=1e-6)


def test_uniform_noise_has_the_configured_range() -> None:
    env = make_env("g1_stand", num_envs=64, compile=False, overrides=["events.push=null"])
    env.reset()
    policy = env.observation_manager.groups["policy"]
    names = policy.term_names
    layout = policy.layouts[names.index("joint_pos")]
    critic = env.observation_manager.groups["critic"]
    clean = critic.layouts[critic.term_names.index("joint_pos")]
    noise = (
        env.observation_manager.obs["policy"][:, layout.group] - env.observation_manager.obs["critic"][:, clean.group]
    )
    assert float(noise.abs().max()) <= 0.01 + 1e-6
    assert float(noise.std()) == pytest.approx(0.02 / math.sqrt(12), rel=0.1)  # uniform on [-0.01, 0.01]


def test_terminations_split_time_out_from_failure() -> None:
    env = make_env("g1_stand", num_envs=3, compile=False, overrides=["events.push=null", "events.joint_noise=null"])
    env.reset()
    env.episode_length.copy_(torch.tensor([0, env.max_episode_length - 1, 0]))
    env.sim.state.qpos[2, 2] = 0.3  # pelvis below min_height 0.5
    result = env.step(torch.zeros(3, 29))
    assert result.terminated.tolist() == [False, False, True]
    assert result.truncated.tolist() == [False, True, False]
    names = env.termination_manager.term_names
    counts = dict(zip(names, env.stats.termination_term_counts.tolist(), strict=True))
    assert counts == {"time_out": 1.0, "fell": 1.0}
    assert float(env.stats.episodes) == 2.0


def test_interval_event_fires_on_each_rows_timer() -> None:
    overrides = [
        "events.push.interval_range_s=[0.1,0.1]",
        "events.push.params.velocity_range=[[2,2],[2,2],[0,0],[0,0],[0,0],[0,0]]",
    ]
    env = make_env("g1_stand", num_envs=2, compile=False, overrides=overrides + ["events.joint_noise=null"])
    env.reset()
    env.step(torch.zeros(2, 29))  # 0.02 s
    assert torch.allclose(env.event_manager.time_left[:, 0], torch.full((2,), 0.08))
    for _ in range(4):  # the 5th step reaches 0.1 s: push sets vx = vy = 2 m/s before physics
        env.step(torch.zeros(2, 29))
    assert torch.allclose(env.event_manager.time_left[:, 0], torch.full((2,), 0.1))
    assert torch.all(env.robot.root_lin_vel_w[:, :2] > 1.0)


def test_unknown_names_in_params_name_the_key() -> None:
    with pytest.raises(KeyError, match="observations.policy.terms.base_ang_vel.params.sensor_names: unknown sensor"):
        make_env(
            "g1_stand",
            num_envs=1,
            compile=False,
            overrides=["observations.policy.terms.base_ang_vel.params.sensor_names=[imu_gyro]"],
        )
    with pytest.raises(ValueError, match="rewards.alive.params: .*unexpected keyword"):
        make_env("g1_stand", num_envs=1, compile=False, overrides=["+rewards.alive.params.scale=2"])
    with pytest.raises(ValueError, match="rewards.alive.func: module 'unilab_gpu.envs.mdp.rewards' has no 'alvie'"):
        make_env(
            "g1_stand", num_envs=1, compile=False, overrides=["rewards.alive.func=unilab_gpu.envs.mdp.rewards.alvie"]
        )


def test_missing_and_unexpected_term_params_name_the_yaml_key() -> None:
    # A required parameter the YAML lacks: named as written in the YAML, with the override that adds it.
    with pytest.raises(ValueError) as error:
        make_env(
            "g1_stand",
            num_envs=1,
            compile=False,
            overrides=["+rewards.touch={func: unilab_gpu.envs.mdp.rewards.undesired_contacts}"],
        )
    message = str(error.value)
    assert "rewards.touch.params: missing 'body_names' (passed as 'body_ids')" in message
    assert "'+rewards.touch.params.body_names=...'" in message
    # A parameter the function does not take: named as the user wrote it, not as it was resolved.
    with pytest.raises(ValueError) as error:
        make_env("g1_stand", num_envs=1, compile=False, overrides=["+rewards.alive.params.body_names=[pelvis]"])
    message = str(error.value)
    assert "rewards.alive.params: unexpected keyword 'body_names' (which becomes 'body_ids')" in message
    assert "'unilab_gpu.envs.mdp.rewards.alive' accepts []" in message
    # Class terms are checked the same way, before they are built.
    with pytest.raises(
        ValueError, match=r"events.push.params: unexpected keyword 'velocity_rnage'.*accepts \['velocity_range'\]"
    ):
        make_env("g1_stand", num_envs=1, compile=False, overrides=["+events.push.params.velocity_rnage=[]"])


def test_joint_limit_bounds_reach_the_soft_limits_and_zero_is_the_default_pose():
    """``bounds: joint_limits`` (the tracking task's earlier default): +-1 reach every joint's soft
    (90 %) limit, 0 the default pose, and the remembered action (the last-action observation)
    stays in [-1, 1]."""
    import mujoco

    from unilab_gpu.paths import robot_asset

    overrides = ["events.push=null", "actions.params.reference_command=null", "actions.params.effort_scale=null"]
    overrides.append("+actions.params.bounds=joint_limits")
    env = make_env("g1_tracking", num_envs=3, compile=False, announce=False, overrides=overrides)
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    joints = model.actuator_trnid[:, 0]
    lo, hi = model.jnt_range[joints, 0], model.jnt_range[joints, 1]
    soft = np.stack([(lo + hi) / 2 - 0.45 * (hi - lo), (lo + hi) / 2 + 0.45 * (hi - lo)])
    default = model.key("stand").qpos[7:]
    actions = torch.tensor([-3.0, 0.0, 3.0])[:, None].expand(3, 29)  # beyond the bounds too
    env.action_manager.process(actions)
    ctrl = env.sim.state.ctrl.numpy()
    np.testing.assert_allclose(ctrl[0], soft[0], atol=1e-5)
    np.testing.assert_allclose(ctrl[1], default, atol=1e-6)
    np.testing.assert_allclose(ctrl[2], soft[1], atol=1e-5)
    half = torch.full((1, 29), 0.5)
    env.action_manager.process(torch.cat([half, -half, half]))
    np.testing.assert_allclose(env.sim.state.ctrl.numpy()[0], default + 0.5 * (soft[1] - default), atol=1e-5)
    np.testing.assert_allclose(env.sim.state.ctrl.numpy()[1], default - 0.5 * (default - soft[0]), atol=1e-5)
    env.action_manager.process(actions)
    last = env.action_manager.last_action
    assert last.min() == -1.0 and last.max() == 1.0


def test_residual_actions_offset_the_reference_by_a_quarter_effort_over_kp():
    """g1_tracking's default: target = the reference joint positions the rows observe
    + 0.25 * forcerange / kp * action (MuJoCo C's fields), clipped to the joint range; an action
    can move a target over the whole range and no further."""
    import mujoco

    from unilab_gpu.paths import robot_asset

    env = make_env("g1_tracking", num_envs=3, compile=False, announce=False, overrides=["events.push=null"])
    env.reset()
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    joints = model.actuator_trnid[:, 0]
    lo, hi = model.jnt_range[joints, 0], model.jnt_range[joints, 1]
    scale = 0.25 * model.actuator_forcerange[:, 1] / model.actuator_gainprm[:, 0]
    reference = env.command_manager.get("motion").joint_pos.numpy().copy()  # robot joint order = actuator order
    assert np.ptp(reference, axis=0).max() > 0.05  # the rows observe different frames
    actions = torch.linspace(-1.0, 1.0, 3 * 29).view(3, 29)
    env.action_manager.process(actions)
    expected = np.clip(reference + scale * actions.numpy(), lo, hi)
    np.testing.assert_allclose(env.sim.state.ctrl.numpy(), expected, atol=1e-5)
    np.testing.assert_allclose(env.action_manager.action_high.numpy(), (hi - lo) / scale, rtol=1e-5)
    np.testing.assert_allclose(env.action_manager.action_low.numpy(), -(hi - lo) / scale, rtol=1e-5)


def test_bounds_are_checked_by_name():
    no_reference = ["actions.params.reference_command=null"]
    with pytest.raises(ValueError, match="actions.params.bounds: must be 'joint_limits' or null, got 'tanh'"):
        make_env("g1_tracking", num_envs=2, compile=False, overrides=[*no_reference, "+actions.params.bounds=tanh"])
    with pytest.raises(ValueError, match="actions.params: unexpected keyword 'bounds': .*ActuatorCtrlAction"):
        make_env("pendulum", num_envs=2, compile=False, overrides=["+actions.params.bounds=joint_limits"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("+observations.policy.terms.velocity.history=0", "'observations.policy.terms.velocity.history' must be >= 1"),
        (
            "+observations.policy.terms.velocity.noise={kind: laplace}",
            "'observations.policy.terms.velocity.noise.kind' must be uniform or gaussian, got 'laplace'",
        ),
        ("events.random_start.mode=sometimes", "'events.random_start.mode' must be one of startup, reset, interval"),
        (
            "events.random_start.mode=interval",
            "'events.random_start.interval_range_s' must be [low, high] of finite numbers with low <= high, got None",
        ),
        (
            "+events.random_start.interval_range_s=[0.0,1.0]",
            "'events.random_start.interval_range_s' must be [low, high] with low > 0, got [0.0, 1.0]",
        ),
    ],
)
def test_term_settings_are_checked_once_with_the_config(override: str, message: str) -> None:
    """History, noise kinds and event modes and intervals are checked by ``check_env_cfg``, before
    any manager is built, in the one message format of config errors."""
    with pytest.raises(ValueError) as error:
        _pendulum([override], announce=False)
    assert str(error.value).startswith(f"env config: {message}") and "\n" not in str(error.value)
