"""Capture a callable that mixes torch ops and Warp/MJWarp launches into one CUDA graph.

The callable runs once under ``torch.cuda.graph`` on torch's capture stream; Warp is told about
the externally started capture (``wp.capture_begin(external=True)``) so that MJWarp's solver loop,
written with ``wp.capture_while``, is recorded as conditional graph nodes instead of a host loop.
MJWarp's own graphs are never launched inside ours: conditional nodes cannot be nested in a
graph that is itself replayed as a child.

On CPU there is nothing to capture: callers run the same callable directly (the simulator then
replays physics from a Warp CPU graph of its own).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch
import warp as wp

from unilab_gpu.sim.warp_context import warp_device

MIN_DRIVER = (12, 4)
"""CUDA driver version that introduced the conditional graph nodes MJWarp's solver loop needs."""


class CaptureUnsupportedError(RuntimeError):
    """This device or driver cannot capture the step as one CUDA graph."""


def capture_unsupported_reason(device: str | torch.device) -> str | None:
    """Why a CUDA graph of the step cannot be captured on ``device``, or ``None`` if it can."""
    device = torch.device(device)
    if device.type != "cuda":
        return f"device '{device}' is not a CUDA device; the step runs without a CUDA graph"
    wp_dev = warp_device(device)
    driver = wp.get_cuda_driver_version()
    if driver is None or tuple(driver) < MIN_DRIVER or not wp.is_conditional_graph_supported():
        found = "none" if driver is None else ".".join(map(str, driver))
        return (
            f"CUDA driver {found} < {MIN_DRIVER[0]}.{MIN_DRIVER[1]}: MJWarp's solver loop needs conditional "
            "graph nodes; run without capture (or with model.opt.graph_conditional=False)"
        )
    if not wp.is_mempool_enabled(wp_dev):
        return (
            f"Warp's memory pool is disabled on {wp_dev}: MJWarp allocates temporaries during a step, "
            "which a CUDA graph capture can only do from a memory pool (wp.set_mempool_enabled)"
        )
    return None


class CudaGraph:
    """``fn`` captured once as a CUDA graph, replayed by ``replay()``.

    Every tensor ``fn`` reads or writes must keep its address for the graph's lifetime: inputs are
    copied into persistent buffers before ``replay()``, outputs are read from persistent buffers
    after it. Replaying does not synchronize the host.
    """

    def __init__(self, fn: Callable[[], None], device: str | torch.device, warmup: int = 2) -> None:
        """Warm ``fn`` up eagerly ``warmup`` times (it must be safe to run), then capture it.

        Raises:
          CaptureUnsupportedError: the device or driver cannot capture; the message says why.
        """
        reason = capture_unsupported_reason(device)
        if reason is not None:
            raise CaptureUnsupportedError(reason)
        self.device = torch.device(device)
        self._wp_device = warp_device(self.device)
        # Warm-up compiles Warp modules, torch.compile graphs and cuBLAS handles, none of which
        # may happen during capture. It runs on a side stream as torch.cuda.graph expects.
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)

        self.graph = torch.cuda.CUDAGraph()
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a collection during capture could free a tensor the graph records
        try:
            with torch.cuda.graph(self.graph):
                stream = wp.stream_from_torch(torch.cuda.current_stream(self.device))
                wp.capture_begin(stream=stream, external=True)
                try:
                    fn()
                finally:
                    wp.capture_end(stream=stream)
        finally:
            if gc_was_enabled:
                gc.enable()

    def replay(self) -> None:
        """Launch the captured work on torch's current stream; returns without waiting."""
        self.graph.replay()
