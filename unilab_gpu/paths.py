"""Where the project's data files live, for a source checkout and for an installed wheel."""

from __future__ import annotations

import os
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


USER_PATH_ENV = "UNILAB_PATH"
"""Environment variable: folders (separated by ``os.pathsep``) laid out like this repository, whose
``configs/task/``, ``configs/robot/`` and ``assets/robots/`` add tasks, robot configs and robot
MJCF folders to the project's own (docs/robots.md, "Adding a robot")."""


def user_folders() -> list[Path]:
    """The folders of ``UNILAB_PATH``, in order.

    Raises:
      FileNotFoundError: an entry that is not a folder, naming it and the variable.
    """
    folders = []
    for entry in filter(None, os.environ.get(USER_PATH_ENV, "").split(os.pathsep)):
        folder = Path(entry).expanduser().resolve()
        if not folder.is_dir():
            raise FileNotFoundError(f"{USER_PATH_ENV}: '{entry}' is not a folder")
        folders.append(folder)
    return folders


def config_roots() -> list[Path]:
    """Folders holding ``task/`` and ``robot/`` config folders: the project's ``configs/`` first."""
    return [CONFIGS_DIR, *(folder / "configs" for folder in user_folders())]


def robot_config_file(name: str | None) -> Path | None:
    """The robot config ``<root>/robot/<name>.yaml`` of the first config root that has it (the
    file Hydra reads for ``robot: <name>``); ``None`` when none has it."""
    return None if name is None else group_config_file("robot", name)


def group_config_file(group: str, name: str) -> Path | None:
    """The config ``<root>/<group>/<name>.yaml`` of the first config root that has it (the file
    Hydra reads for ``<group>=<name>``); ``None`` when none has it."""
    for root in config_roots():
        if (root / group / f"{name}.yaml").is_file():
            return root / group / f"{name}.yaml"
    return None


def shadowed_configs() -> list[Path]:
    """The ``UNILAB_PATH`` configs (``<folder>/configs/<group>/<name>.yaml``) that an earlier config
    root's file of the same group and name hides: Hydra and :func:`group_config_file` read the first."""
    roots = config_roots()
    hidden = []
    for index, root in enumerate(roots[1:], start=1):
        for path in sorted(root.glob("*/*.yaml")):
            if any((earlier / path.parent.name / path.name).is_file() for earlier in roots[:index]):
                hidden.append(path)
    return hidden


def group_choices(group: str) -> list[str]:
    """The names of every ``<root>/<group>/<name>.yaml`` of the config roots, sorted."""
    return sorted({path.stem for root in config_roots() for path in (root / group).glob("*.yaml")})


def list_tasks() -> list[str]:
    """Names accepted by :func:`~unilab_gpu.envs.make_env.make_env`: the files of ``configs/task/``
    and of the ``configs/task/`` of the ``UNILAB_PATH`` folders (no heavy import). Task bases
    (``configs/task/base/``) are not tasks: they need a robot."""
    return group_choices("task")


def robot_asset(robot: str, file: str = "scene.xml") -> Path:
    """Path of a robot's MJCF file, e.g. ``robot_asset("g1")`` -> ``assets/robots/g1/scene.xml``;
    the project's robots first, then those of the ``UNILAB_PATH`` folders."""
    robot_dirs = [ASSETS_DIR / "robots", *(folder / "assets" / "robots" for folder in user_folders())]
    for robots in robot_dirs:
        path = robots / robot / file
        if path.is_file():
            return path
    available = sorted({p.name for robots in robot_dirs if robots.is_dir() for p in robots.iterdir() if p.is_dir()})
    raise FileNotFoundError(
        f"robot asset '{robot}/{file}' not found at {robot_dirs[0] / robot / file}; robots: {available} "
        f"(a robot of your own: put its folder under <folder>/assets/robots/ and set {USER_PATH_ENV}=<folder>, "
        "or give the MJCF's path, e.g. --model path/to/scene.xml)"
    )


def terrain_file(name_or_path: str | Path, option: str = "--terrain") -> Path:
    """The terrain config ``name_or_path`` stands for: a YAML file, or a terrain name (``rough``:
    ``<root>/terrain/rough.yaml`` of the first config root that has it). Commands take either.

    Raises:
        FileNotFoundError: neither exists; one line naming ``option`` and the terrain names.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    found = group_config_file("terrain", str(name_or_path)) if path.name == str(name_or_path) else None
    if found is None:
        raise FileNotFoundError(
            f"{option}: no terrain file at {name_or_path}, nor a terrain of that name "
            f"(names: {', '.join(group_choices('terrain'))}, in configs/terrain/)"
        )
    return found
