"""Bad input to ``unilab-train`` (issue 11, cases 1, 2 and 7): each fails with one line naming the
problem and leaves every file on disk as it was; run folders are never shared or overwritten."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from rl_agent_helpers import tensorboard_events
from test_cli_train import TINY

from unilab_gpu.cli.play import main as play_main
from unilab_gpu.cli.train import INTERRUPTED_EXIT_CODE, main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.managers.reward_manager import RewardManager
from unilab_gpu.rl.agents import agent_from_checkpoint
from unilab_gpu.rl.checkpoint import load_checkpoint, non_finite_entries, save_checkpoint
from unilab_gpu.rl.distributional import categorical_support, project_categorical
from unilab_gpu.rl.off_policy import OffPolicyAgent
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.training import run as training_run
from unilab_gpu.training.run_folder import RunFolderError, RunLock, create_run_folder, resume_command
from unilab_gpu.utils.files import LOCK_NAME


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
    monkeypatch.setattr("unilab_gpu.training.resume_check.__version__", "9.9.9")
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
    real_save = training_run.save_checkpoint
    calls = []

    def save_under_ctrl_c(path, payload):
        calls.append(payload["trainer"]["iteration"])
        if payload["trainer"]["iteration"] == 2:
            os.kill(os.getpid(), signal.SIGINT)  # first: stop after this iteration; second: the final save
        return real_save(path, payload)

    monkeypatch.setattr(training_run, "save_checkpoint", save_under_ctrl_c)
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
    assert exit_info.value.code == 2 and f"{option} must be a whole number >= 1 (" in capsys.readouterr().err


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
    events = tensorboard_events(run_dir)
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


# -- issue 25: non-finite values never reach a checkpoint, a resume or an export --


def test_projection_never_indexes_out_of_range_whatever_its_input():
    """NaN or inf targets once gave int64-min scatter indices (an out-of-bounds scatter, a
    device-side assert on CUDA); now NaN goes to the first atom, +-inf to the end atoms."""
    support = categorical_support(11, -5.0, 5.0)
    probs = torch.full((6, 11), 1.0 / 11)
    nan, inf = float("nan"), float("inf")
    reward = torch.tensor([nan, inf, -inf, 1e30, 0.0, 1.0])
    discount = torch.tensor([1.0, 1.0, 1.0, 1.0, nan, 0.0])
    got = project_categorical(probs, reward, discount, support)
    torch.testing.assert_close(got.sum(-1), torch.ones(6))  # no mass lost or sent elsewhere
    one = pytest.approx(1.0, abs=1e-6)
    assert got[0, 0] == one and got[4, 0] == one  # NaN positions: the first atom
    assert got[1, -1] == one and got[3, -1] == one and got[2, 0] == one  # clamped to the ends
    assert got[5, 6] == one  # a finite terminal row as before: reward 1.0 is atom 6


def _poison_after_update(monkeypatch, from_update: int) -> None:
    """From update ``from_update`` on, the actor's first weight turns NaN (as a diverged update would)."""
    real_update = OffPolicyAgent.update

    def update(self, batch):
        metrics = real_update(self, batch)
        if self.num_updates >= from_update:
            with torch.no_grad():
                next(self.actor.parameters()).fill_(float("nan"))
        return metrics

    monkeypatch.setattr(OffPolicyAgent, "update", update)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        # Logged every iteration: the logging point after the poisoned update stops the run.
        (["log_every=1", "checkpoint_every=0"], "non-finite agent state (modules.actor."),
        # A checkpoint due before the next logging point is refused instead of written.
        (["log_every=50", "checkpoint_every=1"], "non-finite agent state (modules.actor."),
    ],
)
def test_non_finite_agent_state_stops_the_run_keeping_the_last_good_checkpoint(tmp_path, capsys, monkeypatch, extra,
                                                                               message):  # fmt: skip
    run_dir = tmp_path / "run"
    _poison_after_update(monkeypatch, from_update=2)
    code = main([*TINY, "total_env_steps=400", *extra, f"run_dir={run_dir}"])
    err = capsys.readouterr().err
    assert code == 1 and message in err and "Traceback" not in err
    saved = load_checkpoint(run_dir)["trainer"]
    assert f"training stopped, last good checkpoint kept at {run_dir / 'checkpoint.pt'} (iteration " in err
    assert f"(iteration {saved['iteration']})" in err
    assert not non_finite_entries(saved["agent"])  # never a NaN on disk
    assert not (run_dir / "policy.onnx").exists()


def test_non_finite_reward_stops_the_run_at_the_next_logging_point(tmp_path, capsys, monkeypatch):
    real_compute = RewardManager.compute

    def infinite(self, env, invalid):
        return real_compute(self, env, invalid).fill_(float("inf"))

    monkeypatch.setattr(RewardManager, "compute", infinite)
    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=400", "log_every=2", "checkpoint_every=0", f"run_dir={run_dir}"]) == 1
    err = capsys.readouterr().err
    assert "non-finite reward" in err and "by iteration 2" in err and "(iteration 0)" in err
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 0


def _poison_checkpoint(run_dir: Path) -> None:
    checkpoint = load_checkpoint(run_dir)
    actor = checkpoint["trainer"]["agent"]["modules"]["actor"]
    first = next(iter(actor))
    actor[first] = torch.full_like(actor[first], float("nan"))
    save_checkpoint(run_dir / "checkpoint.pt", checkpoint)


def test_resume_of_a_checkpoint_with_nan_weights_is_refused(run_dir, capsys):
    _poison_checkpoint(run_dir)
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 2
    err = _error(capsys)
    assert "refused, nothing was written: its checkpoint holds non-finite agent state (modules.actor." in err
    assert _snapshot(run_dir) == before


def test_export_refuses_a_nan_policy_also_at_the_end_of_training(run_dir, tmp_path, capsys):
    pytest.importorskip("onnxscript")
    from unilab_gpu.cli.export import main as export_main
    from unilab_gpu.export.export_run import export_after_training

    _poison_checkpoint(run_dir)
    before = _snapshot(tmp_path)
    assert export_main([str(run_dir), "--out", str(tmp_path / "nan.onnx")]) == 2
    err = capsys.readouterr().err
    assert "export refused, nothing was written: the policy holds non-finite values (actor." in err
    assert _snapshot(tmp_path) == before
    checkpoint = load_checkpoint(run_dir)
    env = make_env("pendulum", num_envs=1, compile=False, announce=False)
    cfg = OmegaConf.create(checkpoint["config"])
    line = export_after_training(env, agent_from_checkpoint(checkpoint, "cpu"), cfg, tmp_path / "end")
    assert (
        line.startswith("export: failed (ValueError: export refused, nothing was written")
        and not (tmp_path / "end").exists()
    )


# -- issue 25: the run lock never follows links; bad checkpoints are refused without torch's advice --


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "folder"])
def test_lock_file_that_is_a_link_or_folder_is_refused_and_never_truncated(run_dir, tmp_path, capsys, kind):
    victim = tmp_path / "my_notes.txt"
    victim.write_text("precious")
    lock = run_dir / LOCK_NAME
    lock.unlink(missing_ok=True)
    {"symlink": lambda: lock.symlink_to(victim), "hardlink": lambda: os.link(victim, lock), "folder": lock.mkdir}[
        kind
    ]()
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}", "total_env_steps=12", "env.num_envs=8"]) == 2  # refused either way
    err = _error(capsys)
    expected = {"symlink": "is a symbolic link", "hardlink": "has other names (hard links)", "folder": "Is a directory"}
    assert f"lock file {lock}" in err and expected[kind] in err
    assert victim.read_text() == "precious" and _snapshot(run_dir) == before


def test_run_files_that_are_links_are_refused(run_dir, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_bytes((run_dir / "config.yaml").read_bytes())
    (run_dir / "config.yaml").unlink()
    (run_dir / "config.yaml").symlink_to(elsewhere)
    before, kept = _snapshot(run_dir), elsewhere.read_bytes()
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 2
    assert f"resume: {run_dir / 'config.yaml'} is a symbolic link; a run folder's files must be plain" in _error(capsys)
    assert _snapshot(run_dir) == before and elsewhere.read_bytes() == kept


def test_checkpoint_with_python_objects_is_refused_without_torchs_advice(run_dir, capsys):
    torch.save({"format_version": 1, "payload": OrderedDictSubclass()}, run_dir / "checkpoint.pt")
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}", "total_env_steps=12"]) == 2
    err = _error(capsys)
    assert "holds a Python object (test_bad_input_train.OrderedDictSubclass) that no unilab-gpu checkpoint" in err
    assert "weights_only" not in err and "trust" not in err and len(err.strip().splitlines()) == 1
    assert _snapshot(run_dir) == before


class OrderedDictSubclass(dict):
    """A class torch's safe unpickler does not know."""


# -- issue 25: training outputs, signals, budgets and resume arguments --


def test_unwritable_run_root_is_named_before_the_env_is_built(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(training_run, "make_env", lambda *a, **k: pytest.fail("built the env before checking"))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main([*TINY, "total_env_steps=8", f"run_root={blocker / 'runs'}"]) == 2
    err = _error(capsys)
    assert f"run_root: cannot write the run folder {blocker / 'runs'}" in err and "is a file, not a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_full_disk_during_a_save_keeps_the_last_checkpoint_and_says_how_to_resume(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    real_save = training_run.save_checkpoint

    def disk_full_after_the_first(path, payload):
        if payload["trainer"]["iteration"] >= 2:
            raise OSError(28, "No space left on device")
        return real_save(path, payload)

    monkeypatch.setattr(training_run, "save_checkpoint", disk_full_after_the_first)
    assert main([*TINY, "total_env_steps=400", "checkpoint_every=1", f"run_dir={run_dir}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot save a checkpoint in {run_dir}: No space left on device" in err
    assert "last good checkpoint kept at" in err and "(iteration 1)" in err
    assert f"continue with: {resume_command(run_dir)}" in err and "Traceback" not in err
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 1


def test_sighup_saves_and_exits_like_sigterm(tmp_path, capsys, monkeypatch):
    run_dir = tmp_path / "run"
    real_iteration = OffPolicyTrainer.run_iteration

    def hang_up_at_3(self, timed=False):
        real_iteration(self, timed)
        if self.iteration == 3:
            os.kill(os.getpid(), signal.SIGHUP)  # the terminal or SSH session closed

    monkeypatch.setattr(OffPolicyTrainer, "run_iteration", hang_up_at_3)
    assert main([*TINY, "total_env_steps=400", "checkpoint_every=0", f"run_dir={run_dir}"]) == INTERRUPTED_EXIT_CODE
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 3
    assert f"continue with: {resume_command(run_dir)}" in capsys.readouterr().out


def test_resume_with_a_budget_already_done_says_there_is_nothing_to_do(run_dir, capsys):
    before = _snapshot(run_dir)
    assert main([f"resume={run_dir}", "total_env_steps=4"]) == 0
    out = capsys.readouterr().out
    assert f"nothing to do: {run_dir} has done 8 env steps, total_env_steps is 4; raise it to train on" in out
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["resume="], "'resume' must be the path of a run folder or null, got ''"),
        ([*TINY, "run_dir="], "'run_dir' must be a path or null, got ''"),
        (["resume={run}", "algo=flashsac"], "resume: 'algo=flashsac' chooses another algo config, but a resumed run"),
        (["resume={run}", "total_env_steps=12", "env.overrides=['rewards.angle.weight=1e39']"], "stored as float32"),
    ],
)
def test_empty_paths_and_other_algorithms_on_resume_are_one_line(run_dir, tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)  # an empty path must not mean "here"
    before, here = _snapshot(run_dir), sorted(p.name for p in tmp_path.iterdir())
    assert main([a.format(run=run_dir) for a in argv]) == 2
    err = _error(capsys)
    assert message in err and len(err.strip().splitlines()) == 1
    assert _snapshot(run_dir) == before and sorted(p.name for p in tmp_path.iterdir()) == here


# -- issue 25: export and play never overwrite what they should not, and check outputs first --


@pytest.mark.parametrize(
    ("out", "extra", "message"),
    [
        ("checkpoint.pt", ["--force"], "is this command's own input; write the output to another file"),
        ("config.yaml", ["--force"], "is the config.yaml of the run folder"),
        ("trainer.lock", ["--force"], "is the trainer.lock of the run folder"),
        ("policy.onnx", [], "policy.onnx exists; pass --force to replace it"),
        (".", [], "is a folder; give a file path, e.g. "),
    ],
)
def test_export_never_overwrites_the_run_or_an_existing_file_without_force(run_dir, capsys, out, extra, message):
    from unilab_gpu.cli.export import main as export_main

    (run_dir / LOCK_NAME).write_text("")
    if not (run_dir / "policy.onnx").exists():  # the end-of-training export needs the export extra
        (run_dir / "policy.onnx").write_bytes(b"an earlier export")
    before = _snapshot(run_dir)
    assert export_main([str(run_dir), "--out", str(run_dir / out), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("unilab-export: error: --out: ") and message in err and len(err.strip().splitlines()) == 1
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize(
    ("video", "extra", "message"),
    [
        ("{blocker}/clip.mp4", [], "--video: cannot write {blocker}/clip.mp4: {blocker} is a file, not a folder"),
        ("{tmp}", [], "--video: {tmp} is a folder; give a file path, e.g. {tmp}/rollout.mp4"),
        ("{tmp}/clip.avi", [], "--video: {tmp}/clip.avi must end in .mp4 or .gif"),
        ("{tmp}/old.mp4", [], "--video: {tmp}/old.mp4 exists; pass --force to replace it"),
    ],
)
def test_play_checks_its_video_output_before_building_anything(run_dir, tmp_path, capsys, monkeypatch, video, extra,
                                                               message):  # fmt: skip
    monkeypatch.setattr("unilab_gpu.cli.play.make_env", lambda *a, **k: pytest.fail("built the env before checking"))
    (tmp_path / "blocker").write_text("")
    (tmp_path / "old.mp4").write_bytes(b"an earlier video")
    before = _snapshot(tmp_path)
    names = {"tmp": tmp_path, "blocker": tmp_path / "blocker"}
    assert play_main([str(run_dir), "--video", video.format(**names), *extra]) == 2
    err = capsys.readouterr().err
    assert message.format(**names) in err and len(err.strip().splitlines()) == 1
    assert _snapshot(tmp_path) == before


def test_play_refuses_non_finite_seconds_and_corrupt_onnx(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    with pytest.raises(SystemExit) as exit_info:
        play_main(["run", "--seconds", "nan"])
    assert (
        exit_info.value.code == 2
        and "--seconds must be a number in (0, 3600] (video length in env seconds), got nan" in capsys.readouterr().err
    )
    corrupt = tmp_path / "policy.onnx"
    corrupt.write_bytes(b"\x08\x07garbage that is no protobuf")
    assert play_main(["--onnx", str(corrupt), "--num-envs", "1", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"unilab-play: error: --onnx: {corrupt} is not a readable ONNX policy (")
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_full_disk_at_the_first_checkpoint_is_one_line_and_leaves_no_folder(tmp_path, capsys, monkeypatch):
    """Issue 46: the first checkpoint is written while the run folder is made; a full disk there is
    one line, and no half-made run folder stays behind."""

    def disk_full(path, payload):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(training_run, "save_checkpoint", disk_full)
    assert main([*TINY, "total_env_steps=8", f"run_root={tmp_path}"]) == 2
    err = _error(capsys)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "cannot create the run folder" in err and "No space left on device (writing " in err
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing of the run was kept
