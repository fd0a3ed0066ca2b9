"""Action terms (``unilab_gpu.envs.mdp.actions``) against hand-computed targets, built directly
from an env's view, and the errors of a bad ``actions`` config, each naming its YAML key."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.mdp.actions import ActuatorCtrlAction, JointPositionAction

KNEES_AND_ANKLE = ["left_knee_joint", "right_knee_joint", "left_ankle_pitch_joint"]


@pytest.fixture(scope="module")
def g1():
    """A G1 tracking env whose motion command holds a reference pose per row."""
    env = make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=["events.push=null"])
    env.reset()
    return env


def _actuators(env, names) -> torch.Tensor:
    return torch.tensor(env.sim.actuator_ids(names), dtype=torch.int64)


def _joint_numbers(env, ids: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per actuator of ``ids``, from MuJoCo C's fields: the joint's qpos address, range low and high,
    and effort / kp."""
    m = env.sim.mj_model
    joints = m.actuator_trnid[ids.numpy(), 0]
    effort_over_kp = m.actuator_forcerange[ids.numpy(), 1] / m.actuator_gainprm[ids.numpy(), 0]
    return m.jnt_qposadr[joints], m.jnt_range[joints, 0], m.jnt_range[joints, 1], effort_over_kp


def test_joint_position_target_is_the_default_pose_plus_scale_times_action_clamped_to_the_range(g1) -> None:
    ids = _actuators(g1, KNEES_AND_ANKLE)
    term = JointPositionAction(g1, ids, scale={".*knee.*": 0.5, ".*ankle.*": 0.2})
    qposadr, lo, hi, _ = _joint_numbers(g1, ids)
    default = g1.sim.mj_model.key("stand").qpos[qposadr]
    action = torch.tensor([[0.3, -0.6, 1.0], [40.0, -40.0, -0.5]])
    scale = np.array([0.5, 0.5, 0.2])
    expected = np.clip(default + scale * action.numpy(), lo, hi)
    assert term.kind == "joint_position" and term.ctrl_cols.tolist() == ids.tolist()
    np.testing.assert_allclose(term.targets(action).numpy(), expected, atol=1e-6)
    low, high = term.action_range()  # the actions at which a target reaches its limit
    np.testing.assert_allclose(high.numpy(), (hi - default) / scale, rtol=1e-5)
    np.testing.assert_allclose(low.numpy(), (lo - default) / scale, rtol=1e-5)


def test_effort_scale_is_a_share_of_effort_over_kp(g1) -> None:
    ids = _actuators(g1, KNEES_AND_ANKLE)
    term = JointPositionAction(g1, ids, effort_scale=0.25)
    np.testing.assert_allclose(term.scale.numpy(), 0.25 * _joint_numbers(g1, ids)[3], rtol=1e-6)


def test_residual_targets_follow_the_reference_joint_positions_row_by_row(g1) -> None:
    ids = _actuators(g1, KNEES_AND_ANKLE)
    term = JointPositionAction(g1, ids, scale=0.1, reference_command="motion")
    reference = g1.command_manager.get("motion").joint_pos
    cols = g1.robot.joint_columns(KNEES_AND_ANKLE)
    _, lo, hi, _ = _joint_numbers(g1, ids)
    action = torch.tensor([[1.0, -1.0, 0.5], [-2.0, 0.0, 3.0]])
    expected = np.clip(reference[:, cols].numpy() + 0.1 * action.numpy(), lo, hi)
    np.testing.assert_allclose(term.targets(action).numpy(), expected, atol=1e-6)
    # The reference is read where the command keeps it, so a new frame moves the targets.
    saved = reference.clone()
    try:
        reference[:, cols] = torch.tensor([0.4, 0.3, -0.1])
        expected = np.clip(np.array([0.4, 0.3, -0.1]) + 0.1 * action.numpy(), lo, hi)
        np.testing.assert_allclose(term.targets(action).numpy(), expected, atol=1e-6)
    finally:
        reference.copy_(saved)
    low, high = term.action_range()  # about a moving reference: a whole joint range either way
    np.testing.assert_allclose(high.numpy(), (hi - lo) / 0.1, rtol=1e-5)
    np.testing.assert_allclose(low.numpy(), -(hi - lo) / 0.1, rtol=1e-5)


def test_actuator_ctrl_target_is_scale_times_action_clamped_to_the_ctrlrange() -> None:
    env = make_env("pendulum", num_envs=3, compile=False, announce=False)
    term = ActuatorCtrlAction(env, _actuators(env, ["torque"]), scale=2.0)
    action = torch.tensor([[0.3], [-0.45], [0.9]])
    assert term.kind == "actuator_ctrl" and term.limits.tolist() == [[-1.0, 1.0]]  # the motor's ctrlrange
    np.testing.assert_allclose(term.targets(action).numpy(), [[0.6], [-0.9], [1.0]], atol=1e-7)
    # Through the manager: the action is clipped first (actions.clip [-1, 1]), then mapped.
    env.action_manager.process(torch.tensor([[5.0], [-0.2], [float("nan")]]))
    np.testing.assert_allclose(env.sim.state.ctrl[:, 0].numpy(), [1.0, -0.2, 0.0], atol=1e-7)


@pytest.mark.parametrize(
    ("overrides", "error", "message"),
    [
        (
            ["actions.func=unilab_gpu.envs.mdp.actions.Nope"],
            ValueError,
            r"^actions.func: module 'unilab_gpu.envs.mdp.actions' has no 'Nope'; it defines \[.*'JointPositionAction'",
        ),
        (
            ["actions.func=unilab_gpu.envs.mdp.rewards.alive"],
            ValueError,
            r"^actions.func: 'unilab_gpu.envs.mdp.rewards.alive' is not an action term",
        ),
        (
            ["+actions.params.effort_scale=0.25"],
            ValueError,
            r"^actions.params: unexpected keyword 'effort_scale': "
            r"'unilab_gpu.envs.mdp.actions.ActuatorCtrlAction' accepts \['actuator_names', 'scale'\]",
        ),
        (
            ["~actions.params.actuator_names"],
            ValueError,
            r"^actions.params: missing 'actuator_names' \(passed as 'actuator_ids'\)",
        ),
        (["actions.params.actuator_names=[torq]"], KeyError, r"actions.params.actuator_names: .*torq"),
        (
            ["+actions.params.scale={mot.*: 1.0}"],
            KeyError,
            r"actions.params.scale: pattern 'mot.\*' matches no controlled actuator",
        ),
        (
            ["+actions.params.scale=0"],
            ValueError,
            r"^actions.params.scale: must be non-zero numbers, got \{'torque': 0.0\}",
        ),
        (
            ["actions.kind=actuator_ctrl"],
            ValueError,
            r"'actions.kind' is the old form of the action config.*write actions.func",
        ),
        (["actions.scale=2.0"], ValueError, r"'actions.scale' is the old form .*: write actions.params.scale "),
    ],
)
def test_a_bad_actions_config_fails_in_one_line_naming_its_key(overrides, error, message) -> None:
    with pytest.raises(error, match=message) as info:
        make_env("pendulum", num_envs=1, compile=False, announce=False, overrides=overrides)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (["+actions.params.effort_scale=0.5"], r"^actions.params.effort_scale: actuator 'torque' needs a force limit"),
        (["+actions.params.bounds=joint_limits"], r"^actions.params.bounds: joint_limits needs a limited joint"),
        (
            ["+actions.params.bounds=joint_limits", "+actions.params.soft_limit_ratio=1.5"],
            r"^actions.params.soft_limit_ratio: must be in \(0, 1\], got 1.5",
        ),
    ],
)
def test_bad_joint_position_params_are_named(params: list[str], message: str) -> None:
    joint_position = ["actions.func=unilab_gpu.envs.mdp.actions.JointPositionAction"]
    with pytest.raises(ValueError, match=message):
        make_env("pendulum", num_envs=1, compile=False, announce=False, overrides=[*joint_position, *params])


def test_the_share_of_torque_demand_at_the_motor_limit_is_mujocos() -> None:
    """Torque demand (issue 60): ``actions/torque_limit_share`` is the share of actuators whose PD
    torque at the step's new targets reaches the force limit, as MuJoCo C clamps it (mj_forward at
    the step's starting state with the step's ctrl: ``actuator_force`` at +-forcerange)."""
    import mujoco

    env = make_env("go2_velocity", num_envs=3, device="cpu", compile=False, announce=False)
    env.reset()
    env.stats.clear()
    generator = torch.Generator().manual_seed(0)
    action = torch.randn(3, env.action_dim, generator=generator) * 3.0  # some past the limit, some not
    qpos, qvel = env.sim.state.qpos.clone().numpy(), env.sim.state.qvel.clone().numpy()
    env.step(action)
    ctrl = env.sim.state.ctrl.clone().numpy()
    model = env.sim.mj_model
    data = mujoco.MjData(model)
    at_limit = []
    for row in range(3):
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[row], qvel[row], ctrl[row]
        mujoco.mj_forward(model, data)
        effort = np.abs(model.actuator_forcerange).min(axis=1)
        at_limit.append(np.abs(data.actuator_force) >= effort * (1 - 1e-5))
    expected = float(np.mean(at_limit))
    assert 0.0 < expected < 1.0
    assert env.stats.summary()["actions/torque_limit_share"] == pytest.approx(expected, abs=1e-6)
