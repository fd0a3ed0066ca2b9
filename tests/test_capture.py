"""CUDA capture: support detection runs everywhere; capture itself needs a GPU (marker ``gpu``)."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph, capture_unsupported_reason
from unilab_gpu.sim.simulator import Simulator

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")


def test_cpu_device_is_refused_with_a_reason() -> None:
    reason = capture_unsupported_reason("cpu")
    assert reason is not None and "not a CUDA device" in reason
    with pytest.raises(CaptureUnsupportedError, match="not a CUDA device"):
        CudaGraph(lambda: None, "cpu")


@pytest.mark.gpu
@requires_cuda
def test_captured_physics_equals_eager_physics() -> None:
    """Replaying a captured 4-substep step matches eager MJWarp stepping from the same state."""
    eager = Simulator.from_file("g1", 64, "cuda", keyframe="stand")
    captured = Simulator.from_file("g1", 64, "cuda", keyframe="stand")
    for sim in (eager, captured):
        sim.state.qvel[:, 6:] = torch.linspace(-0.5, 0.5, 29, device="cuda")
    start_qpos, start_qvel = captured.state.qpos.clone(), captured.state.qvel.clone()

    def step() -> None:
        captured.step(4)

    graph = CudaGraph(step, "cuda", warmup=1)
    # Warm-up advanced the captured sim; restore the shared start before comparing.
    ids = torch.arange(64, device="cuda")
    captured.write_rows(ids, start_qpos, start_qvel)
    eager.write_rows(ids, start_qpos, start_qvel)
    for _ in range(25):
        graph.replay()
        eager.step(4)
    torch.cuda.synchronize()
    torch.testing.assert_close(captured.state.qpos, eager.state.qpos, atol=1e-4, rtol=0)


@pytest.mark.gpu
@requires_cuda
def test_replay_does_not_sync_the_host() -> None:
    sim = Simulator.from_file("g1", 256, "cuda", keyframe="stand")
    graph = CudaGraph(lambda: sim.step(4), "cuda", warmup=1)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(10):
            graph.replay()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    assert torch.isfinite(sim.state.qpos).all()
