"""Typed algorithm configs from plain mappings (``configs/algo/*.yaml``): every key known, every
value of its field's type, one line naming the key otherwise; and the presets' values that the
config dataclasses take as their defaults (:func:`preset_values`), so each value is written once."""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypeVar

from omegaconf import OmegaConf

from unilab_gpu.paths import CONFIGS_DIR


def check_field(ok: bool, name: str, expected: str, value: object) -> None:
    """Raise the one-line error of a bad algo key (``algo config: 'algo.<name>' must be ...``) unless ``ok``."""
    if not ok:
        raise ValueError(f"algo config: 'algo.{name}' must be {expected}, got {value!r}")


class Dataclass(Protocol):
    """Any dataclass type's instances (what :func:`dataclasses.fields` accepts)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


ConfigT = TypeVar("ConfigT", bound=Dataclass)


def config_from_dict(cls: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
    """Build the config dataclass ``cls`` (SAC's, FlashSAC's, PPO's) from a plain mapping (e.g.
    ``OmegaConf.to_container(cfg.algo)``), checking each value against the field's type first.

    Unknown keys are an error that names them, so a typo in a YAML override cannot be ignored.
    """
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown keys {unknown}; valid keys are {sorted(known)}")
    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        _check_type(name, hints[name], value)
    return cls(**values)


def _check_type(name: str, hint: Any, value: Any) -> None:
    """Raise naming ``name`` unless ``value`` fits ``hint`` (bool, int, float, str, tuple[...] of
    those); other annotations are left to the config's own checks."""
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not set(args) - {Ellipsis} <= set(_KINDS):
            return
        ok = isinstance(value, (list, tuple)) and all(
            _fits(args[0] if args[-1] is Ellipsis else args[min(i, len(args) - 1)], v) for i, v in enumerate(value)
        )
        expected = f"a list of {_KINDS[args[0]]}s"
    elif hint in _KINDS:
        ok, expected = _fits(hint, value), f"a {_KINDS[hint]}"
    else:
        return
    if not ok:
        raise ValueError(f"algo config: 'algo.{name}' must be {expected}, got {value!r}")


_KINDS = {bool: "boolean", int: "whole number", float: "finite number", str: "string"}


def _fits(hint: type, value: Any) -> bool:
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


@functools.cache
def preset_values(name: str) -> Mapping[str, Any]:
    """The keys of ``configs/algo/<name>.yaml`` with its Hydra defaults list followed (entries name
    presets of the same folder, optionally ``@_here_``; ``_self_`` marks where the file's own keys
    go), as ``unilab-train`` resolves them (tested). The config dataclasses take their defaults from
    here: a preset states each value once, beside its source. Lists stay lists."""
    values = OmegaConf.to_container(OmegaConf.load(CONFIGS_DIR / "algo" / f"{name}.yaml"))
    assert isinstance(values, dict)
    own = {str(key): value for key, value in values.items()}
    merged: dict[str, Any] = {}
    for entry in own.pop("defaults", ["_self_"]):
        merged.update(own if entry == "_self_" else preset_values(entry.partition("@")[0]))
    return merged
