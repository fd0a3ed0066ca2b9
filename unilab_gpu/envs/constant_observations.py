"""Observation terms that never change over the first steps of a run: an input that cannot move.

An IMU welded to the world reads 0 every step, a term that reads the wrong buffer reads one number
forever, and training goes on "fine" without that input. :class:`ConstantObservations` watches
each term's raw value (before noise, clip and scale: noise would hide a constant) over the first
``steps`` env steps of a run, on the device and without a host read; afterwards one host read
names the terms whose every entry kept its first row's first value in every row and step.
"""

from __future__ import annotations

import torch

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

WATCH_STEPS = 20
"""Env steps watched: a second of control, in which a pushed, reset and randomly driven robot moves
every sensor it has."""


class ConstantObservations:
    """Watch ``env``'s observation terms over its next ``steps`` steps (call :meth:`observe` after each)."""

    def __init__(self, env: ManagerBasedRlEnv, steps: int = WATCH_STEPS) -> None:
        self.steps = steps
        self.seen = 0
        groups = env.observation_manager.groups.values()
        self._groups = [(group, group.raw_values) for group in groups]
        self._first = [values[:1].clone() for _, values in self._groups]  # (1, D) per group
        self._changed = [
            torch.zeros(values.shape[1], dtype=torch.bool, device=values.device) for _, values in self._groups
        ]

    @property
    def done(self) -> bool:
        return self.seen >= self.steps

    def observe(self) -> None:
        """Fold this step's raw values in (device ops only); the first call takes the reference."""
        if self.done:
            return
        for (_, values), first, changed in zip(self._groups, self._first, self._changed, strict=True):
            if self.seen == 0:
                first.copy_(values[:1])
            changed |= (values != first).any(dim=0)
        self.seen += 1

    def constant_terms(self) -> list[str]:
        """``group/term`` of every term none of whose entries changed (one host read)."""
        constant = []
        for (group, _), changed in zip(self._groups, self._changed, strict=True):
            moved = changed.tolist()
            for name, layout in zip(group.term_names, group.layouts, strict=True):
                if not any(moved[layout.step]):
                    constant.append(f"{group.name}/{name}")
        return constant

    def warning(self) -> str | None:
        """One line naming the constant terms, or ``None``."""
        constant = self.constant_terms()
        if not constant:
            return None
        return (
            f"warning: observation term(s) {', '.join(constant)} kept one value in every row over the first "
            f"{self.seen} steps; a policy learns nothing from them (an IMU on the world body? a term reading "
            "the wrong buffer?)"
        )
