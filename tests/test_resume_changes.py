"""A resume keeps the task and physics settings its checkpoint was trained with (issue 60,
"Nothing lost" 5): changed ``env.overrides`` or a hand-edited ``config.yaml`` are refused naming the
keys, and ``--allow-changed`` trains on while the run folder keeps the earlier config."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf
from test_cli_train import TINY

from unilab_gpu.cli.train import main
from unilab_gpu.rl.checkpoint import load_checkpoint
from unilab_gpu.training.resume_check import task_setting_changes

CHANGED = "env.overrides=['rewards.torque.weight=-5.0','episode_length_s=2.0']"


@pytest.fixture
def run_dir(tmp_path, capsys):
    folder = tmp_path / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={folder}", "export_onnx=false"]) == 0
    capsys.readouterr()
    return folder


def test_changed_task_settings_are_refused_naming_the_keys(run_dir, capsys) -> None:
    config = (run_dir / "config.yaml").read_bytes()
    assert main([f"resume={run_dir}", "total_env_steps=16", CHANGED]) == 2
    err = capsys.readouterr().err
    assert "the task settings differ from those the checkpoint was trained with" in err
    assert "episode_length_s: checkpoint 10.0, now 2.0" in err
    assert "rewards.torque.weight: checkpoint -0.08, now -5.0" in err
    assert "--allow-changed" in err and "Traceback" not in err
    assert (run_dir / "config.yaml").read_bytes() == config  # the record is untouched
    assert load_checkpoint(run_dir)["trainer"]["env_steps"] == 8


def test_a_hand_edited_config_yaml_is_refused_too(run_dir, capsys) -> None:
    path = run_dir / "config.yaml"
    cfg = OmegaConf.load(path)
    cfg.env.overrides = ["events.random_start=null"]
    path.write_text(OmegaConf.to_yaml(cfg))
    assert main([f"resume={run_dir}", "total_env_steps=16"]) == 2
    assert "events.random_start: checkpoint (a section), now None" in capsys.readouterr().err


def test_allow_changed_trains_on_and_keeps_both_configs(run_dir, capsys) -> None:
    assert main([f"resume={run_dir}", "total_env_steps=16", CHANGED, "--allow-changed"]) == 0
    out = capsys.readouterr().out
    assert "resumed with 2 changed task setting(s) (episode_length_s, rewards.torque.weight)" in out
    earlier = OmegaConf.load(run_dir / "config.until_8.yaml")  # the settings of env steps 0 to 8
    now = OmegaConf.load(run_dir / "config.yaml")
    assert list(earlier.env.overrides) == []
    assert list(now.env.overrides) == ["rewards.torque.weight=-5.0", "episode_length_s=2.0"]
    assert load_checkpoint(run_dir)["trainer"]["env_steps"] == 16
    # the same settings again: no change, nothing more kept
    assert main([f"resume={run_dir}", "total_env_steps=24"]) == 0
    assert sorted(p.name for p in run_dir.glob("config*.yaml")) == ["config.until_8.yaml", "config.yaml"]


def test_allow_changed_without_a_resume_is_refused(tmp_path, capsys) -> None:
    assert main([*TINY, f"run_dir={tmp_path / 'new'}", "--allow-changed"]) == 2
    assert "--allow-changed applies to a resume" in capsys.readouterr().err


def test_overrides_that_compose_alike_are_no_change() -> None:
    assert task_setting_changes("pendulum", ["episode_length_s=2.0", "decimation=5"], ["episode_length_s=2"]) == []
    changes = task_setting_changes("go2_velocity_rough", [], ["terrain.curriculum=null", "robot.physics.impratio=3"])
    assert changes == [
        "robot.physics.impratio: checkpoint None, now 3.0",  # the MJCF's own, then the override's
        "terrain.curriculum: checkpoint (a section), now None",  # one line for the section switched off
    ]
