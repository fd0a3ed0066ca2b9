"""``unilab-play``: roll out a trained policy with deterministic actions and report episode stats.

Usage::

    unilab-play RUN_DIR_OR_CHECKPOINT [--steps N] [--num-envs N] [--device D] [--video out.gif]

The env is rebuilt from the checkpoint's config (same task and task overrides) with every
episode clock starting at zero, so ``--steps`` equal to the episode length (the default) scores
one full episode per env. Reported: per-term episode rewards, episode length, terminated and
time-out rates, and for tasks whose ``motion`` command has ``tracking_errors()`` the mean
per-body tracking errors. ``--video`` renders env 0 with MuJoCo's offscreen renderer into an
animated GIF when an OpenGL backend is available (set ``MUJOCO_GL=egl`` or ``osmesa`` on a
headless machine).
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import mujoco
import numpy as np
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv
from unilab_gpu.rl.checkpoint import CheckpointError, load_checkpoint
from unilab_gpu.rl.evaluate import agent_policy, evaluate
from unilab_gpu.rl.factory import algo_config, make_agent

VIDEO_FPS_CAP = 50
"""Frames per second of the GIF at most (GIF frame delays are whole centiseconds)."""


class TrackingErrors:
    """Mean over steps of ``env.command_manager.get("motion").tracking_errors()`` (name -> float),
    or nothing when the task has no such command."""

    def __init__(self, env: ManagerBasedRlEnv) -> None:
        try:
            term = env.command_manager.get("motion")
        except KeyError:
            term = None
        method = getattr(term, "tracking_errors", None)
        self._read = method if callable(method) else None
        self._sums: dict[str, float] = {}
        self._count = 0

    def __call__(self, step: int) -> None:
        if self._read is None:
            return
        for name, value in self._read().items():
            self._sums[name] = self._sums.get(name, 0.0) + float(value)
        self._count += 1

    def means(self) -> dict[str, float]:
        return {name: total / self._count for name, total in self._sums.items()}


class GifRecorder:
    """Renders world 0 of the env after each step; :meth:`save` writes an animated GIF."""

    def __init__(self, env: ManagerBasedRlEnv, width: int = 480, height: int = 360) -> None:
        self.env = env
        model = env.sim.mj_model
        self._data = mujoco.MjData(model)
        with warnings.catch_warnings():  # GLFW reports a missing display as warnings, then fails
            warnings.simplefilter("ignore")
            self._renderer = mujoco.Renderer(model, height, width)
        self.frames: list[np.ndarray] = []

    def __call__(self, step: int) -> None:
        state = self.env.sim.state
        self._data.qpos[:] = state.qpos[0].detach().cpu().numpy()
        self._data.qvel[:] = state.qvel[0].detach().cpu().numpy()
        mujoco.mj_forward(self.env.sim.mj_model, self._data)
        self._renderer.update_scene(self._data)
        self.frames.append(self._renderer.render().copy())

    def save(self, path: Path) -> None:
        from PIL import Image

        stride = max(1, math.ceil(1.0 / (VIDEO_FPS_CAP * self.env.step_dt)))  # keep at most the cap
        images = [Image.fromarray(frame) for frame in self.frames[::stride]]
        duration_ms = 1e3 * self.env.step_dt * stride
        images[0].save(path, save_all=True, append_images=images[1:], duration=duration_ms, loop=0)


def make_recorder(env: ManagerBasedRlEnv) -> GifRecorder | None:
    """A recorder, or ``None`` with a one-line message when offscreen rendering is unavailable."""
    try:
        return GifRecorder(env)
    except Exception as error:  # no GL backend: mujoco raises FatalError or a GL error
        reason = " ".join(str(error).split())[:160]
        print(f"video: offscreen rendering unavailable ({type(error).__name__}: {reason}); continuing without video")
        return None


def play(
    checkpoint_path: str | Path,
    steps: int | None = None,
    num_envs: int = 16,
    device: str | None = None,
    video: str | Path | None = None,
    seed: int = 0,
    compile: bool = False,
    task: str | None = None,
) -> dict[str, float]:
    """Roll out the checkpoint's deterministic policy; returns (and prints) the stats.

    ``task`` replaces the training task (e.g. a ``_play`` variant without observation noise);
    it must have the same observation and action sizes.
    """
    checkpoint = load_checkpoint(checkpoint_path)
    cfg = checkpoint["config"]
    task = task or cfg["task"]
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    env = make_env(
        task,
        num_envs=num_envs,
        device=device,
        overrides=[*cfg["env"]["overrides"], "randomize_initial_episode_length=false"],
        seed=seed,
        compile=compile,
    )
    sizes = (dict(env.observation_dims), env.action_dim)
    trained_sizes = (checkpoint["observation_dims"], checkpoint["action_dim"])
    if sizes != trained_sizes:
        raise ValueError(f"task '{task}' has (observation dims, action dim) {sizes}, the policy {trained_sizes}")
    agent_cfg = algo_config(cfg["algo"], compile=compile)
    # FlashSAC's per-env state (reward scaler, noise) is sized for the training envs; deterministic
    # actions accept any batch, so the agent is built as it was trained.
    agent = make_agent(agent_cfg, env.observation_dims, env.action_dim, checkpoint["num_envs"], env.device)
    agent.load_state_dict(checkpoint["trainer"]["agent"])

    steps = steps if steps is not None else env.max_episode_length
    errors = TrackingErrors(env)
    recorder = make_recorder(env) if video is not None else None

    def on_step(step: int) -> None:
        errors(step)
        if recorder is not None:
            recorder(step)

    stats = evaluate(env, agent_policy(agent), steps, on_step)
    if stats["episode/count"] == 0:  # means over no episode would print as zeros
        stats = {"episode/count": 0.0}
    stats.update({f"tracking/{name}": value for name, value in errors.means().items()})

    trained = checkpoint["trainer"]["env_steps"]
    print(f"unilab-play: {task} / {cfg['algo']['name']} after {trained:,} training env steps")
    print(f"  {num_envs} envs x {steps} steps, deterministic actions, on {env.device}")
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"  {key:<{width}}  {value:.6g}")
    if stats["episode/count"] == 0:
        print(f"  no episode ended within {steps} steps (episodes last up to {env.max_episode_length})")
    if recorder is not None and recorder.frames:
        recorder.save(Path(video))
        print(f"video: {len(recorder.frames)} frames of env 0 -> {video}")
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-play", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", help="run folder (uses its checkpoint.pt) or checkpoint file")
    parser.add_argument("--steps", type=int, default=None, help="env steps (default: one episode)")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument("--video", default=None, help="write env 0 as an animated GIF here")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="torch.compile env and policy")
    parser.add_argument("--task", default=None, help="play on another task config, e.g. g1_tracking_play")
    args = parser.parse_args(argv)
    try:
        play(args.checkpoint, args.steps, args.num_envs, args.device, args.video, args.seed, args.compile, args.task)
    except (CheckpointError, ValueError, KeyError) as error:
        print(f"unilab-play: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
