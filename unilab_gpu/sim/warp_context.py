"""Run Warp launches on the same device and stream as PyTorch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
import warp as wp

wp.config.quiet = True


def warp_device(device: str | torch.device) -> wp.context.Device:
    """The Warp device for a torch device string (``"cpu"``, ``"cuda"``, ``"cuda:1"``)."""
    device = torch.device(device)
    if device.type == "cpu":
        return wp.get_device("cpu")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError(f"device '{device}' requested but torch sees no CUDA device")
        index = device.index if device.index is not None else torch.cuda.current_device()
        return wp.get_device(f"cuda:{index}")
    raise ValueError(f"device must be 'cpu' or 'cuda[:N]', got '{device}'")


@contextlib.contextmanager
def torch_stream_scope(device: wp.context.Device) -> Iterator[None]:
    """Scope in which Warp launches go to ``device`` and, on CUDA, to torch's current stream.

    Sharing torch's stream is what lets one ``torch.cuda.graph`` capture Warp and torch work
    together, and it orders Warp kernels after the torch ops that produced their inputs without
    any event or synchronize.
    """
    if device.is_cuda:
        stream = wp.stream_from_torch(torch.cuda.current_stream(device.ordinal))
        with wp.ScopedStream(stream):
            yield
    else:
        with wp.ScopedDevice(device):
            yield
