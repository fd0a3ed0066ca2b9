"""The scripts that write files follow the commands' rule (issue 36): outputs checked before any
work, ``--force`` to replace regular files only, and bad input in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from script_helpers import load_script


def _one_line(capsys, prefix: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(prefix), err
    return err.strip().removeprefix(prefix)


@pytest.fixture
def notebook_script(monkeypatch):
    pytest.importorskip("nbclient", reason="nbclient is in the dev extra")
    script = load_script("execute_notebook")
    monkeypatch.setattr(script, "execute", lambda *a, **k: pytest.fail("started a kernel before checking"))
    return script


def _notebook(path: Path) -> Path:
    cell = {"id": "c1", "cell_type": "code", "metadata": {}, "source": "1", "outputs": [], "execution_count": None}
    path.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path


@pytest.mark.parametrize("timeout", ["0", "-5"])
def test_notebook_timeout_that_is_not_positive_is_refused(notebook_script, tmp_path, capsys, timeout):
    """nbclient reads a timeout <= 0 as no limit at all: refused, not passed on."""
    notebook = _notebook(tmp_path / "n.ipynb")
    assert notebook_script.main([str(notebook), "--timeout", timeout]) == 2
    assert _one_line(capsys, "execute_notebook: error: ") == f"--timeout must be a number of seconds > 0, got {timeout}"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"not json at all", "is not JSON, so not a Jupyter notebook (Expecting value: line 1 column 1"),
        (b"\xff\xfe\x00binary", "is not JSON, so not a Jupyter notebook ("),
        (b'{"a": 1}', "is JSON but not a Jupyter notebook (no list of 'cells' at its top level)"),
        (b"[1, 2]", "is JSON but not a Jupyter notebook (no list of 'cells' at its top level)"),
        (b'{"cells": [], "nbformat": 99}', "is not a notebook nbformat can read ("),
    ],
)
def test_a_file_that_is_not_a_notebook_is_one_line(notebook_script, tmp_path, capsys, content, message):
    path = tmp_path / "n.ipynb"
    path.write_bytes(content)
    assert notebook_script.main([str(path)]) == 2
    assert _one_line(capsys, "execute_notebook: error: ").startswith(f"{path} {message}")
    assert path.read_bytes() == content


def test_notebook_images_are_checked_before_the_kernel_starts(notebook_script, tmp_path, capsys):
    notebook = _notebook(tmp_path / "n.ipynb")
    images = tmp_path / "images"
    images.mkdir()
    (images / "n_1.png").write_bytes(b"old plot")
    assert notebook_script.main([str(notebook), "--images", str(images)]) == 2
    assert (
        _one_line(capsys, "execute_notebook: error: ")
        == f"--images: {images / 'n_1.png'} exists; pass --force to replace it"
    )
    os.mkfifo(images / "n_2.png")
    assert notebook_script.main([str(notebook), "--images", str(images), "--force"]) == 2
    assert "n_2.png is a FIFO (named pipe), not a regular file" in _one_line(capsys, "execute_notebook: error: ")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert notebook_script.main([str(notebook), "--images", str(blocker)]) == 2
    assert "is a file, not a folder" in _one_line(capsys, "execute_notebook: error: ")
    link = tmp_path / "link.ipynb"
    link.symlink_to(notebook)
    assert notebook_script.main([str(link)]) == 2
    assert "link.ipynb is a symbolic link; the notebook is rewritten in place" in _one_line(
        capsys, "execute_notebook: "
    )
    assert (images / "n_1.png").read_bytes() == b"old plot"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--seconds", "nan"], "--seconds must be a number in (0, 3600] (env seconds), got nan"),
        (["--seconds", "-1"], "--seconds must be a number in (0, 3600] (env seconds), got -1"),
        (["--seconds", "1e30"], "--seconds must be a number in (0, 3600] (env seconds), got 1e+30"),
        (["--fps", "0"], "--fps must be a number in (0, 50] (GIF frames a second), got 0"),
        (["--crop", "1.5"], "--crop must be a number in (0, 1] (centre fraction kept), got 1.5"),
        (["--width", "0"], "--width must be a whole number in [2, 4096] (GIF width in pixels), got 0"),
    ],
)
def test_rollout_gif_refuses_bad_numbers_before_playing(tmp_path, capsys, monkeypatch, options, message):
    script = load_script("rollout_gif")
    monkeypatch.setattr(script, "play_main", lambda *a, **k: pytest.fail("played before checking"))
    with pytest.raises(SystemExit) as stop:
        script.main(["run", str(tmp_path / "out.gif"), *options])
    assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == f"rollout_gif: error: {message}"
    assert list(tmp_path.iterdir()) == []


def test_rollout_gif_never_replaces_a_fifo(tmp_path, capsys, monkeypatch):
    script = load_script("rollout_gif")
    monkeypatch.setattr(script, "play_main", lambda *a, **k: pytest.fail("played before checking"))
    os.mkfifo(tmp_path / "out.gif")
    assert script.main(["run", str(tmp_path / "out.gif"), "--force"]) == 2
    assert "out.gif is a FIFO (named pipe), not a regular file" in _one_line(capsys, "rollout_gif: error: ")


def test_bench_viewer_checks_its_report_before_training(tmp_path, monkeypatch, capsys):
    """scripts/bench_viewer.py: an existing --out needs --force, a FIFO is never replaced; both found
    before the trainer is built."""
    pytest.importorskip("viser", reason="the viewer extra")
    bench = load_script("bench_viewer")
    monkeypatch.setattr(bench, "compose_train_config", lambda *a, **k: pytest.fail("trained before checking"))
    out = tmp_path / "viewer.json"
    out.write_text("kept")
    with pytest.raises(SystemExit, match=rf"^bench_viewer: error: --out: {out} exists; pass --force to replace it$"):
        bench.main(["--out", str(out)])
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(SystemExit, match=r"pipe is a FIFO \(named pipe\), not a regular file"):
        bench.main(["--out", str(tmp_path / "pipe"), "--force"])
    with pytest.raises(SystemExit) as stop:
        bench.main(["--rounds", "0"])
    assert stop.value.code == 2 and capsys.readouterr().err.splitlines()[-1] == (
        "bench_viewer: error: --rounds must be a whole number >= 1 (pairs of windows), got 0"
    )
    assert out.read_text() == "kept"


def test_bench_distributed_checks_its_report_before_launching(tmp_path, monkeypatch):
    bench = load_script("bench_distributed")
    monkeypatch.setattr(bench.subprocess, "Popen", lambda *a, **k: pytest.fail("launched before checking"))
    out = tmp_path / "dist.json"
    out.write_text("kept")
    monkeypatch.setattr("sys.argv", ["bench_distributed.py", "--out", str(out)])
    with pytest.raises(SystemExit, match=rf"^bench_distributed: error: --out: {out} exists; pass --force"):
        bench.main()
    assert out.read_text() == "kept"


def test_sim2sim_benchmark_reads_backward_commands_as_values():
    # "-0.3,0,0" is a command, not an unknown option (argparse's own rule knows single numbers only).
    script = load_script("sim2sim_benchmark")
    args = script.parse_args(["p.onnx", "--out", "o.json", "--commands", "0.5,0,0", "-0.3,0,0", "0,-0.3,-.8"])
    assert args.commands == [[0.5, 0.0, 0.0], [-0.3, 0.0, 0.0], [0.0, -0.3, -0.8]]
    with pytest.raises(SystemExit):  # a real unknown option is still refused
        script.parse_args(["p.onnx", "--out", "o.json", "--comands", "0.5,0,0"])
