"""scripts/learning_curve.py: the kept run folder, progress in the time budget, outputs, signals
(the evaluations it reports: tests/test_evaluation_episodes.py and tests/test_evaluation_clean.py)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
import torch
from script_helpers import load_script

from unilab_gpu.export.onnx_policy import OnnxPolicy
from unilab_gpu.rl.agents import agent_from_checkpoint
from unilab_gpu.rl.checkpoint import load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_kept_run_holds_the_evaluated_policy(tmp_path, capsys) -> None:
    """--keep-run leaves a run folder whose checkpoint is the policy the script evaluated: the
    checkpoint's agent, evaluated the same way, reproduces the report's trained episodes; its
    policy.onnx acts as that agent, and no trainer.lock is left. Training's progress lines count
    minutes of the time budget and the env steps of the report's curve."""
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
    again = lc.episode_evaluation("pendulum", [], agent, 2, "cpu", seed=1)
    returns = {name: report[name]["summary"]["episode/return"] for name in ("untrained", "trained")}
    assert again["summary"]["episode/return"] == pytest.approx(returns["trained"], rel=1e-5)
    assert again["summary"]["episode/return"] != pytest.approx(returns["untrained"], rel=1e-3)
    kept = sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("events.out.tfevents."))
    assert kept == ["checkpoint.pt", "config.yaml", "policy.onnx"]  # no trainer.lock
    obs = torch.randn(64, checkpoint["observation_dims"]["policy"], generator=torch.Generator().manual_seed(0))
    onnx_actions = OnnxPolicy(run_dir / "policy.onnx").run(obs.numpy())
    assert onnx_actions == pytest.approx(agent.act(obs, deterministic=True).numpy(), abs=1e-5)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("minutes ")]
    assert [int(line.split(" | ")[1].split()[1].split("/")[0].replace(",", "")) for line in lines] == [
        row["env_steps"] for row in report["curve"]
    ]
    for line, row in zip(lines, report["curve"], strict=True):
        spent, budget = line.split(" | ")[0].removeprefix("minutes ").split("/")
        assert budget == "30" and abs(float(spent) - row["seconds"] / 60) <= 0.05 + 1e-9, line
        assert line.split(" | ")[1].endswith("/128"), line  # the --env-steps budget


def test_kept_run_keeps_the_trained_policy_when_the_evaluation_fails(tmp_path, monkeypatch) -> None:
    # The final evaluation builds a fresh env from configs/ as they are then; if that fails after a
    # long run (configs edited meanwhile), the trained checkpoint is already in the kept folder.
    lc = load_script("learning_curve")
    run_dir = tmp_path / "run"
    evaluate = lc.episode_evaluation
    calls = []

    def evaluation_that_fails_after_training(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("task 'pendulum': bad key")
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(lc, "episode_evaluation", evaluation_that_fails_after_training)
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


def test_a_full_disk_is_one_line(tmp_path, capsys) -> None:
    """A report that cannot be written (ENOSPC at its first write) ends the script in one line
    naming --out and the file; the kept run folder's lock is released."""
    lc = load_script("learning_curve")
    run_dir, out = tmp_path / "run", tmp_path / "report.json"
    argv = [
        *("--task", "pendulum", "--algo", "sac", "--env-steps", "64", "--num-envs", "4", "--eval-envs", "2"),
        *("--log-every", "8", "--keep-run", str(run_dir), "--out", str(out), "--"),
        *("algo.batch_size=32", "algo.warmup_steps=4", "algo.compile=false"),
        *("algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]"),
    ]
    full = OSError(errno.ENOSPC, "No space left on device", str(out))
    with pytest.raises(SystemExit) as stop, mock.patch.object(lc, "write_json_atomic", side_effect=full):
        lc.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"learning_curve: error: --out: cannot write {out}: No space left on device"
    assert not any("Traceback" in line for line in err)
    assert not (run_dir / "trainer.lock").exists()


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
