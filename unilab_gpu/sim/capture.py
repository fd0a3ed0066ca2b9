"""Capture a callable that mixes torch ops and Warp/MJWarp launches into one CUDA graph.

The recipe follows Warp's own torch-interop capture test (``warp/tests/interop/test_torch.py``,
``test_torch_graph_torch_stream``) and MJWarp's graph tests:

1. Under ``torch.cuda.device(device)``, make a torch stream on that device for the capture and
   take its one long-lived Warp stream object (:func:`~unilab_gpu.sim.device.warp_stream`).
2. Warm ``fn`` up eagerly on that stream (Warp modules, ``torch.compile`` graphs, cuBLAS handles
   and MJWarp's lazily built kernels must all exist before capture).
3. Enter ``wp.ScopedStream`` on the Warp object, then torch's capture on the capture stream
   (``CUDAGraph.capture_begin`` in torch's ``"global"`` mode), so Warp's current stream is the
   capturing stream and entering it never records a wait inside the capture.
4. ``wp.capture_begin(stream=..., external=True, capture_mode=GLOBAL)``: Warp registers the
   capture torch started (``device.captures[stream]``), so its graph allocations (MJWarp's
   ``wp.full`` temporaries) and module retention follow the capture.
5. ``wp.capture_end`` returns a ``wp.Graph`` that retains the modules the capture used: kept alive
   as long as the torch graph. Its ``graph`` handle is torch's ``cudaGraph_t``, which torch owns
   (``CUDAGraph::capture_end`` destroys it after instantiation); it is cleared so that the Warp
   object's destructor never destroys it a second time.

**One capture, never paused.** torch routes the allocations of a capture to the graph's private
pool, and (torch >= 2.13) keeps the generator's per-capture RNG state, by the CUDA capture id it
read at ``capture_begin``. Warp's ``wp.capture_while``/``capture_if`` pause the capture
(``capture_pause``: ``cudaStreamEndCapture``) and resume it (``capture_resume``:
``cudaStreamBeginCaptureToGraph``). Whether the resumed capture has a new id is the driver's
business: Warp's comments call ids stable across pause/resume, CUDA's documentation of a new
capture sequence says otherwise. A new id sends later allocations out of the pool and breaks
later random draws on torch 2.13; the same id still leaves torch's capture with work it never
saw begin and end. So :class:`CudaGraph` refuses any capture that was paused, whatever the
driver did with the id: Warp's ``capture_pause`` stores the paused ``cudaGraph_t`` in the
``wp.Graph`` registered for the stream (``graph.graph``, ``None`` from ``capture_begin`` until
``capture_end``), and the id read right after ``capture_begin`` must equal the one read just
before ``capture_end``. Either sign raises :class:`CapturePausedError`, which names both ids. The
simulator keeps MJWarp off that path on CUDA (``opt.graph_conditional = False``: a fixed number
of solver iterations, no conditional nodes).

**Failure.** The caller's current stream is restored whatever happens. If ``fn`` fails inside
the capture but torch's ``capture_end`` succeeds, torch's allocator and generator have left
capture mode and the error propagates as it is (an eager fallback is safe). If ``capture_end``
itself fails inside CUDA, torch leaves its allocator routing to the dead capture and its
generator marked as capturing (torch 2.11: every later random draw on the device raises):
:class:`CaptureAbortedError` ends the process with one line instead of an eager fallback that
would run on that state.

MJWarp's own graphs are never launched inside ours: conditional nodes cannot be nested in a graph
that is itself replayed as a child. On CPU there is nothing to capture: callers run the same
callable directly (the simulator then replays physics from a Warp CPU graph of its own).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence

import torch
import warp as wp
from warp._src import context as warp_context

from unilab_gpu.sim.device import resolve_device, warp_device, warp_stream

TORCH_CAPTURE_MODE = "global"
"""torch's capture mode (``CUDAGraph.capture_begin``); Warp is told the same (``wp.CaptureMode.GLOBAL``)."""


class CaptureUnsupportedError(RuntimeError):
    """This device or driver cannot capture the step as one CUDA graph."""


class CapturePausedError(RuntimeError):
    """Something paused and resumed the capture (the id may or may not have changed); the graph
    was discarded (see the module docstring)."""


class CaptureAbortedError(SystemExit):
    """torch's ``capture_end`` failed inside CUDA: this process's CUDA state cannot be trusted.

    A ``SystemExit`` on purpose: ``except Exception`` fallbacks must not catch it.
    """


def capture_unsupported_reason(device: str | torch.device) -> str | None:
    """Why a CUDA graph of the step cannot be captured on ``device``, or ``None`` if it can."""
    device = resolve_device(device)
    if device.type != "cuda":
        return f"device '{device}' is not a CUDA device; the step runs without a CUDA graph"
    wp_dev = warp_device(device)
    if not wp.is_mempool_enabled(wp_dev):
        return (
            f"Warp's memory pool is disabled on {wp_dev}: MJWarp allocates temporaries during a step, "
            "which a CUDA graph capture can only do from a memory pool (wp.set_mempool_enabled)"
        )
    return None


def stream_capture_id(stream: wp.Stream) -> int:
    """The CUDA capture id of ``stream``'s active capture (``cuStreamGetCaptureInfo``), 0 if none.

    Read through Warp's native binding, the one Warp's own ``capture_begin`` and
    ``capture_resume`` use (``warp/_src/context.py``), with torch 2.11 and 2.13 alike.
    """
    return int(warp_context.runtime.core.wp_cuda_stream_get_capture_id(stream.cuda_stream))


def capture_registered_for(stream: wp.Stream) -> wp.Graph | None:
    """The ``wp.Graph`` Warp registered for ``stream``'s active capture (``capture_begin``), if any."""
    return stream.device.captures.get(stream)


def capture_was_paused(stream: wp.Stream, registered: wp.Graph | None) -> bool:
    """Whether Warp paused the capture it registered as ``registered`` on ``stream`` since then.

    ``capture_pause`` stores the paused ``cudaGraph_t`` in the registered graph (``graph.graph``)
    and ``capture_resume`` re-registers that same object under the resumed id; before
    ``capture_end`` an unpaused capture's graph has no handle. A capture that is no longer
    registered under that object was ended or replaced: paused too, as far as torch is concerned.
    """
    return registered is None or capture_registered_for(stream) is not registered or registered.graph is not None


class CudaGraph:
    """``fn`` captured once as a CUDA graph on ``device``, replayed by ``replay()``.

    Every tensor ``fn`` reads or writes must keep its address for the graph's lifetime: inputs are
    copied into persistent buffers before ``replay()``, outputs are read from persistent buffers
    after it. Replaying does not synchronize the host. The warm-up runs ``fn`` for real: callers
    that must not see its effects snapshot their state first (the env does).
    """

    def __init__(
        self,
        fn: Callable[[], None],
        device: str | torch.device,
        warmup: int = 2,
        generators: Sequence[torch.Generator] = (),
    ) -> None:
        """Warm ``fn`` up eagerly ``warmup`` times, then capture it (see the module docstring).

        ``generators`` are CUDA generators other than the device's default that ``fn`` draws from:
        they are registered with the graph (``CUDAGraph.register_generator_state``), so that each
        replay draws new numbers from them; torch registers the default generator itself.

        Raises:
          CaptureUnsupportedError: the device or driver cannot capture; the message says why.
          CapturePausedError: something paused and resumed the capture inside ``fn``.
          CaptureAbortedError: torch's ``capture_end`` failed (a ``SystemExit``: not recoverable).
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
            for generator in generators:
                self.graph.register_generator_state(generator)
            self.warp_graph: wp.Graph | None = None
            """Warp's record of the capture (the modules it used): kept alive with the graph."""
            self.capture_ids: tuple[int, int] = (0, 0)
            """The stream's capture id right after ``capture_begin`` and just before ``capture_end``."""
            self.paused = False
            """Whether Warp paused the capture inside ``fn`` (``capture_pause`` left its graph handle)."""
            gc_was_enabled = gc.isenabled()
            gc.disable()  # a collection during capture could free a tensor the graph records
            try:
                with wp.ScopedStream(wp_stream), torch.cuda.stream(self.stream):
                    self._capture(fn, wp_stream)
            finally:
                torch.cuda.set_stream(caller)  # torch.cuda.stream restores it too; this also covers its own failure
                if gc_was_enabled:
                    gc.enable()
            # The caller's later work is ordered after everything the capture stream was given.
            caller.wait_stream(self.stream)
        begin, end = self.capture_ids
        if self.paused or begin != end:
            raise CapturePausedError(
                f"the CUDA capture was paused and resumed inside the captured step (capture id {begin} after "
                f"capture_begin, {end} before capture_end; Warp's pause flag {self.paused}): e.g. Warp's "
                "capture_while, MJWarp's solver loop with opt.graph_conditional=True; torch's graph pool and RNG "
                "state follow one uninterrupted capture, so the graph was discarded"
            )

    def _capture(self, fn: Callable[[], None], wp_stream: wp.Stream) -> None:
        """torch's capture around Warp's around ``fn``, on the current (capture) stream; each ends in a ``finally``."""
        self.graph.capture_begin(capture_error_mode=TORCH_CAPTURE_MODE)
        try:
            begin = stream_capture_id(wp_stream)
            wp.capture_begin(
                stream=wp_stream, external=True, capture_mode=wp.CaptureMode.GLOBAL, force_module_load=False
            )
            registered = capture_registered_for(wp_stream)
            try:
                fn()
                self.capture_ids = (begin, stream_capture_id(wp_stream))
                self.paused = capture_was_paused(wp_stream, registered)
            finally:
                self.warp_graph = wp.capture_end(stream=wp_stream)
                self.warp_graph.graph = None  # torch's cudaGraph_t: torch destroys it, Warp must not
        finally:
            try:
                self.graph.capture_end()
            except Exception as error:
                raise CaptureAbortedError(
                    f"unilab-gpu: CUDA graph capture failed inside CUDA on {self.device} ({type(error).__name__}: "
                    f"{error}); torch's allocator and RNG state may still be in capture mode, so this process cannot "
                    "go on on this device: run again with capture=False (the step then runs eagerly)"
                ) from error

    def replay(self) -> None:
        """Launch the captured work on torch's current stream of the graph's device; no wait."""
        self.graph.replay()
