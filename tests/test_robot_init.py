"""A new robot with no MJCF edit (issue 60): ``unilab-robot init`` drafts the robot config of a
Menagerie-like quadruped (tests/robot_models.py: kp with no kv, joint damping and frictionloss, a
``home`` key that does not hold, same-named foot geoms and sites), the config holds the standing
pose and its holding targets, and a task on it builds: the robot contract (MuJoCo C: qacc = 0 at
rest) holds on the config's key while the MJCF on disk stays byte for byte as written."""

from __future__ import annotations

import subprocess
import sys

import mujoco
import numpy as np
import pytest
from robot_models import QUAD_STAND, menagerie_like_quad_xml
from script_helpers import SCRIPTS

from unilab_gpu.cli.robot import main as robot_main
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.robot_model import load_robot_cfg
from unilab_gpu.paths import USER_PATH_ENV
from unilab_gpu.sim.robot_contract import contract_errors

TASK = """defaults:
  - base/velocity
  - override /robot@robot: mquad
  - _self_
rewards:
  feet_orientation: null
  feet_phase: {params: {phase_offsets: [0.0, 3.14159265, 3.14159265, 0.0]}}
"""


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    robot = tmp_path / "assets" / "robots" / "mquad"
    robot.mkdir(parents=True)
    (robot / "scene.xml").write_text(menagerie_like_quad_xml())
    (tmp_path / "configs" / "task").mkdir(parents=True)
    (tmp_path / "configs" / "task" / "mquad_velocity.yaml").write_text(TASK)
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path))
    return tmp_path


def test_the_mjcf_as_written_breaks_the_contract(user_folder) -> None:
    """The premise: Menagerie's own ``home`` key does not hold its pose, and there is no IMU."""
    model = mujoco.MjModel.from_xml_path(str(user_folder / "assets/robots/mquad/scene.xml"))
    errors = contract_errors(model, "home")
    assert any("'home' does not hold its pose" in e for e in errors)
    assert model.actuator_biasprm[0, 2] == 0.0  # kp with no kv
    assert model.dof_frictionloss[6] > 0 and model.dof_damping[6] > 0


def test_init_drafts_a_config_a_task_builds_on_without_an_mjcf_edit(user_folder, capsys) -> None:
    scene = user_folder / "assets/robots/mquad/scene.xml"
    before = scene.read_bytes()
    out = user_folder / "configs" / "robot" / "mquad.yaml"
    assert robot_main(["init", str(scene), "--out", str(out)]) == 0
    assert f"drafted {out}" in capsys.readouterr().out
    robot, _ = load_robot_cfg("mquad")
    assert robot.model == "mquad" and robot.torso_body == "trunk" and robot.keyframe == "stand"
    assert (robot.imu.site, robot.imu.gyro, robot.imu.velocimeter) == ("imu", "imu_gyro", "imu_linvel")
    assert robot.feet.sites == ["FL", "FR", "RL", "RR"] and robot.feet.geoms == ["FL", "FR", "RL", "RR"]
    assert robot.feet.bodies == ["FL_calf", "FR_calf", "RL_calf", "RR_calf"] and robot.feet.condim == 3
    assert robot.mirror_name_pairs == [["FL_", "FR_"], ["RL_", "RR_"]]
    # physics: only the timestep differs from what the task needs (MuJoCo's solver defaults stay)
    assert robot.physics.timestep == 0.005 and robot.physics.iterations is None and robot.physics.cone is None
    # the pose is the home key's joint angles, standing on the floor; heights follow from it
    stand_angles = np.tile([QUAD_STAND[j] for j in ("hip", "thigh", "calf")], 4)
    np.testing.assert_allclose(robot.stand.qpos[7:], stand_angles)
    assert robot.base_height == pytest.approx(robot.stand.qpos[2], abs=1e-3)
    assert robot.fall_height == pytest.approx(robot.base_height / 2, abs=1e-3)
    # Holding targets: with kp 100 the static torques move each target off the pose.
    assert np.abs(np.array(robot.stand.ctrl) - stand_angles).max() > 0.01

    env = make_env("mquad_velocity", num_envs=2, compile=False, announce=False)  # the contract holds
    model = env.sim.mj_model
    key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "stand")
    np.testing.assert_allclose(model.key_qpos[key], robot.stand.qpos, atol=1e-8)
    np.testing.assert_allclose(model.key_ctrl[key], robot.stand.ctrl, atol=1e-8)
    home = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, "home")
    np.testing.assert_allclose(model.key_ctrl[home], stand_angles)  # the MJCF's own key, as it came
    data = mujoco.MjData(model)  # MuJoCo C: at rest on the config's key, nothing accelerates
    mujoco.mj_resetDataKeyframe(model, data, key)
    mujoco.mj_forward(model, data)
    assert np.abs(data.qacc).max() < 0.01
    assert scene.read_bytes() == before


def test_the_keyframe_tool_rewrites_the_stand_block_only(user_folder, capsys) -> None:
    out = user_folder / "configs" / "robot" / "mquad.yaml"
    assert robot_main(["init", str(user_folder / "assets/robots/mquad/scene.xml"), "--out", str(out)]) == 0
    drafted = out.read_text()
    pose = [".*_thigh_joint=1.0", ".*_calf_joint=-1.9"]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}
    tool = [sys.executable, str(SCRIPTS / "stand_keyframe.py"), "mquad", "--pose", *pose, "--write-config"]
    run = subprocess.run(tool, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert f"wrote the stand: block of {out}" in run.stdout
    text = out.read_text()
    assert text.split("stand:")[0] == drafted.split("stand:")[0]  # every other line (and comment) kept
    robot, _ = load_robot_cfg("mquad")
    assert robot.stand.qpos[8:10] == pytest.approx([1.0, -1.9])
    assert robot_main(["init", str(user_folder / "assets/robots/mquad/scene.xml"), "--out", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
