"""The ``terrain:`` section of a task config (:class:`TerrainCfg`) and its checks.

A bad config raises before any heights are built, with one line naming the key path
(``terrain.sub_terrains.stairs.params.step_width``) and what it must be: the grid settings
(:func:`check_terrain_cfg`), then each sub-terrain's height function and params against the
function's signature, the generic rules of a param's name (``*_range``, ``*_width``, ...) and the
built-ins' own checks (:func:`checked_sub_terrains`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import MISSING, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.terrain.sub_terrains import MAX_HEIGHT, MAX_LENGTH, MIN_LENGTH, PARAM_CHECKS, require
from unilab_gpu.utils.checks import check_range, is_number
from unilab_gpu.utils.imports import TERM_MODULES_ENV, RefusedPath, import_dotted

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
class SubTerrain:
    """A checked sub-terrain type, ready to build."""

    func: Callable[..., np.ndarray]
    params: dict[str, Any]
    """Keyword arguments of ``func``, defaults filled in."""
    proportion: float
    where: str
    """Key path of the sub-terrain, ``terrain.sub_terrains.<name>``."""


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


def checked_sub_terrains(cfg: TerrainCfg, block_size: tuple[float, float]) -> dict[str, SubTerrain]:
    """name -> its checked height function and params (null entries left out), in config order.

    Args:
      block_size: (x, y) metres of one sub-terrain as sampled (the size-dependent checks read it).
    """
    checked: dict[str, SubTerrain] = {}
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
        checked[name] = SubTerrain(func, params, sub.proportion, where)
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
