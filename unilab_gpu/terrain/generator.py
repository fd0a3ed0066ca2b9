"""A grid of sub-terrains from the ``terrain:`` section of a task config, as one heightfield.

The grid has ``num_levels`` rows of difficulty along world x (level 0 easiest, difficulty 0; the
top level difficulty 1) and ``num_cols`` columns along world y, each column one sub-terrain type
(``sub_terrains``, by proportion). Each cell is a sub-terrain of ``sub_terrain_size`` metres built
by its height function (``sub_terrains``), the whole surrounded by a flat border at height 0 and
centred on the world origin::

    y ^   border
      |   [ col num_cols-1: level 0 | level 1 | ... ]
      |   [ ...                                     ]
      |   [ col 0:          level 0 | level 1 | ... ]
      +--------------------------------------------> x

Everything random comes from the seed: sub-terrain ``(level, col)`` draws from its own generator,
``np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(level, col)))`` (the children
``np.random.default_rng(seed).spawn`` would hand out, addressed by cell), so the same seed builds
byte-identical heights, and changing one sub-terrain type's params leaves the other cells as they
were.

The config and its checks (one line naming the key path of a bad value, before any heights are
built) live in :mod:`~unilab_gpu.terrain.terrain_cfg`, the height functions in
:mod:`~unilab_gpu.terrain.sub_terrains`; this module assembles the grid.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from unilab_gpu.terrain.sub_terrains import MAX_HEIGHT
from unilab_gpu.terrain.terrain_cfg import SubTerrain, TerrainCfg, check_terrain_cfg, checked_sub_terrains

MAX_TERRAIN_SAMPLES = 2**26
"""Largest grid built (samples; 256 MiB per float32 copy, 1 GiB for the four copies held at once)."""

WARP_MAX_AXIS = 2**31
"""Warp array axes are signed 32-bit; MJWarp keeps every heightfield's samples in one flat array."""

BYTES_PER_SAMPLE = 4
"""float32 heights."""

COPIES_HELD = 4
"""Copies of the heights alive at once while a scene is built: NumPy, MuJoCo, Warp device, torch view."""

SPAWN_SQUARE = 1.0
"""Side (m) of the square around a sub-terrain's centre whose highest sample is its origin height."""


@dataclass(frozen=True)
class TerrainGrid:
    """A generated terrain: heights and what the scene, the curriculum and the spawns need."""

    heights: np.ndarray
    """(ny, nx) float32 metres: row ``i`` at world ``y = y_min + i * h``, column ``j`` at
    ``x = x_min + j * h`` (MuJoCo's hfield layout, rows along y)."""
    horizontal_scale: float
    """``h``, metres between samples."""
    x_min: float
    """World x of ``heights[:, 0]``; the map is centred on the world origin."""
    y_min: float
    """World y of ``heights[0, :]``."""
    origins: np.ndarray
    """(num_levels, num_cols, 3) float32 spawn points: each sub-terrain's centre (x, y) and the
    highest ground within ``SPAWN_SQUARE`` of it (z)."""
    difficulties: np.ndarray
    """(num_levels,) float64 difficulty of each level, linear from 0 to 1 (a single level: 1)."""
    column_types: tuple[str, ...]
    """(num_cols,) the sub-terrain name of each column."""

    @property
    def num_levels(self) -> int:
        return self.origins.shape[0]

    @property
    def num_cols(self) -> int:
        return self.origins.shape[1]

    @property
    def size(self) -> tuple[float, float]:
        """(x, y) metres from the first sample to the last, border included: ``((nx - 1) * h, (ny - 1) * h)``."""
        ny, nx = self.heights.shape
        return (nx - 1) * self.horizontal_scale, (ny - 1) * self.horizontal_scale


@dataclass(frozen=True)
class _Layout:
    """Sample counts of a grid."""

    n_x: int
    """Samples of one sub-terrain along x."""
    n_y: int
    border: int
    """Border samples on each side."""

    def shape(self, num_levels: int, num_cols: int) -> tuple[int, int]:
        """(ny, nx) of the whole map."""
        return 2 * self.border + num_cols * self.n_y, 2 * self.border + num_levels * self.n_x


def generate_terrain(cfg: TerrainCfg | Mapping[str, Any]) -> TerrainGrid:
    """Build the grid of sub-terrains ``cfg`` describes (a ``TerrainCfg``, a dict or a ``DictConfig``).

    Raises:
      ValueError: a bad config value, or a grid over ``MAX_TERRAIN_SAMPLES``, naming its key path.
      FileNotFoundError: a mesh sub-terrain's file is missing.
    """
    cfg = check_terrain_cfg(cfg)
    layout = _layout(cfg)
    _check_size(cfg, layout)
    sub_terrains = checked_sub_terrains(cfg, (layout.n_x * cfg.horizontal_scale, layout.n_y * cfg.horizontal_scale))
    names = list(sub_terrains)
    columns = assign_columns(names, [sub_terrains[n].proportion for n in names], cfg.num_cols)
    difficulties = level_difficulties(cfg.num_levels)
    h = cfg.horizontal_scale
    ny, nx = layout.shape(cfg.num_levels, cfg.num_cols)
    heights = np.zeros((ny, nx), dtype=np.float32)
    origins = np.zeros((cfg.num_levels, cfg.num_cols, 3), dtype=np.float32)
    x_min, y_min = -(nx - 1) * h / 2, -(ny - 1) * h / 2
    near_centre = _spawn_square(layout, h)
    for level in range(cfg.num_levels):
        x0 = layout.border + level * layout.n_x
        for col, name in enumerate(columns):
            y0 = layout.border + col * layout.n_y
            block = _build(sub_terrains[name], float(difficulties[level]), cfg.seed, level, col, layout, h)
            heights[y0 : y0 + layout.n_y, x0 : x0 + layout.n_x] = block
            origins[level, col] = (
                x_min + (x0 + (layout.n_x - 1) / 2) * h,
                y_min + (y0 + (layout.n_y - 1) / 2) * h,
                heights[y0 : y0 + layout.n_y, x0 : x0 + layout.n_x][near_centre].max(),
            )
    return TerrainGrid(heights, h, x_min, y_min, origins, difficulties, columns)


def _build(
    sub_terrain: SubTerrain, difficulty: float, seed: int, level: int, col: int, layout: _Layout, h: float
) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(level, col)))
    block = np.asarray(sub_terrain.func(difficulty, rng, (layout.n_y, layout.n_x), h, **sub_terrain.params))
    # A user's height function is checked here, where its output is first seen.
    numeric = np.issubdtype(block.dtype, np.number) and not np.issubdtype(block.dtype, np.complexfloating)
    if block.shape != (layout.n_y, layout.n_x) or not numeric or not np.all(np.abs(block) <= MAX_HEIGHT):
        raise ValueError(
            f"terrain: '{sub_terrain.where}.func' must return finite heights within +-{MAX_HEIGHT:g} m of shape "
            f"(n_y, n_x) = {(layout.n_y, layout.n_x)}, got {_describe(block)} at level {level}, column {col}"
        )
    return block


def _describe(block: np.ndarray) -> str:
    """What a height function returned, for the error: its shape and dtype, and its largest height."""
    if not np.issubdtype(block.dtype, np.number) or block.size == 0:
        return f"shape {block.shape} of {block.dtype}"
    return (
        f"shape {block.shape}, largest |height| {np.nanmax(np.abs(block)) if np.isfinite(block).any() else np.nan:g} m"
    )


def _spawn_square(layout: _Layout, h: float) -> np.ndarray:
    """(n_y, n_x) bool: the samples of a sub-terrain within the spawn square around its centre (at
    least the nearest samples, for a sample spacing over the square's side)."""
    half = max(SPAWN_SQUARE, h) / 2 + 1e-9 * h
    x = np.abs(np.arange(layout.n_x) - (layout.n_x - 1) / 2) * h
    y = np.abs(np.arange(layout.n_y) - (layout.n_y - 1) / 2) * h
    return (y[:, None] <= half) & (x[None, :] <= half)


def level_difficulties(num_levels: int) -> np.ndarray:
    """(num_levels,) float64: linear from 0 (level 0) to 1 (the top level); a single level is 1."""
    if num_levels == 1:
        return np.ones(1)
    return np.linspace(0.0, 1.0, num_levels)


def assign_columns(names: Sequence[str], proportions: Sequence[float], num_cols: int) -> tuple[str, ...]:
    """The sub-terrain type of each column: column ``c`` takes the first type whose cumulative
    proportion exceeds ``(c + 0.5) / num_cols`` (proportions ``[0.5, 0.5]``, 4 columns: A, A, B, B)."""
    cumulative = np.cumsum(proportions)
    # Proportions summing to 1 - 1e-7 must not leave the last column without a type.
    last = max(i for i, p in enumerate(proportions) if p > 0)
    return tuple(names[min(int(np.argmax(cumulative > (c + 0.5) / num_cols)), last)] for c in range(num_cols))


def estimate_terrain_bytes(cfg: TerrainCfg | Mapping[str, Any]) -> int:
    """Bytes the heights of ``cfg``'s grid take while a scene is built: samples x 4 bytes (float32)
    x 4 copies held at once (NumPy, MuJoCo, Warp device, torch view). Nothing is built, and a grid
    over ``MAX_TERRAIN_SAMPLES`` is estimated too (``generate_terrain`` refuses it).

    Raises:
      ValueError: a bad grid setting (levels, columns, sizes), naming its key path.
    """
    cfg = check_terrain_cfg(cfg)
    ny, nx = _layout(cfg).shape(cfg.num_levels, cfg.num_cols)
    return nx * ny * BYTES_PER_SAMPLE * COPIES_HELD


def _layout(cfg: TerrainCfg) -> _Layout:
    """The grid's sample counts."""
    h = cfg.horizontal_scale
    return _Layout(
        n_x=round(cfg.sub_terrain_size[0] / h),
        n_y=round(cfg.sub_terrain_size[1] / h),
        border=round(cfg.border_width / h),
    )


def _check_size(cfg: TerrainCfg, layout: _Layout) -> None:
    """Refuse a grid too large to hold, before anything is allocated."""
    h = cfg.horizontal_scale
    ny, nx = layout.shape(cfg.num_levels, cfg.num_cols)
    samples = nx * ny
    limit = min(MAX_TERRAIN_SAMPLES, WARP_MAX_AXIS - 1)  # the cap is far below Warp's; min() keeps it so if raised
    if samples > limit:
        mib = samples * BYTES_PER_SAMPLE * COPIES_HELD / 2**20
        raise ValueError(
            f"terrain config: a grid of {cfg.num_levels} levels x {cfg.num_cols} columns at horizontal_scale {h:g} m "
            f"has {samples:,} samples ({ny} x {nx}, an estimated {mib:,.0f} MiB: 4 bytes x {COPIES_HELD} copies), over "
            f"the limit of {limit:,} (MAX_TERRAIN_SAMPLES); lower 'terrain.num_levels' or 'terrain.num_cols', or raise "
            "'terrain.horizontal_scale'"
        )
