"""Physics alone: the env step's ``decimation`` substeps on the same worlds, nothing else."""

from __future__ import annotations

import time

import numpy as np
import torch

from unilab_gpu.sim.capture import CudaGraph
from unilab_gpu.sim.simulator import Simulator


class PhysicsTimer:
    """Times ``sim.step(substeps)`` call by call.

    On CUDA the calls are timed with events between them (read after one synchronize per
    :meth:`time` call), replayed from a CUDA graph of their own when ``capture`` is set; on CPU
    with ``perf_counter``. The worlds advance without the env's resets.
    """

    def __init__(self, sim: Simulator, substeps: int, capture: bool) -> None:
        self.sim = sim
        self.substeps = substeps
        self.cuda = sim.torch_device.type == "cuda"
        if self.cuda and capture:
            self._run = CudaGraph(self._step, sim.torch_device, warmup=2).replay
        else:
            self._run = self._step
            self._step()  # compiles kernels / records Warp's CPU graph on first use

    def _step(self) -> None:
        self.sim.step(self.substeps)

    def time(self, steps: int) -> np.ndarray:
        """Milliseconds per physics step, ``(steps,)``."""
        if self.cuda:
            device = self.sim.torch_device
            stream = torch.cuda.current_stream(device)
            events = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
            events[0].record(stream)
            for i in range(steps):
                self._run()
                events[i + 1].record(stream)
            torch.cuda.synchronize(device)
            return np.array([events[i].elapsed_time(events[i + 1]) for i in range(steps)])
        ms = np.empty(steps)
        for i in range(steps):
            start = time.perf_counter()
            self._run()
            ms[i] = (time.perf_counter() - start) * 1e3
        return ms
