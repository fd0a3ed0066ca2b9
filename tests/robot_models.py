"""Robots of the tests' own (not the project's): a small 6-DoF biped with hinge legs, position
actuators, sphere feet, an IMU and sole sites, which the keyframe and robot-contract tests write to
disk, whole or broken one rule at a time; and a Menagerie-style copy of the project's Go2, the
robot "adding a robot" adds (docs/robots.md)."""

from __future__ import annotations

import re

from unilab_gpu.paths import robot_asset

BIPED_POSE = [".*_hip=-0.4", ".*_knee=0.8", ".*_ankle=-0.4"]
"""The standing pose given to ``scripts/stand_keyframe.py`` (knees bent, soles level)."""


def biped_xml(key: str = "") -> str:
    """The biped's MJCF (floor included); ``key``: the ``<key>`` element(s) of its keyframe section."""
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
            <geom name="{side}_heel" type="sphere" pos="-0.05 0 -0.02" size="0.015" condim="3" mass="0.05"/>
            <geom name="{side}_toe" type="sphere" pos="0.08 0 -0.02" size="0.015" condim="3" mass="0.05"/>
            <site name="{side}_sole" pos="0.015 0 -0.035"/>
          </body>
        </body>
      </body>"""
        for side, y in (("left", 0.07), ("right", -0.07))
    )
    actuators = "".join(
        f'\n    <position name="{side}_{j}" joint="{side}_{j}" kp="30" kv="1" forcerange="-15 15"/>'
        for side in ("left", "right")
        for j in ("hip", "knee", "ankle")
    )
    return f"""<mujoco model="biped">
  <compiler angle="radian"/>
  <option timestep="0.005" integrator="implicitfast"/>
  <default><geom contype="1" conaffinity="0" condim="1"/><joint damping="0.2" armature="0.01"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05" conaffinity="1" condim="1"/>
    <body name="torso" pos="0 0 0.5">
      <freejoint name="root"/>
      <geom type="box" size="0.08 0.1 0.05" mass="3"/>
      <site name="imu"/>{legs}
    </body>
  </worldbody>
  <actuator>{actuators}
  </actuator>
  <sensor>
    <gyro name="imu_gyro" site="imu"/>
    <velocimeter name="imu_linvel" site="imu"/>
  </sensor>
  <keyframe>{key}</keyframe>
</mujoco>
"""


MENAGERIE_OPTION = '<option timestep="0.002" cone="elliptic" impratio="100"/>'
"""The physics options of MuJoCo Menagerie's Unitree scenes: 2 ms steps, an elliptic friction cone
and a high ``impratio`` (frictional constraints 100 times stiffer than normal ones)."""


def menagerie_style_go2(key: str = "") -> dict[str, str]:
    """The project's Go2 written the way MuJoCo Menagerie ships its quadrupeds: file name -> text of
    ``scene.xml`` (the scene, with :data:`MENAGERIE_OPTION` in place of the project's options) and
    ``go2.xml`` (the robot with condim-6 feet, an ``imu`` site but no IMU sensors, and ``key`` as
    its keyframe section, empty by default)."""
    robot = robot_asset("go2", "go2.xml").read_text()
    robot = re.sub(r"<sensor>.*?</sensor>", "", robot, flags=re.S)
    robot = re.sub(r"<keyframe>.*?</keyframe>", f"<keyframe>{key}</keyframe>", robot, flags=re.S)
    robot = robot.replace('<geom type="sphere" size="0.022" condim="3"', '<geom type="sphere" size="0.022" condim="6"')
    scene = re.sub(r"<option .*?/>", MENAGERIE_OPTION, robot_asset("go2").read_text(), flags=re.S)
    assert MENAGERIE_OPTION in scene and 'condim="6"' in robot and "<gyro" not in robot
    return {"scene.xml": scene, "go2.xml": robot}
