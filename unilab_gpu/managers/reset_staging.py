"""The state of the rows being reset in the current step, filled in one declared order.

An env step resets at most ``capacity`` rows (the compacted, padded id list). Their new episode
starts are assembled here before they are written to the simulator, by three writers (four on a
generated terrain) that run
in this order, each on top of the previous one:

1. the env (:meth:`ResetStaging.begin`): ``qpos`` = the default pose, ``qvel`` = 0,
   ``episode_failed`` = how each staged row's previous episode ended; on a generated terrain
   (1b, ``Terrain.stage``) the curriculum moves the rows between levels and each row's
   sub-terrain origin is added to its root position;
2. the command terms (``CommandManager.reset(staging)``): a command may overwrite the staged
   state, e.g. the motion command writes the reference pose of the sampled start frame, and may
   read ``episode_failed`` (the adaptive start sampler);
3. the reset events (``EventManager.apply_reset``): they edit the staged state, e.g. add noise
   to the joints or offset the root.

The env then writes ``qpos``/``qvel`` into the worlds of ``env_ids`` and refreshes them. Every
buffer is allocated once and written in place: the step is captured as a CUDA graph, which
records their addresses.
"""

from __future__ import annotations

import torch

from unilab_gpu.managers.row_buffers import rows_with_dummy


class ResetStaging:
    """The staged episode starts of the rows being reset.

    Fields (slot ``i`` is row ``env_ids[i]``; padded slots hold ``env_ids == num_envs`` and are
    skipped when the rows are written):
        env_ids: ``(capacity,)`` int64, the rows being reset, padded with ``num_envs``.
        qpos: ``(capacity, nq)`` float32, their new positions.
        qvel: ``(capacity, nv)`` float32, their new velocities.
        episode_failed: ``(capacity,)`` bool, their previous episode ended by a termination (not
            a time-out); False for padded slots and rows that never ran an episode.

    Args:
      env_ids: the ``(capacity,)`` id buffer to stage (the env's reset-row compactor owns it and
        writes it in place); kept by reference, not copied.
    """

    def __init__(self, num_envs: int, env_ids: torch.Tensor, nq: int, nv: int) -> None:
        capacity, device = env_ids.shape[0], env_ids.device
        self.num_envs = num_envs
        self.env_ids = env_ids
        self.qpos = torch.zeros(capacity, nq, device=device)
        self.qvel = torch.zeros(capacity, nv, device=device)
        self.episode_failed = torch.zeros(capacity, dtype=torch.bool, device=device)
        # How each row's last ended episode ended, (num_envs + 1,): the dummy row answers padded
        # ids. Kept per row because a row deferred past its end is staged a later step.
        self._failed_by_row, _ = rows_with_dummy(num_envs, dtype=torch.bool, device=device)

    @property
    def capacity(self) -> int:
        return self.env_ids.shape[0]

    def record_ends(self, ended: torch.Tensor, terminated: torch.Tensor) -> None:
        """Remember how the rows that ended this step ended (``(num_envs,)`` bool each)."""
        rows = self._failed_by_row[: self.num_envs]
        rows.copy_(torch.where(ended, terminated, rows))

    def begin(self, default_qpos: torch.Tensor) -> None:
        """Step 1 of the order above: the default pose ``(nq,)``, zero velocity, and the staged
        rows' ``episode_failed``."""
        self.qpos.copy_(default_qpos.expand_as(self.qpos))
        self.qvel.zero_()
        self.episode_failed.copy_(self._failed_by_row[self.env_ids])
