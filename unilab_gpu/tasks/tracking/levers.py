"""The tracking command's levers (``commands.motion.params``) checked for type and range in one
place, before a clip is loaded or a buffer allocated::

    'first_frame_share' must be a number in [0, 1] (share of episodes that start at frame 0), got 'abc'

A lever written as a string, as ``null`` where it is a number, with an unknown key in one of its
mappings or beyond its range (a blend-in of 1e9 s asks for more frames than any machine holds) is
refused naming the lever; the mappings' values are checked for type here and for range by the class
they configure (:class:`~unilab_gpu.tasks.tracking.terminations.ThresholdCurriculum`,
:class:`~unilab_gpu.motion.sampler.AdaptiveStartSampler`), whose keyword arguments are their keys.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

from unilab_gpu.motion.sampler import AdaptiveStartSampler
from unilab_gpu.tasks.tracking.terminations import ThresholdCurriculum
from unilab_gpu.utils.checks import Bound, is_number

MAX_BLEND_IN_SECONDS = 10.0
"""Longest blend from the standing keyframe into a clip's first frame (s): the measured blend-in
was 1 s; a ten-second walk from standing to one pose is no longer a transition."""

NUMBERS = {
    "first_frame_share": Bound(0.0, 1.0, meaning="share of episodes that start at frame 0"),
    "blend_in_seconds": Bound(
        0.0, MAX_BLEND_IN_SECONDS, meaning="seconds from the standing keyframe into frame 0; 0: no blend"
    ),
    "soft_joint_limit_ratio": Bound(0.0, 1.0, low_open=True, meaning="share of each joint's range"),
}
"""The number levers and their ranges (``null`` is not a number: 0 turns a lever off)."""

MAPPINGS: dict[str, Callable[..., Any]] = {
    "termination_curriculum": ThresholdCurriculum,
    "adaptive": AdaptiveStartSampler,
}
"""The mapping levers (or ``null``) and the class whose keyword arguments are their keys."""

_GIVEN_BY_THE_COMMAND = ("library", "generator", "device")
"""Arguments of those classes that the command passes itself, never a config key."""


def check_levers(**params: Any) -> None:
    """Refuse the first lever of ``params`` (the command's keyword arguments) of the wrong type,
    outside its range or with an unknown key, in one line naming it (``ValueError``)."""
    for key, bound in NUMBERS.items():
        if key in params:
            value = params[key]
            if not (is_number(value) and math.isfinite(value) and bound.holds(value)):
                raise ValueError(f"'{key}' must be {bound.expected()}, got {value!r}")
    for key, target in MAPPINGS.items():
        value = params.get(key)
        if value is None:
            continue
        known = [name for name in inspect.signature(target).parameters if name not in _GIVEN_BY_THE_COMMAND]
        if not isinstance(value, Mapping):
            raise ValueError(f"'{key}' must be null or a mapping with keys {known}, got {value!r}")
        for name, number in value.items():
            if name not in known:
                close = difflib.get_close_matches(str(name), known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ValueError(f"'{key}.{name}' is not a key of {key}{hint}; expected one of {known}")
            if not (is_number(number) and math.isfinite(number)):
                raise ValueError(f"'{key}.{name}' must be a finite number, got {number!r}")
