"""Actions: policy outputs -> actuator controls, with non-finite values replaced in-graph."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import torch

from unilab_gpu.envs.row_buffers import rows_with_dummy
from unilab_gpu.managers.term_cfg import ActionCfg

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv

ACTION_KINDS = ("joint_position", "actuator_ctrl")


class ActionManager:
    """Maps ``(num_envs, action_dim)`` actions to ``ctrl``.

    ``joint_position``: ``ctrl = default_joint_pos + scale * clip(action)``, then clipped to the
    joint limits (for position actuators, whose ctrl is a joint target). ``actuator_ctrl``:
    ``ctrl = scale * clip(action)``, clipped to the actuators' ctrlrange.

    Non-finite action entries are replaced by 0 before use and counted per row
    (``non_finite_count``), so one bad policy output cannot poison a world.
    """

    def __init__(self, cfg: ActionCfg, env: ManagerBasedRlEnv) -> None:
        if cfg.kind not in ACTION_KINDS:
            raise ValueError(f"actions.kind must be one of {ACTION_KINDS}, got '{cfg.kind}'")
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
        self.clip = cfg.clip
        if cfg.kind == "joint_position":
            joint_cols = []
            for a in actuators:
                joint_name = sim.joint_names[int(m.actuator_trnid[a, 0])]
                joint_cols.append(env.robot.joint_ids([joint_name])[0])
            cols = torch.tensor(joint_cols, dtype=torch.int64, device=device)
            self.offset = env.robot.default_joint_pos[cols].clone()
            self.limits = env.robot.joint_limits[cols].clone()
        else:
            self.offset = torch.zeros(self.action_dim, device=device)
            limited = torch.tensor(m.actuator_ctrllimited[actuators], dtype=torch.bool, device=device)
            ranges = torch.tensor(m.actuator_ctrlrange[actuators], dtype=torch.float32, device=device)
            inf = torch.tensor([-torch.inf, torch.inf], device=device)
            self.limits = torch.where(limited[:, None], ranges, inf)
        self._ctrl = sim.state.ctrl
        # last_action: this step's sanitized, clipped action; prev_action: the step before.
        # Both (num_envs, action_dim), zero at an episode start.
        self._last_storage, self.last_action = rows_with_dummy(n, self.action_dim, device=device)
        self._prev_storage, self.prev_action = rows_with_dummy(n, self.action_dim, device=device)
        self.non_finite_count = torch.zeros(n, dtype=torch.int64, device=device)
        """Steps per row whose action had a non-finite entry (cumulative)."""

    def process(self, raw: torch.Tensor) -> None:
        """Sanitize ``raw`` (num_envs, action_dim), remember it, and write the targets to ctrl."""
        finite = torch.isfinite(raw)
        self.non_finite_count.add_((~finite).any(dim=1).to(torch.int64))
        action = torch.where(finite, raw, torch.zeros_like(raw))
        if self.clip is not None:
            action = action.clamp(self.clip[0], self.clip[1])
        self.prev_action.copy_(self.last_action)
        self.last_action.copy_(action)
        target = self.offset + self.scale * action
        target = torch.maximum(torch.minimum(target, self.limits[:, 1]), self.limits[:, 0])
        self._ctrl.index_copy_(1, self.ctrl_cols, target)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Forget the previous actions of rows starting an episode (ids padded with num_envs)."""
        self._last_storage.index_fill_(0, env_ids, 0.0)
        self._prev_storage.index_fill_(0, env_ids, 0.0)


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
