"""scripts/stand_keyframe.py: the committed G1 stand keyframe is what it computes, and its keys hold
any robot's pose (MuJoCo C: qacc = 0 at rest, and the robot stays up for a second)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import mujoco
import numpy as np
import pytest
from robot_models import BIPED_POSE, biped_xml
from script_helpers import SCRIPTS, load_script

from unilab_gpu.envs.robot_model import load_robot_cfg, robot_edit
from unilab_gpu.paths import USER_PATH_ENV, robot_asset
from unilab_gpu.sim.robot_contract import contract_errors

keyframe_tool = load_script("stand_keyframe")

G1_POSE = [
    ".*_hip_pitch_joint=-0.312",
    ".*_knee_joint=0.669",
    ".*_ankle_pitch_joint=-0.357",  # levels the soles: -(hip pitch + knee)
    ".*_shoulder_pitch_joint=0.2",
    "left_shoulder_roll_joint=0.2",
    "right_shoulder_roll_joint=-0.2",
    ".*_elbow_joint=0.6",
]


def test_tool_reproduces_the_committed_g1_keyframe() -> None:
    model = mujoco.MjModel.from_xml_path(str(robot_asset("g1")))
    pose = keyframe_tool.initial_pose(model, keyframe_tool.parse_pose(G1_POSE))
    qpos, ctrl = keyframe_tool.equilibrium(model, pose, pose[7:].copy())
    key = model.key("stand")
    # The XML keeps 8 decimals.
    np.testing.assert_allclose(qpos, key.qpos, atol=2e-8)
    np.testing.assert_allclose(ctrl, key.ctrl, atol=2e-8)
    # Independent of the solver: the joint pose is the documented one with level soles.
    np.testing.assert_allclose(qpos[[7, 10, 11]], [-0.312, 0.669, -0.357])


def test_tool_gives_a_holding_key_for_another_robot(tmp_path) -> None:
    path = tmp_path / "biped.xml"
    path.write_text(biped_xml())
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), "--pose", *BIPED_POSE],
        capture_output=True,
        text=True,
        check=True,
    )
    path.write_text(biped_xml(run.stdout))
    model = mujoco.MjModel.from_xml_path(str(path))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("stand").id)
    np.testing.assert_allclose(data.qpos[7:], [-0.4, 0.8, -0.4] * 2, atol=1e-8)
    mujoco.mj_forward(model, data)
    assert np.abs(data.qacc).max() < 1e-4
    # The targets are not the pose: the knees need torque, kp (ctrl - q) = tau.
    assert np.abs(data.ctrl - data.qpos[7:]).max() > 0.01
    start = data.qpos[:3].copy()
    for _ in range(200):  # 1 s on the key's targets: the equilibrium holds (it is unstable only to pushes)
        mujoco.mj_step(model, data)
    assert np.linalg.norm(data.qpos[:3] - start) < 0.02


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pose", "hip=0.3"], "'hip' matches no hinge joint"),
        (["--pose", ".*_knee"], "'.*_knee' must be REGEX=ANGLE"),
        (["--pose", ".*_knee=bent"], "'.*_knee=bent' must be REGEX=ANGLE"),
    ],
)
def test_bad_input_names_the_argument(tmp_path, args: list[str], message: str) -> None:
    path = tmp_path / "biped.xml"
    path.write_text(biped_xml())
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), *args], capture_output=True, text=True
    )
    assert run.returncode != 0 and message in run.stderr and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_key_that_does_not_hold_exits_non_zero_and_is_not_printed_as_a_key(tmp_path) -> None:
    # Motors of 0.5 N m cannot carry the biped's knees (about 3 N m each): no targets hold the pose.
    path = tmp_path / "weak.xml"
    path.write_text(biped_xml().replace('forcerange="-15 15"', 'forcerange="-0.5 0.5"'))
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), "--pose", *BIPED_POSE],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert '<key name="stand"' in run.stderr
    assert re.search(r"the key above does not hold its pose \(\|qacc\| [\d.e+-]+ at joint '\w+' > 0.01\)", run.stderr)
    # The same check as the robot contract's: the key the tool refused breaks the contract too.
    key = run.stderr[run.stderr.index("<key") : run.stderr.index("/>", run.stderr.index("<key")) + 2]
    errors = contract_errors(mujoco.MjModel.from_xml_string(biped_xml(key).replace("-15 15", "-0.5 0.5")))
    assert errors and errors[0].startswith("keyframe: 'stand' does not hold its pose")


def test_the_robot_config_of_the_robots_name_sets_the_physics_the_key_holds_under(tmp_path, monkeypatch) -> None:
    robots, configs = tmp_path / "assets" / "robots" / "biped", tmp_path / "configs" / "robot"
    robots.mkdir(parents=True)
    configs.mkdir(parents=True)
    (robots / "scene.xml").write_text(biped_xml())
    (configs / "biped.yaml").write_text(
        "model: biped\ntorso_body: torso\nimu: {gyro: imu_gyro, velocimeter: imu_linvel}\nbase_height: 0.45\n"
        "fall_height: 0.25\nfeet: {sites: [left_sole], bodies: [left_foot], geoms: ['.*_(heel|toe)'], "
        "swing_height: 0.05, condim: 4}\nphysics: {cone: elliptic, impratio: 20}\n"
    )
    monkeypatch.setenv(USER_PATH_ENV, str(tmp_path))
    tool = [sys.executable, str(SCRIPTS / "stand_keyframe.py"), "biped", "--pose", *BIPED_POSE]
    key = subprocess.run(tool, capture_output=True, text=True, check=True, env=os.environ).stdout
    edited = mujoco.MjSpec.from_string(biped_xml(key))
    robot_edit(load_robot_cfg("biped")[0])(edited)
    model = edited.compile()
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and model.geom("left_heel").condim[0] == 4
    assert contract_errors(model) == []  # it holds under the config's physics and foot contacts
