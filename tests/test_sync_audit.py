"""Host-sync audit: every forbidden pattern is caught with op and line, allowed patterns pass."""

import numpy as np
import pytest
import torch

from unilab_gpu.utils.sync_audit import HostSyncError, SyncAudit, no_host_sync

T = torch.arange(6.0)
MASK = T > 2.5
IDX = torch.tensor([4, 0, 2])
REPEATS = torch.tensor([1, 0, 2, 1, 0, 1])
PERMUTATION = torch.tensor([2, 0, 1])


def _item():
    return T[1].item()


def _if_any():
    if MASK.any():
        return 1
    return 0


def _float():
    return float(T.sum())


def _mask_index():
    return T[MASK]


def _mask_assign():
    t = T.clone()
    t[MASK] = 0.0
    return t


def _nonzero():
    return torch.nonzero(MASK)


def _where_one_arg():
    return torch.where(MASK)


def _unique():
    return T.unique()


def _unique_consecutive():
    return T.unique_consecutive()


def _repeat_interleave():
    return T.repeat_interleave(REPEATS)


def _masked_select():
    return T.masked_select(MASK)


def _equal():
    return torch.equal(T, T)


def _bincount():
    return torch.bincount(IDX, minlength=8)


def _allclose():
    return torch.allclose(T, T)


def _index_fill_tensor_value():
    return T.clone().index_fill_(0, IDX, T[0])


def _masked_fill_tensor_value():
    return T.masked_fill(MASK, T[0])


def _device_to_host_copy():
    # A meta tensor stands in for a GPU one: the copy to the CPU is rejected before it runs.
    return torch.empty(3, device="meta").cpu()


def _copy_into_host_tensor():
    return torch.empty(3).copy_(torch.empty(3, device="meta"))


def _tensor_from_python_list():
    return T * torch.tensor([0.0, 0.0, -1.0, 0.0, 0.0, 1.0])


def _tensor_from_numpy():
    return torch.as_tensor(np.arange(6.0, dtype=np.float32)) + T


FORBIDDEN = [
    (_item, "aten._local_scalar_dense"),
    (_if_any, "aten._local_scalar_dense"),
    (_float, "aten._local_scalar_dense"),
    (_mask_index, "aten.index.Tensor"),
    (_mask_assign, "aten.index_put_"),
    (_nonzero, "aten.nonzero"),
    (_where_one_arg, "aten.nonzero"),
    (_unique, "aten._unique2"),
    (_unique_consecutive, "aten.unique_consecutive"),
    (_repeat_interleave, "aten.repeat_interleave.Tensor"),
    (_masked_select, "aten.masked_select"),
    (_equal, "aten.equal"),
    (_bincount, "aten.bincount"),
    (_allclose, "aten.allclose"),
    (_masked_fill_tensor_value, "aten.masked_fill.Tensor"),
    (_index_fill_tensor_value, "aten.index_fill_.int_Tensor"),
    (_device_to_host_copy, "aten._to_copy"),
    (_copy_into_host_tensor, "aten.copy_"),
    (_tensor_from_python_list, "aten.lift_fresh"),
    (_tensor_from_numpy, "aten.lift_fresh"),
]


@pytest.mark.parametrize("fn,op", FORBIDDEN, ids=[f.__name__ for f, _ in FORBIDDEN])
def test_forbidden_pattern_raises_naming_op_and_user_frame(fn, op):
    with pytest.raises(HostSyncError) as info, no_host_sync():
        fn()
    message = str(info.value)
    assert op in message
    assert "test_sync_audit.py:" in message and f"in {fn.__name__}" in message


def _masked_fill_number():
    return T.masked_fill(MASK, -1.0)


ALLOWED = [
    (lambda: torch.where(MASK, T, -T), [0.0, -1.0, -2.0, 3.0, 4.0, 5.0]),
    (lambda: T.index_select(0, IDX), [4.0, 0.0, 2.0]),
    (lambda: T[IDX], [4.0, 0.0, 2.0]),
    (lambda: torch.zeros(3).scatter_(0, PERMUTATION, T[:3]), [1.0, 2.0, 0.0]),
    (lambda: torch.cumsum(MASK, 0), [0, 0, 0, 1, 2, 3]),
    (lambda: T.repeat_interleave(REPEATS, output_size=5), [0.0, 2.0, 2.0, 3.0, 5.0]),
    (lambda: T[:2].repeat_interleave(2), [0.0, 0.0, 1.0, 1.0]),
    (lambda: torch.nonzero_static(MASK, size=4, fill_value=-1).flatten(), [3, 4, 5, -1]),
    (_masked_fill_number, [0.0, 1.0, 2.0, -1.0, -1.0, -1.0]),
    (lambda: torch.empty(3).copy_(T[:3]), [0.0, 1.0, 2.0]),
    (lambda: T[:3].to("cpu", torch.float64), [0.0, 1.0, 2.0]),
]


@pytest.mark.parametrize("fn,expected", ALLOWED)
def test_allowed_patterns_pass_and_compute_the_same(fn, expected):
    with no_host_sync():
        out = fn()
    assert out.tolist() == expected


def test_allowlist_lets_named_ops_through_only():
    with no_host_sync(allow=["nonzero"]):
        assert torch.nonzero(MASK).flatten().tolist() == [3, 4, 5]
    with no_host_sync(allow=[torch.ops.aten.nonzero.default]):
        torch.nonzero(MASK)
    with pytest.raises(HostSyncError, match="_local_scalar_dense"), no_host_sync(allow=["aten.nonzero"]):
        _item()
    with pytest.raises(TypeError, match="allow entries"):
        SyncAudit(allow=[3])


def test_record_mode_lists_every_violation_in_order():
    with no_host_sync(record=True) as audit:
        _nonzero()
        _item()
        torch.where(MASK, T, 0.0)
    assert [v.op for v in audit.violations] == ["aten.nonzero.default", "aten._local_scalar_dense.default"]
    assert all("test_sync_audit.py" in v.location for v in audit.violations)


def test_compiled_functions_are_audited_eagerly():
    def clean(x, m):
        return torch.where(m, x * 2.0, x).cumsum(0)

    def syncing(x):
        return x * x.sum().item()

    # backend="eager" keeps the test fast; Dynamo's handling of dispatch modes is what matters.
    clean_c = torch.compile(clean, fullgraph=True, dynamic=False, backend="eager")
    syncing_c = torch.compile(syncing, dynamic=False, backend="eager")
    expected = clean(T, MASK)
    torch.testing.assert_close(clean_c(T, MASK), expected)  # compiled once outside the audit
    syncing_c(T)
    with no_host_sync():
        out = clean_c(T, MASK)
    torch.testing.assert_close(out, expected)
    with pytest.raises(HostSyncError, match="in syncing"), no_host_sync():
        syncing_c(T)
    # Without force_eager it depends on torch: 2.13's Dynamo skips the frame while a dispatch mode is
    # active and fullgraph=True then refuses to run it; 2.11 runs the compiled graph. force_eager
    # (the default) gives the same eager audit on both.
    if torch.__version__ >= (2, 13):
        with pytest.raises(RuntimeError, match="fullgraph"), no_host_sync(force_eager=False):
            clean_c(T, MASK)
    else:
        with no_host_sync(force_eager=False):
            out = clean_c(T, MASK)
        torch.testing.assert_close(out, expected)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_real_device_syncs_are_caught_on_cuda():
    t = torch.arange(3.0, device="cuda")
    with pytest.raises(HostSyncError, match="aten._to_copy"), no_host_sync():
        t.cpu()
    with pytest.raises(HostSyncError, match="aten.copy_"), no_host_sync():
        torch.empty(3).copy_(t)
    with pytest.raises(HostSyncError, match="aten._local_scalar_dense"), no_host_sync():
        t[0].item()
    with pytest.raises(HostSyncError, match="aten._to_copy.*host-to-device copy"), no_host_sync():
        torch.ones(3).to("cuda")
    with pytest.raises(HostSyncError, match="aten.copy_.*host-to-device copy"), no_host_sync():
        t.copy_(torch.ones(3))
    seven = torch.full((), 7.0)
    with no_host_sync():
        out = t.masked_fill(t > 0.5, seven)  # a CPU fill value is read without a sync
    assert out.tolist() == [0.0, 7.0, 7.0]


def test_violations_say_whether_they_read_back_or_copy_to_the_device():
    with no_host_sync(record=True) as audit:
        _item()
        _tensor_from_python_list()
        _nonzero()
    assert [v.kind for v in audit.violations] == ["host_sync", "host_to_device", "host_sync"]
