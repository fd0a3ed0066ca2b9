"""Checkpoint files: written atomically, read back with an error that names the file.

A checkpoint is one ``torch.save`` dictionary (tensors, numbers, strings, nested dicts and
lists only, so it loads with ``weights_only=True`` and never runs pickled code). It is written
to a temporary file in the target's folder and moved over the target with ``os.replace``,
which is atomic on POSIX and Windows: a crash or Ctrl-C while saving leaves the previous
checkpoint intact, never a half-written one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pickle
import re
import shlex
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from unilab_gpu import __version__
from unilab_gpu.utils.files import (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    LOCK_NAME,
    holds_run,
    remove_temp_files,
    write_atomic,
)
from unilab_gpu.utils.yaml_files import YamlFileError, load_bounded_yaml

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
        found = payload.get("format_version") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"checkpoint {file}: expected format_version {FORMAT_VERSION}, found {found!r}")
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


# ================================================================================================
# Run folders: created whole or not at all, never shared by two runs, locked while in use.
#
# A new run folder is assembled under a hidden staging name beside its target (``config.yaml``
# and the iteration-0 checkpoint written, the lock taken) and then renamed into place. A rename
# onto a folder that is not empty fails, so a new run can never write into a folder that holds
# another run, two trainers racing for one folder cannot both win, and a start that fails or is
# killed leaves no half-made run folder under the target name.
#
# A trainer holds an exclusive ``flock`` on ``trainer.lock`` in its run folder for as long as it
# runs. The kernel drops the lock when the process dies, however it dies, so a lock file that
# still names a process but is not locked is stale: it is reported and taken over. POSIX only
# (``fcntl``), like the rest of the training stack.

STAGING_SUFFIX = ".staging"
"""Suffix of the hidden folder a new run is assembled in before it is renamed into place."""


class RunFolderError(RuntimeError):
    """A run folder cannot be used: it holds another run, is locked, or is not a run folder."""


def resume_command(run_dir: str | os.PathLike) -> str:
    """``unilab-train resume=<run_dir>``, quoted for a POSIX shell."""
    return f"unilab-train {shlex.quote(f'resume={run_dir}')}"


class RunLock:
    """Exclusive lock on ``<run_dir>/trainer.lock``; see the module docstring.

    Attributes:
        stale_owner: ``"<pid> <host>"`` of a previous holder that died without releasing the
            lock, or ``None``.

    Raises:
        RunFolderError: another live process holds the lock (the message names its pid).
    """

    def __init__(self, run_dir: Path) -> None:
        path = run_dir / LOCK_NAME
        self._fd: int | None = _open_lock_file(path)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            owner = _read(self._fd) or "unknown"
            os.close(self._fd)  # not ours: the holder's lock file is left as it is
            self._fd = None
            if error.errno in (errno.EAGAIN, errno.EACCES):
                raise RunFolderError(
                    f"run folder {run_dir} is in use by another trainer (pid, host: {owner}); "
                    "wait for it to finish or stop it first"
                ) from None
            raise
        self.stale_owner = _read(self._fd) or None
        os.ftruncate(self._fd, 0)  # only now that the lock is held
        os.pwrite(self._fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)

    def release(self) -> None:
        """Empty the lock file (a clean exit leaves no stale owner) and drop the lock."""
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            os.close(self._fd)  # closing the last descriptor releases the flock
            self._fd = None


def _open_lock_file(path: Path) -> int:
    """A descriptor of the lock file at ``path`` (created if absent), which must be a regular file
    with no other name: never a symbolic or hard link to a file the lock would truncate."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RunFolderError(
                f"lock file {path} is a symbolic link; a run folder's lock must be a plain file (remove the link)"
            ) from None
        raise RunFolderError(f"cannot open the lock file {path}: {error.strerror or error}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "has other names (hard links)" if stat.S_ISREG(info.st_mode) else "is not a regular file"
        raise RunFolderError(f"lock file {path} {what}; a run folder's lock must be a plain file (remove it)")
    return fd


def _read(fd: int) -> str:
    return os.pread(fd, 256, 0).decode(errors="replace").strip()


def open_run_folder(run_dir: Path) -> tuple[RunLock, list[str]]:
    """Lock an existing run folder for a resumed run and clear leftovers of killed writes.

    Returns the lock and the notes to show the user (a stale lock, removed temporary files).

    Raises:
        RunFolderError: ``run_dir`` is not a run folder or another trainer uses it.
    """
    if not run_dir.is_dir() or not holds_run(run_dir):
        raise RunFolderError(f"resume: {run_dir} is not a run folder (no {CONFIG_NAME} or {CHECKPOINT_NAME} in it)")
    for name in (CONFIG_NAME, CHECKPOINT_NAME):  # rewritten by the run: never through a link
        path = run_dir / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            what = "a symbolic link" if path.is_symlink() else "not a regular file"
            raise RunFolderError(f"resume: {path} is {what}; a run folder's files must be plain files")
    lock = RunLock(run_dir)
    notes = []
    if lock.stale_owner is not None:
        notes.append(f"took over the stale lock of a trainer that is no longer running ({lock.stale_owner})")
    removed = remove_temp_files(run_dir)
    if removed:
        notes.append(f"removed {len(removed)} leftover temporary file(s) of an interrupted save")
    return lock, notes


RUN_CONFIG_MAX_BYTES = 1 << 20
"""Largest ``config.yaml`` read from a run folder (a run writes a few kB)."""

RUN_CONFIG_MAX_VALUES = 100_000
"""Most values (keys, values and list items) a run's ``config.yaml`` may hold once every YAML alias
is followed (a run writes a few hundred, and no aliases)."""


def load_run_config(path: Path) -> DictConfig:
    """A run folder's ``config.yaml``, read with :func:`~unilab_gpu.utils.yaml_files.load_bounded_yaml`:
    run folders are trusted input, but reading one must not hang or run code.

    Raises:
        RunFolderError: the file is too large, not UTF-8 YAML, a bomb of aliases, recursive,
            tagged with a Python object or not a mapping; one line naming it.
    """
    try:
        return load_bounded_yaml(path, "a run's config.yaml", RUN_CONFIG_MAX_BYTES, RUN_CONFIG_MAX_VALUES)
    except YamlFileError as error:
        raise RunFolderError(str(error)) from None


def create_run_folder(target: Path, fill: Callable[[Path], None], *, numbered: bool) -> tuple[Path, RunLock]:
    """Create the run folder ``target`` holding what ``fill(folder)`` writes, atomically, locked.

    Args:
        target: the folder to create; it may exist only as an empty folder.
        fill: writes the run's first files (config, first checkpoint) into the folder it gets.
        numbered: ``target`` is a generated name: if it is taken, try ``<target>_1``, ``_2``, ...
            instead of failing.

    Returns:
        The folder created (``target`` or a numbered sibling) and its lock.

    Raises:
        RunFolderError: ``target`` holds something (a run: the message names ``resume=``).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if not numbered:
        _check_free(target)
    remove_stale_staging(target.parent)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=STAGING_SUFFIX, dir=target.parent))
    lock = None
    try:
        lock = RunLock(staging)
        fill(staging)
        path, suffix = target, 0
        while True:
            try:
                os.rename(staging, path)  # fails on a non-empty folder: nothing is ever overwritten
                return path, lock
            except OSError as error:
                if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR) or not numbered:
                    _check_free(path)
                    raise
            suffix += 1
            path = target.with_name(f"{target.name}_{suffix}")
    except BaseException:
        if lock is not None:
            lock.release()
        shutil.rmtree(staging, ignore_errors=True)
        raise


def remove_stale_staging(folder: Path) -> list[Path]:
    """Delete the staging folders in ``folder`` of run starts that were killed; returns them.

    A staging folder is one of ours if it holds a lock file, and abandoned if nobody holds the lock.
    """
    removed = []
    for path in folder.glob(f".*{STAGING_SUFFIX}"):
        if not (path / LOCK_NAME).is_file():
            continue
        try:
            RunLock(path).release()
        except RunFolderError:  # a start in progress
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _check_free(path: Path) -> None:
    """Raise unless ``path`` is absent or an empty folder."""
    if not path.exists():
        return
    if path.is_dir() and holds_run(path):
        raise RunFolderError(
            f"run folder {path} already holds a run; a new run never writes into it. "
            f"Continue that run with: {resume_command(path)} (or choose another run_dir)"
        )
    if not path.is_dir() or any(path.iterdir()):
        raise RunFolderError(f"run_dir {path} exists and is not an empty folder; choose a new or empty run_dir")


# ================================================================================================
# What a resumed run must share with its checkpoint, checked before anything is written.
#
# Two passes, both pure functions returning one line per mismatch: :func:`recorded_mismatches`
# compares the config with what the checkpoint records (cheap, before the env is built) and
# :func:`built_mismatches` compares the built env and agent with the checkpoint's sizes and
# tensor shapes. :func:`raise_on_mismatches` turns the lines into one error that says how to
# resume instead.

SHAPE_LINES = 4
"""Mismatched tensors listed by name at most (the rest are counted)."""


class ResumeError(ValueError):
    """A resume was refused because the config does not match the checkpoint; nothing was written."""


def recorded_mismatches(checkpoint: Mapping[str, Any], cfg: Mapping[str, Any], num_envs: int) -> list[str]:
    """Task, algorithm, ``num_envs``, algo keys and package version: checkpoint vs. ``cfg``.

    Args:
        checkpoint: a loaded run checkpoint (``config``, ``num_envs``, ``package_version``).
        cfg: the resolved config of the resumed run, as plain containers.
        num_envs: the number of envs the resumed run would use.
    """
    saved = checkpoint.get("config") or {}
    saved_algo, algo = saved.get("algo") or {}, cfg.get("algo") or {}
    lines = []
    for name, before, now in (
        ("task", saved.get("task"), cfg.get("task")),
        ("algo", saved_algo.get("name"), algo.get("name")),
        ("env.num_envs", checkpoint.get("num_envs"), num_envs),
        ("package version", checkpoint.get("package_version"), __version__),
    ):
        if before != now:
            lines.append(f"{name}: checkpoint {before!r}, now {now!r}")
    if saved_algo.get("name") == algo.get("name"):
        # Keys that only steer training (batch size, learning rate...) may change; they are
        # listed so that a network-shape mismatch below can be traced to the key behind it.
        changed = sorted(k for k in set(saved_algo) | set(algo) if saved_algo.get(k) != algo.get(k))
        lines += [f"algo.{k}: checkpoint {saved_algo.get(k)!r}, now {algo.get(k)!r}" for k in changed if k != "compile"]
    return lines


def built_mismatches(
    checkpoint: Mapping[str, Any],
    observation_dims: Mapping[str, int],
    action_dim: int,
    agent_state: Mapping[str, Any],
) -> list[str]:
    """Observation and action sizes and network tensor shapes: checkpoint vs. the built run."""
    lines = []
    saved_dims = dict(checkpoint.get("observation_dims") or {})
    if saved_dims != dict(observation_dims):
        lines.append(f"observation sizes: checkpoint {saved_dims}, now {dict(observation_dims)}")
    if checkpoint.get("action_dim") != action_dim:
        lines.append(f"action size: checkpoint {checkpoint.get('action_dim')}, now {action_dim}")
    saved_modules = checkpoint.get("trainer", {}).get("agent", {}).get("modules", {})
    shapes = []
    for module, state in agent_state["modules"].items():
        saved = saved_modules.get(module, {})
        for key in sorted(set(state) | set(saved)):
            before, now = _shape(saved.get(key)), _shape(state.get(key))
            if before != now:
                shapes.append(f"{module}.{key} checkpoint {before}, now {now}")
    if shapes:
        more = f" (+{len(shapes) - SHAPE_LINES} more)" if len(shapes) > SHAPE_LINES else ""
        lines.append(f"network shapes: {len(shapes)} tensors differ: {'; '.join(shapes[:SHAPE_LINES])}{more}")
    return lines


def raise_on_mismatches(run_dir: str, lines: list[str]) -> None:
    """Raise :class:`ResumeError` listing ``lines`` (one per mismatch) if there are any."""
    changed = [line for line in lines if not line.startswith("algo.")]
    if not changed:
        return  # only training keys changed: a valid resume
    listing = "\n".join(f"  - {line}" for line in lines)
    raise ResumeError(
        f"resume of {run_dir} refused, nothing was written; the config does not match the checkpoint:\n"
        f"{listing}\n"
        f"Resume with the run's own settings ({resume_command(run_dir)}, plus overrides of training keys "
        "such as total_env_steps only), or start a new run without resume= to use the new settings."
    )


def _shape(value: Any) -> tuple[int, ...] | str | None:
    if isinstance(value, torch.Tensor):
        return tuple(value.shape)
    return None if value is None else type(value).__name__
