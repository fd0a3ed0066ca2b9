"""A rough-terrain policy outside its env: the metadata names the terrain, the runtime's ground
heights equal MuJoCo C's ``mj_ray`` on the rebuilt scene, its height-scan and fall twins agree with
the env's terms on the same states, and ``unilab-sim2sim`` runs the policy on the ground it trained
on (or on a terrain file), starting on the sub-terrain asked for; bad terrain options are one line.

The policy reads the height scan (``go2_velocity_rough_scan``: the Go2 rough task with the scan in
its policy group) and the env is the task's play setting (no observation noise, no pushes or
randomized gains) on a small terrain of 2 levels x 3 columns (rough, pyramid_stairs,
pyramid_stairs_inv) of 4 m, so it builds in a second.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
from terrain_helpers import SMALL_TERRAIN, ray_height

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")
import onnx  # noqa: E402

from unilab_gpu.cli.sim2sim import main as sim2sim_main  # noqa: E402
from unilab_gpu.deploy import METADATA_VERSION, Controller, DeploymentError, PolicyFile  # noqa: E402
from unilab_gpu.deploy.ground import Ground, heights_sha256  # noqa: E402
from unilab_gpu.deploy.terminations import build_fall_check  # noqa: E402
from unilab_gpu.deploy.terms import build_reader  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.export.export_run import export_agent  # noqa: E402
from unilab_gpu.export.metadata import deployment_metadata  # noqa: E402
from unilab_gpu.export.sim2sim import FallRule, Scenario, Sim2Sim, sim2sim  # noqa: E402
from unilab_gpu.export.sim2sim.scenario import scene_model  # noqa: E402
from unilab_gpu.paths import robot_asset  # noqa: E402
from unilab_gpu.rl.sac import SacAgent, SacConfig  # noqa: E402
from unilab_gpu.terrain.generator import generate_terrain  # noqa: E402

TASK = "go2_velocity_rough_scan"
PLAY = [
    "+observations.policy.enable_noise=false",
    "events.push=null",
    "events.pd_gains=null",
    "events.body_mass=null",
    "events.torso_com=null",
]
OVERRIDES = [*SMALL_TERRAIN, *PLAY]
COLUMNS = ("rough", "pyramid_stairs", "pyramid_stairs_inv")
STEPS = 10
OBS_TOLERANCE = 1e-5
"""Largest |runtime obs - env obs| on the env's state, step after step (measured: 1.0e-6)."""
SCAN_TOLERANCE = 1e-5
"""|twin - env| of the height scan on the same state: float32 torch against float64 numpy (measured:
2.1e-6 on stairs and rough ground)."""
COMMITTED_FLAT = Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx"
"""The committed policy of the flat Go2 task (exported as version 3, upgraded with ``unilab-export --upgrade``)."""


@pytest.fixture(scope="module")
def rough(tmp_path_factory) -> SimpleNamespace:
    """The env (one world), a random SAC policy reading the height scan exported from it, and the
    MuJoCo model rebuilt from the metadata's terrain."""
    torch.manual_seed(0)
    env = make_env(TASK, num_envs=1, device="cpu", compile=False, seed=1, overrides=OVERRIDES, announce=False)
    dims = env.observation_dims
    config = SacConfig(actor_hidden_dims=(32, 16), critic_hidden_dims=(8,), compile=False)
    agent = SacAgent(config, dims["policy"], dims["critic"], env.action_dim)
    torch.nn.init.normal_(agent.actor.net[-1].weight, std=0.1)  # zero at init: actions of about +-0.3 instead
    path = export_agent(env, agent, TASK, "sac", tmp_path_factory.mktemp("rough") / "rough.onnx", OVERRIDES)
    policy = PolicyFile(path)
    model = scene_model(robot_asset("go2"), generate_terrain(policy.metadata["terrain"]))
    return SimpleNamespace(env=env, path=path, policy=policy, model=model, grid=env.terrain_grid)


def _with_metadata(path: Path, out: Path, edit) -> Path:
    """A copy of an ONNX file with its metadata edited by ``edit(dict) -> dict``."""
    model = onnx.load(str(path))
    meta = edit({p.key: json.loads(p.value) for p in model.metadata_props})
    del model.metadata_props[:]
    onnx.helper.set_model_props(model, {k: json.dumps(v) for k, v in meta.items()})
    onnx.save(model, str(out))
    return out


def _quat_yaw(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _set_env_state(env, qpos: np.ndarray) -> None:
    state = env.sim.state
    env.sim.write_rows(torch.arange(1), torch.as_tensor(qpos[None], dtype=state.qpos.dtype), state.qvel.clone() * 0)
    env.sim.refresh()


def _keyframe_root(model: mujoco.MjModel) -> np.ndarray:
    """The root position of the Go2's keyframe (the metadata's ``stand``)."""
    return model.key_qpos[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "stand"), :3].copy()


def _term(group, name: str):
    return next(t for t in group.terms if t.name == name)


# -- the ground ----------------------------------------------------------------------------------
def test_ground_heights_equal_mj_ray_on_the_rebuilt_scene(rough) -> None:
    model, grid = rough.model, rough.grid
    data = mujoco.MjData(model)
    data.qpos[2] = 100.0  # the robot far above: the rays meet the terrain alone
    mujoco.mj_kinematics(model, data)
    ground = Ground(model)
    assert not ground.flat and model.geom_type[ground.geom] == mujoco.mjtGeom.mjGEOM_HFIELD
    rng = np.random.default_rng(0)
    h = grid.horizontal_scale
    ny, nx = grid.heights.shape
    x = rng.uniform(grid.x_min + 1e-3, grid.x_min + (nx - 1) * h - 1e-3, 400)
    y = rng.uniform(grid.y_min + 1e-3, grid.y_min + (ny - 1) * h - 1e-3, 400)
    # Beside sample lines (not on one: MuJoCo's ray can slip between two cells there) and on cell
    # diagonals, where the triangles meet; the stairs' edges are sample lines.
    x[:40] = grid.x_min + h * rng.integers(1, nx - 1, 40) + 1e-4
    y[40:80] = grid.y_min + h * rng.integers(1, ny - 1, 40) - 1e-4
    t = rng.uniform(0.01, (min(nx, ny) - 1) * h - 0.01, 40)
    x[80:120], y[80:120] = grid.x_min + t, grid.y_min + t + 1e-4
    want = [ray_height(model, data, a, b, ground_geom=ground.geom) for a, b in zip(x, y, strict=True)]
    got = ground.heights_at(np.stack([x, y], axis=1))
    assert np.ptp(want) > 0.3  # stairs up and down: the test sees heights, not a floor
    np.testing.assert_allclose(got, want, atol=2e-5)
    # The env's own ground (torch, float32 heights) is the same surface.
    env_heights = rough.env.terrain.heights_at(torch.tensor(np.stack([x, y], axis=1), dtype=torch.float32))
    np.testing.assert_allclose(got, env_heights.numpy(), atol=2e-5)
    # Off the grid: its edge (the border, at 0), as the env reads it.
    assert ground.heights_at(np.array([[1e3, -1e3]])).tolist() == [pytest.approx(0.0, abs=1e-6)]


def test_a_model_without_heightfield_is_flat() -> None:
    ground = Ground(mujoco.MjModel.from_xml_path(str(robot_asset("go2"))))
    assert ground.flat and ground.geom == -1
    assert ground.heights_at(np.array([[1.0, 2.0], [-3.0, 0.5]])).tolist() == [0.0, 0.0]


# -- metadata ------------------------------------------------------------------------------------
def test_metadata_names_the_terrain_and_its_heights(rough) -> None:
    meta = rough.policy.metadata
    assert meta["metadata_version"] == METADATA_VERSION == 5
    assert meta["terrain"] == json.loads(json.dumps(dataclasses.asdict(rough.env.cfg.terrain)))
    assert meta["terrain"]["num_cols"] == 3 and meta["terrain"]["sub_terrain_size"] == [4.0, 4.0]
    assert meta["terrain_sha256"] == hashlib.sha256(rough.grid.heights.tobytes()).hexdigest()
    # A runtime rebuilds the same ground from the config alone.
    assert heights_sha256(generate_terrain(meta["terrain"]).heights) == meta["terrain_sha256"]
    flat = make_env("go2_velocity", num_envs=1, device="cpu", compile=False, announce=False)
    flat_meta = deployment_metadata(flat, "go2_velocity", "sac", [])
    assert flat_meta["terrain"] is None and flat_meta["terrain_sha256"] is None


def test_a_version_3_file_loads_as_flat_ground(tmp_path) -> None:
    """A file that predates the terrain keys (docs/policies/go2_velocity_sac.onnx as exported, before
    ``unilab-export --upgrade``) loads, on flat ground."""
    old_keys = ("terrain", "terrain_sha256", "physics")
    version_3 = _with_metadata(
        COMMITTED_FLAT,
        tmp_path / "v3.onnx",
        lambda m: {**{k: v for k, v in m.items() if k not in old_keys}, "metadata_version": 3},
    )
    policy = PolicyFile(version_3)
    assert policy.metadata["metadata_version"] == 3
    assert policy.metadata["terrain"] is None and policy.metadata["terrain_sha256"] is None
    assert policy.metadata["physics"] is None  # before version 5: the MJCF's own options


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda m: {**m, "terrain_sha256": None}, "'terrain_sha256' must be set exactly when 'terrain' is"),
        (lambda m: {**m, "terrain": None}, "'terrain_sha256' must be set exactly when 'terrain' is"),
        (lambda m: {**m, "terrain_sha256": "F" * 64}, "'terrain_sha256' must be 64 lowercase hex digits"),
        (lambda m: {**m, "terrain": [1, 2]}, "'terrain' must be null (flat ground) or the terrain config"),
    ],
)
def test_bad_terrain_metadata_is_one_line(rough, edit, message) -> None:
    with pytest.raises(DeploymentError, match=re.escape(message)) as caught:
        PolicyFile(rough.path, edit(dict(rough.policy.metadata)))
    assert "\n" not in str(caught.value)


# -- twins ---------------------------------------------------------------------------------------
def test_height_scan_twin_agrees_with_the_env_on_placed_states(rough) -> None:
    """The env's HeightScan and the runtime's on the same hand-placed states over stairs up, stairs
    down and rough ground, yawed and at sample-line-free points; a twin on flat ground would be off
    by the stairs' height."""
    env, grid = rough.env, rough.grid
    controller = Controller(rough.policy, rough.model)
    meta_term = next(t for t in rough.policy.metadata["observation_terms"] if t["name"] == "height_scan")
    assert meta_term["func"] == "unilab_gpu.envs.mdp.observations.HeightScan"
    assert meta_term["params"] == {"size": [1.6, 1.0], "resolution": 0.1, "offset": 0.288}
    read = build_reader(controller.context, meta_term)
    scan = _term(env.observation_manager.groups["policy"], "height_scan")
    data = mujoco.MjData(rough.model)
    worst, spread = 0.0, 0.0
    for level, column, dx, dy, yaw in [
        (1, 1, 0.83, 0.27, 0.3),  # pyramid_stairs: over the top platform's edge
        (1, 2, -0.71, 0.93, -2.1),  # pyramid_stairs_inv
        (0, 0, 0.37, -0.42, 1.2),  # rough
        (1, 1, 1.6312, -1.2371, 3.0),  # pyramid_stairs, the scan reaching the border
    ]:
        x, y, z = grid.origins[level, column]
        qpos = env.sim.state.qpos[0].numpy().astype(np.float64).copy()
        qpos[:3] = [x + dx, y + dy, z + 0.3]
        qpos[3:7] = _quat_yaw(yaw)
        _set_env_state(env, qpos)
        want = scan(env)[0].numpy().astype(np.float64)
        data.qpos[:] = env.sim.state.qpos[0].numpy()
        got = read(data)
        assert got.shape == (17 * 11,)
        worst = max(worst, float(np.abs(got - want).max()))
        spread = max(spread, float(np.ptp(want)))
    assert worst <= SCAN_TOLERANCE, worst
    assert spread > 0.3  # a flat-ground twin would be off by this much


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"resolution": 0.0}, "observation term 'height_scan': params.resolution must be > 0 m, got 0.0"),
        ({"size": [1.0]}, "observation term 'height_scan': params.size must be [length, width] in metres, got [1.0]"),
        ({"size": [1.0, -0.5]}, "observation term 'height_scan': params.size must be >= 0 m each, got [1.0, -0.5]"),
    ],
)
def test_bad_height_scan_params_in_the_metadata_are_one_line(rough, params, message) -> None:
    term = next(t for t in rough.policy.metadata["observation_terms"] if t["name"] == "height_scan")
    term = {**term, "params": {**term["params"], **params}}
    with pytest.raises(DeploymentError, match=re.escape(message)):
        build_reader(Controller(rough.policy, rough.model).context, term)


def test_runtime_observation_with_height_scan_agrees_with_the_env(rough) -> None:
    """Over STEPS control steps of the exported policy from the env's reset state, the runtime's
    whole observation (history, last action, clocks and height scan) equals the env's, MuJoCo C's
    data set to the env's state before each observation: the two engines collide feet with a
    heightfield differently, so their own trajectories part within a few steps (measured: 2e-3
    after 8 steps on the rough sub-terrain, against 1e-5 on a flat floor)."""
    env = rough.env
    env.reset()
    controller = Controller(rough.policy, rough.model)
    run = Sim2Sim(controller, [0.0, 0.0, 0.0], FallRule.of_task(controller.metadata))
    data = run.data
    twist = env.command_manager.get("twist")
    controller.command = twist.command[0].numpy()
    layout = next(t for t in controller.metadata["observation_terms"] if t["name"] == "height_scan")
    drift, scans = [], []
    for step in range(STEPS):
        data.qpos[:] = env.sim.state.qpos[0].numpy()
        data.qvel[:] = env.sim.state.qvel[0].numpy()
        if step == 0:
            controller.reset(data, phase=float(twist.phase[0]))
        mujoco.mj_forward(rough.model, data)
        expected = env.observation_manager.obs["policy"][0].numpy().copy()
        obs = controller.observe(data)
        drift.append(float(np.abs(obs - expected).max()))
        scans.append(obs[layout["start"] : layout["stop"]])
        env.step(torch.from_numpy(rough.policy(expected)[None]))
        controller.step(data, obs)
    assert max(drift) <= OBS_TOLERANCE, drift
    assert np.ptp(scans[-1]) > 0.0 and np.abs(scans[-1] - scans[0]).max() > 0.0  # the scan moved with the robot


def test_fall_twin_measures_from_the_ground_like_the_env(rough) -> None:
    """Just above and below the fall height over the stairs' top (ground +0.48 m) and bottom
    (-0.48 m): the twin says what the env's termination says; a twin measuring from z = 0 would
    not (0.17 m over the top is 0.65 m above z = 0; 0.13 m over the bottom is below it)."""
    env, grid = rough.env, rough.grid
    fell = _term(env.termination_manager, "fell")
    min_height = float(env.cfg.robot.fall_height)
    controller = Controller(rough.policy, rough.model)
    (name, func, params), *_ = FallRule.of_task(controller.metadata).counted
    assert (name, params) == ("fell", {"min_height": min_height})
    check = build_fall_check(controller.context, name, func, params)
    assert check.text == f"root below {min_height} m above the ground"
    data = mujoco.MjData(rough.model)
    decisions = []
    for column in (1, 2):
        x, y, _ = grid.origins[1, column]
        for above in (0.02, -0.02):
            xy = np.array([x + 0.13, y - 0.21])
            ground = float(rough.env.terrain.heights_at(torch.tensor(xy[None], dtype=torch.float32))[0])
            assert abs(ground) > 0.4
            qpos = env.sim.state.qpos[0].numpy().astype(np.float64).copy()
            qpos[:3] = [*xy, ground + min_height + above]
            _set_env_state(env, qpos)
            data.qpos[:] = env.sim.state.qpos[0].numpy()
            mujoco.mj_kinematics(rough.model, data)
            decisions.append((bool(fell(env)[0]), check.check(data, 0)))
    assert decisions == [(False, False), (True, True)] * 2


# -- unilab-sim2sim on the terrain -----------------------------------------------------------------
@pytest.fixture
def starts(monkeypatch) -> list[np.ndarray]:
    """The root position each sim-to-sim run started from (its data when ``run`` is called)."""
    recorded: list[np.ndarray] = []
    run = Sim2Sim.run

    def recording(self, *args, **kwargs):
        recorded.append(self.data.qpos[:3].copy())
        return run(self, *args, **kwargs)

    monkeypatch.setattr(Sim2Sim, "run", recording)
    return recorded


def test_sim2sim_starts_on_the_chosen_sub_terrain_and_reports_it(rough, tmp_path, starts, capsys) -> None:
    out = tmp_path / "report.json"
    args = [str(rough.path), "--command", "0.3,0,0", "--seconds", "1", "--out", str(out)]
    assert sim2sim_main([*args, "--terrain-level", "0", "--sub-terrain", "pyramid_stairs_inv"]) == 0
    announced = capsys.readouterr().out
    assert "on the terrain of the policy, level 0 column 2 (pyramid_stairs_inv)" in announced
    report = json.loads(out.read_text())
    keyframe = _keyframe_root(rough.model)
    origin = rough.grid.origins[0, 2].astype(np.float64)
    np.testing.assert_array_equal(starts[0], keyframe + origin)  # exactly: sim-to-sim has no reset noise
    terrain = report["terrain"]
    assert {k: terrain[k] for k in ("source", "level", "column", "sub_terrain")} == {
        "source": "metadata",
        "level": 0,
        "column": 2,
        "sub_terrain": "pyramid_stairs_inv",
    }
    assert terrain["origin"] == origin.tolist() and terrain["sha256"] == rough.policy.metadata["terrain_sha256"]
    assert terrain["config"] == rough.policy.metadata["terrain"]
    assert report["seconds"] == 1.0 and report["falls_are"].startswith("root below 0.15 m above the ground")
    # Defaults: the top level, column 0; a column by number.
    for options, (level, column) in (({}, (1, 0)), ({"terrain_column": 1}, (1, 1))):
        report = sim2sim(Scenario(rough.path, [0.3, 0.0, 0.0], seconds=0.1, **options), announce=lambda line: None)
        assert (report["terrain"]["level"], report["terrain"]["column"]) == (level, column)
        np.testing.assert_array_equal(starts[-1], keyframe + rough.grid.origins[level, column])
        assert report["terrain"]["sub_terrain"] == COLUMNS[column]


def test_a_terrain_file_replaces_the_ground_for_the_run(rough, tmp_path, starts) -> None:
    slope = {
        "seed": 3,
        "num_levels": 1,
        "num_cols": 1,
        "sub_terrain_size": [4.0, 4.0],
        "border_width": 0.5,
        "sub_terrains": {
            "slope": {
                "func": "unilab_gpu.terrain.sub_terrains.pyramid_slope",
                "proportion": 1.0,
                "params": {"slope_range": [0.3, 0.3], "platform_width": 1.0},
            }
        },
    }
    path = tmp_path / "eval_terrain.yaml"
    path.write_text("# an evaluation terrain\nterrain: " + json.dumps(slope) + "\nother: ignored\n")
    lines: list[str] = []
    report = sim2sim(Scenario(rough.path, [0.3, 0.0, 0.0], seconds=0.2, terrain=path), announce=lines.append)
    grid = generate_terrain(slope)
    assert heights_sha256(grid.heights) != rough.policy.metadata["terrain_sha256"]  # another ground: no sha check
    terrain = report["terrain"]
    assert terrain["source"] == str(path) and terrain["config"] == slope
    assert (terrain["level"], terrain["column"], terrain["sub_terrain"]) == (0, 0, "slope")
    assert terrain["sha256"] == heights_sha256(grid.heights)
    assert grid.origins[0, 0, 2] > 0.2  # the slope's top: the start is on this ground, not the policy's
    np.testing.assert_allclose(starts[-1], _keyframe_root(rough.model) + grid.origins[0, 0])
    assert f"on the terrain of {path}, level 0 column 0 (slope)" in lines[0]


def _terrain_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "terrain.yaml"
    path.write_text(text)
    return str(path)


ALIAS_BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 12)
)
"""Under 1 kB of YAML that OmegaConf would expand to 10^12 values."""

BAD_OPTIONS = {
    "level out of range": (["--terrain-level", "2"], "--terrain-level: 2 is not a level of the terrain (0 to 1)"),
    "negative level": (["--terrain-level", "-1"], "--terrain-level: -1 is not a level of the terrain (0 to 1)"),
    "column out of range": (["--terrain-column", "3"], "--terrain-column: 3 is not a column of the terrain (0 to 2)"),
    "unknown sub-terrain": (
        ["--sub-terrain", "lava"],
        "--sub-terrain: the terrain has no sub-terrain 'lava'; its sub-terrains: "
        "rough, pyramid_stairs, pyramid_stairs_inv",
    ),
    "missing file": (["--terrain", "{tmp}/nope.yaml"], "--terrain: no terrain file at {tmp}/nope.yaml"),
    "no terrain mapping": (["--terrain", "file:seed: 3\n"], "is neither a terrain config"),
    "not yaml": (["--terrain", "file:terrain: [unclosed\n"], "is not valid YAML: expected ',' or ']'"),
    "alias bomb": (["--terrain", f"file:{ALIAS_BOMB}"], "values through YAML aliases (&anchor / *alias), more than"),
    "bad terrain value": (
        ["--terrain", "file:terrain: {num_levels: 0}\n"],
        "'terrain.num_levels' must be an integer >= 1, got 0",
    ),
}


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_bad_terrain_options_are_one_line_and_write_nothing(rough, tmp_path, capsys, case) -> None:
    options, message = BAD_OPTIONS[case]
    options = [_terrain_file(tmp_path, o[5:]) if o.startswith("file:") else o.format(tmp=tmp_path) for o in options]
    out = tmp_path / "report.json"
    code = sim2sim_main([str(rough.path), "--command", "0.3,0,0", "--seconds", "0.1", "--out", str(out), *options])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("unilab-sim2sim: error:") and "\n" not in err, err
    assert message.format(tmp=tmp_path) in err
    assert not out.exists()


def test_terrain_options_on_a_flat_ground_policy_are_refused(tmp_path, capsys) -> None:
    out = tmp_path / "report.json"
    for options in (["--terrain-level", "0"], ["--terrain", str(tmp_path / "any.yaml")]):
        code = sim2sim_main([str(COMMITTED_FLAT), "--command", "0.3,0,0", "--out", str(out), *options])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err
        assert f"{options[0]}: the policy (go2_velocity) was trained on flat ground" in err
    assert not out.exists()


def test_a_column_and_a_sub_terrain_together_and_a_changed_ground_are_refused(rough, tmp_path) -> None:
    with pytest.raises(DeploymentError, match="--terrain-column and --sub-terrain: give one of the two"):
        sim2sim(Scenario(rough.path, [0.3, 0.0, 0.0], seconds=0.1, terrain_column=0, sub_terrain="rough"))
    # The metadata's config no longer builds the heights the policy trained on (another seed).
    changed = _with_metadata(
        rough.path, tmp_path / "changed.onnx", lambda m: {**m, "terrain": {**m["terrain"], "seed": 7}}
    )
    with pytest.raises(DeploymentError, match="metadata 'terrain_sha256': the terrain rebuilt from the metadata") as e:
        sim2sim(Scenario(changed, [0.3, 0.0, 0.0], seconds=0.1))
    assert "give the ground with --terrain FILE" in str(e.value) and "\n" not in str(e.value)


def test_a_terrain_config_file_reads_as_the_same_mapping_as_a_task_section(tmp_path) -> None:
    from unilab_gpu.export.sim2sim.terrain import read_terrain_file

    group_file = Path(__file__).resolve().parents[1] / "configs" / "terrain" / "slopes_stairs_eval.yaml"
    bare = read_terrain_file(group_file)
    wrapped = tmp_path / "task.yaml"
    wrapped.write_text("terrain:\n" + "".join(f"  {line}\n" for line in group_file.read_text().splitlines()))
    assert bare == read_terrain_file(wrapped)
    assert list(bare["sub_terrains"]) == ["slope_down", "slope_up", "stairs_down", "stairs_up"]
    assert read_terrain_file("slopes_stairs_eval") == bare  # a terrain name, as unilab-eval --terrain takes


def test_a_terrain_file_of_nested_aliases_is_refused_at_once(tmp_path) -> None:
    from unilab_gpu.export.sim2sim.terrain import read_terrain_file

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(ALIAS_BOMB)
    assert bomb.stat().st_size < 1024
    with pytest.raises(DeploymentError, match=r"^--terrain: .*bomb.yaml expands to [\d,]{16,} values"):
        read_terrain_file(bomb)
