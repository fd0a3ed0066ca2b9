"""Symmetry augmentation (#48): the mirror maps of observations and actions against the states that
``unilab-motion mirror`` writes, and the batch augmentation of the off-policy agents."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.cli.motion import main as motion_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.mirror_map import MirrorMap, RobotSymmetry, action_mirror, observation_mirror
from unilab_gpu.motion.canonical import save_motion
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.loader import load_motion
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.rl.off_policy_config import OffPolicyConfig
from unilab_gpu.rl.symmetry import MirrorAugmentation
from unilab_gpu.utils.sync_audit import no_host_sync


def _clip_and_mirror(robot: str, tmp_path) -> tuple:
    """A synthetic clip of ``robot`` and its mirror image as ``unilab-motion mirror`` writes it."""
    kinematics = RobotKinematics.from_robot(robot)
    source = save_motion(synthesize_clip(seconds=0.5, seed=3, kinematics=kinematics), tmp_path / "clip.npz")
    motion_main(["mirror", str(source), str(tmp_path / "mirror.npz"), "--robot", robot])
    clip = load_motion(source, kinematics=kinematics)
    return clip, load_motion(tmp_path / "mirror.npz", kinematics=kinematics)


def _state(clip, frame: int) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo ``qpos``/``qvel`` of a clip frame (free-joint angular velocity in the root frame)."""
    quat = clip.root_quat[frame]
    conjugate = quat * np.array([1.0, -1.0, -1.0, -1.0])
    ang_vel_b = np.zeros(3)
    mujoco.mju_rotVecQuat(ang_vel_b, clip.root_ang_vel[frame], conjugate)
    qpos = np.concatenate([clip.root_pos[frame], quat, clip.joint_pos[frame]])
    qvel = np.concatenate([clip.root_lin_vel[frame], ang_vel_b, clip.joint_vel[frame]])
    return qpos, qvel


@pytest.mark.parametrize(
    ("task", "robot", "overrides"),
    [
        ("g1_velocity", "g1", []),
        ("go2_velocity", "go2", []),
        # actions spanning the joint ranges: twin joints with flipped signs swap their two scales
        ("g1_velocity", "g1", ["+actions.params.bounds=joint_limits"]),
        # histories: every block of a term is mapped like the term
        (
            "g1_velocity",
            "g1",
            ["+observations.critic.terms.joint_vel.history=3", "+observations.policy.terms.base_ang_vel.history=2"],
        ),
        # sim-to-real: encoder and target biases (row 1's the mirror images of row 0's), latency
        ("g1_velocity_sim2real", "g1", []),
    ],
)
def test_observations_of_the_mirrored_state_are_the_mirror_map_of_the_observations(task, robot, overrides, tmp_path):
    """Row 0 holds a clip frame, row 1 the same frame of the clip ``unilab-motion mirror`` wrote,
    with the mirrored command, gait clock and action: every observation of row 1 is the group's
    mirror map of row 0's, and the joint targets of the mirrored action are the mirrored targets."""
    env = make_env(task, 2, "cpu", compile=False, announce=False, overrides=overrides)
    clip, mirrored = _clip_and_mirror(robot, tmp_path)

    def show(frame: int) -> None:
        states = [_state(clip, frame), _state(mirrored, frame)]
        qpos = torch.tensor(np.stack([s[0] for s in states]), dtype=torch.float32)
        qvel = torch.tensor(np.stack([s[1] for s in states]), dtype=torch.float32)
        env.sim.write_rows(torch.arange(2), qpos, qvel)
        env.sim.refresh(torch.arange(2))

    show(5)
    twist = env.command_manager.get("twist")
    twist.command.copy_(torch.tensor([[0.4, 0.3, -0.7], [0.4, -0.3, 0.7]]))
    twist.phase.copy_(torch.tensor([0.9, 0.9 + torch.pi]))

    symmetry = RobotSymmetry(env)
    action_map = action_mirror(symmetry)
    if task.endswith("_sim2real"):
        _mirror_the_biases(env, symmetry, action_map)
    action = torch.rand(1, env.action_dim, generator=torch.Generator().manual_seed(1)) * 1.6 - 0.8
    env.action_manager.process(torch.cat([action, action_map(action)]))
    # The targets of the mirrored action are the mirror image of the targets (unilab-motion mirror's joint rule).
    ctrl = env.sim.state.ctrl[:, env.action_manager.term.ctrl_cols]
    mirror = symmetry.robot_mirror
    names = list(mirror.joint_names)
    actuated = [
        env.sim.joint_names[int(env.sim.mj_model.actuator_trnid[a, 0])]
        for a in env.action_manager.term.ctrl_cols.tolist()
    ]
    twin = [actuated.index(names[mirror.joint_pair[names.index(n)]]) for n in actuated]
    sign = torch.tensor([mirror.joint_sign[names.index(n)] for n in actuated], dtype=torch.float32)
    torch.testing.assert_close(ctrl[1], ctrl[0, twin] * sign, atol=1e-5, rtol=0)

    for group in env.observation_manager.groups.values():
        group.enable_noise = False
    env.observation_manager.compute(env, torch.ones(2, dtype=torch.bool), after_final=False)
    show(7)  # a second, different value in every history
    env.observation_manager.compute(env, torch.zeros(2, dtype=torch.bool), after_final=False)
    for name, obs in env.observation_manager.obs.items():
        mapped = observation_mirror(symmetry, name)(obs[0:1])[0]
        torch.testing.assert_close(obs[1], mapped, atol=2e-4, rtol=1e-4, msg=f"group {name}")


def _mirror_the_biases(env, symmetry: RobotSymmetry, action_map: MirrorMap) -> None:
    """Row 0 draws an encoder bias and a target bias of +-0.01 rad per joint; row 1 takes their
    mirror images (twin and sign), the hidden part of the mirrored state. Both rows get 1 step of latency."""
    from unilab_gpu.envs.mdp.observations import BiasedJointPosRel

    g = torch.Generator().manual_seed(2)
    pair, sign = torch.as_tensor(symmetry.joint_pair), torch.as_tensor(symmetry.joint_sign, dtype=torch.float32)
    (encoder,) = [
        term.instance
        for group in env.observation_manager.groups.values()
        for term in group.terms
        if isinstance(term.instance, BiasedJointPosRel)
    ]
    encoder.bias[0] = (torch.rand(encoder.bias.shape[1], generator=g) * 2 - 1) * 0.01
    encoder.bias[1] = encoder.bias[0, pair] * sign
    target = env.action_manager.target_bias
    target[0] = (torch.rand(target.shape[1], generator=g) * 2 - 1) * 0.01
    target[1] = action_map(target[0:1])[0]
    env.action_manager.delay.fill_(1)


def test_height_scan_map_reads_the_rays_of_the_mirrored_grid():
    """The scan's map equals scanning with every ray moved to ``(x, -y)`` (a mirrored world seen
    from a mirrored robot), on the rough terrain, at a yawed pose."""
    env = make_env("go2_velocity_rough", 2, "cpu", compile=False, announce=False)
    group = env.observation_manager.groups["critic"]
    (term,) = [t for t in group.terms if t.cfg.func.endswith("HeightScan")]
    scan = term.instance
    env.sim.state.qpos[:, 0:3] = torch.tensor([[1.3, 2.1, 0.4], [3.7, -1.2, 0.35]])
    yaw = torch.tensor([0.5, -2.0])
    env.sim.state.qpos[:, 3:7] = torch.stack([torch.cos(yaw / 2), 0 * yaw, 0 * yaw, torch.sin(yaw / 2)], dim=1)
    values = scan(env)
    layout = group.layouts[group.term_names.index(term.name)]
    rule = observation_mirror(RobotSymmetry(env), "critic")
    index = rule.index[layout.group] - layout.group.start
    assert (rule.sign[layout.group] == 1).all()
    scan.points_b = scan.points_b * torch.tensor([1.0, -1.0])
    torch.testing.assert_close(values[:, index], scan(env), rtol=0, atol=0)


def test_tracked_body_and_rotation_rules_match_reflected_rotations():
    """``M R M`` on the two rotation columns flips ``(R01, R10, R21)``: checked on random rotations."""
    from unilab_gpu.envs.mirror_map import ROTATION_COLUMNS_SIGN

    g = np.random.default_rng(0)
    for _ in range(5):
        q = g.normal(size=4)
        q /= np.linalg.norm(q)
        r = np.zeros(9)
        mujoco.mju_quat2Mat(r, q)
        r = r.reshape(3, 3)
        m = np.diag([1.0, -1.0, 1.0])
        np.testing.assert_allclose((m @ r @ m)[:, :2].reshape(-1), r[:, :2].reshape(-1) * ROTATION_COLUMNS_SIGN)


def test_a_term_without_a_rule_is_refused_naming_it():
    env = make_env(
        "g1_velocity",
        2,
        "cpu",
        compile=False,
        announce=False,
        overrides=[
            "+observations.critic.terms.height={func: unilab_gpu.envs.mdp.observations.root_height}",
            "+observations.critic.terms.alive={func: unilab_gpu.envs.mdp.rewards.alive}",
        ],
    )
    with pytest.raises(ValueError, match=r"observations\.critic\.terms\.alive: .* has no mirror rule"):
        MirrorAugmentation.for_env(env, "critic", 0.5)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "observations.policy.terms.joint_pos.params.bias_range=[0,0.02]",
            r"observations\.policy\.terms\.joint_pos\.params\.bias_range: \[0, 0\.02\] is not symmetric about 0",
        ),
        ("actions.target_bias=[0,0.02]", r"actions\.target_bias: \[0\.0, 0\.02\] is not symmetric about 0"),
    ],
)
def test_a_bias_range_off_centre_is_refused_naming_it(override, message):
    """A bias drawn in ``[0, 0.02]`` mirrors to one in ``[-0.02, 0]`` for a joint whose mirror sign
    is -1: a state the env never produces, so the mirror refuses it."""
    env = make_env("g1_velocity_sim2real", 2, "cpu", compile=False, announce=False, overrides=[override])
    with pytest.raises(ValueError, match=message):
        MirrorAugmentation.for_env(env, "policy", 0.5)


def test_augmentation_mirrors_the_last_share_of_the_batch_and_keeps_rewards():
    index = torch.tensor([1, 0, 2])
    sign = torch.tensor([1.0, 1.0, -1.0])
    obs_map = MirrorMap(index, sign)
    action_map = MirrorMap(torch.tensor([1, 0]), torch.tensor([-1.0, -1.0]))
    augment = MirrorAugmentation(obs_map, obs_map, action_map, fraction=0.5)
    g = torch.Generator().manual_seed(0)
    batch = {
        k: torch.randn(4, 3, generator=g) for k in ("policy_obs", "critic_obs", "next_policy_obs", "next_critic_obs")
    }
    batch |= {
        "action": torch.randn(4, 2, generator=g),
        "reward": torch.randn(4, generator=g),
        "discount": torch.rand(4),
    }
    out = augment(batch)
    for key in ("policy_obs", "next_critic_obs"):
        torch.testing.assert_close(out[key][:2], batch[key][:2], rtol=0, atol=0)
        expected = torch.stack([batch[key][2:, 1], batch[key][2:, 0], -batch[key][2:, 2]], dim=1)
        torch.testing.assert_close(out[key][2:], expected, rtol=0, atol=0)
    torch.testing.assert_close(out["action"][2:], -batch["action"][2:].flip(1), rtol=0, atol=0)
    assert out["reward"] is batch["reward"] and out["discount"] is batch["discount"]
    with pytest.raises(ValueError, match="algo.mirror_fraction"):
        MirrorAugmentation(obs_map, obs_map, action_map, fraction=0.0)
    with pytest.raises(ValueError, match="algo.mirror_fraction"):
        OffPolicyConfig(mirror_fraction=1.5)


def test_tracking_observations_of_the_mirrored_clip_are_the_mirror_map(tmp_path):
    """The tracking task on a clip and on the clip ``unilab-motion mirror`` wrote, both started at
    the same frame without reset noise: the reference, anchor and tracked-body terms of the mirrored
    row are the group's mirror map of the original row's."""
    _clip_and_mirror("g1", tmp_path)
    zero6 = "[[0,0],[0,0],[0,0],[0,0],[0,0],[0,0]]"
    files = f"[{tmp_path / 'clip.npz'},{tmp_path / 'mirror.npz'}]"
    env = make_env(
        "g1_tracking",
        2,
        "cpu",
        compile=False,
        announce=False,
        overrides=[
            f"commands.motion.params.motion_files={files}",
            f"commands.motion.params.pose_range={zero6}",
            f"commands.motion.params.velocity_range={zero6}",
            "commands.motion.params.joint_position_range=[0,0]",
            "+observations.policy.enable_noise=false",
            "randomize_initial_episode_length=false",
        ],
    )
    motion = env.command_manager.get("motion")
    motion.fix_starts(torch.tensor([0, 1]), torch.tensor([9, 9]))
    obs = env.reset()
    symmetry = RobotSymmetry(env)
    for name in ("policy", "critic"):
        mapped = observation_mirror(symmetry, name)(obs[name][0:1])[0]
        torch.testing.assert_close(obs[name][1], mapped, atol=2e-4, rtol=1e-4, msg=f"group {name}")
    assert obs["critic"][0].abs().max() > 0.1  # a pose away from the default, so the comparison can fail


def test_trainer_attaches_the_mirror_and_trains_on_mirrored_batches():
    """``algo.mirror_fraction`` on the G1 velocity task: the trainer builds the maps and updates
    run on half-mirrored batches; an agent updated without the maps refuses."""
    from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
    from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
    from unilab_gpu.rl.trainer import TrainerSettings

    env = make_env("g1_velocity", 2, "cpu", compile=False, announce=False)
    values = {
        **TINY_CONFIGS["sac"],
        "warmup_steps": 2,
        "buffer_capacity_per_env": 16,
        "batch_size": 8,
        "mirror_fraction": 0.5,
    }
    cfg = algo_config(values, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    batch = {
        "policy_obs": torch.zeros(8, env.observation_dims["policy"]),
        "critic_obs": torch.zeros(8, env.observation_dims["critic"]),
        "action": torch.zeros(8, env.action_dim),
        "reward": torch.zeros(8),
        "next_policy_obs": torch.zeros(8, env.observation_dims["policy"]),
        "next_critic_obs": torch.zeros(8, env.observation_dims["critic"]),
        "discount": torch.ones(8),
    }
    with pytest.raises(RuntimeError, match="mirror_fraction > 0 needs the env's mirror maps"):
        agent.update(batch)
    trainer = OffPolicyTrainer(env, agent, TrainerSettings(iterations=4, log_every=4))
    assert isinstance(agent.mirror, MirrorAugmentation) and agent.mirror.fraction == 0.5
    seen = []
    mirror = agent.mirror
    agent.mirror = lambda b: seen.append(b) or mirror(b)
    trainer.train()
    assert len(seen) == 3 * cfg.updates_per_step == agent.num_updates  # iterations 2, 3 and 4 update
    agent.mirror = mirror
    with no_host_sync():  # the mirrored updates read nothing back to the host
        trainer.run_iteration()
    assert agent.num_updates == 4 * cfg.updates_per_step


def test_a_robot_without_mirror_pairs_is_refused():
    from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
    from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
    from unilab_gpu.rl.trainer import TrainerSettings

    env = make_env("pendulum", 2, "cpu", compile=False, announce=False)
    cfg = algo_config({**TINY_CONFIGS["sac"], "mirror_fraction": 0.5}, compile=False)
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    with pytest.raises(ValueError, match=r"symmetry augmentation \(algo.mirror_fraction > 0\)"):
        OffPolicyTrainer(env, agent, TrainerSettings(iterations=1))


def test_gait_clock_is_refused_when_twin_feet_share_a_phase():
    """A pronk (all feet in phase) has no half-cycle mirror: the clock's rule refuses it."""
    env = make_env(
        "go2_velocity",
        2,
        "cpu",
        compile=False,
        announce=False,
        overrides=["rewards.feet_phase.params.phase_offsets=[0,0,0,0]"],
    )
    with pytest.raises(
        ValueError, match=r"observations\.policy\.terms\.gait_phase: rewards\.feet_phase .* half a cycle"
    ):
        MirrorAugmentation.for_env(env, "critic", 0.5)
