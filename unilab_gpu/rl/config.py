"""Algorithm configurations; field names match the keys of ``configs/algo/{sac,flashsac}.yaml``.

Defaults are the G1 motion-tracking settings. Values that the papers fix are cited in the YAML
comments; the rest were chosen for 4096 parallel envs on one GPU.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar


@dataclass
class OffPolicyConfig:
    """Settings shared by SAC and FlashSAC (replay, schedule, optimisation, temperature).

    ``batch_size``, ``buffer_capacity_per_env``, ``final_obs_fraction``, ``warmup_steps`` and
    ``updates_per_step`` are read by the training loop; the agents read the rest.
    """

    batch_size: int = 8192
    buffer_capacity_per_env: int = 1024
    final_obs_fraction: float = 0.125
    warmup_steps: int = 64
    updates_per_step: int = 4
    gamma: float = 0.99
    n_step: int = 1
    tau: float = 0.1
    learning_rate: float = 3e-4
    learning_rate_end: float = 3e-4
    learning_rate_decay_steps: int = 100_000
    """Updates over which the cosine schedule decays; ``0`` in a preset: the whole run
    (``unilab-train`` sets it from ``total_env_steps``, see :func:`run_updates`)."""
    adam_betas: tuple[float, float] = (0.9, 0.95)
    weight_decay: float = 0.001
    max_grad_norm: float = 0.0
    actor_update_period: int = 1
    num_atoms: int = 101
    v_min: float = -20.0
    v_max: float = 20.0
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    alpha_init: float = 0.001
    target_entropy_ratio: float = 1.0
    compile: bool = True

    def __post_init__(self) -> None:
        self.adam_betas = tuple(self.adam_betas)  # YAML gives a list
        _check(self.batch_size >= 1, "batch_size", ">= 1", self.batch_size)
        _check(self.n_step >= 1, "n_step", ">= 1", self.n_step)
        _check(
            self.buffer_capacity_per_env > self.n_step,
            "buffer_capacity_per_env",
            f"> n_step ({self.n_step})",
            self.buffer_capacity_per_env,
        )
        _check(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]", self.gamma)
        _check(0.0 < self.tau <= 1.0, "tau", "in (0, 1]", self.tau)
        _check(self.num_atoms >= 2, "num_atoms", ">= 2", self.num_atoms)
        _check(self.v_max > self.v_min, "v_max", f"> v_min ({self.v_min})", self.v_max)
        low = self.log_std_min
        _check(self.log_std_max > low, "log_std_max", f"> log_std_min ({low})", self.log_std_max)
        _check(self.actor_update_period >= 1, "actor_update_period", ">= 1", self.actor_update_period)
        _check(self.updates_per_step >= 1, "updates_per_step", ">= 1", self.updates_per_step)
        _check(self.alpha_init > 0, "alpha_init", "> 0", self.alpha_init)
        _check(self.max_grad_norm >= 0, "max_grad_norm", ">= 0 (0 disables clipping)", self.max_grad_norm)
        _check(len(self.adam_betas) == 2, "adam_betas", "two numbers", self.adam_betas)


@dataclass
class SacConfig(OffPolicyConfig):
    """FastSAC-style SAC: LayerNorm MLPs, C51 critics, observation normalisation."""

    name: str = "sac"
    actor_hidden_dims: tuple[int, ...] = (512, 256, 128)
    critic_hidden_dims: tuple[int, ...] = (768, 384, 192)
    normalize_obs: bool = True
    obs_norm_clip: float = 10.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self.actor_hidden_dims = tuple(self.actor_hidden_dims)
        self.critic_hidden_dims = tuple(self.critic_hidden_dims)
        _check(len(self.actor_hidden_dims) > 0, "actor_hidden_dims", "at least one layer", self.actor_hidden_dims)
        _check(len(self.critic_hidden_dims) > 0, "critic_hidden_dims", "at least one layer", self.critic_hidden_dims)


@dataclass
class FlashSacConfig(OffPolicyConfig):
    """FlashSAC: BatchNorm residual networks, unit-norm weights, reward scaling, held noise."""

    name: str = "flashsac"
    batch_size: int = 2048
    buffer_capacity_per_env: int = 256
    updates_per_step: int = 2
    n_step: int = 1
    tau: float = 0.01
    learning_rate: float = 3e-4
    learning_rate_end: float = 1.5e-4
    adam_betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    actor_update_period: int = 2
    v_min: float = -5.0
    v_max: float = 5.0
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    alpha_init: float = 0.01
    target_entropy_ratio: float = 0.5
    actor_hidden_dim: int = 128
    actor_num_blocks: int = 2
    critic_hidden_dim: int = 256
    critic_num_blocks: int = 2
    reward_g_max: float = 5.0
    noise_zeta_exponent: float = 2.0
    noise_max_length: int = 16
    batch_norm_momentum: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        _check(self.reward_g_max > 0, "reward_g_max", "> 0", self.reward_g_max)
        _check(0.0 < self.batch_norm_momentum <= 1.0, "batch_norm_momentum", "in (0, 1]", self.batch_norm_momentum)
        _check(self.noise_max_length >= 1, "noise_max_length", ">= 1", self.noise_max_length)


def _check(ok: bool, name: str, expected: str, value: object) -> None:
    if not ok:
        raise ValueError(f"algo config: '{name}' must be {expected}, got {value!r}")


ConfigT = TypeVar("ConfigT", bound=OffPolicyConfig)


def config_from_dict(cls: type[ConfigT], values: Mapping[str, Any]) -> ConfigT:
    """Build ``cls`` from a plain mapping (e.g. ``OmegaConf.to_container(cfg.algo)``).

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


def steps_before_updates(warmup_steps: int, n_step: int) -> int:
    """Env steps in replay before the trainer's first update: the warm-up, and at least one full
    n-step window with its successor observation."""
    return max(warmup_steps, n_step + 1)


def run_updates(cfg: OffPolicyConfig, iterations: int) -> int:
    """Gradient updates of a run of ``iterations`` (from :func:`steps_before_updates` on), at least 1."""
    first = steps_before_updates(cfg.warmup_steps, cfg.n_step)
    return max(1, (iterations - first + 1) * cfg.updates_per_step)
