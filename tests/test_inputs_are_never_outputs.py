"""A command's own inputs are never its outputs (issue 46, defect 3): ``--out`` / ``--video`` that
name the motion, terrain, model or policy a command reads are refused in one line, ``--force`` or
not, before anything runs; and ``unilab-eval``'s other bounds (issue 46, values accepted silently)."""

from __future__ import annotations

from pathlib import Path

import pytest

from unilab_gpu.cli.eval import MAX_SECONDS, MAX_TRIALS
from unilab_gpu.cli.eval import main as eval_main
from unilab_gpu.cli.sim2sim import main as sim2sim_main

ROOT = Path(__file__).resolve().parents[1]
POLICY = ROOT / "docs" / "policies" / "go2_velocity_sac.onnx"
TERRAIN = ROOT / "configs" / "terrain" / "slopes_stairs_eval.yaml"


def _one_line_error(capsys, prefix: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(prefix) and "\n" not in err, err
    return err


@pytest.fixture
def inputs(tmp_path) -> dict[str, Path]:
    """Copies of the files a run reads, whose bytes a test checks afterwards."""
    files = {"motion": tmp_path / "clip.npz", "terrain": tmp_path / "ground.yaml", "model": tmp_path / "robot.xml"}
    files["motion"].write_bytes(b"a clip")
    files["terrain"].write_text(TERRAIN.read_text())
    files["model"].write_text("<mujoco/>")
    return files


@pytest.mark.parametrize("input_name", ["motion", "terrain"])
@pytest.mark.parametrize("force", [[], ["--force"]])
def test_eval_out_never_replaces_an_input(inputs, capsys, input_name, force):
    target = inputs[input_name]
    before = target.read_bytes()
    option = ["--motion", str(inputs["motion"])] if input_name == "motion" else ["--terrain", str(target)]
    code = eval_main(["--onnx", str(POLICY), *option, "--out", str(target), *force])
    err = _one_line_error(capsys, "unilab-eval: error: --out:")
    assert code == 2 and f"{target} is this command's own input" in err
    assert target.read_bytes() == before


@pytest.mark.parametrize(("input_name", "output"), [("motion", "--out"), ("terrain", "--out"), ("model", "--video")])
def test_sim2sim_out_and_video_never_replace_an_input(inputs, capsys, input_name, output):
    target = inputs[input_name]
    before = target.read_bytes()
    code = sim2sim_main(
        [str(POLICY), f"--{input_name}", str(target), output, str(target), "--force", "--seconds", "0.1"]
    )
    err = _one_line_error(capsys, f"unilab-sim2sim: error: {output}:")
    assert code == 2 and f"{target} is this command's own input" in err
    assert target.read_bytes() == before


def test_sim2sim_out_never_replaces_a_terrain_given_by_name(tmp_path, capsys, monkeypatch):
    user = tmp_path / "project"
    (user / "configs" / "terrain").mkdir(parents=True)
    named = user / "configs" / "terrain" / "mine.yaml"
    named.write_text(TERRAIN.read_text())
    monkeypatch.setenv("UNILAB_PATH", str(user))
    code = sim2sim_main([str(POLICY), "--terrain", "mine", "--out", str(named), "--force"])
    assert code == 2 and "is this command's own input" in _one_line_error(capsys, "unilab-sim2sim: error: --out:")
    assert named.read_text() == TERRAIN.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--seconds", "1e12"],
            f"--seconds must be a number in (0, {MAX_SECONDS:g}] (seconds each row walks), got 1e+12",
        ),
        (["--seconds", "nan"], "--seconds must be a number in (0, 3600] (seconds each row walks), got nan"),
        (["--seed", "-1"], "--seed must be a whole number in [0, 2**63 - 1], got -1"),
        (
            ["--trials", "1000000000"],
            f"--trials must be a whole number in [1, {MAX_TRIALS}] (trials per set, each a row of the env)",
        ),
    ],
)
def test_eval_bounds_are_one_line_naming_the_option(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        eval_main(["--onnx", str(POLICY), *argv])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_.value.code == 2 and message in err, err
