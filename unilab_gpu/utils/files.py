"""Files the project writes: atomically, and never over an input or a run folder's own files.

Every file a command or the trainer writes (checkpoints, configs, motion clips, ONNX policies,
videos, benchmark reports, plots) goes through :func:`write_atomic`: the bytes go to a temporary
file beside the target, are fsynced, and the temporary file is renamed over the target with
``os.replace`` (atomic on POSIX and Windows). A crash, a full disk or Ctrl-C while writing leaves
the previous file intact, never a truncated one.

Commands check their output paths with :func:`check_output` before doing any work: an existing
file needs ``--force``, and no output ever replaces the command's own input or a file training
writes into a run folder (:data:`RUN_FILES`: checkpoint, config, lock, scene, event files...),
whatever the flags. ``--force`` replaces regular files only: a
folder, a symbolic link, a FIFO, a device node or a socket at an output path is refused, by
:func:`check_output` and again by :func:`write_atomic` itself, right before its rename.

Without ``--force`` a command writes its output with ``exclusive=True``: the finished file is
linked into place only if nothing is there yet (``os.link`` fails on an existing name, atomically),
so of two runs started together with one ``--out`` the first to finish keeps its file and the
second fails with :class:`OutputExistsError` instead of silently replacing it.

A written file gets the permissions a plain ``open(path, "w")`` would give it: an existing file's
mode is kept, a new one gets ``0o666`` less the user's umask (not ``mkstemp``'s ``0o600``).
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, BinaryIO

TEMP_SUFFIX = ".tmp"
"""Suffix of the temporary files of atomic writes (``.<name>.<random>.tmp`` beside the target)."""

CHECKPOINT_NAME = "checkpoint.pt"
"""File name of a run's latest checkpoint inside its run folder."""

CONFIG_NAME = "config.yaml"
"""Resolved config of a run, inside its run folder."""

SCENE_NAME = "scene.xml"
"""The MuJoCo scene of a run on a generated terrain, inside its run folder (``training.run.write_scene``)."""

LOCK_NAME = "trainer.lock"
"""Lock file of the trainer using a run folder (holds ``<pid> <host>`` while locked)."""

POLICY_NAME = "policy.onnx"
"""The policy a run exports at its end, inside its run folder (``export.onnx_policy.POLICY_FILE``)."""

RUN_FILES = (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    LOCK_NAME,
    SCENE_NAME,
    POLICY_NAME,
    "config.until_*.yaml",
    "events.out.tfevents.*",
    f".*{TEMP_SUFFIX}",
)
"""The files training writes into a run folder (``fnmatch`` patterns): its checkpoint, config, lock,
scene, exported policy, the configs kept by a changed resume (``config.until_<env steps>.yaml``),
TensorBoard's event files and the temporary files of atomic writes. No command's output replaces
one of them (:func:`check_output`), ``--force`` or not; ``unilab-export`` alone rewrites the policy."""


class OutputPathError(ValueError):
    """An output path a command must not write; the message names the option and the path."""


class OutputExistsError(OutputPathError):
    """An exclusive write found its target taken: another run wrote it while this one worked."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} was written by another run meanwhile; it is kept, pass --force to replace it")
        self.filename = str(path)


def write_atomic(path: str | os.PathLike, write: Callable[[BinaryIO], object], *, exclusive: bool = False) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, fsync it and move it over ``path``.

    A reader (or a process killed mid-write) sees the old file or the new one, never a mix; the
    temporary file is removed on any exception, and :func:`remove_temp_files` clears the ones a
    ``kill -9`` left behind. The new file keeps the mode of the file it replaces, or gets the
    umask's default. With ``exclusive`` the file is put in place only if ``path`` does not exist
    at that moment (a command without ``--force``).

    Raises:
        OutputExistsError: ``exclusive`` and a file appeared at ``path`` meanwhile; it is kept.
        OutputPathError: something other than a regular file is at ``path`` (a folder, a link,
            a FIFO, a device); nothing is written.
        OSError: the file could not be written (full disk, read-only folder), with ``filename``
            ``path``; the previous file is intact.
    """
    path = Path(path)
    _refuse_non_regular(path, "cannot replace")
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _file_mode(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        _refuse_non_regular(path, "cannot replace")  # again: it may have appeared while writing
        if exclusive:
            _link_new(tmp, path)
        else:
            os.replace(tmp, path)
    except BaseException as error:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError) and error.filename is None:
            error.filename = str(path)  # a failed write names the file it was for
        raise
    return path


def _link_new(tmp: str, path: Path) -> None:
    """Put the finished file ``tmp`` at ``path`` only if nothing is there; ``tmp`` is gone after."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputExistsError(path) from None
    except OSError as error:
        if error.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        # no hard links on this file system: reserve the name exclusively, then rename over the reservation
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            raise OutputExistsError(path) from None
        os.replace(tmp, path)
        return
    os.unlink(tmp)


def write_error(error: OSError | OutputPathError) -> str:
    """One line for a failed write: the file and why (a full disk, a file another run wrote)."""
    if isinstance(error, OutputPathError):
        return str(error)
    return f"cannot write {error.filename}: {error.strerror or error}"


def write_json_atomic(path: str | os.PathLike, obj: Any, *, exclusive: bool = False) -> Path:
    """Write ``obj`` as indented JSON (values JSON cannot hold as their ``str()``) through
    :func:`write_atomic`, so a reader never sees a half-written report; returns the path."""
    text = json.dumps(obj, indent=2, default=str) + "\n"
    return write_atomic(path, lambda file: file.write(text.encode()), exclusive=exclusive)


def non_regular_kind(path: Path) -> str | None:
    """What is at ``path`` if it is something other than a regular file (``"a FIFO"``, ``"a
    symbolic link"``...); ``None`` if it is a regular file or nothing. Links are not followed."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:  # nothing there (or nothing reachable: :func:`unwritable` says why)
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _refuse_non_regular(path: Path, doing: str) -> None:
    kind = non_regular_kind(path)
    if kind is not None:
        raise OutputPathError(f"{doing} {path}: it is {kind}; only regular files are ever replaced (--force included)")


def _file_mode(path: Path) -> int:
    """Permission bits for the file written at ``path``: those of the file it replaces, else
    ``0o666`` less the umask (what ``open(path, "w")`` would create)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """This process's umask, read without changing it where Linux shows it (``/proc/self/status``);
    elsewhere set and restored at once."""
    try:
        found = re.search(r"^Umask:\s*([0-7]+)$", Path("/proc/self/status").read_text(), re.MULTILINE)
    except OSError:
        found = None
    if found:
        return int(found[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


REPO_ROOT = Path(__file__).resolve().parents[2]
"""The source checkout this package runs from (for an installed wheel: ``site-packages``)."""

_ABSOLUTE_PREFIXES = [(str(REPO_ROOT) + os.sep, ""), (str(REPO_ROOT.parent) + os.sep, ".." + os.sep)]


def portable_paths(value: Any) -> Any:
    """``value`` (nested dicts, lists, strings) with every absolute path inside the checkout or beside
    it written relative to the checkout: ``/x/repo/assets/a.xml`` -> ``assets/a.xml``,
    ``/x/shared/clip.npz`` -> ``../shared/clip.npz``. For reports committed to the repository,
    which must name no path of the machine that wrote them."""
    if isinstance(value, str):
        for prefix, replacement in _ABSOLUTE_PREFIXES:
            if len(prefix) > 1:  # never the file system's root
                value = re.sub(rf"(?<![\w.~/-]){re.escape(prefix)}", replacement, value)
        return value
    if isinstance(value, dict):
        return {key: portable_paths(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable_paths(item) for item in value]
    return value


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


def is_run_file(path: Path) -> bool:
    """Whether ``path`` names a file training writes into a run folder (:data:`RUN_FILES`) in a folder
    that holds a run, whether or not the file exists yet."""
    return any(fnmatch.fnmatchcase(path.name, pattern) for pattern in RUN_FILES) and holds_run(path.parent)


def check_output(
    path: str | os.PathLike,
    option: str,
    *,
    force: bool = False,
    inputs: Iterable[str | os.PathLike] = (),
    example: str = "out",
    rewrites: str | None = None,
) -> Path:
    """``path`` as a :class:`~pathlib.Path` if a command may write its output there; call before any work.

    Args:
        option: how the user gave the path (``--out``, ``output``), named in the error.
        force: the user passed ``--force``: an existing file may be replaced.
        inputs: the files the command reads; the output may never be one of them.
        example: a file name for the hint when ``path`` is a folder.
        rewrites: the one file of :data:`RUN_FILES` this command exists to rewrite
            (``unilab-export``: :data:`POLICY_NAME`).

    Raises:
        OutputPathError: ``path`` is a folder, one of ``inputs``, a run folder's own file
            (:data:`RUN_FILES`, except ``rewrites``), not a regular file (a link, FIFO, device: never
            replaced, ``force`` or not), an existing file
            without ``force``, or in a place that cannot be written.
    """
    path = Path(path)
    if path.is_dir() and not path.is_symlink():
        raise OutputPathError(f"{option}: {path} is a folder; give a file path, e.g. {path / example}")
    for source in inputs:
        if _same_file(path, Path(source)):
            raise OutputPathError(f"{option}: {path} is this command's own input; write the output to another file")
    if path.name != rewrites and is_run_file(path):
        raise OutputPathError(
            f"{option}: {path} is the {path.name} of the run folder {path.parent}; no output ever replaces it "
            "(training writes it), --force or not: choose another file name"
        )
    kind = non_regular_kind(path)
    if kind is not None:
        raise OutputPathError(
            f"{option}: {path} is {kind}, not a regular file; --force replaces regular files only, give another path"
        )
    if path.exists() and not force:
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
