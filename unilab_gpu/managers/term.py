"""Binding a term config to an env: import the callable, resolve names, build class terms."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from unilab_gpu.managers.term_cfg import TermCfg

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv

# params suffix -> (resolved param name, resolver on the env)
_NAME_PARAMS = {
    "body_names": ("body_ids", lambda env, v: env.sim.body_ids(v)),
    "joint_names": ("joint_ids", lambda env, v: env.robot.joint_ids(v)),
    "site_names": ("site_ids", lambda env, v: env.sim.site_ids(v)),
    "geom_names": ("geom_ids", lambda env, v: env.sim.geom_ids(v)),
    "sensor_names": ("sensor_cols", lambda env, v: _sensor_columns(env, v)),
}


def resolve_callable(path: str, where: str) -> Callable:
    """Import ``"package.module:attr"`` or ``"package.module.attr"``.

    Args:
      where: the config key path, named in errors (e.g. ``rewards.upright.func``).
    """
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{where}: cannot import module '{module_name}' of '{path}' ({error})") from None
    if not hasattr(module, attr):
        public = sorted(n for n in dir(module) if not n.startswith("_"))
        raise ValueError(f"{where}: module '{module_name}' has no '{attr}'; it defines {public}")
    return getattr(module, attr)


class Term:
    """One configured term, ready for the hot path: ``term(env)`` and ``term.reset(env_ids)``."""

    def __init__(
        self, name: str, cfg: TermCfg, env: ManagerBasedRlEnv, where: str, call_args: tuple[str, ...] = ()
    ) -> None:
        """Args:
        call_args: names of the positional arguments passed after ``env`` on every call
          (events get ``env_ids`` or ``mask``), used to check the configured params.
        """
        self.name = name
        self.cfg = cfg
        target = resolve_callable(cfg.func, f"{where}.func")
        params = resolve_params(dict(cfg.params), env, f"{where}.params")
        if inspect.isclass(target):
            self._fn: Callable[..., Any] = target(env, **params)
            self._params: dict[str, Any] = {}
            self._reset = getattr(self._fn, "reset", None)
        else:
            _check_signature(target, params, call_args, f"{where}.params")
            self._fn = target
            self._params = params
            self._reset = None

    def __call__(self, env: ManagerBasedRlEnv, *args: Any) -> torch.Tensor:
        return self._fn(env, *args, **self._params)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Reset per-row state of a class term; ``env_ids`` is padded with ``num_envs``."""
        if self._reset is not None:
            self._reset(env_ids)

    @property
    def instance(self) -> Any:
        """The class-term object (or the plain function)."""
        return self._fn


def resolve_params(params: dict[str, Any], env: ManagerBasedRlEnv, where: str) -> dict[str, Any]:
    """Replace ``*_names`` entries by int64 index tensors on the env's device."""
    for key, (resolved, lookup) in _NAME_PARAMS.items():
        if key in params:
            names = params.pop(key)
            try:
                ids = lookup(env, [names] if isinstance(names, str) else list(names))
            except (KeyError, ValueError) as error:
                raise type(error)(f"{where}.{key}: {error.args[0]}") from None
            params[resolved] = torch.tensor(ids, dtype=torch.int64, device=env.device)
    return params


def _check_signature(fn: Callable, params: dict[str, Any], call_args: tuple[str, ...], where: str) -> None:
    signature = inspect.signature(fn)
    try:
        signature.bind(None, *call_args, **params)
    except TypeError as error:
        accepted = [p for p in list(signature.parameters)[1 + len(call_args) :]]
        raise ValueError(f"{where}: {error} (accepted: {accepted})") from None


def _sensor_columns(env: ManagerBasedRlEnv, names: list[str]) -> list[int]:
    columns: list[int] = []
    for sensor_id in env.sim.sensor_ids(names):
        cols = env.sim.sensor_slice(env.sim.sensor_names[sensor_id])
        columns.extend(range(cols.start, cols.stop))
    return columns
