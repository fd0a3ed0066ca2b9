"""The model files the simulator compiles: an MJCF path or a robot name under ``assets/robots``,
read with an optional ``MjSpec`` edit, and its text made loadable from any folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import mujoco

from unilab_gpu.paths import robot_asset


def load_mj_model(
    source: str | Path | mujoco.MjSpec, edit: Callable[[mujoco.MjSpec], None] | None = None
) -> mujoco.MjModel:
    """Compile an MJCF file (or robot name under ``assets/robots``) into a MuJoCo model.

    Args:
      source: a path to an MJCF file, a robot name such as ``"g1"`` (its ``scene.xml``), or a spec.
      edit: optional function that modifies the ``MjSpec`` before compilation (e.g. change
        the timestep, add a site); this is where tasks adapt the robot without copying files.
    """
    spec = source if isinstance(source, mujoco.MjSpec) else mujoco.MjSpec.from_file(str(model_path(source)))
    if edit is not None:
        edit(spec)
    return spec.compile()


def model_path(source: str | Path) -> Path:
    """The MJCF file of ``source``: a path to an ``.xml`` file, or a robot name (its ``scene.xml``).

    Raises:
      FileNotFoundError: no such file (or robot).
    """
    path = Path(source)
    if path.suffix != ".xml":
        path = robot_asset(str(source))
    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    return path


def scene_xml(source: str | Path, edit: Callable[[mujoco.MjSpec], None] | None = None) -> str:
    """The MJCF text of model ``source`` (as :func:`load_mj_model` reads it) after ``edit``, one file
    that MuJoCo loads from any folder: includes are inlined, and the mesh and texture folders of a
    model with asset files are made absolute (they were relative to the model's own folder)."""
    path = model_path(source)
    spec = mujoco.MjSpec.from_file(str(path))
    if edit is not None:
        edit(spec)
    folder = path.resolve().parent
    if any(mesh.file for mesh in spec.meshes) or any(skin.file for skin in spec.skins):
        spec.meshdir = str(folder / spec.meshdir)
    if any(texture.file or any(texture.cubefiles) for texture in spec.textures):
        spec.texturedir = str(folder / spec.texturedir)
    spec.compile()  # to_xml writes a compiled spec
    return spec.to_xml()
