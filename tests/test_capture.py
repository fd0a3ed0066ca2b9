"""CUDA capture: support detection runs everywhere; capture itself needs a GPU (marker ``gpu``)."""

from __future__ import annotations

import time

import pytest
import torch
import warp as wp

from unilab_gpu.sim import capture as capture_module
from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph, capture_unsupported_reason
from unilab_gpu.sim.simulator import Simulator

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")


def test_cpu_device_is_refused_with_a_reason() -> None:
    reason = capture_unsupported_reason("cpu")
    assert reason is not None and "not a CUDA device" in reason
    with pytest.raises(CaptureUnsupportedError, match="not a CUDA device"):
        CudaGraph(lambda: None, "cpu")


class _Recorder:
    """Stand-ins for the torch.cuda and Warp calls CudaGraph makes; each call is logged."""

    def __init__(self) -> None:
        self.log: list[tuple] = []
        self.current_device = 0
        self.current_stream = {0: "default0", 1: "default1"}
        self.warp_current = None

    def context(self, enter: tuple, exit_: tuple, on_enter=None, on_exit=None):
        recorder = self

        class _Context:
            def __enter__(self):
                recorder.log.append(enter)
                if on_enter:
                    on_enter()

            def __exit__(self, *exc):
                recorder.log.append(exit_)
                if on_exit:
                    on_exit()

        return _Context()


@pytest.fixture
def recorder(monkeypatch):
    """CudaGraph's CUDA and Warp calls replaced by logging stand-ins (runs on a CPU machine)."""
    rec = _Recorder()
    streams: dict[str, object] = {}

    class FakeStream:
        def __init__(self, device):
            self.device = device
            self.name = f"capture_stream@{device}"

        def wait_stream(self, other):
            rec.log.append(("wait_stream", self.name))

    def device_ctx(device):
        saved = rec.current_device

        def enter():
            rec.current_device = device.index

        def leave():
            rec.current_device = saved

        return rec.context(("enter_device", str(device)), ("exit_device", str(device)), enter, leave)

    def stream_ctx(stream):
        return rec.context(("enter_torch_stream", stream.name), ("exit_torch_stream", stream.name))

    def graph_ctx(graph, stream=None, capture_error_mode="global"):
        rec.log.append(("torch_graph", stream.name, capture_error_mode, rec.current_device, rec.warp_current))
        return rec.context(("begin_torch_capture",), ("end_torch_capture",))

    def warp_stream(torch_stream):
        return streams.setdefault(torch_stream.name, object())

    def scoped_stream(ws):
        saved = rec.warp_current

        def enter():
            rec.warp_current = ws

        def leave():
            rec.warp_current = saved

        return rec.context(("enter_warp_stream", id(ws)), ("exit_warp_stream", id(ws)), enter, leave)

    def capture_begin(stream=None, external=False, capture_mode=None, force_module_load=None):
        rec.log.append(("wp_capture_begin", id(stream), external, capture_mode, stream is rec.warp_current))

    def capture_end(stream=None):
        rec.log.append(("wp_capture_end", id(stream), stream is rec.warp_current))
        return "warp-graph"

    monkeypatch.setattr(capture_module, "capture_unsupported_reason", lambda device: None)
    monkeypatch.setattr(capture_module, "resolve_device", lambda device: torch.device(device))
    monkeypatch.setattr(capture_module, "warp_stream", warp_stream)
    monkeypatch.setattr(torch.cuda, "device", device_ctx)
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: FakeStream(device))
    monkeypatch.setattr(torch.cuda, "stream", stream_ctx)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: rec.log.append(("synchronize", str(device))))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: "torch-graph")
    monkeypatch.setattr(torch.cuda, "graph", graph_ctx)
    monkeypatch.setattr(capture_module.wp, "ScopedStream", scoped_stream)
    monkeypatch.setattr(capture_module.wp, "capture_begin", capture_begin)
    monkeypatch.setattr(capture_module.wp, "capture_end", capture_end)
    rec.streams = streams
    return rec


def test_capture_follows_warps_external_capture_recipe_on_a_non_current_device(recorder) -> None:
    """On cuda:1 (current device cuda:0): capture under that device, on an explicit stream of it,
    with its one Warp stream object current before torch's capture begins and passed to Warp's
    capture_begin/capture_end, in torch's capture mode; Warp's graph is kept."""
    runs = []
    graph = CudaGraph(lambda: runs.append(recorder.warp_current), "cuda:1", warmup=2)
    log = recorder.log
    (warp_obj,) = recorder.streams.values()
    assert log[0] == ("enter_device", "cuda:1")
    torch_graph = next(e for e in log if e[0] == "torch_graph")
    assert torch_graph == ("torch_graph", "capture_stream@cuda:1", "global", 1, warp_obj)
    names = [e[0] for e in log]
    # ScopedStream is entered before torch's capture begins and left after it ends.
    assert names.index("enter_warp_stream", names.index("synchronize")) < names.index("begin_torch_capture")
    assert names.index("end_torch_capture") < len(names) - 1 - names[::-1].index("exit_warp_stream")
    begin = next(e for e in log if e[0] == "wp_capture_begin")
    end = next(e for e in log if e[0] == "wp_capture_end")
    assert begin == ("wp_capture_begin", id(warp_obj), True, wp.CaptureMode.GLOBAL, True)
    assert end == ("wp_capture_end", id(warp_obj), True)
    assert names.index("wp_capture_begin") < names.index("wp_capture_end") < names.index("end_torch_capture")
    # Warm-up twice and the captured run, all with the capture stream's Warp object current.
    assert runs == [warp_obj, warp_obj, warp_obj]
    assert graph.warp_graph == "warp-graph" and graph.graph == "torch-graph"
    assert log[-1] == ("exit_device", "cuda:1") and recorder.current_device == 0


@pytest.mark.gpu
@requires_cuda
def test_captured_physics_equals_eager_physics() -> None:
    """Replaying a captured 4-substep step matches eager MJWarp stepping from the same state,
    bit for bit in MJWarp's deterministic mode."""
    eager = Simulator.from_file("g1", 64, "cuda", keyframe="stand", deterministic=True)
    captured = Simulator.from_file("g1", 64, "cuda", keyframe="stand", deterministic=True)
    for sim in (eager, captured):
        sim.state.qvel[:, 6:] = torch.linspace(-0.5, 0.5, 29, device="cuda")
    start_qpos, start_qvel = captured.state.qpos.clone(), captured.state.qvel.clone()

    graph = CudaGraph(lambda: captured.step(4), "cuda", warmup=1)
    # Warm-up advanced the captured sim; restore the shared start before comparing.
    ids = torch.arange(64, device="cuda")
    captured.write_rows(ids, start_qpos, start_qvel)
    eager.write_rows(ids, start_qpos, start_qvel)
    for _ in range(25):
        graph.replay()
        eager.step(4)
    torch.cuda.synchronize()
    assert torch.equal(captured.state.qpos, eager.state.qpos)
    assert torch.equal(captured.state.qvel, eager.state.qvel)


@pytest.mark.gpu
@requires_cuda
def test_mjwarps_solver_loop_sees_our_capture(monkeypatch) -> None:
    """MJWarp's ``wp.capture_while`` must find the active capture on Warp's current stream
    (else it runs a host loop that synchronizes, which a capture cannot contain)."""
    seen = []
    original = wp.capture_while

    def spy(condition, while_body, stream=None, **kwargs):
        device = condition.device
        seen.append(device.captures.get(stream or device.stream) is not None)
        return original(condition, while_body, stream=stream, **kwargs)

    sim = Simulator.from_file("g1", 16, "cuda", keyframe="stand")
    sim.step(1)  # load modules
    monkeypatch.setattr(wp, "capture_while", spy)
    graph = CudaGraph(lambda: sim.step(2), "cuda", warmup=1)
    assert seen and seen[-2:] == [True, True], seen  # warm-up (False: eager) then the captured steps
    assert graph.warp_graph is not None
    graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(sim.state.qpos).all()


@pytest.mark.gpu
@requires_cuda
def test_replay_does_not_wait_for_the_device() -> None:
    """Host time to enqueue replays is far below their device time (a sync would equal it)."""
    sim = Simulator.from_file("g1", 4096, "cuda", keyframe="stand")
    graph = CudaGraph(lambda: sim.step(4), "cuda", warmup=1)
    stream = torch.cuda.current_stream()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    begin.record(stream)
    start = time.perf_counter()
    for _ in range(20):
        graph.replay()
    host_ms = (time.perf_counter() - start) * 1e3
    end.record(stream)
    torch.cuda.synchronize()
    assert host_ms < 0.5 * begin.elapsed_time(end), (host_ms, begin.elapsed_time(end))
    assert torch.isfinite(sim.state.qpos).all()
