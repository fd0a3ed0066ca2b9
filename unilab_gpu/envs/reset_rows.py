"""Static-shape compaction of the rows that need a reset.

Resetting only the rows whose episode ended keeps the reset cost independent of ``num_envs``,
but "which rows ended" has a data-dependent count, and ``nonzero`` / boolean-mask indexing would
read that count back to the host and give the step a data-dependent shape. Instead, the rows
are packed into a fixed-capacity id buffer with ops whose shapes never change:

1. ``need = done | pending`` (rows deferred by an earlier call come first in line again);
2. ``pos = cumsum(need) - 1`` is each needing row's rank in ascending row order;
3. rows with ``need and pos < capacity`` scatter their id to slot ``pos`` of a
   ``(capacity + 1,)`` buffer; every other row scatters to the extra dump slot ``capacity``;
4. the first ``capacity`` slots are the ids; slots nobody wrote keep the padding ``num_envs``.

Rows that needed a reset but did not fit stay ``pending`` and are reset by a later call, so no
ended episode is ever dropped: with ``n`` rows needing a reset and no new ones, all of them are
served within ``ceil(n / capacity)`` calls.
"""

from __future__ import annotations

import torch


class ResetRowCompactor:
    """Packs the rows to reset into a ``(capacity,)`` id buffer padded with ``num_envs``.

    All buffers are allocated here and only written in place, so their ``data_ptr()`` never
    changes and :meth:`compact` can run inside a CUDA graph or a
    ``torch.compile(fullgraph=True, dynamic=False)`` region.

    Attributes (outputs of the last :meth:`compact`, overwritten by the next one):
        env_ids: ``(capacity,)`` int64, the selected rows in ascending order, then the padding
            value ``num_envs``. Consumers skip padded slots via ``valid`` or route them to a
            dummy row ``num_envs`` of a ``(num_envs + 1, ...)`` buffer.
        valid: ``(capacity,)`` bool, ``True`` for slots that hold a real row id.
        reset_mask: ``(num_envs,)`` bool, rows selected by the last call.
        pending: ``(num_envs,)`` bool, rows that need a reset but did not fit; they are
            selected first by the next call.
        deferred_count: ``()`` int64, running total of row deferrals (a row deferred for
            ``k`` calls counts ``k`` times). Non-zero means ``capacity`` is too small for the
            rate of episode ends; read it when logging, never on the step path.

    Args:
        num_envs: number of rows.
        capacity: number of rows reset at most per call (``>= 1``).
        device: device of all buffers.
    """

    def __init__(self, num_envs: int, capacity: int, device: str | torch.device = "cpu") -> None:
        if not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        self.num_envs = num_envs
        self.capacity = capacity
        self.device = torch.device(device)
        kw = {"device": self.device}
        self.env_ids = torch.full((capacity,), num_envs, dtype=torch.int64, **kw)
        self.valid = torch.zeros(capacity, dtype=torch.bool, **kw)
        self.reset_mask = torch.zeros(num_envs, dtype=torch.bool, **kw)
        self.pending = torch.zeros(num_envs, dtype=torch.bool, **kw)
        self.deferred_count = torch.zeros((), dtype=torch.int64, **kw)
        self._rows = torch.arange(num_envs, dtype=torch.int64, **kw)
        # One slot past the end absorbs the writes of rows that are not selected.
        self._slots = torch.empty(capacity + 1, dtype=torch.int64, **kw)

    def compact(self, done: torch.Tensor) -> None:
        """Selects up to ``capacity`` rows among ``done`` and the pending rows.

        Args:
            done: ``(num_envs,)`` bool, rows whose episode ended at this step. Pending rows
                from earlier calls are added internally; do not pass them again.
        """
        if done.shape != (self.num_envs,) or done.dtype != torch.bool:
            raise ValueError(
                f"done must be a bool tensor of shape ({self.num_envs},), got {done.dtype} of shape {tuple(done.shape)}"
            )
        need = done | self.pending
        pos = torch.cumsum(need, dim=0) - 1
        selected = need & (pos < self.capacity)
        target = torch.where(selected, pos, self.capacity)
        self._slots.fill_(self.num_envs)
        # Several rows write the dump slot; which one wins does not matter, it is never read.
        self._slots.scatter_(0, target, self._rows)
        self.env_ids.copy_(self._slots[: self.capacity])
        self.valid.copy_(self.env_ids < self.num_envs)
        self.reset_mask.copy_(selected)
        self.pending.copy_(need & ~selected)
        self.deferred_count.add_(self.pending.sum())

    def clear_pending(self) -> None:
        """Forgets deferred rows, e.g. after every row was reset at once; keeps ``deferred_count``."""
        self.pending.zero_()
