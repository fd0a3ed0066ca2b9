"""Run folders: created whole or not at all, never shared by two runs, locked while in use.

A new run folder is assembled under a hidden staging name beside its target (``config.yaml``
and the iteration-0 checkpoint written, the lock taken) and then renamed into place. A rename
onto a folder that is not empty fails, so a new run can never write into a folder that holds
another run, two trainers racing for one folder cannot both win, and a start that fails or is
killed leaves no half-made run folder under the target name.

A trainer holds an exclusive ``flock`` on ``trainer.lock`` in its run folder for as long as it
runs. The kernel drops the lock when the process dies, however it dies, so a lock file that
still names a process but is not locked is stale: it is reported and taken over. POSIX only
(``fcntl``), like the rest of the training stack.

A resumed run reads the folder's ``config.yaml`` back bounded (:func:`load_run_config`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import shlex
import shutil
import socket
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

from unilab_gpu.utils.files import CHECKPOINT_NAME, CONFIG_NAME, LOCK_NAME, holds_run, remove_temp_files
from unilab_gpu.utils.yaml_files import YamlFileError, load_bounded_yaml

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
