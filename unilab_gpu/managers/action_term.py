"""The base of action terms: what ``ActionManager`` needs from the term that ``actions.func`` names.

An action term is a class built once as ``cls(env, **params)`` from ``actions.params`` (``actuator_names``
resolved to ``actuator_ids`` like every ``*_names`` parameter, ``managers.term.NAME_PARAMS``). It
describes an affine map from the manager's sanitised action ``a`` ``(num_envs, action_dim)`` to the
targets of its actuators' ``ctrl`` columns::

    target = offset + (scale if a >= 0 else scale_negative) * a,  clamped to limits

The manager owns everything around that map (non-finite replacement, the ``clip`` of the action, the
action history, the scatter into ``ctrl``), so a term only states its numbers. They are also what an
exported policy's metadata records (``export.metadata``), so a robot rebuilds the same targets.
The concrete terms are in ``unilab_gpu.envs.mdp.actions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import torch

from unilab_gpu.utils.ranges import clamp_to

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView

ACTION_KINDS = ("joint_position", "actuator_ctrl")
"""What an action term's targets are: ``joint_position`` (position actuators, whose ctrl is a joint
angle; a deploy runtime runs a PD law) or ``actuator_ctrl`` (the ctrl itself, e.g. a motor torque)."""


class ActionTerm:
    """An action term over the actuators ``actuator_ids``. A subclass sets ``kind`` and, in its
    ``__init__`` after this one, ``offset``, ``scale``, ``scale_negative`` and ``limits``.

    Errors about a parameter start with the parameter's name (``scale: ...``): the manager prefixes
    the YAML key path (``actions.params.``).
    """

    kind: ClassVar[str] = ""
    """One of ``ACTION_KINDS``; export metadata keeps it as ``action_kind``."""

    def __init__(self, env: EnvView, actuator_ids: torch.Tensor) -> None:
        ids = actuator_ids.tolist()
        self.ctrl_cols = actuator_ids
        """The actuators driven, ``(action_dim,)`` int64: columns of ``sim.state.ctrl``, in action order."""
        self.actuator_names = [env.sim.actuator_names[a] for a in ids]
        self.action_dim = len(ids)
        self.offset = torch.zeros(self.action_dim, device=env.device)
        """The target of the zero action, ``(action_dim,)``."""
        self.scale = torch.ones(self.action_dim, device=env.device)
        """Target change per unit of positive action, ``(action_dim,)``."""
        self.scale_negative = self.scale
        """Target change per unit of negative action, ``(action_dim,)`` (``scale`` unless a term
        spans an asymmetric range)."""
        self.limits = torch.tensor([-torch.inf, torch.inf], device=env.device).expand(self.action_dim, 2)
        """Bounds of the targets, ``(action_dim, 2)`` ``[low, high]`` (``inf``: unbounded)."""
        self.reference_command: str | None = None
        """The command whose reference joint positions the targets are offsets from, or None."""
        self.reference_cols: torch.Tensor | None = None
        """With ``reference_command``: the reference's joint columns of the driven joints, ``(action_dim,)``."""

    def current_offset(self) -> torch.Tensor:
        """The offset of this step's targets: ``offset`` ``(action_dim,)``, or ``(num_envs, action_dim)``
        for a term that follows a reference (hot path)."""
        return self.offset

    def target_room(self) -> torch.Tensor:
        """``(action_dim, 2)``: how far below and above the offset a target can move before it only
        presses against ``limits``."""
        return self.limits - self.offset[:, None]

    def action_range(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The actions past which the target moves no further, ``(action_dim,)`` each (``inf`` where
        the target is unbounded); the manager bounds the action by them."""
        room = self.target_room()
        high = (room / self.scale[:, None]).max(dim=1).values.clamp(min=0.0)
        low = (room / self.scale_negative[:, None]).min(dim=1).values.clamp(max=0.0)
        return low, high

    def targets(self, action: torch.Tensor) -> torch.Tensor:
        """The ctrl targets of the sanitised ``action`` ``(num_envs, action_dim)``, same shape (hot path)."""
        target = self.current_offset() + torch.where(action >= 0, self.scale, self.scale_negative) * action
        return clamp_to(target, self.limits[:, 0], self.limits[:, 1])
