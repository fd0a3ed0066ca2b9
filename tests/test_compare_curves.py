"""scripts/compare_curves.py: runs compared at the env steps all of them reached, against hand sums."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from script_helpers import load_script


def _report(path: Path, points: list[dict]) -> Path:
    path.write_text(json.dumps({"benchmark": "learning_curve", "curve": points}))
    return path


def test_quarter_means_are_taken_at_the_shortest_runs_steps(tmp_path, capsys) -> None:
    cc = load_script("compare_curves")
    # the baseline logs every 100 steps to 1600 (level = steps / 100); the lever stops at 800
    base = _report(tmp_path / "base.json", [{"env_steps": s, "level": s / 100} for s in range(100, 1700, 100)])
    lever_points = [{"env_steps": s, "level": 10.0} for s in range(100, 900, 100)]
    lever_points[6].pop("level")  # step 700 logs no level: left out of its quarter
    lever = _report(tmp_path / "lever.json", lever_points)
    out, plot = tmp_path / "table.json", tmp_path / "curves.png"
    table = cc.main(
        [str(base), str(lever), "--metric", "level", "--out", str(out), "--plot", str(plot), "--smooth", "2"]
    )
    assert table["env_steps"] == 800
    # third quarter (400, 600]: steps 500, 600; last quarter (600, 800]: steps 700, 800
    assert table["runs"]["base"]["level"] == {"third quarter": 5.5, "last quarter": 7.5}
    assert table["runs"]["lever"]["level"] == {"third quarter": 10.0, "last quarter": 10.0}
    assert json.loads(out.read_text())["runs"] == table["runs"]
    assert plot.stat().st_size > 10_000
    assert "base: level 5.500 / 7.500" in capsys.readouterr().out


def test_a_quarter_without_points_is_none() -> None:
    cc = load_script("compare_curves")
    curve = [{"env_steps": 100, "level": 1.0}, {"env_steps": 1000, "level": 3.0}]
    assert cc.quarter_means(curve, 1000, "level") == {"third quarter": None, "last quarter": 3.0}


def test_bad_reports_are_one_line(tmp_path, capsys) -> None:
    cc = load_script("compare_curves")
    good = _report(tmp_path / "good.json", [{"env_steps": 100, "level": 1.0}])
    no_metric = _report(tmp_path / "other.json", [{"env_steps": 100, "length": 1.0}])
    not_json = tmp_path / "clip.npz"
    not_json.write_bytes(b"\x93NUMPY")
    cases = {
        (str(tmp_path / "missing.json"),): "missing.json not found",
        (str(not_json),): "is not a learning_curve.py report",
        (str(_report(tmp_path / "empty.json", [])),): "has no logging points",
        (str(good), str(no_metric)): "other.json logs no 'level'",
        (str(good), "--out", str(good)): f"--out: {good} is this command's own input",
        (
            str(good),
            str(no_metric),
            "--plot",
            str(no_metric),
            "--force",
        ): f"--plot: {no_metric} is this command's own input",
        (str(good), "--out", str(not_json)): f"--out: {not_json} exists; pass --force to replace it",
        (str(good), "--plot", str(tmp_path)): f"--plot: {tmp_path} is a folder",
    }
    for args, message in cases.items():
        with pytest.raises(SystemExit) as stop:
            cc.main([*args, "--metric", "level"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert not_json.read_bytes() == b"\x93NUMPY"
