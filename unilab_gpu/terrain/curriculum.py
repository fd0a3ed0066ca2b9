"""The terrain curriculum: rows move to harder levels as they succeed, after legged_gym / Isaac Lab."""

from __future__ import annotations

import torch


class TerrainCurriculum:
    """At a row's reset, from the episode that just ended:

    - it walked out of its sub-terrain's middle, farther than ``promote_distance`` (default half
      the sub-terrain's shorter side) from its origin: one level up, because that ground no longer
      held it back (legged_gym's and Isaac Lab's rule). With ``promote_ratio``, the distance is
      relative to what its commands asked: ``clamp(promote_ratio · |commanded displacement|,
      min_promote_distance, promote_distance)``, so a row given slow commands can be promoted too;
    - otherwise, if the episode ended in a failure (a fall), or (with ``demote_on_time_out``) the
      row got less than ``demote_ratio`` of the way its commands asked (its displacement against
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
      demote_on_time_out: whether a time-out that fell short of the commands moves a row down.
      promote_ratio: share of the commanded displacement that promotes; ``None``: the fixed distance.
      min_promote_distance: metres, the least walk that promotes with ``promote_ratio``.
    """

    def __init__(
        self,
        root_pos_w: torch.Tensor,
        episode_length: torch.Tensor,
        commanded_displacement: torch.Tensor,
        promote_distance: float,
        demote_ratio: float,
        demote_on_time_out: bool = True,
        promote_ratio: float | None = None,
        min_promote_distance: float = 1.0,
    ) -> None:
        self.root_pos_w = root_pos_w
        self.episode_length = episode_length
        self.commanded_displacement = commanded_displacement
        self.promote_distance = float(promote_distance)
        self.demote_ratio = float(demote_ratio)
        self.demote_on_time_out = bool(demote_on_time_out)
        self.promote_ratio = promote_ratio
        self.min_promote_distance = float(min(min_promote_distance, promote_distance))

    def new_levels(
        self,
        env_ids: torch.Tensor,
        failed: torch.Tensor,
        level: torch.Tensor,
        env_origin: torch.Tensor,
        num_levels: int,
    ) -> torch.Tensor:
        """The levels ``(K,)`` of rows ``env_ids (K,)`` after the rules above, given every row's
        ``level (N,)`` and sub-terrain origin ``env_origin (N, 3)`` and the grid's ``num_levels``;
        ``failed (K,)`` marks the rows whose episode ended in a failure. Padded ids (``N``) read row
        ``N - 1``; the caller writes their result to its dummy row."""
        rows = env_ids.clamp_max(level.shape[0] - 1)
        walked = torch.linalg.vector_norm(self.root_pos_w[rows, :2] - env_origin[rows, :2], dim=1)
        asked = torch.linalg.vector_norm(self.commanded_displacement[rows], dim=1)
        ran = self.episode_length[rows] > 0
        if self.promote_ratio is None:
            up = (walked > self.promote_distance) & ran
        else:
            needed = (self.promote_ratio * asked).clamp(self.min_promote_distance, self.promote_distance)
            up = (walked > needed) & ran
        short = walked < self.demote_ratio * asked
        down = (failed | short if self.demote_on_time_out else failed) & ran & ~up
        moved = level[rows] + up.long() - down.long()
        wrapped = torch.randint_like(moved, num_levels)
        return torch.where(moved >= num_levels, wrapped, moved.clamp_min(0))
