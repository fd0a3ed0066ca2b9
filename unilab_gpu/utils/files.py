"""Files the project writes: atomically, and never over an input or a run folder's own files.

Every file a command or the trainer writes (checkpoints, configs, motion clips, ONNX policies,
videos, benchmark reports, plots) goes through :func:`write_atomic`: the bytes go to a temporary
file beside the target, are fsynced, and the temporary file is renamed over the target with
``os.replace`` (atomic on POSIX and Windows). A crash, a full disk or Ctrl-C while writing leaves
the previous file intact, never a truncated one.

Commands check their output paths with :func:`check_output` before doing any work: an existing
file needs ``--force``, and no output ever replaces the command's own input or a run folder's
checkpoint, config or lock, whatever the flags.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

TEMP_SUFFIX = ".tmp"
"""Suffix of the temporary files of atomic writes (``.<name>.<random>.tmp`` beside the target)."""

CHECKPOINT_NAME = "checkpoint.pt"
"""File name of a run's latest checkpoint inside its run folder."""

CONFIG_NAME = "config.yaml"
"""Resolved config of a run, inside its run folder."""

LOCK_NAME = "trainer.lock"
"""Lock file of the trainer using a run folder (holds ``<pid> <host>`` while locked)."""


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], object]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, fsync it and move it over ``path``.

    A reader (or a process killed mid-write) sees the old file or the new one, never a mix; the
    temporary file is removed on any exception, and :func:`remove_temp_files` clears the ones a
    ``kill -9`` left behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def remove_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files of interrupted atomic writes in ``folder``; returns them.

    Only call this while no other process writes to ``folder`` (e.g. holding its run lock).
    """
    removed = []
    for path in Path(folder).glob(f".*{TEMP_SUFFIX}"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return sorted(removed)


def holds_run(path: Path) -> bool:
    """Whether ``path`` is a run folder (it has a ``config.yaml`` or a checkpoint)."""
    return (path / CONFIG_NAME).exists() or (path / CHECKPOINT_NAME).exists()


class OutputPathError(ValueError):
    """An output path a command must not write; the message names the option and the path."""


def check_output(
    path: str | os.PathLike,
    option: str,
    *,
    force: bool = False,
    inputs: Iterable[str | os.PathLike] = (),
    example: str = "out",
) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a command may write its output there; call before any work.

    Args:
        option: how the user gave the path (``--out``, ``output``), named in the error.
        force: the user passed ``--force``: an existing file may be replaced.
        inputs: the files the command reads; the output may never be one of them.
        example: a file name for the hint when ``path`` is a folder.

    Raises:
        OutputPathError: ``path`` is a folder, one of ``inputs``, a run folder's own file, an
            existing file without ``force``, or in a place that cannot be written.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"{option}: {path} is a folder; give a file path, e.g. {path / example}")
    for source in inputs:
        if _same_file(path, Path(source)):
            raise OutputPathError(f"{option}: {path} is this command's own input; write the output to another file")
    if path.name in (CHECKPOINT_NAME, CONFIG_NAME, LOCK_NAME) and holds_run(path.parent):
        raise OutputPathError(
            f"{option}: {path} is the {path.name} of the run folder {path.parent}; no output ever replaces it, "
            "choose another file name"
        )
    if (path.exists() or path.is_symlink()) and not force:
        raise OutputPathError(f"{option}: {path} exists; pass --force to replace it")
    problem = unwritable(path)
    if problem is not None:
        raise OutputPathError(f"{option}: cannot write {path}: {problem}")
    return path


def unwritable(path: Path) -> str | None:
    """Why a file cannot be created at ``path``, or ``None``; creates nothing (a temporary probe
    file in the nearest existing folder on the way to ``path`` is removed again)."""
    if path.is_dir():
        return "it is a folder"
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is a file, not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{path.name}.", suffix=".probe"):
            pass
    except OSError as error:
        return error.strerror or str(error)
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False
