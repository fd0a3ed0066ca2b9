"""MuJoCo's offscreen renderer for one world, with an optional translucent "ghost" pose.

The GL backend is ``MUJOCO_GL`` when set (``egl``, ``osmesa``, ``glfw``), else EGL on a machine
without a display (``DISPLAY`` unset) and GLFW otherwise. EGL needs a GPU driver or Mesa's
software rasteriser (Debian: ``libegl1 libegl-mesa0 libgl1-mesa-dri``); OSMesa needs
``libosmesa6``. The backend is chosen here, not by ``mujoco.Renderer`` (which fixes it when
``mujoco`` is first imported), so ``unilab-play --video`` works headless without setup.

The ghost is a second copy of the model's dynamic geoms (the robot, not the floor) posed at
another ``qpos``, drawn translucent: the reference motion of a tracking task.

What the picture shows otherwise comes from the model: the G1 scene (``assets/robots/g1/scene.xml``)
has a gradient sky, a checker floor and a fog colour that fades the far floor into the sky (fog is
switched on here: the far checker otherwise flickers into moiré, and a GIF of it doubles in size).
Shadows are off: Mesa's software rasteriser, which renders
every CPU-only video, draws MuJoCo's shadow maps as black speckles around the feet and on the
robot itself (shadow acne), and the translucent ghost would cast shadows of its own.

On a generated terrain (the floor is a heightfield, docs/terrain.md) MuJoCo draws the heightfield
itself, but the model's statistic is the terrain's (an extent of the grid's size, tens of metres,
and a centre at its lowest point), and MuJoCo scales the near clipping plane and the fog by it: the
picture is drawn from a copy of the model with the robot's own statistic (:func:`robot_statistic`),
so it looks as on the flat floor, and the camera follows the ground under the robot
(:class:`~unilab_gpu.deploy.ground.Ground`), so a robot on a high sub-terrain stays in view.
"""

from __future__ import annotations

import copy
import os

import mujoco
import numpy as np

from unilab_gpu.deploy.ground import Ground

GHOST_RGBA = (0.2, 0.55, 1.0, 0.4)
"""Colour of the ghost geoms (translucent blue)."""


GROUND_SPAN = 1.0
"""Side (m) of the square around the followed body whose mean ground height the camera follows
on a terrain (smooth over a stair's edge, where the ground under a point jumps)."""


def robot_statistic(model: mujoco.MjModel) -> tuple[np.ndarray, float]:
    """Centre ``(3,)`` and extent (m) of the model's moving parts at ``qpos0``: MuJoCo's model
    statistic (the bounding box of bodies, joint anchors, sites and geoms) without the world body's
    geoms (the floor, or a terrain)."""
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    points = [data.xpos[1:], data.xipos[1:], data.xanchor, data.site_xpos]
    moving = model.geom_bodyid > 0
    radius = model.geom_rbound[moving][:, None]
    points += [data.geom_xpos[moving] - radius, data.geom_xpos[moving] + radius]
    stacked = np.concatenate([p.reshape(-1, 3) for p in points])
    if len(stacked) == 0:
        return np.array(model.stat.center), float(model.stat.extent)
    low, high = stacked.min(axis=0), stacked.max(axis=0)
    return (low + high) / 2, max(float((high - low).max()), 1e-5)


def gl_backend() -> str:
    """The backend :class:`OffscreenRenderer` uses (see the module docstring)."""
    chosen = os.environ.get("MUJOCO_GL", "").strip().lower()
    if chosen:
        return chosen
    return "glfw" if os.environ.get("DISPLAY") else "egl"


def _gl_context(width: int, height: int):
    backend = gl_backend()
    if backend == "egl":
        from mujoco.egl import GLContext
    elif backend == "osmesa":
        from mujoco.osmesa import GLContext
    elif backend == "glfw":
        from mujoco.glfw import GLContext
    else:
        raise ValueError(f"MUJOCO_GL must be egl, osmesa or glfw, got {backend!r}")
    context = GLContext(width, height)
    context.make_current()
    return context


class OffscreenRenderer:
    """Renders ``(height, width, 3)`` uint8 frames of a model from a camera following ``body``.

    The camera looks at the body's horizontal position from a fixed height (the model's centre
    at its reference pose), so the horizon stays still while the robot walks and a fall shows
    as a fall rather than as the floor rising; on a terrain, from that height above the ground
    around the body (the mean over ``GROUND_SPAN``), so it climbs stairs with the robot.

    Args:
      model: the MuJoCo model.
      width, height: frame size (multiples of 16 keep MP4 encoders from rescaling).
      body: body the camera follows (default: the first body under the world).
      distance, azimuth, elevation: camera placement relative to the followed point (m, degrees).
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        width: int = 640,
        height: int = 480,
        body: int = 1,
        distance: float = 3.0,
        azimuth: float = 135.0,
        elevation: float = -15.0,
    ) -> None:
        self.ground = Ground(model)
        """The ground the camera follows (flat: z = 0)."""
        centre = model.stat.center
        if not self.ground.flat:  # the terrain's statistic would scale the picture (module docstring)
            centre, extent = robot_statistic(model)
            model = copy.copy(model)
            model.stat.center[:] = centre
            model.stat.extent = extent
        self.model = model
        """The model drawn (on a terrain, a copy with the robot's statistic)."""
        self.width, self.height = width, height
        # Offscreen buffer must hold the frame; the model's default is 640 x 480.
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        self._context = _gl_context(width, height)
        self._mjr = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._mjr)
        self._viewport = mujoco.MjrRect(0, 0, width, height)
        self._scene = mujoco.MjvScene(model, maxgeom=2 * model.ngeom + 100)
        self._scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False  # see the module docstring
        self._scene.flags[mujoco.mjtRndFlag.mjRND_FOG] = True
        self.option = mujoco.MjvOption()
        """What the picture shows (``geomgroup``, flags); MuJoCo's defaults."""
        self._perturb = mujoco.MjvPerturb()
        self.body = body
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_FREE
        self._height = float(centre[2])
        """Height of the camera's target above the ground (flat: above z = 0)."""
        self.camera.lookat[2] = self._height
        half = GROUND_SPAN / 2
        offsets = np.linspace(-half, half, 5)
        self._around = np.stack(np.meshgrid(offsets, offsets, indexing="ij"), axis=-1).reshape(-1, 2)
        self.camera.distance, self.camera.azimuth, self.camera.elevation = distance, azimuth, elevation
        self._ghost = mujoco.MjData(model)
        self._pixels = np.zeros((height, width, 3), dtype=np.uint8)

    def render(self, data: mujoco.MjData, ghost_qpos: np.ndarray | None = None) -> np.ndarray:
        """A new frame of ``data`` (forward kinematics already done), with the ghost at
        ``ghost_qpos`` ``(nq,)`` when given."""
        scene = self._scene
        self.camera.lookat[:2] = data.xpos[self.body, :2]
        if not self.ground.flat:
            ground = self.ground.heights_at(data.xpos[self.body, :2] + self._around)
            self.camera.lookat[2] = float(ground.mean()) + self._height
        mujoco.mjv_updateScene(
            self.model, data, self.option, self._perturb, self.camera, mujoco.mjtCatBit.mjCAT_ALL, scene
        )
        if ghost_qpos is not None:
            self._ghost.qpos[:] = ghost_qpos
            mujoco.mj_kinematics(self.model, self._ghost)
            first = scene.ngeom
            mujoco.mjv_addGeoms(
                self.model, self._ghost, self.option, self._perturb, mujoco.mjtCatBit.mjCAT_DYNAMIC, scene
            )
            for i in range(first, scene.ngeom):
                scene.geoms[i].rgba[:] = GHOST_RGBA
                scene.geoms[i].segid = -1  # not selectable, not part of the robot
        mujoco.mjr_render(self._viewport, scene, self._mjr)
        mujoco.mjr_readPixels(self._pixels, None, self._viewport, self._mjr)
        return np.flipud(self._pixels).copy()  # OpenGL's rows run bottom-up

    def close(self) -> None:
        self._mjr.free()
        self._context.free()
