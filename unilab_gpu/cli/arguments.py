"""The numeric options of the commands: one parser for whole numbers and one bounds check, so every
command refuses a number outside its range in the same one line, before any work::

    unilab-eval: error: --seconds must be a number in (0, 3600] (seconds each row walks), got 1e+30

A command lists its options' :class:`Bound` and calls :func:`check_bounds` after ``parse_args``;
``type=whole`` reads ``1e8`` as the whole number it writes (argparse's ``int`` would refuse it).
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping
from typing import Any

from unilab_gpu.utils.checks import Bound, shown

MAX_COMMAND = 10.0
"""Largest ``|--command|`` component (m/s, rad/s) of a velocity policy's command: ten times a legged
robot's walking speed (``unilab-eval --terrain``, ``unilab-sim2sim``)."""

MAX_SECONDS = 3600.0
"""Longest run of one simulated robot a command takes (``--seconds``): an hour."""

SEED = Bound(0, (1 << 63) - 1, integer=True)
"""Every command's ``--seed`` (torch's generators take 64-bit seeds)."""

PORT = Bound(0, 65535, integer=True, meaning="a TCP port; 0: any free one")
"""A ``--port`` option."""


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


def velocity_command(text: str) -> list[float]:
    """argparse ``type`` of a velocity command ``vx,vy,wz`` (m/s, rad/s): three finite numbers; their
    range is the option's :class:`Bound` (``MAX_COMMAND``)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3 or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected three numbers vx,vy,wz such as 0.5,0,0, got {text!r}")
    return values


def take_command_lists(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` read a comma list of numbers that starts with ``-`` (a backward command
    ``-0.4,0,0`` after ``--commands``) as a value: argparse reads a word starting with ``-`` as an
    option unless it looks like one negative number, and this widens that rule to such lists."""
    parser._negative_number_matcher = re.compile(r"^-\d*\.?\d+(,-?\d*\.?\d+)*$")  # type: ignore[attr-defined]


def check_bounds(parser: argparse.ArgumentParser, args: argparse.Namespace, bounds: Mapping[str, Bound]) -> None:
    """``parser.error`` (one line, exit status 2) for the first option in ``bounds`` (``"--seconds"``)
    whose value, or one of whose values (``nargs``, ``append``, both), is outside its :class:`Bound`;
    options left at ``None`` are not checked."""
    for option, bound in bounds.items():
        for number in _numbers(getattr(args, option.lstrip("-").replace("-", "_"))):
            if number is not None and not (math.isfinite(number) and bound.holds(number)):
                parser.error(f"{option} must be {bound.expected()}, got {shown(number)}")


def _numbers(value: Any) -> list[Any]:
    """The numbers of an option's value: itself, or those of its lists (``append`` of ``nargs``)."""
    return [n for item in value for n in _numbers(item)] if isinstance(value, list | tuple) else [value]
