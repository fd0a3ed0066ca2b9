"""``unilab-play``: rolls out the checkpoint's own policy and prints its episode stats."""

from __future__ import annotations

import re

import pytest
from rl_agent_helpers import TINY_FLASHSAC_OVERRIDES

from unilab_gpu.cli.play import main
from unilab_gpu.cli.train import main as train_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.evaluation.rollout import agent_policy, evaluate
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.checkpoint import load_checkpoint


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("play_run")
    args = [
        "task=pendulum",
        "env.num_envs=4",
        "total_env_steps=16",
        "progress=lines",
        f"run_dir={path}",
        *TINY_FLASHSAC_OVERRIDES,
    ]
    assert train_main(args) == 0
    return path


def printed(out: str, key: str) -> float:
    return float(re.search(rf"^\s+{re.escape(key)}\s+(\S+)$", out, re.M).group(1))


def test_play_prints_the_stats_of_the_checkpoint_policy(run_dir, capsys):
    assert main([str(run_dir), "--num-envs", "3", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "pendulum / flashsac after 16 training env steps" in out
    # Independent rollout: the same checkpoint loaded by hand, same env seed, one full episode.
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    env = make_env("pendulum", 3, "cpu", ["randomize_initial_episode_length=false"], seed=0, compile=False)
    agent = make_agent(algo_config(checkpoint["config"]["algo"], compile=False), env.observation_dims, 1, 4, "cpu")
    agent.load_state_dict(checkpoint["trainer"]["agent"])
    expected = evaluate(env, agent_policy(agent), env.max_episode_length)
    assert printed(out, "episode/count") == 3
    for key in ("episode/return", "reward/angle", "reward/velocity", "reward/torque", "episode/length"):
        assert printed(out, key) == pytest.approx(expected[key], rel=1e-5), key
    assert printed(out, "episode/time_out_rate") == 1.0
    assert "tracking/" not in out  # the pendulum has no motion command: skipped silently


def test_short_rollout_says_no_episode_ended(run_dir, capsys):
    assert main([str(run_dir), "--steps", "5", "--num-envs", "2", "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "no episode ended within 5 steps (episodes last up to 200)" in out
    assert "episode/return" not in out


def test_video_is_written_or_explained_in_one_line(run_dir, tmp_path, capsys):
    gif = tmp_path / "play.gif"
    assert main([str(run_dir), "--steps", "3", "--num-envs", "1", "--device", "cpu", "--video", str(gif)]) == 0
    out = capsys.readouterr().out
    if gif.exists():  # a GL backend is available
        assert gif.read_bytes()[:6] in (b"GIF87a", b"GIF89a") and "video: 3 frames" in out
    else:
        lines = [line for line in out.splitlines() if line.startswith("video:")]
        assert len(lines) == 1 and "offscreen rendering unavailable" in lines[0]


def test_corrupt_checkpoint_is_reported_with_its_name(tmp_path, capsys):
    bad = tmp_path / "broken.pt"
    bad.write_bytes(b"PK\x03\x04 truncated zip")
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "broken.pt" in err and "Traceback" not in err


def test_overrides_apply_on_top_of_the_training_config(run_dir, capsys):
    argv = [str(run_dir), "--num-envs", "2", "--device", "cpu", "--override", "episode_length_s=2.5"]
    assert main([*argv, "--override", "rewards.torque=null"]) == 0
    out = capsys.readouterr().out
    assert printed(out, "episode/length") == 50 and printed(out, "episode/time_out_rate") == 1.0  # 2.5 s / 0.05 s
    assert "reward/torque" not in out and "reward/angle" in out


def test_task_with_other_sizes_is_refused(run_dir, capsys):
    assert main([str(run_dir), "--task", "g1_stand", "--num-envs", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "task 'g1_stand' has (observation dims, action dim)" in err and "{'policy': 3}, 1" in err


def test_tracking_errors_are_summed_on_the_device_and_read_once():
    from types import SimpleNamespace

    import torch

    from unilab_gpu.cli.play import TrackingErrors
    from unilab_gpu.utils.sync_audit import no_host_sync

    values = iter([{"a": torch.tensor(0.5), "b": torch.tensor(2.0)}, {"a": torch.tensor(1.5), "b": torch.tensor(4.0)}])
    term = SimpleNamespace(tracking_errors=lambda: next(values))
    env = SimpleNamespace(command_manager=SimpleNamespace(get=lambda name: term))
    errors = TrackingErrors(env)
    with no_host_sync():  # per step: no read back to the host
        errors(0)
        errors(1)
    assert errors.means() == {"a": 1.0, "b": 3.0}
