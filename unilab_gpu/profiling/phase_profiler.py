"""True per-phase timing of the env step, on the device's own clock.

The env's normal step graph has no timing in it. The profiler runs a *variant* of the step,
``env.run_step_body(marker)``, whose ``marker(phase)`` stamps the end of each phase of
``STEP_PHASES``. On CUDA with capture, a window of steps is captured as one CUDA graph with
one set of timing events per step (see ``phase_clock``), so the profiled steps run as the
captured step does, kernels and all, and the host waits for the device once per window.
Profiling off costs the normal step nothing.

Each window of profiled steps is followed by a window of real ``env.step`` calls and a window
of physics alone on the same worlds, so that load changing on a shared machine affects all
three alike and their ratios stay meaningful.

Example (in a notebook)::

    env = make_env("g1_stand", num_envs=64)
    env.reset()
    profile = PhaseProfiler(env).run(steps=200)
    print(profile.summary())
    profile.plot()
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import torch

from unilab_gpu.envs.env_step import STEP_PHASES
from unilab_gpu.profiling.phase_clock import make_phase_clock
from unilab_gpu.profiling.phase_profile import PhaseProfile
from unilab_gpu.profiling.physics_timer import PhysicsTimer
from unilab_gpu.profiling.step_timer import StepTimer
from unilab_gpu.sim.capture import CudaGraph, capture_unsupported_reason

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


class PhaseProfiler:
    """Times each phase of ``env``'s step, the real step and physics alone.

    Args:
      env: a built env on which ``reset()`` has been called.
      window: steps per measurement window (per captured graph on CUDA); the host reads the
        clocks once per window.
      capture: on CUDA, capture each window of profiled steps (and the physics-only step) as a
        CUDA graph (default: when the device supports it). Ignored on CPU. The real
        ``env.step`` runs however the env was built.
      compiled: whether the env's phases are ``torch.compile``d, only to label the result
        (default: detected from the env).
    """

    def __init__(
        self, env: ManagerBasedRlEnv, window: int = 10, capture: bool | None = None, compiled: bool | None = None
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1 step, got {window}")
        self.env = env
        self.window = window
        supported = capture_unsupported_reason(env.device) is None
        self.capture = supported if capture is None else (capture and supported)
        # The env keeps no compile flag; a compiled phase is a wrapper, not the bound method.
        self.compiled = env.compiled if compiled is None else compiled

    def run(self, steps: int = 200, actions: torch.Tensor | None = None, warmup: int = 3) -> PhaseProfile:
        """Profile ``steps`` steps of each kind (rounded up to whole windows, then cut).

        Args:
          actions: ``(num_envs, action_dim)`` held for every step (default zeros).
          warmup: untimed real steps first (compilation, Warp's CPU graph); on CUDA with
            capture the profiling graph's own warm-up runs too.
        """
        if steps < 1:
            raise ValueError(f"steps must be >= 1, got {steps}")
        env = self.env
        if actions is None:
            actions = torch.zeros(env.num_envs, env.action_dim, device=env.device)
        real = StepTimer(env, actions)
        for _ in range(warmup):
            env.step(actions)
        clock = make_phase_clock(STEP_PHASES, self.window, env.device)

        def window_of_steps() -> None:
            for slot in range(self.window):
                clock.start(slot)
                env.run_step_body(clock.marker(slot))

        # env.step left the actions in the env's buffer; the profiled variant reads them there.
        run_window = CudaGraph(window_of_steps, env.device, warmup=1).replay if self.capture else window_of_steps
        physics = PhysicsTimer(env.sim, env.cfg.decimation, self.capture)
        phase_ms, env_step_ms, physics_ms = [], [], []
        for _ in range(math.ceil(steps / self.window)):
            env_step_ms.append(real.time(self.window))
            run_window()
            phase_ms.append(clock.read())
            physics_ms.append(physics.time(self.window))
        return PhaseProfile(
            phases=STEP_PHASES,
            phase_ms=np.concatenate(phase_ms)[:steps],
            env_step_ms=np.concatenate(env_step_ms)[:steps],
            physics_only_ms=np.concatenate(physics_ms)[:steps],
            resets_per_step=real.resets_per_step(),
            num_envs=env.num_envs,
            device=str(env.device),
            mode="+".join(p for p, on in (("compiled", self.compiled), ("captured", self.capture)) if on) or "eager",
        )
