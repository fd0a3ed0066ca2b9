"""The ground under the robot in a MuJoCo model: its floor heightfield's surface, or z = 0.

A task with a generated terrain (``terrain:`` in its config, docs/terrain.md) trains on a scene
whose floor plane became one heightfield, and measures heights from the ground under the robot
(the height scan, the fall termination). :class:`Ground` gives the runtime the same numbers from
the model alone: the heightfield's samples (``hfield_data``, normalised to ``[0, 1]`` times the
elevation range ``hfield_size[2]``, above the floor geom's ``geom_pos``), read with MuJoCo's
triangle rule, as the env's ``Terrain.heights_at`` does on the device. A model without a
heightfield floor (the robots' own ``scene.xml``) stands on z = 0.
"""

from __future__ import annotations

import hashlib

import mujoco
import numpy as np

from .policy_file import DeploymentError


def heights_sha256(heights: np.ndarray) -> str:
    """Hex sha256 of a terrain's ``(ny, nx)`` float32 heights (C order): the metadata's
    ``terrain_sha256``, which proves a runtime rebuilt the ground the policy trained on."""
    return hashlib.sha256(np.ascontiguousarray(heights, dtype=np.float32).tobytes()).hexdigest()


def floor_heightfield(model: mujoco.MjModel) -> int:
    """Id of the first heightfield geom of the world body (the terrain replaced the floor plane
    with it, ``terrain.scene.add_terrain``), or -1."""
    for geom in range(model.ngeom):
        if int(model.geom_bodyid[geom]) == 0 and int(model.geom_type[geom]) == int(mujoco.mjtGeom.mjGEOM_HFIELD):
            return geom
    return -1


class Ground:
    """Ground heights under world points of ``model``.

    Every heightfield cell is split into two triangles along the diagonal from sample ``(i, j)``
    to ``(i + 1, j + 1)``; a vertical ray hits the one under it (lower triangle when ``u >= v``,
    ``u, v`` the point's place in the cell along x and y). Points off the grid read its edge, as
    the env's ``Terrain.heights_at`` does (MuJoCo's ray would miss the heightfield there).

    Attributes:
      geom: the floor heightfield geom, or -1 (flat: every height is 0).
      heights: ``(nrow, ncol)`` float64 metres, row ``i`` at ``y = y_min + i * dy``, column ``j`` at
        ``x = x_min + j * dx`` (``None`` when flat).

    Raises:
      DeploymentError: the floor heightfield is rotated (the generated terrain never is).
    """

    def __init__(self, model: mujoco.MjModel) -> None:
        self.geom = floor_heightfield(model)
        self.heights: np.ndarray | None = None
        if self.geom < 0:
            return
        if not np.allclose(model.geom_quat[self.geom], [1.0, 0.0, 0.0, 0.0]):
            name = model.geom(self.geom).name or self.geom
            raise DeploymentError(
                f"the floor heightfield geom '{name}' is rotated (quat {model.geom_quat[self.geom].tolist()}); "
                "ground heights are read from an axis-aligned one, as the terrain generator builds"
            )
        field = int(model.geom_dataid[self.geom])
        rows, cols = int(model.hfield_nrow[field]), int(model.hfield_ncol[field])
        start = int(model.hfield_adr[field])
        half_x, half_y, elevation = (float(v) for v in model.hfield_size[field, :3])
        x, y, z = (float(v) for v in model.geom_pos[self.geom])
        samples = np.asarray(model.hfield_data[start : start + rows * cols], dtype=np.float64).reshape(rows, cols)
        self.heights = z + elevation * samples
        self.rows, self.cols = rows, cols
        self.x_min, self.y_min = x - half_x, y - half_y
        self.dx, self.dy = 2.0 * half_x / (cols - 1), 2.0 * half_y / (rows - 1)

    @property
    def flat(self) -> bool:
        """Whether the model has no heightfield floor (heights are 0)."""
        return self.heights is None

    def heights_at(self, xy: np.ndarray) -> np.ndarray:
        """Ground height ``(...)`` float64 under world points ``xy (..., 2)``."""
        xy = np.asarray(xy, dtype=np.float64)
        if self.heights is None:
            return np.zeros(xy.shape[:-1])
        gx = np.clip((xy[..., 0] - self.x_min) / self.dx, 0.0, self.cols - 1.0)
        gy = np.clip((xy[..., 1] - self.y_min) / self.dy, 0.0, self.rows - 1.0)
        j = np.minimum(np.floor(gx), self.cols - 2).astype(np.int64)
        i = np.minimum(np.floor(gy), self.rows - 2).astype(np.int64)
        u, v = gx - j, gy - i
        h = self.heights
        z00, z01, z10, z11 = h[i, j], h[i, j + 1], h[i + 1, j], h[i + 1, j + 1]
        lower = z00 + u * (z01 - z00) + v * (z11 - z01)
        upper = z00 + u * (z11 - z10) + v * (z10 - z00)
        return np.where(u >= v, lower, upper)
