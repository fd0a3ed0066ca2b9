"""Device normalization and the one-Warp-stream-per-torch-stream rule (CPU-runnable plumbing)."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch
import warp as wp

from unilab_gpu.sim import device as device_module
from unilab_gpu.sim.device import WarpStreams, resolve_device, set_warp_verbose, torch_stream_scope, warp_device


@pytest.mark.parametrize("spec", ["cpu", torch.device("cpu"), "auto", None, "AUTO"])
def test_cpu_spellings_resolve_to_the_cpu_without_a_gpu(spec, monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(spec) == torch.device("cpu")


@pytest.fixture
def two_gpus(monkeypatch):
    """torch believes in two CUDA devices, the current one being cuda:1."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("cuda", torch.device("cuda", 1)),  # the current device, with its index
        ("auto", torch.device("cuda", 1)),
        (None, torch.device("cuda", 1)),
        ("cuda:0", torch.device("cuda", 0)),
        (torch.device("cuda"), torch.device("cuda", 1)),
        (torch.device("cuda", 0), torch.device("cuda", 0)),
        ("cpu", torch.device("cpu")),
    ],
)
def test_every_cuda_spelling_resolves_to_an_indexed_device(two_gpus, spec, expected) -> None:
    device = resolve_device(spec)
    assert device == expected and (device.type == "cpu" or device.index is not None)
    # The comparison that made every step raise before: torch.device("cuda") != "cuda:0".
    assert torch.device("cuda") != torch.device("cuda", 0)


def test_a_missing_cuda_device_is_named(two_gpus) -> None:
    with pytest.raises(ValueError, match=r"'cuda:2' does not exist: torch sees 2 CUDA device\(s\), cuda:0..cuda:1"):
        resolve_device("cuda:2")


def test_cuda_without_a_gpu_and_unknown_devices_are_one_line_errors(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device 'cuda' requested but torch sees no CUDA device.*device=cpu"):
        resolve_device("cuda")
    with pytest.raises(ValueError, match="device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got 'mps'"):
        resolve_device("mps")
    with pytest.raises(ValueError, match="got 'gpu0'"):
        resolve_device("gpu0")


def _fake_torch_stream(index: int, handle: int) -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cuda", index), cuda_stream=handle)


def test_one_warp_stream_object_per_torch_stream() -> None:
    made = []

    def wrap(torch_stream):
        made.append(torch_stream)
        return object()

    streams = WarpStreams(wrap)
    a, b = _fake_torch_stream(0, 111), _fake_torch_stream(0, 222)
    first = streams.get(a)
    # A second call, and a fresh Python object for the same CUDA stream (torch hands out new
    # wrappers from current_stream()), give back the very same Warp object: Warp keys captures by it.
    assert streams.get(a) is first
    assert streams.get(_fake_torch_stream(0, 111)) is first
    assert streams.get(b) is not first
    assert streams.get(_fake_torch_stream(1, 111)) is not first  # same handle value, other device
    assert len(made) == 3 and len(streams) == 3


def test_cpu_scope_sets_warp_device_and_no_stream() -> None:
    cpu = warp_device("cpu")
    assert cpu.is_cpu
    with torch_stream_scope(cpu):
        assert wp.get_device().is_cpu
    assert len(device_module._WARP_STREAMS) == 0  # no CUDA stream wrapper was ever made on CPU


def test_warp_logs_follow_the_verbose_flag(monkeypatch) -> None:
    saved = wp.config.log_level
    try:
        set_warp_verbose(True)
        assert wp.config.log_level == wp.LOG_INFO
        set_warp_verbose(False)
        assert wp.config.log_level == wp.LOG_WARNING
        monkeypatch.setenv("UNILAB_VERBOSE", "1")
        set_warp_verbose()
        assert wp.config.log_level == wp.LOG_INFO
    finally:
        wp.config.log_level = saved


def test_quiet_warp_start_hides_the_native_driver_warning_on_a_cpu_only_machine() -> None:
    """Warp's C++ start-up prints a driver-missing warning without a CUDA driver; the quiet
    start mutes it, the verbose one keeps it (where this machine has no driver to find)."""
    code = "from unilab_gpu.sim.device import set_warp_verbose; set_warp_verbose({}); import warp; warp.init()"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    env.pop("UNILAB_VERBOSE", None)

    def stderr(verbose: bool) -> str:
        run = subprocess.run([sys.executable, "-c", code.format(verbose)], env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stderr

    assert "Warp CUDA warning" not in stderr(False)
    if ctypes.util.find_library("cuda") is None:
        assert "Warp CUDA warning" in stderr(True)


def test_cuda_scope_uses_the_cached_stream_and_never_reenters_a_current_one(monkeypatch) -> None:
    """Simulator calls inside a capture find the capture's Warp stream already current: entering it
    again would make the capturing stream wait on an event recorded outside the capture."""
    entered = []
    streams = WarpStreams(lambda torch_stream: object())
    torch_stream = _fake_torch_stream(1, 4242)
    monkeypatch.setattr(device_module, "_WARP_STREAMS", streams)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: torch_stream)
    capturing = {"now": False}
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capturing["now"])

    class Scoped:
        def __init__(self, what, **kwargs):
            self.what, self.kwargs = what, kwargs

        def __enter__(self):
            entered.append((self.what, self.kwargs))

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(wp, "ScopedStream", lambda stream, sync_enter=True: Scoped(stream, sync_enter=sync_enter))
    monkeypatch.setattr(wp, "ScopedDevice", lambda dev: Scoped("device"))
    gpu = SimpleNamespace(is_cuda=True, ordinal=1, stream=None)

    with torch_stream_scope(gpu):  # eager call: switch to torch's stream, ordered after Warp's own
        pass
    cached = streams.get(torch_stream)
    assert entered == [(cached, {"sync_enter": True})]
    capturing["now"] = True
    with torch_stream_scope(gpu):  # inside a capture that did not enter it: no cross-stream wait
        pass
    assert entered[-1] == (cached, {"sync_enter": False})
    gpu.stream = cached  # what CudaGraph does before the capture begins
    with torch_stream_scope(gpu):
        pass
    assert entered[-1] == ("device", {}) and len(streams) == 1
