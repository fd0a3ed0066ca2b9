"""CUDA capture: support detection runs everywhere; capture itself needs a GPU (marker ``gpu``)."""

from __future__ import annotations

import gc
import time
from types import SimpleNamespace

import pytest
import torch
import warp as wp

from unilab_gpu.sim import capture as capture_module
from unilab_gpu.sim.capture import (
    CaptureAbortedError,
    CapturePausedError,
    CaptureUnsupportedError,
    CudaGraph,
    capture_registered_for,
    capture_unsupported_reason,
    capture_was_paused,
    stream_capture_id,
)
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
        self.torch_current = None
        self.warp_current = None
        self.capture_ids = iter([7, 7])
        self.fail_capture_end = False

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


class _FakeWarpStream:
    """A Warp stream stand-in: hashable by identity like ``wp.Stream``, with its device's captures."""

    def __init__(self, device) -> None:
        self.device = device


class _WarpGraph:
    """Warp's record of a capture: no graph handle until a pause or capture_end stores one."""

    def __init__(self) -> None:
        self.graph = None


@pytest.fixture
def recorder(monkeypatch):
    """CudaGraph's CUDA and Warp calls replaced by logging stand-ins (runs on a CPU machine)."""
    rec = _Recorder()
    streams: dict[str, object] = {}

    class FakeStream:
        def __init__(self, device, name=None):
            self.device = device
            self.name = name or f"capture_stream@{device}"

        def wait_stream(self, other):
            rec.log.append(("wait_stream", self.name))

    rec.caller = FakeStream("cuda:1", "caller_stream")
    rec.torch_current = rec.caller

    class FakeGraph:
        def capture_begin(self, capture_error_mode="global"):
            rec.log.append(("begin_torch_capture", capture_error_mode, rec.current_device, rec.torch_current.name))

        def capture_end(self):
            rec.log.append(("end_torch_capture", rec.torch_current.name))
            if rec.fail_capture_end:
                raise RuntimeError("CUDA error: operation failed due to a previous error during capture")

    def device_ctx(device):
        saved = rec.current_device

        def enter():
            rec.current_device = device.index

        def leave():
            rec.current_device = saved

        return rec.context(("enter_device", str(device)), ("exit_device", str(device)), enter, leave)

    def stream_ctx(stream):
        saved = rec.torch_current

        def enter():
            rec.torch_current = stream

        def leave():
            rec.torch_current = saved

        return rec.context(("enter_torch_stream", stream.name), ("exit_torch_stream", stream.name), enter, leave)

    def set_stream(stream):
        rec.log.append(("set_stream", stream.name))
        rec.torch_current = stream

    warp_device = SimpleNamespace(captures={})

    def warp_stream(torch_stream):
        return streams.setdefault(torch_stream.name, _FakeWarpStream(warp_device))

    def scoped_stream(ws):
        saved = rec.warp_current

        def enter():
            rec.warp_current = ws

        def leave():
            rec.warp_current = saved

        return rec.context(("enter_warp_stream", id(ws)), ("exit_warp_stream", id(ws)), enter, leave)

    def capture_begin(stream=None, external=False, capture_mode=None, force_module_load=None):
        rec.log.append(("wp_capture_begin", id(stream), external, capture_mode, stream is rec.warp_current))
        rec.warp_graph = stream.device.captures[stream] = _WarpGraph()

    def capture_end(stream=None):
        rec.log.append(("wp_capture_end", id(stream), stream is rec.warp_current))
        graph = stream.device.captures.pop(stream)
        graph.graph = "torch's cudaGraph_t"
        return graph

    def pause_and_resume():  # what wp.capture_while does to the capture Warp registered
        rec.log.append(("wp_capture_pause",))
        rec.warp_graph.graph = "the paused cudaGraph_t"

    rec.pause_and_resume = pause_and_resume

    def capture_id(stream):
        rec.log.append(("capture_id", id(stream)))
        return next(rec.capture_ids)

    monkeypatch.setattr(capture_module, "capture_unsupported_reason", lambda device: None)
    monkeypatch.setattr(capture_module, "resolve_device", lambda device: torch.device(device))
    monkeypatch.setattr(capture_module, "warp_stream", warp_stream)
    monkeypatch.setattr(capture_module, "stream_capture_id", capture_id)
    monkeypatch.setattr(capture_module, "capture_registered_for", lambda stream: stream.device.captures.get(stream))
    monkeypatch.setattr(torch.cuda, "device", device_ctx)
    monkeypatch.setattr(torch.cuda, "Stream", FakeStream)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: rec.torch_current)
    monkeypatch.setattr(torch.cuda, "stream", stream_ctx)
    monkeypatch.setattr(torch.cuda, "set_stream", set_stream)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: rec.log.append(("synchronize", str(device))))
    monkeypatch.setattr(torch.cuda, "CUDAGraph", FakeGraph)
    monkeypatch.setattr(capture_module.wp, "ScopedStream", scoped_stream)
    monkeypatch.setattr(capture_module.wp, "capture_begin", capture_begin)
    monkeypatch.setattr(capture_module.wp, "capture_end", capture_end)
    rec.streams = streams
    return rec


def _names(log: list[tuple]) -> list[str]:
    return [e[0] for e in log]


def test_capture_follows_warps_external_capture_recipe_on_a_non_current_device(recorder) -> None:
    """On cuda:1 (current device cuda:0): capture under that device, on an explicit stream of it,
    with its one Warp stream object current before torch's capture begins and passed to Warp's
    capture_begin/capture_end, in torch's capture mode; Warp's graph is kept without torch's handle."""
    runs = []
    graph = CudaGraph(lambda: runs.append(recorder.warp_current), "cuda:1", warmup=2)
    log = recorder.log
    (warp_obj,) = recorder.streams.values()
    assert log[0] == ("enter_device", "cuda:1")
    names = _names(log)
    begin_torch = log[names.index("begin_torch_capture")]
    assert begin_torch == ("begin_torch_capture", "global", 1, "capture_stream@cuda:1")
    # ScopedStream is entered before torch's capture begins and left after it ends.
    assert names.index("enter_warp_stream", names.index("synchronize")) < names.index("begin_torch_capture")
    assert names.index("end_torch_capture") < len(names) - 1 - names[::-1].index("exit_warp_stream")
    begin = log[names.index("wp_capture_begin")]
    end = log[names.index("wp_capture_end")]
    assert begin == ("wp_capture_begin", id(warp_obj), True, wp.CaptureMode.GLOBAL, True)
    assert end == ("wp_capture_end", id(warp_obj), True)
    assert names.index("begin_torch_capture") < names.index("wp_capture_begin")
    assert names.index("wp_capture_end") < names.index("end_torch_capture")
    # The capture id is read on the capture stream right after torch's begin and before Warp's end.
    ids = [i for i, name in enumerate(names) if name == "capture_id"]
    assert [log[i] for i in ids] == [("capture_id", id(warp_obj))] * 2
    assert names.index("begin_torch_capture") < ids[0] < names.index("wp_capture_begin")
    assert ids[1] < names.index("wp_capture_end")
    assert graph.capture_ids == (7, 7)
    # Warm-up twice and the captured run, all with the capture stream's Warp object current.
    assert runs == [warp_obj, warp_obj, warp_obj]
    assert graph.warp_graph is recorder.warp_graph and graph.warp_graph.graph is None  # torch owns the handle
    assert isinstance(graph.graph, torch.cuda.CUDAGraph)
    assert log[-1] == ("exit_device", "cuda:1") and recorder.current_device == 0
    assert recorder.torch_current is recorder.caller


def test_a_failure_inside_the_capture_ends_both_captures_and_restores_the_callers_stream(recorder) -> None:
    """fn raising mid-capture: Warp's and torch's captures still end (torch's allocator and RNG
    leave capture mode, so an eager fallback is safe), the caller's stream and GC come back, and
    the error is fn's own."""
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 2:  # warm-up once, then fail inside the capture
            raise RuntimeError("boom inside the capture")

    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom inside the capture"):
        CudaGraph(fn, "cuda:1", warmup=1)
    names = _names(recorder.log)
    assert names.index("wp_capture_end") < names.index("end_torch_capture")
    assert recorder.warp_graph.graph is None
    assert recorder.torch_current is recorder.caller and names[-2] == "set_stream"
    assert gc.isenabled()


def test_a_failing_torch_capture_end_is_fatal_with_one_clear_line(recorder) -> None:
    """torch's capture_end failing inside CUDA leaves its allocator and generator in capture mode:
    CaptureAbortedError (a SystemExit, so no `except Exception` fallback runs on that state)."""
    recorder.fail_capture_end = True
    with pytest.raises(CaptureAbortedError) as raised:
        CudaGraph(lambda: None, "cuda:1", warmup=1)
    assert not isinstance(raised.value, Exception)
    message = str(raised.value)
    assert "capture failed inside CUDA on cuda:1" in message and "capture=False" in message
    assert "previous error during capture" in message and "\n" not in message
    assert recorder.torch_current is recorder.caller
    assert gc.isenabled()


def test_a_capture_id_that_changes_during_capture_discards_the_graph(recorder) -> None:
    """An id read before capture_end that differs from the one after capture_begin: torch ended its
    capture cleanly, then CapturePausedError names both ids."""
    recorder.capture_ids = iter([7, 9])
    with pytest.raises(CapturePausedError, match=r"capture id 7 after capture_begin, 9 before capture_end"):
        CudaGraph(lambda: None, "cuda:1", warmup=1)
    assert "end_torch_capture" in _names(recorder.log)
    assert recorder.torch_current is recorder.caller


def test_a_paused_capture_is_refused_even_when_the_id_stays_the_same(recorder) -> None:
    """A driver may resume a paused capture under the same id (Warp's comments expect that): the
    pause Warp recorded in its graph still discards the graph."""
    calls = []

    def fn():
        calls.append(1)
        if len(calls) == 2:  # inside the capture
            recorder.pause_and_resume()

    with pytest.raises(CapturePausedError, match=r"capture id 7 after capture_begin, 7 before capture_end.*True"):
        CudaGraph(fn, "cuda:1", warmup=1)
    names = _names(recorder.log)
    assert names.index("wp_capture_pause") < names.index("wp_capture_end") < names.index("end_torch_capture")
    assert recorder.torch_current is recorder.caller


def test_capture_was_paused_reads_warps_own_graph_record() -> None:
    """On Warp's real Graph objects: a registered capture without a handle is unpaused; a handle
    (stored by capture_pause), another object or none registered means it was paused or ended."""
    device = SimpleNamespace(captures={})
    stream = _FakeWarpStream(device)
    cpu = wp.get_device("cpu")
    assert capture_registered_for(stream) is None and capture_was_paused(stream, None)
    graph = wp.Graph(cpu, capture_id=7)
    device.captures[stream] = graph
    assert capture_registered_for(stream) is graph and not capture_was_paused(stream, graph)
    device.captures[stream] = wp.Graph(cpu, capture_id=8)  # re-registered under another object
    assert capture_was_paused(stream, graph)
    device.captures[stream] = graph
    graph.graph = 12345  # what capture_pause stores
    assert capture_was_paused(stream, graph)
    del device.captures[stream]
    graph.graph = None
    assert capture_was_paused(stream, graph)


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
def test_captured_physics_keeps_one_capture_id(monkeypatch) -> None:
    """On CUDA MJWarp runs a fixed number of solver iterations (no ``wp.capture_while``, which
    would pause and resume our capture), so the capture id read after torch's
    capture_begin is the one read before capture_end; the replay steps."""
    loops = []
    original = wp.capture_while

    def spy(condition, while_body, stream=None, **kwargs):
        loops.append(condition)
        return original(condition, while_body, stream=stream, **kwargs)

    sim = Simulator.from_file("g1", 16, "cuda", keyframe="stand")
    assert sim.model.opt.graph_conditional is False
    sim.step(1)  # load modules
    monkeypatch.setattr(wp, "capture_while", spy)
    graph = CudaGraph(lambda: sim.step(2), "cuda", warmup=1)
    assert loops == []
    begin, end = graph.capture_ids
    assert begin == end != 0 and not graph.paused
    assert graph.warp_graph is not None and graph.warp_graph.graph is None
    before = sim.state.qpos.clone()
    graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(sim.state.qpos).all() and not torch.equal(sim.state.qpos, before)


@pytest.mark.gpu
@requires_cuda
def test_a_capture_that_is_paused_and_resumed_is_refused_and_torch_stays_usable(record_property) -> None:
    """Warp's capture_while inside our capture pauses and resumes it: CudaGraph refuses the graph
    whatever the driver did with the capture id, and torch's allocator and generator are out of
    capture mode afterwards (eager work and random draws run on the caller's stream). What the
    driver did (same id or a new one) is recorded in the JUnit report (``capture_ids``), not
    asserted: Warp's comments and CUDA's documentation disagree."""
    caller = torch.cuda.current_stream()
    counter = torch.zeros(4, device="cuda")
    condition = wp.zeros(1, dtype=wp.int32, device="cuda:0")
    scratch = wp.zeros(8, dtype=wp.float32, device="cuda:0")

    def fn() -> None:
        counter.add_(1.0)  # in place: nothing allocates after the resume
        wp.capture_while(condition, while_body=lambda: scratch.zero_())
        counter.add_(1.0)

    with pytest.raises(CapturePausedError, match="paused and resumed") as raised:
        CudaGraph(fn, "cuda", warmup=1)
    record_property("capture_ids_across_capture_while", str(raised.value))
    assert torch.cuda.current_stream() == caller
    assert not torch.cuda.is_current_stream_capturing()
    draw = torch.rand(1000, device="cuda")
    assert 0.4 < float(draw.mean()) < 0.6
    assert torch.equal(counter, torch.full_like(counter, 2.0))  # the warm-up ran fn; the capture ran nothing


@pytest.mark.gpu
@requires_cuda
def test_stream_capture_id_is_zero_outside_a_capture() -> None:
    """Warp's binding answers 0 for a stream that is not capturing."""
    from unilab_gpu.sim.device import warp_stream

    assert stream_capture_id(warp_stream(torch.cuda.current_stream())) == 0


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


@pytest.mark.parametrize(("ids", "status"), [((41, 41), "pass"), ((41, 44), "fail"), ((0, 0), "fail")])
def test_the_doctor_reports_the_capture_ids_of_the_envs_graph(monkeypatch, ids, status) -> None:
    """unilab-doctor's capture check names both ids and passes only for one real id."""
    from unilab_gpu.doctor import captured_step as doctor

    env = SimpleNamespace(reset=lambda: None, _graph=SimpleNamespace(capture_ids=ids))
    monkeypatch.setattr(doctor, "make_env", lambda *args, **kwargs: env)
    check, returned = doctor.check_capture("g1_tracking", 4096, torch.device("cpu"), compile=False)
    assert returned is env and check.status == status and check.data == {"capture_ids": list(ids)}
    assert f"capture id {ids[0]} after capture_begin, {ids[1]} before capture_end" in check.detail
