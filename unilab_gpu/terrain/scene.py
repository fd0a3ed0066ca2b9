"""The terrain in the MuJoCo model: the scene's floor plane becomes one heightfield of the grid.

One heightfield for the whole grid (not one geom per sub-terrain): MJWarp collides spheres,
capsules, boxes and meshes with heightfields on the device, a single geom keeps the broadphase at
one world geom, and the surface is the grid itself, which :class:`~unilab_gpu.terrain.terrain.Terrain`
reads for height scans without a ray cast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import mujoco
import numpy as np

if TYPE_CHECKING:
    from unilab_gpu.terrain.generator import TerrainGrid

TERRAIN_HFIELD = "terrain"
"""Name of the heightfield asset the floor geom refers to."""

BASE_DEPTH = 0.5
"""Depth (m) of the heightfield's solid base below its lowest point: MuJoCo closes the surface
with a box this deep, so nothing falls through a pit's floor."""


def add_terrain(spec: mujoco.MjSpec, grid: TerrainGrid) -> None:
    """Replace the first plane geom of ``spec``'s world body (the scene's floor) with the terrain.

    The floor keeps its name, material, friction and collision bits; only its shape changes, so
    everything that names or filters the floor still does. MuJoCo stores heightfield samples
    normalized to ``[0, 1]`` times the elevation range ``size[2]`` above the geom's position, so the
    geom sits at the lowest height and ``size[2]`` spans to the highest.

    Raises:
      ValueError: the scene has no plane in its world body to replace.
    """
    floor = next((g for g in spec.worldbody.geoms if g.type == mujoco.mjtGeom.mjGEOM_PLANE), None)
    if floor is None:
        raise ValueError(
            'terrain: the scene has no floor to replace (a <geom type="plane"> in its worldbody); '
            "add one to the robot's scene.xml"
        )
    heights = np.asarray(grid.heights, dtype=np.float64)
    rows, cols = heights.shape
    low, high = float(heights.min()), float(heights.max())
    span = high - low
    normalized = (heights - low) / span if span > 0 else np.zeros_like(heights)
    half_x = (cols - 1) * grid.horizontal_scale / 2
    half_y = (rows - 1) * grid.horizontal_scale / 2
    spec.add_hfield(
        name=TERRAIN_HFIELD,
        size=[half_x, half_y, span if span > 0 else 1.0, BASE_DEPTH],
        nrow=rows,
        ncol=cols,
        userdata=normalized.astype(np.float32).ravel().tolist(),
    )
    floor.type = mujoco.mjtGeom.mjGEOM_HFIELD
    floor.hfieldname = TERRAIN_HFIELD
    floor.pos = [grid.x_min + half_x, grid.y_min + half_y, low]
    floor.quat = [1.0, 0.0, 0.0, 0.0]
