"""``unilab-eval --terrain``: a velocity policy walked on each sub-terrain of an evaluation terrain,
judged by the task's failure terminations and the distance it covered (hand-made policies whose
outcome is known)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from unilab_gpu.cli.eval import main
from unilab_gpu.evaluation.policies import TrainedPolicy
from unilab_gpu.evaluation.terrain import evaluate_on_terrain

SMALL = ["terrain.sub_terrain_size=[4.0,4.0]"]


def _standing(task: str = "go2_velocity", overrides: list[str] | None = None) -> TrainedPolicy:
    """The zero action: the Go2 holds its keyframe pose, standing still without falling."""
    return TrainedPolicy(
        task,
        list(overrides or []),
        {"policy": 47},
        12,
        "zero action",
        Path("zero"),
        lambda device: lambda obs: torch.zeros(obs["policy"].shape[0], 12, device=device),
    )


def test_a_standing_policy_never_falls_but_does_not_walk() -> None:
    # Trained on flat ground (go2_velocity): the evaluation adds the terrain itself.
    report = evaluate_on_terrain(
        _standing(), "slopes_stairs_eval", command=(0.5, 0.0, 0.0), seconds=0.4, rows_per_column=2
    )
    assert report["required_distance_m"] == pytest.approx(0.5 * 0.5 * 0.4)
    assert list(report["sub_terrains"]) == ["slope_down", "slope_up", "stairs_down", "stairs_up"]
    for row in [*report["sub_terrains"].values(), report["overall"]]:
        assert row["no_fall_rate"] == 1.0 and row["success_rate"] == 0.0
        assert row["distance_m"] < report["required_distance_m"]  # settling on the keyframe, no steps
        # Standing against 0.5 m/s forward: the planar error is at least the command less the
        # settling speed (|c - v| >= |c| - |v|), which the keyframe drop keeps under 0.1 m/s.
        assert row["lin_vel_error_mps"] > 0.4
        # Feet that stay on the ground have no swing clearance, on the pyramid's top as in the
        # pit's floor, which lie more than a metre apart in height: the clearance is taken from the ground
        # under each foot and the keyframe's site height.
        assert abs(row["swing_clearance_m"]) < 0.01
    assert report["overall"]["rows"] == 8
    assert report["torque_limit_share"] == 0.0  # the keyframe's holding targets ask no motor its limit


def test_a_zero_command_needs_no_distance_and_a_fall_fails_the_row() -> None:
    still = evaluate_on_terrain(
        _standing(), "slopes_stairs_eval", command=(0.0, 0.0, 0.0), seconds=0.2, rows_per_column=1
    )
    assert still["overall"]["success_rate"] == 1.0
    # A fall height above the standing base: every row counts as fallen on its first step.
    falling = _standing(overrides=["terminations.fell.params.min_height=5.0"])
    fell = evaluate_on_terrain(falling, "slopes_stairs_eval", command=(0.0, 0.0, 0.0), seconds=0.2, rows_per_column=1)
    assert fell["overall"]["no_fall_rate"] == 0.0 and fell["overall"]["success_rate"] == 0.0


def test_bad_terrain_evaluation_input_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(ValueError, match="--rows-per-column must be >= 1, got 0"):
        evaluate_on_terrain(_standing(), "slopes_stairs_eval", rows_per_column=0)
    with pytest.raises(ValueError, match="--seconds must be > 0"):
        evaluate_on_terrain(_standing(), "slopes_stairs_eval", seconds=0.0)
    tracking = TrainedPolicy("g1_tracking", [], {"policy": 160}, 29, "x", Path("x"), lambda device: None)
    with pytest.raises(ValueError, match="--terrain: the policy's task 'g1_tracking' has no velocity command 'twist'"):
        evaluate_on_terrain(tracking, "slopes_stairs_eval")


def test_cli_writes_the_report(tmp_path, capsys) -> None:
    onnx = Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx"
    out = tmp_path / "terrain_eval.json"
    code = main(
        [
            "--onnx",
            str(onnx),
            "--terrain",
            "slopes_stairs_eval",
            "--seconds",
            "0.2",
            "--rows-per-column",
            "1",
            "--device",
            "cpu",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    report = json.loads(out.read_text())
    assert report["task"] == "go2_velocity" and report["terrain"] == "slopes_stairs_eval"
    assert report["overall"]["rows"] == 4
    assert report["overall"]["swing_clearance_m"] is not None
    printed = capsys.readouterr().out
    assert "slope_up" in printed and "swing cm" in printed
    assert main(["--onnx", str(onnx), "--terrain", "nope", "--device", "cpu"]) == 2
    assert "nope" in capsys.readouterr().err


def test_a_terrain_file_evaluates_like_its_name(tmp_path) -> None:
    """``--terrain`` takes a file as ``unilab-sim2sim --terrain`` does: the same ground as the name."""
    source = Path(__file__).resolve().parents[1] / "configs" / "terrain" / "slopes_stairs_eval.yaml"
    task_file = tmp_path / "task.yaml"  # a task config's terrain: mapping
    task_file.write_text("terrain:\n" + "".join(f"  {line}\n" for line in source.read_text().splitlines()))
    args = dict(command=(0.0, 0.0, 0.0), seconds=0.2, rows_per_column=1)
    user_path = os.environ.get("UNILAB_PATH")
    by_name = evaluate_on_terrain(_standing(), "slopes_stairs_eval", **args)
    by_file = evaluate_on_terrain(_standing(), task_file, **args)
    assert by_file["terrain_config"] == by_name["terrain_config"]
    assert by_file["overall"] == by_name["overall"]
    assert os.environ.get("UNILAB_PATH") == user_path  # the temporary config folder is gone again


def test_a_terrain_name_of_nested_yaml_aliases_fails_at_once(tmp_path, monkeypatch, capsys) -> None:
    """A ``UNILAB_PATH`` terrain that Hydra would expand without end is read within bounds first."""
    from test_terrain_deploy import ALIAS_BOMB

    (tmp_path / "configs" / "terrain").mkdir(parents=True)
    (tmp_path / "configs" / "terrain" / "bomb.yaml").write_text(ALIAS_BOMB)
    monkeypatch.setenv("UNILAB_PATH", str(tmp_path))
    onnx = Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx"
    assert main(["--onnx", str(onnx), "--terrain", "bomb", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("unilab-eval: error: --terrain: ") and "values through YAML aliases" in err, err
    assert "\n" not in err


def test_ctrl_c_reports_and_writes_the_seconds_walked_before_it(tmp_path, capsys, monkeypatch) -> None:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

    real_step, calls = ManagerBasedRlEnv.step, []

    def interrupted_at_the_fifth(self, actions):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real_step(self, actions)

    monkeypatch.setattr(ManagerBasedRlEnv, "step", interrupted_at_the_fifth)
    onnx = Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx"
    out = tmp_path / "eval.json"
    argv = ["--onnx", str(onnx), "--terrain", "slopes_stairs_eval", "--seconds", "1", "--rows-per-column", "1"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 130
    report = json.loads(out.read_text())
    assert report["interrupted"] is True and report["seconds"] == pytest.approx(4 * 0.02)
    assert report["overall"]["rows"] == 4
    assert "interrupted; the report covers the 0.08 s walked before it" in capsys.readouterr().out


def test_the_training_terrain_overrides_give_way_to_the_evaluation_terrain() -> None:
    from unilab_gpu.envs.make_env import load_task_cfg
    from unilab_gpu.evaluation.terrain import evaluation_overrides

    trained = [
        "terrain=rough_cpu",
        "terrain.curriculum.demote_on_time_out=false",
        "+terrain.curriculum.promote_ratio=0.8",
        "commands.twist.params.heading_fraction=1.0",
    ]
    overrides = evaluation_overrides("go2_velocity_rough", trained, "slopes_stairs_eval", (0.5, 0.0, 0.0), 5.0, 0.0)
    assert [o for o in overrides if o.lstrip("+").startswith("terrain")][:1] == ["terrain=slopes_stairs_eval"]
    assert "commands.twist.params.heading_fraction=1.0" in overrides
    cfg = load_task_cfg("go2_velocity_rough", overrides)  # composed: no curriculum key lands on a null one
    assert (
        cfg.terrain.curriculum is None
        and cfg.terrain.num_cols == load_task_cfg("go2_velocity_rough", ["terrain=slopes_stairs_eval"]).terrain.num_cols
    )


TWO_LEVELS = """\
terrain:
  seed: 0
  num_levels: 2
  num_cols: 1
  sub_terrain_size: [4.0, 4.0]
  horizontal_scale: 0.1
  border_width: 1.0
  max_initial_level: 0
  curriculum: null
  sub_terrains:
    stairs_up: {func: unilab_gpu.terrain.sub_terrains.pyramid_stairs, proportion: 1.0,
                params: {step_height_range: [0.0, 0.4], step_width: 0.3, platform_width: 1.0, inverted: true}}
"""


def test_every_level_is_evaluated_and_named(tmp_path, capsys) -> None:
    """A 2-level file, 0 cm stairs at level 0 and 40 cm at level 1 (a pit with a 1 m floor, whose
    risers a Go2 cannot climb): every level is walked by default, each named in the report and the
    table; the committed flat-ground policy covers the 1 m asked of it on level 0, not on level 1."""
    terrain = tmp_path / "two_levels.yaml"
    terrain.write_text(TWO_LEVELS)
    onnx = Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx"
    out = tmp_path / "eval.json"
    argv = ["--onnx", str(onnx), "--terrain", str(terrain), "--seconds", "4", "--rows-per-column", "2"]
    assert main([*argv, "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["levels"] == [0, 1] and report["num_levels"] == 2
    level0, level1 = report["by_level"]["0"]["overall"], report["by_level"]["1"]["overall"]
    assert level0["rows"] == 2 and level1["rows"] == 2 and report["overall"]["rows"] == 4
    assert level0["success_rate"] == 1.0 and level1["success_rate"] < 1.0  # before: 100 %, level 0 alone
    assert level1["distance_m"] < level0["distance_m"]
    assert report["overall"]["success_rate"] == pytest.approx((level0["success_rate"] + level1["success_rate"]) / 2)
    printed = capsys.readouterr().out
    assert "levels 0, 1 of the terrain's 0 to 1" in printed
    assert "level 0 stairs_up" in printed and "level 1 stairs_up" in printed and "all levels overall" in printed
    # One level asked for: that level alone.
    argv[argv.index("4")] = "0.1"
    assert main([*argv, "--terrain-level", "1", "--device", "cpu", "--out", str(tmp_path / "one.json")]) == 0
    one = json.loads((tmp_path / "one.json").read_text())
    assert one["levels"] == [1] and list(one["by_level"]) == ["1"] and one["overall"]["rows"] == 2
    assert main([*argv, "--terrain-level", "2", "--device", "cpu"]) == 2
    assert "--terrain-level 2: terrain" in capsys.readouterr().err


def test_nonsense_and_unused_options_are_refused_in_one_line(capsys) -> None:
    """The poor-answer classes "nonsense accepted" and "misleading" of unilab-eval: an absurd
    command, tracking options with --terrain, a row count past any env, a velocity policy without
    --terrain."""
    onnx = str(Path(__file__).resolve().parents[1] / "docs" / "policies" / "go2_velocity_sac.onnx")
    walk = ["--onnx", onnx, "--terrain", "slopes_stairs_eval", "--device", "cpu"]
    cases = {
        (*walk, "--command", "1e30", "0", "0"): "--command must be a number in [-10, 10] (each of v_x v_y omega_z",
        (*walk, "--command", "nan", "0", "0"): "--command must be a number in [-10, 10] (each of v_x v_y omega_z",
        (*walk, "--trials", "8"): "--trials has no effect in a terrain evaluation (--terrain)",
        (*walk, "--motion", "clip.npz"): "--motion has no effect in a terrain evaluation",
        ("--onnx", onnx, "--terrain-level", "1"): "--terrain-level has no effect in a tracking evaluation",
    }
    for argv, message in cases.items():
        with pytest.raises(SystemExit) as stop:
            main(list(argv))
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert message in err.splitlines()[-1], err
    assert main([*walk, "--rows-per-column", "100000000"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--rows-per-column 100000000: 4 columns x 1 levels make 400,000,000 rows" in err and "\n" not in err
    assert main(["--onnx", onnx, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert "is a velocity policy (task go2_velocity)" in err and "--terrain slopes_stairs_eval" in err, err
