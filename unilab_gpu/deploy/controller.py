"""The deployment loop: ``MjData`` -> observation -> ONNX policy -> PD targets, at the metadata's rates.

One control step (:meth:`Controller.step`), in the training env's order: assemble the
observation from the current state (and the clocks: gait phase, reference frame), run the
network, bound the action, turn it into joint targets, write them to the position actuators'
``ctrl``, advance MuJoCo ``decimation`` physics steps, make kinematics and sensors current
(``mj_forward``), then advance the clocks by ``control_dt``. On a robot, replace the physics
steps by the robot's own period and ``data`` by its estimated state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

from .faults import FaultInjector, Faults
from .model_check import actuator_ids, check_model, joint_addresses, root_address
from .policy_file import DeploymentError, PolicyFile
from .reference import ReferenceMotion
from .terms import Reader, TermContext, build_reader, command_kind

if TYPE_CHECKING:  # for the annotation only
    from .foreign import ForeignPolicy


@dataclass(frozen=True)
class ControlStep:
    """What one control step used: ``obs`` ``(observation_dim,)`` float32, the bounded ``action``
    ``(action_dim,)`` and the joint ``target`` ``(action_dim,)`` written to ``ctrl``."""

    obs: np.ndarray
    action: np.ndarray
    target: np.ndarray


class Controller:
    """Runs ``policy`` on ``model`` (checked against the metadata first, :func:`check_model`).

    Velocity policies read :attr:`command` (``[v_x, v_y, omega_z]``, set it any time) and a gait
    clock; tracking policies read ``reference`` (any canonical clip of the robot at the control
    rate), played from :attr:`time`. The action map is the metadata's::

        a = clip(a, action_low, action_high)                  # non-finite entries -> 0 first
        offset = obs[action_offset_observation_columns] or action_offset
        target = clip(offset + where(a >= 0, action_scale, action_scale_negative) * a, action_bounds)

    Args:
      policy: the exported policy (:class:`PolicyFile`), or a foreign one (:class:`~.foreign.ForeignPolicy`).
      model: the MuJoCo model to run on (the robot's MJCF).
      reference: the motion a tracking policy follows (``None`` for other policies).
    """

    def __init__(
        self, policy: PolicyFile | ForeignPolicy, model: mujoco.MjModel, reference: ReferenceMotion | None = None
    ) -> None:
        meta = policy.metadata
        check_model(model, meta)
        self.policy, self.model, self.metadata = policy, model, meta
        self.control_dt = float(meta["control_dt"])
        self.decimation = int(meta["decimation"])
        self.actuators = actuator_ids(model, meta["actuator_names"])
        self.joint_qpos, self.joint_qvel = joint_addresses(model, meta["joint_names"])
        self.action_low, self.action_high = _array(meta["action_low"]), _array(meta["action_high"])
        self.action_scale, self.action_scale_negative = (
            _array(meta["action_scale"]),
            _array(meta["action_scale_negative"]),
        )
        self.action_offset = _array(meta["action_offset"])
        bounds = np.asarray([[_bound(lo, -1), _bound(hi, 1)] for lo, hi in meta["action_bounds"]], dtype=np.float64)
        self.target_low, self.target_high = bounds[:, 0], bounds[:, 1]
        columns = meta["action_offset_observation_columns"]
        self.offset_columns = None if columns is None else np.asarray(columns, dtype=np.int64)
        self.stiffness, self.damping = _array(meta["stiffness"]), _array(meta["damping"])

        self.motion_command = command_of(meta, "motion")
        if reference is not None:
            if self.motion_command is None:
                raise DeploymentError("a reference motion was given, but the policy reads no motion command")
            params = self.motion_command["params"]
            bodies = [params["anchor_body"], *params.get("body_names", [])]
            reference = reference.for_robot(meta["observed_joint_names"], bodies, 1.0 / self.control_dt, "reference")
        self.reference = reference
        velocity = command_of(meta, "velocity")
        frequency = float(velocity["params"].get("gait_frequency", 0.0)) if velocity is not None else 0.0
        self.phase_step = 2.0 * math.pi * frequency * self.control_dt
        """Gait phase advance per control step, rad."""

        observed_qpos, observed_qvel = joint_addresses(model, meta["observed_joint_names"])
        self.context = TermContext(
            model=model,
            metadata=meta,
            joint_qpos=observed_qpos,
            joint_qvel=observed_qvel,
            root_qpos=root_address(model),
            last_action=np.zeros(int(meta["action_dim"])),
            reference=reference,
        )
        self._terms: list[tuple[dict[str, Any], Reader]] = [
            (term, build_reader(self.context, term)) for term in meta["observation_terms"]
        ]
        self._check_layout()
        self._history = [np.zeros((t["history"], t["dim"])) for t, _ in self._terms]
        self._fresh = True
        self.time = 0.0
        """Seconds since the reference's first frame (tracking policies)."""
        self.faults = Faults()

    @property
    def faults(self) -> Faults:
        """The faults injected where a robot has them (:mod:`.faults`; default none): encoder bias and
        observation noise in the state path, latency in the command path. Setting them starts
        their state afresh (the delay line, the noise generator)."""
        return self._faults.faults

    @faults.setter
    def faults(self, value: Faults) -> None:
        self._faults = FaultInjector(value, self.joint_qpos)

    # ------------------------------------------------------------------------------------------

    @property
    def command(self) -> np.ndarray:
        """The velocity command ``[v_x, v_y, omega_z]`` (base frame, m/s and rad/s) the policy sees."""
        return self.context.velocity_command

    @command.setter
    def command(self, value: Any) -> None:
        value = np.asarray(value, dtype=np.float64)
        if value.shape != (3,) or not np.all(np.isfinite(value)):
            raise DeploymentError(f"command must be three finite numbers [v_x, v_y, omega_z], got {value.tolist()}")
        self.context.velocity_command = value

    @property
    def phase(self) -> float:
        """The gait phase of the left foot, rad (velocity policies)."""
        return self.context.phase

    @property
    def frame(self) -> int:
        """The reference frame the next observation shows (tracking policies)."""
        return self.context.frame

    def reset(self, data: mujoco.MjData, time: float = 0.0, phase: float = 0.0) -> None:
        """Start an episode from ``data``'s state: no last action, fresh observation history,
        the reference at ``time`` seconds, the gait clock at ``phase``; kinematics made current."""
        self.context.last_action[:] = 0.0
        self._faults.reset()
        self._fresh = True
        self.time = float(time)
        self.context.phase = float(phase)
        self._sync_frame()
        mujoco.mj_forward(self.model, data)

    def observe(self, data: mujoco.MjData) -> np.ndarray:
        """The policy observation ``(observation_dim,)`` float32 of ``data`` (kinematics and sensors
        current) and the clocks. Call once per control step: it advances the term histories."""
        obs = np.zeros(int(self.metadata["observation_dim"]), dtype=np.float64)
        with self._faults.encoders(data):
            values = [np.asarray(read(data), dtype=np.float64).reshape(term["dim"]) for term, read in self._terms]
        for (term, _), value, history in zip(self._terms, values, self._history, strict=True):
            value = self._faults.add_noise(term, value)
            if term["clip"] is not None:
                value = np.clip(value, term["clip"][0], term["clip"][1])
            value = value * term["scale"]
            if self._fresh:
                history[:] = value
            else:
                history[:-1] = history[1:]
                history[-1] = value
            obs[term["start"] : term["stop"]] = history.reshape(-1)
        self._fresh = False
        return obs.astype(np.float32)

    def act(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The bounded action ``(action_dim,)`` of the policy for ``obs`` and its joint targets."""
        # A network with a time_step input (a foreign tracking format) is told the reference frame it observes
        # (ForeignPolicy adds its format's time_step_lead).
        policy = self.policy
        if isinstance(policy, PolicyFile) or not policy.reads_time_step:
            raw = policy(obs).astype(np.float64)
        else:
            raw = policy(obs, self.context.frame).astype(np.float64)
        action = np.clip(np.where(np.isfinite(raw), raw, 0.0), self.action_low, self.action_high)
        offset = self.action_offset if self.offset_columns is None else obs[self.offset_columns].astype(np.float64)
        scale = np.where(action >= 0, self.action_scale, self.action_scale_negative)
        return action, np.clip(offset + scale * action, self.target_low, self.target_high)

    def step(
        self,
        data: mujoco.MjData,
        obs: np.ndarray | None = None,
        on_substep: Callable[[mujoco.MjData], None] | None = None,
    ) -> ControlStep:
        """One control step from ``data``'s current state (see the module docstring).

        Args:
          obs: this step's observation when the caller has already called :meth:`observe`
            (``None``: observe now).
          on_substep: called as ``on_substep(data)`` after every physics step (e.g. to watch torques).
        """
        if obs is None:
            obs = self.observe(data)
        action, target = self.act(obs)
        self.context.last_action[:] = action
        data.ctrl[self.actuators] = self._faults.command(target)
        for _ in range(self.decimation):
            mujoco.mj_step(self.model, data)
            if on_substep is not None:
                on_substep(data)
        mujoco.mj_forward(self.model, data)  # mj_step leaves kinematics and sensors one step behind
        self.time += self.control_dt
        self.context.phase = math.fmod(self.context.phase + self.phase_step, 2.0 * math.pi)
        self._sync_frame()
        return ControlStep(obs, action.astype(np.float32), target)

    def pd_torque(self, data: mujoco.MjData) -> np.ndarray:
        """The torque the PD law asks of each actuated joint now, before force limits, ``(action_dim,)``:
        ``stiffness * (ctrl - q) - damping * qd``."""
        q, qd = data.qpos[self.joint_qpos], data.qvel[self.joint_qvel]
        return self.stiffness * (data.ctrl[self.actuators] - q) - self.damping * qd

    # ------------------------------------------------------------------------------------------

    def _sync_frame(self) -> None:
        if self.reference is not None:
            self.context.frame = self.reference.frame_at(self.time)

    def _check_layout(self) -> None:
        column = 0
        for term, _ in self._terms:
            width = term["dim"] * term["history"]
            if term["start"] != column or term["stop"] - term["start"] != width:
                raise DeploymentError(
                    f"metadata: observation term '{term['name']}' spans [{term['start']}, {term['stop']}), expected "
                    f"[{column}, {column + width}) (dim {term['dim']} x history {term['history']})"
                )
            column += width
        if column != self.metadata["observation_dim"]:
            raise DeploymentError(
                f"metadata: the observation terms fill {column} columns, "
                f"observation_dim is {self.metadata['observation_dim']}"
            )


def _array(values: list[float]) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)


def _bound(value: float | None, sign: int) -> float:
    return sign * math.inf if value is None else float(value)


def command_of(meta: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The first command of ``kind`` (``velocity`` or ``motion``, :data:`~.terms.COMMAND_KINDS`) in
    the metadata, or ``None``."""
    return next((c for c in meta["commands"].values() if command_kind(c["func"]) == kind), None)
