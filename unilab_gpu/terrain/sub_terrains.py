"""Height functions of the sub-terrains, and the checks of their params.

Every height function is::

    func(difficulty: float, rng: np.random.Generator, shape: tuple[int, int], horizontal_scale: float, **params)
        -> np.ndarray  # (n_y, n_x) float64 heights in metres

with ``shape = (n_y, n_x)``: row ``i`` lies along y, column ``j`` along x (MuJoCo's hfield layout), one
sample every ``horizontal_scale`` metres. The sub-terrain's centre is the middle of its samples:
sample ``(i, j)`` lies at local ``x = (j - (n_x - 1) / 2) * h``, ``y = (i - (n_y - 1) / 2) * h``. A
function draws its random numbers from ``rng`` only (its own generator, see ``generator``), so the
same seed builds the same heights.

A ``*_range`` param ``[low, high]`` is interpolated by the difficulty (0 easiest, 1 hardest):
``low + difficulty * (high - low)``, except ``size_range`` of :func:`discrete_obstacles`, which is
the interval the obstacle sides are drawn from.

``PARAM_CHECKS`` holds the extra checks of the built-in functions, run on the configured params
(defaults filled in) before any heights are built.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.utils import checks

MAX_HEIGHT = 20.0
"""Largest ``|height|`` of a terrain (m), and of a vertical step or height range: a robot walks
on metres of relief, and a height of 1e30 m would turn every contact into NaN states."""

MIN_LENGTH = 0.01
"""Shortest horizontal length param (``*_width``, ``*_scale``; m): below it a step or a coarse grid
is finer than any terrain's samples (and a grid of 1e-9 m would not fit in memory)."""

MAX_LENGTH = 1000.0
"""Longest horizontal length param (m)."""

MAX_SLOPE = 3.0
"""Steepest ``slope_range`` (rise over run: 3 is 72 degrees)."""


require = functools.partial(checks.require, config="terrain config")
"""``require(ok, key, expected, value)``: raise ``ValueError: terrain config: '<key>' must be <expected>,
got <value>`` unless ``ok`` (``utils.checks.require``)."""


def interpolate(value_range: Sequence[float], difficulty: float) -> float:
    """``low + difficulty * (high - low)`` of a ``[low, high]`` range."""
    low, high = value_range
    return low + difficulty * (high - low)


def sample_coordinates(shape: tuple[int, int], horizontal_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Local coordinates of the samples, centred on the sub-terrain: x ``(1, n_x)`` and y ``(n_y, 1)``."""
    n_y, n_x = shape
    x = (np.arange(n_x) - (n_x - 1) / 2) * horizontal_scale
    y = (np.arange(n_y) - (n_y - 1) / 2) * horizontal_scale
    return x[None, :], y[:, None]


def edge_distance(shape: tuple[int, int], horizontal_scale: float) -> np.ndarray:
    """Distance in metres from each sample to the nearest edge of the sub-terrain, ``(n_y, n_x)``.

    Counted in whole samples and multiplied once, so that rings of equal distance are exact (no
    ``0.1 + 0.1 + 0.1`` drift) and a straight path to the centre climbs by exactly ``h`` a sample."""
    n_y, n_x = shape
    j = np.arange(n_x)
    i = np.arange(n_y)
    samples = np.minimum(np.minimum(j, n_x - 1 - j)[None, :], np.minimum(i, n_y - 1 - i)[:, None])
    return samples * horizontal_scale


def _half_extent(shape: tuple[int, int], horizontal_scale: float) -> float:
    """Distance from the centre to the nearer edge sample (m)."""
    return (min(shape) - 1) * horizontal_scale / 2


def flat(difficulty: float, rng: np.random.Generator, shape: tuple[int, int], horizontal_scale: float) -> np.ndarray:
    """Flat ground: zeros ``(n_y, n_x)``."""
    del difficulty, rng, horizontal_scale
    return np.zeros(shape)


def random_rough(
    difficulty: float,
    rng: np.random.Generator,
    shape: tuple[int, int],
    horizontal_scale: float,
    noise_range: Sequence[float] = (0.02, 0.10),
    noise_step: float = 0.005,
    downsampled_scale: float = 0.2,
) -> np.ndarray:
    """Uniform noise, ``(n_y, n_x)``.

    With ``a = interpolate(noise_range, difficulty)``, heights are drawn uniformly from the
    multiples of ``noise_step`` in ``[-a, a]`` on a coarser grid (one every ``downsampled_scale``
    metres, starting at the sub-terrain's first sample), interpolated bilinearly to the samples, and
    rounded to the nearest multiple of ``noise_step`` (half up) again, so every height is a multiple
    of ``noise_step`` and ``|height| <= a``. The coarse grid keeps bumps wider than a sample, as on
    real rough ground.
    """
    amplitude = interpolate(noise_range, difficulty)
    top = math.floor(amplitude / noise_step + 1e-9)  # largest multiple of the step within the amplitude
    n_y, n_x = shape
    extent_x, extent_y = (n_x - 1) * horizontal_scale, (n_y - 1) * horizontal_scale
    m_x = math.ceil(extent_x / downsampled_scale - 1e-9) + 1
    m_y = math.ceil(extent_y / downsampled_scale - 1e-9) + 1
    coarse = rng.integers(-top, top + 1, size=(m_y, m_x)).astype(np.float64)  # in steps
    steps = _bilinear(coarse, np.arange(n_x) * horizontal_scale / downsampled_scale, axis=1)
    steps = _bilinear(steps, np.arange(n_y) * horizontal_scale / downsampled_scale, axis=0)
    # Rounded in whole steps (half up): a sample midway between two coarse points is exactly x.5 steps.
    return np.floor(steps + 0.5) * noise_step


def _bilinear(values: np.ndarray, position: np.ndarray, axis: int) -> np.ndarray:
    """Linear interpolation of ``values`` along ``axis`` at fractional indices ``position`` (one axis
    of a bilinear interpolation; ``position`` lies in ``[0, values.shape[axis] - 1]``)."""
    last = values.shape[axis] - 1
    low = np.minimum(np.floor(position).astype(np.int64), max(last - 1, 0))
    high = np.minimum(low + 1, last)
    t = position - low
    if axis == 0:
        return values[low] * (1 - t)[:, None] + values[high] * t[:, None]
    return values[:, low] * (1 - t) + values[:, high] * t


def pyramid_slope(
    difficulty: float,
    rng: np.random.Generator,
    shape: tuple[int, int],
    horizontal_scale: float,
    slope_range: Sequence[float] = (0.0, 0.4),
    platform_width: float = 1.0,
    inverted: bool = False,
) -> np.ndarray:
    """A four-sided pyramid with a flat top, ``(n_y, n_x)``.

    ``slope = interpolate(slope_range, difficulty)`` is the gradient (rise over run, the tangent of
    the angle): heights climb from 0 at the edges at exactly that gradient, straight toward the
    centre, up to a flat square platform of side ``platform_width`` at height
    ``slope * (half extent - platform_width / 2)``. On a sub-terrain longer in one axis the top is
    a ridge of the same height (``platform_width`` wide across it). ``inverted``: a pit (negated).
    """
    del rng
    slope = interpolate(slope_range, difficulty)
    top = _half_extent(shape, horizontal_scale) - platform_width / 2
    heights = slope * np.minimum(edge_distance(shape, horizontal_scale), top)
    return -heights if inverted else heights


def pyramid_stairs(
    difficulty: float,
    rng: np.random.Generator,
    shape: tuple[int, int],
    horizontal_scale: float,
    step_height_range: Sequence[float] = (0.05, 0.20),
    step_width: float = 0.3,
    platform_width: float = 1.0,
    inverted: bool = False,
) -> np.ndarray:
    """Stairs up a four-sided pyramid, ``(n_y, n_x)``.

    Concentric square rings ``step_width`` wide, the outermost at height 0, each one
    ``step_height = interpolate(step_height_range, difficulty)`` higher than the ring outside it.
    As many steps as leave a flat central platform at least ``platform_width`` wide:
    ``floor((half extent - platform_width / 2) / step_width)``, the platform is the rest.
    ``inverted``: the stairs go down into a pit.
    """
    del rng
    step_height = interpolate(step_height_range, difficulty)
    num_steps = max(math.floor((_half_extent(shape, horizontal_scale) - platform_width / 2) / step_width + 1e-9), 0)
    # 1e-9: a sample exactly on a ring's inner edge (3 * 0.1 m for 0.3 m steps) belongs to the next ring
    ring = np.floor(edge_distance(shape, horizontal_scale) / step_width + 1e-9)
    heights = step_height * np.minimum(ring, num_steps)
    return -heights if inverted else heights


def discrete_obstacles(
    difficulty: float,
    rng: np.random.Generator,
    shape: tuple[int, int],
    horizontal_scale: float,
    height_range: Sequence[float] = (0.05, 0.20),
    size_range: Sequence[float] = (0.4, 1.0),
    num_obstacles: int = 40,
    platform_width: float = 1.0,
) -> np.ndarray:
    """Random axis-aligned boxes and holes on flat ground, ``(n_y, n_x)``.

    With ``H = interpolate(height_range, difficulty)``, each of ``num_obstacles`` rectangles has
    its two sides drawn uniformly from ``size_range`` (not interpolated), its centre uniformly over
    the sub-terrain (boxes on the edge are cut), and its height uniformly from ``[H / 2, H]`` with a
    random sign (a box or a hole). A later rectangle covers an earlier one where they overlap. The
    central square of side ``platform_width`` is kept flat at height 0 for spawning.
    """
    x, y = sample_coordinates(shape, horizontal_scale)
    half_x, half_y = -x[0, 0], -y[0, 0]
    max_height = interpolate(height_range, difficulty)
    sides = rng.uniform(size_range[0], size_range[1], size=(num_obstacles, 2))
    centres = rng.uniform((-half_x, -half_y), (half_x, half_y), size=(num_obstacles, 2))
    magnitudes = rng.uniform(max_height / 2, max_height, size=num_obstacles)
    signs = rng.choice((-1.0, 1.0), size=num_obstacles)
    heights = np.zeros(shape)
    for (side_x, side_y), (centre_x, centre_y), height in zip(sides, centres, magnitudes * signs, strict=True):
        inside = (np.abs(x - centre_x) <= side_x / 2) & (np.abs(y - centre_y) <= side_y / 2)
        heights[inside] = height
    heights[(np.abs(x) <= platform_width / 2) & (np.abs(y) <= platform_width / 2)] = 0.0
    return heights


def mesh(
    difficulty: float,
    rng: np.random.Generator,
    shape: tuple[int, int],
    horizontal_scale: float,
    file: str,
    scale: float = 1.0,
    height_offset: float = 0.0,
) -> np.ndarray:
    """A mesh (OBJ or STL, e.g. the scene of a motion clip) rasterised into heights, ``(n_y, n_x)``.

    MuJoCo collides a mesh as its convex hull, so a scene mesh cannot be a collision geom as it is;
    its heights can. The mesh is loaded by MuJoCo (``file`` relative to the working directory,
    vertices times ``scale``), placed with the centre of its xy bounding box on the sub-terrain's
    centre and its lowest point at z = 0, and a ray is cast straight down at every sample
    (``mj_ray``, which hits the mesh's triangles, not its hull): the height is the hit plus
    ``height_offset`` (negative sinks the mesh), 0 where the ray misses. The difficulty does not
    change a mesh.
    """
    del difficulty, rng
    loaded = load_mesh(mesh_path(file), float(scale))
    data = mujoco.MjData(loaded.model)
    mujoco.mj_kinematics(loaded.model, data)
    x, y = sample_coordinates(shape, horizontal_scale)
    # The mesh stays where MuJoCo put it; the rays move instead (same result, one compile per file).
    centre = (loaded.low[:2] + loaded.high[:2]) / 2
    start_z = loaded.high[2] + 1.0
    half = (loaded.high[:2] - loaded.low[:2]) / 2
    nudge = 1e-6  # m: far below a sample, far above the double-precision rounding of the ray test
    heights = np.zeros(shape)
    down = np.array([0.0, 0.0, -1.0])
    geom_id = np.zeros(1, np.int32)
    for i in range(shape[0]):
        for j in range(shape[1]):
            if abs(x[0, j]) > half[0] + nudge or abs(y[i, 0]) > half[1] + nudge:
                continue  # outside the mesh's footprint: ground
            start = np.array([centre[0] + x[0, j], centre[1] + y[i, 0], start_z])
            distance = mujoco.mj_ray(loaded.model, data, start, down, None, 1, -1, geom_id)
            if distance < 0:
                # A ray exactly on a shared triangle edge can slip through: retry a micrometre off it.
                for dx, dy in ((nudge, nudge), (-nudge, -nudge), (nudge, -nudge), (-nudge, nudge)):
                    shifted = start + (dx, dy, 0.0)
                    distance = max(distance, mujoco.mj_ray(loaded.model, data, shifted, down, None, 1, -1, geom_id))
            if distance >= 0:
                heights[i, j] = start_z - distance - loaded.low[2] + height_offset
    return heights


@dataclass(frozen=True)
class LoadedMesh:
    """A mesh compiled into a one-geom MuJoCo model, with its world bounding box (m)."""

    model: mujoco.MjModel
    low: np.ndarray
    """(3,) lowest x, y, z of its vertices."""
    high: np.ndarray
    """(3,) highest x, y, z of its vertices."""


def mesh_path(file: str) -> Path:
    """The mesh file's absolute path (a relative one is relative to the working directory)."""
    return Path(file).expanduser().absolute()


@functools.lru_cache(maxsize=4)
def _load_mesh_cached(path: Path, mtime_ns: int, scale: float) -> LoadedMesh:
    del mtime_ns  # part of the cache key only: an edited file is loaded again
    spec = mujoco.MjSpec()
    asset = spec.add_mesh()
    asset.name = "terrain_mesh"
    asset.file = str(path)
    asset.scale = [scale, scale, scale]
    spec.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="terrain_mesh")
    model = spec.compile()
    # MuJoCo stores the vertices in the mesh's inertial frame and the file's pose in the geom's.
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    first, count = model.mesh_vertadr[0], model.mesh_vertnum[0]
    vertices = model.mesh_vert[first : first + count] @ data.geom_xmat[0].reshape(3, 3).T + data.geom_xpos[0]
    return LoadedMesh(model, vertices.min(axis=0), vertices.max(axis=0))


def load_mesh(path: Path, scale: float) -> LoadedMesh:
    """Compile the mesh at ``path`` (cached by path, modification time and scale).

    Raises:
      ValueError: MuJoCo cannot read it (MuJoCo's error as it is; the config check names the key).
    """
    return _load_mesh_cached(path, path.stat().st_mtime_ns, scale)


ParamCheck = Callable[[dict[str, Any], str, tuple[float, float]], None]
"""``check(params, where, sub_terrain_size)``: ``params`` with the defaults filled in, ``where``
their key path (``terrain.sub_terrains.<name>.params``), ``sub_terrain_size`` the (x, y) metres
one sub-terrain covers. Raises naming ``<where>.<key>``."""


def _bounded_ranges(*keys: str, high: float = MAX_HEIGHT, unit: str = "m") -> ParamCheck:
    """``[low, high]`` params within ``[0, high]`` (in ``unit``)."""

    def check(params: dict[str, Any], where: str, sub_terrain_size: tuple[float, float]) -> None:
        for key in keys:
            value = params[key]
            ok = value[0] >= 0 and value[1] <= high
            require(ok, f"{where}.{key}", f"[low, high] with 0 <= low <= high <= {high:g} {unit}", list(value))

    return check


def _platform_fits(params: dict[str, Any], where: str, sub_terrain_size: tuple[float, float]) -> None:
    width = params["platform_width"]
    side = min(sub_terrain_size)
    require(0 < width < side, f"{where}.platform_width", f"> 0 and < the sub-terrain's smaller side {side:g} m", width)


def _check_obstacles(params: dict[str, Any], where: str, sub_terrain_size: tuple[float, float]) -> None:
    count = params["num_obstacles"]
    require(
        isinstance(count, int) and not isinstance(count, bool) and count >= 0, f"{where}.num_obstacles", ">= 0", count
    )
    low = params["size_range"][0]
    require(low > 0, f"{where}.size_range", "[low, high] with 0 < low <= high", list(params["size_range"]))


def _check_mesh(params: dict[str, Any], where: str, sub_terrain_size: tuple[float, float]) -> None:
    file = params["file"]
    require(isinstance(file, str) and file.strip() != "", f"{where}.file", "the path of an OBJ or STL file", file)
    path = mesh_path(file)
    if not path.is_file():
        raise FileNotFoundError(
            f"terrain config: '{where}.file' must name an existing mesh file, got {file!r} ({path})"
        )
    try:
        loaded = load_mesh(path, float(params["scale"]))
    except ValueError as error:
        message = " ".join(str(error).split())
        raise ValueError(
            f"terrain config: '{where}.file' must be a mesh MuJoCo can read (OBJ, STL), got {file!r}: {message}"
        ) from None
    extent = loaded.high[:2] - loaded.low[:2]
    size_x, size_y = sub_terrain_size
    require(
        extent[0] <= size_x + 1e-9 and extent[1] <= size_y + 1e-9,
        f"{where}.file",
        f"a mesh whose xy extent (here {extent[0]:.4g} x {extent[1]:.4g} m at scale {params['scale']:g}) fits in "
        f"one sub-terrain of {size_x:g} x {size_y:g} m",
        file,
    )


PARAM_CHECKS: dict[Callable[..., np.ndarray], list[ParamCheck]] = {
    random_rough: [_bounded_ranges("noise_range")],
    pyramid_slope: [_bounded_ranges("slope_range", high=MAX_SLOPE, unit="(rise over run)"), _platform_fits],
    pyramid_stairs: [_bounded_ranges("step_height_range"), _platform_fits],
    discrete_obstacles: [_bounded_ranges("height_range"), _platform_fits, _check_obstacles],
    mesh: [_check_mesh],
}
"""The checks of a built-in height function's params, beyond the generic ones of ``generator``."""
