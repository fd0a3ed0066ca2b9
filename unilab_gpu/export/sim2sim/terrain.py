"""The ground of a sim-to-sim run: the policy's training terrain or a terrain file, and the
sub-terrain a velocity policy starts on.

A policy of a task on a generated terrain (metadata ``terrain``) runs on that ground: the MJCF's
floor becomes the heightfield of ``generate_terrain(meta["terrain"])`` (``add_terrain``, as the env
builds its scene), whose heights must hash to the metadata's ``terrain_sha256``, and a velocity
policy starts on one sub-terrain, its origin added to the keyframe's root position as the env's
``Terrain.stage`` does (:func:`choose_terrain`). A terrain file replaces the metadata's ground for
a run (an evaluation terrain of fixed slopes or stairs).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from unilab_gpu.deploy import DeploymentError
from unilab_gpu.deploy.ground import heights_sha256
from unilab_gpu.paths import terrain_file
from unilab_gpu.terrain.generator import TerrainGrid, generate_terrain

TERRAIN_FILE_MAX_BYTES = 1 << 20
"""Largest ``--terrain`` file read (a terrain section is a few hundred bytes)."""

TERRAIN_FILE_MAX_VALUES = 100_000
"""Most values a ``--terrain`` file may hold once every YAML alias is followed (a task config has
a few hundred)."""


@dataclass(frozen=True)
class TerrainChoice:
    """The ground a run stands on and the sub-terrain a velocity policy starts on."""

    grid: TerrainGrid
    config: dict[str, Any]
    """The terrain config the grid was generated from (plain JSON)."""
    source: str
    """``"metadata"`` (the policy's training terrain, sha256 checked) or the ``--terrain`` file."""
    level: int
    column: int

    @property
    def sub_terrain(self) -> str:
        """The sub-terrain type of the start's column."""
        return self.grid.column_types[self.column]

    @property
    def origin(self) -> np.ndarray:
        """``(3,)`` the start's sub-terrain origin (its centre and the ground there)."""
        return np.asarray(self.grid.origins[self.level, self.column], dtype=np.float64)

    def report(self, placed: bool) -> dict[str, Any]:
        """The report's ``terrain`` entry; the start (level, column, sub-terrain, origin) ``None``
        unless the robot was ``placed`` on it (a tracking policy starts at its reference's pose)."""
        return {
            "source": self.source,
            "config": self.config,
            "sha256": heights_sha256(self.grid.heights),
            "level": self.level if placed else None,
            "column": self.column if placed else None,
            "sub_terrain": self.sub_terrain if placed else None,
            "origin": [float(v) for v in self.origin] if placed else None,
        }


def read_terrain_file(path: str | Path) -> dict[str, Any]:
    """The terrain of a YAML file or a terrain name (:func:`~unilab_gpu.paths.terrain_file`), as plain
    values: a terrain config file itself (``configs/terrain/<name>.yaml``, a mapping with
    ``sub_terrains``) or the ``terrain:`` mapping of a task config (its other keys are ignored).
    Read within bounds (:func:`~unilab_gpu.utils.yaml_files.load_bounded_yaml`): a file of nested
    YAML aliases fails in one line instead of hanging.

    Raises:
      DeploymentError: no such file or name, too large, not YAML, or no ``terrain:`` mapping; one line.
    """
    from omegaconf import DictConfig, OmegaConf  # the training side's config reader
    from omegaconf.errors import OmegaConfBaseException

    from unilab_gpu.utils.yaml_files import YamlFileError, load_bounded_yaml

    try:
        path = terrain_file(path)
        cfg = load_bounded_yaml(path, "a terrain file", TERRAIN_FILE_MAX_BYTES, TERRAIN_FILE_MAX_VALUES)
        terrain = cfg.get("terrain")
        if terrain is None and "sub_terrains" in cfg:
            terrain = cfg  # a terrain config file (configs/terrain/<name>.yaml)
        plain = OmegaConf.to_container(terrain, resolve=True) if isinstance(terrain, DictConfig) else None
    except (FileNotFoundError, YamlFileError) as error:
        raise DeploymentError(str(error) if str(error).startswith("--terrain") else f"--terrain: {error}") from None
    except (OSError, OmegaConfBaseException) as error:
        reason = " ".join(str(error).split())[:200]
        raise DeploymentError(f"--terrain: {path} is not a readable YAML config ({reason})") from None
    if plain is None:
        raise DeploymentError(
            f"--terrain: {path} is neither a terrain config (a mapping with 'sub_terrains', as in configs/terrain/) "
            "nor a task config with a 'terrain:' mapping at its top level (docs/terrain.md)"
        )
    return plain


def choose_terrain(
    meta: dict[str, Any],
    kind: str,
    terrain_file: str | Path | None = None,
    level: int | None = None,
    column: int | None = None,
    sub_terrain: str | None = None,
) -> TerrainChoice | None:
    """The ground of a run: the metadata's terrain (its heights' sha256 checked against
    ``terrain_sha256``) or ``terrain_file``'s; ``None`` on a flat-ground policy without options.

    The start is sub-terrain ``(level, column)``: ``level`` by default the top one, ``column`` by
    default 0, or the first column of type ``sub_terrain``.

    Raises:
      DeploymentError: one line naming the option: a terrain option on a flat-ground policy, or a
        placement on a tracking policy (it starts at its reference's pose); both a column and a
        sub-terrain; a level or column out of range; an unknown sub-terrain name; a bad terrain
        file or config; rebuilt heights that differ from the metadata's.
    """
    given = [
        (option, value)
        for option, value in (
            ("--terrain", terrain_file),
            ("--terrain-level", level),
            ("--terrain-column", column),
            ("--sub-terrain", sub_terrain),
        )
        if value is not None
    ]
    if meta.get("terrain") is None:
        if given:
            raise DeploymentError(
                f"{given[0][0]}: the policy ({meta.get('task')}) was trained on flat ground (its metadata names no "
                "terrain); terrain options apply to policies of a task with a terrain (docs/terrain.md)"
            )
        return None
    placed = [option for option, _ in given if option != "--terrain"]
    if placed and kind == "tracking":
        raise DeploymentError(f"{placed[0]}: a tracking policy starts at its reference's pose, not on a sub-terrain")
    if column is not None and sub_terrain is not None:
        raise DeploymentError("--terrain-column and --sub-terrain: give one of the two")
    if terrain_file is not None:
        config, source = read_terrain_file(terrain_file), str(terrain_file)
        try:
            grid = generate_terrain(config)
        except (ValueError, FileNotFoundError) as error:
            raise DeploymentError(f"--terrain: {terrain_file}: {error}") from None
    else:
        config, source = meta["terrain"], "metadata"
        try:
            grid = generate_terrain(config)
        except (ValueError, FileNotFoundError) as error:
            raise DeploymentError(f"metadata 'terrain': {error}") from None
        digest = heights_sha256(grid.heights)
        if digest != meta.get("terrain_sha256"):
            raise DeploymentError(
                f"metadata 'terrain_sha256': the terrain rebuilt from the metadata's config has sha256 "
                f"{digest[:16]}..., the policy trained on {str(meta.get('terrain_sha256'))[:16]}... (the terrain "
                "generator or a height function changed since the export); give the ground with --terrain FILE"
            )
    levels, cols = grid.num_levels, grid.num_cols
    level = levels - 1 if level is None else level
    if not 0 <= level < levels:
        raise DeploymentError(f"--terrain-level: {level} is not a level of the terrain (0 to {levels - 1})")
    if sub_terrain is not None:
        names = list(dict.fromkeys(grid.column_types))
        if sub_terrain not in names:
            raise DeploymentError(
                f"--sub-terrain: the terrain has no sub-terrain {sub_terrain!r}; its sub-terrains: {', '.join(names)}"
            )
        column = grid.column_types.index(sub_terrain)
    column = 0 if column is None else column
    if not 0 <= column < cols:
        raise DeploymentError(f"--terrain-column: {column} is not a column of the terrain (0 to {cols - 1})")
    return TerrainChoice(grid, config, source, level, column)
