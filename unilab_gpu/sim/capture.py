"""Capture a callable that mixes torch ops and Warp/MJWarp launches into one CUDA graph.

The recipe follows Warp's own torch-interop capture test (``warp/tests/interop/test_torch.py``,
``test_torch_graph_torch_stream``) and MJWarp's graph tests:

1. Under ``torch.cuda.device(device)``, make a torch stream on that device for the capture and
   take its one long-lived Warp stream object (:func:`~unilab_gpu.sim.device.warp_stream`).
2. Warm ``fn`` up eagerly on that stream (Warp modules, ``torch.compile`` graphs, cuBLAS handles
   and MJWarp's lazily built kernels must all exist before capture).
3. Enter ``wp.ScopedStream`` on the Warp object *before* ``torch.cuda.graph(stream=...)`` begins,
   so Warp's current stream is the capturing stream and entering it never records a wait inside
   the capture.
4. Inside, ``wp.capture_begin(stream=..., external=True, capture_mode=GLOBAL)``: Warp registers
   the capture torch started (``device.captures[stream]``), so MJWarp's ``wp.capture_while``
   solver loop becomes conditional graph nodes instead of a host loop with a synchronize, and
   Warp resumes the capture after each conditional node in torch's own mode (``"global"``).
5. ``wp.capture_end`` returns a ``wp.Graph`` that holds the modules and the graph allocations the
   capture used: it is kept alive as long as the torch graph.

MJWarp's own graphs are never launched inside ours: conditional nodes cannot be nested in a graph
that is itself replayed as a child. On CPU there is nothing to capture: callers run the same
callable directly (the simulator then replays physics from a Warp CPU graph of its own).
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import torch
import warp as wp

from unilab_gpu.sim.device import resolve_device, warp_device, warp_stream

MIN_DRIVER = (12, 4)
"""CUDA driver version that introduced the conditional graph nodes MJWarp's solver loop needs."""

TORCH_CAPTURE_MODE = "global"
"""``torch.cuda.graph``'s capture mode; Warp is told the same (``wp.CaptureMode.GLOBAL``)."""


class CaptureUnsupportedError(RuntimeError):
    """This device or driver cannot capture the step as one CUDA graph."""


def capture_unsupported_reason(device: str | torch.device) -> str | None:
    """Why a CUDA graph of the step cannot be captured on ``device``, or ``None`` if it can."""
    device = resolve_device(device)
    if device.type != "cuda":
        return f"device '{device}' is not a CUDA device; the step runs without a CUDA graph"
    wp_dev = warp_device(device)
    driver = wp.get_cuda_driver_version()
    if driver is None or tuple(driver) < MIN_DRIVER or not wp.is_conditional_graph_supported():
        found = "none" if driver is None else ".".join(map(str, driver))
        return (
            f"CUDA driver {found} < {MIN_DRIVER[0]}.{MIN_DRIVER[1]} (or Warp built without conditional graph "
            "support): MJWarp's solver loop needs conditional graph nodes; the step runs eagerly"
        )
    if not wp.is_mempool_enabled(wp_dev):
        return (
            f"Warp's memory pool is disabled on {wp_dev}: MJWarp allocates temporaries during a step, "
            "which a CUDA graph capture can only do from a memory pool (wp.set_mempool_enabled)"
        )
    return None


class CudaGraph:
    """``fn`` captured once as a CUDA graph on ``device``, replayed by ``replay()``.

    Every tensor ``fn`` reads or writes must keep its address for the graph's lifetime: inputs are
    copied into persistent buffers before ``replay()``, outputs are read from persistent buffers
    after it. Replaying does not synchronize the host. The warm-up runs ``fn`` for real: callers
    that must not see its effects snapshot their state first (the env does).
    """

    def __init__(self, fn: Callable[[], None], device: str | torch.device, warmup: int = 2) -> None:
        """Warm ``fn`` up eagerly ``warmup`` times, then capture it (see the module docstring).

        Raises:
          CaptureUnsupportedError: the device or driver cannot capture; the message says why.
        """
        reason = capture_unsupported_reason(device)
        if reason is not None:
            raise CaptureUnsupportedError(reason)
        self.device = resolve_device(device)
        with torch.cuda.device(self.device):
            self.stream = torch.cuda.Stream(self.device)
            """The torch stream the graph was captured on (one per graph, on its device)."""
            wp_stream = warp_stream(self.stream)
            caller = torch.cuda.current_stream(self.device)
            self.stream.wait_stream(caller)
            with wp.ScopedStream(wp_stream), torch.cuda.stream(self.stream):
                for _ in range(warmup):
                    fn()
            caller.wait_stream(self.stream)
            torch.cuda.synchronize(self.device)

            self.graph = torch.cuda.CUDAGraph()
            self.warp_graph: wp.Graph | None = None
            """Warp's record of the capture (modules, graph allocations): kept alive with the graph."""
            gc_was_enabled = gc.isenabled()
            gc.disable()  # a collection during capture could free a tensor the graph records
            try:
                with (
                    wp.ScopedStream(wp_stream),
                    torch.cuda.graph(self.graph, stream=self.stream, capture_error_mode=TORCH_CAPTURE_MODE),
                ):
                    wp.capture_begin(
                        stream=wp_stream, external=True, capture_mode=wp.CaptureMode.GLOBAL, force_module_load=False
                    )
                    try:
                        fn()
                    finally:
                        self.warp_graph = wp.capture_end(stream=wp_stream)
            finally:
                if gc_was_enabled:
                    gc.enable()

    def replay(self) -> None:
        """Launch the captured work on torch's current stream of the graph's device; no wait."""
        self.graph.replay()
