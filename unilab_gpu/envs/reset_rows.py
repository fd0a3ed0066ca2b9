"""Static-shape compaction of the rows that need a reset, oldest request first.

Resetting only the rows whose episode ended keeps the reset cost independent of ``num_envs``,
but "which rows ended" has a data-dependent count, and ``nonzero`` / boolean-mask indexing would
read that count back to the host and give the step a data-dependent shape. Instead, the rows
are packed into a fixed-capacity id buffer with ops whose shapes never change:

1. ``need = done | pending`` (rows deferred by an earlier call are still in line);
2. every needing row gets a priority key: the number of calls it has waited, then the lower row
   id (``key = wait * (num_envs + 1) + num_envs - row``; ``-1`` for rows that need nothing);
3. ``topk(key, capacity)`` picks the rows with the highest keys: a fixed-size output;
4. the picked ids, ascending, padded with ``num_envs`` where fewer rows need a reset.

Rows that needed a reset but did not fit stay ``pending`` and are served first by a later call,
longest-waiting first, so no ended episode is ever dropped or starved: a row can only be passed
by rows that have waited longer, so it waits at most ``ceil(rows ahead of it / capacity)`` calls
(with ``n`` rows needing a reset and no new ones, all are served within ``ceil(n / capacity)``).
Serving by row id alone would let rows with low ids that keep ending overtake a deferred high
row forever.
"""

from __future__ import annotations

import torch


class ResetRowCompactor:
    """Packs the rows to reset into a ``(capacity,)`` id buffer padded with ``num_envs``.

    All buffers are allocated here and only written in place, so their ``data_ptr()`` never
    changes and :meth:`compact` can run inside a CUDA graph or a
    ``torch.compile(fullgraph=True, dynamic=False)`` region.

    Attributes (outputs of the last :meth:`compact`, overwritten by the next one):
        env_ids: ``(capacity,)`` int64, the selected rows (longest-waiting first, see the module
            docstring) in ascending order, then the padding value ``num_envs``. Consumers skip
            padded slots via ``valid`` or route them to a dummy row ``num_envs`` of a
            ``(num_envs + 1, ...)`` buffer.
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
        self.env_ids = torch.full((capacity,), num_envs, dtype=torch.int64, device=self.device)
        self.valid = torch.zeros(capacity, dtype=torch.bool, device=self.device)
        self.reset_mask = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.pending = torch.zeros(num_envs, dtype=torch.bool, device=self.device)
        self.deferred_count = torch.zeros((), dtype=torch.int64, device=self.device)
        self._picks = min(capacity, num_envs)
        self.wait = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        """``(num_envs,)`` int64, calls each pending row has waited so far (0 for the others)."""
        # Tie-break: among rows that waited equally long, the lower id first.
        self._row_order = num_envs - torch.arange(num_envs, dtype=torch.int64, device=self.device)

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
        key = torch.where(need, self.wait * (self.num_envs + 1) + self._row_order, -1)
        top = torch.topk(key, self._picks, sorted=False)
        picked = torch.where(top.values >= 0, top.indices, self.num_envs)
        # Slots past num_envs (capacity > num_envs) keep the padding written at construction.
        self.env_ids[: self._picks].copy_(torch.sort(picked).values)
        self.valid.copy_(self.env_ids < self.num_envs)
        # Keys of needing rows are distinct, so the picked rows are exactly those at or above the
        # lowest picked key (-1 when padding was picked: then every needing row is in).
        selected = need & (key >= top.values.min())
        self.reset_mask.copy_(selected)
        self.pending.copy_(need & ~selected)
        self.wait.copy_(torch.where(self.pending, self.wait + 1, 0))
        self.deferred_count.add_(self.pending.sum())

    def clear_pending(self) -> None:
        """Forgets deferred rows, e.g. after every row was reset at once; keeps ``deferred_count``."""
        self.pending.zero_()
        self.wait.zero_()
