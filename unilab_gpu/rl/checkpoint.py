"""Checkpoint files: written atomically, read back with an error that names the file.

A checkpoint is one ``torch.save`` dictionary (tensors, numbers, strings, nested dicts and
lists only, so it loads with ``weights_only=True`` and never runs pickled code). It is written
to a temporary file in the target's folder and moved over the target with ``os.replace``,
which is atomic on POSIX and Windows: a crash or Ctrl-C while saving leaves the previous
checkpoint intact, never a half-written one.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.utils.files import CHECKPOINT_NAME, write_atomic

FORMAT_VERSION = 1
"""Stored under ``"format_version"``; bumped when the layout of the dictionary changes."""


ZIP_MAGIC = b"PK\x03\x04"
"""First bytes of every file ``torch.save`` writes (a zip archive)."""


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, unreadable, corrupt or of another format version."""


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus ``format_version``) to ``path`` atomically; returns the path.

    Raises:
        OSError: the file could not be written (a full disk, a read-only folder); the previous
            file at ``path`` is intact. ``torch.save`` re-raises a failed write of the file as a
            ``RuntimeError`` of its zip writer; the ``OSError`` behind it is raised instead.
    """
    try:
        return write_atomic(path, lambda file: torch.save({"format_version": FORMAT_VERSION, **payload}, file))
    except RuntimeError as error:
        cause = _os_error_behind(error)
        if cause is None:
            raise
        if cause.filename is None:
            cause.filename = str(path)
        raise cause from None


def _os_error_behind(error: BaseException) -> OSError | None:
    """The first ``OSError`` in ``error``'s chain of causes and contexts, or ``None``."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        if isinstance(found, OSError):
            return found
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return None


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
    with open(file, "rb") as opened:
        head = opened.read(len(ZIP_MAGIC))
    if head != ZIP_MAGIC:  # torch.load would try it as a legacy pickle and blame "a Python object"
        raise CheckpointError(
            f"checkpoint {file} is corrupt or not a checkpoint: it is not a torch.save archive (a zip file; "
            f"it starts with {head!r})"
        )
    try:
        payload = torch.load(file, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL (\S+)", str(error))
        if found is None:  # damaged bytes, not a named object
            reason = " ".join(str(error).split())[:200]
            raise CheckpointError(f"checkpoint {file} is corrupt or not a checkpoint: {reason}") from None
        raise CheckpointError(  # it names a Python object: refused, never loaded
            f"checkpoint {file} holds a Python object ({found[1]}) that no unilab-gpu checkpoint contains (they "
            "hold tensors, numbers, strings and containers only); it was refused without running any of its code"
        ) from None
    except Exception as error:  # torch.load raises several types for damaged files
        reason = " ".join(str(error).split())[:200]
        raise CheckpointError(
            f"checkpoint {file} is corrupt or not a checkpoint: {type(error).__name__}: {reason}"
        ) from None
    if not isinstance(payload, dict) or payload.get("format_version") != FORMAT_VERSION:
        version = payload.get("format_version") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {file}: expected format_version {FORMAT_VERSION}, found {version!r}")
    return payload


class NonFiniteStateError(RuntimeError):
    """Training produced NaN or inf losses, Q-values or agent state; it was neither saved nor exported."""


NAMED_ENTRIES = 3
"""Non-finite tensors named in a message at most (the rest are counted)."""


def non_finite_entries(tree: Any, prefix: str = "") -> list[str]:
    """Dotted key paths of the floating-point tensors in ``tree`` (nested dicts, lists and tuples
    of tensors, e.g. an agent's ``state_dict()``) that hold a NaN or an inf. Reads every tensor
    back to the host: for saves, loads and exports, never for a step."""
    return [path for path, tensor in _float_tensors(tree, prefix) if not bool(torch.isfinite(tensor).all())]


def describe_entries(paths: list[str]) -> str:
    """``a, b, c (+2 more)`` for at most :data:`NAMED_ENTRIES` names."""
    more = f" (+{len(paths) - NAMED_ENTRIES} more)" if len(paths) > NAMED_ENTRIES else ""
    return ", ".join(paths[:NAMED_ENTRIES]) + more


def _float_tensors(tree: Any, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(tree, torch.Tensor):
        if tree.is_floating_point():
            yield prefix, tree
    elif isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from _float_tensors(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(tree, list | tuple):
        for i, value in enumerate(tree):
            yield from _float_tensors(value, f"{prefix}[{i}]")
