"""Match the joint and body names of a motion file to the robot model's (cold path)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np

from unilab_gpu.motion.validation import MotionFormatError


def _with_hints(names: Sequence[str], candidates: Sequence[str]) -> str:
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, candidates, n=2, cutoff=0.6)
        parts.append(f"'{name}'" + (f" (close: {', '.join(repr(c) for c in close)})" if close else ""))
    return "[" + ", ".join(parts) + "]"


def column_order(
    kind: str, file_names: Sequence[str], model_names: Sequence[str], *, extra_ok: bool = False
) -> np.ndarray:
    """Index into ``file_names`` of each of ``model_names``, as an int64 array ``(len(model_names),)``.

    Args:
        kind: ``"joint"`` or ``"body"``, for the error message.
        file_names: names in the file's column order.
        model_names: names in the robot model's order.
        extra_ok: accept file names the model does not have (ignored columns).

    Raises:
        MotionFormatError: model names missing from the file, or (unless ``extra_ok``) file names
            unknown to the model; each listed with its closest matches on the other side.
    """
    missing = [n for n in model_names if n not in file_names]
    extra = [n for n in file_names if n not in model_names]
    unknown = [] if extra_ok else extra
    if missing or unknown:
        problems = []
        if missing:
            # A missing name is most likely one of the file's unrecognized names, misspelt.
            problems.append(f"missing from the file: {_with_hints(missing, extra or list(file_names))}")
        if unknown:
            problems.append(f"unknown to the robot model: {_with_hints(unknown, list(model_names))}")
        raise MotionFormatError(f"'{kind}_names' do not match the robot model; " + "; ".join(problems))
    position = {name: i for i, name in enumerate(file_names)}
    return np.array([position[n] for n in model_names], dtype=np.int64)


def covers(file_names: Sequence[str], model_names: Sequence[str]) -> bool:
    """Whether every model name appears among the file's names."""
    present = set(file_names)
    return all(n in present for n in model_names)
