"""Trainer helpers: console progress, TensorBoard sink, agent factory, evaluation policies."""

from __future__ import annotations

import importlib.util
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rl_agent_helpers import TINY_FLASHSAC_OVERRIDES, tensorboard_events

from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.flashsac import FlashSacAgent
from unilab_gpu.rl.logger import Progress, TrainLogger
from unilab_gpu.rl.sac import SacAgent

ROOT = Path(__file__).resolve().parents[1]
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


def test_progress_reports_the_torque_demand_and_a_clean_solver_as_zero():
    clean = {**SCALARS, "actions/torque_limit_share": 0.0421, "env/solver_iteration_limits": 0.0}
    assert Progress.describe(clean) == (
        "steps/s 12,346 | reward -1.235 | torque at limit 4.2% | health: 0 row-steps at the solver's iteration cap"
    )
    capped = {"env/solver_iteration_limits": 8.0, "env/line_search_limits": 0.0, "env/deferred_resets": 2.0}
    assert Progress.describe(capped) == (
        "health: 2 deferred resets, 8 row-steps at the solver's iteration cap (robot config physics.iterations)"
    )


TINY_GO2_RUN = [
    "task=go2_velocity",
    "env.num_envs=2",
    "total_env_steps=6",  # 3 iterations, a logging point after each: no episode ends in them
    "log_every=1",
    "progress=lines",
    "export_onnx=false",
    *TINY_FLASHSAC_OVERRIDES,
]


def test_a_tensorboard_run_logs_the_torque_demand_before_any_episode_ends_and_never_imports_wandb(tmp_path):
    """Training's log and progress line carry ``actions/torque_limit_share`` from the first logging
    point (a step mean, meaningful before any episode ended); a run without ``logger=wandb`` never
    loads the ``wandb`` package (a fresh interpreter, whatever this test process imported)."""
    run = tmp_path / "run"
    script = (
        "import sys\n"
        "from unilab_gpu.cli.train import main\n"
        f"status = main({[*TINY_GO2_RUN, f'run_dir={run}']!r})\n"
        "print('wandb imported:', 'wandb' in sys.modules)\n"
        "sys.exit(status)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "wandb imported: False" in done.stdout
    lines = [line for line in done.stdout.splitlines() if line.startswith("it ")]
    assert len(lines) == 3 and all("torque at limit " in line for line in lines), lines
    assert all("health: 0 row-steps at the solver's iteration cap" in line for line in lines), lines
    events = tensorboard_events(run)
    shares = events.Scalars("actions/torque_limit_share")
    assert [e.step for e in shares] == [2, 4, 6] and all(0.0 <= e.value <= 1.0 for e in shares)
    tags = events.Tags()["scalars"]
    assert "episode/return" not in tags and "episode/count" not in tags  # no episode ended: missing, not 0


def test_logger_wandb_gets_the_same_scalars_and_the_resolved_config(tmp_path, monkeypatch):
    """``logger=wandb`` (offline, its files in the run folder): W&B receives every scalar the
    TensorBoard events hold, at the same env steps, and the run's config is the resolved train
    config the run folder records."""
    wandb = pytest.importorskip("wandb")
    from omegaconf import OmegaConf

    from unilab_gpu.cli.train import main as train_main

    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb_home"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    started, logged = [], []
    real_init, real_log = wandb.init, wandb.sdk.wandb_run.Run.log

    def init(**kwargs):
        run = real_init(**kwargs)
        started.append((kwargs, dict(run.config)))
        return run

    def log(self, data, step=None, commit=None):
        logged.append((step, dict(data)))
        return real_log(self, data, step=step, commit=commit)

    monkeypatch.setattr(wandb, "init", init)
    monkeypatch.setattr(wandb.sdk.wandb_run.Run, "log", log)
    run = tmp_path / "run"
    argv = ["task=pendulum", "env.num_envs=2", "total_env_steps=8", "log_every=2", "progress=lines"]
    assert train_main([*argv, "export_onnx=false", "logger=wandb", f"run_dir={run}", *TINY_FLASHSAC_OVERRIDES]) == 0

    [(kwargs, config)] = started
    recorded = OmegaConf.to_container(OmegaConf.load(run / "config.yaml"), resolve=True)
    assert kwargs["config"] == recorded and config == recorded and config["logger"] == "wandb"
    assert kwargs["dir"] == str(run) and kwargs["project"] == "unilab-gpu" and kwargs["name"].endswith("/run")
    assert list((run / "wandb").glob("offline-run-*/run-*.wandb"))
    events = tensorboard_events(run)
    tags = events.Tags()["scalars"]
    assert sorted({key for _, scalars in logged for key in scalars}) == sorted(tags)
    assert [step for step, _ in logged] == [4, 8]
    for tag in tags:
        points = [(e.step, e.value) for e in events.Scalars(tag)]
        sent = [(step, scalars[tag]) for step, scalars in logged if tag in scalars]
        assert [s for s, _ in points] == [s for s, _ in sent], tag
        assert [v for _, v in points] == pytest.approx([v for _, v in sent], rel=1e-6, abs=1e-6), tag


def test_bad_logger_settings_are_one_line(tmp_path, capsys, monkeypatch):
    from unilab_gpu.cli.train import main as train_main
    from unilab_gpu.training import config

    def one_line(argv: list[str]) -> str:
        assert train_main([*argv, "task=pendulum", f"run_dir={tmp_path / 'run'}"]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err
        return err

    assert "'logger' must be one of tensorboard, wandb, got 'mlflow'" in one_line(["logger=mlflow"])
    if importlib.util.find_spec("wandb") is not None:
        assert "'wandb.project' must be a non-empty string, got ''" in one_line(["logger=wandb", "wandb.project=''"])
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        config.importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real_find_spec(name, *a)
    )
    assert "pip install 'unilab-gpu[wandb]'" in one_line(["logger=wandb"])
    assert not (tmp_path / "run").exists()
