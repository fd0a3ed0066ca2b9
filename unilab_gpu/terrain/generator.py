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

A bad config raises before any heights are built, with one line naming the key path
(``terrain.sub_terrains.stairs.params.step_width``) and what it must be.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.terrain.sub_terrains import MAX_HEIGHT, MAX_LENGTH, MIN_LENGTH, PARAM_CHECKS, require
from unilab_gpu.utils.checks import check_range, is_number
from unilab_gpu.utils.imports import TERM_MODULES_ENV, RefusedPath, import_dotted

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

HEIGHT_FUNCTION_ARGS = ("difficulty", "rng", "shape", "horizontal_scale")
"""The positional arguments of every height function, before its params."""


@dataclass
class SubTerrainCfg:
    """One sub-terrain type: a height function and its share of the grid's columns."""

    func: str = MISSING
    """Dotted path of the height function, e.g. ``unilab_gpu.terrain.sub_terrains.pyramid_stairs``."""
    proportion: float = MISSING
    """Share of the grid's columns (the proportions of all types sum to 1)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``func``."""


@dataclass
class TerrainCurriculumCfg:
    """The terrain curriculum (``terrain.curriculum``; ``terrain.curriculum.TerrainCurriculum``)."""

    command: str = "twist"
    """The command term whose ``commanded_displacement`` says where a row was asked to walk."""
    promote_distance: float | None = None
    """A row that walked farther than this (m) from its origin moves up a level; None: half the
    sub-terrain's shorter side."""
    demote_ratio: float = 0.5
    """A row that failed, or walked less than this share of its commanded displacement, moves down."""
    demote_on_time_out: bool = True
    """False: only a failure (a fall) moves a row down; an episode that ran to its time-out keeps
    its level however far it walked (it held its footing on that ground)."""
    promote_ratio: float | None = None
    """A row that walked at least this share of its commanded displacement moves up, when that is
    nearer than ``promote_distance`` (which still caps it) and farther than
    ``min_promote_distance``; None: ``promote_distance`` alone, as legged_gym and Isaac Lab."""
    min_promote_distance: float = 1.0
    """With ``promote_ratio``: no promotion for walking less than this (m), so a row asked to
    stand still does not climb by drifting."""


@dataclass
class TerrainCfg:
    """The ``terrain:`` section of a task config."""

    seed: int = 0
    """Seed of every random height (>= 0)."""
    num_levels: int = 10
    """Grid rows, one per difficulty level, along world x."""
    num_cols: int = 20
    """Grid columns, sub-terrain types by proportion, along world y."""
    sub_terrain_size: list[float] = field(default_factory=lambda: [8.0, 8.0])
    """(x, y) metres of one sub-terrain."""
    horizontal_scale: float = 0.1
    """Metres between height samples."""
    border_width: float = 2.0
    """Flat border (height 0) around the grid (m)."""
    sub_terrains: dict[str, Any] = field(default_factory=dict)
    """name -> ``SubTerrainCfg`` or a mapping with its keys (null: left out)."""
    max_initial_level: int = 5
    """Rows start on levels drawn uniformly in ``[0, max_initial_level]`` (clamped to the grid)."""
    curriculum: TerrainCurriculumCfg | None = None
    """Moves rows between levels at their resets; None: rows keep their initial levels."""


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


@dataclass(frozen=True)
class _SubTerrain:
    """A checked sub-terrain type, ready to build."""

    func: Callable[..., np.ndarray]
    params: dict[str, Any]
    """Keyword arguments of ``func``, defaults filled in."""
    proportion: float
    where: str
    """Key path of the sub-terrain, ``terrain.sub_terrains.<name>``."""


def generate_terrain(cfg: TerrainCfg | Mapping[str, Any]) -> TerrainGrid:
    """Build the grid of sub-terrains ``cfg`` describes (a ``TerrainCfg``, a dict or a ``DictConfig``).

    Raises:
      ValueError: a bad config value, or a grid over ``MAX_TERRAIN_SAMPLES``, naming its key path.
      FileNotFoundError: a mesh sub-terrain's file is missing.
    """
    cfg = check_terrain_cfg(cfg)
    layout = _layout(cfg)
    _check_size(cfg, layout)
    sub_terrains = _checked_sub_terrains(cfg, layout)
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
    sub_terrain: _SubTerrain, difficulty: float, seed: int, level: int, col: int, layout: _Layout, h: float
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


def check_terrain_cfg(cfg: TerrainCfg | Mapping[str, Any]) -> TerrainCfg:
    """``cfg`` as a ``TerrainCfg`` whose grid settings are checked (``generate_terrain`` checks the
    sub-terrains too, and the size of the grid).

    Raises:
      ValueError: naming the key path of a bad or unknown key.
    """
    if isinstance(cfg, Mapping):
        try:
            cfg = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TerrainCfg), cfg))
        except OmegaConfBaseException as error:
            raise ValueError(_omegaconf_message(error, "terrain")) from None
    if not isinstance(cfg, TerrainCfg):
        raise ValueError(f"terrain config: 'terrain' must be a TerrainCfg or a mapping, got {type(cfg).__name__}")
    require(_is_int(cfg.seed) and cfg.seed >= 0, "terrain.seed", "an integer >= 0", cfg.seed)
    require(_is_int(cfg.num_levels) and cfg.num_levels >= 1, "terrain.num_levels", "an integer >= 1", cfg.num_levels)
    require(_is_int(cfg.num_cols) and cfg.num_cols >= 1, "terrain.num_cols", "an integer >= 1", cfg.num_cols)
    size = cfg.sub_terrain_size
    require(
        isinstance(size, (list, tuple)) and len(size) == 2 and all(is_number(v) and v > 0 for v in size),
        "terrain.sub_terrain_size",
        "two numbers > 0, (x, y) metres",
        size,
    )
    h = cfg.horizontal_scale
    require(
        is_number(h) and 0 < h <= min(size) / 2,
        "terrain.horizontal_scale",
        f"> 0 and at most half a sub-terrain ({min(size) / 2:g} m)",
        h,
    )
    require(is_number(cfg.border_width) and cfg.border_width >= 0, "terrain.border_width", ">= 0", cfg.border_width)
    require(
        _is_int(cfg.max_initial_level) and cfg.max_initial_level >= 0,
        "terrain.max_initial_level",
        "an integer >= 0",
        cfg.max_initial_level,
    )
    if cfg.curriculum is not None:
        promote, ratio = cfg.curriculum.promote_distance, cfg.curriculum.demote_ratio
        require(
            promote is None or (is_number(promote) and promote > 0),
            "terrain.curriculum.promote_distance",
            "> 0 m (or null: half a sub-terrain)",
            promote,
        )
        require(is_number(ratio) and 0 < ratio <= 1, "terrain.curriculum.demote_ratio", "in (0, 1]", ratio)
        share, least = cfg.curriculum.promote_ratio, cfg.curriculum.min_promote_distance
        require(
            share is None or (is_number(share) and 0 < share <= 1),
            "terrain.curriculum.promote_ratio",
            "in (0, 1] (or null: promote_distance alone)",
            share,
        )
        require(is_number(least) and least >= 0, "terrain.curriculum.min_promote_distance", ">= 0 m", least)
    require(
        isinstance(cfg.sub_terrains, Mapping), "terrain.sub_terrains", "a mapping name -> sub-terrain", cfg.sub_terrains
    )
    return cfg


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


def _checked_sub_terrains(cfg: TerrainCfg, layout: _Layout) -> dict[str, _SubTerrain]:
    """name -> its checked height function and params (null entries left out), in config order."""
    h = cfg.horizontal_scale
    block_size = (layout.n_x * h, layout.n_y * h)
    checked: dict[str, _SubTerrain] = {}
    typed: dict[str, SubTerrainCfg] = {}
    for name, entry in cfg.sub_terrains.items():
        if entry is None:
            continue
        where = f"terrain.sub_terrains.{name}"
        sub = _typed_sub_terrain(entry, where)
        require(
            is_number(sub.proportion) and sub.proportion >= 0, f"{where}.proportion", "a number >= 0", sub.proportion
        )
        typed[name] = sub
    require(bool(typed), "terrain.sub_terrains", "at least one sub-terrain", dict(cfg.sub_terrains))
    total = sum(sub.proportion for sub in typed.values())
    if abs(total - 1) > 1e-6:
        terms = " + ".join(f"{name} {sub.proportion:g}" for name, sub in typed.items())
        raise ValueError(
            "terrain config: 'terrain.sub_terrains.*.proportion' must sum to 1 (within 1e-6), "
            f"got {total:.9g} = {terms}"
        )
    for name, sub in typed.items():
        where = f"terrain.sub_terrains.{name}"
        func = _resolve_height_function(sub.func, f"{where}.func")
        params = _check_params(func, sub.func, dict(sub.params), where, block_size)
        checked[name] = _SubTerrain(func, params, sub.proportion, where)
    return checked


def _typed_sub_terrain(entry: Any, where: str) -> SubTerrainCfg:
    if isinstance(entry, SubTerrainCfg):
        return entry
    if not isinstance(entry, Mapping):
        raise ValueError(f"terrain config: '{where}' must be a mapping with func, proportion and params, got {entry!r}")
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(SubTerrainCfg), entry))
    except OmegaConfBaseException as error:
        raise ValueError(_omegaconf_message(error, where)) from None


def _resolve_height_function(path: Any, where: str) -> Callable[..., np.ndarray]:
    """Import ``"package.module.attr"`` (or ``"package.module:attr"``) from an allowed module."""
    try:
        target = import_dotted(path)
    except RefusedPath as refused:
        raise ValueError(f"terrain config: '{where}' must be {_expected(refused)}, got {path!r}") from None
    kind = "class" if inspect.isclass(target) else type(target).__name__
    require(inspect.isfunction(target), where, f"a function, not a {kind}", path)
    return target


def _expected(refused: RefusedPath) -> str:
    """What a refused height-function path should have been, for :func:`require`'s wording."""
    if refused.reason == "syntax":
        return "a dotted path such as 'unilab_gpu.terrain.sub_terrains.flat'"
    if refused.reason == "outside":
        return (
            f"in the modules height functions may come from ({', '.join(refused.allowed)}; "
            f"list more in {TERM_MODULES_ENV})"
        )
    if refused.reason == "import":
        return f"importable ({refused.detail})"
    return f"a function of module '{refused.module_name}', which has no '{refused.attr}'"


def _check_params(
    func: Callable[..., np.ndarray], path: str, params: dict[str, Any], where: str, block_size: tuple[float, float]
) -> dict[str, Any]:
    """Check the params of sub-terrain ``where`` against ``func``'s signature and values; returns
    them with the defaults filled in."""
    parameters = list(inspect.signature(func).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    leading = [p for p in parameters[: len(HEIGHT_FUNCTION_ARGS)] if p.kind in positional]
    if len(leading) < len(HEIGHT_FUNCTION_ARGS):
        raise ValueError(
            f"terrain config: '{where}.func' must be a height function "
            f"f({', '.join(HEIGHT_FUNCTION_ARGS)}, **params), got {path!r}"
        )
    named = {
        p.name: p for p in parameters[len(HEIGHT_FUNCTION_ARGS) :] if p.kind is not inspect.Parameter.VAR_POSITIONAL
    }
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in named.values())
    accepted = [n for n, p in named.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    for key, value in params.items():
        key_path = f"{where}.params.{key}"
        require(takes_any or key in accepted, key_path, f"one of the parameters of '{path}' {accepted}", key)
        _check_value(key_path, str(key), value)
    for key in accepted:
        if named[key].default is inspect.Parameter.empty and key not in params:
            raise ValueError(f"terrain config: '{where}.params.{key}' must be set ('{path}' requires it), got nothing")
    filled = {k: named[k].default for k in accepted if named[k].default is not inspect.Parameter.empty} | params
    for check in PARAM_CHECKS.get(func, ()):
        check(filled, f"{where}.params", block_size)
    return filled


def _check_value(key: str, name: str, value: Any) -> None:
    """The generic rules: ``*_range`` is ``[low, high]`` with low <= high; a width, step or scale
    is > 0; every number is finite."""
    if name.endswith("_range"):
        check_range(key, value, strict=False, config="terrain config")
    elif name.endswith(("_width", "_scale")) and name != "scale":  # horizontal lengths
        ok = is_number(value) and MIN_LENGTH <= value <= MAX_LENGTH
        require(ok, key, f"a length in [{MIN_LENGTH:g}, {MAX_LENGTH:g}] m", value)
    elif name.endswith("_step"):  # vertical steps
        require(is_number(value) and 0 < value <= MAX_HEIGHT, key, f"a height in (0, {MAX_HEIGHT:g}] m", value)
    elif name == "scale":
        require(is_number(value) and value > 0, key, "a finite number > 0", value)
    elif isinstance(value, float):
        require(is_number(value), key, "a finite number", value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _omegaconf_message(error: OmegaConfBaseException, where: str) -> str:
    key = f"{where}.{error.full_key}" if getattr(error, "full_key", "") else where
    message = " ".join(str(error).split("\n")[0].split())
    return f"terrain config: bad value at '{key}': {message}"
