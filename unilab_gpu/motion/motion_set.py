"""Motion sets: the clips a task trains on, named by files, folders and globs, each with a weight."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from unilab_gpu.motion.validation import MotionFormatError, check_weights

MOTION_SUFFIXES = (".npz", ".csv")
"""File endings a folder or a glob contributes (the formats ``load_motion`` reads)."""

_GLOB_CHARACTERS = frozenset("*?[")


@dataclass(frozen=True)
class MotionSetClip:
    """One clip of a motion set: its file, a unique short name (for statistics) and its weight."""

    path: Path
    name: str
    weight: float


def resolve_motion_set(
    entries: Sequence[str],
    weights: Sequence[float] | None = None,
    *,
    key: str = "motion_files",
    weights_key: str = "motion_weights",
) -> list[MotionSetClip]:
    """The clips of a motion set, in a fixed order (entries in order, each expanded sorted by path).

    An entry is a file, a folder (every ``.npz`` / ``.csv`` directly inside it) or a glob
    (``clips/**/*.npz``; ``**`` crosses folders; only ``.npz`` / ``.csv`` matches count). A
    plain file path is passed on as it is (``load_motion`` reports a missing one). A weight per
    entry applies to every clip that entry yields: a clip is drawn ``weight`` times as often as
    with weight 1.

    Args:
        entries: the entries (a list: a bare string is refused rather than read letter by letter).
        weights: one weight > 0 per entry; ``None``: all 1.
        key, weights_key: the config keys, for messages.

    Raises:
        MotionFormatError: no entries, a string instead of a list, a folder without motion files, a
            glob that matches none, a file named twice, or weights of the wrong number or value; one
            line naming the key.
    """
    if isinstance(entries, str):
        raise MotionFormatError(
            f"{key} must be a list of paths, e.g. motion_files=[{entries}], got the string {entries!r}"
        )
    entries = list(entries)
    if not entries:
        raise MotionFormatError(f"'{key}' is empty; expected at least one motion file, folder or glob")
    per_entry = [1.0] * len(entries) if weights is None else check_weights(weights, len(entries), weights_key,
                                                                           f"{key} entry")  # fmt: skip
    paths: list[Path] = []
    clip_weights: list[float] = []
    first_entry: dict[Path, int] = {}
    for i, (entry, weight) in enumerate(zip(entries, per_entry, strict=True)):
        for path in _expand(str(entry), f"{key}[{i}]"):
            resolved = path.resolve()
            if resolved in first_entry:
                raise MotionFormatError(
                    f"'{key}' names {path} twice (entries {first_entry[resolved]} and {i}); expected each clip once "
                    f"(give it a larger '{weights_key}' entry to draw it more often)"
                )
            first_entry[resolved] = i
            paths.append(path)
            clip_weights.append(weight)
    return [MotionSetClip(p, n, w) for p, n, w in zip(paths, clip_names(paths), clip_weights, strict=True)]


def _expand(entry: str, key: str) -> list[Path]:
    path = Path(entry).expanduser()
    if _GLOB_CHARACTERS & set(entry):
        matches = sorted(glob.glob(str(path), recursive=True))
        found = [Path(m) for m in matches if Path(m).is_file() and Path(m).suffix.lower() in MOTION_SUFFIXES]
        if not found:
            raise MotionFormatError(
                f"'{key}' = '{entry}' matches no .npz or .csv file; expected a glob of motion files"
            )
        return found
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in MOTION_SUFFIXES)
        if not found:
            raise MotionFormatError(
                f"'{key}' = '{entry}' is a folder without .npz or .csv files; expected a folder of motion files"
            )
        return found
    return [path]


def clip_names(paths: Sequence[Path]) -> list[str]:
    """A short unique name per clip (``paths`` unique): the file name without its ending, or, where
    two files share one, the path relative to the folder all the files share (``walks/run`` and
    ``dances/run``; with its ending where only that tells them apart: ``run.npz``, ``run.csv``)."""
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    absolute = [os.path.abspath(p) for p in paths]
    common = os.path.commonpath([os.path.dirname(a) for a in absolute])
    relative = [Path(os.path.relpath(a, common)) for a in absolute]
    short = [r.with_suffix("").as_posix() for r in relative]
    return short if len(set(short)) == len(short) else [r.as_posix() for r in relative]
