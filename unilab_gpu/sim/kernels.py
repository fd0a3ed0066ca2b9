"""Warp kernels the simulator adds on top of MJWarp.

All of them are launched on the simulator's device and stream, so they can sit inside the same
CUDA graph as MJWarp's own kernels and the torch manager code.
"""

from __future__ import annotations

import warp as wp


@wp.kernel
def body_link_velocity(
    cvel: wp.array2d(dtype=wp.spatial_vector),
    subtree_com: wp.array2d(dtype=wp.vec3),
    xpos: wp.array2d(dtype=wp.vec3),
    body_rootid: wp.array(dtype=int),
    lin_vel_out: wp.array2d(dtype=wp.vec3),
    ang_vel_out: wp.array2d(dtype=wp.vec3),
):
    """World-frame velocity of each body's origin.

    MuJoCo stores ``cvel`` as (angular, linear) about the subtree centre of mass of the body's
    root; moving the reference point to the body origin adds ``omega x (xpos - com)``.
    """
    world, body = wp.tid()
    v = cvel[world, body]
    omega = wp.vec3(v[0], v[1], v[2])
    lin = wp.vec3(v[3], v[4], v[5])
    offset = xpos[world, body] - subtree_com[world, body_rootid[body]]
    lin_vel_out[world, body] = lin + wp.cross(omega, offset)
    ang_vel_out[world, body] = omega


@wp.kernel
def write_rows(
    env_ids: wp.array(dtype=wp.int64),
    qpos_in: wp.array2d(dtype=float),
    qvel_in: wp.array2d(dtype=float),
    num_envs: int,
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    qacc_warmstart: wp.array2d(dtype=float),
    qfrc_applied: wp.array2d(dtype=float),
    xfrc_applied: wp.array2d(dtype=wp.spatial_vector),
    act: wp.array2d(dtype=float),
    time: wp.array(dtype=float),
):
    """Set qpos/qvel of the listed worlds and clear what carries over between episodes.

    One thread per listed row, so the cost follows the number of rows, not ``num_envs``. Ids
    outside ``[0, num_envs)`` are padding of a fixed-capacity index buffer and are skipped.
    """
    i = wp.tid()
    world_id = env_ids[i]
    if world_id < wp.int64(0) or world_id >= wp.int64(num_envs):
        return
    w = int(world_id)
    for j in range(qpos.shape[1]):
        qpos[w, j] = qpos_in[i, j]
    for j in range(qvel.shape[1]):
        qvel[w, j] = qvel_in[i, j]
        # A stale warm start from the previous episode can cost solver iterations or even
        # converge to a different contact solution, so a reset world starts from zero.
        qacc_warmstart[w, j] = 0.0
        qfrc_applied[w, j] = 0.0
    for b in range(xfrc_applied.shape[1]):
        xfrc_applied[w, b] = wp.spatial_vector()
    for j in range(act.shape[1]):
        act[w, j] = 0.0
    time[w] = 0.0


@wp.kernel
def gather_rows(
    env_ids: wp.array(dtype=wp.int64),
    num_envs: int,
    qpos: wp.array2d(dtype=float),
    qvel: wp.array2d(dtype=float),
    qpos_out: wp.array2d(dtype=float),
    qvel_out: wp.array2d(dtype=float),
):
    """Copy the listed worlds' state into a small scratch batch (padding rows read world 0)."""
    i = wp.tid()
    w = int(env_ids[i])
    if w < 0 or w >= num_envs:
        w = 0
    for j in range(qpos.shape[1]):
        qpos_out[i, j] = qpos[w, j]
    for j in range(qvel.shape[1]):
        qvel_out[i, j] = qvel[w, j]


@wp.kernel
def scatter_kinematics(
    env_ids: wp.array(dtype=wp.int64),
    num_envs: int,
    xpos_in: wp.array2d(dtype=wp.vec3),
    xquat_in: wp.array2d(dtype=wp.quat),
    xmat_in: wp.array2d(dtype=wp.mat33),
    lin_vel_in: wp.array2d(dtype=wp.vec3),
    ang_vel_in: wp.array2d(dtype=wp.vec3),
    site_xpos_in: wp.array2d(dtype=wp.vec3),
    site_xmat_in: wp.array2d(dtype=wp.mat33),
    sensordata_in: wp.array2d(dtype=float),
    xpos: wp.array2d(dtype=wp.vec3),
    xquat: wp.array2d(dtype=wp.quat),
    xmat: wp.array2d(dtype=wp.mat33),
    lin_vel: wp.array2d(dtype=wp.vec3),
    ang_vel: wp.array2d(dtype=wp.vec3),
    site_xpos: wp.array2d(dtype=wp.vec3),
    site_xmat: wp.array2d(dtype=wp.mat33),
    sensordata: wp.array2d(dtype=float),
):
    """Write kinematics computed on the scratch batch back into the listed worlds."""
    i = wp.tid()
    world_id = env_ids[i]
    if world_id < wp.int64(0) or world_id >= wp.int64(num_envs):
        return
    w = int(world_id)
    for b in range(xpos.shape[1]):
        xpos[w, b] = xpos_in[i, b]
        xquat[w, b] = xquat_in[i, b]
        xmat[w, b] = xmat_in[i, b]
        lin_vel[w, b] = lin_vel_in[i, b]
        ang_vel[w, b] = ang_vel_in[i, b]
    for s in range(site_xpos.shape[1]):
        site_xpos[w, s] = site_xpos_in[i, s]
        site_xmat[w, s] = site_xmat_in[i, s]
    for j in range(sensordata.shape[1]):
        sensordata[w, j] = sensordata_in[i, j]


@wp.kernel
def body_contact_flags(
    nacon: wp.array(dtype=int),
    contact_worldid: wp.array(dtype=int),
    contact_geom: wp.array(dtype=wp.vec2i),
    contact_dist: wp.array(dtype=float),
    geom_bodyid: wp.array(dtype=int),
    flags_out: wp.array2d(dtype=float),
):
    """Mark both bodies of every touching contact (distance <= 0) in its world.

    One thread per contact slot; slots past the detected count return at once, so the launch has
    a static size (``naconmax``). ``flags_out`` must be zeroed before.
    """
    c = wp.tid()
    if c >= nacon[0] or contact_dist[c] > 0.0:
        return
    w = contact_worldid[c]
    geoms = contact_geom[c]
    if geoms[0] >= 0:
        flags_out[w, geom_bodyid[geoms[0]]] = 1.0
    if geoms[1] >= 0:
        flags_out[w, geom_bodyid[geoms[1]]] = 1.0
