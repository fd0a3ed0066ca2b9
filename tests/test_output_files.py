"""Files the project writes (``unilab_gpu.utils.files``, issue 36): ``--force`` replaces regular
files only, written files keep the user's umask, one JSON writer, reports name no machine path,
and a full disk mid-save is one line (training and export) with the previous file intact."""

from __future__ import annotations

import errno
import io
import json
import os
import stat
from pathlib import Path

import pytest
import torch

from unilab_gpu.rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_gpu.utils import files
from unilab_gpu.utils.files import (
    REPO_ROOT,
    OutputPathError,
    check_output,
    portable_paths,
    write_atomic,
    write_json_atomic,
)


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_force_never_turns_a_fifo_into_a_regular_file(fifo):
    with pytest.raises(OutputPathError, match=r"is a FIFO \(named pipe\), not a regular file; --force replaces"):
        check_output(fifo, "--out", force=True)
    with pytest.raises(OutputPathError, match=r"cannot replace .*pipe: it is a FIFO"):
        write_atomic(fifo, lambda file: file.write(b"report"))
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in fifo.parent.iterdir()) == ["pipe"]  # no temporary file left


def test_a_device_node_is_refused_before_anything_is_created(monkeypatch):
    """``/dev/null`` itself, with every way of creating a file blocked, so a regression cannot
    replace the system's (as root it could)."""
    blocked = lambda *a, **k: pytest.fail("tried to create a file beside a device node")  # noqa: E731
    monkeypatch.setattr(files.tempfile, "mkstemp", blocked)
    monkeypatch.setattr(files.tempfile, "NamedTemporaryFile", blocked)
    monkeypatch.setattr(files.os, "replace", blocked)
    with pytest.raises(OutputPathError, match=r"^--out: /dev/null is a character device, not a regular file"):
        check_output("/dev/null", "--out", force=True)
    with pytest.raises(OutputPathError, match=r"^cannot replace /dev/null: it is a character device"):
        write_atomic("/dev/null", lambda file: file.write(b"x"))


def test_a_symbolic_link_is_neither_followed_nor_replaced(tmp_path):
    target = tmp_path / "target.json"
    target.write_text("kept")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(OutputPathError, match="is a symbolic link, not a regular file"):
        check_output(link, "--out", force=True)
    with pytest.raises(OutputPathError, match="it is a symbolic link"):
        write_json_atomic(link, {"a": 1})
    assert link.is_symlink() and target.read_text() == "kept"


def test_a_regular_file_is_still_replaced_with_force(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("old")
    with pytest.raises(OutputPathError, match="exists; pass --force to replace it"):
        check_output(out, "--out")
    assert check_output(out, "--out", force=True) == out
    write_json_atomic(out, {"a": [1, 2]})
    assert json.loads(out.read_text()) == {"a": [1, 2]}


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_files_get_the_users_umask_not_0600(tmp_path, umask):
    previous = os.umask(umask)
    try:
        assert files.current_umask() == umask
        path = write_atomic(tmp_path / "new.bin", lambda file: file.write(b"x"))
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_a_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / "kept_mode.json"
    path.write_text("{}")
    path.chmod(0o640)
    write_json_atomic(path, {"b": 2})
    assert stat.S_IMODE(path.stat().st_mode) == 0o640 and json.loads(path.read_text()) == {"b": 2}


STANDALONE_SCRIPTS = ("gpu_bundle_warp.py", "gpu_check_stub.py")
"""Scripts that import none of the package by design: the GPU bundle's build (it runs before the
package is installed) and the GPU check's stand-in programs (standard library only, to start fast)."""


def test_write_json_atomic_is_the_one_json_writer():
    """No module or script of the project writes JSON another way (issue 35)."""
    offenders = []
    for folder in ("unilab_gpu", "scripts"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path.name in ("files.py", *STANDALONE_SCRIPTS):
                continue
            name = str(path.relative_to(REPO_ROOT))
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                writes = any(call in line for call in ("write_text(", "write_atomic(", ".write("))
                if "json.dump(" in line or ("json.dumps(" in line and writes):
                    offenders.append(f"{name}:{number}")
                if "def write_json_atomic" in line:
                    offenders.append(f"{name}:{number} (a second write_json_atomic)")
    assert offenders == []


def test_portable_paths_names_files_relative_to_the_checkout():
    shared = REPO_ROOT.parent / "shared" / "motions" / "clip.npz"
    report = {
        "mjcf": str(REPO_ROOT / "assets" / "robots" / "g1" / "scene.xml"),
        "overrides": [f"commands.motion.params.motion_files=[{shared}]"],
        "elsewhere": "/opt/data/clip.npz",
        "number": 1.5,
    }
    assert portable_paths(report) == {
        "mjcf": "assets/robots/g1/scene.xml",
        "overrides": ["commands.motion.params.motion_files=[../shared/motions/clip.npz]"],
        "elsewhere": "/opt/data/clip.npz",
        "number": 1.5,
    }


def test_committed_reports_name_no_absolute_path_of_this_machine():
    machine_paths = (str(REPO_ROOT) + os.sep, str(REPO_ROOT.parent) + os.sep)
    found = [
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "docs" / "benchmarks").rglob("*.json")
        if any(prefix in path.read_text() for prefix in machine_paths)
    ]
    assert found == []


class _FullDisk(io.RawIOBase):
    """A file that takes ``room`` bytes, then fails every write with ENOSPC (a disk filling up)."""

    def __init__(self, fd: int, room: int) -> None:
        self.fd, self.room, self.written = fd, room, 0

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        if self.written + len(data) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.written += len(data)
        return len(data)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


def fill_disk_after(monkeypatch, room: int, names: tuple[str, ...] = ("checkpoint.pt",), skip: int = 0) -> None:
    """Atomic writes of files named ``names`` fail with ENOSPC after ``room`` bytes, the first
    ``skip`` of them excepted (buffered, as a real file is, so ``torch.save`` meets the failure
    inside its zip writer and raises its own ``RuntimeError``)."""
    real_fdopen = os.fdopen
    passed = [0]

    def fdopen(fd, mode="r", *args, **kwargs):
        target = os.readlink(f"/proc/self/fd/{fd}")
        if any(f"/.{name}." in target for name in names):
            passed[0] += 1
            if passed[0] > skip:
                return io.BufferedWriter(_FullDisk(fd, room))
        return real_fdopen(fd, mode, *args, **kwargs)

    monkeypatch.setattr(files.os, "fdopen", fdopen)


def test_full_disk_in_torch_save_is_an_os_error_naming_the_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "checkpoint.pt", {"weights": torch.ones(3)})
    fill_disk_after(monkeypatch, room=1000)
    with pytest.raises(OSError, match="No space left on device") as caught:
        save_checkpoint(path, {"weights": torch.zeros(10**6)})
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(path)
    monkeypatch.undo()
    assert torch.equal(load_checkpoint(path)["weights"], torch.ones(3))  # the previous one is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt"]


def test_full_disk_mid_training_is_one_line_keeping_the_last_checkpoint(tmp_path, capsys, monkeypatch):
    from test_cli_train import TINY

    from unilab_gpu.cli.train import main
    from unilab_gpu.training.run_folder import resume_command

    run_dir = tmp_path / "run"
    fill_disk_after(monkeypatch, room=4096, skip=2)  # the iteration-0 and iteration-1 checkpoints are written
    assert main([*TINY, "total_env_steps=400", "checkpoint_every=1", f"run_dir={run_dir}"]) == 1
    err = capsys.readouterr().err
    assert f"cannot save a checkpoint in {run_dir}: No space left on device" in err, err
    assert "Traceback" not in err and "RuntimeError" not in err and "(iteration 1)" in err
    assert f"continue with: {resume_command(run_dir)}" in err
    monkeypatch.undo()
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == 1


def test_full_disk_during_export_is_one_line_and_keeps_the_old_file(tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnx")
    from test_cli_train import TINY

    from unilab_gpu.cli.export import main as export_main
    from unilab_gpu.cli.train import main

    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}", "export_onnx=false"]) == 0
    out = tmp_path / "policy.onnx"
    out.write_bytes(b"old policy")
    capsys.readouterr()
    fill_disk_after(monkeypatch, room=100, names=("policy.onnx",))
    assert export_main([str(run_dir), "--out", str(out), "--force"]) == 1
    err = capsys.readouterr().err
    assert err == f"unilab-export: error: cannot write {out}: No space left on device; nothing was written\n"
    assert out.read_bytes() == b"old policy" and sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx", "run"]


def test_sim2sim_report_names_the_checkout_s_files_relative_to_it(tmp_path) -> None:
    pytest.importorskip("onnxruntime")
    from unilab_gpu.cli.sim2sim import main as sim2sim_main

    policy = REPO_ROOT / "docs" / "policies" / "go2_velocity_sac.onnx"
    out = tmp_path / "report.json"
    assert sim2sim_main([str(policy), "--command", "0.5,0,0", "--seconds", "0.1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["policy"] == "docs/policies/go2_velocity_sac.onnx"
    assert report["mjcf"] == "assets/robots/go2/scene.xml"


def test_an_exclusive_write_keeps_a_file_that_appeared_meanwhile(tmp_path):
    path = tmp_path / "report.json"

    def other_run_finishes_first(file):
        file.write(b"mine")
        path.write_bytes(b"theirs")  # another run's rename lands while this one writes

    with pytest.raises(files.OutputExistsError, match="was written by another run meanwhile; it is kept"):
        write_atomic(path, other_run_finishes_first, exclusive=True)
    assert path.read_bytes() == b"theirs" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    write_atomic(tmp_path / "new.json", lambda file: file.write(b"new"), exclusive=True)
    assert (tmp_path / "new.json").read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.json", "report.json"]  # no temporary file left


def _another_run_writes(path: Path, monkeypatch, module, name: str) -> None:
    """``module.name`` (called after the output check, before the write) first writes ``path`` as a
    concurrent run with the same ``--out`` would."""
    real = getattr(module, name)

    def meanwhile(*args, **kwargs):
        path.write_text("the other run's report")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, meanwhile)


def test_concurrent_sim2sim_and_eval_runs_never_replace_each_others_out(tmp_path, capsys, monkeypatch) -> None:
    pytest.importorskip("onnxruntime")
    from unilab_gpu.cli import eval as eval_cli
    from unilab_gpu.cli import sim2sim as sim2sim_cli

    policy = REPO_ROOT / "docs" / "policies" / "go2_velocity_sac.onnx"
    out = tmp_path / "nf.json"
    _another_run_writes(out, monkeypatch, sim2sim_cli, "_print")
    assert sim2sim_cli.main([str(policy), "--command", "0.5,0,0", "--seconds", "0.1", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out: " in err and "written by another run meanwhile" in err, err
    assert out.read_text() == "the other run's report"
    out.unlink()
    _another_run_writes(out, monkeypatch, eval_cli, "machine_info")
    argv = ["--onnx", str(policy), "--terrain", "slopes_stairs_eval", "--seconds", "0.1", "--rows-per-column", "1"]
    assert eval_cli.main([*argv, "--device", "cpu", "--out", str(out)]) == 1
    err = capsys.readouterr().err  # the progress bar's line, then the error's
    assert "Traceback" not in err and "written by another run meanwhile" in err.splitlines()[-1], err
    assert out.read_text() == "the other run's report"
    # --force: the report replaces the file, as asked
    assert eval_cli.main([*argv, "--device", "cpu", "--out", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["benchmark"] == "terrain_evaluation"


def test_a_second_export_to_one_out_fails_in_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnx")
    from test_cli_train import TINY

    from unilab_gpu.cli.export import main as export_main
    from unilab_gpu.cli.train import main
    from unilab_gpu.export import export_run

    run_dir = tmp_path / "run"
    assert main([*TINY, "total_env_steps=8", f"run_dir={run_dir}", "export_onnx=false"]) == 0
    out = tmp_path / "policy.onnx"
    capsys.readouterr()
    _another_run_writes(out, monkeypatch, export_run, "deployment_metadata")
    assert export_main([str(run_dir), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "written by another run meanwhile" in err, err
    assert out.read_text() == "the other run's report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.onnx", "run"]
