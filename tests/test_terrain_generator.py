"""The terrain generator: layout, determinism, each sub-terrain's geometry against hand values,
meshes rasterised by MuJoCo, and every bad config refused (naming its key) before anything is built."""

from __future__ import annotations

import functools
import math
import re
import struct
from pathlib import Path

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf

from unilab_gpu.terrain import (
    MAX_TERRAIN_SAMPLES,
    SubTerrainCfg,
    TerrainCfg,
    assign_columns,
    discrete_obstacles,
    estimate_terrain_bytes,
    flat,
    generate_terrain,
    level_difficulties,
    mesh,
    pyramid_slope,
    pyramid_stairs,
    random_rough,
)
from unilab_gpu.terrain import sub_terrains as sub_terrains_module

SUB = "unilab_gpu.terrain.sub_terrains."
TAN15 = math.tan(math.radians(15.0))


def _cfg(sub_terrains: dict | None = None, **grid) -> dict:
    """A small grid: 2 levels x 2 columns of 2 m x 2 m sub-terrains at 0.1 m, 0.5 m border."""
    cfg = {"num_levels": 2, "num_cols": 2, "sub_terrain_size": [2.0, 2.0], "horizontal_scale": 0.1}
    cfg["border_width"] = 0.5
    cfg["sub_terrains"] = sub_terrains or {"ground": {"func": SUB + "flat", "proportion": 1.0}}
    return cfg | grid


def _rough_and_obstacles(obstacle_params: dict | None = None) -> dict:
    return {
        "rough": {"func": SUB + "random_rough", "proportion": 0.5},
        "obstacles": {"func": SUB + "discrete_obstacles", "proportion": 0.5, "params": obstacle_params or {}},
    }


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


# ---------------------------------------------------------------- determinism


def test_same_seed_builds_byte_identical_terrain_and_another_seed_other_rough_heights():
    cfg = _cfg(_rough_and_obstacles(), seed=7)
    first, second = generate_terrain(cfg), generate_terrain(cfg)
    assert first.heights.tobytes() == second.heights.tobytes()
    assert first.origins.tobytes() == second.origins.tobytes()
    assert np.abs(first.heights).max() > 0.01  # the rough and obstacle heights are really there
    # every cell draws its own numbers: the same type at the same level differs from column to column
    twice = generate_terrain(_cfg({"rough": {"func": SUB + "random_rough", "proportion": 1.0}}))
    assert twice.heights[5:25, 5:25].tobytes() != twice.heights[25:45, 5:25].tobytes()
    other = generate_terrain(cfg | {"seed": 8})
    # column 0 (rough) lies in rows [5, 25): its heights change with the seed
    assert first.heights[5:25].tobytes() != other.heights[5:25].tobytes()


def test_changing_one_sub_terrain_leaves_the_other_columns_byte_identical():
    before = generate_terrain(_cfg(_rough_and_obstacles()))
    after = generate_terrain(_cfg(_rough_and_obstacles({"num_obstacles": 5, "size_range": [0.2, 0.3]})))
    assert before.column_types == after.column_types == ("rough", "obstacles")
    rough_rows, obstacle_rows = slice(5, 25), slice(25, 45)
    assert before.heights[rough_rows].tobytes() == after.heights[rough_rows].tobytes()
    assert before.heights[obstacle_rows].tobytes() != after.heights[obstacle_rows].tobytes()


# ---------------------------------------------------------------- layout


def test_layout_shape_centring_and_origins_by_hand():
    # h = 0.5: a sub-terrain is 4 x 6 samples, the border 2 samples; 3 levels x 3 columns.
    grid = generate_terrain(
        _cfg(num_levels=3, num_cols=3, sub_terrain_size=[2.0, 3.0], horizontal_scale=0.5, border_width=1.0)
    )
    assert grid.heights.shape == (2 * 2 + 3 * 6, 2 * 2 + 3 * 4) == (22, 16)
    assert grid.heights.dtype == np.float32 and not grid.heights.any()
    assert grid.x_min == pytest.approx(-15 * 0.5 / 2) and grid.y_min == pytest.approx(-21 * 0.5 / 2)
    assert grid.size == pytest.approx((7.5, 10.5))
    assert (grid.num_levels, grid.num_cols) == (3, 3)
    assert grid.origins.shape == (3, 3, 3) and grid.origins.dtype == np.float32
    # level l at x = x_min + (2 + 4 l + 1.5) * 0.5, column c at y = y_min + (2 + 6 c + 2.5) * 0.5
    np.testing.assert_allclose(grid.origins[:, 0, 0], [-2.0, 0.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(grid.origins[0, :, 1], [-3.0, 0.0, 3.0], atol=1e-6)
    np.testing.assert_array_equal(grid.origins[..., 2], 0.0)


def test_origin_height_is_the_highest_ground_within_half_a_metre_of_the_centre():
    # A pit of slope tan 15° (41 samples: half extent 2 m) with a 0.4 m floor: the highest ground of the
    # 1 m square is on its rim, 0.5 m from the centre, 1.5 m from the edge: -tan 15° * 1.5.
    params = {"slope_range": [TAN15, TAN15], "platform_width": 0.4, "inverted": True}
    sub = {"pit": {"func": SUB + "pyramid_slope", "proportion": 1.0, "params": params}}
    grid = generate_terrain(_cfg(sub, sub_terrain_size=[4.1, 4.1], num_levels=1, num_cols=1))
    assert grid.heights.min() == pytest.approx(-TAN15 * 1.8, abs=1e-6)
    assert grid.origins[0, 0, 2] == pytest.approx(-TAN15 * 1.5, abs=1e-6)


def test_levels_run_along_x_and_columns_along_y_with_origin_heights():
    # Column 0 flat, column 1 stairs of 0.1 m (level 0) and 0.3 m (level 1): 2 m at 0.1 m is 20 samples,
    # half extent 0.95 m, so floor((0.95 - 0.25) / 0.2) = 3 steps of 0.2 m up to the platform.
    stairs = {"step_height_range": [0.1, 0.3], "step_width": 0.2, "platform_width": 0.5}
    sub = {
        "ground": {"func": SUB + "flat", "proportion": 0.5},
        "stairs": {"func": SUB + "pyramid_stairs", "proportion": 0.5, "params": stairs},
    }
    grid = generate_terrain(_cfg(sub))
    heights = grid.heights
    assert not heights[5:25].any()  # column 0: rows 5..24 (y), flat
    assert heights[25:45, 5:25].max() == pytest.approx(0.3, abs=1e-6)  # column 1, level 0 (x 5..24)
    assert heights[25:45, 25:45].max() == pytest.approx(0.9, abs=1e-6)  # column 1, level 1 (x 25..44)
    np.testing.assert_allclose(grid.origins[..., 2], [[0.0, 0.3], [0.0, 0.9]], atol=1e-6)


def test_column_types_by_proportion():
    assert assign_columns(["A", "B"], [0.5, 0.5], 4) == ("A", "A", "B", "B")
    assert assign_columns(["A", "B"], [0.25, 0.75], 3) == ("A", "B", "B")  # (c + 0.5) / 3: 0.17, 0.5, 0.83
    assert assign_columns(["A", "B"], [0.7, 0.3], 2) == ("A", "B")  # 0.75 is past A's 0.7
    assert assign_columns(["A", "B", "C"], [1 / 3, 1 / 3, 1 / 3], 3) == ("A", "B", "C")
    assert assign_columns(["A", "B", "C"], [0.0, 1.0, 0.0], 3) == ("B", "B", "B")
    assert assign_columns(["A", "B"], [0.5, 0.4999999], 1000)[-1] == "B"  # a sum just under 1 fills the last column
    grid = generate_terrain(
        _cfg(num_cols=4, sub_terrains={n: {"func": SUB + "flat", "proportion": 0.5} for n in ("A", "B")})
    )
    assert grid.column_types == ("A", "A", "B", "B")


def test_difficulties_are_linear_from_zero_to_one():
    np.testing.assert_array_equal(level_difficulties(5), [0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_array_equal(level_difficulties(1), [1.0])
    grid = generate_terrain(_cfg(num_levels=3))
    assert grid.difficulties.dtype == np.float64
    np.testing.assert_array_equal(grid.difficulties, [0.0, 0.5, 1.0])


def test_the_border_is_flat():
    sub = {"stairs": {"func": SUB + "pyramid_stairs", "proportion": 0.5, "params": {"inverted": True}}}
    sub |= {"rough": {"func": SUB + "random_rough", "proportion": 0.5}}
    heights = generate_terrain(_cfg(sub, num_levels=3)).heights  # border: 5 samples on each side
    assert np.abs(heights[5:-5, 5:-5]).max() > 0.1
    for band in (heights[:5], heights[-5:], heights[:, :5], heights[:, -5:]):
        assert not band.any()


def test_mapping_forms_build_the_same_terrain():
    as_dict = _cfg(_rough_and_obstacles(), seed=3)
    typed = TerrainCfg(**{k: v for k, v in as_dict.items() if k != "sub_terrains"})
    typed.sub_terrains = {n: SubTerrainCfg(**entry) for n, entry in as_dict["sub_terrains"].items()}
    reference = generate_terrain(as_dict).heights.tobytes()
    assert generate_terrain(OmegaConf.create(as_dict)).heights.tobytes() == reference
    assert generate_terrain(typed).heights.tobytes() == reference


def test_estimate_terrain_bytes():
    # 2 levels x 2 columns of 20 samples + 2 x 5 border: 50 x 50 samples, 4 bytes, 4 copies
    assert estimate_terrain_bytes(_cfg()) == 50 * 50 * 4 * 4
    # 200 x 100 default sub-terrains: (40 + 200 * 80) x (40 + 100 * 80) samples, estimated, not built
    big = {"num_levels": 200, "num_cols": 100, "sub_terrains": _cfg()["sub_terrains"]}
    assert estimate_terrain_bytes(big) == 16040 * 8040 * 16 > MAX_TERRAIN_SAMPLES * 4


# ---------------------------------------------------------------- sub-terrains against hand values


def test_flat_is_zero():
    heights = flat(1.0, _rng(), (7, 9), 0.1)
    assert heights.shape == (7, 9) and not heights.any()


def test_pyramid_slope_angle_and_platform():
    # 41 x 41 samples at 0.1 m: half extent 2 m, platform 1 m: the top at tan(15°) * 1.5 m.
    heights = pyramid_slope(0.3, _rng(), (41, 41), 0.1, slope_range=[TAN15, TAN15], platform_width=1.0)
    path = heights[20, :16]  # from the edge (x = -2) to the platform's edge (x = -0.5)
    np.testing.assert_allclose(np.arctan(np.diff(path) / 0.1), math.radians(15.0), atol=1e-9)
    assert path[0] == 0.0 and heights[0].max() == 0.0  # the edge row is at ground level
    top = TAN15 * 1.5
    platform = np.isclose(heights, top, atol=1e-12)
    assert platform.sum() == 11 * 11 and platform[15:26, 15:26].all()  # |x|, |y| <= 0.5 m
    assert heights.max() == pytest.approx(top, abs=1e-12)
    inverted = pyramid_slope(0.3, _rng(), (41, 41), 0.1, slope_range=[TAN15, TAN15], inverted=True)
    np.testing.assert_array_equal(inverted, -heights)


def test_pyramid_slope_in_the_grid_and_by_difficulty():
    # The float32 grid keeps the angle to 1e-6 rad (fit over the ramp); the slope interpolates by level.
    sub = {"slope": {"func": SUB + "pyramid_slope", "proportion": 1.0, "params": {"slope_range": [0.0, TAN15]}}}
    grid = generate_terrain(_cfg(sub, sub_terrain_size=[4.1, 4.1], num_cols=1))
    assert grid.heights.shape == (51, 92)  # 41 samples per sub-terrain, 5 border samples
    assert not grid.heights[:, 5:46].any()  # level 0: difficulty 0, slope 0
    ramp = grid.heights[25, 46:61].astype(np.float64)  # level 1, middle row, edge to platform
    gradient = np.polyfit(np.arange(15) * 0.1, ramp, 1)[0]
    assert abs(math.atan(gradient) - math.radians(15.0)) < 1e-6
    assert grid.origins[1, 0, 2] == pytest.approx(TAN15 * 1.5, abs=1e-6)


def test_pyramid_stairs_step_height_and_count():
    # 40 samples at 0.1 m: half extent 1.95 m; (1.95 - 0.5) / 0.3 = 4.83, so 4 steps of 3 samples.
    heights = pyramid_stairs(0.5, _rng(), (40, 40), 0.1, step_height_range=[0.1, 0.1], step_width=0.3)
    row = heights[19, :20]  # edge to centre
    np.testing.assert_allclose(row, [0.0] * 3 + [0.1] * 3 + [0.2] * 3 + [0.3] * 3 + [0.4] * 8, atol=1e-12)
    levels = np.unique(np.round(row, 9))
    assert len(levels) - 1 == 4  # steps from the edge up to the platform
    np.testing.assert_allclose(np.diff(levels), 0.1, atol=1e-12)
    assert np.isclose(heights, 0.4).sum() == 16 * 16  # the platform: 1.5 m >= platform_width
    down = pyramid_stairs(0.5, _rng(), (40, 40), 0.1, step_height_range=[0.1, 0.1], step_width=0.3, inverted=True)
    np.testing.assert_array_equal(down, -heights)
    assert down[19, 19] == pytest.approx(-0.4)  # going down into a pit


def test_pyramid_stair_rings_are_whole_samples_wide():
    # 0.1 m steps at 0.02 m are 5 samples each (15 * 0.02 / 0.1 is 2.9999999999999996 in floating point).
    # 100 samples: half extent 0.99 m, (0.99 - 0.25) / 0.1 = 7.4: 7 steps, then the platform.
    params = {"step_height_range": [0.05, 0.05], "step_width": 0.1, "platform_width": 0.5}
    row = pyramid_stairs(0.0, _rng(), (100, 100), 0.02, **params)[49, :50]
    np.testing.assert_allclose(row, np.r_[np.repeat(np.arange(7) * 0.05, 5), np.full(15, 0.35)], atol=1e-12)


def test_pyramid_stairs_in_the_float32_grid():
    params = {"step_height_range": [0.1, 0.1], "step_width": 0.3, "platform_width": 1.0}
    sub = {"stairs": {"func": SUB + "pyramid_stairs", "proportion": 1.0, "params": params}}
    heights = generate_terrain(_cfg(sub, sub_terrain_size=[4.0, 4.0], num_levels=1, num_cols=1)).heights
    row = heights[24, 5:25].astype(np.float64)  # 5 border samples, then edge to centre
    distinct = np.unique(row)
    assert len(distinct) == 5
    np.testing.assert_allclose(np.diff(distinct), 0.1, atol=1e-7)  # float32 rounding of 0.1 .. 0.4


def test_the_stairs_heights_evaluation_grid_has_the_risers_its_columns_name():
    """configs/terrain/stairs_heights_eval.yaml: from each centre platform along +x, the 5.8 m a
    10 s walk at 0.5 m/s can reach rise (``stairs_up_Ncm``) or fall (``_down_``) by N cm per riser."""
    path = Path(__file__).resolve().parents[1] / "configs" / "terrain" / "stairs_heights_eval.yaml"
    grid = generate_terrain(yaml.safe_load(path.read_text()))
    columns = [(way, cm) for way in ("up", "down") for cm in (4, 6, 8, 10)]
    assert grid.column_types == tuple(f"stairs_{way}_{cm}cm" for way, cm in columns)
    h = grid.horizontal_scale
    for column, (way, cm) in enumerate(columns):
        x, y, _ = grid.origins[0, column]
        row = grid.heights[round((y - grid.y_min) / h), round((x - grid.x_min) / h) :][:59].astype(np.float64)
        steps = np.diff(row)
        risers = steps[np.abs(steps) > 1e-6]
        assert len(risers) == 16, (way, cm)  # (5.8 m - 1 m of platform) / 0.3 m treads
        np.testing.assert_allclose(risers, (cm if way == "up" else -cm) / 100, atol=1e-6, err_msg=f"{way} {cm} cm")


def test_discrete_obstacles_heights_and_clear_platform():
    params = {"height_range": [0.1, 0.3], "size_range": [0.4, 1.0], "num_obstacles": 30, "platform_width": 1.0}
    heights = discrete_obstacles(1.0, _rng(), (40, 40), 0.1, **params)  # H = 0.3
    raised = heights[heights != 0]
    assert raised.size > 100 and (raised > 0).any() and (raised < 0).any()  # boxes and holes
    assert ((np.abs(raised) >= 0.15 - 1e-12) & (np.abs(raised) <= 0.3 + 1e-12)).all()
    assert not heights[15:25, 15:25].any()  # |x|, |y| <= 0.5 m: samples 15..24
    easy = discrete_obstacles(0.0, _rng(), (40, 40), 0.1, **params)  # H = 0.1
    assert np.abs(easy).max() <= 0.1 + 1e-12 and np.abs(easy[easy != 0]).min() >= 0.05 - 1e-12


def test_discrete_obstacle_sides_come_from_size_range():
    # One 0.6 m square box (any height from the range) covers at most 7 x 7 samples at 0.1 m.
    for seed in range(5):
        heights = discrete_obstacles(
            1.0, np.random.default_rng(seed), (60, 60), 0.1, size_range=[0.6, 0.6], num_obstacles=1, platform_width=0.1
        )
        rows, cols = np.nonzero(heights)
        assert len(np.unique(heights[rows, cols])) == 1
        assert rows.max() - rows.min() < 7 and cols.max() - cols.min() < 7


def test_random_rough_amplitude_and_quantization():
    # noise_range [0, 0.1] at difficulty 0.25: a = 0.025, in steps of 0.005: heights in {-0.025, ..., 0.025}.
    heights = random_rough(0.25, _rng(), (40, 40), 0.1, noise_range=[0.0, 0.1], noise_step=0.005)
    steps = heights / 0.005
    np.testing.assert_allclose(steps, np.round(steps), atol=1e-9)
    assert np.abs(heights).max() == pytest.approx(0.025)  # coarse points fall on samples: the extremes show
    assert len(np.unique(np.round(steps))) == 11
    # downsampled_scale 0.2 = 2 samples: on a coarse row, an odd sample is its neighbours' mean, rounded half up
    k = np.round(steps[0])
    np.testing.assert_array_equal(k[1:-1:2], np.floor((k[0:-2:2] + k[2::2]) / 2 + 0.5))


def test_random_rough_in_the_grid_is_quantized():
    params = {"noise_range": [0.05, 0.05], "noise_step": 0.01}
    sub = {"rough": {"func": SUB + "random_rough", "proportion": 1.0, "params": params}}
    block = generate_terrain(_cfg(sub, num_cols=1)).heights[5:25, 5:45].astype(np.float64)
    assert np.abs(block).max() <= 0.05 + 1e-7 and block.std() > 0.01
    np.testing.assert_allclose(block / 0.01, np.round(block / 0.01), atol=1e-5)


# ---------------------------------------------------------------- meshes


def _box_obj(path: Path, low: tuple[float, float, float], high: tuple[float, float, float]) -> Path:
    """An axis-aligned box as an OBJ (12 outward triangles)."""
    (x0, y0, z0), (x1, y1, z1) = low, high
    corners = [(x, y, z) for z in (z0, z1) for y in (y0, y1) for x in (x0, x1)]  # index = 4 z + 2 y + x, 1-based
    faces = [(1, 3, 4), (1, 4, 2), (5, 6, 8), (5, 8, 7), (1, 2, 6), (1, 6, 5)]
    faces += [(3, 7, 8), (3, 8, 4), (1, 5, 7), (1, 7, 3), (2, 4, 8), (2, 8, 6)]
    lines = [f"v {x} {y} {z}" for x, y, z in corners] + [f"f {a} {b} {c}" for a, b, c in faces]
    path.write_text("\n".join(lines) + "\n")
    return path


def _ramp_stl(path: Path) -> Path:
    """A binary STL wedge: x in [0, 2], y in [0, 1], top z = 0.25 x (0.5 m high at x = 2)."""
    a, b, c, d = (0, 0, 0), (2, 0, 0), (2, 1, 0), (0, 1, 0)
    e, f = (2, 0, 0.5), (2, 1, 0.5)
    triangles = [(a, c, b), (a, d, c), (a, b, e), (d, f, c), (a, e, f), (a, f, d), (b, c, f), (b, f, e)]
    data = bytearray(b"ramp".ljust(80, b" ") + struct.pack("<I", len(triangles)))
    for triangle in triangles:
        data += struct.pack("<3f", 0, 0, 0) + b"".join(struct.pack("<3f", *v) for v in triangle) + b"\0\0"
    path.write_bytes(bytes(data))
    return path


def test_mesh_box_obj_rasterised_centred_and_on_the_ground(tmp_path):
    # A 1 x 1 x 0.2 m box placed anywhere in the file lands centred, on z = 0. Samples at +-0.05, +-0.15, ...
    box = _box_obj(tmp_path / "box.obj", (3.0, -2.0, 1.0), (4.0, -1.0, 1.2))
    heights = mesh(0.0, _rng(), (20, 20), 0.1, file=str(box))
    expected = np.zeros((20, 20))
    expected[5:15, 5:15] = 0.2  # |x|, |y| < 0.5
    np.testing.assert_allclose(heights, expected, atol=1e-6)
    scaled = mesh(0.0, _rng(), (20, 20), 0.1, file=str(box), scale=0.6, height_offset=-0.02)
    expected = np.zeros((20, 20))
    expected[7:13, 7:13] = 0.6 * 0.2 - 0.02  # |x|, |y| < 0.3
    np.testing.assert_allclose(scaled, expected, atol=1e-6)


def test_mesh_ramp_stl_rasterised_at_its_linear_height(tmp_path):
    ramp = _ramp_stl(tmp_path / "ramp.stl")
    heights = mesh(1.0, _rng(), (30, 30), 0.1, file=str(ramp))  # samples at +-0.05 .. +-1.45
    x = (np.arange(30) - 14.5) * 0.1
    on_ramp = np.abs(x) < 1.0  # local x in [-1, 1]: height 0.25 (x + 1)
    for i in (10, 14, 19):  # rows with |y| < 0.5
        np.testing.assert_allclose(heights[i, on_ramp], 0.25 * (x[on_ramp] + 1), atol=1e-6)
        assert not heights[i, ~on_ramp].any()
    assert not heights[:10].any() and not heights[20:].any()  # |y| > 0.5


def test_mesh_open_roof_with_its_ridge_on_a_sample_line(tmp_path):
    # An open surface (a scan is rarely closed): two slopes meeting at a ridge 0.3 m high at local x = 0,
    # where a column of samples lies (21 samples at 0.1 m). A ray on the shared edge can slip between the
    # two triangles; the ridge must still read 0.3.
    roof = tmp_path / "roof.obj"
    vertices = ["v 0 0 0", "v 1 0 0.3", "v 1 1 0.3", "v 0 1 0", "v 2 0 0", "v 2 1 0"]
    roof.write_text("\n".join([*vertices, "f 1 2 3", "f 1 3 4", "f 2 5 6", "f 2 6 3"]) + "\n")
    heights = mesh(0.0, _rng(), (21, 21), 0.1, file=str(roof))
    x = (np.arange(21) - 10) * 0.1
    for i in (6, 10, 14):  # rows inside |y| < 0.5
        np.testing.assert_allclose(heights[i, 1:-1], 0.3 * (1 - np.abs(x[1:-1])), atol=1e-6)
    assert not heights[:5].any() and not heights[16:].any()


def test_mesh_in_the_grid_relative_to_the_working_directory(tmp_path, monkeypatch):
    _box_obj(tmp_path / "box.obj", (0.0, 0.0, 0.0), (1.0, 1.0, 0.2))
    monkeypatch.chdir(tmp_path)
    sub = {"box": {"func": SUB + "mesh", "proportion": 1.0, "params": {"file": "box.obj"}}}
    grid = generate_terrain(_cfg(sub, num_cols=1))
    np.testing.assert_allclose(grid.origins[:, 0, 2], 0.2, atol=1e-6)
    # level 0's centre: x = -1.0, y = 0; a sample on the box and one beside it
    x, y = grid.origins[0, 0, :2]
    on_top = round((x + 0.05 - grid.x_min) / 0.1), round((y + 0.05 - grid.y_min) / 0.1)
    beside = round((x + 0.65 - grid.x_min) / 0.1), round((y + 0.05 - grid.y_min) / 0.1)
    assert grid.heights[on_top[1], on_top[0]] == pytest.approx(0.2, abs=1e-6)
    assert grid.heights[beside[1], beside[0]] == 0.0


# ---------------------------------------------------------------- bad input


@pytest.fixture
def built(monkeypatch):
    """Counts the calls of ``flat``, which every bad config below also holds, to show nothing was built."""
    calls = []
    original = sub_terrains_module.flat

    @functools.wraps(original)
    def counting_flat(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(sub_terrains_module, "flat", counting_flat)
    return calls


def _with_ground(entry: dict, **grid) -> dict:
    """A valid ground column plus ``entry`` as sub-terrain ``x``, half the columns each."""
    return _cfg({"ground": {"func": SUB + "flat", "proportion": 0.5}, "x": {"proportion": 0.5} | entry}, **grid)


def _stairs(**params) -> dict:
    return {"func": SUB + "pyramid_stairs", "params": params}


BAD_CONFIGS = {
    "no levels": (_cfg(num_levels=0), "terrain.num_levels"),
    "no columns": (_cfg(num_cols=0), "terrain.num_cols"),
    "negative seed": (_cfg(seed=-1), "terrain.seed"),
    "one size": (_cfg(sub_terrain_size=[2.0]), "terrain.sub_terrain_size"),
    "negative size": (_cfg(sub_terrain_size=[2.0, -1.0]), "terrain.sub_terrain_size"),
    "zero scale": (_cfg(horizontal_scale=0.0), "terrain.horizontal_scale"),
    "scale over half a sub-terrain": (_cfg(horizontal_scale=1.5), "terrain.horizontal_scale"),
    "negative border": (_cfg(border_width=-0.1), "terrain.border_width"),
    "unknown grid key": (_cfg(nm_levels=3), "terrain.nm_levels"),
    "no sub-terrain": (_cfg() | {"sub_terrains": {}}, "terrain.sub_terrains"),
    "unknown sub-terrain key": (
        _with_ground({"func": SUB + "flat", "proportoin": 0.5}),
        "terrain.sub_terrains.x.proportoin",
    ),
    "negative proportion": (
        _cfg({"ground": {"func": SUB + "flat", "proportion": 1.5}, "x": {"func": SUB + "flat", "proportion": -0.5}}),
        "terrain.sub_terrains.x.proportion",
    ),
    "proportions sum to 0.9": (
        _cfg({"ground": {"func": SUB + "flat", "proportion": 0.5}, "x": {"func": SUB + "flat", "proportion": 0.4}}),
        r"('terrain\.sub_terrains\.\*\.proportion' must sum to 1 .*got 0\.9 = ground 0\.5 \+ x 0\.4)",
    ),
    "missing function": (_with_ground({"func": SUB + "pyramid_stairz"}), "terrain.sub_terrains.x.func"),
    "missing module": (_with_ground({"func": "unilab_gpu.terrain.nothing.flat"}), "terrain.sub_terrains.x.func"),
    "outside the allowed modules": (_with_ground({"func": "numpy.zeros"}), "terrain.sub_terrains.x.func"),
    "a class": (_with_ground({"func": "unilab_gpu.terrain.terrain_cfg.TerrainCfg"}), "terrain.sub_terrains.x.func"),
    "not a height function": (_with_ground({"func": SUB + "interpolate"}), "terrain.sub_terrains.x.func"),
    "unknown param": (_with_ground(_stairs(step_widht=0.3)), "terrain.sub_terrains.x.params.step_widht"),
    "reversed range": (
        _with_ground(_stairs(step_height_range=[0.2, 0.1])),
        "terrain.sub_terrains.x.params.step_height_range",
    ),
    "one-number range": (
        _with_ground(_stairs(step_height_range=[0.2])),
        "terrain.sub_terrains.x.params.step_height_range",
    ),
    "negative range": (
        _with_ground({"func": SUB + "pyramid_slope", "params": {"slope_range": [-0.1, 0.1]}}),
        "terrain.sub_terrains.x.params.slope_range",
    ),
    "zero step width": (_with_ground(_stairs(step_width=0.0)), "terrain.sub_terrains.x.params.step_width"),
    "platform wider than the sub-terrain": (
        _with_ground(_stairs(platform_width=2.5)),
        "terrain.sub_terrains.x.params.platform_width",
    ),
    "zero noise step": (
        _with_ground({"func": SUB + "random_rough", "params": {"noise_step": 0.0}}),
        "terrain.sub_terrains.x.params.noise_step",
    ),
    "zero downsampled scale": (
        _with_ground({"func": SUB + "random_rough", "params": {"downsampled_scale": 0}}),
        "terrain.sub_terrains.x.params.downsampled_scale",
    ),
    "slope 1000": (
        _with_ground({"func": SUB + "pyramid_slope", "params": {"slope_range": [0.0, 1000.0]}}),
        r"('terrain\.sub_terrains\.x\.params\.slope_range' must be \[low, high\] with 0 <= low <= high <= 3 "
        r"\(rise over run\))",
    ),
    "100 m steps": (
        _with_ground(_stairs(step_height_range=[100.0, 100.0])),
        r"('terrain\.sub_terrains\.x\.params\.step_height_range' must be .* <= 20 m, got \[100\.0, 100\.0\])",
    ),
    "step width of 1e-9 m": (
        _with_ground(_stairs(step_width=1e-9)),
        r"('terrain\.sub_terrains\.x\.params\.step_width' must be a length in \[0\.01, 1000\] m, got 1e-09)",
    ),
    "downsampled scale of 1e-9 m": (
        _with_ground({"func": SUB + "random_rough", "params": {"downsampled_scale": 1e-9}}),
        r"('terrain\.sub_terrains\.x\.params\.downsampled_scale' must be a length in \[0\.01, 1000\] m)",
    ),
    "negative obstacle count": (
        _with_ground({"func": SUB + "discrete_obstacles", "params": {"num_obstacles": -1}}),
        "terrain.sub_terrains.x.params.num_obstacles",
    ),
    "mesh without a file": (_with_ground({"func": SUB + "mesh"}), "terrain.sub_terrains.x.params.file"),
    "zero mesh scale": (
        _with_ground({"func": SUB + "mesh", "params": {"file": "box.obj", "scale": 0.0}}),
        "terrain.sub_terrains.x.params.scale",
    ),
    "grid too large": (
        {"num_levels": 200, "num_cols": 100, "sub_terrains": _cfg()["sub_terrains"]},
        "(an estimated 1,968 MiB.*'terrain.num_levels'.*'terrain.num_cols'.*'terrain.horizontal_scale')",
    ),
}


@pytest.mark.parametrize("cfg, key", BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_config_names_its_key_and_builds_nothing(cfg, key, built):
    match = key if key.startswith("(") else re.escape(f"'{key}'")  # a regex, or a key path in quotes
    with pytest.raises(ValueError, match=match) as error:
        generate_terrain(cfg)
    assert "\n" not in str(error.value)
    assert built == []


def test_the_bad_config_baseline_builds_its_ground(built):
    # The ground column of the configs above is built when nothing is wrong: 2 levels x 1 column.
    generate_terrain(_with_ground(_stairs()))
    assert len(built) == 2


def test_bad_meshes_name_the_key_and_build_nothing(tmp_path, built):
    key = re.escape("'terrain.sub_terrains.x.params.file'")
    missing = _with_ground({"func": SUB + "mesh", "params": {"file": str(tmp_path / "missing.obj")}})
    with pytest.raises(FileNotFoundError, match=key + ".*missing.obj"):
        generate_terrain(missing)
    (tmp_path / "garbage.obj").write_text("this is not a mesh\n")
    garbage = _with_ground({"func": SUB + "mesh", "params": {"file": str(tmp_path / "garbage.obj")}})
    with pytest.raises(ValueError, match=key + ".*MuJoCo can read") as error:
        generate_terrain(garbage)
    assert "\n" not in str(error.value)
    box = _box_obj(tmp_path / "box.obj", (0.0, 0.0, 0.0), (1.0, 1.0, 0.2))
    too_big = _with_ground({"func": SUB + "mesh", "params": {"file": str(box), "scale": 2.5}})
    with pytest.raises(ValueError, match=key + r".*2\.5 x 2\.5 m at scale 2\.5.*2 x 2 m"):
        generate_terrain(too_big)
    assert built == []


def test_a_height_function_with_the_wrong_output_shape_is_named(monkeypatch):
    monkeypatch.setattr(sub_terrains_module, "flat", functools.wraps(flat)(lambda *args: np.zeros((3, 3))))
    with pytest.raises(ValueError, match=re.escape("'terrain.sub_terrains.ground.func'") + r".*\(20, 20\)"):
        generate_terrain(_cfg())


@pytest.mark.parametrize(
    ("heights", "described"),
    [
        (lambda shape: np.full(shape, 1e30), r"largest \|height\| 1e\+30 m"),
        (lambda shape: np.full(shape, "high"), r"shape \(20, 20\) of <U4"),
        (lambda shape: np.full(shape, np.nan), r"largest \|height\| nan m"),
    ],
)
def test_a_height_function_returning_heights_out_of_bounds_or_not_numbers_is_named(monkeypatch, heights, described):
    monkeypatch.setattr(sub_terrains_module, "flat", functools.wraps(flat)(lambda d, rng, shape, h: heights(shape)))
    with pytest.raises(
        ValueError,
        match=re.escape("'terrain.sub_terrains.ground.func' must return finite heights within +-20 m")
        + ".*"
        + described,
    ) as error:
        generate_terrain(_cfg())
    assert "\n" not in str(error.value)
