"""The terrain curriculum: rows move to harder levels as they succeed, after legged_gym / Isaac Lab."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from unilab_gpu.terrain.terrain import Terrain


class TerrainCurriculum:
    """At a row's reset, from the episode that just ended:

    - it walked out of its sub-terrain's middle, farther than ``promote_distance`` (default half
      the sub-terrain's shorter side) from its origin: one level up, because that ground no longer
      held it back (legged_gym's and Isaac Lab's rule);
    - otherwise, if the episode ended in a failure (a fall), or the row got less than
      ``demote_ratio`` of the way its commands asked (its displacement against
      ``commanded_displacement``, the world-frame ``sum R(yaw) c_xy dt`` over the episode): one
      level down. Comparing displacements, not the commanded speed times the episode length as
      Isaac Lab does, keeps a row that follows turning or changing commands well from being
      demoted because those commands lead it in circles;
    - one level past the top: a uniformly random level, so rows that master the grid keep
      revisiting all of it instead of piling up on the top row; below level 0 it stays at 0.

    A row that has not run an episode since the env was built (``episode_length`` 0) keeps its
    level. Distances are planar, from the row's sub-terrain origin to its root.

    Args:
      root_pos_w: ``(N, 3)`` root positions (the robot's persistent view).
      episode_length: ``(N,)`` int64 steps of each row's episode (the env's buffer; at staging it
        still counts the episode that ended).
      commanded_displacement: ``(N, 2)`` metres each row was asked to move in its episode.
      promote_distance: metres.
      demote_ratio: in ``(0, 1]``.
    """

    def __init__(
        self,
        root_pos_w: torch.Tensor,
        episode_length: torch.Tensor,
        commanded_displacement: torch.Tensor,
        promote_distance: float,
        demote_ratio: float,
    ) -> None:
        self.root_pos_w = root_pos_w
        self.episode_length = episode_length
        self.commanded_displacement = commanded_displacement
        self.promote_distance = float(promote_distance)
        self.demote_ratio = float(demote_ratio)

    def new_levels(self, terrain: Terrain, env_ids: torch.Tensor, failed: torch.Tensor) -> torch.Tensor:
        """The levels ``(K,)`` of rows ``env_ids (K,)`` whose episodes ended in a failure where
        ``failed (K,)`` is set, after the rules above (padded ids read row ``N - 1``; their result
        goes to the dummy row)."""
        rows = env_ids.clamp_max(terrain.num_envs - 1)
        walked = torch.linalg.vector_norm(self.root_pos_w[rows, :2] - terrain.env_origin[rows, :2], dim=1)
        asked = torch.linalg.vector_norm(self.commanded_displacement[rows], dim=1)
        ran = self.episode_length[rows] > 0
        up = (walked > self.promote_distance) & ran
        down = (failed | (walked < self.demote_ratio * asked)) & ran & ~up
        level = terrain.level[rows] + up.long() - down.long()
        wrapped = torch.randint_like(level, terrain.num_levels)
        return torch.where(level >= terrain.num_levels, wrapped, level.clamp_min(0))

    def update(self, terrain: Terrain, env_ids: torch.Tensor, failed: torch.Tensor) -> None:
        """Move the rows ``env_ids`` being reset to their :meth:`new_levels`."""
        terrain.set_row_levels(env_ids, self.new_levels(terrain, env_ids, failed))
