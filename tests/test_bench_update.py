"""The update benchmark script: presets as documented, a consistent JSON report, bad options refused
before any work."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from script_helpers import load_script

from unilab_gpu.__main__ import CPU_ENVS

bench = load_script("bench_update")


def test_presets_follow_the_runs_they_name():
    """main_job is python -m unilab_gpu's CPU downsizing, learning_curve the committed curve's command."""
    assert bench.PRESETS["main_job"] == {
        "algo": "flashsac",
        "num_envs": CPU_ENVS,
        "overrides": {"batch_size": 256, "updates_per_step": 1},
    }
    command = json.loads(Path("docs/benchmarks/learning/g1_tracking_flashsac.json").read_text())["command"]
    for key, value in bench.PRESETS["learning_curve"]["overrides"].items():
        assert f"algo.{key}={value}" in command
    assert f"--num-envs {bench.PRESETS['learning_curve']['num_envs']} " in command


def test_report_schema_and_arithmetic(tmp_path: Path) -> None:
    out = tmp_path / "update.json"
    bench.main(
        ["--presets", "main_job", "--modes", "eager", "--warm-updates", "1", "--updates", "1", "--blocks", "2"]
        + ["--iterations", "1", "--out", str(out)]
    )
    report = json.loads(out.read_text())
    assert report["benchmark"] == "update" and report["machine"]["device"] == "cpu"
    (row,) = report["results"]
    assert row["preset"] == "main_job" and row["mode"] == "eager" and row["captured"] is False
    assert row["update_mode"] == "eager" and report["complete"] is True
    assert row["batch_size"] == 256 and row["updates_per_step"] == 1 and len(row["update_ms_blocks"]) == 2
    assert row["update_ms_min"] == min(row["update_ms_blocks"]) <= row["update_ms"] <= max(row["update_ms_blocks"])
    assert row["env_steps_per_s_best"] == pytest.approx(CPU_ENVS / (min(row["iteration_ms_blocks"]) / 1e3))
    assert row["env_steps_per_s"] == pytest.approx(CPU_ENVS / (row["iteration_ms"] / 1e3), rel=1e-9)
    assert report["ratios"] == {}  # one mode: nothing to compare


def test_ratios_compare_each_mode_with_eager_of_the_same_preset():
    def row(preset, mode, ms, best_ms, rate, best_rate):
        values = (ms, best_ms, rate, best_rate)
        keys = ("update_ms", "update_ms_min", "env_steps_per_s", "env_steps_per_s_best")
        return {"preset": preset, "mode": mode, **dict(zip(keys, values, strict=True))}

    rows = [
        row("a", "eager", 100.0, 80.0, 10.0, 12.0),
        row("a", "compiled", 50.0, 60.0, 15.0, 24.0),
        row("b", "compiled", 1.0, 1.0, 1.0, 1.0),  # no eager row: nothing to compare
    ]
    assert bench.ratios(rows) == {
        "a": {
            "compiled_update_time_over_eager": 0.5,
            "compiled_best_update_time_over_eager": 0.75,
            "compiled_env_steps_per_s_over_eager": 1.5,
            "compiled_best_env_steps_per_s_over_eager": 2.0,
        }
    }


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--modes", "captured"], "--modes captured needs a CUDA --device"),
        (["--updates", "0"], "--updates must be a whole number >= 1 (updates per timed block), got 0"),
        (["--seed", "-1"], "--seed must be a whole number in [0, 2**63 - 1], got -1"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, capsys, argv, message) -> None:
    with pytest.raises(SystemExit) as stop:
        bench.main([*argv, "--out", str(tmp_path / "x.json")])
    assert message in str(stop.value.code) + capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()


def test_an_existing_report_is_refused_without_force(tmp_path: Path) -> None:
    out = tmp_path / "update.json"
    out.write_text("{}")
    with pytest.raises(SystemExit, match="--out"):
        bench.main(["--out", str(out)])
    assert out.read_text() == "{}"


def test_the_report_is_written_after_each_warm_up_and_block_and_on_sigterm(tmp_path: Path, monkeypatch, capsys) -> None:
    """A cut keeps what was measured: the report after the warm-up (no timings yet), after the first
    round of blocks, and then, on SIGTERM in the second round, marked interrupted (exit 130)."""
    out = tmp_path / "update.json"
    written = []
    original_write = bench.write_json_atomic

    def recording_write(path, report):
        written.append(json.loads(json.dumps(report)))
        original_write(path, report)

    calls = []
    original_timed = bench.timed_ms

    def timed_then_cut(run, count, wait):
        calls.append(count)
        if len(calls) == 3:  # the second round's update block: the device call's limit
            os.kill(os.getpid(), signal.SIGTERM)
        return original_timed(run, count, wait)

    monkeypatch.setattr(bench, "write_json_atomic", recording_write)
    monkeypatch.setattr(bench, "timed_ms", timed_then_cut)
    previous = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        bench.main(
            ["--presets", "main_job", "--modes", "eager", "--warm-updates", "1", "--updates", "1", "--blocks", "3"]
            + ["--iterations", "1", "--out", str(out)]
        )
    assert stopped.value.code == 130 and signal.getsignal(signal.SIGTERM) is previous
    warm, first, last = written
    assert warm["results"][0]["update_ms"] is None and warm["complete"] is False
    assert len(first["results"][0]["update_ms_blocks"]) == 1 and first["results"][0]["update_mode"] == "eager"
    assert last["interrupted"] is True and len(last["results"][0]["update_ms_blocks"]) == 1
    assert json.loads(out.read_text()) == last
    assert "bench_update: INTERRUPTED" in capsys.readouterr().out
