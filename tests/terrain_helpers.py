"""Shared pieces of the terrain tests: a small grid for the rough tasks, and MuJoCo C's view of a
terrain (a scene of the heightfield alone, heights by ``mj_ray``) as the independent reference."""

from __future__ import annotations

import mujoco
import numpy as np

from unilab_gpu.terrain.scene import add_terrain

SMALL_TERRAIN = [
    "terrain.num_levels=2",
    "terrain.num_cols=3",
    "terrain.sub_terrain_size=[4.0,4.0]",
    "terrain.border_width=0.5",
]
"""Task overrides that shrink a rough task's grid (configs/terrain/rough.yaml) to 2 levels of 3
columns of 4 m, whose types are rough, pyramid_stairs and pyramid_stairs_inv: a scene that builds
in a second and still has stairs up and down."""

RAY_TOP = 20.0
"""Height (m) the reference rays start from, above any generated ground."""


def terrain_scene(grid) -> tuple[mujoco.MjModel, mujoco.MjData]:
    """MuJoCo C's model of ``grid`` (a :class:`~unilab_gpu.terrain.generator.TerrainGrid` or its
    fields) alone: the floor plane that :func:`add_terrain` replaces, then forward kinematics."""
    spec = mujoco.MjSpec.from_string(
        '<mujoco><worldbody><geom name="floor" type="plane" size="0 0 .05"/></worldbody></mujoco>'
    )
    add_terrain(spec, grid)
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    return model, data


def ray_height(model: mujoco.MjModel, data: mujoco.MjData, x: float, y: float, ground_geom: int = 0) -> float:
    """The ground height at ``(x, y)`` as ``mj_ray`` straight down from :data:`RAY_TOP` finds it;
    the ray must hit ``ground_geom`` (the terrain's geom; 0 in :func:`terrain_scene`)."""
    geom = np.zeros(1, np.int32)
    distance = mujoco.mj_ray(model, data, np.array([x, y, RAY_TOP]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
    assert geom[0] == ground_geom, f"the ray at ({x}, {y}) hit geom {geom[0]}, not the terrain's {ground_geom}"
    return RAY_TOP - distance
