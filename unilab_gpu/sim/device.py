"""Devices and streams: one normalized torch device, the matching Warp device, one Warp stream.

Every entry point of the project (env, simulator, capture, timers, trainer, bench, doctor, CLIs)
turns the device it is given into an *indexed* ``torch.device`` with :func:`resolve_device`, so
that ``"cuda"`` and ``"cuda:0"`` never compare unequal and ``cuda:N`` is honoured everywhere.

Warp launches go to torch's current stream through :func:`torch_stream_scope`. Warp keys an
active graph capture by the Python ``wp.Stream`` object (``device.captures[stream]``; the class
defines no ``__eq__``/``__hash__``), and a wrapper's destructor unregisters the CUDA stream from
Warp's native per-stream state. So the wrapper of a torch stream must be *one long-lived object*:
:func:`warp_stream` keeps one per torch stream for the life of the process (see
``warp/_src/context.py``: ``Stream.__del__``, ``capture_begin``, ``capture_while``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
import warp as wp

VERBOSE_ENV = "UNILAB_VERBOSE"
"""Environment variable that turns Warp's own log lines (init banner, module loads) back on."""


WARP_CUDA_OUTPUT_ENV = "UNILAB_WARP_CUDA_OUTPUT"
"""Environment variable that sets what Warp hands the CUDA driver: ``cubin`` (native code compiled
by NVRTC for the device's architecture) or ``ptx`` (the driver compiles it). Unset: Warp's own
choice, PTX whenever the driver is at least as new as Warp's CUDA toolkit. The GPU check sets
``cubin``, the path its bundle's self-built library was checked on."""


def apply_warp_cuda_output() -> None:
    """Set ``wp.config.cuda_output`` from :data:`WARP_CUDA_OUTPUT_ENV` (before any module loads)."""
    value = os.environ.get(WARP_CUDA_OUTPUT_ENV, "").strip()
    if not value:
        return
    if value not in ("cubin", "ptx"):
        raise ValueError(f"{WARP_CUDA_OUTPUT_ENV} must be 'cubin' or 'ptx' (or unset), got {value!r}")
    wp.config.cuda_output = value


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """The indexed torch device for ``spec``: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"``.

    ``"auto"`` (or ``None``) is the current CUDA device when torch sees one, else the CPU;
    ``"cuda"`` is the current CUDA device. The result always carries an index on CUDA.

    Raises:
      ValueError: not a CPU or CUDA device, or a CUDA device that does not exist; the message
        names the value and what is available.
    """
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == "auto"):
        spec = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {spec!r}") from error
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got '{device}'")
    if not torch.cuda.is_available():
        raise ValueError(
            f"device '{spec}' requested but torch sees no CUDA device (CUDA build: {torch.version.cuda or 'no'}); "
            "use device=cpu or device=auto"
        )
    count = torch.cuda.device_count()
    index = torch.cuda.current_device() if device.index is None else device.index
    if not 0 <= index < count:
        raise ValueError(f"device '{spec}' does not exist: torch sees {count} CUDA device(s), cuda:0..cuda:{count - 1}")
    return torch.device("cuda", index)


def verbose_requested(verbose: bool | None = None) -> bool:
    """``verbose`` as given, or for ``None`` whether ``UNILAB_VERBOSE`` is ``1``/``true``/``yes``/``on``."""
    if verbose is None:
        return os.environ.get(VERBOSE_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return verbose


def set_warp_verbose(verbose: bool | None = None) -> None:
    """Show Warp's log lines (``True``) or only its warnings (``False``).

    ``None`` reads ``UNILAB_VERBOSE`` (``1``/``true`` for verbose). Called before Warp
    initializes, this also hides its start-up banner; quiet on a machine where torch sees no CUDA
    device, it initializes Warp itself, once, muting the C++ driver-missing warning.
    (``wp.config.quiet`` no longer exists in Warp 1.19; ``wp.config.log_level`` governs both the
    banner and the module-load lines.)
    """
    verbose = verbose_requested(verbose)
    wp.config.log_level = wp.LOG_INFO if verbose else wp.LOG_WARNING
    if not verbose and not torch.cuda.is_available():
        _init_warp_without_native_stderr()


@functools.cache
def _init_warp_without_native_stderr() -> None:
    """Initialize Warp with file descriptor 2 muted; once per process (every simulator calls
    :func:`set_warp_verbose`, and muting fd 2 again would swallow other threads' output).

    Without a CUDA driver, Warp's C++ start-up prints a driver-missing warning with ``fprintf``
    (``warp/native/cuda_util.cpp``), which ``log_level`` does not govern. Where torch sees no CUDA
    device that line says nothing a CPU run needs; Python exceptions still reach the user.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            wp.init()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def warp_device(device: str | torch.device) -> wp.context.Device:
    """The Warp device for a torch device (normalized with :func:`resolve_device`)."""
    device = resolve_device(device)
    if device.type == "cpu":
        return wp.get_device("cpu")
    return wp.get_device(f"cuda:{device.index}")


class WarpStreams:
    """One long-lived Warp stream object per torch CUDA stream.

    Args:
      wrap: makes the Warp stream for a torch stream (``wp.stream_from_torch``; a test may pass
        a stand-in). The wrapper keeps its torch stream alive, so a handle is never reused
        while its entry exists.
    """

    def __init__(self, wrap: Callable[[Any], Any] | None = None) -> None:
        self._wrap = wrap or wp.stream_from_torch
        self._streams: dict[tuple[int, int], Any] = {}

    def get(self, torch_stream: Any) -> Any:
        """The Warp stream object for ``torch_stream``, the same object on every call."""
        key = (torch_stream.device.index, int(torch_stream.cuda_stream))
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = self._wrap(torch_stream)
        return stream

    def __len__(self) -> int:
        return len(self._streams)


_WARP_STREAMS = WarpStreams()


def warp_stream(torch_stream: torch.cuda.Stream) -> wp.Stream:
    """The process-wide Warp stream object for ``torch_stream`` (see the module docstring)."""
    return _WARP_STREAMS.get(torch_stream)


@contextlib.contextmanager
def torch_stream_scope(device: wp.context.Device) -> Iterator[None]:
    """Scope in which Warp launches go to ``device`` and, on CUDA, to torch's current stream.

    Sharing torch's stream is what lets one ``torch.cuda.graph`` capture Warp and torch work
    together, and it orders Warp kernels after the torch ops that produced their inputs without
    any event or synchronize. When that stream's Warp object is already current (a capture
    entered it before ``torch.cuda.graph`` began) nothing is switched: entering it again would
    make the capturing stream wait on an event recorded outside the capture.
    """
    if not device.is_cuda:
        with wp.ScopedDevice(device):
            yield
        return
    stream = warp_stream(torch.cuda.current_stream(device.ordinal))
    if device.stream is stream:
        with wp.ScopedDevice(device):
            yield
        return
    # Outside a capture, order this stream after Warp's previous one (allocations and copies
    # Warp issued there); during a capture such a wait would reach outside the graph.
    capturing = torch.cuda.is_current_stream_capturing()
    with wp.ScopedStream(stream, sync_enter=not capturing):
        yield
