"""Actions: policy outputs -> actuator controls, bounded, with non-finite values replaced in-graph."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.action_term import ACTION_KINDS, ActionTerm
from unilab_gpu.managers.term import check_params, resolve_callable, resolve_params
from unilab_gpu.managers.term_cfg import ActionCfg
from unilab_gpu.utils.ranges import clamp_to

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView


class ActionManager:
    """Maps ``(num_envs, action_dim)`` actions to ``ctrl`` through the action term ``actions.func``
    (``managers.action_term.ActionTerm``; the project's are in ``envs.mdp.actions``): the term says
    which ctrl columns it drives and how an action becomes their targets, the manager does the rest.

    Non-finite action entries are replaced by 0 before use and counted per row
    (``non_finite_count``), so one bad policy output cannot poison a world. The action itself is
    then clamped to ``[action_low, action_high]``: ``actions.clip`` intersected with the term's
    range past which the target only presses against its limit. Beyond that range an action
    moves nothing, but unbounded it would reach action-rate penalties and the last-action
    observation (actions of 1e6 gave rewards of -5.8e10, 3e38 gave -inf); every action dimension
    must end up bounded. The manager keeps the last two actions and scatters the term's targets
    into the ``ctrl`` columns it drives.

    Two faults of a real robot's command path can be simulated, each drawn per row at every episode
    start (docs/tasks/velocity.md, "Sim-to-real randomization"): ``target_bias`` adds a constant
    offset to each target (a miscalibrated default pose), and ``delay_steps`` makes the targets
    reach ``ctrl`` that many control steps late (latency). The delay line holds the targets of the
    last ``high + 1`` steps, newest first; a row starting an episode fills it with its first
    targets, so a delayed row holds its first command until the line has filled.
    """

    def __init__(self, cfg: ActionCfg, env: EnvView) -> None:
        self.cfg = cfg
        """``actions``: the term's ``func`` and ``params``, and ``clip``."""
        self.term = _build_term(cfg, env)
        """The action term: ``kind``, ``ctrl_cols``, ``offset``, ``scale``, ``limits``, ``targets(action)``."""
        sim, device, n = env.sim, env.device, env.num_envs
        self.action_dim = self.term.action_dim
        self.action_low, self.action_high = self._action_bounds(cfg.clip)
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
        self._bias_low, self._bias_high = cfg.target_bias or (0.0, 0.0)
        self.target_bias: torch.Tensor | None = None
        """With ``target_bias``: each row's offset of its targets, ``(num_envs + 1, action_dim)`` (the
        extra row takes padded reset ids)."""
        if cfg.target_bias is not None:
            self.target_bias = torch.full((n + 1, self.action_dim), float(self._bias_low), device=device)
        self.delay_line: DelayLine | None = None
        """With ``delay_steps``: the targets of the last steps and each row's latency."""
        if cfg.delay_steps is not None:
            low, high = cfg.delay_steps
            self.delay_line = DelayLine(low, high, n, self.action_dim, device)

    def _action_bounds(self, clip: list[float] | None) -> tuple[torch.Tensor, torch.Tensor]:
        low, high = self.term.action_range()
        if clip is not None:
            low, high = low.clamp(min=clip[0]), high.clamp(max=clip[1])
        finite = (low.isfinite() & high.isfinite()).tolist()
        unbounded = [name for name, ok in zip(self.term.actuator_names, finite, strict=True) if not ok]
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
        targets = self.term.targets(action)
        if self.target_bias is not None:
            targets = targets + self.target_bias[:-1]
        if self.delay_line is not None:
            targets = self.delay_line(targets)
        self._ctrl.index_copy_(1, self.term.ctrl_cols, targets)

    @property
    def delay(self) -> torch.Tensor | None:
        """With ``delay_steps``: each row's latency in control steps, ``(num_envs + 1,)`` int64."""
        return None if self.delay_line is None else self.delay_line.delay

    def reset(self, env_ids: torch.Tensor) -> None:
        """Forget the previous actions of rows starting an episode (ids padded with num_envs), and
        draw their target bias and latency."""
        self._history.index_fill_(1, env_ids, 0.0)
        k, device = env_ids.shape[0], env_ids.device
        low, high = self._bias_low, self._bias_high
        if self.target_bias is not None and high > low:
            self.target_bias.index_copy_(0, env_ids, low + (high - low) * torch.rand(k, self.action_dim, device=device))
        if self.delay_line is not None:
            self.delay_line.reset(env_ids)


class DelayLine:
    """Targets reaching ``ctrl`` ``delay`` control steps late, ``delay`` drawn per row from
    ``[low, high]`` at each episode start (``actions.delay_steps``)."""

    def __init__(self, low: int, high: int, num_envs: int, action_dim: int, device: str | torch.device) -> None:
        self.low, self.high = low, high
        self.delay = torch.full((num_envs + 1,), low, dtype=torch.int64, device=device)
        """Each row's latency in control steps, ``(num_envs + 1,)`` int64 (the extra row takes padded reset ids)."""
        self.line = torch.zeros(high + 1, num_envs, action_dim, device=device)
        """``(high + 1, num_envs, action_dim)``: the targets of the last steps, newest first."""
        self.fresh = torch.ones(num_envs + 1, dtype=torch.bool, device=device)
        """Rows whose next targets start their line (a new episode), ``(num_envs + 1,)``."""

    def __call__(self, targets: torch.Tensor) -> torch.Tensor:
        """Push this step's ``targets`` ``(num_envs, action_dim)`` into the line; return each row's
        targets of ``delay`` steps ago."""
        line = self.line
        n = line.shape[1]
        shifted = torch.cat((targets[None], line[:-1]))
        fresh = self.fresh[:-1].view(1, n, 1)
        line.copy_(torch.where(fresh, targets[None].expand_as(line), shifted))
        self.fresh.fill_(False)
        return line.gather(0, self.delay[:-1].view(1, n, 1).expand(1, n, line.shape[2]))[0]

    def reset(self, env_ids: torch.Tensor) -> None:
        """Rows starting an episode (ids padded with num_envs) start their line afresh and draw their latency."""
        self.fresh.index_fill_(0, env_ids, True)
        if self.high > self.low:
            self.delay.index_copy_(
                0, env_ids, torch.randint(self.low, self.high + 1, (env_ids.shape[0],), device=env_ids.device)
            )


def _build_term(cfg: ActionCfg, env: EnvView) -> ActionTerm:
    """The action term ``cfg.func`` names, built from ``cfg.params``; errors name the YAML key."""
    target = resolve_callable(cfg.func, "actions.func")
    if not (inspect.isclass(target) and issubclass(target, ActionTerm) and target.kind in ACTION_KINDS):
        raise ValueError(
            f"actions.func: '{cfg.func}' is not an action term: a subclass of "
            f"unilab_gpu.managers.action_term.ActionTerm with kind in {ACTION_KINDS}, such as "
            "unilab_gpu.envs.mdp.actions.JointPositionAction"
        )
    params = resolve_params(dict(cfg.params), env, "actions.params")
    check_params(target, cfg.func, params, (), "actions.params")
    try:
        return target(env, **params)
    except (KeyError, ValueError) as error:  # the term names its parameter; add where it is set
        raise type(error)(f"actions.params.{error.args[0]}") from None
