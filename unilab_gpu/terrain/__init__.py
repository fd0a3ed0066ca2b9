"""Rough terrain: a config-driven, seed-deterministic grid of sub-terrains as one heightfield.

``generate_terrain(cfg)`` builds the ``terrain:`` section of a task config (``TerrainCfg``) into a
``TerrainGrid``: float32 heights in MuJoCo's hfield layout, the spawn origin of every sub-terrain,
the difficulty of every level and the type of every column. NumPy and MuJoCo only (no torch, no
Warp); the height functions live in ``unilab_gpu.terrain.sub_terrains``. The names below are the
public API.
"""

from unilab_gpu.terrain.generator import (
    MAX_TERRAIN_SAMPLES,
    TerrainGrid,
    assign_columns,
    estimate_terrain_bytes,
    generate_terrain,
    level_difficulties,
)
from unilab_gpu.terrain.sub_terrains import (
    discrete_obstacles,
    flat,
    mesh,
    pyramid_slope,
    pyramid_stairs,
    random_rough,
)
from unilab_gpu.terrain.terrain_cfg import SubTerrainCfg, TerrainCfg, check_terrain_cfg

__all__ = [
    "MAX_TERRAIN_SAMPLES",
    "SubTerrainCfg",
    "TerrainCfg",
    "TerrainGrid",
    "assign_columns",
    "check_terrain_cfg",
    "discrete_obstacles",
    "estimate_terrain_bytes",
    "flat",
    "generate_terrain",
    "level_difficulties",
    "mesh",
    "pyramid_slope",
    "pyramid_stairs",
    "random_rough",
]
