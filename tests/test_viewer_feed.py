"""The live viewer's host copies (``unilab_gpu.viewer.feed``): throttled to the rate, never waiting
on the viewer, non-blocking copies, the right rows; checked against hand-set state."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.viewer.feed import StateFeed


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(scope="module")
def pendulum():
    env = make_env("pendulum", num_envs=6, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    return env


def set_rows(env) -> None:
    """qpos row i = 10 i, episode step row i = 100 + i, reward row i = i / 10."""
    rows = torch.arange(env.num_envs, dtype=torch.float32)
    env.sim.state.qpos.copy_((10.0 * rows)[:, None].expand_as(env.sim.state.qpos))
    env.episode_length.copy_(100 + rows.long())
    env.reward_manager.reward.copy_(rows / 10)


def test_copies_at_most_rate_hz(pendulum) -> None:
    clock = FakeClock()
    feed = StateFeed(pendulum, worlds=2, rate_hz=10.0, clock=clock)
    copied = []
    for t in (0.0, 0.04, 0.09, 0.1, 0.15, 0.199, 0.2, 0.35, 0.36):
        clock.now = t
        if feed.maybe_copy():
            copied.append(t)
    assert copied == [0.0, 0.1, 0.2, 0.35]  # each at least 0.1 s after the previous copy
    assert feed.copies == 4
    clock.now = 0.351
    assert feed.maybe_copy(force=True)  # a paused rollout's single step is shown at once


def test_reads_the_chosen_rows_and_keeps_the_copy(pendulum) -> None:
    set_rows(pendulum)
    feed = StateFeed(pendulum, worlds=2, rate_hz=10.0, clock=FakeClock())
    assert feed.read() is None  # nothing copied yet
    feed.show_from(3)
    assert feed.maybe_copy(force=True)
    pendulum.sim.state.qpos.fill_(-1.0)  # after the copy: not seen until the next one
    snap = feed.read()
    assert snap.first == 3
    np.testing.assert_array_equal(snap.qpos[:, 0], [30.0, 40.0])
    np.testing.assert_array_equal(snap.episode_step, [103, 104])
    np.testing.assert_allclose(snap.reward, [0.3, 0.4])
    assert snap.errors == {} and snap.reference_qpos is None and snap.command is None  # no command term
    with pytest.raises(ValueError, match=r"first world must be in \[0, 4\]"):
        feed.show_from(5)


class CopyRecorder(TorchDispatchMode):
    """Records the ``non_blocking`` flag of every ``aten.copy_`` and the names of all ops."""

    def __init__(self) -> None:
        super().__init__()
        self.copies: list[bool] = []
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops.append(str(func))
        if func is torch.ops.aten.copy_.default:
            self.copies.append(bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False)))
        return func(*args, **kwargs)


def test_copies_are_non_blocking_and_never_wait_for_the_viewer(pendulum) -> None:
    feed = StateFeed(pendulum, worlds=3, rate_hz=10.0, clock=FakeClock())
    with CopyRecorder() as recorder:
        assert feed.maybe_copy(force=True)
    assert recorder.copies == [True] * 4  # qpos, episode step, reward, return: all non_blocking
    assert not any("item" in op or "local_scalar" in op for op in recorder.ops)  # nothing read back

    # The viewer thread holds the lock while it reads: a copy is skipped, not waited for.
    entered, release = threading.Event(), threading.Event()

    def viewer_reads() -> None:
        with feed._lock:
            entered.set()
            release.wait(5.0)

    reader = threading.Thread(target=viewer_reads)
    reader.start()
    entered.wait(5.0)
    try:
        assert not feed.maybe_copy(force=True)
        assert feed.skipped == 1 and feed.copies == 1
    finally:
        release.set()
        reader.join()
    assert feed.maybe_copy(force=True)


def test_tracking_feed_carries_the_reference_and_errors() -> None:
    env = make_env("g1_tracking", num_envs=3, device="cpu", compile=False, seed=0, announce=False)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.action_dim))
    feed = StateFeed(env, worlds=2, rate_hz=10.0, clock=FakeClock())
    feed.show_from(1)
    feed.maybe_copy(force=True)
    snap = feed.read()
    motion = env.command_manager.get("motion")
    for k, row in enumerate((1, 2)):
        np.testing.assert_array_equal(snap.reference_qpos[k], motion.reference_qpos(row).numpy())
        np.testing.assert_array_equal(snap.qpos[k], env.sim.state.qpos[row].numpy())
        for name, values in motion.row_errors().items():
            assert snap.errors[name][k] == pytest.approx(float(values[row]))
    # The episode return is the sum of the per-term episode sums.
    np.testing.assert_allclose(snap.episode_return, env.reward_manager.episode_sums[1:3].sum(1).numpy(), rtol=1e-6)
    assert feed.has_reference and not feed.has_command


def test_bad_settings(pendulum) -> None:
    with pytest.raises(ValueError, match=r"worlds must be in \[1, 6\]"):
        StateFeed(pendulum, worlds=7)
    with pytest.raises(ValueError, match="rate_hz must be > 0"):
        StateFeed(pendulum, worlds=1, rate_hz=0.0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (none visible)")
def test_cuda_copies_are_pinned_and_do_not_synchronize() -> None:
    env = make_env("pendulum", num_envs=8, device="cuda", compile=False, seed=0, announce=False)
    env.reset()
    feed = StateFeed(env, worlds=4, rate_hz=10.0, clock=FakeClock())
    assert all(buffer.is_pinned() for buffer in feed._host.values())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")  # a synchronizing copy raises
    try:
        feed.show_from(2)
        assert feed.maybe_copy(force=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    snap = feed.read()
    np.testing.assert_array_equal(snap.qpos, env.sim.state.qpos[2:6].cpu().numpy())
    assert math.isfinite(float(snap.reward.sum()))
