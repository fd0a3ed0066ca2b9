"""Faults a real robot adds, injected where the robot has them (a robustness test, never a policy edit).

:class:`Faults` names them; :class:`FaultInjector` is their state in one :class:`~.controller.Controller`,
which calls it at three points of its loop:

- state path, encoder bias: while the observation is read, the observed joints' ``qpos`` read
  ``q + encoder_bias`` (:meth:`FaultInjector.encoders`), as a miscalibrated encoder reports them;
  every term that reads joint positions sees the same biased angle, nothing else changes;
- state path, observation noise: each observation term gets ``noise_scale`` times the noise its
  training added (metadata ``noise``: uniform ``[low, high]`` or Gaussian ``std``), drawn afresh
  every control step before the term's clip and scale, as training drew it (:meth:`FaultInjector.add_noise`);
- command path, latency: the joint targets reach the actuators ``delay_steps`` control steps late
  (:meth:`FaultInjector.command`); at an episode's start the line holds that step's first targets,
  so a delayed robot holds its first command until the line fills.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from .policy_file import DeploymentError

MAX_DELAY_STEPS = 50
"""The longest latency a fault may add, control steps (1 s at 50 Hz)."""


@dataclass(frozen=True)
class Faults:
    """The faults of one run; the defaults inject none.

    Args:
      delay_steps: control steps between a target's computation and its arrival at the actuators.
      encoder_bias: rad added to every observed joint position (a number), or one per actuated
        joint (a sequence in the metadata's ``joint_names`` order).
      noise_scale: multiple of the training observation noise added to the observation.
      seed: of the noise draws.
    """

    delay_steps: int = 0
    encoder_bias: float | Sequence[float] = 0.0
    noise_scale: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        delay = self.delay_steps
        if isinstance(delay, bool) or not isinstance(delay, (int, np.integer)) or not 0 <= delay <= MAX_DELAY_STEPS:
            raise DeploymentError(f"faults: delay_steps must be an integer in [0, {MAX_DELAY_STEPS}], got {delay!r}")
        bias = np.asarray(self.encoder_bias, dtype=np.float64)
        if bias.ndim > 1 or not np.all(np.isfinite(bias)):
            raise DeploymentError(
                f"faults: encoder_bias must be a finite number or one per joint, got {self.encoder_bias!r}"
            )
        if not (
            isinstance(self.noise_scale, (int, float)) and math.isfinite(self.noise_scale) and self.noise_scale >= 0
        ):
            raise DeploymentError(f"faults: noise_scale must be a finite number >= 0, got {self.noise_scale!r}")

    def report(self) -> dict[str, Any] | None:
        """What a run's report says about its faults: ``None`` without any, else their levels."""
        bias = np.asarray(self.encoder_bias, dtype=np.float64)
        if self.delay_steps == 0 and not np.any(bias) and self.noise_scale == 0:
            return None
        return {
            "delay_steps": int(self.delay_steps),
            "encoder_bias_rad": float(bias) if bias.ndim == 0 else bias.tolist(),
            "noise_scale": float(self.noise_scale),
            "noise_seed": self.seed,
        }


class FaultInjector:
    """The state of :class:`Faults` in one controller: the target delay line and the noise generator.

    Args:
      faults: what to inject.
      joint_qpos: qpos addresses of the robot's joints, ``(J,)`` (the metadata's ``joint_names``).
    """

    def __init__(self, faults: Faults, joint_qpos: np.ndarray) -> None:
        self.faults = faults
        self.joint_qpos = np.asarray(joint_qpos, dtype=np.int64)
        bias = np.asarray(faults.encoder_bias, dtype=np.float64)
        if bias.ndim == 1 and bias.shape != self.joint_qpos.shape:
            raise DeploymentError(
                f"faults: encoder_bias has {bias.shape[0]} values, the robot has {self.joint_qpos.shape[0]} joints"
            )
        self.bias = np.broadcast_to(bias, self.joint_qpos.shape).copy()
        """rad added to each joint's reading, ``(J,)``."""
        self.rng = np.random.default_rng(faults.seed)
        self._line: list[np.ndarray] = []
        """The targets computed, newest last: at most ``delay_steps + 1``."""

    def reset(self) -> None:
        """A new episode: the delay line is empty (its first target fills it)."""
        self._line.clear()

    @contextlib.contextmanager
    def encoders(self, data: mujoco.MjData) -> Iterator[None]:
        """Within the block, the joints' ``data.qpos`` read ``q + bias``; restored after it."""
        if not np.any(self.bias):
            yield
            return
        true = data.qpos[self.joint_qpos].copy()
        data.qpos[self.joint_qpos] = true + self.bias
        try:
            yield
        finally:
            data.qpos[self.joint_qpos] = true

    def add_noise(self, term: dict[str, Any], value: np.ndarray) -> np.ndarray:
        """``value`` ``(dim,)`` of observation term ``term`` plus ``noise_scale`` times one draw of
        its training noise (``value`` itself where the term had none or the scale is 0)."""
        scale, spec = self.faults.noise_scale, term.get("noise")
        if scale == 0 or spec is None:
            return value
        if spec.get("kind", "uniform") == "uniform":
            return value + scale * self.rng.uniform(float(spec["low"]), float(spec["high"]), value.shape)
        return value + scale * float(spec["std"]) * self.rng.standard_normal(value.shape)

    def command(self, target: np.ndarray) -> np.ndarray:
        """The targets that reach the actuators now, given those computed now ``(A,)``: the ones
        computed ``delay_steps`` control steps ago (the first ones while the line fills)."""
        delay = self.faults.delay_steps
        if delay == 0:
            return target
        if not self._line:
            self._line = [target.copy()] * delay
        self._line.append(target.copy())
        return self._line.pop(0)
