"""Clocks that take a timestamp at each phase boundary of a step, for a window of steps.

Both clocks hold one row of timestamps per step of a window (a ring reused window after
window) and are read once per window:

- :class:`CpuPhaseClock` stamps ``time.perf_counter`` at each mark. On CPU every torch op and
  Warp launch runs synchronously, so the host clock is the device clock.
- :class:`CudaPhaseClock` records a pre-created CUDA event at each mark. The events are
  ``external=True``: recorded while a CUDA graph is being captured they become event-record
  nodes of the graph (plain events would turn into cross-stream dependencies and record
  nothing), so every replay stamps the GPU's own time at each phase boundary. Reading waits for
  the device once per window. Timing on the GPU timeline attributes time to the phase whose
  kernels ran, unlike host timers, which blame whichever phase first waits for the queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import torch


class CpuPhaseClock:
    """``time.perf_counter`` stamps, ``(window, 1 + num_phases)``."""

    def __init__(self, phases: Sequence[str], window: int) -> None:
        self.phases = tuple(phases)
        self._column = {phase: i + 1 for i, phase in enumerate(self.phases)}
        self._stamps = np.zeros((window, len(self.phases) + 1))

    def start(self, slot: int) -> None:
        """Stamp the start of the step in row ``slot``."""
        self._stamps[slot, 0] = time.perf_counter()

    def marker(self, slot: int) -> Callable[[str], None]:
        """The ``marker(phase)`` callback that stamps the end of ``phase`` in row ``slot``."""
        row, column = self._stamps[slot], self._column

        def mark(phase: str) -> None:
            row[column[phase]] = time.perf_counter()

        return mark

    def read(self) -> np.ndarray:
        """Milliseconds per phase, ``(window, num_phases)``."""
        return np.diff(self._stamps, axis=1) * 1e3


class CudaPhaseClock:
    """Timing CUDA events, ``(window, 1 + num_phases)``, recorded on ``device``'s current stream."""

    def __init__(self, phases: Sequence[str], window: int, device: torch.device) -> None:
        self.phases = tuple(phases)
        self.device = device
        self._column = {phase: i + 1 for i, phase in enumerate(self.phases)}
        # Created up front: an event must exist before a capture records it into the graph.
        self._events = [
            [torch.cuda.Event(enable_timing=True, external=True) for _ in range(len(self.phases) + 1)]
            for _ in range(window)
        ]

    def start(self, slot: int) -> None:
        self._events[slot][0].record(torch.cuda.current_stream(self.device))

    def marker(self, slot: int) -> Callable[[str], None]:
        row, column, device = self._events[slot], self._column, self.device

        def mark(phase: str) -> None:
            # On the clock's device's current stream (the capturing one during a capture): a
            # bare record() would time the current device's stream, idle for a cuda:N env.
            row[column[phase]].record(torch.cuda.current_stream(device))

        return mark

    def read(self) -> np.ndarray:
        """Milliseconds per phase, ``(window, num_phases)``; waits for the device once."""
        torch.cuda.synchronize(self.device)
        return np.array([[row[i].elapsed_time(row[i + 1]) for i in range(len(row) - 1)] for row in self._events])


PhaseClock = CpuPhaseClock | CudaPhaseClock


def make_phase_clock(phases: Sequence[str], window: int, device: torch.device) -> PhaseClock:
    """The clock for ``device``: CUDA events on a CUDA device, ``perf_counter`` otherwise."""
    if window < 1:
        raise ValueError(f"window must be >= 1 step, got {window}")
    if device.type == "cuda":
        return CudaPhaseClock(phases, window, device)
    return CpuPhaseClock(phases, window)
