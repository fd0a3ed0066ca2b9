"""Velocity tasks on generated terrain (go2_velocity_rough, g1_velocity_rough): rows spawn on their
sub-terrains, the critic's height scan equals MuJoCo C's ``mj_ray`` on the env's own scene, heights
that matter are measured from the ground, the step stays sync-free, the new terms compile to what
they compute eagerly, and the curriculum's levels survive a resume."""

from __future__ import annotations

import math

import mujoco
import pytest
import torch
from terrain_helpers import ray_height, terrain_scene

from unilab_gpu.doctor.sync_audits import check_task_step
from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.managers.reset_staging import ResetStaging
from unilab_gpu.sim.device import resolve_device

QUIET = ["events.push=null"]


@pytest.fixture(scope="module")
def env():
    return make_env("go2_velocity_rough", num_envs=8, compile=False, overrides=QUIET, announce=False)


def test_rows_spawn_on_their_sub_terrains_and_the_scene_holds_the_terrain(env) -> None:
    env.reset()
    m = env.sim.mj_model
    floor = next(g for g in range(m.ngeom) if m.geom_bodyid[g] == 0)
    assert m.geom_type[floor] == mujoco.mjtGeom.mjGEOM_HFIELD and m.nhfield == 1
    assert (m.hfield_nrow[0], m.hfield_ncol[0]) == env.terrain_grid.heights.shape
    terrain = env.terrain
    root = env.robot.root_pos_w
    offset = (root[:, :2] - terrain.env_origin[:, :2]).abs()
    assert bool((offset <= 0.5 + 1e-5).all())  # the task's root_state event: +-0.5 m around the origin
    default_height = float(env.robot.default_qpos[2])
    assert torch.allclose(root[:, 2], terrain.env_origin[:, 2] + default_height, atol=1e-5)
    expected = torch.as_tensor(env.terrain_grid.origins)[terrain.level, terrain.column]
    assert torch.equal(terrain.env_origin, expected)
    # Each row stands above the ground under it (no spawn inside a step or an obstacle).
    ground = terrain.heights_at(root[:, :2])
    assert bool((root[:, 2] - ground > 0.1).all())


def test_critic_height_scan_equals_mj_ray_on_the_env_scene(env) -> None:
    env.reset()
    critic = env.observation_manager.groups["critic"]
    term = next(t for t in critic.terms if t.name == "height_scan")
    got = term(env).numpy()
    model, data = terrain_scene(env.terrain_grid)
    root, quat = env.robot.root_pos_w.numpy(), env.robot.root_quat_w.numpy()
    offset = float(env.cfg.robot.base_height)
    for row in range(env.num_envs):
        w, x, y, z = quat[row]
        yaw = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        c, s = math.cos(yaw), math.sin(yaw)
        for k in (0, 8, 16, 93, 170, 186):  # corners and the middle of the 17 x 11 grid
            px, py = -0.8 + 0.1 * (k % 17), -0.5 + 0.1 * (k // 17)
            want = ray_height(model, data, root[row, 0] + c * px - s * py, root[row, 1] + s * px + c * py)
            assert got[row, k] == pytest.approx(want - root[row, 2] + offset, abs=1e-4), (row, k)


def test_fall_termination_and_feet_heights_are_measured_from_the_ground(env) -> None:
    env.reset()
    terrain = env.terrain
    ground = terrain.heights_at(env.robot.root_pos_w[:, :2])
    fell = next(t for t in env.termination_manager.terms if t.name == "fell")
    min_height = float(env.cfg.robot.fall_height)
    qpos = env.sim.state.qpos.clone()
    # Rows 0-3 just above the fall height over the ground, rows 4-7 just below it.
    above = torch.tensor([0.02] * 4 + [-0.02] * 4)
    qpos[:, 2] = ground + min_height + above
    env.sim.write_rows(torch.arange(env.num_envs), qpos, env.sim.state.qvel.clone())
    env.sim.refresh()
    ground = terrain.heights_at(env.robot.root_pos_w[:, :2])
    assert torch.allclose(env.robot.root_pos_w[:, 2] - ground, min_height + above, atol=1e-4)
    assert fell(env).tolist() == [False] * 4 + [True] * 4


def test_a_step_is_sync_free_with_curriculum_resets() -> None:
    for task in ("go2_velocity_rough", "g1_velocity_rough"):
        check = check_task_step(task, resolve_device("cpu"))
        assert check.status == "pass", check.detail
        assert check.data["episodes_ended"] > 0


def test_new_terms_compiled_equal_eager(env) -> None:
    env.reset()
    terrain = env.terrain
    critic = env.observation_manager.groups["critic"]
    scan = next(t for t in critic.terms if t.name == "height_scan")
    ids = torch.tensor([1, 4, 6, env.num_envs])
    staging = ResetStaging(env.num_envs, ids, env.sim.mj_model.nq, env.sim.mj_model.nv)
    staging.begin(env.robot.default_qpos)
    command = env.command_manager.get("twist")
    env.episode_length.fill_(500)
    command.commanded_displacement[:, 0] = torch.tensor([1.0, 9.0, 2.0, 30.0, 0.5, 6.0, 8.0, 12.0])
    terrain.set_levels(torch.tensor([0, 9, 3, 4, 9, 1, 9, 2]))
    buffers = [terrain._level, terrain._origin, terrain.mean_level, staging.qpos]
    start = [b.clone() for b in buffers]

    def phase_fn():
        terrain.stage(staging)
        return scan(env)

    rng = torch.get_rng_state()
    eager_scan = phase_fn()
    eager = [b.clone() for b in buffers]
    for b, s in zip(buffers, start, strict=True):
        b.copy_(s)
    torch.set_rng_state(rng)
    compiled_scan = torch.compile(phase_fn, fullgraph=True, dynamic=False, options={"fallback_random": True})()
    torch.testing.assert_close(compiled_scan, eager_scan, rtol=1e-6, atol=1e-6)
    for name, got, want in zip(["level", "origin", "mean", "qpos"], buffers, eager, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=name)
    assert not torch.equal(eager[0], start[0])  # the curriculum moved some row


def test_levels_are_learning_state_and_the_mean_level_is_logged(env) -> None:
    env.reset()
    levels = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])
    env.terrain.set_levels(levels)
    state = env.learning_state()
    assert torch.equal(state["terrain"]["level"], levels)
    other = make_env("go2_velocity_rough", num_envs=8, compile=False, overrides=QUIET, announce=False)
    other.load_learning_state(state)
    assert torch.equal(other.terrain.level, levels)
    other.reset()  # rows start on their restored levels' origins
    expected = torch.as_tensor(other.terrain_grid.origins)[levels, other.terrain.column]
    assert torch.equal(other.terrain.env_origin, expected)
    summary = other.stats.summary()
    assert summary["terrain/mean_level"] == pytest.approx(3.5)
    num_levels = other.terrain.num_levels
    assert summary["terrain/level_fraction"] == pytest.approx(3.5 / (2 * (num_levels - 1) / 3))
    with pytest.raises(ValueError, match="terrain curriculum state has \\(3,\\) rows, this env 8"):
        other.load_learning_state({"terrain": {"level": torch.zeros(3, dtype=torch.int64)}})


@pytest.mark.parametrize(
    ("override", "match"),
    [
        (
            "terrain.curriculum.command=nope",
            r"terrain.curriculum.command: no command term 'nope'; commands: \['twist'\]",
        ),
        (
            "observations.critic.terms.height_scan.params.resolution=0",
            r"observations.critic.terms.height_scan.params: resolution: the spacing of the scan's rays must be > 0 m",
        ),
        ("terrain.num_levels=0", r"terrain.num_levels' must be an integer >= 1, got 0"),
        ("terrain.curriculum.promote_ratio=1.5", r"terrain.curriculum.promote_ratio' must be in \(0, 1\]"),
        ("terrain.curriculum.min_promote_distance=-1", r"terrain.curriculum.min_promote_distance' must be >= 0 m"),
    ],
)
def test_bad_terrain_input_names_the_key(override, match) -> None:
    with pytest.raises(ValueError, match=match):
        make_env("go2_velocity_rough", num_envs=2, compile=False, overrides=[override], announce=False)


POLICY_SCAN_OVERRIDE = (
    "+observations.policy.terms.height_scan={func: unilab_gpu.envs.mdp.observations.HeightScan, "
    "params: {size: [1.6, 1.0], resolution: 0.1, offset: 0.288}, clip: [-1.0, 1.0], "
    "noise: {kind: uniform, low: -0.05, high: 0.05}}"
)
"""How issue 48's Go2 runs gave the policy the scan, spelled out (0.288 m: the Go2's base height)."""


def test_the_scan_task_is_the_rough_task_with_the_critics_scan_in_the_policy() -> None:
    named = load_task_cfg("go2_velocity_rough_scan")
    assert named == load_task_cfg("go2_velocity_rough", [POLICY_SCAN_OVERRIDE])
    assert list(named.observations["policy"].terms)[-1] == "height_scan"
    # One scan, two readers: the policy's follows the critic's when the critic's changes.
    wider = load_task_cfg("go2_velocity_rough_scan", ["observations.critic.terms.height_scan.params.size=[2.0,1.2]"])
    assert wider.observations["policy"].terms["height_scan"].params["size"] == [2.0, 1.2]
    assert wider.observations["policy"].terms["height_scan"].noise.high == 0.05


def test_commanded_displacement_follows_the_heading_in_the_world_frame(env) -> None:
    """``sum R(yaw) c_xy dt``: with a fixed command and the root held at a known heading, the
    accumulated displacement is the command rotated by that heading, times the elapsed time."""
    env.reset()
    command = env.command_manager.get("twist")
    assert command.record_displacement  # set by the terrain curriculum
    yaw = torch.linspace(-3.0, 3.0, env.num_envs)
    qpos = env.sim.state.qpos.clone()
    qpos[:, 3:7] = torch.stack(
        [torch.cos(yaw / 2), torch.zeros_like(yaw), torch.zeros_like(yaw), torch.sin(yaw / 2)], 1
    )
    env.sim.write_rows(torch.arange(env.num_envs), qpos, torch.zeros_like(env.sim.state.qvel))
    env.sim.refresh()
    command.commanded_displacement.zero_()
    command.command.copy_(torch.tensor([0.5, -0.2, 0.3]).expand(env.num_envs, 3))
    command.time_left.fill_(100.0)
    for _ in range(3):
        command.update(env)
    c, s = torch.cos(yaw), torch.sin(yaw)
    want = torch.stack([c * 0.5 + s * 0.2, s * 0.5 - c * 0.2], dim=1) * 3 * env.step_dt
    torch.testing.assert_close(command.commanded_displacement, want, rtol=1e-5, atol=1e-6)


def test_terrain_buffers_are_persistent_and_part_of_the_env_state(env) -> None:
    """The captured step records addresses: the terrain's buffers keep theirs over steps with
    curriculum resets, and the env's tensor walk (snapshots, address checks) lists them."""
    env.reset()
    buffers = env.persistent_buffers()
    for name in ("terrain.heights", "terrain._level", "terrain._origin", "terrain.mean_level"):
        assert name in buffers, name
    before = {name: t.data_ptr() for name, t in buffers.items()}
    env.episode_length.fill_(env.max_episode_length - 1)  # every row times out on the next step
    actions = torch.zeros(env.num_envs, env.action_dim)
    for _ in range(3):
        env.step(actions)
    assert {name: t.data_ptr() for name, t in env.persistent_buffers().items()} == before
