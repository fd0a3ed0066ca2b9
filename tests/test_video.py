"""``unilab-play --video``: MuJoCo offscreen rendering on the CPU (EGL/OSMesa software GL), MP4
encoding, frames that follow the rollout, and the reference ghost of tracking tasks."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

iio = pytest.importorskip("imageio.v3")

from unilab_gpu.cli.play import main as play_main  # noqa: E402
from unilab_gpu.cli.train import main as train_main  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.render.offscreen import GHOST_RGBA  # noqa: E402
from unilab_gpu.render.video import VideoRecorder  # noqa: E402


def skip_without_gl(reason: str) -> None:
    """Skip on a developer machine without a GL library; CI installs one (.ci/run), so there it fails."""
    if os.environ.get("CI"):
        pytest.fail(f"offscreen rendering must work in CI: {reason}")
    pytest.skip(f"no offscreen GL backend: {reason}")


def make_recorder(env, **kwargs) -> VideoRecorder:
    try:
        return VideoRecorder(env, **kwargs)
    except Exception as error:  # no GL library or display
        skip_without_gl(f"{type(error).__name__}: {error}")
        raise


def test_g1_tracking_frames_follow_the_robot_and_show_the_ghost(tmp_path) -> None:
    env = make_env("g1_tracking", num_envs=2, device="cpu", compile=False, seed=1)
    env.reset()
    recorder = make_recorder(env, env_id=1, seconds=0.4, width=320, height=240)
    assert recorder.draws_ghost and recorder.max_frames == 20
    for step in range(30):  # more steps than the 0.4 s asked for
        env.step(torch.zeros(2, env.action_dim))
        recorder(step)
    frames = np.stack(recorder.frames)
    assert frames.shape == (20, 240, 320, 3) and frames.dtype == np.uint8
    # Frames change with the rollout, and are not blank.
    assert all(np.abs(a.astype(int) - b.astype(int)).max() > 0 for a, b in zip(frames, frames[1:], strict=False))
    assert frames.std() > 10
    # The ghost: the same state rendered with and without it differs where the ghost is drawn,
    # and there the colour moves towards the ghost's (blue over red).
    plain, ghosted = recorder.render(ghost=False).astype(int), recorder.render(ghost=True).astype(int)
    changed = np.abs(ghosted - plain).sum(axis=-1) > 30
    assert changed.mean() > 0.005, f"ghost covers {changed.mean():.4f} of the frame"
    shift = (ghosted - plain)[changed]
    assert GHOST_RGBA[2] > GHOST_RGBA[0] and (shift[:, 2] - shift[:, 0]).mean() > 10
    # The reference pose the ghost is drawn at is the motion command's, not the robot's.
    reference = env.command_manager.get("motion").reference_qpos(1)
    assert reference.shape == (env.sim.mj_model.nq,)
    assert not torch.allclose(reference, env.sim.state.qpos[1], atol=1e-3)

    path = recorder.save(tmp_path / "g1.mp4")
    recorder.close()
    decoded = iio.imread(path)
    assert decoded.shape == (20, 240, 320, 3)
    assert np.abs(decoded.astype(int) - frames.astype(int)).mean() < 8  # lossy, but the same pictures


def test_play_writes_an_mp4_of_the_chosen_world(tmp_path, capsys) -> None:
    run = tmp_path / "run"
    args = ["task=pendulum", "env.num_envs=2", "total_env_steps=8", "progress=lines", f"run_dir={run}"]
    args += ["algo.warmup_steps=2", "algo.batch_size=8", "algo.actor_hidden_dim=8", "algo.critic_hidden_dim=8"]
    assert train_main([*args, "export_onnx=false"]) == 0
    assert not (run / "policy.onnx").exists()  # the end-of-training export is switched off
    capsys.readouterr()
    video = tmp_path / "pendulum.mp4"
    assert (
        play_main(
            [str(run), "--num-envs", "2", "--device", "cpu", "--video", str(video), "--env", "1", "--seconds", "0.5"]
        )
        == 0
    )
    out = capsys.readouterr().out
    if "offscreen rendering unavailable" in out:
        skip_without_gl(out.strip().splitlines()[-1])
    assert "2 envs x 10 steps" in out  # without --steps the rollout lasts as long as the video
    assert "video: 10 frames of env 1 -> " in out and "ghost" not in out  # no motion command
    assert iio.imread(video).shape[0] == 10
    assert (
        play_main([str(run), "--video", str(video), "--force", "--env", "5", "--num-envs", "2", "--device", "cpu"]) == 2
    )
    assert "--env must be in [0, 1], got 5" in capsys.readouterr().err
