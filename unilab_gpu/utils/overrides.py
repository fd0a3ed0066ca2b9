"""Hydra ``key=value`` overrides that Hydra's grammar refuses, explained in one line.

Hydra's lexer answers ``env.overrides=[episode_length_s=5]`` with ``no viable alternative at input
'[episode_length_s='``: it names neither the override nor the fix (quote the list item). Both
places that compose configs from user overrides (the train config and the task configs) use
:func:`override_syntax_problem` before showing Hydra's own words.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException


def override_syntax_problem(overrides: Sequence[str]) -> str | None:
    """The first override Hydra's grammar cannot parse, with what is wrong and how to write it;
    ``None`` if every override parses (a refused config then has another cause)."""
    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_override(override)
        except HydraException as error:
            words = " ".join(str(error).split("See https://")[0].split())
            return f"override '{override}' is not valid Hydra syntax ({words}): {_fix(override)}"
    return None


def _fix(override: str) -> str:
    value = override.partition("=")[2]
    if value.count("[") != value.count("]") or value.count("{") != value.count("}"):
        return "every '[' and '{' needs its closing ']' and '}'"
    if any(bracket in value for bracket in "[{"):
        return (
            "quote list items and values that hold '=', brackets, parentheses or quotes, e.g. "
            "env.overrides=['episode_length_s=5'] (and quote the whole argument for the shell: "
            "\"env.overrides=['episode_length_s=5']\")"
        )
    return "quote a value that holds parentheses, brackets, '=' or quotes, e.g. key='a(b)'"
