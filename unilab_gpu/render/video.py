"""Frames of one world of an env after each step, written as MP4 (or GIF) with imageio.

Needs the ``video`` extra (``pip install "unilab-gpu[video]"``: imageio with its ffmpeg
binary) and an offscreen GL backend (see :mod:`unilab_gpu.render.offscreen`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import imageio.v3 as iio
import mujoco
import numpy as np

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.render.offscreen import OffscreenRenderer
from unilab_gpu.utils.files import write_atomic


class VideoRecorder:
    """Renders world ``env_id`` after each call, for at most ``seconds`` of env time.

    Tasks whose ``motion`` command has ``reference_qpos`` (motion tracking) get the reference
    pose drawn as a translucent ghost. Frames are kept in memory: ``640 x 480`` is about 0.9 MB
    a frame, 10 s at 50 Hz about 460 MB; lower ``seconds`` or the size for long clips.
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        env_id: int = 0,
        seconds: float = 10.0,
        width: int = 640,
        height: int = 480,
    ) -> None:
        if not 0 <= env_id < env.num_envs:
            raise ValueError(f"video: --env must be in [0, {env.num_envs - 1}], got {env_id}")
        if seconds <= 0:
            raise ValueError(f"video: --seconds must be > 0, got {seconds}")
        self.env, self.env_id = env, env_id
        self.max_frames = max(1, math.ceil(seconds / env.step_dt))
        model = env.sim.mj_model
        self._data = mujoco.MjData(model)
        root = int(model.jnt_bodyid[0]) if model.njnt else 1
        self.renderer = OffscreenRenderer(model, width, height, body=max(root, 1))
        try:
            command = env.command_manager.get("motion")
        except KeyError:
            command = None
        self._reference = getattr(command, "reference_qpos", None)
        self.frames: list[np.ndarray] = []

    @property
    def draws_ghost(self) -> bool:
        return self._reference is not None

    def __call__(self, step: int) -> None:
        if len(self.frames) >= self.max_frames:
            return
        self.frames.append(self.render())

    def render(self, ghost: bool = True) -> np.ndarray:
        """The current frame of the world (with the reference ghost when the task has one)."""
        state = self.env.sim.state
        self._data.qpos[:] = state.qpos[self.env_id].detach().cpu().numpy()
        self._data.qvel[:] = state.qvel[self.env_id].detach().cpu().numpy()
        mujoco.mj_forward(self.env.sim.mj_model, self._data)
        reference = None
        if ghost and self._reference is not None:
            reference = self._reference(self.env_id).detach().cpu().numpy()
        return self.renderer.render(self._data, reference)

    def save(self, path: str | os.PathLike) -> Path:
        """Encode the frames at the env's control rate (``.mp4``; ``.gif`` also works) and write
        them atomically (``utils.files.write_atomic``): a failed write leaves no half a video."""
        return write_video(path, self.frames, 1.0 / self.env.step_dt)

    def close(self) -> None:
        self.renderer.close()


def write_video(path: str | os.PathLike, frames: list[np.ndarray], fps: float) -> Path:
    """Encode ``(height, width, 3)`` uint8 ``frames`` at ``fps`` into ``path`` (``.mp4``; ``.gif``
    also works), atomically (``utils.files.write_atomic``): a failed write leaves no half a video."""
    path = Path(path)
    stacked = np.stack(frames)
    if path.suffix.lower() == ".gif":
        data = iio.imwrite("<bytes>", stacked, extension=".gif", duration=1e3 / fps, loop=0)
    else:
        data = iio.imwrite("<bytes>", stacked, extension=path.suffix or ".mp4", fps=fps)
    return write_atomic(path, lambda file: file.write(data))
