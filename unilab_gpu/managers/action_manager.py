"""Actions: policy outputs -> actuator controls, bounded, with non-finite values replaced in-graph."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.term_cfg import ActionCfg
from unilab_gpu.utils.ranges import clamp_to

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView

ACTION_KINDS = ("joint_position", "actuator_ctrl")


class ActionManager:
    """Maps ``(num_envs, action_dim)`` actions to ``ctrl``.

    ``joint_position``: ``ctrl = default_joint_pos + scale * clip(action)``, then clipped to the
    joint limits (for position actuators, whose ctrl is a joint target); with
    ``reference_command`` the offset is that command's reference joint positions instead, row by
    row and step by step (``ctrl = reference + scale * action``: the zero action follows the
    reference pose the policy observes). ``actuator_ctrl``:
    ``ctrl = scale * clip(action)``, clipped to the actuators' ctrlrange. With ``bounds:
    joint_limits`` the joint-position scale is piecewise: ``ctrl = default + scale * a`` for
    ``a >= 0`` and ``default + scale_negative * a`` below, so -1 / 0 / +1 reach the soft lower
    limit / the default pose / the soft upper limit of every joint.

    Non-finite action entries are replaced by 0 before use and counted per row
    (``non_finite_count``), so one bad policy output cannot poison a world. The action itself is
    then clamped to ``[action_low, action_high]``: ``clip`` intersected with the range past which
    the target only presses against the joint limit (or ctrlrange). Beyond that range an action
    moves nothing, but unbounded it would reach action-rate penalties and the last-action
    observation (actions of 1e6 gave rewards of -5.8e10, 3e38 gave -inf); every action dimension
    must end up bounded.
    """

    def __init__(self, cfg: ActionCfg, env: EnvView) -> None:
        if cfg.kind not in ACTION_KINDS:
            raise ValueError(f"actions.kind must be one of {ACTION_KINDS}, got '{cfg.kind}'")
        self.kind = cfg.kind
        sim, device, n = env.sim, env.device, env.num_envs
        m = sim.mj_model
        try:
            actuators = sim.actuator_ids(cfg.actuator_names)
        except KeyError as error:
            raise KeyError(f"actions.actuator_names: {error.args[0]}") from None
        self.action_dim = len(actuators)
        self.ctrl_cols = torch.tensor(actuators, dtype=torch.int64, device=device)
        names = [sim.actuator_names[a] for a in actuators]
        if cfg.effort_scale is not None:
            if cfg.kind != "joint_position":
                raise ValueError("actions.effort_scale applies to kind 'joint_position' only")
            scale = [cfg.effort_scale * _effort_over_kp(m, a, sim.actuator_names[a]) for a in actuators]
        else:
            scale = _per_actuator_scale(cfg.scale, names)
        self.scale = torch.tensor(scale, dtype=torch.float32, device=device)
        if cfg.kind == "joint_position":
            joint_cols = []
            for a in actuators:
                joint_name = sim.joint_names[int(m.actuator_trnid[a, 0])]
                joint_cols.append(env.robot.joint_columns([joint_name])[0])
            cols = torch.tensor(joint_cols, dtype=torch.int64, device=device)
            self.offset = env.robot.default_joint_pos[cols].clone()
            """The targets' fixed offset, ``(action_dim,)``: the default pose (unused with ``reference_command``)."""
            self.limits = env.robot.joint_limits[cols].clone()
        else:
            cols = None
            self.offset = torch.zeros(self.action_dim, device=device)
            limited = torch.tensor(m.actuator_ctrllimited[actuators], dtype=torch.bool, device=device)
            ranges = torch.tensor(m.actuator_ctrlrange[actuators], dtype=torch.float32, device=device)
            inf = torch.tensor([-torch.inf, torch.inf], device=device)
            self.limits = torch.where(limited[:, None], ranges, inf)
        self.scale_negative = self.scale
        """Scale of negative actions, ``(action_dim,)``: ``scale`` except with ``bounds``."""
        if cfg.bounds is not None:
            self._span_soft_joint_limits(cfg, env.robot.soft_joint_limits(cfg.soft_limit_ratio), cols, names)
        self.reference_cols = None
        """With ``reference_command``: the reference's joint columns of the actuated joints, ``(action_dim,)``."""
        if cfg.reference_command is not None:
            self._follow_reference(cfg, env, cols)
        self.action_low, self.action_high = self._action_bounds(cfg.clip, names)
        """``(action_dim,)`` finite bounds applied to the sanitized action."""
        self._ctrl = sim.state.ctrl
        self._history = torch.zeros(2, n + 1, self.action_dim, device=device)
        """``(2, num_envs + 1, action_dim)``: slot 0 this step's action, slot 1 the step before; the
        extra row takes padded reset ids (see ``row_buffers``). Zero at an episode start."""
        self._history_rows = self._history[:, :n]
        self.last_action = self._history[0, :n]
        """This step's sanitized, clipped action, ``(num_envs, action_dim)`` (a fixed view of the history)."""
        self.prev_action = self._history[1, :n]
        """The action of the step before, ``(num_envs, action_dim)`` (a fixed view of the history)."""
        self.non_finite_count = torch.zeros(n, dtype=torch.int64, device=device)
        """Steps per row whose action had a non-finite entry (cumulative)."""
        self.non_finite_rows = torch.zeros(n, dtype=torch.bool, device=device)
        """Rows whose action of this step had a non-finite entry, ``(num_envs,)``."""

    def _span_soft_joint_limits(
        self, cfg: ActionCfg, soft: tuple[torch.Tensor, torch.Tensor], cols: torch.Tensor | None, names: list[str]
    ) -> None:
        """``bounds: joint_limits``: -1 / 0 / +1 -> soft lower limit / default pose / soft upper limit."""
        if cfg.bounds != "joint_limits":
            raise ValueError(f"actions.bounds must be 'joint_limits' or null, got {cfg.bounds!r}")
        if cfg.kind != "joint_position":
            raise ValueError("actions.bounds: joint_limits applies to kind 'joint_position' only")
        if not 0.0 < cfg.soft_limit_ratio <= 1.0:
            raise ValueError(f"actions.soft_limit_ratio must be in (0, 1], got {cfg.soft_limit_ratio}")
        low, high = soft[0][cols], soft[1][cols]
        self.scale = high - self.offset
        self.scale_negative = self.offset - low
        bad = [
            n for n, ok in zip(names, ((self.scale > 0) & (self.scale_negative > 0)).tolist(), strict=True) if not ok
        ]
        if bad:
            raise ValueError(
                f"actions.bounds: joint_limits needs a limited joint whose default pose lies inside its soft range "
                f"(soft_limit_ratio {cfg.soft_limit_ratio}); not so for {bad}"
            )
        self.limits = torch.stack([low, high], dim=1)

    def _follow_reference(self, cfg: ActionCfg, env: EnvView, cols: torch.Tensor | None) -> None:
        if cfg.kind != "joint_position" or cfg.bounds is not None:
            raise ValueError("actions.reference_command applies to kind 'joint_position' without bounds only")
        try:
            command = env.command_manager.get(cfg.reference_command)
        except KeyError as error:
            raise KeyError(f"actions.reference_command: {error.args[0]}") from None
        reference = getattr(command, "joint_pos", None)
        if not isinstance(reference, torch.Tensor) or reference.shape != (env.num_envs, env.robot.num_joints):
            raise ValueError(
                f"actions.reference_command: command '{cfg.reference_command}' has no reference joint positions "
                f"joint_pos of shape ({env.num_envs}, {env.robot.num_joints})"
            )
        self.reference_cols = cols
        self._reference = reference  # a persistent view: the command rewrites it in place

    def _action_bounds(self, clip: list[float] | None, names: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        # target = offset + scale * action (scale_negative below 0) stays within limits for
        # action in [low, high]. About a moving reference, the widest room: a whole joint range.
        room = self.limits - self.offset[:, None]
        if self.reference_cols is not None:
            span = self.limits[:, 1] - self.limits[:, 0]
            room = torch.stack([-span, span], dim=1)
        high = (room / self.scale[:, None]).max(dim=1).values.clamp(min=0.0)
        low = (room / self.scale_negative[:, None]).min(dim=1).values.clamp(max=0.0)
        if clip is not None:
            low, high = low.clamp(min=clip[0]), high.clamp(max=clip[1])
        unbounded = [
            name for name, ok in zip(names, (low.isfinite() & high.isfinite()).tolist(), strict=True) if not ok
        ]
        if unbounded:
            raise ValueError(
                f"actions: actuators {unbounded} have no joint limit or ctrlrange, so their actions are unbounded; "
                "set actions.clip: [low, high]"
            )
        return low, high

    def process(self, raw: torch.Tensor) -> None:
        """Sanitize ``raw`` (num_envs, action_dim), remember it, and write the targets to ctrl."""
        finite = torch.isfinite(raw)
        self.non_finite_rows.copy_((~finite).any(dim=1))
        self.non_finite_count.add_(self.non_finite_rows.to(torch.int64))
        action = torch.where(finite, raw, torch.zeros_like(raw))
        action = clamp_to(action, self.action_low, self.action_high)
        # One write of the history from a stacked copy (docs/architecture.md, "Compiler workarounds").
        rows = self._history_rows
        rows.copy_(torch.stack((action, rows[0])))
        offset = self.offset if self.reference_cols is None else self._reference[:, self.reference_cols]
        target = offset + torch.where(action >= 0, self.scale, self.scale_negative) * action
        target = clamp_to(target, self.limits[:, 0], self.limits[:, 1])
        self._ctrl.index_copy_(1, self.ctrl_cols, target)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Forget the previous actions of rows starting an episode (ids padded with num_envs)."""
        self._history.index_fill_(1, env_ids, 0.0)


def _effort_over_kp(m, actuator: int, name: str) -> float:
    kp = float(m.actuator_gainprm[actuator, 0])
    effort = float(m.actuator_forcerange[actuator, 1])
    if not m.actuator_forcelimited[actuator] or kp <= 0:
        raise ValueError(f"actions.effort_scale: actuator '{name}' needs a force limit and kp > 0")
    return effort / kp


def _per_actuator_scale(scale: float | dict[str, float], names: list[str]) -> list[float]:
    if isinstance(scale, (int, float)):
        return [float(scale)] * len(names)
    if not isinstance(scale, dict):
        raise ValueError(f"actions.scale must be a float or a mapping regex -> float, got {type(scale).__name__}")
    values: list[float | None] = [None] * len(names)
    for pattern, value in scale.items():
        hits = [i for i, n in enumerate(names) if re.fullmatch(pattern, n)]
        if not hits:
            raise KeyError(f"actions.scale: pattern '{pattern}' matches no controlled actuator")
        for i in hits:
            values[i] = float(value)
    missing = [n for n, v in zip(names, values, strict=True) if v is None]
    if missing:
        raise KeyError(f"actions.scale: no scale for actuators {missing}")
    return values  # type: ignore[return-value]
