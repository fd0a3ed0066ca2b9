"""``unilab-bench``: report schema and arithmetic, its chart, errors, the ``python -m`` entry point."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from unilab_gpu.cli.bench import main
from unilab_gpu.envs.env_step import STEP_PHASES
from unilab_gpu.profiling.plots import plot_bench

# No natural episode ends within a test.
STEADY = ["episode_length_s=100", "randomize_initial_episode_length=false"]
# A deterministic 20 ms busy-wait in every observation pass makes the step long and steady, so
# the profiled phases and the timed real step agree on a busy machine too.
BURN = "+observations.policy.terms.burn={func: env_test_terms.burn_time, params: {milliseconds: 20}}"


def test_report_schema_and_arithmetic(tmp_path: Path) -> None:
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    argv = ["--task", "pendulum", "--num-envs", "2", "4", "--steps", "6", "--warmup", "1", "--window", "4"]
    argv += ["--no-compile", "--out", str(out), "--plot", str(png), "--override", BURN, *STEADY]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["benchmark"] == "env_step" and report["task"] == "pendulum" and report["mode"] == "eager"
    assert report["command"].startswith("unilab-bench --task pendulum")
    assert report["machine"]["device"] == "cpu" and report["machine"]["packages"]["torch"] == torch.__version__
    assert report["config"]["decimation"] >= 1 and "burn" in report["config"]["observations"]["policy"]["terms"]
    assert [r["num_envs"] for r in report["results"]] == [2, 4]
    for row in report["results"]:
        step = row["step_ms"]
        assert step["p10"] <= step["median"] <= step["p90"]
        assert row["env_steps_per_s"] == pytest.approx(row["num_envs"] / (step["median"] / 1e3))
        assert list(row["phases_ms"]) == list(STEP_PHASES)
        assert sum(row["phases_ms"].values()) == pytest.approx(row["profiled_step_ms"])
        assert row["overhead_ratio"] == pytest.approx(step["median"] / row["physics_only_ms"])
        assert row["resets_per_step"] == 0.0 and row["deferred_resets"] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The chart stacks the reported phase means per size and plots the reported throughput.
    bars, line = plot_bench(report).axes
    heights = [[p.get_height() for p in c.patches] for c in bars.containers]
    expected = [[r["phases_ms"][phase] for r in report["results"]] for phase in STEP_PHASES]
    assert np.allclose(heights, expected)
    assert np.allclose(line.lines[0].get_ydata(), [r["env_steps_per_s"] for r in report["results"]])
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]  # the atomic write cleaned up


def test_bad_arguments_name_the_option(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit, match="--task: unknown task 'nope'"):
        main(["--task", "nope", "--out", str(tmp_path / "x.json")])
    for argv, message in (
        (["--num-envs", "4", "0"], "--num-envs must be a whole number >= 1 (each size), got 0"),
        (["--window", "0"], "--window must be a whole number >= 1 (steps per profiling window), got 0"),
        (["--seed", "-1"], "--seed must be a whole number in [0, 2**63 - 1], got -1"),
    ):
        with pytest.raises(SystemExit) as stop:
            main(["--task", "pendulum", *argv, "--out", str(tmp_path / "x.json")])
        assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == f"unilab-bench: error: {message}"
    assert not (tmp_path / "x.json").exists()


def test_python_dash_m_entry_point(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["unilab_gpu.cli.bench", "--task", "pendulum", "--num-envs", "2", "--steps", "2", "--warmup", "1"]
    monkeypatch.setattr(sys, "argv", argv + ["--no-compile", "--out", str(out)])
    monkeypatch.delitem(sys.modules, "unilab_gpu.cli.bench")  # imported above; run afresh as __main__
    with pytest.raises(SystemExit) as exit_info:
        runpy.run_module("unilab_gpu.cli.bench", run_name="__main__")
    assert exit_info.value.code == 0
    assert "env-steps/s" in capsys.readouterr().out
    assert json.loads(out.read_text())["results"][0]["num_envs"] == 2


def test_a_task_on_a_terrain_is_also_timed_on_the_flat_floor(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    small = ["terrain.num_levels=2", "terrain.num_cols=7", "terrain.sub_terrain_size=[3.0,3.0]"]
    argv = ["--task", "go2_velocity_rough", "--num-envs", "2", "--steps", "3", "--warmup", "1", "--window", "3"]
    assert main([*argv, "--no-compile", "--out", str(out), "--override", *small, *STEADY]) == 0
    report = json.loads(out.read_text())
    row = report["results"][0]
    assert row["physics_only_flat_ms"] > 0
    assert row["terrain_physics_ratio"] == pytest.approx(row["physics_only_ms"] / row["physics_only_flat_ms"])
    line = plot_bench(report).axes[1]
    flat = next(curve for curve in line.lines if curve.get_label() == "physics only, flat floor")
    assert np.allclose(flat.get_ydata(), [2 / (row["physics_only_flat_ms"] / 1e3)])
