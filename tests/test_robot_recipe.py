"""docs/robots.md, "Adding a robot", executed: a robot whose MJCF comes as MuJoCo Menagerie ships
its quadrupeds (tests/robot_models.py: the project's Go2 rewritten with a 2 ms timestep, an
elliptic cone with impratio 100, condim-6 feet, an IMU site without sensors and no keyframe) is
added exactly as the page says, its MJCF never edited (the keyframe tool writes the standing
pose into the robot config). The robot config and the task files are the page's YAML blocks, written where their
first line says; the commands are the page's last block, run in order (with a tiny training budget
and short rollouts appended). If the recipe drifts from the code, this fails."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import mujoco
import pytest
import torch
from rl_agent_helpers import TINY_SAC_OVERRIDES
from robot_models import MENAGERIE_OPTION, menagerie_style_go2
from script_helpers import SCRIPTS

from unilab_gpu.cli.export import main as export_main
from unilab_gpu.cli.play import main as play_main
from unilab_gpu.cli.sim2sim import main as sim2sim_main
from unilab_gpu.cli.train import main as train_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import USER_PATH_ENV

pytest.importorskip("onnxruntime")

DOC = Path(__file__).resolve().parents[1] / "docs" / "robots.md"
TINY_TRAINING = [
    "env.num_envs=4",
    "total_env_steps=16",
    "log_every=1",
    "progress=lines",
    *TINY_SAC_OVERRIDES,
]
"""Appended to the page's ``unilab-train`` command: the recipe, not the learning, is under test."""


def recipe() -> tuple[dict[str, str], list[list[str]]]:
    """The page's "Adding a robot" section: its files (path from a YAML block's first line ->
    text) and the commands of its bash block."""
    text = DOC.read_text()
    section = text[text.index("## Adding a robot") :]
    section = section[: section.index("\n## ", 3)]
    files, commands = {}, []
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", section, flags=re.S):
        if lang == "yaml":
            first = body.split("\n", 1)[0]
            assert first.startswith("# "), f"a YAML block of the recipe starts with '# <path>': {first!r}"
            files[first[2:].strip()] = body
        elif lang == "bash":
            commands = [shlex.split(line) for line in body.strip().splitlines()]
    return files, commands


@pytest.mark.slow
def test_the_recipe_adds_a_menagerie_robot_that_trains_exports_and_runs_in_mujoco(tmp_path, monkeypatch) -> None:
    files, commands = recipe()
    assert set(files) == {
        "configs/robot/quad.yaml",
        "configs/task/quad_velocity.yaml",
        "configs/task/quad_velocity_rough.yaml",
    }
    assert len(files["configs/robot/quad.yaml"].strip().splitlines()) <= 30  # a small robot config
    folder = tmp_path / "my_robots"
    robot = folder / "assets" / "robots" / "quad"
    robot.mkdir(parents=True)

    def write_mjcf(key: str = "") -> None:  # the MJCF as downloaded, without a keyframe
        for name, text in menagerie_style_go2(key).items():
            (robot / name).write_text(text)

    write_mjcf()
    for path, body in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(body)
    monkeypatch.chdir(tmp_path)

    ran = []
    for command in commands:
        name, args = command[0], command[1:]
        if name == "export":
            variable, value = args[0].split("=", 1)
            assert variable == USER_PATH_ENV and value == "$PWD/my_robots"
            monkeypatch.setenv(USER_PATH_ENV, str(folder))
        elif name == "python":
            assert args[0] == "scripts/stand_keyframe.py"
            assert "--write-config" in args  # the key goes into the robot config, never the MJCF
            subprocess.run(
                [sys.executable, str(SCRIPTS / "stand_keyframe.py"), *args[1:]],
                capture_output=True,
                text=True,
                check=True,
            )
        elif name == "unilab-train":
            assert train_main([*args, *TINY_TRAINING]) == 0
        elif name == "unilab-play":
            assert play_main([*args, "--steps", "5", "--num-envs", "2"]) == 0
        elif name == "unilab-export":
            assert export_main(args) == 0
        elif name == "unilab-sim2sim":
            report = tmp_path / "sim2sim.json"
            assert sim2sim_main([*args, "--seconds", "0.2", "--out", str(report)]) == 0
            result = json.loads(report.read_text())
            assert result["task"] == "quad_velocity" and result["seconds"] == pytest.approx(0.2)
            assert result["mjcf"].endswith("quad/scene.xml") and result["command"] == [-0.3, 0.0, 0.0]
            # MuJoCo C ran the robot config's options over the MJCF's, as training did.
            assert result["physics"] == {
                "timestep": 0.005,
                "iterations": 100,
                "ls_iterations": 50,
                "cone": "elliptic",
                "impratio": 100.0,
            }
            assert result["physics_dt"] == 0.005 and result["control_dt"] == pytest.approx(0.02)
        else:
            raise AssertionError(f"the recipe runs a command this test does not know: {command}")
        ran.append(name)
    assert ran == ["export", "python", "unilab-train", "unilab-play", "unilab-export", "unilab-sim2sim"]
    assert MENAGERIE_OPTION in (robot / "scene.xml").read_text()  # the MJCF's own options, untouched
    assert {name: (robot / name).read_text() for name in ("scene.xml", "go2.xml")} == menagerie_style_go2()
    # The env built the robot the config describes: its options, the added IMU, condim-3 feet.
    env = make_env("quad_velocity", num_envs=2, compile=False, announce=False)
    model = env.sim.mj_model
    assert (model.opt.timestep, model.opt.iterations, model.opt.ls_iterations) == (0.005, 100, 50)
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and model.opt.impratio == 100.0
    assert model.sensor("imu_gyro").type[0] == mujoco.mjtSensor.mjSENS_GYRO and env.step_dt == pytest.approx(0.02)
    assert {int(model.geom(f"{leg}_foot_collision").condim[0]) for leg in ("FL", "FR", "RL", "RR")} == {3}
    # Without the config's timestep, the MJCF's 2 ms under decimation 4 would control at 125 Hz: refused.
    with pytest.raises(ValueError, match=r"= 0.008 s \(125 Hz\), but the task's 'control_dt' is 0.02 s"):
        make_env("quad_velocity", num_envs=2, compile=False, announce=False, overrides=["robot.physics.timestep=null"])
    # The rough-terrain task of the page: the robot's floor becomes the terrain, rows stand on it.
    small = ["terrain.num_levels=2", "terrain.num_cols=7", "terrain.sub_terrain_size=[3.0,3.0]"]
    rough = make_env("quad_velocity_rough", num_envs=2, compile=False, overrides=small, announce=False)
    rough.reset()
    rough.step(torch.zeros(2, rough.action_dim))
    assert rough.sim.mj_model.nhfield == 1 and rough.terrain.num_levels == 2
    ground = rough.terrain.heights_at(rough.robot.root_pos_w[:, :2])
    assert bool((rough.robot.root_pos_w[:, 2] - ground > 0.15).all())
