"""The scenario of a sim-to-sim run: what plain MuJoCo C simulates for an exported policy.

A :class:`Scenario` is the run's options (the policy file, its command or motion, how long, the
MJCF and the ground); :meth:`Scenario.prepare` turns it into a :class:`PreparedScenario`: the model
as training built it (the task's robot config edits applied to the MJCF, ``envs.robot_model``, and
the metadata's ``physics`` written over its options; :func:`scene_model`) on the policy's terrain
(:mod:`.terrain`), the robot-side runtime (:class:`~unilab_gpu.deploy.Controller`) with a tracking
policy's reference (:func:`load_reference`), the simulated time, and the rule by which falls are
counted (:class:`FallRule`). A velocity policy starts at the model's keyframe (on its sub-terrain)
and follows a fixed command; a tracking policy starts at the reference's first frame and follows it.

Unlike :mod:`unilab_gpu.deploy`, this module uses the training side: the task config (the failure
terminations and their thresholds) and motion conversion.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab_gpu.deploy import Controller, DeploymentError, Faults, ReferenceMotion
from unilab_gpu.deploy.controller import command_of
from unilab_gpu.deploy.foreign import ForeignPolicy, open_policy
from unilab_gpu.deploy.physics import apply_physics_options
from unilab_gpu.deploy.terminations import fall_check_builders
from unilab_gpu.envs.env_cfg import EnvCfg
from unilab_gpu.envs.robot_cfg import RobotCfg
from unilab_gpu.envs.robot_model import robot_edit
from unilab_gpu.export.metadata import defining_path
from unilab_gpu.export.sim2sim.terrain import TerrainChoice, choose_terrain
from unilab_gpu.managers.term import resolve_callable
from unilab_gpu.paths import robot_asset
from unilab_gpu.terrain.generator import TerrainGrid
from unilab_gpu.terrain.scene import add_terrain

VELOCITY_SECONDS = 20.0
"""Simulated seconds of a velocity policy's run when none are given."""


@dataclass(frozen=True)
class Scenario:
    """What a sim-to-sim run simulates, as ``unilab-sim2sim``'s options name it.

    Args:
      policy_path: the exported policy (``unilab-export``).
      command: ``[v_x, v_y, omega_z]`` (m/s, m/s, rad/s; root frame) a velocity policy follows:
        required for one, refused for a tracking policy.
      motion: the reference a tracking policy follows (any format ``unilab-motion`` reads); ``None``:
        the metadata's (:func:`load_reference`).
      seconds: simulated time, rounded down to whole control steps (at least one); ``None``:
        :data:`VELOCITY_SECONDS` for a velocity policy, the reference's duration (also the most) for
        a tracking one.
      model_path: the MJCF to run on; ``None``: the project's model of the robot the metadata names.
      terrain: a terrain name or file in place of the metadata's ground (:func:`.terrain.choose_terrain`).
      terrain_level, terrain_column, sub_terrain: the sub-terrain a velocity policy starts on (the
        level; the column, or the first column of that type).
      format: the policy file's format: ``unilab`` (an export) or a foreign format
        (:func:`~unilab_gpu.deploy.foreign.format_names`); ``None``: detected from its metadata.
      faults: the robot-side faults the runtime injects for the whole run (latency, encoder
        bias, observation noise; :class:`~unilab_gpu.deploy.faults.Faults`); default none.
    """

    policy_path: str | Path
    command: Sequence[float] | None = None
    motion: str | None = None
    seconds: float | None = None
    model_path: str | Path | None = None
    terrain: str | Path | None = None
    terrain_level: int | None = None
    terrain_column: int | None = None
    sub_terrain: str | None = None
    format: str | None = None
    faults: Faults = field(default_factory=Faults)

    def prepare(self, announce: Callable[[str], None] = print) -> PreparedScenario:
        """Load the policy and build what its run simulates; ``announce`` receives the line saying that
        ``seconds`` past the reference's end were cut to it.

        Raises:
          DeploymentError: one line naming the option or the metadata field at fault.
        """
        policy = open_policy(self.policy_path, self.format)
        meta = policy.metadata
        kind = policy_kind(meta)
        mjcf = robot_mjcf(meta, self.model_path)
        ground = choose_terrain(meta, kind, self.terrain, self.terrain_level, self.terrain_column, self.sub_terrain)
        cfg = task_config(meta)
        # The robot as training built it: its config's MJCF edits, the training run's physics options.
        model = scene_model(mjcf, ground.grid if ground is not None else None, cfg.robot, meta.get("physics"))
        if kind == "velocity" and self.motion is not None:
            raise DeploymentError(f"--motion: the policy ({meta.get('task')}) follows no motion command")
        if kind == "velocity" and self.command is None:
            raise DeploymentError("--command vx,vy,wz is required for a velocity policy")
        if kind == "tracking" and self.command is not None:
            raise DeploymentError("--command applies to velocity policies; this one follows a motion (--motion)")
        if isinstance(policy, ForeignPolicy) and policy.reads_time_step and self.motion is None:
            loaded = network_reference(meta, model, self.policy_path)  # the network's own reference
        else:
            loaded = load_reference(meta, model, self.motion, self.policy_path)
        reference, motion_name = loaded if loaded is not None else (None, None)
        controller = Controller(policy, model, reference)
        seconds = self.seconds
        if seconds is None:
            seconds = reference.duration if reference is not None else VELOCITY_SECONDS
        if reference is not None and seconds > reference.duration + 1e-9:
            seconds = reference.duration
            announce(f"unilab-sim2sim: the reference lasts {seconds:.2f} s; running {seconds:.2f} s")
        control_steps(seconds, controller.control_dt)  # refuse before the model and renderer are set up
        falls = FallRule.of_config(meta.get("task"), cfg)
        return PreparedScenario(self, mjcf, ground, cfg, controller, motion_name, seconds, falls)


@dataclass(frozen=True)
class PreparedScenario:
    """A :class:`Scenario` loaded and built (:meth:`Scenario.prepare`)."""

    scenario: Scenario
    mjcf: Path
    """The MJCF the model was built from."""
    ground: TerrainChoice | None
    """The terrain the robot stands on; ``None``: the MJCF's own floor."""
    cfg: EnvCfg
    """The policy's task config with the training run's overrides."""
    controller: Controller
    """The policy's runtime on the model, with a tracking policy's reference at its control rate."""
    motion_name: str | None
    """The reference's file, or its synthetic clip in words; ``None`` for a velocity policy."""
    seconds: float
    """Simulated time asked for (the run takes the whole control steps in it, :func:`control_steps`)."""
    falls: FallRule

    @property
    def metadata(self) -> dict[str, Any]:
        return self.controller.metadata

    @property
    def model(self) -> mujoco.MjModel:
        return self.controller.model

    @property
    def tracking(self) -> bool:
        """Whether the policy follows a reference (else a velocity command)."""
        return self.controller.reference is not None

    @property
    def origin(self) -> np.ndarray | None:
        """``(3,)`` the sub-terrain origin a velocity policy starts on, added to the keyframe's root
        position; ``None`` on flat ground or for a tracking policy (it starts at its reference's pose)."""
        return self.ground.origin if self.ground is not None and not self.tracking else None

    def describe(self) -> str:
        """The run in one line, announced before it starts."""
        scenario, meta, on_ground = self.scenario, self.metadata, ""
        if self.ground is not None:
            on_ground = f" on the terrain of {'the policy' if self.ground.source == 'metadata' else self.ground.source}"
            if self.origin is not None:
                on_ground += f", level {self.ground.level} column {self.ground.column} ({self.ground.sub_terrain})"
        return (
            f"unilab-sim2sim: {meta.get('task')} / {meta.get('algo')} policy {scenario.policy_path} on {self.mjcf.name}"
            f"{on_ground} in MuJoCo {mujoco.__version__} (C) for {self.seconds:g} s, "
            + (f"motion {self.motion_name}" if self.tracking else f"command {list(scenario.command)}")
        )


def robot_mjcf(meta: dict[str, Any], model_path: str | Path | None) -> Path:
    """The MJCF a run builds its model from: ``model_path``, else the project's model of the robot the
    metadata's ``robot_model`` names (:func:`~unilab_gpu.paths.robot_asset`).

    Raises:
      DeploymentError: neither is given; a one-line message naming the field and ``--model``.
    """
    if model_path is not None:
        return Path(model_path)
    robot = meta.get("robot_model")
    if not robot:  # no robot guessed: a wrong model would fail later, or run, far from the cause
        raise DeploymentError(
            f"the policy's metadata names no robot model (field 'robot_model', task {meta.get('task')}); "
            "give the robot's MJCF with --model FILE"
        )
    return robot_asset(robot)


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


def network_reference(
    meta: dict[str, Any], model: mujoco.MjModel, policy_path: str | Path
) -> tuple[ReferenceMotion, str]:
    """The reference a foreign tracking network embeds behind its ``time_step`` input, at its
    control rate, with the bodies of ``model`` (``unilab-motion from-onnx``'s reading:
    :func:`~unilab_gpu.motion.policy_reference.read_policy_reference`), and its name."""
    from unilab_gpu.motion import RobotKinematics  # the training side converts
    from unilab_gpu.motion.assemble import build_clip
    from unilab_gpu.motion.policy_reference import read_policy_reference

    kinematics = RobotKinematics(model)
    anchor = command_of(meta, "motion")["params"]["anchor_body"]
    read = read_policy_reference(policy_path, 1.0 / meta["control_dt"], kinematics, ref_body=anchor)
    clip = build_clip(read.source, kinematics, fps=None)
    reference = ReferenceMotion(clip.fps, clip.joint_names, clip.body_names, **clip.arrays())
    return reference, f"embedded in the policy file ({clip.num_frames} frames behind time_step)"


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
