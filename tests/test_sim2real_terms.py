"""Sim-to-real randomization inside the step (issue 58): command latency, target bias, encoder bias,
restitution, the tracking task's torso centre of mass and angular pushes, each against a direct
computation (NumPy, MuJoCo's quaternion routines), each off by default, and the step with all of
them on free of host syncs."""

from __future__ import annotations

import math
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.doctor.sync_audits import check_task_step
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.mdp.events import PushRoot, RandomizeRestitution
from unilab_gpu.sim.device import resolve_device

QUIET = ["events.push=null"]
ENCODER = "unilab_gpu.envs.mdp.observations.BiasedJointPosRel"


def _env(overrides=(), num_envs=8, task="g1_velocity", seed=0):
    return make_env(task, num_envs=num_envs, compile=False, overrides=[*QUIET, *overrides], announce=False, seed=seed)


def _reference_targets(env, action: torch.Tensor) -> np.ndarray:
    """``clip(offset + scale * a, limits)`` of the action term's numbers, in NumPy."""
    term = env.action_manager.term
    target = term.offset.numpy() + np.where(action >= 0, term.scale.numpy(), term.scale_negative.numpy()) * action
    return np.clip(target, term.limits[:, 0].numpy(), term.limits[:, 1].numpy())


def _ctrl(env) -> np.ndarray:
    return env.sim.state.ctrl[:, env.action_manager.term.ctrl_cols].numpy().copy()


def _actions(steps: int, num_envs: int, dim: int, seed: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [0.5 * (2 * torch.rand(num_envs, dim, generator=gen) - 1) for _ in range(steps)]


def test_zero_latency_bias_and_encoder_bias_are_todays_step_bit_for_bit() -> None:
    """[0, 0] ranges run the delay line, the bias buffers and the biased observation term, and give
    the step of a task without them exactly, resets (every 5 steps) and their draws included."""
    short = ["episode_length_s=0.1"]
    zero = [
        "actions.delay_steps=[0,0]",
        "actions.target_bias=[0.0,0.0]",
        f"observations.policy.terms.joint_pos.func={ENCODER}",
        "+observations.policy.terms.joint_pos.params.bias_range=[0.0,0.0]",
    ]
    runs = []
    for overrides in (short, [*short, *zero]):  # one after the other: the envs draw from torch's one generator
        env = _env(overrides)
        assert (env.action_manager.delay is not None) == (overrides != short)
        env.reset()
        steps = []
        for action in _actions(12, 8, env.action_dim):
            result = env.step(action)
            state = env.sim.state
            steps.append([t.clone() for t in (*result.obs.values(), result.reward, state.qpos, state.ctrl)])
        assert float(env.stats.episodes) > 0  # resets happened inside the compared steps
        runs.append(steps)
    for plain, zeroed in zip(*runs, strict=True):
        for a, b in zip(plain, zeroed, strict=True):
            assert torch.equal(a, b)


def test_latency_sends_each_rows_targets_of_its_delay_ago() -> None:
    """Per row, ctrl after step k holds the targets of step ``max(k - d, 0)`` of its episode, ``d``
    drawn in [0, 3] per row at the episode's start; the policy's last action is this step's."""
    env = _env(["actions.delay_steps=[0,3]"], num_envs=16)
    env.reset()
    delay = env.action_manager.delay[:-1].numpy().copy()
    assert set(delay) <= {0, 1, 2, 3} and len(set(delay)) > 1
    actions = _actions(8, 16, env.action_dim)
    targets = [_reference_targets(env, a.numpy()) for a in actions]
    rows = np.arange(16)
    for k, action in enumerate(actions):
        result = env.step(action)
        expected = np.stack([targets[max(k - d, 0)][r] for r, d in zip(rows, delay, strict=True)])
        np.testing.assert_allclose(_ctrl(env), expected, rtol=0, atol=1e-6)
        cols = slice(6 + 2 * 29, 6 + 3 * 29)  # the policy's last-action columns (base/velocity.yaml)
        assert torch.equal(result.obs["policy"][:, cols], action)
    assert float(env.stats.episodes) == 0
    # A new episode draws again and starts its line with its first targets.
    env.reset()
    assert not np.array_equal(env.action_manager.delay[:-1].numpy(), delay)
    env.step(actions[0])
    np.testing.assert_allclose(_ctrl(env), targets[0], rtol=0, atol=1e-6)


def test_target_bias_offsets_ctrl_by_a_per_episode_draw_and_nothing_else() -> None:
    env = _env(["actions.target_bias=[-0.05,0.05]"])
    env.reset()
    bias = env.action_manager.target_bias[:-1].numpy().copy()
    assert (np.abs(bias) <= 0.05).all() and np.unique(bias.round(6)).size > 100
    for action in _actions(4, 8, env.action_dim):
        result = env.step(action)
        np.testing.assert_allclose(_ctrl(env), _reference_targets(env, action.numpy()) + bias, rtol=0, atol=1e-6)
        assert torch.equal(result.obs["policy"][:, 6 + 2 * 29 : 6 + 3 * 29], action)  # the action itself
    np.testing.assert_array_equal(env.action_manager.target_bias[:-1].numpy(), bias)  # fixed within an episode
    env.reset()
    assert not np.allclose(env.action_manager.target_bias[:-1].numpy(), bias)


def test_encoder_bias_shifts_the_policys_joint_positions_only() -> None:
    """The policy's joint_pos columns are the critic's (the truth) plus each row's bias; every other
    policy column equals the critic's; the bias holds over an episode and is drawn again at the next."""
    env = _env(
        [
            f"observations.policy.terms.joint_pos.func={ENCODER}",
            "+observations.policy.terms.joint_pos.params.bias_range=[-0.05,0.05]",
            "+observations.policy.enable_noise=false",
        ]
    )
    env.reset()
    term = env.observation_manager.groups["policy"].terms[2].instance
    bias = term.bias[:-1].clone()
    assert (bias.abs() <= 0.05).all() and bias.unique().numel() > 100
    joints = slice(6, 35)
    for action in _actions(3, 8, env.action_dim):
        obs = env.step(action).obs
        policy, critic = obs["policy"], obs["critic"][:, : obs["policy"].shape[1]]
        torch.testing.assert_close(policy[:, joints] - critic[:, joints], bias, rtol=0, atol=1e-6)
        truth = env.robot.joint_pos - env.robot.default_joint_pos
        torch.testing.assert_close(policy[:, joints], truth + bias, rtol=0, atol=1e-6)
        rest = torch.ones(policy.shape[1], dtype=torch.bool)
        rest[joints] = False
        assert torch.equal(policy[:, rest], critic[:, rest])
    env.reset()
    assert not torch.allclose(term.bias[:-1], bias)


def _zeta(e: float) -> float:
    """The damping ratio whose half-cycle keeps ``e`` of the speed (1 for e = 0)."""
    return 1.0 if e == 0 else -math.log(e) / math.sqrt(math.pi**2 + math.log(e) ** 2)


def test_restitution_writes_one_damping_ratio_per_listed_row() -> None:
    num_envs, num_geoms = 4, 5
    solref = torch.tensor([0.02, 1.0]).repeat(num_envs, num_geoms, 1)
    env = SimpleNamespace(sim=SimpleNamespace(model_fields={"geom_solref": solref}), num_envs=num_envs, device="cpu")
    geoms = torch.tensor([0, 2, 3])
    before = solref.clone()
    RandomizeRestitution(env, geoms, [0.5, 0.5])(env, torch.tensor([1, 3, 4, 4]))  # padded with num_envs
    assert _zeta(0.5) == pytest.approx(0.2154, abs=1e-4)
    np.testing.assert_allclose(solref[[1, 3]][:, geoms, 1].numpy(), _zeta(0.5), rtol=1e-6)
    assert torch.equal(solref[[0, 2]], before[[0, 2]])  # rows not listed
    assert torch.equal(solref[:, [1, 4]], before[:, [1, 4]]) and torch.equal(solref[..., 0], before[..., 0])
    RandomizeRestitution(env, geoms, [0.0, 0.0])(env, torch.tensor([0, 4, 4, 4]))
    assert torch.equal(solref[0, geoms, 1], torch.ones(3))
    # A damped oscillator at that ratio keeps e of its speed over a half-cycle.
    zeta = _zeta(0.3)
    assert math.exp(-math.pi * zeta / math.sqrt(1 - zeta**2)) == pytest.approx(0.3)


def test_tracking_sim2real_randomizes_torso_com_restitution_and_friction_per_row() -> None:
    env = make_env("g1_tracking_sim2real", num_envs=6, compile=False, announce=False)
    env.reset()
    m = env.sim.mj_model
    solref = env.sim.model_fields["geom_solref"].numpy()
    zeta = solref[:, :, 1]
    np.testing.assert_array_equal(zeta, np.repeat(zeta[:, :1], m.ngeom, axis=1))  # one ratio per world
    e = np.exp(-np.pi * zeta[:, 0] / np.sqrt(1 - np.minimum(zeta[:, 0], 1 - 1e-9) ** 2))
    assert (e <= 0.5 + 1e-5).all() and np.unique(zeta[:, 0]).size == 6
    np.testing.assert_allclose(solref[:, :, 0], np.broadcast_to(m.geom_solref[:, 0], (6, m.ngeom)), rtol=1e-6)
    ipos = env.sim.model_fields["body_ipos"].numpy()
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    offset = ipos[:, torso] - m.body_ipos[torso]
    assert (np.abs(offset) <= np.array([0.025, 0.05, 0.05]) + 1e-6).all() and (np.abs(offset) > 0).all()
    others = np.arange(m.nbody) != torso
    np.testing.assert_allclose(ipos[:, others], np.broadcast_to(m.body_ipos[others], ipos[:, others].shape))
    friction = env.sim.model_fields["geom_friction"].numpy()[:, :, 0]
    feet = [i for i in range(m.ngeom) if "_foot_" in (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, i) or "")]
    assert feet and ((friction[:, feet] >= 0.3) & (friction[:, feet] <= 1.6)).all()


def test_angular_push_turns_the_root_by_the_drawn_world_rates_and_nothing_else() -> None:
    rng = np.random.default_rng(0)
    quat = rng.normal(size=(3, 4))
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)
    robot = SimpleNamespace(
        root_quat_w=torch.tensor(quat, dtype=torch.float32),
        root_lin_vel_w=torch.zeros(3, 3),
        root_ang_vel_b=torch.zeros(3, 3),
    )
    env = SimpleNamespace(robot=robot, num_envs=3, device="cpu")
    push = PushRoot(env, [[0, 0], [0, 0], [0, 0], [0.3, 0.3], [-0.2, -0.2], [0.5, 0.5]])
    push(env, torch.tensor([True, False, True]))
    assert not robot.root_lin_vel_w.any() and not robot.root_ang_vel_b[1].any()
    for row in (0, 2):
        inverse, expected = np.zeros(4), np.zeros(3)
        mujoco.mju_negQuat(inverse, quat[row])
        mujoco.mju_rotVecQuat(expected, np.array([0.3, -0.2, 0.5]), inverse)
        np.testing.assert_allclose(robot.root_ang_vel_b[row].numpy(), expected, atol=1e-6)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "actions.delay_steps=[2,1]",
            "env config: 'actions.delay_steps' must be [low, high] whole control steps with "
            "0 <= low <= high <= 50, got [2, 1]",
        ),
        (
            "actions.delay_steps=[0,51]",
            "env config: 'actions.delay_steps' must be [low, high] whole control steps with "
            "0 <= low <= high <= 50, got [0, 51]",
        ),
        (
            "actions.target_bias=[0.1,-0.1]",
            "env config: 'actions.target_bias' must be [low, high] of finite numbers with low <= high, got [0.1, -0.1]",
        ),
        (
            "observations.policy.terms.joint_pos.params.bias_range=[0.1,-0.1]",
            "env config: 'observations.policy.terms.joint_pos.params.bias_range' must be [low, high] of finite "
            "numbers with low <= high, got [0.1, -0.1]",
        ),
        (
            "events.restitution.params.restitution_range=[0.0,1.0]",
            "events.restitution.params: restitution_range: [low, high] with 0 <= low <= high < 1, got [0.0, 1.0]",
        ),
    ],
)
def test_bad_bounds_are_one_line_naming_the_key(override: str, message: str) -> None:
    task = "g1_tracking_sim2real" if "restitution" in override else "g1_velocity_sim2real"
    with pytest.raises(ValueError) as error:
        make_env(task, num_envs=2, compile=False, overrides=[override], announce=False)
    text = str(error.value)
    assert "\n" not in text and text.endswith(message), text


@pytest.mark.parametrize("task", ["g1_velocity_sim2real", "go2_velocity_sim2real", "g1_tracking_sim2real"])
def test_the_step_with_every_randomization_on_has_no_host_sync(task: str) -> None:
    check = check_task_step(task, resolve_device("cpu"))
    assert check.status == "pass", check.detail
    assert check.data["host_sync_ops_per_step"] == 0 and check.data["episodes_ended"] > 0


def test_a_policy_trained_with_encoder_bias_deploys_reading_the_encoders_as_they_are() -> None:
    """The runtime's twin of the biased term reads ``q - default`` (a robot's encoders bring their
    own bias; the grid's encoder_bias fault adds one where a robot has it)."""
    from pathlib import Path

    from unilab_gpu.deploy import Controller, PolicyFile
    from unilab_gpu.deploy.terms import build_reader
    from unilab_gpu.paths import robot_asset

    policy = PolicyFile(Path(__file__).resolve().parents[1] / "docs" / "policies" / "g1_velocity_sac.onnx")
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    controller = Controller(policy, model, None)
    data = mujoco.MjData(model)
    data.qpos[7:] = np.linspace(-0.3, 0.3, model.nq - 7)
    term = {"name": "joint_pos", "func": ENCODER, "params": {"bias_range": [-0.01, 0.01]}}
    read = build_reader(controller.context, term)
    default = np.asarray(policy.metadata["observed_default_joint_pos"])
    np.testing.assert_array_equal(read(data), data.qpos[controller.context.joint_qpos] - default)
