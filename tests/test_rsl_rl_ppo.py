"""RSL-RL adapter and ``unilab-train algo=ppo``: the VecEnv contract (TensorDict groups,
time-outs, episode log), no host sync in the step, the runner learning the pendulum swing-up,
checkpoints, resume, play and ONNX export of a PPO run."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

pytest.importorskip("rsl_rl")

from tensordict import TensorDict  # noqa: E402

from unilab_gpu.adapters.rsl_rl_env import RslRlVecEnv  # noqa: E402
from unilab_gpu.cli.play import main as play_main  # noqa: E402
from unilab_gpu.cli.train import main as train_main  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.evaluation.rollout import agent_policy, evaluate  # noqa: E402
from unilab_gpu.rl.agents import agent_from_checkpoint  # noqa: E402
from unilab_gpu.rl.checkpoint import load_checkpoint  # noqa: E402
from unilab_gpu.rl.ppo import PpoTrainer  # noqa: E402
from unilab_gpu.utils.sync_audit import no_host_sync  # noqa: E402

N, LENGTH = 4, 5


def test_vec_env_contract_around_an_episode_end() -> None:
    env = make_env(
        "pendulum",
        N,
        "cpu",
        [f"episode_length_s={0.05 * LENGTH}", "randomize_initial_episode_length=false"],
        compile=False,
    )
    vec = RslRlVecEnv(env, episode_log_interval=LENGTH + 1)
    assert (vec.num_envs, vec.num_actions, vec.max_episode_length) == (N, 1, LENGTH)
    obs = vec.get_observations()
    assert isinstance(obs, TensorDict) and obs.batch_size == torch.Size([N]) and obs["policy"].shape == (N, 3)
    returns = torch.zeros(N)
    for t in range(LENGTH + 1):
        previous, kept = obs, obs["policy"].clone()
        obs, reward, dones, extras = vec.step(torch.full((N, 1), 0.3 * (-1) ** t))
        torch.testing.assert_close(previous["policy"], kept)  # the runner's stored observation survives
        assert reward.shape == (N,) and dones.dtype == torch.bool
        torch.testing.assert_close(extras["time_outs"], env.result.truncated)
        ended = t == LENGTH - 1
        assert bool(dones.all()) is ended and bool(extras["time_outs"].all()) is ended
        if t < LENGTH:
            returns += reward
        assert ("log" in extras) is (t == LENGTH)  # once per interval of LENGTH + 1 steps
    log = extras["log"]
    assert all("/" in key and value.ndim == 0 for key, value in log.items())
    assert float(log["episode/count"]) == N and float(log["episode/length"]) == LENGTH
    assert float(log["episode/return"]) == pytest.approx(float(returns.mean()), rel=1e-5)
    assert float(log["episode/time_out_rate"]) == 1.0
    assert float(env.stats.episodes) == 0  # cleared after the report
    vec.episode_length_buf = torch.full((N,), 2)
    assert env.episode_length.tolist() == [2] * N  # the runner's random start lengths reach the env
    for bad, message in (
        (
            torch.tensor([0, 1, LENGTH, 2]),
            f"episode ages must be in [0, {LENGTH - 1}] (max_episode_length {LENGTH}), got values from 0 to {LENGTH}",
        ),
        (torch.tensor([0, -3, 1, 2]), "got values from -3 to 2"),
        (torch.full((N,), 1.5), f"expected whole numbers of shape ({N},), got torch.float32 of shape ({N},)"),
        (torch.zeros(N + 1, dtype=torch.long), f"expected whole numbers of shape ({N},), got torch.int64 of shape"),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            vec.episode_length_buf = bad
    assert env.episode_length.tolist() == [2] * N  # unchanged by the refused values


def test_steps_past_an_end_are_dones_so_returns_never_join_episodes() -> None:
    """Every row ends at once with room for one reset per step: the deferred rows' steps until
    their reset are reported done (no reward), so GAE stops at each of them."""
    overrides = ["reset_capacity=1", "randomize_initial_episode_length=false", "episode_length_s=0.5"]
    env = make_env("pendulum", num_envs=4, compile=False, announce=False, overrides=overrides)
    vec = RslRlVecEnv(env, episode_log_interval=None)
    actions = torch.zeros(4, 1)
    dones = []
    for _ in range(env.max_episode_length + 3):
        _, reward, done, _ = vec.step(actions)
        valid = env.transition_valid.clone()
        assert (reward[~valid] == 0).all()
        dones.append((done.clone(), valid))
    ended_at = env.max_episode_length - 1  # every row times out at this step
    assert dones[ended_at][0].all() and dones[ended_at][1].all()
    # One row is reset per step: the other three wait, and each waiting step is a done.
    for k in range(1, 4):
        done, valid = dones[ended_at + k]
        assert int((~valid).sum()) == 4 - k and (done | valid).all()


def test_vec_env_observations_are_copies_and_step_is_sync_free() -> None:
    env = make_env("pendulum", N, "cpu", compile=False)
    vec = RslRlVecEnv(env)
    first = vec.get_observations()
    before = first["policy"].clone()
    actions = torch.zeros(N, 1)
    vec.step(actions)
    torch.testing.assert_close(first["policy"], before)  # RSL-RL keeps it while stepping
    with no_host_sync():
        for _ in range(30):  # crosses the episode-log interval (24)
            vec.step(actions)


TINY_PPO = [
    "task=pendulum",
    "algo=ppo",
    "env.num_envs=8",
    "algo.num_steps_per_env=8",
    "algo.actor_hidden_dims=[16]",
    "algo.critic_hidden_dims=[16]",
    "log_every=1",
    "progress=lines",
]


def test_train_ppo_checkpoint_resume_play_and_export(tmp_path, capsys) -> None:
    run = tmp_path / "ppo"
    assert train_main([*TINY_PPO, "total_env_steps=128", f"run_dir={run}"]) == 0
    out = capsys.readouterr().out
    assert "2 iterations (128 env steps)" in out and "export: policy" in out
    checkpoint = load_checkpoint(run)
    assert checkpoint["trainer"]["iteration"] == 2 and checkpoint["trainer"]["env_steps"] == 128
    assert checkpoint["config"]["algo"]["name"] == "ppo"
    agent = agent_from_checkpoint(checkpoint, "cpu")
    actor_before = {k: v.clone() for k, v in agent.alg.get_policy().state_dict().items()}

    assert train_main([f"resume={run}", "total_env_steps=256"]) == 0
    checkpoint = load_checkpoint(run)
    assert checkpoint["trainer"]["iteration"] == 4 and checkpoint["trainer"]["env_steps"] == 256
    resumed = agent_from_checkpoint(checkpoint, "cpu")
    changed = [k for k, v in resumed.alg.get_policy().state_dict().items() if not torch.equal(v, actor_before[k])]
    assert changed  # two more updates moved the actor (it was restored, not rebuilt)

    # play: the printed return equals an independent rollout of the restored actor's mean action.
    capsys.readouterr()
    assert play_main([str(run), "--num-envs", "3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "pendulum / ppo after 256 training env steps" in out
    env = make_env("pendulum", 3, "cpu", ["randomize_initial_episode_length=false"], seed=0, compile=False)
    agent = agent_from_checkpoint(checkpoint, "cpu")  # built after the env, as play does (same RNG draws)
    expected = evaluate(env, agent_policy(agent), env.max_episode_length)
    printed = float(re.search(r"^\s+episode/return\s+(\S+)$", out, re.M).group(1))
    assert printed == pytest.approx(expected["episode/return"], rel=1e-4)

    from unilab_gpu.export.onnx_policy import OnnxPolicy, read_metadata

    policy = OnnxPolicy(run / "policy.onnx")  # exported at the end of the resumed run
    assert read_metadata(run / "policy.onnx")["algo"] == "ppo"
    obs = torch.randn(16, 3) * 2.0
    np.testing.assert_allclose(policy.run(obs.numpy()), agent.act(obs, deterministic=True).numpy(), atol=1e-5, rtol=0)


# Pendulum settings: small networks, short rollouts, a fixed learning rate (the adaptive-KL
# schedule collapsed the action std and stalled on seed 0), discount 0.95 and a little entropy.
PENDULUM_PPO = {
    "name": "ppo",
    "actor_hidden_dims": [64, 64],
    "critic_hidden_dims": [64, 64],
    "num_steps_per_env": 32,
    "gamma": 0.95,
    "lam": 0.95,
    "entropy_coef": 0.01,
    "num_learning_epochs": 10,
    "init_noise_std": 0.5,
    "schedule": "fixed",
    "learning_rate": 5e-4,
}
PPO_ITERATIONS = 300
# Random -1181, hanging ~ -1000 (tests/test_rl_learning.py). Set from the measured spread: seeds
# 0 / 1 / 2 scored -299 / -293 / -357 at 1 and at 2 torch threads alike (rsl_rl's update is
# thread-count invariant here), so SAC's -400 would leave seed 2 only 43 above; -450 keeps the
# margin of 50 that test_rl_learning's spread test asserts for every learning test.
THRESHOLD = -450.0


def train_ppo(seed: int = 0) -> float:
    """Trains PPO on the pendulum with ``seed`` and returns its evaluation score (the mean return of
    32 fixed-start episodes, as tests/test_rl_learning.py scores SAC and FlashSAC)."""
    torch.manual_seed(seed)  # the networks' initial weights come from the global generator
    env = make_env("pendulum", num_envs=64, compile=False, seed=seed)
    trainer = PpoTrainer.from_config(env, PENDULUM_PPO, total_env_steps=PPO_ITERATIONS * 64 * 32, log_every=50)
    assert trainer.settings.iterations == PPO_ITERATIONS
    assert trainer.train()
    evaluation = make_env("pendulum", 32, "cpu", ["randomize_initial_episode_length=false"], seed=123, compile=False)
    stats = evaluate(evaluation, agent_policy(trainer.agent), evaluation.max_episode_length)
    assert stats["episode/count"] == 32
    return stats["episode/return"]


@pytest.mark.slow
def test_rsl_rl_runner_learns_the_pendulum_swing_up() -> None:
    """PPO (rsl_rl's runner, 300 iterations of 64 envs x 32 steps) swings the pendulum up.

    Distribution the threshold was set from (tests/data/learning_spread.json, seeds 0 / 1 / 2,
    1 thread | 2 threads): -299 / -293 / -357 | -299 / -293 / -357. The margin over it is
    asserted by ``test_rl_learning``'s spread test."""
    score = train_ppo(seed=0)
    assert score > THRESHOLD, f"PPO scored {score:.0f}, need {THRESHOLD:.0f}"


def test_ppo_presets_match_the_config_and_bad_keys_are_named() -> None:
    import dataclasses
    from pathlib import Path

    import yaml

    from unilab_gpu.rl.config import config_from_dict
    from unilab_gpu.rl.ppo import PpoConfig, runner_config

    folder = Path(__file__).resolve().parents[1] / "configs" / "algo"
    tracking = yaml.safe_load((folder / "ppo.yaml").read_text())
    # Task settings the preset brings (unilab-train moves them into env.overrides).
    assert tracking.pop("task_overrides")["g1_tracking"] == ["actions.params.reference_command=null"]
    velocity = yaml.safe_load((folder / "ppo_velocity.yaml").read_text())
    assert set(tracking) == set(velocity) == {f.name for f in dataclasses.fields(PpoConfig)}
    assert config_from_dict(PpoConfig, tracking) == PpoConfig()
    # mjlab's velocity runner differs from its tracking runner in these two values only.
    differing = {k for k in tracking if tracking[k] != velocity[k]}
    assert differing == {"obs_normalization", "entropy_coef"} and velocity["entropy_coef"] == 0.01
    cfg = runner_config(PpoConfig(), {"policy": 160, "critic": 286})
    assert cfg["obs_groups"] == {"actor": ["policy"], "critic": ["critic"]}
    assert cfg["algorithm"]["entropy_coef"] == 0.005 and cfg["actor"]["hidden_dims"] == [512, 256, 128]
    with pytest.raises(ValueError, match="num_step_per_env"):
        config_from_dict(PpoConfig, {"num_step_per_env": 3})
    with pytest.raises(ValueError, match="'algo.schedule' must be adaptive or fixed"):
        PpoConfig(schedule="cosine")
