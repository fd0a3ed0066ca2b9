"""Where the runtime finds the numpy twin of an env term: its own tables, then the user's modules.

An env term comes from ``unilab_gpu`` or from a module the user lists in ``UNILAB_TERM_MODULES``
(``unilab_gpu.managers.term``); its twin here is looked up by the same ``func`` path. The user's
twins live in numpy modules listed, comma-separated, in ``UNILAB_DEPLOY_MODULES`` (a separate list:
a robot computer imports them without torch). Such a module may define any of three tables::

    OBSERVATIONS = {"my_robot.terms.foot_contact": foot_contact}       # build(ctx, term, **params) -> read(data)
    COMMANDS = {"my_robot.commands.Twist": "velocity"}                 # command class path -> kind
    TERMINATIONS = {"my_robot.terms.base_too_low": base_too_low}       # build(ctx, term, **params) -> FallCheck

which extend (and may override) the runtime's own (``terms.TERMS``, ``terms.COMMAND_KINDS``,
``terminations.TERMINATIONS``). Paths are compared in their canonical spelling (``a.b.c``;
``a.b:c`` is the same path).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from .policy_file import DeploymentError

DEPLOY_MODULES_ENV = "UNILAB_DEPLOY_MODULES"
"""Environment variable: comma-separated modules whose ``OBSERVATIONS``, ``COMMANDS`` and
``TERMINATIONS`` tables extend the runtime's."""


def canonical(func: Any) -> str:
    """A term's ``func`` in its canonical spelling, ``"package.module.attr"``."""
    return str(func).replace(":", ".")


def user_modules() -> tuple[str, ...]:
    """The modules listed in ``UNILAB_DEPLOY_MODULES``."""
    listed = (name.strip() for name in os.environ.get(DEPLOY_MODULES_ENV, "").split(","))
    return tuple(name for name in listed if name)


def table(name: str, builtin: dict[str, Any]) -> dict[str, Any]:
    """``builtin`` extended by the table ``name`` of every module in :func:`user_modules`.

    Raises:
      DeploymentError: a listed module cannot be imported, or its table is not a dict.
    """
    merged = dict(builtin)
    for module_name in user_modules():
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise DeploymentError(f"{DEPLOY_MODULES_ENV}: cannot import '{module_name}' ({error})") from None
        extra = getattr(module, name, {})
        if not isinstance(extra, dict):
            raise DeploymentError(
                f"{DEPLOY_MODULES_ENV}: {module_name}.{name} must be a dict of term paths, got {type(extra).__name__}"
            )
        merged.update({canonical(key): value for key, value in extra.items()})
    return merged
