"""Kinematics of a few selected worlds: what ``Simulator.refresh(env_ids)`` runs at a reset.

A full-width refresh costs ``num_envs`` worlds; a reset touches a handful. The scratch batch
computes the kinematics of ``capacity`` listed worlds in a small MJWarp batch of its own and
scatters them back, so the cost follows the number of reset rows, not the number of worlds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp
from mujoco_warp._src.warp_util import mark_batched

from unilab_gpu.sim import kernels


class ScratchBatch:
    """A small MJWarp batch used to compute kinematics for a few selected worlds.

    Scratch world ``i`` computes the kinematics of world ``env_ids[i]``, so it must also read that
    world's model: MJWarp indexes a per-world model field by ``worldid % rows``, and scratch world
    ``i`` would read row ``i``. The scratch batch therefore has its own model, sharing every array
    of the simulator's model except the per-world fields, which get ``capacity`` rows refreshed from
    the listed worlds' rows before each refresh (:meth:`gather_model_rows`).
    """

    def __init__(
        self, mj_model: mujoco.MjModel, model: mjw.Model, capacity: int, batched_model_fields: Sequence[str]
    ) -> None:
        self.capacity = capacity
        # Kinematics only: no contacts or constraints are ever computed here.
        self.data = mjw.make_data(mj_model, nworld=capacity, nconmax=1, njmax=1)
        self.lin_vel = wp.zeros((capacity, mj_model.nbody), dtype=wp.vec3)
        self.ang_vel = wp.zeros((capacity, mj_model.nbody), dtype=wp.vec3)
        rows = {}
        for name in batched_model_fields:
            field = getattr(model, name)
            rows[name] = wp.zeros((capacity, *field.shape[1:]), dtype=field.dtype)
        self.model = dataclasses.replace(model, **rows) if rows else model
        mark_batched(self.model)
        self.model_rows = {name: wp.to_torch(array) for name, array in rows.items()}
        """Per-world model field name -> ``(capacity, ...)`` torch view of the scratch model's rows."""

    def gather_model_rows(self, env_ids: torch.Tensor, model_fields: dict[str, torch.Tensor]) -> None:
        """Copy the per-world model rows of ``env_ids`` into the scratch model (padding ids read row 0).

        Args:
          env_ids: ``(capacity,)`` int64 world ids; ids outside ``[0, num_envs)`` are padding.
          model_fields: the simulator's per-world fields, name -> ``(num_envs, ...)``.
        """
        if not self.model_rows:
            return
        num_envs = next(iter(model_fields.values())).shape[0]
        rows = torch.where((env_ids >= 0) & (env_ids < num_envs), env_ids, torch.zeros_like(env_ids))
        for name, out in self.model_rows.items():
            torch.index_select(model_fields[name], 0, rows, out=out)

    def refresh_into(
        self,
        data: mjw.Data,
        env_ids: torch.Tensor,
        num_envs: int,
        lin_vel: wp.array,
        ang_vel: wp.array,
    ) -> None:
        """Compute kinematics of the worlds ``env_ids`` here and write them back into ``data``."""
        ids = wp.from_torch(env_ids)
        s = self.data
        wp.launch(
            kernels.gather_rows,
            dim=self.capacity,
            inputs=[ids, num_envs, data.qpos, data.qvel],
            outputs=[s.qpos, s.qvel],
        )
        kinematics(self.model, s, self.lin_vel, self.ang_vel)
        wp.launch(
            kernels.scatter_kinematics,
            dim=self.capacity,
            inputs=[
                ids,
                num_envs,
                s.xpos,
                s.xquat,
                s.xmat,
                self.lin_vel,
                self.ang_vel,
                s.site_xpos,
                s.site_xmat,
                s.sensordata,
            ],
            outputs=[
                data.xpos,
                data.xquat,
                data.xmat,
                lin_vel,
                ang_vel,
                data.site_xpos,
                data.site_xmat,
                data.sensordata,
            ],
        )


def kinematics(model: mjw.Model, data: mjw.Data, lin_vel: wp.array, ang_vel: wp.array) -> None:
    """Positions, velocities and sensors from qpos/qvel alone (no collision, no dynamics)."""
    mjw.kinematics(model, data)
    mjw.com_pos(model, data)
    mjw.com_vel(model, data)
    mjw.sensor_pos(model, data)
    mjw.sensor_vel(model, data)
    wp.launch(
        kernels.body_link_velocity,
        dim=(data.nworld, model.nbody),
        inputs=[data.cvel, data.subtree_com, data.xpos, model.body_rootid],
        outputs=[lin_vel, ang_vel],
    )
