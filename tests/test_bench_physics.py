"""The physics benchmark script writes a consistent JSON report."""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_physics.py"


def test_report_schema_and_arithmetic(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "physics.json"
    argv = [str(SCRIPT), "--device", "cpu", "--num-envs", "1", "2", "--steps", "3", "--out", str(out)]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(SCRIPT), run_name="__main__")
    report = json.loads(out.read_text())
    assert report["benchmark"] == "physics_only" and report["capture"] is False
    assert [r["num_envs"] for r in report["results"]] == [1, 2]
    for row in report["results"]:
        ms = row["step_ms"]
        assert ms["p10"] <= ms["median"] <= ms["p90"]
        assert abs(row["env_steps_per_s"] - row["num_envs"] / (ms["median"] / 1e3)) < 1e-6 * row["env_steps_per_s"]
        assert abs(row["substeps_per_s"] - 4 * row["env_steps_per_s"]) < 1e-6 * row["substeps_per_s"]
    assert report["machine"]["device"] == "cpu"


def _main(argv: list[str]) -> None:
    from script_helpers import load_script

    load_script("bench_physics").main(argv)


def test_outputs_are_checked_before_any_simulator_is_built(tmp_path: Path, monkeypatch, capsys) -> None:
    """An existing report is refused without --force, a FIFO even with it, before minutes of timing."""
    import os

    import pytest

    from unilab_gpu.sim import simulator

    monkeypatch.setattr(simulator.Simulator, "from_file", lambda *a, **k: pytest.fail("measured before checking"))
    old = tmp_path / "old.json"
    old.write_text("kept")
    with pytest.raises(SystemExit, match=rf"^bench_physics: error: --out: {old} exists; pass --force to replace it$"):
        _main(["--out", str(old)])
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SystemExit, match=r"pipe is a FIFO \(named pipe\), not a regular file"):
        _main(["--out", str(tmp_path / "pipe"), "--force"])
    with pytest.raises(SystemExit) as stop:
        _main(["--out", str(tmp_path / "new.json"), "--steps", "0"])
    assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == (
        "bench_physics: error: --steps must be a whole number >= 1 (timed env steps per size), got 0"
    )
    assert old.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["old.json", "pipe"]
