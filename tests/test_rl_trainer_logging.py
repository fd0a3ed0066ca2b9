"""Trainer helpers: console progress, TensorBoard sink, agent factory, evaluation policies."""

from __future__ import annotations

import io

import pytest
from rl_agent_helpers import tensorboard_events

from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.flashsac import FlashSacAgent
from unilab_gpu.rl.logger import Progress, TrainLogger
from unilab_gpu.rl.sac import SacAgent

SCALARS = {"perf/env_steps_per_s": 12345.6, "train/reward_mean": -1.23456, "loss/critic": 3.0}


def test_progress_lines_for_logs():
    stream = io.StringIO()
    progress = Progress(total=10, mode="lines", stream=stream)
    progress.update(5, 20, SCALARS)
    progress.message("note")
    progress.close()
    assert stream.getvalue() == "it 5/10 | env-steps 20 | steps/s 12,346 | reward -1.235\nnote\n"


def test_progress_reports_the_mean_terrain_level_when_there_is_one():
    line = Progress.describe({**SCALARS, "terrain/mean_level": 2.125})
    assert line == "steps/s 12,346 | reward -1.235 | terrain level 2.12"


def test_progress_bar_rewrites_one_line():
    stream = io.StringIO()
    progress = Progress(total=10, start=2, mode="bar", stream=stream)
    if progress._tqdm is not None:
        pytest.skip("tqdm is installed: the bar is tqdm's")
    progress.update(5, 20, SCALARS)
    progress.update(10, 40, {})
    progress.message("saved")
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r[ 50.0%] it 5/10 | env-steps 20 | steps/s 12,346 | reward -1.235\x1b[K")
    assert "\r[100.0%] it 10/10 | env-steps 40 | \x1b[K\nsaved\n" in text
    assert text.count("\n") == 2


def test_progress_rejects_unknown_mode():
    with pytest.raises(ValueError, match="progress"):
        Progress(total=1, mode="fancy")


def test_logger_writes_scalars_at_env_steps(tmp_path):
    logger = TrainLogger(tmp_path)
    logger.log(1, 64, SCALARS)
    logger.log(2, 128, {"loss/critic": 2.5})
    logger.close()
    events = tensorboard_events(tmp_path)
    critic = [(e.step, e.value) for e in events.Scalars("loss/critic")]
    assert critic == [(64, 3.0), (128, 2.5)]
    assert events.Scalars("train/reward_mean")[0].value == pytest.approx(-1.23456)


def test_factory_builds_the_named_agent_with_critic_group_fallback():
    sac_cfg = algo_config({"name": "sac", "actor_hidden_dims": [8], "critic_hidden_dims": [8]}, compile=False)
    assert sac_cfg.compile is False
    sac = make_agent(sac_cfg, {"policy": 3}, 1, num_envs=2, device="cpu")
    assert isinstance(sac, SacAgent) and sac.critic_obs_dim == 3
    flash_cfg = algo_config({"name": "flashsac", "actor_hidden_dim": 8, "critic_hidden_dim": 8, "compile": False})
    flash = make_agent(flash_cfg, {"policy": 3, "critic": 5}, 2, num_envs=4, device="cpu")
    assert isinstance(flash, FlashSacAgent) and (flash.policy_obs_dim, flash.critic_obs_dim, flash.num_envs) == (
        3,
        5,
        4,
    )
    with pytest.raises(ValueError, match="algo.name"):
        algo_config({"name": "ppo"})
    with pytest.raises(ValueError, match="unknown keys"):
        algo_config({"name": "sac", "batch_sz": 3})
    with pytest.raises(ValueError, match="'policy' observation group"):
        make_agent(sac_cfg, {"critic": 3}, 1, num_envs=2, device="cpu")


def test_compile_flag_only_turns_compilation_off():
    assert algo_config({"name": "sac", "compile": True}, compile=True).compile is True
    assert algo_config({"name": "sac", "compile": False}, compile=True).compile is False
    assert algo_config({"name": "sac", "compile": True}, compile=False).compile is False
