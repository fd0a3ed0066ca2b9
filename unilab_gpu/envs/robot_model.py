"""The robot's MJCF as the project runs it: the user's file, untouched on disk, with the robot
config's physics options and edits applied to its ``MjSpec`` at load.

This is where a robot's needs live as data (as mjlab keeps them in per-robot constants): the
``<option>`` values (``physics``: timestep, solver budget, cone, impratio), the standing keyframe
(``stand``: pose and holding targets, so the user's file keeps its own key), the IMU sensors a
robot's MJCF may lack (``imu.site`` / ``imu.body``), and the contact of its feet (``feet.condim``,
``feet.friction``). The env, ``make_env``'s robot check and ``unilab-sim2sim`` all build the model
through :func:`robot_edit`, so they simulate the same robot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import mujoco
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.deploy.physics import CONES
from unilab_gpu.envs.robot_cfg import FeetCfg, ImuCfg, PhysicsCfg, RobotCfg, StandCfg, check_robot_values
from unilab_gpu.paths import robot_config_file
from unilab_gpu.utils.yaml_files import CONFIG_MAX_BYTES, CONFIG_MAX_VALUES, load_bounded_yaml


def load_robot_cfg(name: str) -> tuple[RobotCfg, Path] | None:
    """The robot config ``configs/robot/<name>.yaml`` (the project's, then ``UNILAB_PATH``'s) checked
    against :class:`RobotCfg`, and its file; ``None`` when there is none. For tools that work on a
    robot outside a task (the keyframe tool).

    Raises:
      ValueError: an unknown key or a wrong type, naming the key and the file; a file that is
        not a bounded YAML mapping (:func:`~unilab_gpu.utils.yaml_files.load_bounded_yaml`).
    """
    file = robot_config_file(name)
    if file is None:
        return None
    read = load_bounded_yaml(file, "a robot config", CONFIG_MAX_BYTES, CONFIG_MAX_VALUES)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RobotCfg), read)
        return OmegaConf.to_object(merged), file  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        raise ValueError(f"robot config {file}: {_bad_key(read, error)}") from None


def _bad_key(read: Mapping[str, Any], error: OmegaConfBaseException) -> str:
    """``bad key 'imu': <OmegaConf's first line>``: the key OmegaConf names, or, where it names none
    (a mapping merged onto a dataclass field: "Merge error: list is not a subclass of ImuCfg"), the
    first top-level key that fails alone."""
    key = getattr(error, "full_key", "") or next((k for k in read if _fails_alone(k, read[k])), None)
    named = "a key with an empty name ('')" if key == "" else f"bad key '{key}'" if key is not None else "bad config"
    return f"{named}: {' '.join(str(error).splitlines()[0].split())}"


def _fails_alone(key: str, value: Any) -> bool:
    try:
        OmegaConf.merge(OmegaConf.structured(RobotCfg), {key: value})
    except OmegaConfBaseException:
        return True
    return False


def robot_edit(robot: RobotCfg) -> Callable[[mujoco.MjSpec], None]:
    """The edit (``load_mj_model``'s ``edit``) that applies ``robot``'s physics options and MJCF edits.

    Raises:
      ValueError: a value no robot has (:func:`~.robot_cfg.check_robot_values`); when called on a spec, an
        edit that names what the MJCF lacks. One line naming the robot config's key.
    """

    check_robot_values(robot)

    def edit(spec: mujoco.MjSpec) -> None:
        if robot.stand is not None:
            set_stand_key(spec, robot.keyframe, robot.stand)
        apply_physics(spec, robot.physics)
        add_imu(spec, robot.imu)
        if robot.feet is not None:
            set_foot_contacts(spec, robot.feet)

    return edit


def set_stand_key(spec: mujoco.MjSpec, name: str, stand: StandCfg) -> None:
    """Write ``stand``'s pose and targets as key ``name`` of ``spec`` (over the MJCF's key of that
    name: a Menagerie ``home`` key that does not hold its pose is replaced in memory, not on disk)."""
    key = next((k for k in spec.keys if k.name == name), None)
    if key is None:
        key = spec.add_key(name=name)
    key.qpos = list(stand.qpos)
    key.ctrl = list(stand.ctrl)
    key.qvel = []
    key.act = []


def apply_physics(spec: mujoco.MjSpec, physics: PhysicsCfg) -> None:
    """Write the options ``physics`` gives over ``spec.option`` (``None`` keeps the MJCF's)."""
    option = spec.option
    for key in ("timestep", "iterations", "ls_iterations", "impratio"):
        value = getattr(physics, key)
        if value is not None:
            setattr(option, key, value)
    if physics.cone is not None:
        option.cone = mujoco.mjtCone(CONES[physics.cone])


def add_imu(spec: mujoco.MjSpec, imu: ImuCfg) -> None:
    """Add the ``<gyro>`` and ``<velocimeter>`` named by ``imu`` on site ``imu.site`` when the MJCF
    lacks them (and the site on ``imu.body`` at ``imu.pos`` when it lacks that too)."""
    if imu.site is None:
        return
    sensors = {sensor.name for sensor in spec.sensors}
    wanted = [(imu.gyro, mujoco.mjtSensor.mjSENS_GYRO), (imu.velocimeter, mujoco.mjtSensor.mjSENS_VELOCIMETER)]
    missing = [(name, kind) for name, kind in wanted if name not in sensors]
    if not missing:
        return
    if spec.site(imu.site) is None:
        if imu.body is None:
            raise ValueError(
                f"'imu.site': the MJCF has no site '{imu.site}' to carry the IMU sensors; give 'imu.body' "
                "(and 'imu.pos') to add it"
            )
        body = spec.body(imu.body)
        if body is None:
            raise ValueError(f"'imu.body': the MJCF has no body '{imu.body}' to add the IMU site '{imu.site}' to")
        body.add_site(name=imu.site, pos=list(imu.pos))
    for name, kind in missing:
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=imu.site)


def set_foot_contacts(spec: mujoco.MjSpec, feet: FeetCfg) -> None:
    """Write ``feet.condim`` and ``feet.friction`` (when given) to every geom ``feet.geoms`` matches."""
    if feet.condim is None and feet.friction is None:
        return
    matched = [g for g in spec.geoms if any(re.fullmatch(p, g.name) for p in feet.geoms)]
    if not matched:
        raise ValueError(
            f"'feet.geoms': patterns {list(feet.geoms)} match no geom of the MJCF to set the foot contact of"
        )
    for geom in matched:
        if feet.condim is not None:
            geom.condim = feet.condim
        if feet.friction is not None:
            geom.friction = list(feet.friction)
