"""scripts/compare_curves.py: runs compared at the env steps all of them reached, against hand sums."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from unittest import mock

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


def test_two_reports_with_one_stem_are_both_kept(tmp_path, capsys) -> None:
    cc = load_script("compare_curves")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    base = _report(tmp_path / "a" / "run.json", [{"env_steps": s, "level": 1.0} for s in range(100, 900, 100)])
    lever = _report(tmp_path / "b" / "run.json", [{"env_steps": s, "level": 3.0} for s in range(100, 900, 100)])
    table = cc.main([str(base), str(lever), "--metric", "level"])
    assert table["runs"] == {
        str(base): {"level": {"third quarter": 1.0, "last quarter": 1.0}},
        str(lever): {"level": {"third quarter": 3.0, "last quarter": 3.0}},
    }
    out = capsys.readouterr().out
    assert f"{base}: level 1.000" in out and f"{lever}: level 3.000" in out


def test_a_shared_out_and_plot_is_refused(tmp_path, capsys) -> None:
    cc = load_script("compare_curves")
    good = _report(tmp_path / "good.json", [{"env_steps": 100, "level": 1.0}])
    shared = tmp_path / "x"
    with pytest.raises(SystemExit) as stop:
        cc.main([str(good), "--metric", "level", "--out", str(shared), "--plot", str(shared)])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is also --out" in err
    assert not shared.exists()


def test_nonsense_curves_are_refused_in_one_line(tmp_path, capsys) -> None:
    """The poor-answer class "nonsense accepted": NaN, unsorted, negative steps, unfinished, other task."""
    cc = load_script("compare_curves")

    def report(name: str, points: list[dict], **extra) -> str:
        path = tmp_path / name
        path.write_text(json.dumps({"benchmark": "learning_curve", "task": "t", "curve": points, **extra}))
        return str(path)

    good = report("good.json", [{"env_steps": 100, "level": 1.0}])
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    cases = {
        report("nan.json", [{"env_steps": 100, "level": float("nan")}]): "'level' is nan; expected a finite number",
        report("unsorted.json", [{"env_steps": 200}, {"env_steps": 100}]): "curve[1] env_steps is 100",
        report("negative.json", [{"env_steps": -5}]): "curve[0] env_steps is -5",
        report("text.json", [{"env_steps": "100"}]): "curve[0] env_steps is '100'",
        report("partial.json", [{"env_steps": 100}], complete=False, stage="training"): "unfinished report",
        report("other.json", [{"env_steps": 100}], task="g1"): "other.json is a run of task 'g1'",
        report("list.json", [5]): "curve[0] env_steps is None",
        str(fifo): "is a FIFO",
    }
    for path, message in cases.items():
        with pytest.raises(SystemExit) as stop:
            cc.main([good, path, "--metric", "level"])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    # The task's sim-to-real variant (its randomizations on) is the same task: compared.
    variant = report("variant.json", [{"env_steps": 100, "level": 2.0}], task="t_sim2real")
    compared = cc.main([good, variant, "--metric", "level"])
    assert compared["runs"]["variant"]["level"]["last quarter"] == 2.0


def test_a_full_disk_is_one_line(tmp_path, capsys) -> None:
    cc = load_script("compare_curves")
    good = _report(tmp_path / "good.json", [{"env_steps": 100, "level": 1.0}])
    full = tmp_path / "full"
    full.mkdir()
    with pytest.raises(SystemExit) as stop, mock.patch("os.fsync", side_effect=OSError(errno.ENOSPC, "No space")):
        cc.main([str(good), "--metric", "level", "--out", str(full / "t.json")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write" in err and "No space" in err
    assert list(full.iterdir()) == []
