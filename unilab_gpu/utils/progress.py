"""A progress bar on stderr for long loops of the commands, when tqdm is installed."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TypeVar

T = TypeVar("T")


def progress_bar(
    items: Iterable[T], desc: str, unit: str, *, leave: bool = True, tty_only: bool = False
) -> Iterable[T]:
    """``items`` behind a tqdm bar on stderr, or ``items`` themselves without tqdm (an optional
    dependency). ``tty_only`` hides the bar when stderr is not a terminal (tqdm's ``disable=None``)."""
    try:
        from tqdm import tqdm
    except ImportError:
        return items
    return tqdm(items, desc=desc, unit=unit, file=sys.stderr, leave=leave, disable=None if tty_only else False)
