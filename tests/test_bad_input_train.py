"""Bad input to ``unilab-train`` (issue 11, cases 1, 2 and 7): each fails with one line naming the
problem and leaves every file on disk as it was; run folders are never shared or overwritten."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_cli_train import TINY

from unilab_gpu.cli import train as train_cli
from unilab_gpu.cli.play import main as play_main
from unilab_gpu.cli.train import INTERRUPTED_EXIT_CODE, main
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.rl.checkpoint import (
    LOCK_NAME,
    RunFolderError,
    RunLock,
    create_run_folder,
    load_checkpoint,
    resume_command,
    save_checkpoint,
)


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` (relative path -> bytes), the lock file excepted."""
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != LOCK_NAME
    }


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    """A finished tiny run (2 iterations); tests copy it before changing anything."""
    run_dir = tmp_path_factory.mktemp("runs") / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}"]) == 0
    return run_dir


@pytest.fixture
def run_dir(trained_run, tmp_path) -> Path:
    copy = tmp_path / "run"
    copy.mkdir()
    for path in trained_run.iterdir():
        (copy / path.name).write_bytes(path.read_bytes())
    # The config names its folder; point it at the copy.
    text = (copy / "config.yaml").read_text().replace(str(trained_run), str(copy))
    (copy / "config.yaml").write_text(text)
    return copy


def _error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("unilab-train: error:") and "Traceback" not in err
    return err


# -- case 1: a new run never writes into an existing run's folder; two trainers never share one --


def test_new_run_into_an_existing_run_folder_is_refused_naming_resume(run_dir, capsys):
    before = _snapshot(run_dir)
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}"]) == 2
    err = _error(capsys)
    assert "already holds a run" in err and f"resume={run_dir}" in err
    assert _snapshot(run_dir) == before  # checkpoint, config and TensorBoard events untouched


def test_non_empty_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert main([*TINY, "total_env_steps=8", f"run_dir={tmp_path}"]) == 2
    assert "is not an empty folder" in _error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_resume_of_a_folder_in_use_is_refused_naming_the_owner(run_dir, capsys):
    before = _snapshot(run_dir)
    lock = RunLock(run_dir)  # a second open file description: flock conflicts as with another process
    try:
        assert main([f"resume={run_dir}"]) == 2
    finally:
        lock.release()
    err = _error(capsys)
    assert "in use by another trainer" in err and str(os.getpid()) in err
    assert _snapshot(run_dir) == before


def test_two_new_runs_racing_for_one_folder_cannot_both_win(tmp_path):
    target = tmp_path / "run"

    def fill(folder: Path) -> None:
        (folder / "config.yaml").write_text("second")
        # Meanwhile the other trainer's folder lands under the same name.
        created, lock = create_run_folder(target, lambda f: (f / "config.yaml").write_text("first"), numbered=False)
        assert created == target
        lock.release()

    with pytest.raises(RunFolderError, match="already holds a run.*resume="):
        create_run_folder(target, fill, numbered=False)
    assert (target / "config.yaml").read_text() == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["run"]  # the loser's staging folder is gone


def test_stale_lock_of_a_dead_trainer_is_reported_and_taken_over(run_dir, capsys):
    (run_dir / LOCK_NAME).write_text("999999999 gone-host\n")  # a lock file nobody holds
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 0
    out = capsys.readouterr().out
    assert "stale lock" in out and "999999999 gone-host" in out
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 3
    assert (run_dir / LOCK_NAME).read_text() == ""  # a clean exit leaves no owner behind


def test_leftover_temporary_checkpoints_are_removed_at_start(run_dir, capsys):
    leftovers = [run_dir / ".checkpoint.pt.k9x2.tmp", run_dir / ".config.yaml.a1.tmp"]
    for path in leftovers:
        path.write_bytes(b"half a checkpoint")
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 0
    assert not any(p.exists() for p in leftovers)
    assert "removed 2 leftover temporary file(s)" in capsys.readouterr().out


# -- case 2: a rejected resume writes nothing, lists every mismatch, and a plain resume still works --


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["env.num_envs=8"], ["env.num_envs: checkpoint 4, now 8"]),
        (["task=g1_stand"], ["task: checkpoint 'pendulum', now 'g1_stand'"]),
        (["algo.name=flashsac"], ["algo: checkpoint 'sac', now 'flashsac'"]),
        (
            ["algo.actor_hidden_dims=[16]"],
            ["algo.actor_hidden_dims: checkpoint [8], now [16]", "network shapes:", "actor."],
        ),
        (
            ["env.overrides=[observations.policy.terms.velocity=null]"],
            ["observation sizes: checkpoint {'policy': 3}, now {'policy': 2}", "network shapes:"],
        ),
    ],
)
def test_rejected_resume_writes_nothing_and_lists_each_mismatch(run_dir, capsys, overrides, expected):
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}", *overrides]) == 2
    err = _error(capsys)
    assert "refused, nothing was written" in err and "resume=" in err
    for text in expected:
        assert text in err
    assert _snapshot(run_dir) == before
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 0  # the run is not broken
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 3


def test_resume_lists_several_mismatches_at_once(run_dir, capsys):
    assert main([f"resume={run_dir}", "task=g1_stand", "env.num_envs=8"]) == 2
    err = _error(capsys)
    assert "task: checkpoint 'pendulum'" in err and "env.num_envs: checkpoint 4, now 8" in err


def test_checkpoint_of_another_package_version_is_refused(run_dir, capsys, monkeypatch):
    monkeypatch.setattr("unilab_gpu.rl.checkpoint.__version__", "9.9.9")
    assert main([f"resume={run_dir}"]) == 2
    assert "package version: checkpoint '0.1.0', now '9.9.9'" in _error(capsys)


# -- case 7: type errors in overrides are one line; a failed start leaves no run folder behind --


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("seed=abc", "'seed' must be a whole number, got 'abc'"),
        ("algo.batch_size=big", "'algo.batch_size' must be a whole number, got 'big'"),
        ("total_env_steps=-5", "'total_env_steps' must be >= 1, got -5"),
        ("log_every=0", "'log_every' must be >= 1, got 0"),
        ("progress=fancy", "'progress' must be one of auto, bar, lines, got 'fancy'"),
        pytest.param(
            "device=cuda",
            "device 'cuda' requested but torch sees no CUDA device",
            marks=pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA"),
        ),
        ("algo.learning_rate=nan", "'algo.learning_rate' must be a finite number, got nan"),
        (
            "algo.actor_hidden_dims=[8,wide]",
            "'algo.actor_hidden_dims' must be a list of whole numbers, got [8, 'wide']",
        ),
        ("env.overrides=['episode_length_s=0']", "'episode_length_s' must be > 0, got 0"),
    ],
)
def test_bad_override_is_one_line_and_leaves_no_run_folder(tmp_path, capsys, override, message):
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}", override]) == 2
    err = _error(capsys)
    assert message in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # no orphan run folder


def test_printed_resume_command_survives_a_shell(tmp_path):
    folder = tmp_path / "my runs" / "it's here"
    assert shlex.split(resume_command(folder)) == ["unilab-train", f"resume={folder}"]


def test_second_ctrl_c_during_the_final_save_finishes_the_save(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    real_save = train_cli.save_checkpoint
    calls = []

    def save_under_ctrl_c(path, payload):
        calls.append(payload["trainer"]["iteration"])
        if payload["trainer"]["iteration"] == 2:
            os.kill(os.getpid(), signal.SIGINT)  # first: stop after this iteration; second: the final save
        return real_save(path, payload)

    monkeypatch.setattr(train_cli, "save_checkpoint", save_under_ctrl_c)
    code = main([*TINY, "total_env_steps=400", "checkpoint_every=1", f"run_dir={run_dir}"])
    assert code == INTERRUPTED_EXIT_CODE
    out = capsys.readouterr().out
    assert calls == [0, 1, 2, 2]  # iteration 0 at creation, 1, 2, then the final save of iteration 2
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 2  # the final save completed
    assert f"continue with: {resume_command(run_dir)}" in out


def test_checkpoint_of_another_action_size_is_refused(run_dir, capsys):
    checkpoint = load_checkpoint(run_dir)
    checkpoint["action_dim"] = 2
    save_checkpoint(run_dir / "checkpoint.pt", checkpoint)
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}"]) == 2
    assert "action size: checkpoint 2, now 1" in _error(capsys)
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("option", ["--steps", "--num-envs"])
def test_play_refuses_non_positive_counts(capsys, option):
    with pytest.raises(SystemExit) as exit_info:
        play_main(["some_run", option, "-1"])
    assert exit_info.value.code == 2 and f"{option} must be >= 1, got -1" in capsys.readouterr().err


def test_non_finite_action_count_reaches_tensorboard_and_console(tmp_path, capsys, monkeypatch):
    real_set_actions = ManagerBasedRlEnv.set_actions

    def nan_in_row_0(self, actions):
        actions = actions.clone()
        actions[0] = float("nan")
        real_set_actions(self, actions)

    monkeypatch.setattr(ManagerBasedRlEnv, "set_actions", nan_in_row_0)
    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=12", "log_every=3", f"run_dir={run_dir}"]) == 0
    assert "health: 3 non-finite actions" in capsys.readouterr().out  # one row, three iterations
    events = EventAccumulator(str(run_dir))
    events.Reload()
    assert [e.value for e in events.Scalars("env/non_finite_actions")] == [3.0]
    assert [e.value for e in events.Scalars("env/deferred_resets")] == [0.0]


def test_staging_folders_of_killed_starts_are_removed_by_the_next_start(tmp_path):
    abandoned = tmp_path / ".run.x1y2.staging"
    abandoned.mkdir()
    (abandoned / LOCK_NAME).write_text("999999999 gone-host\n")
    (abandoned / "config.yaml").write_text("half")
    in_progress = tmp_path / ".other.z3.staging"
    in_progress.mkdir()
    lock = RunLock(in_progress)  # a start that is still running
    try:
        created, new_lock = create_run_folder(tmp_path / "run", lambda f: (f / "config.yaml").write_text("new"),
                                              numbered=False)  # fmt: skip
        new_lock.release()
    finally:
        lock.release()
    assert created == tmp_path / "run" and not abandoned.exists() and in_progress.exists()
