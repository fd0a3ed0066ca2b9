"""scripts/stand_keyframe.py: the committed G1 stand keyframe is what it computes, and its keys hold
any robot's pose (MuJoCo C: qacc = 0 at rest, and the robot stays up for a second)."""

from __future__ import annotations

import subprocess
import sys

import mujoco
import numpy as np
import pytest
from script_helpers import SCRIPTS, load_script

from unilab_gpu.paths import robot_asset

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


def _biped_xml(key: str = "") -> str:
    """A small two-legged robot (not one of ours): hinge legs, position actuators, sphere feet."""
    legs = "".join(
        f"""
      <body name="{side}_thigh" pos="0 {y} -0.05">
        <joint name="{side}_hip" axis="0 1 0" range="-1.5 1.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.6"/>
        <body name="{side}_shin" pos="0 0 -0.2">
          <joint name="{side}_knee" axis="0 1 0" range="0 2.5"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="0.4"/>
          <body name="{side}_foot" pos="0 0 -0.2">
            <joint name="{side}_ankle" axis="0 1 0" range="-1 1"/>
            <geom type="sphere" pos="-0.05 0 -0.02" size="0.015" condim="3" mass="0.05"/>
            <geom type="sphere" pos="0.08 0 -0.02" size="0.015" condim="3" mass="0.05"/>
          </body>
        </body>
      </body>"""
        for side, y in (("left", 0.07), ("right", -0.07))
    )
    motors = "".join(
        f'<position name="{side}_{j}" joint="{side}_{j}" kp="30" kv="1" forcerange="-15 15"/>'
        for side in ("left", "right")
        for j in ("hip", "knee", "ankle")
    )
    return f"""<mujoco model="biped">
  <compiler angle="radian"/>
  <option timestep="0.005" integrator="implicitfast"/>
  <default><geom contype="1" conaffinity="0" condim="1"/><joint damping="0.2" armature="0.01"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05" conaffinity="1"/>
    <body name="torso" pos="0 0 0.5">
      <freejoint/>
      <geom type="box" size="0.08 0.1 0.05" mass="3"/>{legs}
    </body>
  </worldbody>
  <actuator>{motors}</actuator>
  <keyframe>{key}</keyframe>
</mujoco>
"""


def test_tool_gives_a_holding_key_for_another_robot(tmp_path) -> None:
    path = tmp_path / "biped.xml"
    path.write_text(_biped_xml())
    pose = [".*_hip=-0.4", ".*_knee=0.8", ".*_ankle=-0.4"]
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), "--pose", *pose],
        capture_output=True,
        text=True,
        check=True,
    )
    path.write_text(_biped_xml(run.stdout))
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
    path.write_text(_biped_xml())
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "stand_keyframe.py"), str(path), *args], capture_output=True, text=True
    )
    assert run.returncode != 0 and message in run.stderr and run.stdout == ""
    assert len(run.stderr.strip().splitlines()) == 1
