"""NumPy versions of the observation terms the policies read, keyed by the env term's path.

The env term names its twin where it is defined (``@term(deploy=twins.joint_vel)``,
``unilab_gpu.managers.term_spec``); this runtime imports no torch module, so it keeps the tables
keyed by path itself, and ``tests/test_term_spec.py`` checks that the two agree.

Each entry of :data:`TERMS` builds, once, a reader ``read(data) -> (d,)`` float64 from the term's
metadata ``params`` (names resolved to MuJoCo addresses here, not on every step); the reader
returns what the training env's term of that path returns for one world (before the group's
clip and scale, which :class:`~.controller.Controller` applies). Quaternions are wxyz, as in
MuJoCo; rotations use MuJoCo's own ``mju_*`` routines. Heights above the ground (the height scan)
read the model's floor heightfield (:class:`~.ground.Ground`; z = 0 without one).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from . import registry
from .ground import Ground
from .policy_file import DeploymentError
from .reference import ReferenceMotion
from .rotations import quat_conjugate, quat_mul, rotate_inverse, rotmat

VELOCITY_COMMAND = "unilab_gpu.tasks.velocity.velocity_command.VelocityCommand"
MOTION_COMMAND = "unilab_gpu.tasks.tracking.motion_command.MotionCommand"
COMMAND_KINDS = {VELOCITY_COMMAND: "velocity", MOTION_COMMAND: "motion"}
"""Command class path -> what the runtime feeds the policy for it: ``velocity`` (a twist
``[v_x, v_y, omega_z]`` and a gait clock at ``params.gait_frequency``) or ``motion`` (a reference
clip and its ``anchor_body``); user modules add theirs (:mod:`.registry`, ``COMMANDS``)."""


def command_kind(func: str) -> str | None:
    """The kind of command class ``func`` (:data:`COMMAND_KINDS` and the user's), or ``None``."""
    return registry.table("COMMANDS", COMMAND_KINDS).get(registry.canonical(func))


Reader = Callable[[mujoco.MjData], np.ndarray]


@dataclass
class TermContext:
    """What the terms read besides ``MjData``: the model, the metadata, and the controller's state,
    which the controller updates in place between steps (the readers hold this object)."""

    model: mujoco.MjModel
    metadata: dict[str, Any]
    joint_qpos: np.ndarray
    """qpos addresses of the observed joints (``observed_joint_names``), ``(J,)``."""
    joint_qvel: np.ndarray
    """qvel addresses of the observed joints, ``(J,)``."""
    root_qpos: int
    """qpos address of the free root joint (position, then quaternion)."""
    last_action: np.ndarray
    """The last action applied (clipped), ``(action_dim,)``; zero at a start."""
    velocity_command: np.ndarray = field(default_factory=lambda: np.zeros(3))
    """``[v_x, v_y, omega_z]`` in the base frame (m/s, rad/s)."""
    phase: float = 0.0
    """The velocity command's gait phase, rad (each foot's clock adds its offset)."""
    reference: ReferenceMotion | None = None
    frame: int = 0
    """The reference frame the policy observes now."""
    ground: Ground = field(init=False)
    """The ground under the robot (the model's floor heightfield), built from ``model``."""

    def __post_init__(self) -> None:
        self.ground = Ground(self.model)

    def command(self, name: str, func: str, term: str) -> dict[str, Any]:
        """The parameters of command ``name``, which must be of the kind of ``func`` (a class path
        of :data:`COMMAND_KINDS`: the class itself or a user's command of the same kind)."""
        commands = self.metadata["commands"]
        kind = command_kind(func)
        if name not in commands or command_kind(commands[name]["func"]) != kind:
            raise DeploymentError(
                f"observation term '{term}' reads command '{name}', which the metadata does not list as a {kind} "
                f"command such as {func} (commands: { {k: v['func'] for k, v in commands.items()} })"
            )
        return commands[name]["params"]

    def body_id(self, name: str, what: str) -> int:
        body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, name)
        if body < 0:
            raise DeploymentError(f"{what}: body '{name}' is not in the MJCF")
        return body

    def need_reference(self, term: str) -> ReferenceMotion:
        if self.reference is None:
            raise DeploymentError(f"observation term '{term}' reads a motion reference: give one (ReferenceMotion)")
        return self.reference


def joint_pos_rel(ctx: TermContext, term: str) -> Reader:
    default = np.asarray(ctx.metadata["observed_default_joint_pos"], dtype=np.float64)
    return lambda data: data.qpos[ctx.joint_qpos] - default


def biased_joint_pos_rel(ctx: TermContext, term: str, bias_range: list[float]) -> Reader:
    """The training env's simulated encoder bias: a robot's encoders bring their own, so it reads
    ``joint_pos_rel`` (``bias_range`` is not added)."""
    return joint_pos_rel(ctx, term)


def joint_vel(ctx: TermContext, term: str) -> Reader:
    return lambda data: data.qvel[ctx.joint_qvel].copy()


def last_action(ctx: TermContext, term: str) -> Reader:
    return lambda data: ctx.last_action.copy()


def sensor(ctx: TermContext, term: str, sensor_names: list[str]) -> Reader:
    columns: list[int] = []
    for name in [sensor_names] if isinstance(sensor_names, str) else sensor_names:
        sensor_id = mujoco.mj_name2id(ctx.model, mujoco.mjtObj.mjOBJ_SENSOR, name)
        if sensor_id < 0:
            raise DeploymentError(f"observation term '{term}': sensor '{name}' is not in the MJCF")
        start = int(ctx.model.sensor_adr[sensor_id])
        columns.extend(range(start, start + int(ctx.model.sensor_dim[sensor_id])))
    cols = np.asarray(columns, dtype=np.int64)
    return lambda data: data.sensordata[cols].copy()


def projected_gravity(ctx: TermContext, term: str) -> Reader:
    down = np.array([0.0, 0.0, -1.0])

    def read(data: mujoco.MjData) -> np.ndarray:
        return rotate_inverse(data.qpos[ctx.root_qpos + 3 : ctx.root_qpos + 7], down)

    return read


def velocity_command(ctx: TermContext, term: str, command_name: str = "twist") -> Reader:
    ctx.command(command_name, VELOCITY_COMMAND, term)
    return lambda data: ctx.velocity_command.astype(np.float64)


def gait_phase(
    ctx: TermContext, term: str, command_name: str = "twist", phase_offsets: list[float] | None = None
) -> Reader:
    ctx.command(command_name, VELOCITY_COMMAND, term)
    offsets = np.array([0.0] if phase_offsets is None else phase_offsets, dtype=np.float64)
    return lambda data: np.stack([np.sin(ctx.phase + offsets), np.cos(ctx.phase + offsets)], axis=1).reshape(-1)


def motion_command(ctx: TermContext, term: str, command_name: str = "motion") -> Reader:
    ctx.command(command_name, MOTION_COMMAND, term)
    reference = ctx.need_reference(term)
    return lambda data: np.concatenate([reference.joint_pos[ctx.frame], reference.joint_vel[ctx.frame]])


def _anchors(ctx: TermContext, term: str, command_name: str) -> tuple[ReferenceMotion, int, int]:
    """The reference, its anchor body's column and the robot's anchor body id."""
    anchor = ctx.command(command_name, MOTION_COMMAND, term)["anchor_body"]
    reference = ctx.need_reference(term)
    return reference, reference.body_column(anchor), ctx.body_id(anchor, f"observation term '{term}'")


def motion_anchor_pos_b(ctx: TermContext, term: str, command_name: str = "motion") -> Reader:
    reference, column, body = _anchors(ctx, term, command_name)

    def read(data: mujoco.MjData) -> np.ndarray:
        offset = reference.body_pos_w[ctx.frame, column] - data.xpos[body]
        return rotate_inverse(data.xquat[body], offset)

    return read


def motion_anchor_ori_b(ctx: TermContext, term: str, command_name: str = "motion") -> Reader:
    reference, column, body = _anchors(ctx, term, command_name)

    def read(data: mujoco.MjData) -> np.ndarray:
        relative = quat_mul(quat_conjugate(data.xquat[body]), reference.body_quat_w[ctx.frame, column])
        return rotmat(relative)[:, :2].reshape(6)  # first two columns, row by row (continuous)

    return read


def height_scan(
    ctx: TermContext,
    term: str,
    size: list[float] | tuple[float, float] = (1.6, 1.0),
    resolution: float = 0.1,
    offset: float = 0.0,
) -> Reader:
    """The env's ``HeightScan``: ``ground - root z + offset`` at a ``size = [length, width]`` grid
    of points every ``resolution`` metres centred on the root, in its heading (yaw-only) frame,
    x fastest (back to front, then right to left); ``(rows * cols,)``."""
    if not (isinstance(resolution, (int, float)) and resolution > 0):
        raise DeploymentError(f"observation term '{term}': params.resolution must be > 0 m, got {resolution!r}")
    if not (isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(v, (int, float)) for v in size)):
        raise DeploymentError(f"observation term '{term}': params.size must be [length, width] in metres, got {size!r}")
    if min(size) < 0:
        raise DeploymentError(f"observation term '{term}': params.size must be >= 0 m each, got {list(size)!r}")
    # The env's grid: the same epsilon keeps 1.6 / 0.1 = 15.999... from losing its last line.
    cols = int(size[0] / resolution + 1e-6) + 1
    rows = int(size[1] / resolution + 1e-6) + 1
    x = (np.arange(cols) - (cols - 1) / 2) * resolution
    y = (np.arange(rows) - (rows - 1) / 2) * resolution
    gy, gx = np.meshgrid(y, x, indexing="ij")
    px, py = gx.reshape(-1), gy.reshape(-1)
    ground, root = ctx.ground, ctx.root_qpos

    def read(data: mujoco.MjData) -> np.ndarray:
        position = data.qpos[root : root + 3]
        w, qx, qy, qz = data.qpos[root + 3 : root + 7]
        yaw = math.atan2(2.0 * (w * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))
        c, s = math.cos(yaw), math.sin(yaw)
        points = np.stack([position[0] + c * px - s * py, position[1] + s * px + c * py], axis=-1)
        return ground.heights_at(points) - position[2] + offset

    return read


# Readers a foreign policy format names (``deploy/formats/*.json``, :mod:`.foreign`): quantities the
# project's env terms do not observe in that cut (the root's body-frame angular velocity, parts of
# the twist, one gait clock per foot as separate sine and cosine terms).


def root_ang_vel_b(ctx: TermContext, term: str) -> Reader:
    """The root's angular velocity in its own frame, ``(3,)`` rad/s: MuJoCo's free joint keeps it
    that way in ``qvel[3:6]``."""
    dof = int(ctx.model.jnt_dofadr[0])
    return lambda data: data.qvel[dof + 3 : dof + 6].copy()


def command_lin_vel(ctx: TermContext, term: str, command_name: str = "twist") -> Reader:
    """``[v_x, v_y]`` of the velocity command, ``(2,)``."""
    ctx.command(command_name, VELOCITY_COMMAND, term)
    return lambda data: ctx.velocity_command[:2].astype(np.float64)


def command_ang_vel(ctx: TermContext, term: str, command_name: str = "twist") -> Reader:
    """``[omega_z]`` of the velocity command, ``(1,)``."""
    ctx.command(command_name, VELOCITY_COMMAND, term)
    return lambda data: ctx.velocity_command[2:].astype(np.float64)


def _phase(wave: Callable[[np.ndarray], np.ndarray]) -> Callable[..., Reader]:
    def build(
        ctx: TermContext, term: str, phase_offsets: list[float], lead_steps: int = 0, command_name: str = "twist"
    ) -> Reader:
        frequency = ctx.command(command_name, VELOCITY_COMMAND, term).get("gait_frequency", 0.0)
        lead = 2.0 * math.pi * frequency * ctx.metadata["control_dt"] * lead_steps
        offsets = np.asarray(phase_offsets, dtype=np.float64) + lead
        return lambda data: wave(ctx.phase + offsets)

    build.__doc__ = (
        f"``{wave.__name__}(phase + phase_offsets)`` per foot, ``(len(phase_offsets),)``, the clock read "
        "``lead_steps`` control steps ahead (a framework that advances its clock before observing reads it 1 ahead)."
    )
    return build


phase_sin = _phase(np.sin)
phase_cos = _phase(np.cos)


TERMS: dict[str, Callable[..., Reader]] = {
    "unilab_gpu.envs.mdp.observations.joint_pos_rel": joint_pos_rel,
    "unilab_gpu.envs.mdp.observations.joint_vel": joint_vel,
    "unilab_gpu.envs.mdp.observations.BiasedJointPosRel": biased_joint_pos_rel,
    "unilab_gpu.envs.mdp.observations.last_action": last_action,
    "unilab_gpu.envs.mdp.observations.sensor": sensor,
    "unilab_gpu.envs.mdp.observations.projected_gravity": projected_gravity,
    "unilab_gpu.envs.mdp.observations.HeightScan": height_scan,
    "unilab_gpu.tasks.velocity.observations.velocity_command": velocity_command,
    "unilab_gpu.tasks.velocity.observations.gait_phase": gait_phase,
    "unilab_gpu.tasks.tracking.observations.motion_command": motion_command,
    "unilab_gpu.tasks.tracking.observations.motion_anchor_pos_b": motion_anchor_pos_b,
    "unilab_gpu.tasks.tracking.observations.motion_anchor_ori_b": motion_anchor_ori_b,
    "unilab_gpu.deploy.terms.root_ang_vel_b": root_ang_vel_b,
    "unilab_gpu.deploy.terms.command_lin_vel": command_lin_vel,
    "unilab_gpu.deploy.terms.command_ang_vel": command_ang_vel,
    "unilab_gpu.deploy.terms.phase_sin": phase_sin,
    "unilab_gpu.deploy.terms.phase_cos": phase_cos,
}
"""The env term's dotted path (``func`` in the metadata) -> its reader builder
``build(ctx, term_name, **params)``: the terms of the velocity and tracking policy groups, and the
height scan a rough-terrain policy may read; ``unilab_gpu.deploy.terms.*``: the runtime's own
readers, which foreign formats name (:mod:`.foreign`). User modules add theirs (:mod:`.registry`, ``OBSERVATIONS``)."""


def build_reader(ctx: TermContext, term: dict[str, Any]) -> Reader:
    """The reader of one metadata observation term (``name``, ``func``, ``params``).

    Raises:
      DeploymentError: the term's function has no numpy version here, or its parameters do not fit.
    """
    func = registry.canonical(term["func"])
    readers = registry.table("OBSERVATIONS", TERMS)
    build = readers.get(func)
    if build is None:
        raise DeploymentError(
            f"observation term '{term['name']}' uses {func}, which the deployment runtime does not implement; "
            f"supported: {sorted(readers)}; add a numpy reader in a module listed in {registry.DEPLOY_MODULES_ENV} "
            "(docs/deploy.md)"
        )
    try:
        return build(ctx, term["name"], **term["params"])
    except TypeError as error:
        raise DeploymentError(
            f"observation term '{term['name']}' ({func}): parameters {term['params']}: {error}"
        ) from None
