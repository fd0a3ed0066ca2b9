"""Binding a term config to an env: import the callable, resolve names, build class terms.

A task config names its terms by dotted path, and a run folder's ``config.yaml`` carries its
task overrides, so ``unilab-play`` and a resume import what a run folder names. Terms may
therefore only come from the project's own modules (``unilab_gpu.*``) and from the modules the
user lists, comma-separated, in the environment variable ``UNILAB_TERM_MODULES`` (e.g.
``UNILAB_TERM_MODULES=my_robot.terms``); anything else is refused before it is imported
(:mod:`unilab_gpu.utils.imports`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import torch

from unilab_gpu.managers.term_cfg import TermCfg, canonical_func
from unilab_gpu.utils.imports import TERM_MODULES_ENV, RefusedPath, allowed_packages, import_dotted, is_inside

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import EnvView

NAME_PARAMS: dict[str, tuple[str, Callable[[EnvView, list[str]], list[int]]]] = {
    "body_names": ("body_ids", lambda env, v: env.sim.body_ids(v)),
    "joint_names": ("joint_cols", lambda env, v: env.robot.joint_columns(v)),
    "site_names": ("site_ids", lambda env, v: env.sim.site_ids(v)),
    "geom_names": ("geom_ids", lambda env, v: env.sim.geom_ids(v)),
    "sensor_names": ("sensor_cols", lambda env, v: _sensor_columns(env, v)),
    "actuator_names": ("actuator_ids", lambda env, v: env.sim.actuator_ids(v)),
}
"""YAML parameter -> (the term's parameter, its resolver): a term configured with
``params.body_names`` is called with ``body_ids``, an int64 index tensor (see ``term_cfg``)."""

_YAML_KEY = {resolved: key for key, (resolved, _) in NAME_PARAMS.items()}
"""The term's parameter -> the YAML key that fills it (other parameters are their own key)."""


def resolve_callable(path: str, where: str) -> Callable:
    """Import ``"package.module:attr"``, ``"package.module.attr"`` or a short spelling
    (``managers.term_cfg.SHORT_PREFIXES``): a term (a function or class whose first parameter is
    ``env``) defined in one of :func:`~unilab_gpu.utils.imports.allowed_packages`.

    Args:
      where: the config key path, named in errors (e.g. ``rewards.upright.func``).

    Raises:
      ValueError: the module is not allowed (refused before it is imported), cannot be imported,
        lacks the name, or the name is not a term.
    """
    try:
        target = import_dotted(canonical_func(path))  # the short spelling of the project's terms too
    except RefusedPath as refused:
        raise ValueError(_refusal_message(refused, where)) from None
    allowed = allowed_packages()
    owner = getattr(target, "__module__", None)
    if not _is_term(target):
        raise ValueError(
            f"{where}: '{path}' is not a term: a term is a function f(env, **params) or a class built as "
            "cls(env, **params), with 'env' as its first parameter"
        )
    if not isinstance(owner, str) or not is_inside(owner, allowed):  # e.g. a library function a project module imports
        raise ValueError(f"{where}: '{path}' is defined in '{owner}', outside the modules terms may come from")
    return target


def _refusal_message(refused: RefusedPath, where: str) -> str:
    path, module_name = refused.path, refused.module_name
    if refused.reason == "syntax":
        return f"{where}: expected a dotted path such as 'unilab_gpu.envs.mdp.rewards.alive', got {path!r}"
    if refused.reason == "outside":
        return (
            f"{where}: '{path}' is outside the modules terms may come from ({', '.join(refused.allowed)}); to use "
            f"your own, list them in {TERM_MODULES_ENV}, e.g. {TERM_MODULES_ENV}={module_name.split('.')[0]}"
        )
    if refused.reason == "import":
        return f"{where}: cannot import module '{module_name}' of '{path}' ({refused.detail})"
    public = sorted(n for n in dir(refused.module) if not n.startswith("_"))
    return f"{where}: module '{module_name}' has no '{refused.attr}'; it defines {public}"


def _is_term(target: Any) -> bool:
    if not callable(target) or inspect.ismodule(target):
        return False
    try:
        parameters = list(inspect.signature(target).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return bool(parameters) and parameters[0].name == "env"


C = TypeVar("C", bound=TermCfg)


class Term(Generic[C]):
    """One configured term, ready for the hot path: ``term(env)`` and ``term.reset(env_ids)``
    (``Term[RewardTermCfg]``: a term whose ``cfg`` is a reward's, with its ``weight``)."""

    def __init__(self, name: str, cfg: C, env: EnvView, where: str, call_args: tuple[str, ...] = ()) -> None:
        """Args:
        call_args: names of the positional arguments passed after ``env`` on every call
          (events get ``env_ids`` or ``mask``), used to check the configured params.
        """
        self.name = name
        self.cfg = cfg
        target = resolve_callable(cfg.func, f"{where}.func")
        params = resolve_params(dict(cfg.params), env, f"{where}.params")
        self.instance: Any = None
        """The object of a class term (its state, ``reset``, a command's ``update``); None for a
        function term, which keeps no state."""
        if isinstance(target, type):  # inspect.isclass, which type checkers read as type[object]
            check_params(target, cfg.func, params, (), f"{where}.params")
            try:
                self.instance = target(env, **params)
            except ValueError as error:  # a class term checks its params: name where they are
                if type(error) is not ValueError:  # a typed error (a motion file's) names its own source
                    raise
                raise ValueError(f"{where}.params: {error}") from None
            self._fn: Callable[..., Any] = self.instance
            self._params: dict[str, Any] = {}
            self._reset = getattr(self.instance, "reset", None)
        else:
            check_params(target, cfg.func, params, call_args, f"{where}.params")
            self._fn = target
            self._params = params
            self._reset = None

    def __call__(self, env: EnvView, *args: Any) -> torch.Tensor:
        return self._fn(env, *args, **self._params)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Reset per-row state of a class term; ``env_ids`` is padded with ``num_envs``."""
        if self._reset is not None:
            self._reset(env_ids)


def resolve_params(params: dict[str, Any], env: EnvView, where: str) -> dict[str, Any]:
    """Replace ``*_names`` entries by int64 index tensors on the env's device (``NAME_PARAMS``)."""
    for key, (resolved, lookup) in NAME_PARAMS.items():
        if key in params:
            names = params.pop(key)
            try:
                ids = lookup(env, [names] if isinstance(names, str) else list(names))
            except (KeyError, ValueError) as error:
                raise type(error)(f"{where}.{key}: {error.args[0]}") from None
            params[resolved] = torch.tensor(ids, dtype=torch.int64, device=env.device)
    return params


def check_params(fn: Callable, path: str, params: dict[str, Any], call_args: tuple[str, ...], where: str) -> None:
    """Check ``params`` (resolved) against ``fn(env, *call_args, **params)``; errors name the YAML
    keys the user writes (``body_names``, not the ``body_ids`` it becomes) and how to fix them.

    Args:
      path: the configured ``func``, named in errors.
      where: the config key path of the params (``rewards.upright.params``).
    """
    takes = list(inspect.signature(fn).parameters.values())[1 + len(call_args) :]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes):
        return
    keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    named = [p for p in takes if p.kind in keyword]
    accepted = [_YAML_KEY.get(p.name, p.name) for p in named]
    for key in params:
        if key not in {p.name for p in named}:
            yaml_key = _YAML_KEY.get(key, key)
            becomes = f" (which becomes '{key}')" if yaml_key != key else ""
            raise ValueError(
                f"{where}: unexpected keyword '{yaml_key}'{becomes}: '{path}' accepts {accepted}; "
                f"remove '{where}.{yaml_key}' or correct its name"
            )
    for p in named:
        if p.default is inspect.Parameter.empty and p.name not in params:
            yaml_key = _YAML_KEY.get(p.name, p.name)
            becomes = f" (passed as '{p.name}')" if yaml_key != p.name else ""
            raise ValueError(
                f"{where}: missing '{yaml_key}'{becomes}, which '{path}' requires; set it in the task YAML "
                f"or add it with the override '+{where}.{yaml_key}=...'"
            )


def _sensor_columns(env: EnvView, names: list[str]) -> list[int]:
    columns: list[int] = []
    for sensor_id in env.sim.sensor_ids(names):
        cols = env.sim.sensor_slice(env.sim.sensor_names[sensor_id])
        columns.extend(range(cols.start, cols.stop))
    return columns
