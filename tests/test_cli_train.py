"""``unilab-train`` end to end on the pendulum: run folder, resolved config, errors, resume,
Ctrl-C, and the main job's CPU downsizing (``python -m unilab_gpu``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from rl_agent_helpers import TINY_SAC_OVERRIDES

from unilab_gpu.__main__ import run as main_job
from unilab_gpu.cli.train import INTERRUPTED_EXIT_CODE, main
from unilab_gpu.rl.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "task=pendulum",
    "env.num_envs=4",
    "log_every=1",
    "progress=lines",
    "algo=sac",
    *TINY_SAC_OVERRIDES,
]


def test_tiny_run_writes_run_folder_with_resolved_config(tmp_path, capsys):
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}"]) == 0
    (run_dir,) = (tmp_path / "pendulum" / "sac").iterdir()  # runs/<task>/<algo>/<timestamp>/
    cfg = OmegaConf.load(run_dir / "config.yaml")
    assert (cfg.device, cfg.compile, cfg.env.num_envs) == ("cpu", False, 4)  # "auto" resolved
    assert cfg.algo.name == "sac" and cfg.algo.batch_size == 8 and list(cfg.algo.actor_hidden_dims) == [8]
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["trainer"]["iteration"] == 2 and checkpoint["trainer"]["env_steps"] == 8
    out = capsys.readouterr().out
    assert "it 2/2 | env-steps 8" in out and "done: 8 env steps" in out
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())


def test_resume_continues_the_step_counter(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}"]) == 0
    assert main([f"resume={run_dir}", "total_env_steps=16"]) == 0
    out = capsys.readouterr().out
    assert "resumed at iteration 2 (8 env steps)" in out and "it 4/4 | env-steps 16" in out
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["trainer"]["iteration"] == 4
    # Sampling needs n_step + 1 = 2 replay steps of the process, so each process updates once,
    # on its second iteration; the schedule advanced once per update and was not restarted.
    agent_state = checkpoint["trainer"]["agent"]
    assert agent_state["num_updates"] == 1 + 1
    assert agent_state["modules"]["schedule"]["num_steps"].item() == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["algo.batch_sz=3"], "batch_sz"),
        (["algo=td3"], "td3"),  # no such algorithm (ppo exists since RSL-RL support)
        (["task=no_such_task"], "no_such_task"),
        (["algo.batch_size=0"], "batch_size"),
        (["algo.adam_betas=[0.9]"], "'algo.adam_betas' must be two numbers [beta1, beta2], got [0.9]"),
    ],
)
def test_bad_config_exits_with_a_message_naming_it(tmp_path, capsys, args, message):
    assert main([*TINY, f"run_root={tmp_path}", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unilab-train: error:") and message in err


def test_corrupt_checkpoint_on_resume_names_the_file(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=4", f"run_dir={run_dir}"]) == 0
    (run_dir / "checkpoint.pt").write_bytes(b"\x00garbage")
    assert main([f"resume={run_dir}"]) == 2
    err = capsys.readouterr().err
    assert str(run_dir / "checkpoint.pt") in err and "corrupt" in err and "Traceback" not in err


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_saves_a_checkpoint_and_exits_cleanly(tmp_path, signum):
    """Ctrl-C, and the SIGTERM torchrun or a scheduler sends, stop after the iteration and save."""
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "unilab_gpu.cli.train", *TINY, "total_env_steps=100000000", f"run_dir={run_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # wait until training is under way
        if line.startswith("it 3/") or time.monotonic() > deadline:
            break
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == INTERRUPTED_EXIT_CODE, err[-2000:]
    assert "Traceback" not in err
    assert "checkpoint saved" in out and f"unilab-train resume={run_dir}" in out
    assert load_checkpoint(run_dir)["trainer"]["iteration"] >= 3


def test_main_job_says_it_downsizes_on_cpu_and_ends_with_what_next(tmp_path, capsys):
    # The user's overrides come after the CPU downsizing and win: keep this run tiny.
    assert main_job([*TINY, "total_env_steps=4", "env.cpu_num_envs=2", f"run_root={tmp_path}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("python -m unilab_gpu: no CUDA device, so a downsized CPU run")
    # Three closing lines: what ran (plainly a smoke run; TINY's env.num_envs=4 wins), the run folder,
    # the next commands.
    (run_dir,) = (tmp_path / "pendulum" / "sac").iterdir()
    ran, folder, after = lines[-3:]
    assert ran.startswith("python -m unilab_gpu: trained sac on pendulum for 4 env steps (4 envs on cpu): a smoke run")
    assert "not a trained policy" in ran
    assert folder == f"run folder: {run_dir}"
    assert f"unilab-play {run_dir} --viewer" in after and f"unilab-play {run_dir} --video rollout.mp4" in after


def test_a_presets_task_overrides_lead_the_runs_env_overrides():
    """PPO's preset brings BeyondMimic's actions about the default pose to tracking; the user's
    overrides still win."""
    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.training.config import compose_train_config

    cfg = compose_train_config(["algo=ppo", "task=g1_tracking", "env.overrides=['actions.params.effort_scale=0.5']"])
    assert list(cfg.env.overrides) == ["actions.params.reference_command=null", "actions.params.effort_scale=0.5"]
    assert "task_overrides" not in cfg.algo
    assert list(compose_train_config(["algo=ppo", "task=pendulum"]).env.overrides) == []
    assert list(compose_train_config(["algo=sac", "task=g1_tracking"]).env.overrides) == []
    env = make_env("g1_tracking", num_envs=2, compile=False, announce=False, overrides=list(cfg.env.overrides))
    assert env.cfg.actions.params["reference_command"] is None and env.cfg.actions.params["effort_scale"] == 0.5
    assert env.action_manager.term.reference_cols is None  # targets about the default pose


def test_a_preset_schedule_of_zero_decays_over_the_whole_run():
    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.training.config import compose_train_config, resolve_auto
    from unilab_gpu.training.run import make_trainer

    tiny = [
        "algo.actor_hidden_dim=8",
        "algo.critic_hidden_dim=8",
        "algo.actor_num_blocks=1",
        "algo.critic_num_blocks=1",
    ]
    overrides = ["algo=flashsac", "task=pendulum", "env.num_envs=4", "total_env_steps=400", *tiny]
    cfg = resolve_auto(compose_train_config([*overrides, "algo.learning_rate_decay_steps=0", "algo.warmup_steps=10"]))
    env = make_env("pendulum", num_envs=4, compile=False, announce=False)
    trainer = make_trainer(env, cfg, seed=0)
    # 100 iterations; updates from iteration 10 on, updates_per_step of the preset each.
    assert trainer.agent.schedule.total_steps == (100 - 10 + 1) * cfg.algo.updates_per_step


def test_training_from_python_as_docs_training_md_shows(tmp_path):
    """The library calls of docs/training.md ("Training from Python"), with a tiny config."""
    from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
    from unilab_gpu.training.config import compose_train_config, resolve_auto
    from unilab_gpu.training.run import build_run

    cfg = resolve_auto(compose_train_config([*TINY, "total_env_steps=12", f"run_dir={tmp_path / 'run'}"]))
    run = build_run(cfg)
    assert isinstance(run.trainer, OffPolicyTrainer) and run.trainer.steps_per_env == 1
    assert run.trainer.train() is True
    run.save()
    run.lock.release()
    checkpoint = load_checkpoint(tmp_path / "run")
    assert checkpoint["trainer"]["env_steps"] == 12 and checkpoint["trainer"]["iteration"] == 3


def test_train_yaml_names_every_algo_preset():
    """The comment on train.yaml's algo default lists every file of configs/algo/ (it fell behind once)."""
    text = (REPO / "configs" / "train.yaml").read_text()
    comment = text.split("- algo:", 1)[1].split("- _self_", 1)[0]
    presets = {path.stem for path in (REPO / "configs" / "algo").glob("*.yaml")}
    assert len(presets) >= 8 and presets <= set(re.findall(r"[a-z_]+", comment))
