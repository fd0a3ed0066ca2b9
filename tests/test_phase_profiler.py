"""Phase profiler: clocks, attribution of a deliberately slowed phase, the summary and chart."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from unilab_gpu.envs.env_step import STEP_PHASES
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.ms_stats import ms_stats
from unilab_gpu.profiling.phase_clock import CpuPhaseClock, make_phase_clock
from unilab_gpu.profiling.phase_profile import PhaseProfile
from unilab_gpu.profiling.phase_profiler import PhaseProfiler

BURN = "+observations.policy.terms.burn={func: env_test_terms.burn_time, params: {milliseconds: 20}}"
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_cpu_clock_measures_each_phase_of_each_slot() -> None:
    clock = make_phase_clock(("a", "b"), window=2, device=torch.device("cpu"))
    assert isinstance(clock, CpuPhaseClock)
    spins = np.array([[2.0, 6.0], [8.0, 1.0]])
    readings = []
    for _ in range(5):
        for slot, (a_ms, b_ms) in enumerate(spins):
            clock.start(slot)
            mark = clock.marker(slot)
            _spin(a_ms)
            mark("a")
            _spin(b_ms)
            mark("b")
        ms = clock.read()
        assert ms.shape == (2, 2)
        # Spinning never returns early, so every reading is at least its phase's spin.
        np.testing.assert_array_less(spins, ms + 1e-9)
        readings.append(ms)
    # A busy machine only adds time, and not to every one of five readings: the least of them is
    # within 5 ms of the spin, which a clock in the wrong unit, or one that charged a phase with
    # its neighbour's spin (slot 0's "a" with 6 ms more, slot 1's "b" with 8 ms more), would not be.
    np.testing.assert_array_less(np.min(readings, axis=0), spins + 5.0)


def test_ms_stats_match_numpy_and_reject_empty_input() -> None:
    ms = np.array([5.0, 1.0, 3.0, 2.0, 4.0, 100.0])  # sorted: 1 2 3 4 5 100; p90 at rank 4.5
    assert ms_stats(ms) == {"median": 3.5, "p10": 1.5, "p90": 52.5, "mean": pytest.approx(115 / 6)}
    with pytest.raises(ValueError, match=r"non-empty 1-D array, got shape \(0,\)"):
        ms_stats(np.array([]))


def test_clock_rejects_an_empty_window() -> None:
    with pytest.raises(ValueError, match="window must be >= 1"):
        make_phase_clock(STEP_PHASES, 0, torch.device("cpu"))


@pytest.mark.parametrize("final_obs", [True, False])
def test_a_slow_observation_term_is_blamed_on_the_phases_that_observe(final_obs: bool) -> None:
    """Observations are computed in ``observe`` and, for the pre-reset final observations, in
    ``evaluate``; 20 ms of burn must show there, not in physics or elsewhere."""
    env = make_env("pendulum", num_envs=2, compile=False, overrides=[BURN, f"final_obs={str(final_obs).lower()}"])
    env.reset()
    profile = PhaseProfiler(env, window=3).run(steps=7, warmup=1)
    assert profile.phase_ms.shape == (7, len(STEP_PHASES))
    assert profile.env_step_ms.shape == profile.physics_only_ms.shape == (7,)
    # Medians: one step preempted by another process on a busy machine must not decide the test.
    ms = dict(zip(STEP_PHASES, np.median(profile.phase_ms, axis=0), strict=True))
    slowed = {"observe", "evaluate"} if final_obs else {"observe"}
    for phase in STEP_PHASES:
        if phase in slowed:
            assert 20.0 <= ms[phase] < 32.0, (phase, ms)
        else:
            assert ms[phase] < 8.0, (phase, ms)
    # Physics alone is far below the slowed phases; the real step pays for every burn.
    assert float(np.median(profile.physics_only_ms)) < 8.0
    assert float(np.median(profile.env_step_ms)) >= 20.0 * len(slowed)
    assert profile.mode == "eager"


def test_profile_table_and_chart_agree_with_numpy() -> None:
    rng = np.random.default_rng(0)
    phase_ms = rng.uniform(0.5, 3.0, size=(9, len(STEP_PHASES)))
    env_step, physics = rng.uniform(9.0, 12.0, size=9), rng.uniform(1.0, 2.0, size=9)
    profile = PhaseProfile(STEP_PHASES, phase_ms, env_step, physics, 0.5, num_envs=32, device="cpu", mode="compiled")
    lines = profile.summary().splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines[2 : 2 + len(STEP_PHASES)]}
    total = phase_ms.sum(axis=1).mean()
    for i, phase in enumerate(STEP_PHASES):
        mean, p50, p90, share = map(float, rows[phase])
        assert mean == pytest.approx(phase_ms[:, i].mean(), abs=1e-3)
        assert p50 == pytest.approx(np.median(phase_ms[:, i]), abs=1e-3)
        assert p90 == pytest.approx(np.percentile(phase_ms[:, i], 90), abs=1e-3)
        assert share == pytest.approx(100 * phase_ms[:, i].mean() / total, abs=0.05)
    env_step_row = next(line for line in lines if line.startswith("env.step")).split()[1:]
    assert float(env_step_row[1]) == pytest.approx(np.median(env_step), abs=1e-3)
    ratio = np.median(env_step) / np.median(physics)
    assert profile.overhead_ratio == pytest.approx(ratio)
    assert profile.env_steps_per_s == pytest.approx(32 / (np.median(env_step) / 1e3))
    assert f"{ratio:.2f}" in lines[-2]

    fig = profile.plot()
    step_bars = fig.axes[0].patches
    assert len(step_bars) == len(STEP_PHASES)
    np.testing.assert_allclose([p.get_width() for p in step_bars], phase_ms.mean(axis=0))
    # Stacked: each bar starts where the previous one ends.
    np.testing.assert_allclose([p.get_x() for p in step_bars], np.cumsum(phase_ms.mean(axis=0)) - phase_ms.mean(axis=0))
    tick = fig.axes[0].lines[0].get_xdata()
    np.testing.assert_allclose(tick, [physics.mean()] * 2)


def gpu_sleep(env, cycles: int) -> torch.Tensor:
    """Observation term that keeps the GPU busy for ``cycles`` clock cycles (a host busy-wait
    would only run while capturing, never on replay)."""
    torch.cuda._sleep(cycles)
    return torch.zeros(env.num_envs, device=env.device)


def _cycles_for(ms: float) -> int:
    """GPU sleep cycles that take about ``ms`` on this device."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1_000_000)  # warm-up
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    return int(10_000_000 * ms / start.elapsed_time(end))


@pytest.mark.gpu
@requires_cuda
def test_cuda_clock_times_phases_inside_a_captured_graph() -> None:
    """Events recorded during capture become graph nodes and stamp every replay, one row per slot."""
    device = torch.device("cuda")
    clock = make_phase_clock(("slow", "fast"), window=2, device=device)
    cycles = _cycles_for(5.0)
    x = torch.zeros(1, device=device)

    def body() -> None:
        for slot in range(2):
            clock.start(slot)
            mark = clock.marker(slot)
            torch.cuda._sleep(cycles * (slot + 1))
            mark("slow")
            x.add_(1.0)
            mark("fast")

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    for replay in range(2):  # the same events are reused by every replay
        graph.replay()
        ms = clock.read()
        assert ms.shape == (2, 2)
        assert 4.0 < ms[0, 0] < 7.0 and 8.0 < ms[1, 0] < 13.0, (replay, ms)
        assert (ms[:, 1] < 1.0).all(), (replay, ms)
    assert float(x) == 4.0  # two replays of two slots each


@pytest.mark.gpu
@requires_cuda
def test_captured_profile_blames_a_gpu_slow_observation_on_the_observing_phases() -> None:
    sleep_ms = 30.0
    # This module is importable by name: pytest puts tests/ on sys.path (as for env_test_terms).
    term = f"{{func: test_phase_profiler.gpu_sleep, params: {{cycles: {_cycles_for(sleep_ms)}}}}}"
    override = f"+observations.policy.terms.sleep={term}"
    env = make_env("g1_stand", num_envs=256, device="cuda", compile=False, capture=True, overrides=[override])
    env.reset()
    profiler = PhaseProfiler(env, window=5)
    assert profiler.capture, "capture unsupported on this machine"
    profile = profiler.run(steps=10, warmup=2)
    assert profile.mode == "captured"
    ms = dict(zip(STEP_PHASES, np.median(profile.phase_ms, axis=0), strict=True))
    for phase in STEP_PHASES:
        if phase in ("observe", "evaluate"):  # final observations are computed in evaluate
            assert 0.9 * sleep_ms < ms[phase] < 1.5 * sleep_ms, (phase, ms)
        else:
            assert 0.0 <= ms[phase] < 0.5 * sleep_ms, (phase, ms)
    # The captured variant and the real captured step run the same kernels.
    step = float(np.median(profile.env_step_ms))
    assert float(np.median(profile.profiled_step_ms)) == pytest.approx(step, rel=0.15)
    # Physics in the step costs about what physics alone costs.
    assert ms["physics"] == pytest.approx(float(np.median(profile.physics_only_ms)), rel=0.5)


def test_cuda_timers_record_on_the_timed_devices_stream(monkeypatch) -> None:
    """For a cuda:1 env while cuda:0 is current, every timing event records on cuda:1's current
    stream (a bare ``record()`` would time cuda:0's idle stream). Runs on CPU with stand-ins."""
    from types import SimpleNamespace

    from unilab_gpu.profiling.physics_timer import PhysicsTimer
    from unilab_gpu.profiling.step_timer import StepTimer

    recorded = []

    class FakeEvent:
        def __init__(self, **kwargs) -> None:
            pass

        def record(self, stream=None) -> None:
            recorded.append(stream)

        def elapsed_time(self, other) -> float:
            return 1.0

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: f"stream@{torch.device(device)}")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    gpu1 = torch.device("cuda", 1)

    clock = make_phase_clock(("a", "b"), window=1, device=gpu1)
    clock.start(0)
    mark = clock.marker(0)
    mark("a")
    mark("b")
    sim = SimpleNamespace(torch_device=gpu1, step=lambda substeps: None)
    PhysicsTimer(sim, 4, capture=False).time(2)
    env = SimpleNamespace(device=gpu1, reset_rows=SimpleNamespace(reset_mask=torch.zeros(3, dtype=torch.bool)))
    env.step = lambda actions: None
    # StepTimer allocates its reset counter on the env's device; keep it on the CPU here.
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: torch.empty(0).new_zeros(*a, dtype=k.get("dtype")))
    StepTimer(env, actions=None).time(2)
    assert len(recorded) == 3 + 3 + 4 and set(recorded) == {"stream@cuda:1"}
