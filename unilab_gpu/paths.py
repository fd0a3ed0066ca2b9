"""Where the project's data files live, for a source checkout and for an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    # A wheel carries `assets/` and `configs/` under `unilab_gpu/_data/`; a source checkout (or an
    # editable install) keeps them at the repository top level, next to the package.
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    checkout = _PACKAGE_DIR.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"unilab-gpu data folder '{name}' not found at {installed} or {checkout}")


ASSETS_DIR = _data_dir("assets")
CONFIGS_DIR = _data_dir("configs")


def robot_asset(robot: str, file: str = "scene.xml") -> Path:
    """Path of a robot's MJCF file, e.g. ``robot_asset("g1")`` -> ``assets/robots/g1/scene.xml``."""
    path = ASSETS_DIR / "robots" / robot / file
    if not path.is_file():
        available = sorted(p.name for p in (ASSETS_DIR / "robots").iterdir() if p.is_dir())
        raise FileNotFoundError(f"robot asset '{robot}/{file}' not found at {path}; robots: {available}")
    return path
