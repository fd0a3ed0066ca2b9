"""Check a robot config (``configs/robot/<name>.yaml``) against its MJCF before an env is built.

Every name the robot config gives must exist in the model, with the right kind (a ``<gyro>`` for
``imu.gyro``...), and the model must keep the MJCF contract (``sim.robot_contract``). The errors
are one line naming the key and the file, raised before anything is built or written.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from pathlib import Path

import mujoco

from unilab_gpu.envs.robot_cfg import RobotCfg
from unilab_gpu.sim.robot_contract import contract_errors

MAX_BASE_HEIGHT = 10.0
"""Highest ``base_height`` of a robot config (m): a root standing higher is a typo (cm for m)."""

_SENSOR_KINDS = {"gyro": mujoco.mjtSensor.mjSENS_GYRO, "velocimeter": mujoco.mjtSensor.mjSENS_VELOCIMETER}


def _on_world(model: mujoco.MjModel, sensor: int) -> bool:
    """Whether sensor ``sensor``'s site (or body) is on the world body or one welded to it."""
    kind, obj = model.sensor_objtype[sensor], model.sensor_objid[sensor]
    if kind == mujoco.mjtObj.mjOBJ_SITE:
        body = model.site_bodyid[obj]
    elif kind in (mujoco.mjtObj.mjOBJ_BODY, mujoco.mjtObj.mjOBJ_XBODY):
        body = obj
    else:
        return False
    return int(model.body_weldid[body]) == 0


def check_robot(robot: RobotCfg, model: mujoco.MjModel, config_file: str | Path, model_file: str | Path) -> None:
    """Raise ``ValueError`` (one line) for the first name of ``robot`` that ``model`` lacks, or the
    first rule of the MJCF contract it breaks.

    Args:
      config_file: where ``robot`` came from, for the message.
      model_file: the MJCF ``model`` was compiled from, for the message.
    """
    for key in _SENSOR_KINDS:  # before the contract: a robot whose IMU cannot move cannot stand either
        name = getattr(robot.imu, key)
        sensor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SENSOR, name)
        if sensor >= 0 and _on_world(model, sensor):
            raise ValueError(
                f"{config_file}: 'imu.{key}': sensor '{name}' of {model_file} sits on the world body (or a body "
                "welded to it), which never moves: it reads 0 every step; put the IMU on the robot's torso"
            )
    errors = contract_errors(model, robot.keyframe)
    if errors:
        raise ValueError(f"{model_file}: breaks the robot contract (docs/robots.md), {errors[0]}")

    def names(kind: mujoco.mjtObj, count: int) -> list[str]:
        return [mujoco.mj_id2name(model, kind, i) or "" for i in range(count)]

    bodies = names(mujoco.mjtObj.mjOBJ_BODY, model.nbody)
    sites = names(mujoco.mjtObj.mjOBJ_SITE, model.nsite)
    sensors = names(mujoco.mjtObj.mjOBJ_SENSOR, model.nsensor)
    joints = names(mujoco.mjtObj.mjOBJ_JOINT, model.njnt)
    geoms = names(mujoco.mjtObj.mjOBJ_GEOM, model.ngeom)

    def require(key: str, kind: str, wanted: Iterable[str], present: list[str], *, patterns: bool = False) -> None:
        for name in wanted:
            found = any(re.fullmatch(name, p) for p in present) if patterns else name in present
            if not found:
                close = difflib.get_close_matches(name, present, n=3)
                hint = f"; close: {', '.join(close)}" if close else ""
                what = f"pattern '{name}' matches no {kind}" if patterns else f"no {kind} '{name}'"
                raise ValueError(f"{config_file}: '{key}': {model_file} has {what}{hint}")

    if not 0 < robot.base_height <= MAX_BASE_HEIGHT:
        raise ValueError(
            f"{config_file}: 'base_height' must be in (0, {MAX_BASE_HEIGHT:g}] m (the root body's height standing), "
            f"got {robot.base_height:g}"
        )
    if not 0 <= robot.fall_height < robot.base_height:
        raise ValueError(
            f"{config_file}: 'fall_height' must be in [0, base_height = {robot.base_height:g}) m, "
            f"got {robot.fall_height:g}"
        )
    require("torso_body", "body", [robot.torso_body], bodies)
    for key, kind in _SENSOR_KINDS.items():
        name = getattr(robot.imu, key)
        require(f"imu.{key}", "sensor", [name], sensors)
        if model.sensor_type[sensors.index(name)] != kind:
            raise ValueError(f"{config_file}: 'imu.{key}': sensor '{name}' of {model_file} is not a <{key}>")

    require("pose_weights", "joint", robot.pose_weights, joints, patterns=True)
    if robot.feet is not None:
        require("feet.sites", "site", robot.feet.sites, sites)
        require("feet.bodies", "body", robot.feet.bodies, bodies)
        require("feet.geoms", "geom", robot.feet.geoms, geoms, patterns=True)
    if robot.tracking is not None:
        require("tracking.bodies", "body", robot.tracking.bodies, bodies)
        require("tracking.end_effectors", "body", robot.tracking.end_effectors, bodies)
        require("tracking.allowed_contacts", "body", [robot.tracking.allowed_contacts], bodies, patterns=True)
