"""Catch host syncs and data-dependent shapes in torch code, on any device, CPU included.

A CUDA host sync (``.item()``, ``if t.any():``, ``t[mask]``, ``nonzero``, a copy to the host...)
stalls the CPU until the GPU queue drains and cannot be recorded in a CUDA graph. On a CPU-only
machine the same code runs fine and fast, so a plain test never notices. :class:`SyncAudit` is a
``TorchDispatchMode`` that inspects every aten op as it is dispatched and raises
:class:`HostSyncError` for the ones that would sync or give a data-dependent output shape on a
GPU, naming the op and the first stack frame outside torch that issued it::

    with no_host_sync():
        env.step(actions)          # raises HostSyncError: aten.nonzero.default ... at env.py:120

Forbidden ops (the reason is part of the error message):

- ``aten._local_scalar_dense``, ``aten.item``, ``aten.is_nonzero``, ``aten.equal``,
  ``aten.allclose``: read a device value into Python (``t.item()``, ``bool(t)``, ``int(t)``,
  ``float(t)``, ``if t.any():``, ``torch.equal``).
- ``aten.nonzero``, ``aten.argwhere``, ``aten.masked_select``, ``aten.unique*``,
  ``aten._unique*``, ``aten.masked_scatter``, ``aten.bincount``: data-dependent output shape or
  read count. ``bincount`` is forbidden even with ``minlength``: the CUDA kernel reads the min
  and max of its input back to the host to validate and size the output; use ``scatter_add_``
  into a fixed-size buffer instead. ``nonzero_static`` is allowed.
- ``aten.index`` / ``aten.index_put(_)`` with a bool or uint8 index tensor (``t[mask]``,
  ``t[mask] = v``): boolean-mask indexing runs ``nonzero`` inside. Integer-tensor indexing is fine.
- ``aten.repeat_interleave`` with tensor repeats and no ``output_size``.
- ``aten.masked_fill`` / ``aten.index_fill`` whose fill value is a tensor on the same device as
  the filled tensor: CUDA kernels call ``value.item()``. Use a Python number or ``torch.where``.
- Copies from a non-CPU device to the CPU (``aten._to_copy`` to CPU, ``aten.copy_`` into a CPU
  tensor): ``.cpu()``, ``.to("cpu")``. On a CPU-only machine every tensor is on the CPU, so this
  check cannot fire there; it guards GPU runs.

Host-to-device copies are forbidden too. They do not stall the host the way a read does, but
each one is a pageable ``cudaMemcpy`` (a sync with the copy engine) on every step, and a CUDA
graph records the source address of the first one only, so later steps silently reuse stale
data:

- ``aten.lift_fresh`` / ``aten.lift_fresh_copy`` of a tensor with at least one dimension: a
  tensor built from Python or NumPy data (``torch.tensor([0, 0, -1])``,
  ``torch.as_tensor(values)``). This is the check that works on a CPU-only machine, where no copy
  crosses devices: build such constants once, at construction. A 0-d ``torch.tensor(3.0)`` is
  not reported: indexed assignment of a Python number (``t[i] = 0.5``) makes the same op with
  its scalar built on the device.
- Copies from the CPU to a non-CPU device (``aten._to_copy`` / ``aten.copy_``):
  ``torch.ones(3).to("cuda")``, ``cuda_tensor.copy_(cpu_tensor)``. Guards GPU runs.

Known blind spots on CPU: ``t.tolist()``, ``t.numpy()``, ``str(t)`` and ``print(t)`` of a CPU
tensor reach no aten op the mode sees, so they are not reported (``f"{t:.2f}"`` is). Ops outside
the ``aten`` namespace (custom ops, Warp kernels) are not judged. A false positive on CPU:
``F.one_hot`` validates its input with ``.item()`` on the CPU (not on CUDA); compare with
``torch.arange`` instead, which is also capturable.

``torch.compile``
-----------------
Dynamo does not trace while a user dispatch mode is active: a compiled function called under
:class:`SyncAudit` runs its original Python eagerly, so the audit sees every op. With
``fullgraph=True`` that eager fallback ends in ``RuntimeError: torch.compile with
fullgraph=True found no compiled frames``. :func:`no_host_sync` therefore also enters
``torch.compiler.set_stance("force_eager")`` (``force_eager=True``, the default), which runs
every compiled function eagerly without that error. The audit checks the Python code the
compiler traces, which is what decides whether the compiled graph has syncs or graph breaks;
it does not inspect Inductor's generated kernels.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Frames in these files are never "the user's": the audit names the first frame outside them.
_TORCH_DIRS = tuple({str(Path(torch.__file__).parent), str(Path(torch.__file__).resolve().parent)})
_INTERNAL_FILES = {__file__, contextlib.__file__}


class HostSyncError(RuntimeError):
    """An op that would synchronize the host with the device ran inside :class:`SyncAudit`."""


@dataclass(frozen=True)
class SyncViolation:
    """One forbidden op: its name (e.g. ``aten.nonzero.default``), why, and where it came from."""

    op: str
    reason: str
    location: str

    @property
    def kind(self) -> str:
        """``"host_to_device"`` for copies and tensors from Python data, else ``"host_sync"``."""
        return "host_to_device" if _HOST_TO_DEVICE in self.reason else "host_sync"

    def __str__(self) -> str:
        return f"{self.op}: {self.reason} (at {self.location})"


_READS_VALUE = "reads a device value into Python (.item(), bool(t), int(t), float(t), `if t.any():`)"
_DYNAMIC_SHAPE = "output shape depends on tensor values (host sync, not capturable)"
_COMPACT_HINT = "; use a fixed-size selection such as topk (see envs.reset_rows), cumsum + scatter_, or nonzero_static"


def _bound_args(func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> dict[str, Any]:
    """The op's arguments by schema name (positional and keyword alike)."""
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args, strict=False))
    bound.update(kwargs)
    return bound


def _has_mask_index(a: dict[str, Any]) -> bool:
    indices = a.get("indices") or ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)


def _is_device_to_host(src: Any, dst_device: Any) -> bool:
    return (
        isinstance(src, torch.Tensor)
        and src.device.type != "cpu"
        and dst_device is not None
        and torch.device(dst_device).type == "cpu"
    )


def _mask_index(a: dict[str, Any]) -> str | None:
    if _has_mask_index(a):
        return "boolean-mask indexing t[mask] runs nonzero; use torch.where or integer indices"
    return None


def _mask_put(a: dict[str, Any]) -> str | None:
    if _has_mask_index(a):
        return "boolean-mask assignment t[mask] = v runs nonzero; use torch.where"
    return None


def _repeat_without_size(a: dict[str, Any]) -> str | None:
    if isinstance(a.get("repeats"), torch.Tensor) and a.get("output_size") is None:
        return _DYNAMIC_SHAPE + "; pass output_size="
    return None


def _device_fill_value(a: dict[str, Any]) -> str | None:
    # A fill value on the CPU is read without a sync even for a CUDA tensor; one on the tensor's
    # own device is not (and on a CPU-only run, both are on the CPU, as they would be on the GPU).
    value, target = a.get("value"), a.get("self")
    if isinstance(value, torch.Tensor) and isinstance(target, torch.Tensor) and value.device == target.device:
        return "a tensor fill value is read with .item() on CUDA; pass a Python number or use torch.where"
    return None


def _is_host_to_device(src: Any, dst_device: Any) -> bool:
    return (
        isinstance(src, torch.Tensor)
        and src.device.type == "cpu"
        and dst_device is not None
        and torch.device(dst_device).type not in ("cpu", "meta")
    )


_HOST_TO_DEVICE = "host-to-device copy"
_TO_DEVICE = f"a {_HOST_TO_DEVICE} on every step (and a CUDA graph replays the first copy's source)"


def _to_copy(a: dict[str, Any]) -> str | None:
    if _is_device_to_host(a.get("self"), a.get("device")):
        return "copies device memory to the host"
    if _is_host_to_device(a.get("self"), a.get("device")):
        return _TO_DEVICE + "; build the tensor on the device once, at construction"
    return None


def _copy(a: dict[str, Any]) -> str | None:
    dst = a.get("self")
    if not isinstance(dst, torch.Tensor):
        return None
    if _is_device_to_host(a.get("src"), dst.device):
        return "copies device memory to the host"
    if _is_host_to_device(a.get("src"), dst.device):
        return _TO_DEVICE + "; keep the source on the device"
    return None


def _from_python(a: dict[str, Any]) -> str | None:
    # 0-d lifts also come from `t[i] = 0.5`, which makes its scalar on the device (no copy).
    value = a.get("self")
    if isinstance(value, torch.Tensor) and value.ndim > 0:
        return (
            f"builds a tensor from Python/NumPy data (torch.tensor, torch.as_tensor): a {_HOST_TO_DEVICE} on "
            "every step on a GPU; build it once at construction"
        )
    return None


# Rules by op packet name (in-place variants have their own packet): a reason, or a function of
# the bound arguments that returns a reason when this call is forbidden and None when it is fine.
_Rule = str | Callable[[dict[str, Any]], str | None]
_RULES: dict[str, _Rule] = {
    "_local_scalar_dense": _READS_VALUE,
    "item": _READS_VALUE,
    "is_nonzero": _READS_VALUE,
    "equal": "returns a Python bool computed on the device",
    "allclose": "returns a Python bool computed on the device",
    "nonzero": _DYNAMIC_SHAPE + _COMPACT_HINT,
    "argwhere": _DYNAMIC_SHAPE + _COMPACT_HINT,
    "masked_select": _DYNAMIC_SHAPE + "; use torch.where",
    "masked_scatter": "reads as many source elements as the mask has True values; use torch.where",
    "masked_scatter_": "reads as many source elements as the mask has True values; use torch.where",
    "bincount": "the CUDA kernel reads min/max of its input to the host; scatter_add_ into a fixed buffer",
    "index": _mask_index,
    "index_put": _mask_put,
    "index_put_": _mask_put,
    "_index_put_impl": _mask_put,
    "_index_put_impl_": _mask_put,
    "repeat_interleave": _repeat_without_size,
    "masked_fill": _device_fill_value,
    "masked_fill_": _device_fill_value,
    "index_fill": _device_fill_value,
    "index_fill_": _device_fill_value,
    "_to_copy": _to_copy,
    "copy": _copy,
    "copy_": _copy,
    "lift_fresh": _from_python,
    "lift_fresh_copy": _from_python,
}


def _rule(packet: str) -> _Rule | None:
    if packet in _RULES:
        return _RULES[packet]
    if packet.lstrip("_").startswith("unique"):  # unique, unique_dim, unique_consecutive, _unique2
        return _DYNAMIC_SHAPE
    return None


def _user_location() -> str:
    """``file:line in function: code`` of the innermost frame outside torch, contextlib and this file."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        internal = filename in _INTERNAL_FILES or filename.startswith(_TORCH_DIRS + ("<frozen",))
        if not internal:
            code = linecache.getline(filename, frame.f_lineno).strip()
            return f"{filename}:{frame.f_lineno} in {frame.f_code.co_name}" + (f": {code}" if code else "")
        frame = frame.f_back
    return "<unknown>"


def _op_names(op: str | torch._ops.OpOverload | torch._ops.OpOverloadPacket) -> set[str]:
    """Names an allowlist entry matches: ``"nonzero"``, ``"aten.nonzero"``, ``"aten.nonzero.default"``."""
    if isinstance(op, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return {str(op)}
    if not isinstance(op, str) or not op:
        raise TypeError(f"allow entries must be op names or aten ops, got {op!r}")
    return {op if op.startswith("aten.") else f"aten.{op}"}


class SyncAudit(TorchDispatchMode):
    """Dispatch mode that rejects host-syncing and data-dependent-shape ops.

    Args:
        allow: ops the caller knows are fine here, as names (``"nonzero"``, ``"aten.nonzero"``,
            ``"aten.nonzero.default"``) or aten op objects (``torch.ops.aten.nonzero``). A
            packet name allows all its overloads.
        record: if ``True``, collect violations in :attr:`violations` instead of raising at the
            first one (to list every sync in a step at once).
    """

    def __init__(
        self,
        allow: Iterable[str | torch._ops.OpOverload | torch._ops.OpOverloadPacket] = (),
        record: bool = False,
    ) -> None:
        super().__init__()
        self.allowed: set[str] = set().union(*(_op_names(op) for op in allow))
        self.record = record
        self.violations: list[SyncViolation] = []

    def check(self, func: torch._ops.OpOverload, args: tuple, kwargs: dict) -> SyncViolation | None:
        """The violation this call would be, or ``None`` if it is allowed."""
        if func.namespace != "aten":  # custom ops (e.g. other libraries') are not judged
            return None
        packet = func.overloadpacket.__name__
        rule = _rule(packet)
        if rule is None or {str(func), f"aten.{packet}"} & self.allowed:
            return None
        reason = rule if isinstance(rule, str) else rule(_bound_args(func, args, kwargs))
        if reason is None:
            return None
        return SyncViolation(op=str(func), reason=reason, location=_user_location())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        violation = self.check(func, args, kwargs)
        if violation is not None:
            if not self.record:
                raise HostSyncError(f"host sync in audited code: {violation}")
            self.violations.append(violation)
        return func(*args, **kwargs)


@contextlib.contextmanager
def no_host_sync(
    allow: Iterable[str | torch._ops.OpOverload | torch._ops.OpOverloadPacket] = (),
    *,
    record: bool = False,
    force_eager: bool = True,
) -> Iterator[SyncAudit]:
    """Context in which host syncs raise :class:`HostSyncError` (see :class:`SyncAudit`).

    Args:
        allow: ops to let through (see :class:`SyncAudit`).
        record: collect violations in the yielded audit's ``violations`` instead of raising.
        force_eager: run ``torch.compile``d functions eagerly so the audit sees their ops and
            ``fullgraph=True`` functions do not fail (see the module docstring).
    """
    stance = torch.compiler.set_stance("force_eager") if force_eager else contextlib.nullcontext()
    with stance, SyncAudit(allow, record=record) as audit:
        yield audit
