"""Name resolution: exact names, regular expressions, close-match errors."""

from __future__ import annotations

import pytest

from unilab_gpu.sim.names import resolve_names

NAMES = ["pelvis", "left_knee_link", "right_knee_link", "torso_link"]


def test_exact_and_regex_in_request_order() -> None:
    assert resolve_names("body", ["torso_link", "pelvis"], NAMES) == [3, 0]
    assert resolve_names("body", ".*_knee_link", NAMES) == [1, 2]
    assert resolve_names("body", ["right_knee_link", ".*_knee_link"], NAMES) == [2, 1]


def test_unknown_name_lists_close_matches() -> None:
    with pytest.raises(KeyError, match=r"unknown body name 'left_kne_link'; close matches: \['left_knee_link'"):
        resolve_names("body", ["left_kne_link"], NAMES)
    with pytest.raises(KeyError, match="available"):
        resolve_names("joint", ["zzz"], NAMES)
