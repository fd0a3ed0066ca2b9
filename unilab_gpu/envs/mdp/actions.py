"""Action terms (``actions.func``): joint-position targets and raw actuator controls.

Each is a ``managers.action_term.ActionTerm`` built as ``cls(env, **params)`` from ``actions.params``;
the manager sanitises and bounds the action and writes the targets into ``ctrl``. Errors start with
the parameter's name; the manager prefixes ``actions.params.``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from unilab_gpu.managers.action_term import ActionTerm

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


class JointPositionAction(ActionTerm):
    """Joint-position targets of position actuators: ``target = default_joint_pos + scale * a``,
    clamped to the joint limits.

    Args:
      actuator_ids: the actuators (YAML ``actuator_names``), each driving one joint of the robot.
      scale: a float, or a mapping from actuator-name regex to float.
      effort_scale: per-joint scale ``effort_scale * effort_limit / kp`` instead of ``scale``
        (BeyondMimic's 0.25: a unit action asks for a quarter of the joint's torque).
      bounds: ``joint_limits``: actions in ``[-1, 1]`` span each joint's soft range piecewise
        linearly, -1 the soft lower limit, 0 the default pose, +1 the soft upper limit (for
        tanh-bounded policies, whose ``[-1, 1]`` must reach every pose); replaces both scales.
      soft_limit_ratio: with ``bounds``, the share of each joint range the actions span.
      reference_command: the residual variant: the name of a command with reference joint positions
        ``joint_pos (num_envs, J)`` (a motion command); targets are then
        ``reference + scale * a`` row by row and step by step, so the zero action follows the
        reference pose the policy observes. Not with ``bounds``.
    """

    kind = "joint_position"

    def __init__(
        self,
        env: EnvView,
        actuator_ids: torch.Tensor,
        scale: float | dict[str, float] = 1.0,
        effort_scale: float | None = None,
        bounds: str | None = None,
        soft_limit_ratio: float = 0.9,
        reference_command: str | None = None,
    ) -> None:
        super().__init__(env, actuator_ids)
        m = env.sim.mj_model
        ids = actuator_ids.tolist()
        joint_names = [env.sim.joint_names[int(m.actuator_trnid[a, 0])] for a in ids]
        cols = torch.tensor(env.robot.joint_columns(joint_names), dtype=torch.int64, device=env.device)
        if effort_scale is not None:
            if not (_number(effort_scale) and effort_scale > 0):
                raise ValueError(f"effort_scale: must be a number > 0, got {effort_scale!r}")
            values = [effort_scale * _effort_over_kp(m, a, n) for a, n in zip(ids, self.actuator_names, strict=True)]
        else:
            values = per_actuator_scale(scale, self.actuator_names)
        self.scale = torch.tensor(values, dtype=torch.float32, device=env.device)
        self.scale_negative = self.scale
        self.offset = env.robot.default_joint_pos[cols].clone()
        self.limits = env.robot.joint_limits[cols].clone()
        if bounds is not None:
            if reference_command is not None:
                raise ValueError(
                    f"bounds: residuals about a reference (reference_command '{reference_command}') span no fixed "
                    "range; set bounds: null, or reference_command: null"
                )
            self._span_soft_joint_limits(env, bounds, soft_limit_ratio, cols)
        if reference_command is not None:
            self._follow_reference(env, reference_command, cols)
        self._watch_torque_demand(env, ids, cols)

    def _watch_torque_demand(self, env: EnvView, ids: list[int], cols: torch.Tensor) -> None:
        """Count, every step, the share of force-limited actuators whose PD torque at the new targets
        reaches the motor's limit: ``|kp (target - q) - kv qdot| >= effort`` at the control step's
        start (stats ``actions/torque_limit_share``; docs/robots.md, "Torque demand")."""
        m = env.sim.mj_model
        limited = [bool(m.actuator_forcelimited[a]) for a in ids]
        as_tensor = lambda values: torch.tensor(values, dtype=torch.float32, device=env.device)  # noqa: E731
        self._kp = as_tensor([float(m.actuator_gainprm[a, 0]) for a in ids])
        self._kv = as_tensor([-float(m.actuator_biasprm[a, 2]) for a in ids])
        self._effort = as_tensor(
            [
                float(np.abs(m.actuator_forcerange[a]).min()) if lim else np.inf
                for a, lim in zip(ids, limited, strict=True)
            ]
        )
        self._joint_cols = cols
        self._robot = env.robot
        # The share is over all the model's actuators: every joint-position term of an env adds its
        # actuators' part into one accumulator (the first term registers it).
        self._share_of_actuators = len(ids) / m.nu
        sums = env.stats.step_sums
        self._at_limit = (
            sums[TORQUE_LIMIT_SHARE] if TORQUE_LIMIT_SHARE in sums else env.stats.add_step_mean(TORQUE_LIMIT_SHARE)
        )

    def targets(self, action: torch.Tensor) -> torch.Tensor:
        target = super().targets(action)
        q = self._robot.joint_pos[:, self._joint_cols]
        qd = self._robot.joint_vel[:, self._joint_cols]
        demand = (self._kp * (target - q) - self._kv * qd).abs()
        self._at_limit.add_((demand >= self._effort).float().mean() * self._share_of_actuators)
        return target

    def _span_soft_joint_limits(self, env: EnvView, bounds: str, ratio: float, cols: torch.Tensor) -> None:
        """``bounds: joint_limits``: -1 / 0 / +1 -> soft lower limit / default pose / soft upper limit."""
        if bounds != "joint_limits":
            raise ValueError(f"bounds: must be 'joint_limits' or null, got {bounds!r}")
        if not (_number(ratio) and 0.0 < ratio <= 1.0):
            raise ValueError(f"soft_limit_ratio: must be in (0, 1], got {ratio!r}")
        soft_low, soft_high = env.robot.soft_joint_limits(ratio)
        low, high = soft_low[cols], soft_high[cols]
        self.scale = high - self.offset
        self.scale_negative = self.offset - low
        spans = torch.stack([self.scale, self.scale_negative])
        inside = ((spans > 0) & spans.isfinite()).all(dim=0).tolist()  # an unlimited joint spans inf
        bad = [name for name, ok in zip(self.actuator_names, inside, strict=True) if not ok]
        if bad:
            raise ValueError(
                f"bounds: joint_limits needs a limited joint whose default pose lies inside its soft range "
                f"(soft_limit_ratio {ratio}); not so for {bad}"
            )
        self.limits = torch.stack([low, high], dim=1)

    def _follow_reference(self, env: EnvView, command_name: str, cols: torch.Tensor) -> None:
        try:
            command = env.command_manager.get(command_name)
        except KeyError as error:
            raise KeyError(f"reference_command: {error.args[0]}") from None
        reference = getattr(command, "joint_pos", None)
        if not isinstance(reference, torch.Tensor) or reference.shape != (env.num_envs, env.robot.num_joints):
            raise ValueError(
                f"reference_command: command '{command_name}' has no reference joint positions "
                f"joint_pos of shape ({env.num_envs}, {env.robot.num_joints})"
            )
        self.reference_command = command_name
        self.reference_cols = cols
        self._reference = reference  # a persistent view: the command rewrites it in place

    def current_offset(self) -> torch.Tensor:
        """``offset`` ``(action_dim,)``; for the residual variant, the reference joint positions of the
        driven joints, ``(num_envs, action_dim)``, as the command holds them this step."""
        if self.reference_cols is None:
            return self.offset
        return self._reference[:, self.reference_cols]

    def target_room(self) -> torch.Tensor:
        # About a moving reference, the widest room a target can have: a whole joint range either way.
        if self.reference_cols is None:
            return super().target_room()
        span = self.limits[:, 1] - self.limits[:, 0]
        return torch.stack([-span, span], dim=1)


class ActuatorCtrlAction(ActionTerm):
    """Raw actuator controls (e.g. motor torques): ``ctrl = scale * a``, clamped to each actuator's
    ``ctrlrange`` where it is limited.

    Args:
      actuator_ids: the actuators (YAML ``actuator_names``).
      scale: a float, or a mapping from actuator-name regex to float.
    """

    kind = "actuator_ctrl"

    def __init__(self, env: EnvView, actuator_ids: torch.Tensor, scale: float | dict[str, float] = 1.0) -> None:
        super().__init__(env, actuator_ids)
        m = env.sim.mj_model
        ids = actuator_ids.tolist()
        values = per_actuator_scale(scale, self.actuator_names)
        self.scale = torch.tensor(values, dtype=torch.float32, device=env.device)
        self.scale_negative = self.scale
        limited = torch.tensor(m.actuator_ctrllimited[ids], dtype=torch.bool, device=env.device)
        ranges = torch.tensor(m.actuator_ctrlrange[ids], dtype=torch.float32, device=env.device)
        self.limits = torch.where(limited[:, None], ranges, self.limits)


def per_actuator_scale(scale: Any, names: list[str]) -> list[float]:
    """One non-zero scale per actuator of ``names``, from a float or a mapping regex -> float."""
    if _number(scale):
        values: list[Any] = [float(scale)] * len(names)
    elif isinstance(scale, dict):
        values = [None] * len(names)
        for pattern, value in scale.items():
            hits = [i for i, n in enumerate(names) if re.fullmatch(pattern, n)]
            if not hits:
                raise KeyError(f"scale: pattern '{pattern}' matches no controlled actuator")
            for i in hits:
                values[i] = value
        missing = [n for n, v in zip(names, values, strict=True) if v is None]
        if missing:
            raise KeyError(f"scale: no scale for actuators {missing}")
    else:
        raise ValueError(f"scale: must be a float or a mapping regex -> float, got {scale!r}")
    # A zero scale would freeze a joint and divide by zero in the action bounds.
    bad = {n: v for n, v in zip(names, values, strict=True) if not (_number(v) and v != 0)}
    if bad:
        raise ValueError(f"scale: must be non-zero numbers, got {bad}")
    return [float(v) for v in values]


TORQUE_LIMIT_SHARE = "actions/torque_limit_share"
"""Stats key: the share of actuator-steps whose PD torque demand reaches the motor's limit."""


def _effort_over_kp(m, actuator: int, name: str) -> float:
    kp = float(m.actuator_gainprm[actuator, 0])
    effort = float(m.actuator_forcerange[actuator, 1])
    if not m.actuator_forcelimited[actuator] or kp <= 0:
        raise ValueError(f"effort_scale: actuator '{name}' needs a force limit and kp > 0")
    return effort / kp


def _number(value: Any) -> bool:
    # Finiteness is checked with every other number of the config (envs.env_cfg.check_env_cfg).
    return isinstance(value, (int, float)) and not isinstance(value, bool)
