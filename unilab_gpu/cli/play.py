"""``unilab-play``: roll out a trained policy with deterministic actions and report episode stats.

Usage::

    unilab-play RUN_DIR_OR_CHECKPOINT [--steps N] [--num-envs N] [--device D]
    unilab-play RUN_DIR_OR_CHECKPOINT --video out.mp4 [--env 0] [--seconds 10]
    unilab-play --onnx policy.onnx [...]      # an exported policy (unilab-export), via onnxruntime
    unilab-play RUN_DIR --viewer [--port 8080] [--worlds 4]   # live web viewer (docs/viewer.md)
    unilab-play RUN_DIR --task g1_velocity_play --override commands.twist.params.fixed=[0.8,0.0,0.3]

The env is rebuilt from the checkpoint's config (same task and task overrides) with every
episode clock starting at zero, so ``--steps`` equal to the episode length (the default) scores
one full episode per env. Reported: per-term episode rewards, episode length, terminated and
time-out rates, and for tasks whose command has ``tracking_errors()`` the mean tracking
errors (per body on ``g1_tracking``, velocity errors on ``g1_velocity``). ``--video`` renders
one world (``--env``) for ``--seconds`` of env time with MuJoCo's offscreen renderer (EGL
headless, OSMesa with ``MUJOCO_GL=osmesa``) into an MP4 at the control rate, the reference
motion drawn as a translucent ghost on tracking tasks; without ``--steps`` the rollout lasts as
long as the video. Needs the ``[video]`` extra. ``--viewer`` serves a live web viewer of
``--worlds`` worlds on ``127.0.0.1:--port`` (pause, step, speed, which worlds, camera follow;
``unilab_gpu.viewer``) and, without ``--steps``, rolls out until Ctrl-C. Needs the ``[viewer]`` extra.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from unilab_gpu.cli.arguments import MAX_SECONDS, PORT, SEED, Bound, check_bounds, whole
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.evaluation.policies import load_policy
from unilab_gpu.evaluation.rollout import evaluate
from unilab_gpu.rl.checkpoint import CheckpointError, resolve_checkpoint
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.utils.files import check_output
from unilab_gpu.viewer.checks import check_port_free, check_viewer_extra


class TrackingErrors:
    """Mean over steps of the ``tracking_errors()`` (name -> float) of the task's first command
    term that has one (``motion`` first: per-body errors; the velocity task's ``twist``: velocity
    errors), or nothing when no command has it.

    The per-step errors are summed on the device; :meth:`means` reads them once, at the end.
    """

    def __init__(self, env: ManagerBasedRlEnv) -> None:
        manager = env.command_manager
        names = ["motion", *(name for name in getattr(manager, "terms", {}) if name != "motion")]
        self._read = None
        for name in names:
            try:
                method = getattr(manager.get(name), "tracking_errors", None)
            except KeyError:
                continue
            if callable(method):
                self._read = method
                break
        self._sums: dict[str, torch.Tensor] = {}
        self._count = 0

    def __call__(self, step: int) -> None:
        if self._read is None:
            return
        for name, value in self._read().items():
            total = self._sums.get(name)
            self._sums[name] = value.detach().clone() if total is None else total.add_(value)
        self._count += 1

    def means(self) -> dict[str, float]:
        """Name -> mean error over the steps seen (one host read for all of them)."""
        if not self._sums:
            return {}
        totals = torch.stack([t.double() for t in self._sums.values()]).tolist()
        return {name: total / self._count for name, total in zip(self._sums, totals, strict=True)}


def make_recorder(env: ManagerBasedRlEnv, env_id: int = 0, seconds: float = 10.0):
    """A ``VideoRecorder``, or ``None`` with a one-line message when offscreen rendering is
    unavailable (no GL library, no display for GLFW)."""
    try:
        from unilab_gpu.render.video import VideoRecorder
    except ModuleNotFoundError as error:
        print(f"video: {error.name} is not installed (pip install 'unilab-gpu[video]'); continuing without video")
        return None
    try:
        return VideoRecorder(env, env_id, seconds)
    except ValueError:
        raise
    except Exception as error:  # no GL backend: mujoco raises FatalError, GL or import errors
        reason = " ".join(str(error).split())[:160]
        print(f"video: offscreen rendering unavailable ({type(error).__name__}: {reason}); continuing without video")
        return None


def start_viewer(env: ManagerBasedRlEnv, worlds: int, port: int):
    """A play-mode ``LiveViewer`` serving ``worlds`` worlds of ``env``; prints its URL."""
    check_viewer_extra()
    from unilab_gpu.viewer.live import LiveViewer

    live = LiveViewer(env, worlds, port, mode="play", rate_hz=30.0)
    print(f"viewer: {live.url}  ({worlds} of {env.num_envs} worlds; Ctrl-C to stop)", flush=True)
    return live


def play(
    checkpoint_path: str | Path | None,
    steps: int | None = None,
    num_envs: int = 16,
    device: str | None = None,
    video: str | Path | None = None,
    seed: int = 0,
    compile: bool = False,
    task: str | None = None,
    onnx: str | Path | None = None,
    video_env: int = 0,
    video_seconds: float = 10.0,
    overrides: Sequence[str] = (),
    viewer: bool = False,
    viewer_port: int = 8080,
    viewer_worlds: int = 4,
) -> dict[str, float]:
    """Roll out the checkpoint's deterministic policy, or an exported ONNX file's (``onnx``,
    run with onnxruntime on the CPU); returns (and prints) the stats.

    ``task`` replaces the training task (e.g. a ``_play`` variant without observation noise);
    it must have the same observation and action sizes. ``overrides`` (Hydra syntax) apply on top
    of the training run's task overrides, e.g. ``commands.twist.params.fixed=[0.8,0.0,0.3]``.
    ``viewer`` shows ``viewer_worlds`` worlds live on ``127.0.0.1:viewer_port`` (0: a free port);
    without ``steps`` it rolls out until Ctrl-C.
    """
    trained = load_policy(checkpoint_path, onnx, compile=compile)
    task = task or trained.task
    device = str(resolve_device(device))
    env = make_env(
        task,
        num_envs=num_envs,
        device=device,
        overrides=[*trained.env_overrides, "randomize_initial_episode_length=false", *overrides],
        seed=seed,
        compile=compile,
    )
    policy = trained.policy_for(env, task)
    source = trained.source

    live = start_viewer(env, viewer_worlds, viewer_port) if viewer else None
    if steps is None:
        if live is not None:
            steps = sys.maxsize  # until Ctrl-C
        else:
            steps = math.ceil(video_seconds / env.step_dt) if video is not None else env.max_episode_length
    errors = TrackingErrors(env)
    recorder = make_recorder(env, video_env, video_seconds) if video is not None else None
    done = [0]

    def on_step(step: int) -> None:
        errors(step)
        if recorder is not None:
            recorder(step)
        if live is not None:
            live.on_step(step)
        done[0] = step + 1

    try:
        stats = evaluate(env, policy, steps, on_step)
    except KeyboardInterrupt:
        if live is None:
            raise
        stats, steps = env.stats.summary(), done[0]
        print(f"\nviewer: stopped after {steps} steps")
    finally:
        if live is not None:
            live.close()
    if stats["episode/count"] == 0:  # means over no episode would print as zeros
        stats = {"episode/count": 0.0}
    stats.update({f"tracking/{name}": value for name, value in errors.means().items()})

    print(f"unilab-play: {task} / {source}")
    print(f"  {num_envs} envs x {steps} steps, deterministic actions, on {env.device}")
    width = max(len(k) for k in stats)
    for key, value in stats.items():
        print(f"  {key:<{width}}  {value:.6g}")
    if stats["episode/count"] == 0:
        print(f"  no episode ended within {steps} steps (episodes last up to {env.max_episode_length})")
    if recorder is not None:
        recorder.save(Path(video))
        recorder.close()
        ghost = ", reference ghost" if recorder.draws_ghost else ""
        print(f"video: {len(recorder.frames)} frames of env {video_env}{ghost} -> {video}")
    return stats


BOUNDS = {
    "--steps": Bound(1, integer=True, meaning="env steps"),
    "--num-envs": Bound(1, integer=True, meaning="worlds"),
    "--env": Bound(0, integer=True, meaning="the world rendered into --video"),
    "--seconds": Bound(0, MAX_SECONDS, low_open=True, meaning="video length in env seconds"),
    "--port": PORT,
    "--worlds": Bound(1, integer=True, meaning="worlds the viewer shows"),
    "--seed": SEED,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="unilab-play", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", nargs="?", help="run folder (uses its checkpoint.pt) or checkpoint file")
    parser.add_argument("--onnx", default=None, help="roll out this exported policy instead (unilab-export)")
    parser.add_argument("--steps", type=whole, default=None, help="env steps (default: one episode)")
    parser.add_argument("--num-envs", type=whole, default=16)
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument("--video", default=None, help="render one world into this MP4 (or GIF) file")
    parser.add_argument("--force", action="store_true", help="replace an existing --video file")
    parser.add_argument("--env", type=whole, default=0, help="world to render (default 0)")
    parser.add_argument("--seconds", type=float, default=10.0, help="video length in env seconds (default 10)")
    parser.add_argument("--viewer", action="store_true", help="serve a live web viewer (docs/viewer.md)")
    parser.add_argument("--port", type=whole, default=8080, help="viewer port on 127.0.0.1 (0: a free one)")
    parser.add_argument("--worlds", type=whole, default=4, help="worlds the viewer shows side by side (default 4)")
    parser.add_argument("--seed", type=whole, default=0)
    parser.add_argument("--compile", action="store_true", help="torch.compile env and policy")
    parser.add_argument("--task", default=None, help="play on another task config, e.g. g1_tracking_play")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="task config override (repeatable), e.g. commands.twist.params.fixed=[0.8,0.0,0.3]",
    )
    args = parser.parse_args(argv)
    check_bounds(parser, args, BOUNDS)
    if args.video is not None and args.env >= args.num_envs:
        worlds = args.num_envs
        parser.error(f"--env {args.env} is not a world of the env's {worlds} (--num-envs); expected 0 to {worlds - 1}")
    if args.viewer and args.worlds > args.num_envs:
        parser.error(f"--worlds {args.worlds} is larger than the env's {args.num_envs} worlds (--num-envs)")
    try:
        if args.viewer:  # checked before anything is built
            check_viewer_extra()
            check_port_free(args.port)
        if args.video is not None:  # checked before anything is built or rendered
            inputs = [p for p in (args.checkpoint and resolve_checkpoint(args.checkpoint), args.onnx) if p]
            check_output(args.video, "--video", force=args.force, inputs=inputs, example="rollout.mp4")
            if Path(args.video).suffix.lower() not in (".mp4", ".gif"):
                raise ValueError(f"--video: {args.video} must end in .mp4 or .gif")
        play(
            args.checkpoint,
            args.steps,
            args.num_envs,
            args.device,
            args.video,
            args.seed,
            args.compile,
            args.task,
            args.onnx,
            args.env,
            args.seconds,
            args.override,
            args.viewer,
            args.port,
            args.worlds,
        )
    except (CheckpointError, ValueError, KeyError, FileNotFoundError) as error:
        print(f"unilab-play: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
