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


QUAD_STAND = {"hip": 0.0, "thigh": 0.9, "calf": -1.8}
"""The standing joint angles of :func:`menagerie_like_quad_xml` (rad), those of its ``home`` key."""


def menagerie_like_quad_xml() -> str:
    """A small 12-DoF quadruped written as MuJoCo Menagerie writes its robots, which differ from the
    project's in the ways that matter to a robot config: position actuators with ``kp`` and no
    ``kv``, joint ``damping`` and ``frictionloss``, a ``home`` key whose ``ctrl`` is the pose itself
    (it holds nothing against gravity), foot geoms and sites of the same bare names
    (``FL``/``FR``/``RL``/``RR``), condim-3 collisions with condim-6 feet, an ``imu`` site without
    sensors, a 2 ms timestep. Written by the tests; no Menagerie file is copied."""
    legs, actuators, angles = "", "", []
    for leg, x, y in (("FL", 0.19, 0.05), ("FR", 0.19, -0.05), ("RL", -0.19, 0.05), ("RR", -0.19, -0.05)):
        legs += f"""
      <body name="{leg}_hip" pos="{x} {y} 0">
        <joint name="{leg}_hip_joint" axis="1 0 0" range="-0.8 0.8"/>
        <geom type="cylinder" size="0.03 0.02" euler="1.5708 0 0" mass="0.6"/>
        <body name="{leg}_thigh" pos="0 {0.08 if y > 0 else -0.08} 0">
          <joint name="{leg}_thigh_joint" axis="0 1 0" range="-1.5 3.4"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02" mass="1.0"/>
          <body name="{leg}_calf" pos="0 0 -0.2">
            <joint name="{leg}_calf_joint" axis="0 1 0" range="-2.7 -0.9"/>
            <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.012" mass="0.2"/>
            <geom name="{leg}" class="foot" pos="0 0 -0.2"/>
            <site name="{leg}" pos="0 0 -0.2"/>
          </body>
        </body>
      </body>"""
        for joint in ("hip", "thigh", "calf"):
            actuators += (
                f'\n    <position name="{leg}_{joint}" joint="{leg}_{joint}_joint" kp="100" forcerange="-23.7 23.7"/>'
            )
            angles.append(QUAD_STAND[joint])
    pose = " ".join(f"{a:g}" for a in angles)
    return f"""<mujoco model="menagerie_like_quad">
  <compiler angle="radian"/>
  <option timestep="0.002" cone="elliptic" impratio="100"/>
  <default>
    <geom condim="3" contype="1" conaffinity="1"/>
    <joint damping="1" frictionloss="0.2" armature="0.01"/>
    <default class="foot"><geom type="sphere" size="0.02" condim="6" friction="0.8 0.02 0.01" mass="0.05"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="trunk" pos="0 0 0.4">
      <freejoint/>
      <geom type="box" size="0.19 0.05 0.05" mass="6"/>
      <site name="imu"/>{legs}
    </body>
  </worldbody>
  <actuator>{actuators}
  </actuator>
  <keyframe>
    <key name="home" qpos="0 0 0.3 1 0 0 0 {pose}" ctrl="{pose}"/>
  </keyframe>
</mujoco>
"""
