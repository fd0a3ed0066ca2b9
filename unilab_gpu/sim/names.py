"""Name -> index resolution for bodies, joints, actuators, sensors (cold path only)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence


def resolve_names(kind: str, requested: str | Sequence[str], available: Sequence[str]) -> list[int]:
    """Indices into ``available`` for each requested name or regular expression.

    Each entry of ``requested`` is matched in full against ``available`` (so a plain name matches
    itself and ``".*_ankle_roll_link"`` matches both ankles). Matches keep the order of
    ``requested`` first, then the model order within one pattern; duplicates are dropped.

    Raises:
      KeyError: an entry matches nothing; the message lists the closest available names.
    """
    if isinstance(requested, str):
        requested = [requested]
    ids: list[int] = []
    for pattern in requested:
        regex = re.compile(pattern)
        matches = [i for i, name in enumerate(available) if regex.fullmatch(name)]
        if not matches:
            close = difflib.get_close_matches(pattern, available, n=5, cutoff=0.5)
            hint = f"; close matches: {close}" if close else f"; available: {list(available)}"
            raise KeyError(f"unknown {kind} name '{pattern}'{hint}")
        ids.extend(i for i in matches if i not in ids)
    return ids
