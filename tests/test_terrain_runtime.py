"""The terrain on the device: ground heights and height scans against MuJoCo C's ``mj_ray`` on
the same heightfield scene, the curriculum's promote / demote / wrap rules on hand-made distances,
and rows placed on their sub-terrains' origins."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from terrain_helpers import ray_height, terrain_scene

from unilab_gpu.envs.mdp.observations import HeightScan
from unilab_gpu.managers.reset_staging import ResetStaging
from unilab_gpu.terrain.curriculum import TerrainCurriculum
from unilab_gpu.terrain.terrain import Terrain

H = 0.1


def _grid(levels: int = 3, cols: int = 2, seed: int = 0, ny: int = 31, nx: int = 41) -> SimpleNamespace:
    """A terrain grid of random heights (the generator's output fields), centred on the origin."""
    rng = np.random.default_rng(seed)
    heights = rng.uniform(-0.2, 0.3, (ny, nx)).astype(np.float32)
    origins = np.zeros((levels, cols, 3), np.float32)
    origins[..., 0] = np.arange(levels)[:, None] * 10.0
    origins[..., 1] = np.arange(cols)[None, :] * 100.0
    origins[..., 2] = np.arange(levels)[:, None] * 0.01 + np.arange(cols)[None, :] * 0.001
    return SimpleNamespace(
        heights=heights, horizontal_scale=H, x_min=-(nx - 1) * H / 2, y_min=-(ny - 1) * H / 2 + 0.3, origins=origins
    )


def test_ground_height_equals_mj_ray_on_the_heightfield() -> None:
    grid = _grid()
    model, data = terrain_scene(grid)
    terrain = Terrain(grid, num_envs=2, device=torch.device("cpu"), max_initial_level=0)
    rng = np.random.default_rng(1)
    ny, nx = grid.heights.shape
    x = rng.uniform(grid.x_min + 1e-3, grid.x_min + (nx - 1) * H - 1e-3, 300)
    y = rng.uniform(grid.y_min + 1e-3, grid.y_min + (ny - 1) * H - 1e-3, 300)
    # Points next to sample lines and on cell diagonals too, where triangles meet. (Not exactly on a
    # sample line: there MuJoCo's ray can slip between two cells' triangles and hit the base.)
    x[:20] = grid.x_min + H * rng.integers(1, nx - 1, 20) + 2e-4
    y[20:40] = grid.y_min + H * rng.integers(1, ny - 1, 20) - 2e-4
    t = rng.uniform(0.01, (ny - 1) * H - 0.01, 20)
    x[40:60], y[40:60] = grid.x_min + t, grid.y_min + t
    want = np.array([ray_height(model, data, a, b) for a, b in zip(x, y, strict=True)])
    got = terrain.heights_at(torch.tensor(np.stack([x, y], axis=1), dtype=torch.float32)).numpy()
    np.testing.assert_allclose(got, want, atol=2e-5)
    # Exactly the samples at grid points (the triangles' corners).
    corners = torch.tensor([[grid.x_min + 3 * H, grid.y_min + 5 * H]], dtype=torch.float32)
    assert terrain.heights_at(corners).item() == pytest.approx(float(grid.heights[5, 3]), abs=1e-6)


def test_a_diverged_position_reads_inside_the_grid() -> None:
    # A NaN root (a diverged world, reset at the step's end) must not index out of the heights: the
    # G1 rough run once died here with an int64-min index. Off-grid and infinite points read the edge.
    grid = _grid()
    terrain = Terrain(grid, num_envs=2, device=torch.device("cpu"), max_initial_level=0)
    nan, inf = float("nan"), float("inf")
    xy = torch.tensor([[nan, nan], [nan, grid.y_min + 5 * H], [inf, -inf], [grid.x_min + 3 * H, nan]])
    got = terrain.heights_at(xy).numpy()
    ny, nx = grid.heights.shape
    want = [grid.heights[0, 0], grid.heights[5, 0], grid.heights[0, nx - 1], grid.heights[0, 3]]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_height_scan_follows_the_heading_and_equals_mj_ray() -> None:
    grid = _grid()
    model, data = terrain_scene(grid)
    terrain = Terrain(grid, num_envs=3, device=torch.device("cpu"), max_initial_level=0)
    yaw = torch.tensor([0.0, 0.7, -2.5])
    half = yaw / 2
    # Heading plus some roll and pitch: the scan follows the heading only.
    roll = torch.tensor([0.0, 0.3, -0.2])
    quat_yaw = torch.stack([torch.cos(half), torch.zeros(3), torch.zeros(3), torch.sin(half)], dim=1)
    quat_roll = torch.stack([torch.cos(roll / 2), torch.sin(roll / 2), torch.zeros(3), torch.zeros(3)], dim=1)
    w1, x1, y1, z1 = quat_yaw.unbind(1)
    w2, x2, y2, z2 = quat_roll.unbind(1)
    quat = torch.stack(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ],
        dim=1,
    )
    root = torch.tensor([[0.1, 0.2, 0.45], [-0.4, 0.5, 0.6], [0.3, -0.1, 0.5]])
    env = SimpleNamespace(
        terrain=terrain, device=torch.device("cpu"), robot=SimpleNamespace(root_pos_w=root, root_quat_w=quat)
    )
    scan = HeightScan(env, size=[1.0, 0.6], resolution=0.2, offset=0.3)
    got = scan(env).numpy()
    assert got.shape == (3, 6 * 4)
    for row in range(3):
        c, s = math.cos(yaw[row]), math.sin(yaw[row])
        k = 0
        for j in range(4):  # y lines, right to left
            for i in range(6):  # x fastest, back to front
                px, py = -0.5 + 0.2 * i, -0.3 + 0.2 * j
                wx, wy = root[row, 0] + c * px - s * py, root[row, 1] + s * px + c * py
                want = ray_height(model, data, float(wx), float(wy)) - float(root[row, 2]) + 0.3
                assert got[row, k] == pytest.approx(want, abs=2e-5), (row, i, j)
                k += 1


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"resolution": 0.0}, "resolution: the spacing of the scan's rays must be > 0 m, got 0.0"),
        ({"resolution": -0.1}, "resolution"),
        ({"size": [1.0, -1.0]}, r"size: \[length, width\]"),
    ],
)
def test_height_scan_bad_input_names_the_key(params, match) -> None:
    terrain = Terrain(_grid(), num_envs=1, device=torch.device("cpu"), max_initial_level=0)
    env = SimpleNamespace(terrain=terrain, device=torch.device("cpu"))
    with pytest.raises(ValueError, match=match):
        HeightScan(env, **params)


def _curriculum_setup(num_envs: int = 6):
    terrain = Terrain(_grid(levels=3, cols=2), num_envs=num_envs, device=torch.device("cpu"), max_initial_level=0)
    root = torch.zeros(num_envs, 3)
    length = torch.zeros(num_envs, dtype=torch.int64)
    asked = torch.zeros(num_envs, 2)
    curriculum = TerrainCurriculum(root, length, asked, promote_distance=4.0, demote_ratio=0.5)
    terrain.curriculum = curriculum
    return terrain, root, length, asked


def test_curriculum_promotes_demotes_and_wraps_on_hand_made_distances() -> None:
    terrain, root, length, asked = _curriculum_setup(num_envs=8)
    terrain.set_levels(torch.tensor([1, 1, 1, 0, 2, 1, 1, 1]))
    origin = terrain.env_origin.clone()
    # Row: walked (m) / commanded displacement (m) / failed / ran -> expected level
    # 0: 5.0 / 6 -> up (past 4 m), even though it fell at the end (row 0 failed)
    # 1: 2.0 / 6 -> down (< 3 m);   2: 3.5 / 6 -> stays (3 <= 3.5 <= 4)
    # 3: 0.5 / 6 at level 0 -> stays at 0;   4: 4.5 at the top level 2 -> past the top: random level
    # 5: 0 / 6 but never ran an episode -> stays;   6: 3.5 / 6 but failed -> down
    # 7: 3.5 m against commands that went 6 m out and 6 m back (displacement 0): stays
    walked = torch.tensor([5.0, 2.0, 3.5, 0.5, 4.5, 0.0, 3.5, 3.5])
    angle = torch.arange(8.0)
    root[:, 0] = origin[:, 0] + walked * torch.cos(angle)
    root[:, 1] = origin[:, 1] + walked * torch.sin(angle)
    asked[:, 0] = 6.0
    asked[7] = 0.0
    length.copy_(torch.tensor([100, 100, 100, 100, 100, 0, 100, 100]))
    ids = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 8])  # padded with num_envs
    failed = torch.tensor([True, False, False, False, False, False, True, False, False, False])
    torch.manual_seed(0)
    levels = terrain.curriculum.new_levels(ids, failed, terrain.level, terrain.env_origin, 3)
    expected = {0: 2, 1: 0, 2: 1, 3: 0, 5: 1, 6: 0, 7: 1}
    assert {row: levels[row].item() for row in expected} == expected
    # Past the top: uniform over all levels (many draws cover every level).
    wrapped = torch.stack(
        [terrain.curriculum.new_levels(ids, failed, terrain.level, terrain.env_origin, 3)[4] for _ in range(60)]
    )
    assert set(wrapped.tolist()) == {0, 1, 2}
    # Applied at staging: levels and origins move, the staged root lands on the new origin.
    staging = ResetStaging(8, ids, nq=7, nv=6)
    staging.begin(torch.tensor([0.0, 0.0, 0.3, 1.0, 0.0, 0.0, 0.0]))
    staging.episode_failed.copy_(failed)
    terrain.stage(staging)
    assert {row: terrain.level[row].item() for row in expected} == expected
    moved = terrain.origins[terrain.level, terrain.column]
    assert torch.equal(terrain.env_origin, moved)
    assert torch.allclose(staging.qpos[:8, :3], moved + torch.tensor([0.0, 0.0, 0.3]))
    assert terrain.mean_level.item() == pytest.approx(terrain.level.float().mean().item())


def test_curriculum_rules_relative_to_the_command_and_without_time_out_demotion() -> None:
    terrain, root, length, asked = _curriculum_setup(num_envs=6)
    terrain.curriculum = TerrainCurriculum(
        root, length, asked, promote_distance=4.0, demote_ratio=0.5,
        demote_on_time_out=False, promote_ratio=0.8, min_promote_distance=1.0,
    )  # fmt: skip
    terrain.set_levels(torch.ones(6, dtype=torch.int64))
    origin = terrain.env_origin.clone()
    # Row: walked / asked (m) / failed -> expected level (needed = clamp(0.8 asked, 1, 4))
    # 0: 2.5 / 3 -> up (needed 2.4: the fixed 4 m rule would keep it);  1: 2.0 / 3 -> stays
    # 2: 0.5 / 6, timed out -> stays (no demotion on time-outs);  3: 2.0 / 6, failed -> down
    # 4: 0.9 / 0.5 -> stays (walked less than min_promote_distance);  5: 4.5 / 10 -> up (cap 4 m)
    walked = torch.tensor([2.5, 2.0, 0.5, 2.0, 0.9, 4.5])
    root[:, 0] = origin[:, 0] + walked
    root[:, 1] = origin[:, 1]
    asked[:, 0] = torch.tensor([3.0, 3.0, 6.0, 6.0, 0.5, 10.0])
    length.fill_(100)
    failed = torch.tensor([False, False, False, True, False, False])
    levels = terrain.curriculum.new_levels(torch.arange(6), failed, terrain.level, terrain.env_origin, 3)
    assert levels.tolist() == [2, 1, 1, 0, 1, 2]


@pytest.mark.parametrize("levels", [1, 2, 6])
def test_level_fraction_is_one_for_a_policy_promoted_every_episode(levels) -> None:
    """Simulate the re-leveling of a row promoted at every episode: its long-run mean level is
    the denominator of ``level_fraction``, so the fraction reads 1."""
    terrain = Terrain(_grid(levels=levels, cols=2), num_envs=400, device=torch.device("cpu"), max_initial_level=0)
    terrain.curriculum = TerrainCurriculum(
        torch.full((400, 3), 1e3), torch.ones(400, dtype=torch.int64), torch.zeros(400, 2), 4.0, 0.5
    )
    torch.manual_seed(0)
    ids = torch.arange(400)
    fractions = []
    for episode in range(60):
        no_fall = torch.zeros(400, dtype=torch.bool)
        moved = terrain.curriculum.new_levels(ids, no_fall, terrain.level, terrain.env_origin, levels)
        terrain.set_row_levels(ids, moved)
        if episode >= 20:
            fractions.append(terrain.level_fraction.item())
    assert np.mean(fractions) == pytest.approx(1.0, abs=0.03)
    assert terrain.mean_level.item() <= levels - 1


def test_rows_spread_over_columns_and_start_within_the_initial_levels() -> None:
    grid = _grid(levels=10, cols=3)
    torch.manual_seed(3)
    terrain = Terrain(grid, num_envs=300, device=torch.device("cpu"), max_initial_level=4)
    assert terrain.column.tolist() == [0] * 100 + [1] * 100 + [2] * 100
    few = Terrain(_grid(levels=2, cols=20), num_envs=16, device=torch.device("cpu"), max_initial_level=0)
    # 16 rows over 20 columns: every fifth column is skipped, so no block of types is left out.
    assert few.column.tolist() == [0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 18]
    assert set(terrain.level.tolist()) == set(range(5))
    assert torch.equal(terrain.env_origin, torch.as_tensor(grid.origins)[terrain.level, terrain.column])


def test_height_scan_on_a_flat_floor_reads_z_zero() -> None:
    root = torch.tensor([[1.0, -2.0, 0.4], [0.0, 0.0, 0.3]])
    quat = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    env = SimpleNamespace(
        terrain=None, device=torch.device("cpu"), robot=SimpleNamespace(root_pos_w=root, root_quat_w=quat)
    )
    scan = HeightScan(env, size=[1.6, 1.0], resolution=0.1, offset=0.3)
    got = scan(env)
    assert got.shape == (2, 17 * 11)  # 1.6 / 0.1 + 1 points along x, 1.0 / 0.1 + 1 lines along y
    assert torch.allclose(got, (0.3 - root[:, 2:3]).expand(2, 187))
