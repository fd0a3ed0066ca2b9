"""scripts/learning_curve.py: errors bucketed by episode age against a hand count, the task table,
the kept run folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from script_helpers import load_script

from unilab_gpu.rl.agents import agent_from_checkpoint
from unilab_gpu.rl.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_errors_are_averaged_by_steps_since_the_episodes_start() -> None:
    lc = load_script("learning_curve")
    # 3 rows: the motion command's per-row body-position errors of each step.
    command = SimpleNamespace(row_errors=lambda: {"body_pos_error": command.error})
    env = SimpleNamespace(command_manager=SimpleNamespace(get=lambda name: command))
    errors = lc.ErrorsSinceStart(env, horizon=3)
    for ages, xs in (([1, 1, 0], [0.1, 0.2, 9.0]), ([2, 2, 1], [0.3, 0.5, 0.4]), ([3, 9, 2], [0.6, 9.0, 0.2])):
        env.episode_length, command.error = torch.tensor(ages), torch.tensor(xs)
        errors(0)
    # age 0 (reset within the step) and ages past the horizon are left out
    by_age = errors.by_age()
    expected = [(0.1 + 0.2 + 0.4) / 3, (0.3 + 0.5 + 0.2) / 3, 0.6]
    assert all(abs(a - b) < 1e-6 for a, b in zip(by_age, expected, strict=True)), by_age
    assert abs(lc.mean_over_first([0.2, None, 0.4, 1.0], 3) - 0.3) < 1e-12
    assert lc.mean_over_first([None, None], 2) is None


def test_within_thresholds_counts_rows_by_their_first_failure() -> None:
    lc = load_script("learning_curve")
    # First failure ages of six rows (0: never): at age 10 rows 0, 30, 31, 50 are still within.
    first = torch.tensor([0, 5, 10, 30, 31, 50])
    assert lc.within_thresholds(first, 10) == 4 / 6
    assert lc.within_thresholds(first, 30) == 3 / 6
    assert lc.within_thresholds(first, 50) == 1 / 6


def test_clean_starts_are_one_seeded_draw_per_stratum_of_the_clip() -> None:
    lc = load_script("learning_curve")
    frames = lc.clean_start_frames(325, 16, seed=1)
    span = 325 - 1 - lc.CLEAN_HORIZON  # a start leaves 50 more frames inside the clip
    assert frames.dtype == torch.int64 and frames.shape == (16,)
    for i, frame in enumerate(frames.tolist()):
        assert i * span / 16 <= frame + 1e-9 and frame < (i + 1) * span / 16
    assert frames.tolist() == lc.clean_start_frames(325, 16, seed=1).tolist()  # shared by both policies
    assert frames.tolist() != lc.clean_start_frames(325, 16, seed=2).tolist()
    with pytest.raises(SystemExit, match="fewer than 52"):
        lc.clean_start_frames(51, 4, seed=0)


def test_clean_evaluation_of_a_tiny_run() -> None:
    """Keys and ages as the report promises, failures evaluated on the side with terminations off,
    and the zero action at the clip's own joints (residual actions) at age 10 better than at 50."""
    lc = load_script("learning_curve")
    from unilab_gpu.rl.sac import SacAgent, SacConfig

    agent = SacAgent(SacConfig(actor_hidden_dims=(16,), critic_hidden_dims=(8,), compile=False), 160, 286, 29)
    overrides = ["commands.motion.params.synthetic_seconds=3.0"]
    reports = [lc.clean_evaluation("g1_tracking", overrides, agent, 4, "cpu", 3, trained) for trained in (False, True)]
    for report in reports:
        assert report["failure_terms"] == ["anchor_height", "anchor_orientation", "end_effector_height"]
        assert report["clip_frames"] == 151  # 3 s at 50 Hz, both ends
        assert report["start_frames"] == lc.clean_start_frames(151, 4, seed=3).tolist()
        for key in ("anchored_body_pos_error_by_age_m", "world_body_pos_error_by_age_m", "joint_pos_error_by_age_rad"):
            assert list(report[key]) == ["10", "30", "50"] and all(v >= 0 for v in report[key].values())
        within = report["within_thresholds_by_age"]
        assert 1.0 >= within["10"] >= within["30"] >= within["50"] >= 0.0
        every_age = report["anchored_body_pos_error_every_age_m"]
        assert len(every_age) == 50 and every_age[9] == report["anchored_body_pos_error_by_age_m"]["10"]
        assert report["action_std"] > 0
    untrained = reports[0]["anchored_body_pos_error_by_age_m"]
    assert untrained["10"] < untrained["50"]  # the zero action falls in time


def test_velocity_task_reports_its_velocity_errors_by_episode_age() -> None:
    lc = load_script("learning_curve")
    # The velocity command's per-row planar error; 2 rows at ages 1 and 2, then 2 and 0 (reset).
    command = SimpleNamespace(row_errors=lambda: {"lin_vel_error": command.error})
    env = SimpleNamespace(command_manager=SimpleNamespace(get=lambda name: command, terms={"twist": command}))
    name, metrics = lc.task_metrics(env)
    assert name == "twist" and set(metrics.errors) == {"velocity/lin_vel_error_mps", "velocity/yaw_rate_error_radps"}
    assert lc.age_keys(metrics.by_age) == ("lin_vel_error_by_episode_step_mps", "lin_vel_error_first_steps_mps")
    assert lc.age_keys("body_pos_error_m") == ("body_pos_error_by_episode_step_m", "body_pos_error_first_steps_m")
    errors = lc.ErrorsSinceStart(env, name, horizon=2)
    for ages, values in (([1, 2], [0.5, 0.25]), ([2, 0], [0.75, 9.0])):
        env.episode_length, command.error = torch.tensor(ages), torch.tensor(values)
        errors(0)
    assert errors.by_age() == [0.5, (0.25 + 0.75) / 2]
    assert lc.task_metrics(SimpleNamespace(command_manager=SimpleNamespace(terms={}))) is None


def test_kept_run_holds_the_evaluated_policy(tmp_path) -> None:
    """--keep-run leaves a run folder whose checkpoint is the policy the script evaluated: the
    checkpoint's agent, evaluated the same way, reproduces the report's trained episodes."""
    lc = load_script("learning_curve")
    run_dir, out, plot = tmp_path / "run", tmp_path / "report.json", tmp_path / "curve.png"
    argv = [
        *("--task", "pendulum", "--algo", "sac", "--env-steps", "128", "--num-envs", "4", "--eval-envs", "2"),
        *("--log-every", "8", "--keep-run", str(run_dir), "--out", str(out), "--plot", str(plot), "--"),
        *("algo.batch_size=32", "algo.warmup_steps=4", "algo.compile=false"),
        *("algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"),
    ]
    lc.main(argv)
    report = json.loads(out.read_text())
    assert plot.read_bytes().startswith(b"\x89PNG") and sorted(p.name for p in tmp_path.iterdir()) == [
        "curve.png",
        "report.json",
        "run",
    ]
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint["trainer"]["env_steps"] == report["env_steps"] == 128
    agent = agent_from_checkpoint(checkpoint, "cpu")
    again = lc.evaluation("pendulum", [], agent, 2, "cpu", seed=1)
    returns = {name: report[name]["summary"]["episode/return"] for name in ("untrained", "trained")}
    assert again["summary"]["episode/return"] == pytest.approx(returns["trained"], rel=1e-5)
    assert again["summary"]["episode/return"] != pytest.approx(returns["untrained"], rel=1e-3)


def test_kept_run_keeps_the_trained_policy_when_the_evaluation_fails(tmp_path, monkeypatch) -> None:
    # The final evaluation builds a fresh env from configs/ as they are then; if that fails after a
    # long run (configs edited meanwhile), the trained checkpoint is already in the kept folder.
    lc = load_script("learning_curve")
    run_dir = tmp_path / "run"
    evaluate = lc.evaluation
    calls = []

    def evaluation_that_fails_after_training(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("task 'pendulum': bad key")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(lc, "evaluation", evaluation_that_fails_after_training)
    argv = [
        *("--task", "pendulum", "--algo", "sac", "--env-steps", "64", "--num-envs", "4", "--eval-envs", "2"),
        *("--log-every", "8", "--keep-run", str(run_dir), "--out", str(tmp_path / "r.json"), "--"),
        *("algo.batch_size=32", "algo.warmup_steps=4", "algo.compile=false"),
        *("algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"),
    ]
    with pytest.raises(ValueError, match="bad key"):
        lc.main(argv)
    assert load_checkpoint(run_dir)["trainer"]["env_steps"] == 64


def _refused(lc, capsys, argv: list[str]) -> str:
    """The one stderr line of a run of the script that must stop with status 2."""
    with pytest.raises(SystemExit) as stopped:
        lc.main(argv)
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and err.count("\n") == 1 and err.startswith("learning_curve: error: "), err
    return err.strip().removeprefix("learning_curve: error: ")


def test_budgets_and_outputs_are_refused_before_any_work(tmp_path, capsys, monkeypatch) -> None:
    """Issue 36: no silent --minutes -1/nan, and no output found unwritable (or a run's checkpoint
    overwritten) only after the whole training run."""
    import os

    lc = load_script("learning_curve")
    monkeypatch.setattr(lc, "build_run", lambda *a, **k: pytest.fail("trained before checking"))
    monkeypatch.setattr(lc, "compose_train_config", lambda *a, **k: pytest.fail("composed before checking"))
    run = tmp_path / "run"  # a run folder: its checkpoint is never an output, --force or not
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"weights")
    (run / "config.yaml").write_text("task: pendulum\n")
    old = tmp_path / "old.json"
    old.write_text("kept")
    os.mkfifo(tmp_path / "pipe")
    new = str(tmp_path / "new.json")
    base = ["--task", "pendulum", "--algo", "sac"]
    cases = [
        (["--minutes", "-1", "--out", new], "--minutes must be a finite number > 0, got -1.0"),
        (["--minutes", "nan", "--out", new], "--minutes must be a finite number > 0, got nan"),
        (["--minutes", "inf", "--out", new], "--minutes must be a finite number > 0, got inf"),
        (["--out", str(old)], f"--out: {old} exists; pass --force to replace it"),
        (["--out", str(run / "checkpoint.pt"), "--force"], "is the checkpoint.pt of the run folder"),
        (["--out", new, "--plot", str(run / "config.yaml"), "--force"], "is the config.yaml of the run folder"),
        (["--out", str(tmp_path / "pipe"), "--force"], "is a FIFO (named pipe), not a regular file"),
        (["--out", new, "--plot", new], "--plot: " + new + " is also --out; give the plot its own file"),
        (
            ["--out", str(tmp_path / "kept" / "checkpoint.pt"), "--keep-run", str(tmp_path / "kept")],
            "is inside --keep-run",
        ),
        (["--out", str(tmp_path / "a_file" / "x.json")], "cannot write"),
        (
            ["--out", new, "--keep-run", str(run)],
            f"--keep-run: {run} is a run folder; give a new or empty folder (a run folder is never reused)",
        ),
        (["--out", new, "--keep-run", str(tmp_path / "a_file")], f"--keep-run: {tmp_path / 'a_file'} is a file"),
    ]
    (tmp_path / "a_file").write_text("")
    for extra, message in cases:
        assert message in _refused(lc, capsys, base + extra), extra
    assert old.read_text() == "kept" and (run / "checkpoint.pt").read_bytes() == b"weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "old.json", "pipe", "run"]


def test_replot_of_a_missing_or_corrupt_report_is_one_line(tmp_path, capsys) -> None:
    lc = load_script("learning_curve")
    plot = tmp_path / "curve.png"
    missing = tmp_path / "missing.json"
    assert _refused(lc, capsys, ["--replot", "--out", str(missing), "--plot", str(plot)]) == (
        f"--out: {missing} not found; --replot redraws an existing report"
    )
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_bytes(b'{"curve": [1, 2')
    assert f"--out: {corrupt} is not a readable JSON report (" in _refused(
        lc, capsys, ["--replot", "--out", str(corrupt), "--plot", str(plot)]
    )
    other = tmp_path / "other.json"
    other.write_text('{"benchmark": "env_step"}')
    assert f"--out: {other} is not a learning-curve report (no curve, untrained" in _refused(
        lc, capsys, ["--replot", "--out", str(other), "--plot", str(plot)]
    )
    plot.write_bytes(b"old plot")
    assert f"--plot: {plot} exists; pass --force to replace it" in _refused(
        lc, capsys, ["--replot", "--out", str(other), "--plot", str(plot)]
    )
    assert "needs --plot" in _refused(lc, capsys, ["--replot", "--out", str(other)])
    assert plot.read_bytes() == b"old plot" and not missing.exists()
    partial = tmp_path / "partial.json"
    keys = {key: None for key in ("untrained", "trained", "task", "algo", "env_steps", "train_seconds")}
    cut = {"stage": "training", "interrupted": "a stop signal during training", "complete": False}
    partial.write_text(json.dumps({**keys, "curve": [], **cut}))
    assert _refused(lc, capsys, ["--replot", "--out", str(partial), "--plot", str(tmp_path / "new.png")]) == (
        f"--out: {partial} is a partial report (stopped during training: a stop signal during training); its "
        "'curve' holds the logging points so far, but --replot needs a finished run"
    )


def test_curve_keeps_the_mean_terrain_level() -> None:
    lc = load_script("learning_curve")
    row = lc.curve_row(1600, 2.0, {"terrain/mean_level": 2.25, "episode/length": 400.0, "not/kept": 1.0})
    assert row == {"env_steps": 1600, "seconds": 2.0, "episode/length": 400.0, "terrain/mean_level": 2.25}


def test_replot_draws_a_report_whose_trained_errors_are_null(tmp_path) -> None:
    # The committed G1 rough report has null trained velocity errors (poisoned by a diverged row,
    # its notes say); the redraw leaves their "trained" lines out instead of failing on None.
    lc = load_script("learning_curve")
    report = lc.ROOT / "docs" / "benchmarks" / "learning" / "g1_velocity_rough_sac.json"
    assert json.loads(report.read_text())["trained"]["lin_vel_error_mps"] is None
    plot = tmp_path / "replot.png"
    lc.main(["--replot", "--out", str(report), "--plot", str(plot)])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _tiny_run(out, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "scripts" / "learning_curve.py"),
        *("--task", "pendulum", "--algo", "sac", "--minutes", "10", "--num-envs", "4", "--eval-envs", "2"),
        *("--log-every", "4", "--out", str(out), *extra, "--"),
        *("algo.batch_size=32", "algo.warmup_steps=4", "algo.compile=false"),
        *("algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"),
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_run_stopped_by_a_signal_keeps_its_curve(tmp_path, signum) -> None:
    """The report is on disk as the run goes (complete: false, the stage, the curve so far); a
    SIGTERM (a device call's limit) or SIGINT (gpu_check's budget cut) during training ends the run
    after its iteration with the curve so far, the kept run saved, and exit status 130."""
    out, run_dir = tmp_path / "report.json", tmp_path / "run"
    process = subprocess.Popen(
        _tiny_run(out, "--keep-run", str(run_dir)),
        cwd=ROOT,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 240
    report: dict = {}
    while time.monotonic() < deadline and len(report.get("curve", [])) < 2:
        assert process.poll() is None, process.communicate()[0]
        time.sleep(0.2)
        report = json.loads(out.read_text()) if out.is_file() else {}
    assert report["stage"] == "training" and report["complete"] is False and report["untrained"] is not None
    process.send_signal(signum)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 130, output
    final = json.loads(out.read_text())
    assert final["interrupted"] == "a stop signal during training" and final["complete"] is False
    assert len(final["curve"]) >= 2 and final["curve"][: len(report["curve"])] == report["curve"]
    assert final["env_steps"] >= final["curve"][-1]["env_steps"] > 0
    assert final["trained"] is None  # the trained policy's evaluation did not run
    assert load_checkpoint(run_dir)["trainer"]["env_steps"] == final["env_steps"]
    assert f"INTERRUPTED (a stop signal during training); the report so far is in {out}" in output
