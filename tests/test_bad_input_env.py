"""Bad input to the env (issue 11, cases 3, 4, 5 and the action-type case of 7): whatever the
actions or the physics do, every batch stays finite and bounded; nonsense settings fail at build
time with the key path and the value; grad-requiring actions leave no autograd history."""

from __future__ import annotations

import time
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env


def _pendulum(num_envs: int = 4, overrides: list[str] = (), **kwargs):
    kwargs.setdefault("compile", False)
    kwargs.setdefault("announce", False)
    return make_env("pendulum", num_envs=num_envs, overrides=["episode_length_s=100", *overrides], **kwargs)


# -- case 3: huge finite actions; a finite blow-up of the physics state --


@pytest.fixture(scope="module")
def tracking_env():
    return make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=["events.push=null"])


def _tracking_action_bounds(m: mujoco.MjModel, about_reference: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per actuator, from the MuJoCo model alone: the action range whose target spans the joint
    range with scale = 0.25 effort / kp (BeyondMimic's), about the default pose, or about a
    reference anywhere in the range (the task's residual actions: a whole range either way)."""
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, "stand")
    low, high = [], []
    for a in range(m.nu):
        joint = m.actuator_trnid[a, 0]
        scale = 0.25 * m.actuator_forcerange[a, 1] / m.actuator_gainprm[a, 0]
        lo, hi = m.jnt_range[joint]
        offset = lo if about_reference else m.key_qpos[key, m.jnt_qposadr[joint]]
        low.append((lo - (hi if about_reference else offset)) / scale)
        high.append((hi - offset) / scale)
    return np.array(low), np.array(high)


BEYONDMIMIC_ACTIONS = ["actions.params.reference_command=null"]
"""BeyondMimic's actions about the default pose (what a PPO preset sets) instead of the task's
residuals about the reference."""


@pytest.mark.slow
@pytest.mark.parametrize("about", ["reference", "default_pose"])
def test_huge_finite_actions_give_finite_bounded_rewards_on_tracking(tracking_env, about):
    if about == "reference":  # the task's default
        env = tracking_env
    else:
        overrides = ["events.push=null", *BEYONDMIMIC_ACTIONS]
        env = make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=overrides)
    low, high = _tracking_action_bounds(env.sim.mj_model, about == "reference")
    env.reset()
    n, a = env.num_envs, env.action_dim
    rewards = []
    for value in (1e6, 3e38, -3e38, 0.0, 0.0):
        result = env.step(torch.full((n, a), value))
        rewards.append(result.reward.clone())
        last = env.action_manager.last_action.numpy()
        expected = np.clip(np.full((n, a), value), low, high)
        np.testing.assert_allclose(last, expected, rtol=1e-5, atol=1e-5)  # bounded by the joint limits
    rewards = torch.stack(rewards)
    assert torch.isfinite(rewards).all(), rewards
    # Worst case per step, from the model: the action rate of a jump across the whole action
    # range (weight 0.1), every joint a whole range outside its soft limits (weight 10), every
    # body in contact (weight 0.1), plus the positive terms; all times dt.
    m = env.sim.mj_model
    span = m.jnt_range[m.actuator_trnid[:, 0], 1] - m.jnt_range[m.actuator_trnid[:, 0], 0]
    worst = env.step_dt * (0.1 * np.sum((high - low) ** 2) + 10.0 * np.sum(span) + 0.1 * m.nbody + 6.5)
    assert rewards.abs().max() < worst, (rewards, worst)
    assert torch.isfinite(env.reward_manager.episode_sums).all()


def test_finite_blow_up_of_the_state_is_terminated_reset_and_counted():
    env = _pendulum()
    env.reset()
    env.sim.state.qvel[0] = 1e4  # finite, far outside the default envelope of 1000 rad/s
    env.sim.state.qvel[1] = 500.0  # implausible for this pendulum, but inside the default bound
    result = env.step(torch.zeros(4, 1))
    assert result.terminated.tolist() == [True, False, False, False]
    assert result.reward[0] == 0.0 and (result.reward[1:] < 0).all()
    assert (result.final_obs["policy"][0] == 0).all()  # the blow-up is kept out of the learner's data
    assert result.obs["policy"][0].abs().max() <= 1.0  # a fresh episode: |cos|, |sin| <= 1, |0.125 vel| <= 0.125
    assert env.sim.state.qvel[0].abs() <= 1.0 + 1e-6  # reset to the random start range [-1, 1]
    summary = env.stats.summary()
    assert summary["episode/diverged_states"] == 1 and summary["episode/non_finite_states"] == 0
    assert torch.isfinite(env.reward_manager.episode_sums).all()


def test_divergence_envelope_is_configurable():
    env = _pendulum(overrides=["divergence.max_qvel=100", "divergence.max_qpos=50"])
    env.reset()
    env.sim.state.qvel[1] = 500.0
    env.sim.state.qpos[2] = 60.0  # 60 rad of winding: outside max_qpos
    result = env.step(torch.zeros(4, 1))
    assert result.terminated.tolist() == [False, True, True, False]
    assert env.stats.summary()["episode/diverged_states"] == 2


def test_health_counts_reach_summary_with_deferred_resets():
    env = _pendulum(overrides=["reset_capacity=1"])
    env.reset()
    env.sim.state.qvel[:3] = 1e4  # three rows end at once; one reset per step
    actions = torch.zeros(4, 1)
    actions[3] = float("nan")
    env.step(actions)
    env.step(torch.zeros(4, 1))
    env.step(torch.zeros(4, 1))
    summary = env.stats.summary()
    # Deferred: rows 1, 2 after the first step, row 2 after the second -> 3 row-steps.
    assert summary["env/deferred_resets"] == 3 == int(env.reset_rows.deferred_count)
    assert summary["episode/diverged_states"] == 3  # each row counted once, not once per waiting step
    assert summary["env/non_finite_actions"] == 1
    assert torch.isfinite(env.reward_manager.reward).all()


def test_a_nan_row_does_not_poison_the_step_metrics():
    # A row whose state went NaN is reset at the step's end; the per-step tracking errors average
    # the valid rows only (before: the velocity error of a whole evaluation read NaN).
    from unilab_gpu.managers.row_buffers import valid_row_mean
    from unilab_gpu.tasks.velocity.velocity_command import VELOCITY_METRICS

    nan = float("nan")
    assert float(valid_row_mean(torch.tensor([nan, 1.0, 3.0]), torch.tensor([False, True, True]))) == 2.0
    assert float(valid_row_mean(torch.tensor([nan, 1e30]), torch.tensor([False, False]))) == 0.0
    per_body = torch.tensor([[nan, nan], [1.0, 4.0], [3.0, 8.0]])  # (N, bodies): a mean per body
    assert valid_row_mean(per_body, torch.tensor([False, True, True])).tolist() == [2.0, 6.0]
    env = make_env("go2_velocity", num_envs=4, compile=False, announce=False, overrides=["events.push=null"])
    env.reset()
    env.stats.clear()
    env.sim.state.qvel[0] = nan
    env.step(torch.zeros(4, env.action_dim))
    summary = env.stats.summary()
    assert summary["episode/non_finite_states"] == 1 and env.state_valid.tolist() == [False, True, True, True]
    twist = env.command_manager.get("twist")
    errors = twist.row_errors()  # rows 1-3 kept their state and command
    for key, name in VELOCITY_METRICS.items():
        assert summary[name] == pytest.approx(float(errors[key][1:].mean()), rel=1e-5)
    # The same mean is what unilab-play sums (tracking_errors), until a reset makes every row valid.
    assert float(twist.tracking_errors()["lin_vel_error"]) == pytest.approx(float(errors["lin_vel_error"][1:].mean()))
    env.reset()
    assert env.state_valid.all()


def test_unbounded_action_dimensions_are_refused():
    with pytest.raises(ValueError, match=r"actuators \['torque'\] have no joint limit or ctrlrange.*actions.clip"):
        _pendulum(overrides=["actions.func=unilab_gpu.envs.mdp.actions.JointPositionAction", "actions.clip=null"])


# -- case 4: actions that require grad --


def _rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs Linux /proc")
def test_grad_requiring_actions_leave_no_autograd_history():
    env = _pendulum()
    env.reset()
    weight = torch.ones(1, requires_grad=True)

    def run(steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            env.step(torch.zeros(4, 1) * weight)  # non-leaf, requires grad
        return (time.perf_counter() - start) / steps

    run(200)
    rss_before = _rss_bytes()
    early = run(200)
    run(1200)
    late = run(200)
    growth = _rss_bytes() - rss_before
    for name, buffer in env.persistent_buffers().items():
        assert buffer.grad_fn is None and not buffer.requires_grad, name
    assert weight.grad is None
    assert growth < 4 * 2**20, f"memory grew by {growth / 2**20:.1f} MiB over 1600 steps"
    assert late < 2.0 * early, (early, late)


def test_numpy_actions_are_refused_with_the_type():
    env = _pendulum()
    env.reset()
    with pytest.raises(TypeError, match="actions must be a torch.Tensor on cpu, got a numpy.ndarray"):
        env.step(np.zeros((4, 1), dtype=np.float32))


# -- case 5: nonsense settings fail at build time, naming the key path and the value --


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("episode_length_s=0", "'episode_length_s' must be > 0, got 0"),
        ("episode_length_s=-2.5", "'episode_length_s' must be > 0, got -2.5"),
        ("rewards.angle.weight=nan", "'rewards.angle.weight' must be a finite number, got nan"),
        (
            "actions.clip=[1.0,-1.0]",
            "'actions.clip' must be [low, high] of finite numbers with low < high, got [1.0, -1.0]",
        ),
        ("decimation=0", "'decimation' must be >= 1, got 0"),
        ("reset_capacity=-1", "'reset_capacity' must be >= 0 (0: automatic), got -1"),
        ("divergence.max_qvel=0", "'divergence.max_qvel' must be a finite number > 0, got 0"),
        ("+actions.params.scale=inf", "'actions.params.scale' must be a finite number, got inf"),
        (
            "events.random_start.params.position_range=[1.0,-1.0]",
            "'events.random_start.params.position_range' must be [low, high] of finite numbers with low <= high",
        ),
        (
            "+observations.policy.terms.velocity.clip=[5.0,-5.0]",
            "'observations.policy.terms.velocity.clip' must be [low, high]",
        ),
        ("observations.policy.terms.velocity.scale=inf", "'observations.policy.terms.velocity.scale' must be a finite"),
    ],
)
def test_nonsense_setting_fails_at_build_naming_key_and_value(override, message):
    with pytest.raises(ValueError, match="env config: ") as info:
        _pendulum(overrides=[override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_nan_in_a_nested_range_names_its_index():
    env_overrides = ["commands.motion.params.pose_range=[[-0.05,0.05],[0.1,-0.1],[0,0],[0,0],[0,0],[0,0]]"]
    with pytest.raises(ValueError, match=r"'commands.motion.params.pose_range\[1\]' must be \[low, high\]"):
        make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=env_overrides)


# -- issue 25: the env API refuses misuse in one line; nonsense sizes and terms fail at build --


def test_step_before_reset_and_after_close_is_refused():
    env = _pendulum()
    with pytest.raises(RuntimeError, match=r"^pendulum: call reset\(\) before the first step\(\)$"):
        env.step(torch.zeros(4, 1))
    env.reset()
    env.step(torch.zeros(4, 1))
    env.close()
    env.close()  # twice is harmless
    for call in (lambda: env.step(torch.zeros(4, 1)), env.reset):
        with pytest.raises(RuntimeError, match=r"after close\(\); build a new env"):
            call()


def test_adapters_close_the_env():
    from unilab_gpu.adapters.gymnasium_env import GymVectorEnv

    gym_env = GymVectorEnv.make("pendulum", 2, compile=False, announce=False)
    with pytest.raises(
        TypeError, match=r"GymVectorEnv.reset: 'seed' must be a whole number in \[0, 2\*\*64\) or None, got 'a'"
    ):
        gym_env.reset(seed="a")
    gym_env.reset(seed=1)
    gym_env.close()
    assert gym_env.closed and gym_env.env._state == "closed"
    pytest.importorskip("rsl_rl")
    from unilab_gpu.adapters.rsl_rl_env import RslRlVecEnv

    vec = RslRlVecEnv(_pendulum(2))
    vec.close()
    with pytest.raises(RuntimeError, match="after close"):
        vec.step(torch.zeros(2, 1))


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"seed": "7"}, TypeError, "make_env: 'seed' must be a whole number in [0, 2**64), got '7'"),
        ({"seed": -1}, TypeError, "make_env: 'seed' must be a whole number in [0, 2**64), got -1"),
        ({"seed": 1.5}, TypeError, "got 1.5"),
        ({"overrides": "episode_length_s=5"}, TypeError, "'overrides' must be a list of 'key=value' strings"),
        ({"overrides": [["a=1"]]}, TypeError, "'overrides' must be a list of 'key=value' strings"),
        ({"num_envs": 2**40}, ValueError, "'num_envs' must be at most 44,739,242 (Warp's 2**31 array limit"),
    ],
)
def test_bad_make_env_arguments_name_the_argument(kwargs, error, message):
    kwargs = {"num_envs": 2, "compile": False, "announce": False, **kwargs}
    with pytest.raises(error) as info:
        make_env("pendulum", **kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("task", "override", "message"),
    [
        (
            "pendulum",
            "episode_length_s=0.01",
            "'episode_length_s' must be at least one env step (decimation x timestep = 0.05 s), got 0.01",
        ),  # fmt: skip
        (
            "g1_tracking",
            "rewards.anchor_pos.params.std=0",
            "'rewards.anchor_pos.params.std' must be a finite number > 0",
        ),
        ("g1_velocity", "rewards.track_lin_vel.params.sigma=-0.25", "'rewards.track_lin_vel.params.sigma' must be"),
        (
            "pendulum",
            "rewards.angle.weight=1e39",
            "must be a finite number (it is stored as float32: |value| <= 3.403e+38)",
        ),
        ("pendulum", "observations.policy.terms.velocity.scale=-1e300", "stored as float32"),
        ("g1_tracking", "commands.motion.params.synthetic_seconds=1e12", "a synthetic clip of 1e+12 s asks for 5e+13"),
        (
            "pendulum",
            "+rewards.x={func: unilab_gpu.utils.files.check_output, weight: 1.0}",
            "rewards.x.func: 'unilab_gpu.utils.files.check_output' is not a term: a term is a function f(env, ",
        ),
        ("pendulum", "+rewards.x={func: 'unilab_gpu.training.run_folder:shutil', weight: 1.0}", "is not a term"),
        (
            "pendulum",
            "+rewards.x={func: os.system, weight: 1.0}",
            "rewards.x.func: 'os.system' is outside the modules terms may come from (unilab_gpu, ",
        ),
    ],
)
def test_settings_without_physical_sense_and_non_terms_fail_at_build(task, override, message):
    with pytest.raises(ValueError) as info:
        make_env(task, num_envs=2, compile=False, announce=False, overrides=[override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_reward_weight_is_checked_in_float32_after_step_dt():
    # 3e38 is a float32, but times a 2 s env step (200 x 10 ms) it overflows to inf.
    expected = r"'rewards.angle.weight' must be a number whose product with step_dt \(2 s\) is a finite float32"
    with pytest.raises(ValueError, match=expected + r" \(\|weight\| <= 1.7e\+38\), got 3e\+38"):
        _pendulum(overrides=["decimation=200", "rewards.angle.weight=3e38"])


def test_terms_come_only_from_listed_modules(monkeypatch):
    term = "+rewards.too_fast={func: env_test_terms.joint_speed_above, weight: -1.0, params: {limit: 5.0}}"
    monkeypatch.setenv("UNILAB_TERM_MODULES", "")
    with pytest.raises(ValueError, match=r"'env_test_terms.joint_speed_above' is outside the modules terms may come "
                                         r"from \(unilab_gpu\); to use your own, list them in UNILAB_TERM_MODULES, "
                                         r"e.g. UNILAB_TERM_MODULES=env_test_terms"):  # fmt: skip
        _pendulum(overrides=[term])
    monkeypatch.setenv("UNILAB_TERM_MODULES", "some_other, env_test_terms")
    assert "too_fast" in _pendulum(overrides=[term]).reward_manager.term_names
