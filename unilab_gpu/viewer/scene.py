"""The 3D scene of the live viewer: K worlds side by side, reference ghosts, command arrows.

Geometry comes from mjviser (MuJoCo geoms as viser meshes, one batched handle per body shape,
K instances each); poses are computed on the host from the copied ``qpos`` with
``mujoco.mj_kinematics``. World ``k`` of the K shown is drawn shifted by ``k * spacing`` along y,
so worlds that all start at the origin stand side by side; on a generated terrain the spacing is 0
(:func:`world_spacing`): there the worlds already stand apart, each on its sub-terrain of the one
ground drawn, and a shift would stand them in the air or inside a step. The camera follows the
world chosen in mjviser's "Environment" control (its "Track camera" box); everything here moves
with it.
"""

from __future__ import annotations

import mujoco
import numpy as np
import viser
import viser.transforms as vtf
from mjviser.conversions import get_body_name, is_fixed_body, merge_geoms
from mjviser.scene import ViserMujocoScene

from unilab_gpu.viewer.feed import WorldSnapshot

GHOST_RGB = (51, 140, 255)
"""Colour of the reference ghost (the offscreen renderer's ghost blue)."""
GHOST_OPACITY = 0.4
COMMAND_RGB = (40, 200, 60)
"""Colour of the commanded velocity arrow."""
VELOCITY_RGB = (255, 140, 0)
"""Colour of the measured root velocity arrow."""
ARROW_HEIGHT = 0.6
"""Arrows start this far (m) above the root body."""


def world_spacing(model: mujoco.MjModel, on_terrain: bool) -> float:
    """Display distance (m) between neighbouring worlds along y: 0 on a generated terrain (the
    worlds share its ground and stand on their own sub-terrains), else twice the model's extent
    within [1, 2] m (side by side, clear of each other)."""
    if on_terrain:
        return 0.0
    return float(np.clip(2.0 * model.stat.extent, 1.0, 2.0))


def world_offsets(worlds: int, spacing: float) -> np.ndarray:
    """``(worlds, 3)`` display offsets: world ``k`` moved ``k * spacing`` along y."""
    offsets = np.zeros((worlds, 3))
    offsets[:, 1] = spacing * np.arange(worlds)
    return offsets


def heading_arrows(qpos: np.ndarray, planar: np.ndarray, frame: str) -> np.ndarray:
    """Start and end points ``(K, 2, 3)`` of planar velocity arrows from each world's root.

    ``planar`` ``(K, 2)`` is ``[v_x, v_y]`` in the heading (yaw-only) frame of the root
    (``frame="heading"``, a velocity command) or in the world frame (``frame="world"``); the arrow
    is 1 m long per m/s. ``qpos[:, :7]`` is the free joint (position, wxyz quaternion).
    """
    w, x, y, z = qpos[:, 3], qpos[:, 4], qpos[:, 5], qpos[:, 6]
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    if frame == "heading":
        cos, sin = np.cos(yaw), np.sin(yaw)
        planar = np.stack([cos * planar[:, 0] - sin * planar[:, 1], sin * planar[:, 0] + cos * planar[:, 1]], axis=1)
    start = qpos[:, :3] + np.array([0.0, 0.0, ARROW_HEIGHT])
    end = start + np.concatenate([planar, np.zeros((len(planar), 1))], axis=1)
    return np.stack([start, end], axis=1)


class WorldsScene:
    """Draws :class:`~unilab_gpu.viewer.feed.WorldSnapshot` s of ``worlds`` worlds of ``model``.

    Args:
      server: the viser server.
      model: the env's MuJoCo model (``env.sim.mj_model``).
      worlds: K, the number of worlds drawn.
      ghost: draw a translucent reference pose per world (snapshots carry ``reference_qpos``).
      arrows: draw the velocity command and the measured root velocity per world.
      on_terrain: the env has a generated terrain (``env.terrain``): no display offsets
        (:func:`world_spacing`).
    """

    def __init__(
        self,
        server: viser.ViserServer,
        model: mujoco.MjModel,
        worlds: int,
        ghost: bool,
        arrows: bool,
        on_terrain: bool = False,
    ):
        self.server, self.model, self.worlds = server, model, worlds
        self.spacing = world_spacing(model, on_terrain)
        self.offsets = world_offsets(worlds, self.spacing)
        self.scene = ViserMujocoScene(server, model, num_envs=worlds)
        self._data = mujoco.MjData(model)
        self._dynamic = [b for b in range(model.nbody) if not is_fixed_body(model, b)]
        self._root = self._dynamic[0] if self._dynamic else 0
        self._ghosts = self._add_ghost() if ghost else {}
        self._arrows = None
        if arrows:
            points = np.zeros((2 * worlds, 2, 3), dtype=np.float32)
            colors = np.array([COMMAND_RGB] * worlds + [VELOCITY_RGB] * worlds, dtype=np.uint8)
            self._arrows = server.scene.add_arrows(
                "/commands", points, colors, shaft_radius=0.02, head_radius=0.05, head_length=0.1
            )

    def _add_ghost(self) -> dict[int, viser.BatchedMeshHandle]:
        """One translucent batched mesh per moving body, K instances each (the robot's visible geoms)."""
        model, k = self.model, self.worlds
        geoms: dict[int, list[int]] = {}
        for g in range(model.ngeom):
            body = int(model.geom_bodyid[g])
            if not is_fixed_body(model, body) and model.geom_rgba[g, 3] > 0 and model.geom_group[g] <= 2:
                geoms.setdefault(body, []).append(g)
        handles = {}
        for body, ids in geoms.items():
            mesh = merge_geoms(model, ids)
            handles[body] = self.server.scene.add_batched_meshes_simple(
                f"/ghost/{get_body_name(model, body)}",
                mesh.vertices,
                mesh.faces,
                batched_wxyzs=np.tile([1.0, 0.0, 0.0, 0.0], (k, 1)),
                batched_positions=np.zeros((k, 3)),
                batched_colors=GHOST_RGB,
                opacity=GHOST_OPACITY,
                cast_shadow=False,
                receive_shadow=False,
            )
        return handles

    def poses(self, qpos: np.ndarray, offsets: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Body positions ``(K, nbody, 3)`` (display ``offsets`` ``(K, 3)`` added, by default the
        K worlds') and rotation matrices ``(K, nbody, 3, 3)`` of ``qpos`` ``(K, nq)``, by forward
        kinematics on the host."""
        offsets = self.offsets if offsets is None else offsets
        xpos = np.empty((len(qpos), self.model.nbody, 3))
        xmat = np.empty((len(qpos), self.model.nbody, 3, 3))
        for k, q in enumerate(qpos):
            self._data.qpos[:] = q
            mujoco.mj_kinematics(self.model, self._data)
            xpos[k] = self._data.xpos + offsets[k]
            xmat[k] = self._data.xmat.reshape(-1, 3, 3)
        return xpos, xmat

    def show(self, snapshot: WorldSnapshot) -> None:
        """Move the robots, ghosts and arrows to ``snapshot``."""
        xpos, xmat = self.poses(snapshot.qpos)
        scene = self.scene
        scene.update_from_arrays(xpos, xmat)
        # mjviser shifts the scene so that the followed world's root stays at the origin.
        follow = scene.camera_tracking_enabled
        shift = -xpos[scene.env_idx, self._root] if follow else np.zeros(3)
        # mjviser's "Hide others" draws the followed world alone; so do the ghosts and arrows.
        shown = slice(scene.env_idx, scene.env_idx + 1) if scene.show_only_selected else slice(None)
        with self.server.atomic():
            if self._ghosts and snapshot.reference_qpos is not None:
                ghost_pos, ghost_mat = self.poses(snapshot.reference_qpos[shown], self.offsets[shown])
                ghost_quat = vtf.SO3.from_matrix(ghost_mat).wxyz
                for body, handle in self._ghosts.items():
                    handle.batched_positions = (ghost_pos[:, body] + shift).astype(np.float32)
                    handle.batched_wxyzs = ghost_quat[:, body].astype(np.float32)
            if self._arrows is not None and snapshot.command is not None:
                qpos = snapshot.qpos[shown].copy()
                qpos[:, :3] += self.offsets[shown]
                command = heading_arrows(qpos, snapshot.command[shown, :2], "heading")
                measured = heading_arrows(qpos, snapshot.base_velocity[shown, :2], "world")
                colors = np.array([COMMAND_RGB] * len(qpos) + [VELOCITY_RGB] * len(qpos), dtype=np.uint8)
                self._arrows.points = (np.concatenate([command, measured]) + shift).astype(np.float32)
                self._arrows.colors = colors
