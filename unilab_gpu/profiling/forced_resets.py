"""A termination that ends a fixed number of rows every step, to benchmark the reset path."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


def forced_resets_override(rows_per_step: int) -> str:
    """The Hydra override that adds :class:`ForcedResets` as termination ``forced_resets``."""
    return (
        "+terminations.forced_resets={func: unilab_gpu.profiling.forced_resets.ForcedResets, "
        f"params: {{rows_per_step: {rows_per_step}}}}}"
    )


class ForcedResets:
    """Ends ``rows_per_step`` rows every step: a block of consecutive rows (wrapping around)
    whose start moves by ``rows_per_step`` each call, so consecutive calls pick disjoint rows
    while ``2 * rows_per_step <= num_envs``.

    Static shape and sync-free: the block is ``(row - offset) mod num_envs < rows_per_step``
    with ``offset`` a device counter. Rows beyond the env's reset capacity wait (they are
    deferred, not dropped), so the reset rate is ``min(rows_per_step, reset_capacity)``.
    """

    def __init__(self, env: ManagerBasedRlEnv, rows_per_step: int) -> None:
        n = env.num_envs
        if isinstance(rows_per_step, bool) or not isinstance(rows_per_step, int) or not 0 <= rows_per_step <= n:
            raise ValueError(
                f"terminations.forced_resets.params.rows_per_step must be an int in [0, num_envs={n}], "
                f"got {rows_per_step!r}"
            )
        self.num_envs = n
        self.rows_per_step = rows_per_step
        self._rows = torch.arange(n, device=env.device)
        self._offset = torch.zeros((), dtype=torch.int64, device=env.device)

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """``(num_envs,)`` bool, the rows forced to end this step."""
        ended = torch.remainder(self._rows - self._offset, self.num_envs) < self.rows_per_step
        self._offset.copy_(torch.remainder(self._offset + self.rows_per_step, self.num_envs))
        return ended
