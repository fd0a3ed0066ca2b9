"""The number checks of the config loaders, with one wording for every config's errors.

Each config module checks its own fields where it reads them, through these helpers, so that the
env config and the terrain config refuse a bad number in the same words::

    ValueError: <config>: '<key path>' must be <expected>, got <value>
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FLOAT32_MAX = 3.4028234663852886e38
"""Every number of a config ends up in a float32 tensor or array: a larger one would be inf there."""


def is_number(value: Any) -> bool:
    """A finite int or float that float32 holds (bools are not numbers in a config)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) <= FLOAT32_MAX


def require(ok: bool, key: str, expected: str, value: Any, *, config: str) -> None:
    """Raise ``ValueError: <config>: '<key>' must be <expected>, got <value!r>`` unless ``ok``.

    A float beyond float32 that is not inf gets a note: to its writer it is a finite number.
    """
    if not ok:
        if isinstance(value, float) and abs(value) > FLOAT32_MAX and abs(value) != float("inf"):
            expected += f" (it is stored as float32: |value| <= {FLOAT32_MAX:.4g})"
        raise ValueError(f"{config}: '{key}' must be {expected}, got {value!r}")


def check_range(key: str, value: Any, *, strict: bool, config: str) -> None:
    """``value`` is ``[low, high]`` of finite numbers with ``low < high`` (``strict``) or ``low <= high``."""
    ok = (
        isinstance(value, (list, tuple))
        and len(value) == 2
        and all(is_number(v) for v in value)
        and (value[0] < value[1] if strict else value[0] <= value[1])
    )
    require(
        ok,
        key,
        f"[low, high] of finite numbers with low {'<' if strict else '<='} high",
        list(value) if isinstance(value, (list, tuple)) else value,
        config=config,
    )


@dataclass(frozen=True)
class Bound:
    """The range of a number (a command's option, a config value); NaN is outside every range."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    """``low`` itself is outside (``(0, 3600]``)."""
    integer: bool = False
    """A whole number (a command's option of ``type`` ``cli.arguments.whole`` or ``int``)."""
    meaning: str = ""
    """What the number is, for the error line (``seconds each row walks``)."""

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high and (not self.integer or float(value).is_integer())

    def expected(self) -> str:
        kind = "a whole number" if self.integer else "a number"
        low, high = shown(self.low), shown(self.high)
        if math.isinf(self.high) and math.isinf(self.low):
            text = f"a finite {kind[2:]}"
        elif math.isinf(self.high):
            text = f"{kind} {'>' if self.low_open else '>='} {low}"
        elif math.isinf(self.low):
            text = f"{kind} <= {high}"
        else:
            text = f"{kind} in {'(' if self.low_open else '['}{low}, {high}]"
        return text + (f" ({self.meaning})" if self.meaning else "")


def shown(value: Any) -> str:
    """A bound or a value as the user reads it: ``3600``, ``1e+30``, ``2**63 - 1``."""
    if isinstance(value, int) and value >= 2**31 and (value + 1) & value == 0:
        return f"2**{value.bit_length()} - 1"
    return f"{value:g}" if isinstance(value, float) else str(value)
