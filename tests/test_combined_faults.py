"""scripts/combined_faults.py: latency and encoder bias together, each row the run ``unilab-sim2sim``
makes with the same faults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("onnxruntime")

from script_helpers import load_script  # noqa: E402

from unilab_gpu.deploy import Faults  # noqa: E402
from unilab_gpu.export.sim2sim import Scenario, sim2sim  # noqa: E402

POLICIES = Path(__file__).resolve().parents[1] / "docs" / "policies"
CLIP = Path(__file__).resolve().parents[2] / "shared" / "motions" / "g1" / "largebox_carry.npz"


def test_each_row_is_the_sim2sim_run_with_both_faults(tmp_path, capsys) -> None:
    cf = load_script("combined_faults")
    policy, out = POLICIES / "g1_velocity_sac.onnx", tmp_path / "faults.json"
    argv = [str(policy), "--commands", "-0.4,0,0", "--seconds", "0.6", "--delay-steps", "2", "--out", str(out)]
    assert cf.main(argv) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["command"], r["faults"]["delay_steps"], r["faults"]["encoder_bias_rad"]) for r in runs] == [
        ([-0.4, 0.0, 0.0], 2, 0.02),
        ([-0.4, 0.0, 0.0], 2, -0.02),
    ]
    for row, bias in zip(runs, (0.02, -0.02), strict=True):
        direct = sim2sim(Scenario(policy, (-0.4, 0.0, 0.0), None, 0.6, faults=Faults(delay_steps=2, encoder_bias=bias)))
        summary = direct["summary"]
        assert row["falls"] == summary["falls"] and row["diverged"] == summary["diverged"]
        assert row["lin_vel_error_mps"] == round(summary["lin_vel_error_mps"], 4)
        assert row["yaw_rate_error_radps"] == round(summary["yaw_rate_error_radps"], 4)
    nominal = sim2sim(Scenario(policy, (-0.4, 0.0, 0.0), None, 0.6))["summary"]["lin_vel_error_mps"]
    assert all(abs(r["lin_vel_error_mps"] - nominal) > 1e-4 for r in runs)  # the faults reached the runs
    assert "2 runs, " in capsys.readouterr().out


def test_a_velocity_policy_runs_the_grids_four_commands_by_default(tmp_path) -> None:
    cf = load_script("combined_faults")
    out = tmp_path / "faults.json"
    assert cf.main([str(POLICIES / "go2_velocity_sac.onnx"), "--seconds", "0.1", "--out", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    commands = [tuple(r["command"]) for r in runs[::2]]
    assert commands == [(0.5, 0.0, 0.0), (-0.4, 0.0, 0.0), (0.0, 0.3, 0.0), (0.0, -0.3, 0.0)]
    assert {r["policy"] for r in runs} == {"go2_velocity_sac"} and all(r["seconds"] == 0.1 for r in runs)


def test_a_tracking_policy_runs_its_reference_once_per_bias_sign(tmp_path) -> None:
    if not CLIP.exists():
        pytest.skip(f"{CLIP} is absent (the shared motions)")
    cf = load_script("combined_faults")
    out = tmp_path / "faults.json"
    argv = [str(POLICIES / "g1_tracking_sac.onnx"), "--motion", str(CLIP), "--seconds", "0.2", "--out", str(out)]
    assert cf.main(argv) == 0
    runs = json.loads(out.read_text())["runs"]
    assert [(r["command"], r["faults"]["encoder_bias_rad"]) for r in runs] == [(None, 0.02), (None, -0.02)]
    assert all("body_pos_error_anchored_m" in r and r["faults"]["delay_steps"] == 1 for r in runs)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--encoder-bias", "0"], "--encoder-bias must be a number in (0, 0.5] (rad; both signs are run), got 0"),
        (["--delay-steps", "-1"], "--delay-steps must be a whole number in [0, 10]"),
        (["--seconds", "nan"], "--seconds must be a number in (0, "),
    ],
)
def test_bad_numbers_are_one_line_naming_the_option(tmp_path, capsys, option, message) -> None:
    cf = load_script("combined_faults")
    with pytest.raises(SystemExit) as exit_:
        cf.main([str(POLICIES / "g1_velocity_sac.onnx"), "--out", str(tmp_path / "f.json"), *option])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_missing_policy_is_one_line_and_writes_nothing(tmp_path, capsys) -> None:
    cf = load_script("combined_faults")
    out = tmp_path / "faults.json"
    assert cf.main([str(tmp_path / "absent.onnx"), "--out", str(out)]) == 2
    assert "combined_faults: error:" in capsys.readouterr().err and not out.exists()
