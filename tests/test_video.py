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
    with pytest.raises(SystemExit) as stop:  # refused by the parser, before any env is built
        play_main([str(run), "--video", str(video), "--force", "--env", "5", "--num-envs", "2", "--device", "cpu"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "unilab-play: error: --env 5 is not a world of the env's 2 (--num-envs); expected 0 to 1" in err


# The scene a video shows: the G1 model with its robot painted red, so its pixels can be told
# from the floor's and the sky's.
RED = (0.9, 0.1, 0.1, 1.0)


@pytest.fixture(scope="module")
def red_g1():
    """``(model, data, renderer)``: the G1 scene at its keyframe, robot geoms red, 240 x 180."""
    import mujoco

    from unilab_gpu.render.offscreen import OffscreenRenderer
    from unilab_gpu.sim.model_files import load_mj_model

    model = load_mj_model("g1")
    model.geom_rgba[model.geom_bodyid > 0] = RED
    data = mujoco.MjData(model)
    data.qpos[:] = model.key_qpos[0]
    mujoco.mj_forward(model, data)
    try:
        renderer = OffscreenRenderer(model, 240, 180, body=1)
    except Exception as error:  # no GL library or display
        skip_without_gl(f"{type(error).__name__}: {error}")
    yield model, data, renderer
    renderer.close()


def robot_pixels(frame: np.ndarray, grow: int = 0) -> np.ndarray:
    """``(height, width)`` mask of the red robot, widened by ``grow`` pixels (antialiased edges)."""
    frame = frame.astype(int)
    mask = frame[..., 0] > np.maximum(frame[..., 1], frame[..., 2]) + 25
    out = mask.copy()
    for dy in range(-grow, grow + 1):
        for dx in range(-grow, grow + 1):
            out |= np.roll(mask, (dy, dx), axis=(0, 1))
    return out


def test_the_camera_follows_the_robot_across_the_floor(red_g1) -> None:
    import mujoco

    model, data, renderer = red_g1
    centres = []
    for x, y in [(0.0, 0.0), (2.0, 0.0), (4.0, 1.5), (-3.0, -2.0)]:  # metres: a fixed camera loses it
        data.qpos[:2] = x, y
        mujoco.mj_forward(model, data)
        rows, cols = np.nonzero(robot_pixels(renderer.render(data)))
        assert rows.size > 0.01 * 240 * 180, f"robot out of view at ({x}, {y})"
        centres.append((rows.mean() / 180, cols.mean() / 240))
    # The robot's pixels stay around the frame's centre (fractions of its height and width)...
    assert np.allclose(centres, 0.5, atol=0.1), centres
    # ...and the camera keeps its height: moving sideways does not move the robot in the picture.
    assert np.ptp(np.array(centres), axis=0).max() < 0.01, centres
    data.qpos[:2] = 0.0
    mujoco.mj_forward(model, data)


def test_light_sky_checker_floor_and_no_shadow_speckles(red_g1) -> None:
    import mujoco

    model, data, renderer = red_g1
    frame = renderer.render(data).astype(int)
    sky, floor = frame[:15], frame[-40:]  # above the horizon; the floor before the feet
    assert sky.mean() > 150 and sky[..., 2].mean() > sky[..., 0].mean() + 30  # light and blue, not black
    # Checker squares: two floor shades (0.62 and 0.5 grey in scene.xml), far apart in brightness.
    shades = floor.mean(axis=-1)
    assert shades.std() > 6 and np.percentile(shades, 90) - np.percentile(shades, 10) > 15
    # No shadow: no floor pixel outside the robot is darker than the same scene without the
    # robot (robot geoms with alpha 0 are not drawn). MuJoCo's shadow map draws ~100 here.
    model.geom_rgba[model.geom_bodyid > 0, 3] = 0.0
    empty = renderer.render(data).astype(int)
    model.geom_rgba[model.geom_bodyid > 0, 3] = 1.0
    for lift in (0.0, 0.3):  # standing, and held in the air (a shadow would fall clear of the feet)
        data.qpos[2] = model.key_qpos[0][2] + lift
        mujoco.mj_forward(model, data)
        frame = renderer.render(data).astype(int)
        dark = (frame.mean(-1) < empty.mean(-1) - 25) & ~robot_pixels(frame, grow=2)
        assert dark.sum() == 0, f"{dark.sum()} shadow pixels with the robot {lift} m up"
    data.qpos[:] = model.key_qpos[0]
    mujoco.mj_forward(model, data)


def test_the_ghost_lets_the_floor_show_through(red_g1) -> None:
    """Alpha blending: over a floor whose colour changes, a ghost pixel changes by (1 - alpha)
    of the floor's change; an opaque ghost would hide it (a ratio of about 0.1 here)."""
    model, data, renderer = red_g1
    ghost_qpos = data.qpos.copy()
    ghost_qpos[1] += 0.8  # beside the robot, over the floor
    material = model.geom_matid[0]  # the floor's
    renders = {}
    for shade in (1.0, 0.3):
        model.mat_rgba[material] = (shade, shade, shade, 1.0)
        renders[shade] = renderer.render(data).astype(int), renderer.render(data, ghost_qpos).astype(int)
    model.mat_rgba[material] = (1.0, 1.0, 1.0, 1.0)
    (plain_light, ghost_light), (plain_dark, ghost_dark) = renders[1.0], renders[0.3]
    ghost = (np.abs(ghost_light - plain_light).sum(-1) > 30) & ~robot_pixels(plain_light, grow=2)
    over_floor = ghost & (np.abs(plain_light - plain_dark).sum(-1) > 60)
    assert over_floor.sum() > 300, "the ghost should cover part of the floor"
    ratio = np.abs(ghost_light - ghost_dark)[over_floor].sum() / np.abs(plain_light - plain_dark)[over_floor].sum()
    assert 0.25 < ratio < 0.85, f"floor shows through the ghost by {ratio:.2f} (alpha {GHOST_RGBA[3]})"
