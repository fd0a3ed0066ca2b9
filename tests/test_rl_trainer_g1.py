"""G1 smoke run through ``unilab-train``: TensorBoard events with the documented tags, a
checkpoint, and ``unilab-play`` on it (with per-body tracking errors on the tracking task)."""

from __future__ import annotations

import pytest
from rl_agent_helpers import tensorboard_events

from unilab_gpu.cli.play import play
from unilab_gpu.cli.train import main
from unilab_gpu.paths import list_tasks
from unilab_gpu.rl.checkpoint import load_checkpoint

TASK = "g1_tracking" if "g1_tracking" in list_tasks() else "g1_stand"
EPISODE_STEPS = 3  # episode_length_s = 0.06 s at 50 Hz: every env times out within the run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("g1_run")
    code = main(
        [
            f"task={TASK}",
            "env.num_envs=2",
            "total_env_steps=16",  # 8 iterations
            "log_every=4",
            "checkpoint_every=4",
            f"env.overrides=['episode_length_s={0.02 * EPISODE_STEPS}']",
            "progress=lines",
            f"run_dir={path}",
            "algo.warmup_steps=2",
            "algo.batch_size=8",
            "algo.updates_per_step=1",
            "algo.buffer_capacity_per_env=16",
            "algo.actor_hidden_dim=8",
            "algo.critic_hidden_dim=8",
            "algo.actor_num_blocks=1",
            "algo.critic_num_blocks=1",
            "algo.num_atoms=11",
        ]
    )
    assert code == 0
    return path


def test_events_hold_the_documented_scalars(run_dir):
    events = tensorboard_events(run_dir)
    tags = set(events.Tags()["scalars"])
    expected = {
        "train/reward_mean",
        "train/learning_rate",
        "loss/critic",
        "loss/actor",
        "policy/entropy",
        "policy/temperature",
        "critic/q_mean",
        "perf/env_steps_per_s",
        "perf/update_ms",
        "episode/return",
        "episode/length",
        "episode/terminated_rate",
        "episode/time_out_rate",
        "replay/final_obs_overflow",
    }
    assert expected <= tags, expected - tags
    assert any(t.startswith("reward/") for t in tags) and any(t.startswith("termination/") for t in tags)
    steps = [e.step for e in events.Scalars("train/reward_mean")]
    assert steps == [4 * 2, 8 * 2]  # x axis: env steps at each logging point
    lengths = [e.value for e in events.Scalars("episode/length")]
    assert all(1 <= v <= EPISODE_STEPS for v in lengths)
    rates = [e.value for e in events.Scalars("episode/time_out_rate")]
    terminated = [e.value for e in events.Scalars("episode/terminated_rate")]
    assert all(0.0 <= a + b <= 1.0 + 1e-6 for a, b in zip(rates, terminated, strict=True))


def test_checkpoint_holds_the_run(run_dir):
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["trainer"]["iteration"] == 8
    assert checkpoint["config"]["task"] == TASK and checkpoint["num_envs"] == 2


def test_play_reports_episode_stats_and_tracking_errors(run_dir, capsys):
    stats = play(run_dir, steps=2 * EPISODE_STEPS, num_envs=2, device="cpu")
    out = capsys.readouterr().out
    assert stats["episode/count"] >= 2 and "episode/return" in out
    if TASK == "g1_tracking":
        errors = {k: v for k, v in stats.items() if k.startswith("tracking/")}
        assert "tracking/anchor_pos_error" in errors and len(errors) > 1
        assert all(0.0 <= v < 2.0 for v in errors.values())
