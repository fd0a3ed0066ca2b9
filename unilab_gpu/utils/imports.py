"""Importing what a config names by dotted path, from allowed packages only.

Task configs name their terms, and terrain configs their height functions, as
``"package.module.attr"`` or ``"package.module:attr"``. A run folder's config is imported again by
``unilab-play`` and a resume, so only the project's own package and the packages the user lists,
comma-separated, in the environment variable ``UNILAB_TERM_MODULES`` (e.g.
``UNILAB_TERM_MODULES=my_robot.terms``) may be imported; anything else is refused before it is
imported. Callers word the refusal for their config (:class:`RefusedPath` says why).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any, Literal

TERM_MODULES_ENV = "UNILAB_TERM_MODULES"
"""Environment variable: comma-separated modules or packages, besides ``unilab_gpu``, whose
functions and classes configs may name."""

Reason = Literal["syntax", "outside", "import", "missing"]


def allowed_packages() -> tuple[str, ...]:
    """``unilab_gpu`` and the packages listed in ``UNILAB_TERM_MODULES``."""
    listed = (name.strip() for name in os.environ.get(TERM_MODULES_ENV, "").split(","))
    return ("unilab_gpu", *(name for name in listed if name))


def user_packages() -> set[str]:
    """The top-level packages of the modules listed in ``UNILAB_TERM_MODULES``."""
    return {name.split(".")[0] for name in allowed_packages()[1:]}


def is_inside(module_name: str, packages: tuple[str, ...]) -> bool:
    """Whether ``module_name`` is one of ``packages`` or a submodule of one."""
    return any(module_name == p or module_name.startswith(f"{p}.") for p in packages)


class RefusedPath(ValueError):
    """A dotted path that :func:`import_dotted` refused, and why.

    Attributes:
      reason: ``"syntax"`` (not a non-empty string with a module part), ``"outside"`` (its module
        is not in :func:`allowed_packages`, so it was not imported), ``"import"`` (importing the
        module raised ``ImportError``, in ``detail``) or ``"missing"`` (the module, in ``module``,
        has no such attribute).
      path: the path as the config gave it.
      module_name, attr: its two parts (empty for ``"syntax"``).
      allowed: :func:`allowed_packages` at the time.
    """

    def __init__(
        self,
        reason: Reason,
        path: Any,
        module_name: str = "",
        attr: str = "",
        allowed: tuple[str, ...] = (),
        module: ModuleType | None = None,
        detail: str = "",
    ) -> None:
        super().__init__(f"{reason}: {path!r}")
        self.reason = reason
        self.path = path
        self.module_name = module_name
        self.attr = attr
        self.allowed = allowed
        self.module = module
        self.detail = detail


def import_dotted(path: Any) -> Any:
    """The object ``path`` names, imported only from :func:`allowed_packages`.

    Raises:
      RefusedPath: see its ``reason``.
    """
    if not isinstance(path, str) or not path.strip(". :"):
        raise RefusedPath("syntax", path)
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    allowed = allowed_packages()
    if not is_inside(module_name, allowed):
        raise RefusedPath("outside", path, module_name, attr, allowed)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RefusedPath("import", path, module_name, attr, allowed, detail=str(error)) from None
    if not hasattr(module, attr):
        raise RefusedPath("missing", path, module_name, attr, allowed, module=module)
    return getattr(module, attr)
