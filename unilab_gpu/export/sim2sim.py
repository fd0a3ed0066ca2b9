"""Sim-to-sim: an exported policy run in plain MuJoCo C from its ONNX file, judged as training judges.

The policy runs through the robot-side runtime (:mod:`unilab_gpu.deploy`: observation, action
map, PD targets and rates from the file's metadata) on the project's MJCF of the robot it names,
stepped by MuJoCo C instead of the MJWarp it was trained on. A velocity policy starts at the
model's keyframe and follows a fixed command; a tracking policy starts at the reference's first
frame and follows it (:func:`load_reference`). Falls are the failure terminations of the policy's
task config that have a runtime twin (:class:`FallRule`); after one the robot is put back at its
start, or at the reference's current frame, and goes on. :func:`sim2sim` returns the report
(docs/deploy.md); ``unilab-sim2sim`` (``unilab_gpu/cli/sim2sim.py``) is its command line.

A policy of a task on a generated terrain (metadata ``terrain``) runs on that ground: the MJCF's
floor becomes the heightfield of ``generate_terrain(meta["terrain"])`` (``add_terrain``, as the env
builds its scene), whose heights must hash to the metadata's ``terrain_sha256``, and a velocity
policy starts on one sub-terrain, its origin added to the keyframe's root position as the env's
``Terrain.stage`` does (:func:`choose_terrain`). A terrain file replaces the metadata's ground for
a run (an evaluation terrain of fixed slopes or stairs).

The model is the robot as training built it: the task's robot config edits applied to the MJCF
(``envs.robot_model``) and the metadata's ``physics`` (timestep, solver budget, cone, impratio)
written over its options. MuJoCo C stays silent when its solver stops at the iteration cap
unconverged and resets a state whose acceleration blows up: the run counts both, warns, and the
report names them (``solver_unconverged_fraction``; ``diverged``, each also a fall, its steps left
out of the errors) rather than letting them pass as large velocity errors.

Unlike :mod:`unilab_gpu.deploy`, this module uses the training side: the task config (the
failure terminations and their thresholds), motion conversion and the offscreen renderer.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.deploy import Controller, DeploymentError, PolicyFile, ReferenceMotion
from unilab_gpu.deploy.controller import command_of
from unilab_gpu.deploy.ground import heights_sha256
from unilab_gpu.deploy.physics import apply_physics_options, physics_options
from unilab_gpu.deploy.rotations import quat_conjugate, quat_mul, rotate, rotate_inverse, yaw_quat
from unilab_gpu.deploy.terminations import build_fall_check, fall_check_builders
from unilab_gpu.envs.env_cfg import DivergenceCfg, EnvCfg, RobotCfg
from unilab_gpu.envs.robot_model import robot_edit
from unilab_gpu.export.metadata import defining_path
from unilab_gpu.managers.term import resolve_callable
from unilab_gpu.paths import terrain_file
from unilab_gpu.terrain.generator import TerrainGrid, generate_terrain
from unilab_gpu.terrain.scene import add_terrain

TERRAIN_FILE_MAX_BYTES = 1 << 20
"""Largest ``--terrain`` file read (a terrain section is a few hundred bytes)."""

TERRAIN_FILE_MAX_VALUES = 100_000
"""Most values a ``--terrain`` file may hold once every YAML alias is followed (a task config has
a few hundred)."""


def policy_kind(meta: dict[str, Any]) -> str:
    """``"tracking"`` (the policy reads a motion command) or ``"velocity"`` (a velocity command).

    Raises:
      DeploymentError: the policy reads neither (e.g. the pendulum): sim-to-sim has no start, command
        or falls for it.
    """
    if command_of(meta, "motion") is not None:
        return "tracking"
    if command_of(meta, "velocity") is not None:
        return "velocity"
    commands = {name: c["func"] for name, c in meta["commands"].items()}
    raise DeploymentError(
        f"the policy ({meta.get('task')}) reads neither a velocity nor a motion command (its commands: {commands}); "
        "sim-to-sim runs velocity and tracking policies of a floating-base robot"
    )


@dataclass(frozen=True)
class FallRule:
    """When a run counts a fall: the failure terminations (not ``time_out``) of the policy's task
    config, with the training run's overrides, that have a runtime twin
    (:mod:`unilab_gpu.deploy.terminations`), so sim-to-sim and training judge a state alike.

    ``counted`` holds ``(name, func, params)`` of each such termination in the twin table's order
    (``func`` the path where the term is defined, whatever spelling the YAML used); ``uncounted``
    the ``(name, func)`` of failure terminations without a twin, which a report lists.
    """

    counted: tuple[tuple[str, str, dict[str, Any]], ...]
    uncounted: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of_task(cls, meta: dict[str, Any]) -> FallRule:
        """The rule of ``meta``'s task and overrides.

        Raises:
          DeploymentError: no failure termination of the task has a twin (nothing to count falls by).
        """
        return cls.of_config(meta.get("task"), task_config(meta))

    @classmethod
    def of_config(cls, task: str | None, cfg: EnvCfg) -> FallRule:
        """The rule of task config ``cfg`` (of ``task``, for messages); see :meth:`of_task`."""
        order = list(fall_check_builders())
        counted, uncounted = [], []
        for name, term in cfg.terminations.items():
            if term is None or term.time_out:
                continue
            func = defining_path(resolve_callable(term.func, f"terminations.{name}.func"))
            if func in order:
                counted.append((name, func, dict(term.params)))
            else:
                uncounted.append((name, func))
        if not counted:
            failures = [f"{name} ({func})" for name, func in uncounted] or "none"
            raise DeploymentError(
                f"task '{task}' has no failure termination with a runtime twin to count falls by "
                f"(its failure terminations: {failures}; twins: {order})"
            )
        counted.sort(key=lambda entry: order.index(entry[1]))
        return cls(tuple(counted), tuple(uncounted))


def task_config(meta: dict[str, Any]) -> EnvCfg:
    """The task config of a policy's metadata (``task`` with the training run's overrides)."""
    from unilab_gpu.envs.make_env import load_task_cfg  # the training side's config

    return load_task_cfg(meta.get("task"), meta.get("env_overrides") or [])


def find_motion(name: str, policy_path: str | Path | None) -> Path:
    """The motion file a policy's metadata names: ``name`` as a path (absolute, or relative to the
    current folder), else its file name beside the policy file or in the current folder.

    Raises:
      DeploymentError: none of those exists; names every place looked and ``--motion``.
    """
    given = Path(name).expanduser()
    places = [given]
    if policy_path is not None:
        places.append(Path(policy_path).parent / given.name)
    places.append(Path(given.name))
    unique = list(dict.fromkeys(places))
    for place in unique:
        if place.is_file():
            return place
    raise DeploymentError(
        f"the policy's motion '{name}' (metadata commands.*.params.motion_files) is not at "
        f"{', '.join(str(p) for p in unique)}; give the clip with --motion FILE"
    )


def load_reference(
    meta: dict[str, Any], model: mujoco.MjModel, motion: str | None, policy_path: str | Path | None = None
) -> tuple[ReferenceMotion, str] | None:
    """The reference of a tracking policy at its control rate and its name; ``None`` for others.

    ``motion`` (any format ``unilab-motion`` reads; unnamed columns detected) or else the
    metadata's: its first motion file (:func:`find_motion`, read in the training's
    ``motion_order``), or its synthetic clip.
    """
    from unilab_gpu.motion import RobotKinematics, load_motion, synthesize_clip  # the training side converts

    command = command_of(meta, "motion")
    if command is None:
        if motion is not None:
            raise DeploymentError(f"--motion: the policy ({meta.get('task')}) follows no motion command")
        return None
    fps = 1.0 / meta["control_dt"]
    kinematics = RobotKinematics(model)
    params = command["params"]
    files = list(params.get("motion_files") or [])
    if motion is not None or files:
        if motion is not None:  # any clip: its unnamed columns are detected
            path, order = Path(motion).expanduser(), "auto"
        else:  # the training's first clip, in the order training declared for its files
            path, order = find_motion(str(files[0]), policy_path), params.get("motion_order", "auto")
        clip = load_motion(path, fps=fps, kinematics=kinematics, order=order)
        name = str(path)
    else:
        seconds, seed = params.get("synthetic_seconds", 10.0), params.get("synthetic_seed", 0)
        clip = synthesize_clip(seconds, seed, fps=fps, kinematics=kinematics)
        name = f"synthetic (seconds {seconds:g}, seed {seed})"
    return ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **clip.arrays()), name


@dataclass(frozen=True)
class TerrainChoice:
    """The ground a run stands on and the sub-terrain a velocity policy starts on."""

    grid: TerrainGrid
    config: dict[str, Any]
    """The terrain config the grid was generated from (plain JSON)."""
    source: str
    """``"metadata"`` (the policy's training terrain, sha256 checked) or the ``--terrain`` file."""
    level: int
    column: int

    @property
    def sub_terrain(self) -> str:
        """The sub-terrain type of the start's column."""
        return self.grid.column_types[self.column]

    @property
    def origin(self) -> np.ndarray:
        """``(3,)`` the start's sub-terrain origin (its centre and the ground there)."""
        return np.asarray(self.grid.origins[self.level, self.column], dtype=np.float64)

    def report(self, placed: bool) -> dict[str, Any]:
        """The report's ``terrain`` entry; the start (level, column, sub-terrain, origin) ``None``
        unless the robot was ``placed`` on it (a tracking policy starts at its reference's pose)."""
        return {
            "source": self.source,
            "config": self.config,
            "sha256": heights_sha256(self.grid.heights),
            "level": self.level if placed else None,
            "column": self.column if placed else None,
            "sub_terrain": self.sub_terrain if placed else None,
            "origin": [float(v) for v in self.origin] if placed else None,
        }


def read_terrain_file(path: str | Path) -> dict[str, Any]:
    """The terrain of a YAML file or a terrain name (:func:`~unilab_gpu.paths.terrain_file`), as plain
    values: a terrain config file itself (``configs/terrain/<name>.yaml``, a mapping with
    ``sub_terrains``) or the ``terrain:`` mapping of a task config (its other keys are ignored).
    Read within bounds (:func:`~unilab_gpu.utils.yaml_files.load_bounded_yaml`): a file of nested
    YAML aliases fails in one line instead of hanging.

    Raises:
      DeploymentError: no such file or name, too large, not YAML, or no ``terrain:`` mapping; one line.
    """
    from omegaconf import DictConfig, OmegaConf  # the training side's config reader
    from omegaconf.errors import OmegaConfBaseException

    from unilab_gpu.utils.yaml_files import YamlFileError, load_bounded_yaml

    try:
        path = terrain_file(path)
        cfg = load_bounded_yaml(path, "a terrain file", TERRAIN_FILE_MAX_BYTES, TERRAIN_FILE_MAX_VALUES)
        terrain = cfg.get("terrain")
        if terrain is None and "sub_terrains" in cfg:
            terrain = cfg  # a terrain config file (configs/terrain/<name>.yaml)
        plain = OmegaConf.to_container(terrain, resolve=True) if isinstance(terrain, DictConfig) else None
    except (FileNotFoundError, YamlFileError) as error:
        raise DeploymentError(str(error) if str(error).startswith("--terrain") else f"--terrain: {error}") from None
    except (OSError, OmegaConfBaseException) as error:
        reason = " ".join(str(error).split())[:200]
        raise DeploymentError(f"--terrain: {path} is not a readable YAML config ({reason})") from None
    if plain is None:
        raise DeploymentError(
            f"--terrain: {path} is neither a terrain config (a mapping with 'sub_terrains', as in configs/terrain/) "
            "nor a task config with a 'terrain:' mapping at its top level (docs/terrain.md)"
        )
    return plain


def choose_terrain(
    meta: dict[str, Any],
    kind: str,
    terrain_file: str | Path | None = None,
    level: int | None = None,
    column: int | None = None,
    sub_terrain: str | None = None,
) -> TerrainChoice | None:
    """The ground of a run: the metadata's terrain (its heights' sha256 checked against
    ``terrain_sha256``) or ``terrain_file``'s; ``None`` on a flat-ground policy without options.

    The start is sub-terrain ``(level, column)``: ``level`` by default the top one, ``column`` by
    default 0, or the first column of type ``sub_terrain``.

    Raises:
      DeploymentError: one line naming the option: a terrain option on a flat-ground policy, or a
        placement on a tracking policy (it starts at its reference's pose); both a column and a
        sub-terrain; a level or column out of range; an unknown sub-terrain name; a bad terrain
        file or config; rebuilt heights that differ from the metadata's.
    """
    given = [
        (option, value)
        for option, value in (
            ("--terrain", terrain_file),
            ("--terrain-level", level),
            ("--terrain-column", column),
            ("--sub-terrain", sub_terrain),
        )
        if value is not None
    ]
    if meta.get("terrain") is None:
        if given:
            raise DeploymentError(
                f"{given[0][0]}: the policy ({meta.get('task')}) was trained on flat ground (its metadata names no "
                "terrain); terrain options apply to policies of a task with a terrain (docs/terrain.md)"
            )
        return None
    placed = [option for option, _ in given if option != "--terrain"]
    if placed and kind == "tracking":
        raise DeploymentError(f"{placed[0]}: a tracking policy starts at its reference's pose, not on a sub-terrain")
    if column is not None and sub_terrain is not None:
        raise DeploymentError("--terrain-column and --sub-terrain: give one of the two")
    if terrain_file is not None:
        config, source = read_terrain_file(terrain_file), str(terrain_file)
        try:
            grid = generate_terrain(config)
        except (ValueError, FileNotFoundError) as error:
            raise DeploymentError(f"--terrain: {terrain_file}: {error}") from None
    else:
        config, source = meta["terrain"], "metadata"
        try:
            grid = generate_terrain(config)
        except (ValueError, FileNotFoundError) as error:
            raise DeploymentError(f"metadata 'terrain': {error}") from None
        digest = heights_sha256(grid.heights)
        if digest != meta.get("terrain_sha256"):
            raise DeploymentError(
                f"metadata 'terrain_sha256': the terrain rebuilt from the metadata's config has sha256 "
                f"{digest[:16]}..., the policy trained on {str(meta.get('terrain_sha256'))[:16]}... (the terrain "
                "generator or a height function changed since the export); give the ground with --terrain FILE"
            )
    levels, cols = grid.num_levels, grid.num_cols
    level = levels - 1 if level is None else level
    if not 0 <= level < levels:
        raise DeploymentError(f"--terrain-level: {level} is not a level of the terrain (0 to {levels - 1})")
    if sub_terrain is not None:
        names = list(dict.fromkeys(grid.column_types))
        if sub_terrain not in names:
            raise DeploymentError(
                f"--sub-terrain: the terrain has no sub-terrain {sub_terrain!r}; its sub-terrains: {', '.join(names)}"
            )
        column = grid.column_types.index(sub_terrain)
    column = 0 if column is None else column
    if not 0 <= column < cols:
        raise DeploymentError(f"--terrain-column: {column} is not a column of the terrain (0 to {cols - 1})")
    return TerrainChoice(grid, config, source, level, column)


def scene_model(
    mjcf: str | Path,
    grid: TerrainGrid | None = None,
    robot: RobotCfg | None = None,
    physics: dict[str, Any] | None = None,
) -> mujoco.MjModel:
    """The MuJoCo model of ``mjcf`` as the env built it: the ``robot`` config's physics options and
    MJCF edits applied (``envs.robot_model``), on ``grid``'s terrain when given (its floor plane
    replaced by the heightfield, ``terrain.scene.add_terrain``), then the metadata's ``physics``
    written over its options (:func:`~unilab_gpu.deploy.physics.apply_physics_options`).

    Raises:
      DeploymentError: a robot config edit names what ``mjcf`` lacks.
    """
    spec = mujoco.MjSpec.from_file(str(mjcf))
    if robot is not None:
        try:
            robot_edit(robot)(spec)
        except ValueError as error:
            raise DeploymentError(f"{mjcf}: the robot config's edit does not apply: {error}") from None
    if grid is not None:
        add_terrain(spec, grid)
    model = spec.compile()
    if physics is not None:
        apply_physics_options(model, physics)
    return model


def control_steps(seconds: float, control_dt: float) -> int:
    """Whole control steps in ``seconds`` (a step that does not fit is not taken).

    Raises:
      DeploymentError: not even one fits.
    """
    steps = math.floor(seconds / control_dt + 1e-6)
    if steps < 1:
        raise DeploymentError(
            f"--seconds {seconds:g} is less than one control step of the policy ({control_dt:g} s); nothing would run"
        )
    return steps


class Sim2Sim:
    """One run of a policy in MuJoCo C, with the statistics of the module docstring.

    Args:
      controller: the runtime, with the reference of a tracking policy.
      command: ``[v_x, v_y, omega_z]`` of a velocity policy (``None``: standing, or tracking).
      falls: the failure terminations counted (:class:`FallRule`).
      origin: ``(3,)`` added to the keyframe's root position at every start of a velocity policy
        (the sub-terrain it starts on, :class:`TerrainChoice`); ``None``: the keyframe's.
      divergence: the envelope of a plausible state (the task's ``divergence``): a state outside it,
        non-finite, or one MuJoCo C reset for a bad ``qacc``/``qpos``/``qvel`` (its warnings) is a
        diverged simulation, counted as a fall and as ``diverged``, its step left out of the errors.
      warn: receives each warning line (the first divergence; solver non-convergence, at the end).
    """

    def __init__(
        self,
        controller: Controller,
        command: Sequence[float] | None,
        falls: FallRule,
        origin: Sequence[float] | None = None,
        divergence: DivergenceCfg | None = None,
        warn: Callable[[str], None] = print,
    ) -> None:
        self.controller = ctl = controller
        self.origin = None if origin is None else np.asarray(origin, dtype=np.float64)
        self.model = model = controller.model
        self.data = mujoco.MjData(model)
        meta = controller.metadata
        self.tracking = controller.reference is not None
        if not self.tracking:
            ctl.command = np.asarray(command if command is not None else [0.0, 0.0, 0.0])
        self.falls = falls
        self.fall_checks = [build_fall_check(ctl.context, name, func, params) for name, func, params in falls.counted]
        self.falls_are = " or ".join(check.text for check in self.fall_checks)
        """The counted failure terminations in words (the report's ``falls_are``)."""
        self.root_qpos = ctl.context.root_qpos
        self.effort = np.array([np.inf if e is None else e for e in meta["effort_limit"]])
        ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in meta["joint_names"]]
        limited = model.jnt_limited[ids].astype(bool)
        self.joint_low = np.where(limited, model.jnt_range[ids, 0], -np.inf)
        self.joint_high = np.where(limited, model.jnt_range[ids, 1], np.inf)
        if self.tracking:
            params = ctl.motion_command["params"]
            self.tracked = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in params["body_names"]]
            self.tracked_columns = [ctl.reference.body_column(n) for n in params["body_names"]]
            self.anchor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, params["anchor_body"])
            self.anchor_column = ctl.reference.body_column(params["anchor_body"])
        self._substep_torque = 0.0
        self._substep_ratio = 0.0
        self._unconverged = 0
        """Physics steps of the current control step whose constraint solver stopped at its
        iteration cap without converging."""
        self.divergence = divergence if divergence is not None else DivergenceCfg()
        self.warn = warn
        self.warnings: list[str] = []
        """The warnings of the run, in order (the report's ``warnings``)."""
        self.start()

    def start(self, time: float = 0.0, phase: float = 0.0) -> None:
        """Put the robot at its start: the keyframe (on :attr:`origin`), or the reference at ``time``."""
        ctl, model, data = self.controller, self.model, self.data
        keyframe = ctl.metadata.get("keyframe")
        key = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_KEY, keyframe) if keyframe else -1
        if key >= 0:
            mujoco.mj_resetDataKeyframe(model, data, key)
        else:
            mujoco.mj_resetData(model, data)
        if self.tracking:
            qpos, qvel = ctl.reference.state(ctl.reference.frame_at(time))
            joints = ctl.context
            data.qpos[self.root_qpos : self.root_qpos + 7] = qpos[:7]
            data.qvel[:6] = qvel[:6]
            data.qpos[joints.joint_qpos], data.qvel[joints.joint_qvel] = qpos[7:], qvel[6:]
        elif self.origin is not None:
            data.qpos[self.root_qpos : self.root_qpos + 3] += self.origin
        ctl.reset(data, time=time, phase=phase)

    def _watch(self, data: mujoco.MjData) -> None:
        tau = np.abs(self.controller.pd_torque(data))
        self._substep_torque = max(self._substep_torque, float(np.max(tau - self.effort)))
        self._substep_ratio = max(self._substep_ratio, float(np.max(tau / self.effort)))
        self._unconverged += int(solver_unconverged(self.model, data))

    def diverged(self, warnings_before: int) -> bool:
        """Whether the control step just taken diverged: MuJoCo C warned of a bad acceleration,
        position or velocity (it then resets the state to ``qpos0``, which would otherwise read as
        huge velocity errors), or the state is non-finite or outside :attr:`divergence`."""
        data = self.data
        if divergence_warnings(data) > warnings_before:
            return True
        finite = np.isfinite(data.qpos).all() and np.isfinite(data.qvel).all()
        return not finite or (
            np.abs(data.qpos).max() > self.divergence.max_qpos or np.abs(data.qvel).max() > self.divergence.max_qvel
        )

    def _warn(self, text: str) -> None:
        self.warnings.append(text)
        self.warn(f"unilab-sim2sim: warning: {text}")

    def fallen(self, frame: int) -> bool:
        """Whether the state fails a counted termination (:class:`FallRule`); ``frame``: the
        reference frame the last step followed."""
        return any(check.check(self.data, frame) for check in self.fall_checks)

    def errors(self, frame: int) -> dict[str, float]:
        """This step's tracking errors (after physics; ``frame``: the reference frame it followed)."""
        data, ctl = self.data, self.controller
        if not self.tracking:
            twist, command = self._root_twist(), ctl.command
            return {
                "lin_vel_error_mps": float(np.linalg.norm(command[:2] - twist[:2])),
                "yaw_rate_error_radps": float(abs(command[2] - twist[2])),
            }
        ref = ctl.reference
        target = ref.body_pos_w[frame, self.tracked_columns]
        robot = data.xpos[self.tracked]
        # Re-anchored as the tracking task scores: the reference moved to the robot anchor's xy and heading.
        ref_anchor_pos, ref_anchor_quat = (
            ref.body_pos_w[frame, self.anchor_column],
            ref.body_quat_w[frame, self.anchor_column],
        )
        heading = yaw_quat(quat_mul(data.xquat[self.anchor], quat_conjugate(ref_anchor_quat)))
        shift = np.array([*data.xpos[self.anchor, :2], ref_anchor_pos[2]])
        anchored = np.array([shift + rotate(heading, p - ref_anchor_pos) for p in target])
        return {
            "body_pos_error_m": float(np.linalg.norm(target - robot, axis=1).mean()),
            "body_pos_error_anchored_m": float(np.linalg.norm(anchored - robot, axis=1).mean()),
        }

    def velocity(self) -> dict[str, float]:
        """The root velocity a velocity policy reached after this step (root frame; tracking: none).
        Its means beside the errors tell a robot that walks slower or sideways of its command (a
        mean off the command) from one whose walk sways about it (a mean on it)."""
        if self.tracking:
            return {}
        v_x, v_y, omega_z = self._root_twist()
        return {"lin_vel_x_mps": float(v_x), "lin_vel_y_mps": float(v_y), "yaw_rate_radps": float(omega_z)}

    def _root_twist(self) -> np.ndarray:
        """``[v_x, v_y, omega_z]`` of the root now: planar velocity in the root frame and the yaw
        rate, the quantities a velocity command names."""
        data = self.data
        lin_vel_b = rotate_inverse(data.qpos[self.root_qpos + 3 : self.root_qpos + 7], data.qvel[0:3])
        return np.array([lin_vel_b[0], lin_vel_b[1], data.qvel[5]])

    def run(
        self,
        seconds: float,
        on_frame: Callable[[mujoco.MjData, np.ndarray | None], None] | None = None,
        on_step: Callable[[int, int, int], None] | None = None,
    ) -> dict[str, Any]:
        """Run the whole control steps in ``seconds`` (:func:`control_steps`); returns the per-second
        rows and the summary of the steps taken, and ``steps``.

        A ``KeyboardInterrupt`` ends the run early: the result then covers the steps completed
        before it, with ``interrupted`` true (``None`` rows and summary when none was).

        Args:
          on_frame: ``on_frame(data, ghost_qpos)`` after each control step (video).
          on_step: ``on_step(steps_done, steps, falls)`` after each control step (progress).
        """
        ctl = self.controller
        steps = control_steps(seconds, ctl.control_dt)
        per_second: list[dict[str, Any]] = []
        done, falls, interrupted = 0, 0, False
        steps_per_second = round(1.0 / ctl.control_dt)
        # MuJoCo C's warnings come to the report, not to MUJOCO_LOG.TXT in the user's folder.
        mujoco_texts: list[str] = []
        previous_handler = mujoco.get_mju_user_warning()
        mujoco.set_mju_user_warning(mujoco_texts.append)
        try:
            for step in range(steps):
                if step % steps_per_second == 0:
                    row = {"second": len(per_second), "falls": 0, "diverged": 0, "steps": 0, "measured": 0}
                    per_second.append(row | {"unconverged": 0, "sums": {}, "joint": 0.0, "torque": 0.0, "ratio": 0.0})
                second = per_second[-1]
                frame = ctl.frame
                self._substep_torque, self._substep_ratio, self._unconverged = -np.inf, 0.0, 0
                warnings_before = divergence_warnings(self.data)
                ctl.step(self.data, on_substep=self._watch)
                diverged = self.diverged(warnings_before)
                q = self.data.qpos[ctl.joint_qpos]
                excess = 0.0 if diverged else float(np.max(np.maximum(self.joint_low - q, q - self.joint_high)))
                measured = {} if diverged else self.errors(frame) | self.velocity()
                fell = diverged or self.fallen(frame)
                # The step's numbers are recorded together, so an interrupt leaves no half-counted step.
                second["joint"] = max(second["joint"], excess)
                second["torque"] = max(second["torque"], self._substep_torque)
                second["ratio"] = max(second["ratio"], self._substep_ratio)
                for name, value in measured.items():
                    second["sums"][name] = second["sums"].get(name, 0.0) + value
                second["steps"] += 1
                second["measured"] += int(not diverged)
                second["unconverged"] += self._unconverged
                second["falls"] += int(fell)
                second["diverged"] += int(diverged)
                done, falls = done + 1, falls + int(fell)
                if diverged and sum(s["diverged"] for s in per_second) == 1:  # the first divergence
                    self._warn(
                        f"the simulation diverged at {done * ctl.control_dt:.2f} s (MuJoCo C reset a bad state, or "
                        "it left the task's divergence envelope); counted as a fall and as 'diverged', and the robot "
                        "restarts; a larger solver budget (the robot config's physics.iterations) or a smaller "
                        "timestep may hold it"
                    )
                if on_frame is not None:
                    on_frame(self.data, ctl.reference.state(ctl.frame)[0] if self.tracking else None)
                if fell:
                    self.start(time=ctl.time, phase=ctl.phase)
                if on_step is not None:
                    on_step(done, steps, falls)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            mujoco.set_mju_user_warning(previous_handler)
        if mujoco_texts:
            self._warn(f"MuJoCo C warned {len(mujoco_texts)} time(s), first: {mujoco_texts[0].strip()}")
        seconds_run = [s for s in per_second if s["steps"]]
        unconverged = sum(s["unconverged"] for s in seconds_run)
        if unconverged:
            substeps = sum(s["steps"] for s in seconds_run) * ctl.decimation
            self._warn(
                f"MuJoCo's constraint solver stopped at its iteration cap ({self.model.opt.iterations}) without "
                f"converging in {unconverged} of {substeps} physics steps; its forces there are approximate: raise "
                "the robot config's physics.iterations (and ls_iterations), as an elliptic cone with a high impratio "
                "needs, and retrain"
            )
        names = list(dict.fromkeys(name for s in seconds_run for name in s["sums"]))
        rows = [_row(s, names, ctl.decimation) for s in seconds_run]
        return {
            "steps": done,
            "interrupted": interrupted,
            "per_second": rows,
            "summary": _summary(rows, seconds_run, ctl.decimation) if rows else None,
        }


def solver_unconverged(model: mujoco.MjModel, data: mujoco.MjData) -> bool:
    """Whether the constraint solver of the last ``mj_step`` stopped at ``opt.iterations`` in some
    island without meeting its tolerance (MuJoCo C says nothing then; its forces are approximate)."""
    cap, tolerance = int(model.opt.iterations), float(model.opt.tolerance)
    for island in range(max(int(data.nisland), 1)):
        niter = int(data.solver_niter[island])
        if niter < cap:
            continue
        last = island * mujoco.mjNSOLVER + min(niter, mujoco.mjNSOLVER) - 1  # the stats of its last iteration
        stat = data.solver[last]
        if not (stat.improvement < tolerance or stat.gradient < tolerance):
            return True
    return False


DIVERGENCE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQACC,
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
)
"""MuJoCo C's warnings of a state it found unusable and reset (to ``qpos0``)."""


def divergence_warnings(data: mujoco.MjData) -> int:
    """How many times MuJoCo C has reset ``data`` for a bad acceleration, position or velocity."""
    return sum(int(data.warning[int(kind)].number) for kind in DIVERGENCE_WARNINGS)


def _row(second: dict[str, Any], names: list[str], decimation: int) -> dict[str, Any]:
    """One second's numbers; an error is NaN in a second whose every step diverged."""
    row = {"second": second["second"], "falls": second["falls"], "diverged": second["diverged"]}
    measured = second["measured"]
    row.update({name: second["sums"][name] / measured if measured else math.nan for name in names})
    row["joint_limit_excess_rad"] = max(second["joint"], 0.0)
    row["torque_limit_excess_nm"] = max(second["torque"], 0.0)
    row["peak_torque_over_limit"] = second["ratio"]
    row["solver_unconverged_fraction"] = second["unconverged"] / (second["steps"] * decimation)
    return row


def _summary(rows: list[dict[str, Any]], seconds: list[dict[str, Any]], decimation: int) -> dict[str, Any]:
    """Falls and divergences summed, errors averaged over the measured steps, excesses at their peak,
    the solver's unconverged share of every physics step."""
    measured = sum(s["measured"] for s in seconds)
    names = list(dict.fromkeys(name for s in seconds for name in s["sums"]))
    summary: dict[str, Any] = {"falls": sum(r["falls"] for r in rows), "diverged": sum(r["diverged"] for r in rows)}
    summary.update({name: sum(s["sums"].get(name, 0.0) for s in seconds) / measured for name in names})  # measured > 0
    for key in ("joint_limit_excess_rad", "torque_limit_excess_nm", "peak_torque_over_limit"):
        summary[key] = max(r[key] for r in rows)
    substeps = sum(s["steps"] for s in seconds) * decimation
    summary["solver_unconverged_fraction"] = sum(s["unconverged"] for s in seconds) / substeps
    return summary


def sim2sim(
    policy_path: str | Path,
    command: Sequence[float] | None = None,
    motion: str | None = None,
    seconds: float | None = None,
    video: str | Path | None = None,
    model_path: str | Path | None = None,
    on_step: Callable[[int, int, int], None] | None = None,
    announce: Callable[[str], None] = print,
    terrain: str | Path | None = None,
    terrain_level: int | None = None,
    terrain_column: int | None = None,
    sub_terrain: str | None = None,
) -> dict[str, Any]:
    """Run ``policy_path`` in MuJoCo C; returns the report (docs/deploy.md).

    A policy of a task on a terrain runs on it (:func:`choose_terrain`: ``terrain`` a terrain file
    in place of the metadata's, the start on sub-terrain ``terrain_level``, ``terrain_column`` or
    the first column of type ``sub_terrain``); the report's ``terrain`` says which.

    ``seconds`` is rounded down to whole control steps (at least one); ``seconds`` in the report is
    the time simulated. On ``KeyboardInterrupt`` during the run the report covers the steps taken
    (``interrupted``: true) and the video, if any, holds their frames.

    Args:
      on_step: progress callback, see :meth:`Sim2Sim.run`.
      announce: receives the one-line description of the run before it starts.
    """
    from unilab_gpu.paths import robot_asset

    policy = PolicyFile(policy_path)
    meta = policy.metadata
    kind = policy_kind(meta)
    mjcf = Path(model_path) if model_path is not None else robot_asset(meta.get("robot_model") or "g1")
    ground = choose_terrain(meta, kind, terrain, terrain_level, terrain_column, sub_terrain)
    cfg = task_config(meta)
    # The robot as training built it: its config's MJCF edits, the training run's physics options.
    model = scene_model(mjcf, ground.grid if ground is not None else None, cfg.robot, meta.get("physics"))
    if kind == "velocity" and motion is not None:
        raise DeploymentError(f"--motion: the policy ({meta.get('task')}) follows no motion command")
    if kind == "velocity" and command is None:
        raise DeploymentError("--command vx,vy,wz is required for a velocity policy")
    if kind == "tracking" and command is not None:
        raise DeploymentError("--command applies to velocity policies; this one follows a motion (--motion)")
    loaded = load_reference(meta, model, motion, policy_path)
    reference, motion_name = loaded if loaded is not None else (None, None)
    controller = Controller(policy, model, reference)
    if seconds is None:
        seconds = reference.duration if reference is not None else 20.0
    if reference is not None and seconds > reference.duration + 1e-9:
        announce(f"unilab-sim2sim: the reference lasts {reference.duration:.2f} s; running {reference.duration:.2f} s")
        seconds = reference.duration
    control_steps(seconds, controller.control_dt)  # refuse before the model and renderer are set up
    falls = FallRule.of_config(meta.get("task"), cfg)
    origin = ground.origin if ground is not None and reference is None else None
    run = Sim2Sim(controller, command, falls, origin, cfg.divergence, warn=announce)
    on_ground = ""
    if ground is not None:
        on_ground = f" on the terrain of {'the policy' if ground.source == 'metadata' else ground.source}"
        if origin is not None:
            on_ground += f", level {ground.level} column {ground.column} ({ground.sub_terrain})"
    announce(
        f"unilab-sim2sim: {meta.get('task')} / {meta.get('algo')} policy {policy_path} on {mjcf.name}{on_ground} in "
        f"MuJoCo {mujoco.__version__} (C) for {seconds:g} s, "
        + (f"motion {motion_name}" if reference is not None else f"command {list(command)}")
    )
    recorder = _VideoFrames(model) if video is not None else None
    started = time.perf_counter()
    try:
        result = run.run(seconds, recorder, on_step)
        if recorder is not None and recorder.frames:
            recorder.save(video, 1.0 / controller.control_dt)
    finally:
        if recorder is not None:
            recorder.close()
    steps = result.pop("steps")
    return {
        "policy": str(policy_path),
        "task": meta.get("task"),
        "algo": meta.get("algo"),
        "mjcf": str(mjcf),
        "terrain": ground.report(placed=origin is not None) if ground is not None else None,
        "engine": f"MuJoCo {mujoco.__version__} (C)",
        "command": None if reference is not None else [float(c) for c in command],
        "motion": motion_name,
        "seconds": round(steps * controller.control_dt, 9),
        "control_dt": controller.control_dt,
        "physics_dt": float(model.opt.timestep),
        "physics": physics_options(model),
        "falls_are": run.falls_are,
        "falls_not_counted": [f"{name} ({func}): no runtime twin" for name, func in falls.uncounted],
        "wall_seconds": round(time.perf_counter() - started, 2),
        "warnings": run.warnings,
        **result,
    }


class _VideoFrames:
    """Frames of the run after each control step (the reference as a ghost), then an MP4."""

    def __init__(self, model: mujoco.MjModel) -> None:
        from unilab_gpu.render.offscreen import OffscreenRenderer

        root = int(model.jnt_bodyid[0]) if model.njnt else 1
        self.renderer = OffscreenRenderer(model, body=max(root, 1))
        self.frames: list[np.ndarray] = []

    def __call__(self, data: mujoco.MjData, ghost_qpos: np.ndarray | None) -> None:
        self.frames.append(self.renderer.render(data, ghost_qpos))

    def save(self, path: str | Path, fps: float) -> None:
        from unilab_gpu.render.video import write_video

        write_video(path, self.frames, fps)

    def close(self) -> None:
        self.renderer.close()
