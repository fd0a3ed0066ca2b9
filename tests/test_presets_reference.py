"""The algo presets load, and the reference-scale presets hold the reference values they cite.

References (docs/training.md, "Presets"):

- holosoma's FastSAC G1 whole-body-tracking preset: amazon-far/holosoma (fc600e7),
  src/holosoma/holosoma/config_values/wbt/g1/experiment.py::g1_29dof_wbt_fast_sac over
  config_values/algo.py::fast_sac, 8192 envs, 400k env steps;
- the FlashSAC authors' G1 tracking run: leeyngdo/FlashSAC (f2da589),
  scripts/run_isaaclab_tracking.sh over configs/agent/flashSAC.yaml, 1024 envs, 204.8M env steps.
"""

import math
from pathlib import Path

import pytest

from unilab_gpu.rl.agents import algo_config
from unilab_gpu.rl.off_policy_config import run_updates
from unilab_gpu.training.config import algo_preset

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "algo"
OFF_POLICY_PRESETS = sorted(
    path.name for path in CONFIGS.glob("*.yaml") if algo_preset(path.stem)["name"] in ("sac", "flashsac")
)

HOLOSOMA_G1_WBT_FASTSAC = {
    "batch_size": 8192,  # batch_size (global)
    "buffer_capacity_per_env": 1024,  # buffer_size (per env)
    "warmup_steps": 10,  # learning_starts
    "updates_per_step": 4,  # num_updates
    "gamma": 0.99,
    "n_step": 1,  # num_steps
    "tau": 0.05,
    "learning_rate": 3e-4,
    "learning_rate_end": 3e-4,  # no schedule
    "adam_betas": (0.9, 0.95),
    "weight_decay": 0.001,
    "max_grad_norm": 0.0,
    "actor_update_period": 2,  # policy_frequency
    "num_atoms": 501,
    "v_min": -20.0,
    "v_max": 20.0,
    "log_std_min": -5.0,
    "log_std_max": 0.0,
    "alpha_init": 0.001,
    "actor_hidden_dims": (512, 256, 128),  # actor_hidden_dim 512, halved twice
    "critic_hidden_dims": (768, 384, 192),  # critic_hidden_dim 768, halved twice
    "normalize_obs": True,  # obs_normalization
}
HOLOSOMA_NUM_ENVS, HOLOSOMA_ITERATIONS = 8192, 400_000

FLASHSAC_G1_TRACKING = {
    "batch_size": 2048,  # sample_batch_size
    "updates_per_step": 2,  # updates_per_interaction_step
    "gamma": 0.99,
    "n_step": 3,
    "tau": 0.01,  # critic_target_update_tau
    "learning_rate": 3e-4,
    "learning_rate_end": 1.5e-4,
    "learning_rate_decay_steps": 0,  # the whole run (learning_rate_decay_rate 1.0)
    "adam_betas": (0.9, 0.999),  # torch.optim.Adam defaults
    "weight_decay": 0.0,
    "max_grad_norm": 0.0,
    "actor_update_period": 2,
    "num_atoms": 101,  # critic_num_bins
    "v_min": -5.0,
    "v_max": 5.0,
    "log_std_min": -5.0,
    "log_std_max": 0.0,
    "alpha_init": 0.01,  # temp_initial_value
    "actor_hidden_dim": 128,
    "actor_num_blocks": 2,
    "critic_hidden_dim": 256,
    "critic_num_blocks": 2,
    "reward_g_max": 5.0,  # normalized_G_max
    "noise_zeta_exponent": 2.0,  # actor_noise_zeta_mu
    "noise_max_length": 16,  # actor_noise_zeta_max
    "batch_norm_momentum": 0.01,
}
FLASHSAC_NUM_ENVS, FLASHSAC_ENV_STEPS = 1024, 204_800_000
FLASHSAC_BUFFER, FLASHSAC_MIN_BUFFER, FLASHSAC_TARGET_SIGMA = 10_000_000, 100_000, 0.15


def load(name: str):
    values = algo_preset(name.removesuffix(".yaml"))  # its defaults list resolved
    values.pop("task_overrides", None)
    return algo_config(values)


@pytest.mark.parametrize("name", OFF_POLICY_PRESETS)
def test_every_off_policy_preset_loads_and_comments_every_key(name):
    load(name)
    for line in (CONFIGS / name).read_text().splitlines():
        if line and not line.startswith(("#", " ")):  # a top-level key (task_overrides' entries are indented)
            assert "#" in line, line


@pytest.mark.parametrize("name", ["sac.yaml", "flashsac.yaml", "sac_reference.yaml", "flashsac_reference.yaml"])
def test_tracking_presets_schedule_over_the_whole_run(name):
    assert load(name).learning_rate_decay_steps == 0  # resolved from total_env_steps by unilab-train


def test_the_reference_presets_are_listed():
    assert {"sac_reference.yaml", "flashsac_reference.yaml"} <= set(OFF_POLICY_PRESETS)


def test_sac_reference_holds_holosomas_g1_tracking_values():
    cfg = load("sac_reference.yaml")
    assert {key: getattr(cfg, key) for key in HOLOSOMA_G1_WBT_FASTSAC} == HOLOSOMA_G1_WBT_FASTSAC
    # One transition per env and update at holosoma's 8192 envs, 4 updates per step.
    assert cfg.batch_size * cfg.updates_per_step / HOLOSOMA_NUM_ENVS == 4
    assert run_updates(cfg, HOLOSOMA_ITERATIONS) == pytest.approx(4 * HOLOSOMA_ITERATIONS, rel=1e-4)


def test_sac_reference_entropy_target_is_holosomas_in_joint_space():
    """holosoma's target -0.5 * act_dim is the entropy of joint targets (its log-prob subtracts
    sum(log action_scale)); ours is of the [-1, 1] action, which the preset's task overrides map
    onto the soft joint range, as H does, so the same target in joint space is 0.5 + mean log(scale)
    per dimension."""
    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.training.config import compose_train_config

    overrides = list(compose_train_config(["algo=sac_reference", "task=g1_tracking"]).env.overrides)
    env = make_env("g1_tracking", num_envs=1, compile=False, announce=False, overrides=overrides)
    actions = env.action_manager.term
    # The map is piecewise (scale above the default pose, scale_negative below): average both.
    mean_log_scale = 0.5 * (actions.scale.log().mean() + actions.scale_negative.log().mean()).item()
    assert load("sac_reference.yaml").target_entropy_ratio == pytest.approx(0.5 + mean_log_scale, abs=0.005)


def test_flashsac_reference_holds_the_authors_g1_tracking_values():
    cfg = load("flashsac_reference.yaml")
    assert {key: getattr(cfg, key) for key in FLASHSAC_G1_TRACKING} == FLASHSAC_G1_TRACKING
    assert cfg.buffer_capacity_per_env * FLASHSAC_NUM_ENVS == pytest.approx(FLASHSAC_BUFFER, rel=1e-4)
    assert cfg.warmup_steps == math.ceil(FLASHSAC_MIN_BUFFER / FLASHSAC_NUM_ENVS)
    # temp_target_sigma: 0.5 * act_dim * log(2 pi e sigma^2) + sum(log action_range); the range
    # term is the log-det of the map from [-1, 1], so per [-1, 1] dimension it is the Gaussian's.
    per_dim = -0.5 * math.log(2 * math.pi * math.e * FLASHSAC_TARGET_SIGMA**2)
    assert cfg.target_entropy_ratio == pytest.approx(per_dim, abs=5e-4)
    # About 400k updates over the reference's 204.8M env steps at 1024 envs.
    iterations = FLASHSAC_ENV_STEPS // FLASHSAC_NUM_ENVS
    assert run_updates(cfg, iterations) == pytest.approx(2 * iterations, rel=1e-3)


@pytest.mark.parametrize(
    ("preset", "weights"),
    [
        ("sac_reference", {"action_rate": -1.0, "anchor_pos": 1.0, "body_pos": 2.0}),
        ("flashsac_reference", {"action_rate": -0.1, "anchor_pos": 1.0, "body_pos": 2.0}),
    ],
)
@pytest.mark.parametrize("task", ["g1_tracking", "g1_tracking_play", "g1_tracking_no_state_estimation"])
def test_reference_presets_bring_their_tracking_reward_weights(preset, weights, task):
    from unilab_gpu.envs.make_env import load_task_cfg
    from unilab_gpu.training.config import compose_train_config

    cfg = compose_train_config([f"algo={preset}", f"task={task}"])
    rewards = load_task_cfg(task, list(cfg.env.overrides)).rewards
    assert {name: rewards[name].weight for name in weights} == weights
