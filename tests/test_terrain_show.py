"""What shows or replays a rough-terrain env shows its ground: the run folder's ``scene.xml`` (the
exact scene, for MuJoCo's viewer), the env that ``unilab-play`` (and so ``--video`` and
``--viewer``) rebuilds from a run, the live viewer's worlds (where they stand, not side by side) and
the offscreen renderer (the heightfield drawn, the camera on the robot wherever the ground puts it).

A small terrain of 2 levels x 3 columns (rough, pyramid_stairs, pyramid_stairs_inv) of 4 m keeps every env a
second to build.
"""

from __future__ import annotations

import os

import mujoco
import numpy as np
import pytest
import torch
from rl_agent_helpers import TINY_SAC_OVERRIDES
from terrain_helpers import SMALL_TERRAIN

from unilab_gpu.cli import play as play_cli
from unilab_gpu.cli.train import main as train_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import robot_asset
from unilab_gpu.sim.model_files import scene_xml
from unilab_gpu.terrain.generator import generate_terrain
from unilab_gpu.terrain.scene import add_terrain
from unilab_gpu.training import run as run_module
from unilab_gpu.training.run import write_scene
from unilab_gpu.utils.files import SCENE_NAME

TASK = "go2_velocity_rough"
QUIET = ["events.push=null"]
TINY_SAC = [
    "algo=sac",
    *TINY_SAC_OVERRIDES,
]
TEXT_ROUNDING = 1e-6
"""MuJoCo writes the heightfield's normalised samples as text with 6 significant digits (measured:
at most 4.8e-7 off the model's float32 samples)."""


def _captured(monkeypatch, module, name: str = "make_env") -> list:
    """Every env ``module.make_env`` builds, in order."""
    built: list = []
    make = getattr(module, name)

    def recording(*args, **kwargs):
        built.append(make(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(module, name, recording)
    return built


# -- run folder, play ----------------------------------------------------------------------------
def test_the_run_folder_holds_the_scene_and_play_rebuilds_the_training_terrain(tmp_path, monkeypatch, capsys):
    trained = _captured(monkeypatch, run_module)
    run = tmp_path / "run"
    overrides = "env.overrides=[" + ",".join(f"'{o}'" for o in [*SMALL_TERRAIN, *QUIET]) + "]"
    args = [f"task={TASK}", "env.num_envs=2", "total_env_steps=4", "progress=lines", "export_onnx=false"]
    assert train_main([*args, *TINY_SAC, overrides, f"run_dir={run}"]) == 0
    (env,) = trained
    model = env.sim.mj_model
    # scene.xml: MuJoCo loads it on its own, with the training env's heightfield and degrees of freedom.
    scene = mujoco.MjModel.from_xml_path(str(run / SCENE_NAME))
    assert (scene.nv, scene.nq, scene.nu, scene.nhfield) == (model.nv, model.nq, model.nu, 1)
    assert (scene.hfield_nrow[0], scene.hfield_ncol[0]) == env.terrain_grid.heights.shape
    np.testing.assert_allclose(scene.hfield_data, model.hfield_data, rtol=0, atol=TEXT_ROUNDING)
    np.testing.assert_allclose(scene.hfield_size, model.hfield_size, rtol=1e-6)
    floor = next(g for g in range(scene.ngeom) if scene.geom_type[g] == mujoco.mjtGeom.mjGEOM_HFIELD)
    np.testing.assert_allclose(scene.geom_pos[floor], model.geom_pos[floor], atol=1e-6)
    assert scene.opt.timestep == model.opt.timestep and scene.nkey == model.nkey
    # unilab-play (its --video and --viewer render this env) rebuilds the same terrain from the run.
    played = _captured(monkeypatch, play_cli)
    play_cli.play(run, steps=1, num_envs=2, device="cpu")
    (again,) = played
    assert again.terrain_grid.heights.tobytes() == env.terrain_grid.heights.tobytes()
    assert np.array_equal(again.sim.mj_model.hfield_data, model.hfield_data)
    assert (
        again.terrain_grid.column_types
        == env.terrain_grid.column_types
        == ("rough", "pyramid_stairs", "pyramid_stairs_inv")
    )


def test_a_flat_ground_run_writes_no_scene(tmp_path) -> None:
    env = make_env("go2_velocity", num_envs=1, device="cpu", compile=False, announce=False)
    assert write_scene(env, tmp_path) is None and not (tmp_path / SCENE_NAME).exists()


OBJ = "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"


def test_scene_xml_makes_relative_asset_folders_absolute(tmp_path) -> None:
    """A robot whose MJCF names its meshes relative to its own folder: the scene written elsewhere
    loads (the mesh found), with the terrain in place of its floor."""
    robot = tmp_path / "robot"
    (robot / "meshes").mkdir(parents=True)
    (robot / "meshes" / "tetra.obj").write_text(OBJ)
    (robot / "scene.xml").write_text(
        '<mujoco><compiler meshdir="meshes"/><asset><mesh name="tetra" file="tetra.obj"/></asset>'
        '<worldbody><geom name="floor" type="plane" size="0 0 .05"/>'
        '<body pos="0 0 0.5"><freejoint/><geom type="mesh" mesh="tetra"/></body></worldbody></mujoco>'
    )
    grid = generate_terrain(
        {
            "num_levels": 1,
            "num_cols": 1,
            "sub_terrain_size": [2.0, 2.0],
            "border_width": 0.5,
            "sub_terrains": {"rough": {"func": "unilab_gpu.terrain.sub_terrains.random_rough", "proportion": 1.0}},
        }
    )
    written = tmp_path / "elsewhere" / "scene.xml"
    written.parent.mkdir()
    written.write_text(scene_xml(robot / "scene.xml", lambda spec: add_terrain(spec, grid)))
    model = mujoco.MjModel.from_xml_path(str(written))
    original = mujoco.MjModel.from_xml_path(str(robot / "scene.xml"))
    assert model.nmesh == 1 and np.array_equal(model.mesh_vert, original.mesh_vert)
    assert model.nhfield == 1 and model.nv == original.nv == 6


# -- live viewer ---------------------------------------------------------------------------------
def test_live_viewer_draws_terrain_worlds_where_they_stand() -> None:
    """On a terrain the worlds share one ground and stand on their sub-terrains: no side-by-side
    shift (spacing 0), so each robot is drawn on its own ground; on a flat floor they are shifted."""
    pytest.importorskip("mjviser")
    from unilab_gpu.viewer.live import LiveViewer
    from unilab_gpu.viewer.scene import world_spacing

    overrides = [*SMALL_TERRAIN, *QUIET]
    env = make_env(TASK, num_envs=3, device="cpu", compile=False, seed=0, overrides=overrides, announce=False)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.action_dim))
    live = LiveViewer(env, worlds=3, port=0, mode="train")
    try:
        scene = live.scene
        assert scene.spacing == 0.0 and not scene.offsets.any()
        root = env.sim.state.qpos[:, :3].numpy()
        assert np.ptp(root[:, 1]) > 3.0  # three columns of 4 m: the worlds already stand apart
        scene.scene.env_idx, scene.scene.show_only_selected = 1, False
        live.feed.maybe_copy(force=True)
        assert live.draw()
        # The followed world's root is at the origin; the others where they stand relative to it.
        starts = scene._arrows.points[:3, 0]
        np.testing.assert_allclose(starts, root - root[1] + [0.0, 0.0, 0.6], atol=1e-5)
    finally:
        live.close()
    flat = mujoco.MjModel.from_xml_path(str(robot_asset("go2")))
    assert world_spacing(flat, on_terrain=False) == pytest.approx(np.clip(2 * flat.stat.extent, 1.0, 2.0))


# -- offscreen renderer --------------------------------------------------------------------------
def _recorder(env):
    iio = pytest.importorskip("imageio.v3")  # noqa: F841 (the video extra)
    from unilab_gpu.render.video import VideoRecorder

    try:
        return VideoRecorder(env, env_id=0, seconds=0.1, width=160, height=128)
    except Exception as error:  # no GL library or display: skipped here, a failure in CI (tests/test_video.py)
        if os.environ.get("CI"):
            raise
        pytest.skip(f"no offscreen GL backend: {type(error).__name__}: {error}")


def test_a_rendered_rough_frame_shows_the_ground_and_the_robot_on_a_high_sub_terrain() -> None:
    """The Go2 on 1.2 m high stairs: the camera looks at the ground there plus the robot's centre
    height (not at the terrain's statistic centre, metres below), so the robot is in the middle of
    the frame; hiding the floor geom changes most of the picture (MuJoCo draws the heightfield)."""
    high = [*SMALL_TERRAIN, *QUIET, "terrain.sub_terrains.pyramid_stairs.params.step_height_range=[0.4,0.4]"]
    env = make_env(TASK, num_envs=1, device="cpu", compile=False, seed=0, overrides=high, announce=False)
    env.reset()
    x, y, z = env.terrain_grid.origins[1, 1]  # pyramid_stairs, top level: the platform
    assert z == pytest.approx(1.2, abs=1e-5)
    qpos = env.sim.state.qpos.clone()
    qpos[0, :3] = torch.tensor([x + 0.1, y - 0.1, z + float(env.robot.default_qpos[2])])
    env.sim.write_rows(torch.arange(1), qpos, torch.zeros_like(env.sim.state.qvel))
    env.sim.refresh()
    recorder = _recorder(env)
    renderer = recorder.renderer
    try:
        from unilab_gpu.render.offscreen import robot_statistic

        env_model = env.sim.mj_model
        assert env_model.stat.extent > 5.0  # the terrain's statistic, left alone in the env's model
        centre, extent = robot_statistic(env_model)
        assert renderer.model is not env_model and renderer.model.stat.extent == pytest.approx(extent)
        assert extent < 1.0 and 0.2 < centre[2] < 0.5
        shown = recorder.render().astype(int)
        lookat = np.array(renderer.camera.lookat)
        np.testing.assert_allclose(lookat, [x + 0.1, y - 0.1, 1.2 + centre[2]], atol=1e-4)
        model, option = renderer.model, renderer.option
        floor = renderer.ground.geom
        robot = np.flatnonzero(model.geom_bodyid > 0)
        model.geom_group[floor], model.geom_group[robot] = 5, 4
        option.geomgroup[5] = 0
        no_floor = recorder.render().astype(int)
        option.geomgroup[5], option.geomgroup[4] = 1, 0
        no_robot = recorder.render().astype(int)
    finally:
        recorder.close()
    assert (np.abs(shown - no_floor).sum(axis=-1) > 30).mean() > 0.3
    robot_pixels = np.argwhere(np.abs(shown - no_robot).sum(axis=-1) > 30)
    assert len(robot_pixels) > 0.01 * shown.shape[0] * shown.shape[1]
    middle = robot_pixels.mean(axis=0) / shown.shape[:2]
    assert np.all(np.abs(middle - 0.5) < 0.2), middle
