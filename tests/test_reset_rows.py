"""Reset-row compaction against a NumPy reference: ids, padding, deferral, no drops, fixed buffers."""

import math

import numpy as np
import pytest
import torch

from unilab_gpu.envs.reset_rows import ResetRowCompactor
from unilab_gpu.utils.sync_audit import no_host_sync


class _Reference:
    """Straightforward NumPy version of the compactor (uses the data-dependent ops it avoids)."""

    def __init__(self, num_envs, capacity):
        self.num_envs, self.capacity = num_envs, capacity
        self.pending = np.zeros(num_envs, bool)
        self.wait = np.zeros(num_envs, int)
        self.deferred = 0

    def compact(self, done):
        need = done | self.pending
        # Longest-waiting first, then lower ids; the chosen ids are reported in ascending order.
        rows = sorted(np.flatnonzero(need), key=lambda r: (-self.wait[r], r))
        chosen, rest = sorted(rows[: self.capacity]), rows[self.capacity :]
        env_ids = np.full(self.capacity, self.num_envs)
        env_ids[: len(chosen)] = chosen
        reset_mask = np.zeros(self.num_envs, bool)
        reset_mask[chosen] = True
        self.pending = np.zeros(self.num_envs, bool)
        self.pending[rest] = True
        self.wait = np.where(self.pending, self.wait + 1, 0)
        self.deferred += len(rest)
        return env_ids, env_ids < self.num_envs, reset_mask, self.pending.copy(), self.deferred


def _check(comp, ref_out):
    env_ids, valid, reset_mask, pending, deferred = ref_out
    np.testing.assert_array_equal(comp.env_ids.cpu().numpy(), env_ids)
    np.testing.assert_array_equal(comp.valid.cpu().numpy(), valid)
    np.testing.assert_array_equal(comp.reset_mask.cpu().numpy(), reset_mask)
    np.testing.assert_array_equal(comp.pending.cpu().numpy(), pending)
    assert comp.deferred_count.item() == deferred


@pytest.mark.parametrize("num_envs,capacity", [(1, 1), (7, 3), (16, 16), (33, 5), (64, 100)])
def test_matches_numpy_reference_on_random_masks(num_envs, capacity):
    for seed in range(20):
        rng = np.random.default_rng(seed)
        comp, ref = ResetRowCompactor(num_envs, capacity), _Reference(num_envs, capacity)
        for _ in range(15):
            done = rng.random(num_envs) < rng.uniform(0.0, 0.8)
            comp.compact(torch.from_numpy(done))
            _check(comp, ref.compact(done))


def test_hand_computed_case():
    comp = ResetRowCompactor(num_envs=6, capacity=2)
    comp.compact(torch.tensor([False, True, False, True, True, True]))
    assert comp.env_ids.tolist() == [1, 3]
    assert comp.valid.tolist() == [True, True]
    assert comp.pending.tolist() == [False, False, False, False, True, True]
    assert comp.deferred_count.item() == 2
    # Row 0 ends now, but rows 4 and 5 have waited a call: they go first, row 0 waits.
    comp.compact(torch.tensor([True, False, False, False, False, False]))
    assert comp.env_ids.tolist() == [4, 5]
    assert comp.pending.tolist() == [True, False, False, False, False, False]
    assert comp.deferred_count.item() == 3
    comp.compact(torch.zeros(6, dtype=torch.bool))
    assert comp.env_ids.tolist() == [0, 6]  # padded with num_envs
    assert comp.valid.tolist() == [True, False]
    assert comp.reset_mask.tolist() == [True] + [False] * 5
    comp.compact(torch.zeros(6, dtype=torch.bool))
    assert comp.env_ids.tolist() == [6, 6]
    assert comp.valid.tolist() == [False, False]
    assert comp.deferred_count.item() == 3


@pytest.mark.parametrize("num_envs,capacity", [(50, 7), (64, 64), (100, 1), (9, 4)])
def test_every_ended_row_is_reset_exactly_once_within_ceil_calls(num_envs, capacity):
    rng = np.random.default_rng(num_envs * 1000 + capacity)
    done = rng.random(num_envs) < 0.7
    done[0] = True
    comp = ResetRowCompactor(num_envs, capacity)
    served = np.zeros(num_envs, int)
    calls = math.ceil(done.sum() / capacity)
    comp.compact(torch.from_numpy(done))
    served += comp.reset_mask.numpy()
    for _ in range(calls - 1):
        comp.compact(torch.zeros(num_envs, dtype=torch.bool))
        served += comp.reset_mask.numpy()
    np.testing.assert_array_equal(served, done.astype(int))
    assert not comp.pending.any()


def test_a_deferred_row_is_not_starved_by_low_rows_that_keep_ending():
    """Rows 0..3 end in turn every call; row 5, deferred once, is still served next call
    (by row id alone it would wait forever behind them)."""
    comp = ResetRowCompactor(num_envs=6, capacity=1)
    comp.compact(torch.tensor([False, False, False, False, True, True]))
    assert comp.env_ids.tolist() == [4] and comp.pending.tolist()[5]
    served = []
    for call in range(8):
        done = torch.zeros(6, dtype=torch.bool)
        done[call % 4] = True
        comp.compact(done)
        served.append(comp.env_ids.tolist()[0])
    assert served[0] == 5  # waited longest
    assert comp.wait.max().item() <= 2  # nobody waits more than the arrivals ahead of it


def test_clear_pending_forgets_deferred_rows_but_not_the_count():
    comp = ResetRowCompactor(num_envs=5, capacity=1)
    comp.compact(torch.ones(5, dtype=torch.bool))
    comp.clear_pending()
    comp.compact(torch.zeros(5, dtype=torch.bool))
    assert comp.env_ids.tolist() == [5] and not comp.valid.any() and not comp.pending.any()
    assert comp.deferred_count.item() == 4


def test_buffers_keep_their_addresses():
    comp = ResetRowCompactor(num_envs=40, capacity=8)
    names = ["env_ids", "valid", "reset_mask", "pending", "deferred_count"]
    ptrs = {n: getattr(comp, n).data_ptr() for n in names}
    rng = np.random.default_rng(0)
    for _ in range(50):
        comp.compact(torch.from_numpy(rng.random(40) < 0.5))
    assert {n: getattr(comp, n).data_ptr() for n in names} == ptrs


def test_compact_does_no_host_sync():
    rng = np.random.default_rng(5)
    comp, ref = ResetRowCompactor(20, 6), _Reference(20, 6)
    for _ in range(5):
        done = rng.random(20) < 0.5
        mask = torch.from_numpy(done)  # built outside: the audit also rejects tensors made from NumPy data
        with no_host_sync():
            comp.compact(mask)
        _check(comp, ref.compact(done))


def test_compiled_matches_eager():
    rng = np.random.default_rng(3)
    masks = [torch.from_numpy(rng.random(12) < 0.6) for _ in range(4)]
    eager, compiled = ResetRowCompactor(12, 4), ResetRowCompactor(12, 4)
    step = torch.compile(compiled.compact, fullgraph=True, dynamic=False)
    for done in masks:
        eager.compact(done)
        step(done)
        for name in ["env_ids", "valid", "reset_mask", "pending", "deferred_count"]:
            torch.testing.assert_close(getattr(compiled, name), getattr(eager, name), rtol=0, atol=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compact_replays_in_a_cuda_graph():
    comp, ref = ResetRowCompactor(64, 8, "cuda"), _Reference(64, 8)
    done = torch.zeros(64, dtype=torch.bool, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        comp.compact(done)  # warm-up; all False leaves the state as a fresh compactor's
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        comp.compact(done)
    rng = np.random.default_rng(11)
    for _ in range(10):
        mask = rng.random(64) < 0.4
        done.copy_(torch.from_numpy(mask))
        graph.replay()
        _check(comp, ref.compact(mask))


@pytest.mark.parametrize(
    "done,field",
    [
        (torch.zeros(5, dtype=torch.bool), "done"),
        (torch.zeros(4, dtype=torch.float32), "done"),
    ],
)
def test_bad_done_names_field_and_shape(done, field):
    comp = ResetRowCompactor(4, 2)
    with pytest.raises(ValueError, match=rf"{field} must be a bool tensor of shape \(4,\)"):
        comp.compact(done)


@pytest.mark.parametrize("num_envs,capacity,field", [(0, 1, "num_envs"), (4, 0, "capacity")])
def test_bad_sizes_name_the_argument(num_envs, capacity, field):
    with pytest.raises(ValueError, match=field):
        ResetRowCompactor(num_envs, capacity)
