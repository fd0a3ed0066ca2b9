"""Commands: per-row state (e.g. a motion clip and frame) advanced every step, reset per row."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from unilab_gpu.managers.term import Term
from unilab_gpu.managers.term_cfg import CommandTermCfg

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView
    from unilab_gpu.managers.reset_staging import ResetStaging


class CommandManager:
    """Command terms are classes with ``update(env)`` (every step, after physics, before the
    terminations and rewards that read the command) and ``reset(staging)`` (the rows being reset,
    a ``ResetStaging``: start their commands at ``staging.env_ids``; a command that decides the
    robot's start, like a motion reference, overwrites ``staging.qpos`` / ``qvel``, which the
    reset events then edit). A term may also have ``advance(env)``, called after the step's
    rewards and terminations and before its observations: a command that moves on every step
    (a motion reference's frame) moves there, so that the policy observes the command the next
    step's rewards score."""

    def __init__(self, cfg: dict[str, CommandTermCfg | None], env: EnvView) -> None:
        self.terms: dict[str, Term[CommandTermCfg]] = {}
        self._commands: list[Any] = []
        """The terms' objects in configured order, each with ``update`` and ``reset``."""
        for name, c in cfg.items():
            if c is None:
                continue
            term = Term(name, c, env, f"commands.{name}")
            for method in ("update", "reset"):
                if not callable(getattr(term.instance, method, None)):
                    raise TypeError(f"commands.{name}.func: a command term must be a class with {method}()")
            self.terms[name] = term
            self._commands.append(term.instance)
        self._advancing = [c.advance for c in self._commands if callable(getattr(c, "advance", None))]

    @property
    def advances(self) -> bool:
        """Whether any command term has ``advance(env)``."""
        return bool(self._advancing)

    def get(self, name: str) -> Any:
        """The command term object ``name`` (terms read its ``command`` and other state)."""
        if name not in self.terms:
            raise KeyError(f"no command term '{name}'; configured: {list(self.terms)}")
        return self.terms[name].instance

    def update(self, env: EnvView) -> None:
        for command in self._commands:
            command.update(env)

    def advance(self, env: EnvView) -> None:
        for advance in self._advancing:
            advance(env)

    def reset(self, staging: ResetStaging) -> None:
        """Step 2 of ``managers.reset_staging``: every command term, in configured order."""
        for command in self._commands:
            command.reset(staging)
