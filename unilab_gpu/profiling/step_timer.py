"""Wall time of the real ``env.step`` (the captured graph on CUDA) and the rows it resets."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


class StepTimer:
    """Times ``env.step(actions)`` call by call and counts the rows each step resets.

    On CUDA each step lies between a pair of timing events, read after one synchronize per
    :meth:`time` call; on CPU between ``perf_counter`` calls. Reset rows are summed on the
    device after each step, outside the timed interval, and read only by :meth:`resets_per_step`.
    """

    def __init__(self, env: ManagerBasedRlEnv, actions: torch.Tensor) -> None:
        self.env = env
        self.actions = actions
        self._resets = torch.zeros((), dtype=torch.int64, device=env.device)
        self._steps = 0

    def time(self, steps: int) -> np.ndarray:
        """Milliseconds per ``env.step``, ``(steps,)``."""
        env, mask = self.env, self.env.reset_rows.reset_mask
        if env.device.type == "cuda":
            stream = torch.cuda.current_stream(env.device)  # the env's device, not the current one
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
            for start, end in zip(starts, ends, strict=True):
                start.record(stream)
                env.step(self.actions)
                end.record(stream)
                self._resets.add_(mask.sum())
            torch.cuda.synchronize(env.device)
            ms = np.array([start.elapsed_time(end) for start, end in zip(starts, ends, strict=True)])
        else:
            ms = np.empty(steps)
            for i in range(steps):
                begin = time.perf_counter()
                env.step(self.actions)
                ms[i] = (time.perf_counter() - begin) * 1e3
                self._resets.add_(mask.sum())
        self._steps += steps
        return ms

    def resets_per_step(self) -> float:
        """Mean rows reset per timed step (reads the device counter: call after timing)."""
        return int(self._resets) / max(self._steps, 1)
