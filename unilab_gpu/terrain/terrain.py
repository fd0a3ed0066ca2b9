"""The generated ground of an env on its device: heights, sub-terrain origins and each row's place.

The terrain is one MuJoCo heightfield (``terrain.scene``), so the ground height under any point is
a function of the height grid alone: MuJoCo splits every grid cell into two triangles along the
diagonal from sample ``(i, j)`` to ``(i + 1, j + 1)``, and a vertical ray hits the triangle under
it. :meth:`Terrain.heights_at` evaluates exactly that surface with a gather and a few
multiply-adds, so height scans and ground-relative heights need no ray cast, no Warp launch and no
host read: they run inside the compiled observation and termination regions of the step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.row_buffers import rows_with_dummy

if TYPE_CHECKING:
    from unilab_gpu.managers.env_view import Ground
    from unilab_gpu.managers.reset_staging import ResetStaging
    from unilab_gpu.terrain.curriculum import TerrainCurriculum
    from unilab_gpu.terrain.generator import TerrainGrid


class Terrain:
    """The terrain of ``num_envs`` rows on ``device``.

    Every row stands on one sub-terrain: ``level (N,)`` (grid row, the difficulty) and
    ``column (N,)`` (grid column, the sub-terrain type; row ``i`` of ``N`` gets column
    ``floor(i C / N)`` of ``C``: equal blocks of rows per column, and fewer rows than columns
    still spread over the whole width, so over every type). ``env_origin (N, 3)`` is the spawn point of that
    sub-terrain (its centre and the ground height there); the env adds it to the staged root
    position of every reset row (:meth:`stage`), after a curriculum moved rows between levels.
    Rows start on levels drawn uniformly in ``[0, max_initial_level]``.

    Attributes (persistent buffers, written in place):
      heights: ``(ny, nx)`` float32 metres, row ``i`` at ``y = y_min + i h``, column ``j`` at
        ``x = x_min + j h``.
      origins: ``(num_levels, num_cols, 3)`` spawn points of the sub-terrains.
      level, column: ``(N,)`` int64. env_origin: ``(N, 3)``.
      mean_level: ``()`` float, the mean of ``level`` (a training statistic).
      level_fraction: ``()`` float, ``mean_level`` over the mean level a policy that is promoted
        at every episode would hold under the curriculum's re-leveling (past the top, a uniformly
        random level): ``2 (L - 1) / 3`` of ``L`` levels, not ``L - 1``, since such a row climbs
        from a random level back to the top and level ``k`` is visited ``(k + 1) / L`` times per
        climb. 1 is the most a curriculum can show (1 on a one-level grid).

    Args:
      grid: the generated terrain (``terrain.generator.generate_terrain``).
      num_envs: rows.
      device: torch device of the buffers.
      max_initial_level: highest level a row starts on (clamped to the grid).
    """

    def __init__(self, grid: TerrainGrid, num_envs: int, device: torch.device, max_initial_level: int) -> None:
        self.grid = grid
        self.num_envs = num_envs
        self.horizontal_scale = float(grid.horizontal_scale)
        self.x_min, self.y_min = float(grid.x_min), float(grid.y_min)
        self.heights = torch.as_tensor(grid.heights, dtype=torch.float32, device=device).contiguous()
        self.num_rows, self.num_cols_samples = self.heights.shape
        self.origins = torch.as_tensor(grid.origins, dtype=torch.float32, device=device).contiguous()
        self.num_levels, self.num_cols = self.origins.shape[:2]
        self._level, self.level = rows_with_dummy(num_envs, dtype=torch.int64, device=device)
        self._column, self.column = rows_with_dummy(num_envs, dtype=torch.int64, device=device)
        self._origin, self.env_origin = rows_with_dummy(num_envs, 3, device=device)
        self.mean_level = torch.zeros((), device=device)
        self.level_fraction = torch.zeros((), device=device)
        self._sustainable_level = 2.0 * (self.num_levels - 1) / 3.0
        self.curriculum: TerrainCurriculum | None = None
        """Moves rows between levels at their resets; set by the env once the commands exist."""
        top = min(max(int(max_initial_level), 0), self.num_levels - 1)
        self.level.copy_(torch.randint(0, top + 1, (num_envs,), device=device))
        self.column.copy_(
            torch.div(torch.arange(num_envs, device=device) * self.num_cols, num_envs, rounding_mode="floor")
        )
        self._refresh_origins()

    # ------------------------------------------------------------------------------------------
    # Step path: static shapes, no host reads.

    def heights_at(self, xy: torch.Tensor) -> torch.Tensor:
        """Ground height ``(...)`` under world points ``xy (..., 2)``: MuJoCo's heightfield surface
        (the cell's triangle under the point); points off the grid read its edge, and a NaN
        coordinate reads the grid's first sample line."""
        h = self.horizontal_scale
        # A diverged row's NaN position must still index inside the grid (NaN cast to int64 is out
        # of bounds: an IndexError on the CPU, an illegal address in a CUDA graph); the health
        # check resets that row at this step's end, so the height it reads does not matter.
        gx = torch.nan_to_num((xy[..., 0] - self.x_min) / h).clamp(0.0, self.num_cols_samples - 1.0)
        gy = torch.nan_to_num((xy[..., 1] - self.y_min) / h).clamp(0.0, self.num_rows - 1.0)
        j = gx.floor().clamp_max(self.num_cols_samples - 2).long()
        i = gy.floor().clamp_max(self.num_rows - 2).long()
        u, v = gx - j, gy - i
        flat = self.heights.view(-1)
        row = i * self.num_cols_samples
        z00 = flat[row + j]
        z01 = flat[row + j + 1]
        z10 = flat[row + self.num_cols_samples + j]
        z11 = flat[row + self.num_cols_samples + j + 1]
        # Below the diagonal (u >= v): triangle (00, 01, 11); above it: (00, 10, 11).
        lower = z00 + u * (z01 - z00) + v * (z11 - z01)
        upper = z00 + u * (z11 - z10) + v * (z10 - z00)
        return torch.where(u >= v, lower, upper)

    def stage(self, staging: ResetStaging) -> None:
        """Step 1b of ``managers.reset_staging``, after the default pose: the curriculum (if any)
        moves the staged rows between levels, then every staged row is put on its sub-terrain (its
        origin added to the staged root position: the default pose stands at the world origin)."""
        if self.curriculum is not None:
            ids = staging.env_ids
            moved = self.curriculum.new_levels(
                ids, staging.episode_failed, self.level, self.env_origin, self.num_levels
            )
            self.set_row_levels(ids, moved)
        staging.qpos[:, 0:3].add_(self._origin[staging.env_ids])

    def set_row_levels(self, env_ids: torch.Tensor, level: torch.Tensor) -> None:
        """Move rows ``env_ids (K,)`` (padded with ``num_envs``: the dummy row absorbs those) to
        ``level (K,)``, already within ``[0, num_levels)``."""
        self._level.index_copy_(0, env_ids, level)
        self._origin.index_copy_(0, env_ids, self.origins[level, self._column[env_ids]])
        self._refresh_mean_level()

    # ------------------------------------------------------------------------------------------
    # Cold path.

    def set_levels(self, level: torch.Tensor) -> None:
        """Set every row's level ``(N,)`` (a resumed curriculum); rows move at their next reset."""
        self.level.copy_(level.clamp(0, self.num_levels - 1))
        self._refresh_origins()

    def _refresh_origins(self) -> None:
        self.env_origin.copy_(self.origins[self.level, self.column])
        self._refresh_mean_level()

    def _refresh_mean_level(self) -> None:
        self.mean_level.copy_(self.level.float().mean())
        if self._sustainable_level > 0:
            self.level_fraction.copy_(self.mean_level / self._sustainable_level)
        else:
            self.level_fraction.fill_(1.0)


def ground_height(terrain: Ground | None, xy: torch.Tensor) -> torch.Tensor:
    """Ground height under ``xy (..., 2)``: the terrain's, or 0 on the flat floor (no terrain)."""
    if terrain is None:
        return torch.zeros_like(xy[..., 0])
    return terrain.heights_at(xy)
