"""The schema of a robot config (``configs/robot/<name>.yaml``, docs/robots.md), checked on load.

A task config holds its robot's config as its ``robot`` section (:class:`~unilab_gpu.envs.env_cfg.EnvCfg`);
the tools that build a robot's model without a task (the keyframe tool, ``unilab-sim2sim``) read
it on its own (:func:`~unilab_gpu.envs.robot_model.load_robot_cfg`). :func:`check_robot_values`
refuses what no robot has before MuJoCo meets it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING

from unilab_gpu.deploy.physics import CONES
from unilab_gpu.utils.checks import is_number, require

# The shared number check, worded as the task config's (a robot config is checked as its section).
_require = functools.partial(require, config="env config")


@dataclass
class ImuCfg:
    """The sensors of the robot's IMU site (observations read their ``sensordata`` columns)."""

    gyro: str = "???"
    """Name of the ``<gyro>`` sensor: base angular velocity in the IMU frame."""
    velocimeter: str = "???"
    """Name of the ``<velocimeter>`` sensor: base linear velocity in the IMU frame."""
    site: str | None = None
    """The IMU site. Given, and the MJCF lacks the two sensors, they are added on it at load
    (``envs.robot_model``); ``None``: the MJCF carries the sensors itself."""
    body: str | None = None
    """The body to add ``site`` to when the MJCF lacks that site too (``None``: the site must exist)."""
    pos: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    """Position of an added site in ``body``'s frame (m)."""


@dataclass
class PhysicsCfg:
    """The physics options a robot needs, written over its MJCF's ``<option>`` at load (the user's
    MJCF stays untouched); ``None`` keeps the MJCF's own value. An exported policy records the
    options it trained with, and ``unilab-sim2sim`` runs with the same."""

    timestep: float | None = None
    """Physics step (s); ``decimation * timestep`` must equal the task's ``control_dt``."""
    iterations: int | None = None
    """Solver iterations per step at most (an elliptic cone with a high ``impratio`` needs more)."""
    ls_iterations: int | None = None
    """Line-search iterations per solver iteration at most."""
    cone: str | None = None
    """Friction cone: ``pyramidal`` or ``elliptic``."""
    impratio: float | None = None
    """Ratio of frictional to normal constraint impedance (elliptic cones; MuJoCo's default 1)."""


@dataclass
class StandCfg:
    """The standing keyframe held in the robot config, so the MJCF is never edited: written at load
    as the key ``RobotCfg.keyframe`` (over the MJCF's key of that name, if it has one). Computed by
    ``scripts/stand_keyframe.py --write-config`` or drafted by ``unilab-robot init``."""

    qpos: list[float] = MISSING
    """The standing pose (``nq`` values: the free base, then the joints in MJCF order)."""
    ctrl: list[float] = MISSING
    """The targets that hold it at rest (``nu`` values, actuator order): pose plus static torque over kp."""


@dataclass
class FeetCfg:
    """The feet, for gait, contact and friction terms. A task that reads them fails, naming the
    key, on a robot config that leaves them out."""

    sites: list[str] = MISSING
    """One site per foot, at the sole (gait terms read their heights), in gait order."""
    bodies: list[str] = MISSING
    """The foot bodies (foot orientation, contacts)."""
    geoms: list[str] = MISSING
    """The geoms the feet stand on, names or regexes (friction randomization)."""
    swing_height: float = MISSING
    """Peak foot height of the gait reward's swing (m)."""
    condim: int | None = None
    """Contact dimension written to every geom of ``geoms`` at load (3: sliding friction only);
    ``None``: the MJCF's."""
    friction: list[float] | None = None
    """``[sliding, torsional, rolling]`` friction written to every geom of ``geoms`` at load;
    ``None``: the MJCF's."""


@dataclass
class TrackingBodiesCfg:
    """The bodies motion tracking reads (``configs/task/base/tracking.yaml``)."""

    bodies: list[str] = MISSING
    """The tracked bodies, compared with the reference clip's."""
    end_effectors: list[str] = MISSING
    """Bodies whose height error past a threshold ends the episode."""
    allowed_contacts: str = MISSING
    """Regex of the bodies allowed to touch the ground (every other one is penalized)."""


@dataclass
class RobotCfg:
    """What tasks read about a robot: ``configs/robot/<name>.yaml`` (docs/robots.md, "Adding a
    robot"). Task configs refer to it as ``${robot.<key>}``; a task picks its robot with the
    defaults entry ``override /robot@robot: <name>``, which replaces the whole section (no key of
    another robot survives)."""

    model: str = "???"
    """The MJCF: a robot folder name (its ``scene.xml``) under ``assets/robots`` or a user folder
    (``UNILAB_PATH``), or a path to an MJCF file."""
    keyframe: str = "stand"
    """The standing keyframe (pose and holding torques): reset state and default joint positions."""
    stand: StandCfg | None = None
    """That keyframe's values, written over the MJCF's at load (``None``: the MJCF's own key)."""
    torso_body: str = "???"
    """The body kept upright (orientation reward, tilt termination, tracking anchor)."""
    imu: ImuCfg = field(default_factory=ImuCfg)
    base_height: float = MISSING
    """Height of the root body standing on the keyframe (m)."""
    fall_height: float = MISSING
    """Root body below this height: the robot fell (m)."""
    pose_weights: dict[str, float] = field(default_factory=dict)
    """Joint-name regex -> weight of its deviation from the keyframe pose (pose reward)."""
    physics: PhysicsCfg = field(default_factory=PhysicsCfg)
    """Physics options written over the MJCF's ``<option>`` at load."""
    feet: FeetCfg | None = None
    tracking: TrackingBodiesCfg | None = None
    mirror_name_pairs: list[list[str]] | None = None
    """Name fragments that mark mirrored parts (``unilab-motion mirror``, docs/motion.md): a joint
    or body named with the first fragment of a pair mirrors the one named with the second.
    ``None``: ``left`` / ``right`` (``motion.mirror.DEFAULT_NAME_PAIRS``)."""


MAX_TIMESTEP = 0.05
"""Longest physics step (s): 20 Hz physics, 25 times MuJoCo's default; past it contacts explode."""

MAX_SOLVER_ITERATIONS = 10_000
"""Most solver (and line-search) iterations: MuJoCo's defaults are 100 and 50; far more is a typo."""

MAX_IMPRATIO = 1000.0
"""Largest ``impratio`` (MuJoCo's default 1; elliptic-cone robots use 10 to 100)."""

MAX_IMU_OFFSET = 10.0
"""Largest ``|imu.pos|`` entry (m) in its body's frame: an IMU sits on the robot."""

CONDIMS = (1, 3, 4, 6)
"""MuJoCo's contact dimensions: frictionless, sliding, + torsional, + rolling friction."""


def check_robot_values(robot: RobotCfg) -> None:
    """Raise ``ValueError`` (``env config: 'robot.<key>' must be ...``) for a physics option, IMU
    placement or foot contact outside what MuJoCo and a real robot allow, before MuJoCo meets it
    (where it would be a pybind ``TypeError``, an error at a line of the untouched MJCF, or a robot
    that cannot stand, blamed on its keyframe). The env config's check and every model build
    (:func:`~unilab_gpu.envs.robot_model.robot_edit`: the keyframe tool, ``unilab-sim2sim``) run it."""
    physics, imu, feet = robot.physics, robot.imu, robot.feet
    if robot.stand is not None:
        for key in ("qpos", "ctrl"):
            values = list(getattr(robot.stand, key))
            _require(
                len(values) > 0 and all(is_number(v) for v in values),
                f"robot.stand.{key}",
                "a list of finite numbers (scripts/stand_keyframe.py --write-config writes it)",
                values,
            )
    null = " (or null: the MJCF's)"
    _optional(
        physics.timestep,
        "robot.physics.timestep",
        f"in (0, {MAX_TIMESTEP:g}] s{null}",
        lambda v: is_number(v) and 0 < v <= MAX_TIMESTEP,
    )
    _optional(
        physics.impratio,
        "robot.physics.impratio",
        f"in (0, {MAX_IMPRATIO:g}]{null}",
        lambda v: is_number(v) and 0 < v <= MAX_IMPRATIO,
    )
    for key in ("iterations", "ls_iterations"):
        _optional(
            getattr(physics, key),
            f"robot.physics.{key}",
            f"an integer in [1, {MAX_SOLVER_ITERATIONS:,}]{null}",
            lambda v: isinstance(v, int) and 1 <= v <= MAX_SOLVER_ITERATIONS,
        )
    _optional(physics.cone, "robot.physics.cone", f"one of {', '.join(CONES)} (or null)", lambda v: v in CONES)
    pos = list(imu.pos) if isinstance(imu.pos, list | tuple) else imu.pos
    _require(
        isinstance(pos, list) and len(pos) == 3 and all(is_number(x) and abs(x) <= MAX_IMU_OFFSET for x in pos),
        "robot.imu.pos",
        f"three finite numbers within +-{MAX_IMU_OFFSET:g} m (the site in imu.body's frame)",
        pos,
    )
    _optional(
        imu.body,
        "robot.imu.body",
        "a body of the robot (on the world body the IMU never moves)",
        lambda v: v != "world",
    )
    if feet is not None:
        _optional(
            feet.condim, "robot.feet.condim", f"one of {', '.join(map(str, CONDIMS))} (or null)", lambda v: v in CONDIMS
        )
        _optional(
            None if feet.friction is None else list(feet.friction),
            "robot.feet.friction",
            "[sliding, torsional, rolling]: three finite numbers >= 0 (or null)",
            lambda v: len(v) == 3 and all(is_number(x) and x >= 0 for x in v),
        )


def _optional(value: Any, key: str, expected: str, ok: Callable[[Any], bool]) -> None:
    """``_require(ok(value))`` for a value that is set (``None`` keeps the MJCF's)."""
    if value is not None:
        _require(ok(value), key, expected, value)
