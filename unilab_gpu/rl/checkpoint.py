"""Checkpoint files: written atomically, read back with an error that names the file.

A checkpoint is one ``torch.save`` dictionary (tensors, numbers, strings, nested dicts and
lists only, so it loads with ``weights_only=True`` and never runs pickled code). It is written
to a temporary file in the target's folder and moved over the target with ``os.replace``,
which is atomic on POSIX and Windows: a crash or Ctrl-C while saving leaves the previous
checkpoint intact, never a half-written one.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import torch

FORMAT_VERSION = 1
"""Stored under ``"format_version"``; bumped when the layout of the dictionary changes."""

CHECKPOINT_NAME = "checkpoint.pt"
"""File name of a run's latest checkpoint inside its run folder."""


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, unreadable, corrupt or of another format version."""


TEMP_SUFFIX = ".tmp"
"""Suffix of the temporary files of atomic writes (``.<name>.<random>.tmp`` beside the target)."""


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus ``format_version``) to ``path`` atomically; returns the path."""
    return write_atomic(path, lambda file: torch.save({"format_version": FORMAT_VERSION, **payload}, file))


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


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """``path`` itself if it is a file, else ``path/checkpoint.pt`` (a run folder)."""
    path = Path(path)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def load_checkpoint(path: str | os.PathLike, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Read a checkpoint file or a run folder's latest checkpoint.

    Raises:
        CheckpointError: the file is missing, is not a readable checkpoint (truncated, corrupt,
            not a ``torch.save`` file) or has another format version; the message names it.
    """
    file = resolve_checkpoint(path)
    if not file.is_file():
        raise CheckpointError(f"checkpoint not found: {file}")
    try:
        payload = torch.load(file, map_location=map_location, weights_only=True)
    except Exception as error:  # torch.load raises several types for damaged files
        reason = " ".join(str(error).split())[:200]
        raise CheckpointError(
            f"checkpoint {file} is corrupt or not a checkpoint: {type(error).__name__}: {reason}"
        ) from None
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        found = payload.get("format_version") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {file}: expected format_version {FORMAT_VERSION}, found {found!r}")
    return payload
