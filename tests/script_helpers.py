"""Load a file of ``scripts/`` or ``examples/`` (not packages) as a module, for the tests of its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name: str, folder: Path = SCRIPTS) -> ModuleType:
    """``scripts/<name>.py`` (or ``<folder>/<name>.py``) as a module named ``name`` (its ``main`` is not run)."""
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where dataclasses and pickle look a module's classes up
    spec.loader.exec_module(module)
    return module
