"""Go2 velocity task: the N-feet gait terms (a trot's four clocks) against hand-computed values,
their bad input, and the deploy runtime's gait-phase twin against the env on the Go2."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.envs.make_env import make_env

TROT = [0.0, math.pi, math.pi, 0.0]
FEET = ["FL_foot", "FR_foot", "RL_foot", "RR_foot"]
# The policy observes each foot's clock in this test (the task observes the command's clock alone).
FOUR_CLOCKS = [f"+observations.policy.terms.gait_phase.params={{phase_offsets: {TROT}}}"]


@pytest.fixture(scope="module")
def env():
    return make_env("go2_velocity_play", num_envs=4, device="cpu", compile=False, overrides=FOUR_CLOCKS, announce=False)


def _term(manager, name):
    return next(t for t in manager.terms if t.name == name)


def _set_phase(env, phase: list[float]) -> None:
    env.command_manager.get("twist").phase.copy_(torch.tensor(phase, dtype=torch.float32))


def test_dimensions(env) -> None:
    assert env.action_dim == 12
    # 3 gyro + 3 gravity + 12 joint pos + 12 joint vel + 12 actions + 3 command + 4 x 2 clocks
    assert env.observation_dims == {"policy": 53, "critic": 50}


def test_four_clocks_observed_foot_after_foot(env) -> None:
    phase = [0.0, math.pi / 2, math.pi, 1.0]
    _set_phase(env, phase)
    env.observation_manager.compute(env, torch.ones(env.num_envs, dtype=torch.bool), False)
    clocks = env.observation_manager.obs["policy"][:, -8:].numpy()
    # Hand-computed rows: [sin, cos] of phi, phi + pi, phi + pi, phi.
    np.testing.assert_allclose(clocks[0], [0, 1, 0, -1, 0, -1, 0, 1], atol=1e-6)
    np.testing.assert_allclose(clocks[1], [1, 0, -1, 0, -1, 0, 1, 0], atol=1e-6)
    np.testing.assert_allclose(clocks[2], [0, -1, 0, 1, 0, 1, 0, -1], atol=1e-6)
    s, c = math.sin(1.0), math.cos(1.0)
    np.testing.assert_allclose(clocks[3], [s, c, -s, -c, -s, -c, s, c], atol=1e-6)
    # The critic keeps the task's single clock [sin phi, cos phi].
    np.testing.assert_allclose(env.observation_manager.obs["critic"][:, 45:47].numpy()[3], [s, c], atol=1e-6)


def test_trot_feet_phase_against_hand_computed_targets(env) -> None:
    """At phi = pi/2 the clock is a quarter through: FL and RR are half way up their swing
    (smoothstep(1/2) = 1/2 of 0.08 m), FR and RL (phi + pi, three quarters) half way down."""
    env.reset()
    m = env.sim.mj_model
    rest = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, rest, m.key("stand").id)
    mujoco.mj_kinematics(m, rest)
    sites = [m.site(f).id for f in FEET]
    heights = env.sim.state.site_pos_w.numpy()[:, sites, 2] - rest.site_xpos[sites, 2]
    term = _term(env.reward_manager, "feet_phase")
    cases = {
        math.pi / 2: [0.04, 0.04, 0.04, 0.04],  # quarter and three-quarter: both half way
        0.0: [0.0, 0.08, 0.08, 0.0],  # FL, RR on the ground; FR, RL at the top
        math.pi: [0.08, 0.0, 0.0, 0.08],
        # a sixth through: FL, RR rise to smoothstep(1/3) = 7/27 of the swing; FR, RL (two
        # thirds through) fall to 1 - 7/27 = 20/27 of it
        math.pi / 3: [0.08 * 7 / 27, 0.08 * 20 / 27, 0.08 * 20 / 27, 0.08 * 7 / 27],
    }
    for phi, target in cases.items():
        _set_phase(env, [phi] * env.num_envs)
        want = np.exp(-np.sum((heights - np.array(target)) ** 2, axis=1) / 0.016)
        np.testing.assert_allclose(term(env).numpy(), want, rtol=1e-5, err_msg=f"phi={phi}")


def test_feet_phase_bad_input_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"FeetPhase phase_offsets: give one offset per foot for 4 site_names"):
        make_env(
            "go2_velocity",
            num_envs=1,
            device="cpu",
            compile=False,
            announce=False,
            overrides=["~rewards.feet_phase.params.phase_offsets"],
        )
    with pytest.raises(ValueError, match=r"FeetPhase phase_offsets: expected one offset per site \(4\), got 2"):
        make_env(
            "go2_velocity",
            num_envs=1,
            device="cpu",
            compile=False,
            announce=False,
            overrides=["rewards.feet_phase.params.phase_offsets=[0.0,3.14]"],
        )


def test_deploy_twin_agrees_with_the_env_on_four_clocks(env, tmp_path) -> None:
    """The runtime's observation (MuJoCo C) equals the env's (MJWarp) over 10 control steps of a
    random policy on the Go2, with the four per-foot clocks in the observation."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    from unilab_gpu.deploy import Controller, PolicyFile
    from unilab_gpu.export.export_run import export_agent
    from unilab_gpu.export.sim2sim import FallRule, Sim2Sim
    from unilab_gpu.paths import robot_asset
    from unilab_gpu.rl.sac import SacAgent, SacConfig

    torch.manual_seed(0)
    one = make_env(
        "go2_velocity_play", num_envs=1, device="cpu", compile=False, seed=1, overrides=FOUR_CLOCKS, announce=False
    )
    dims = one.observation_dims
    agent = SacAgent(
        SacConfig(actor_hidden_dims=(32, 16), critic_hidden_dims=(8,), compile=False),
        dims["policy"],
        dims["critic"],
        12,
    )
    torch.nn.init.normal_(agent.actor.net[-1].weight, std=0.1)
    path = export_agent(one, agent, "go2_velocity_play", "sac", tmp_path / "go2.onnx", FOUR_CLOCKS)
    policy = PolicyFile(path)
    model = mujoco.MjModel.from_xml_path(str(robot_asset("go2")))
    controller = Controller(policy, model, None)
    one.reset()
    run = Sim2Sim(controller, [0.0, 0.0, 0.0], FallRule.of_task(controller.metadata))
    data = run.data
    data.qpos[:] = one.sim.state.qpos[0].numpy()
    data.qvel[:] = one.sim.state.qvel[0].numpy()
    twist = one.command_manager.get("twist")
    controller.command = twist.command[0].numpy()
    controller.reset(data, phase=float(twist.phase[0]))
    drift = []
    for _ in range(10):
        expected = one.observation_manager.obs["policy"][0].numpy().copy()
        obs = controller.observe(data)
        drift.append(float(np.abs(obs - expected).max()))
        np.testing.assert_allclose(obs[-8:], expected[-8:], atol=1e-5)  # the four clocks
        one.step(torch.from_numpy(policy(expected)[None]))
        controller.step(data, obs)
    assert max(drift) <= 1e-4, drift
