"""The numeric options of the commands: one parser for whole numbers and one bounds check, so every
command refuses a number outside its range in the same one line, before any work::

    unilab-eval: error: --seconds must be a number in (0, 3600] (seconds each row walks), got 1e+30

A command lists its options' :class:`Bound` and calls :func:`check_bounds` after ``parse_args``;
``type=whole`` reads ``1e8`` as the whole number it writes (argparse's ``int`` would refuse it).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping

from unilab_gpu.utils.checks import Bound, shown

MAX_COMMAND = 10.0
"""Largest ``|--command|`` component (m/s, rad/s) of a velocity policy's command: ten times a legged
robot's walking speed (``unilab-eval --terrain``, ``unilab-sim2sim``)."""

MAX_SECONDS = 3600.0
"""Longest run of one simulated robot a command takes (``--seconds``): an hour."""


def whole(text: str) -> int:
    """argparse ``type`` of a whole-number option: ``"16"``, ``"1e8"`` and ``"2.0"`` are whole numbers."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer():  # NaN and inf too
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


def check_bounds(parser: argparse.ArgumentParser, args: argparse.Namespace, bounds: Mapping[str, Bound]) -> None:
    """``parser.error`` (one line, exit status 2) for the first option in ``bounds`` (``"--seconds"``)
    whose value, or one of whose values (``nargs``, ``append``), is outside its :class:`Bound`;
    options left at ``None`` are not checked."""
    for option, bound in bounds.items():
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        for number in value if isinstance(value, list | tuple) else [value]:
            if number is not None and not (math.isfinite(number) and bound.holds(number)):
                parser.error(f"{option} must be {bound.expected()}, got {shown(number)}")
