"""Quaternion math in torch, **wxyz**, batched over any leading dimensions.

Every function takes and returns tensors whose last dimension holds the quaternion (4), vector (3)
or matrix (3, 3); leading dimensions broadcast. Nothing branches on tensor values in Python
(``torch.where`` picks between the regular and the small-angle formulas), so the functions run
under ``torch.compile(fullgraph=True)`` and inside CUDA graphs without host syncs.

Conventions:

- ``q = (w, x, y, z)`` rotates a vector ``v`` as ``q v q*`` (active rotation, body-to-world for a
  body orientation), like MuJoCo's ``mju_rotVecQuat``.
- ``quat_mul(a, b)`` is the Hamilton product: rotating by ``b`` first, then by ``a``.
- Unit quaternions ``q`` and ``-q`` are the same rotation; :func:`quat_log`, :func:`quat_slerp` and
  :func:`quat_error_magnitude` always take the shortest arc (rotation angle in ``[0, pi]``).
"""

from __future__ import annotations

import torch

# Below this sine of the half angle, the rotation vector uses the first-order series 2 v / w
# instead of v * angle / sin(half angle), whose ratio is 0/0 at the identity.
_SMALL = 1e-8


def quat_normalize(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternion along ``q`` ``(..., 4)``; ``eps`` keeps a zero input finite."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate ``(w, -x, -y, -z)`` of ``q`` ``(..., 4)``: the inverse of a unit quaternion."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``a ⊗ b`` of ``(..., 4)`` quaternions (rotation ``b`` then ``a``)."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_apply(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` ``(..., 3)`` by unit quaternions ``q`` ``(..., 4)`` (leading dims broadcast)."""
    w, u = q[..., :1], q[..., 1:]
    u, v = torch.broadcast_tensors(u, v)
    t = 2.0 * torch.linalg.cross(u, v, dim=-1)
    return v + w * t + torch.linalg.cross(u, t, dim=-1)


def quat_apply_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` ``(..., 3)`` by the inverse of unit quaternions ``q`` ``(..., 4)``."""
    return quat_apply(quat_conjugate(q), v)


def quat_to_rotmat(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``q`` ``(..., 4)``."""
    w, x, y, z = q.unbind(-1)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = (
        1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy),
        2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx),
        2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy),
    )  # fmt: skip
    return torch.stack(rows, dim=-1).reshape(q.shape[:-1] + (3, 3))


def quat_from_rotmat(m: torch.Tensor) -> torch.Tensor:
    """Unit quaternions ``(..., 4)`` with ``w >= 0`` of rotation matrices ``m`` ``(..., 3, 3)``.

    Builds the four candidate solutions of Shepperd's method (each divides by one of
    ``4w², 4x², 4y², 4z²``) and keeps, per matrix, the one with the largest divisor, which is
    always well conditioned.
    """
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    # (4w², 4x², 4y², 4z²) from the trace and the diagonal.
    four_sq = torch.stack((1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22), dim=-1)
    candidates = torch.stack(
        (
            torch.stack((four_sq[..., 0], m21 - m12, m02 - m20, m10 - m01), dim=-1),
            torch.stack((m21 - m12, four_sq[..., 1], m10 + m01, m02 + m20), dim=-1),
            torch.stack((m02 - m20, m10 + m01, four_sq[..., 2], m12 + m21), dim=-1),
            torch.stack((m10 - m01, m20 + m02, m21 + m12, four_sq[..., 3]), dim=-1),
        ),
        dim=-2,
    )  # (..., 4 candidates, 4); candidate k equals 4 q_k q
    best = four_sq.argmax(dim=-1, keepdim=True)
    q = torch.gather(candidates, -2, best[..., None].expand(best.shape + (4,))).squeeze(-2)
    q = quat_normalize(q)
    return torch.where(q[..., :1] < 0, -q, q)


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading-only part of ``q`` ``(..., 4)``: the rotation about world z by its yaw angle.

    The yaw is that of the rotated x axis projected onto the ground plane (the z of a z-y-x
    Euler decomposition), as used for heading-relative reference frames.
    """
    w, x, y, z = q.unbind(-1)
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    zero = torch.zeros_like(yaw)
    return torch.stack((torch.cos(0.5 * yaw), zero, zero, torch.sin(0.5 * yaw)), dim=-1)


def quat_from_angle_axis(angle: torch.Tensor, axis: torch.Tensor) -> torch.Tensor:
    """Rotation by ``angle`` ``(...)`` radians about ``axis`` ``(..., 3)`` (normalized here)."""
    half = 0.5 * angle[..., None]
    axis = axis / axis.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return torch.cat((torch.cos(half), torch.sin(half) * axis), dim=-1)


def quat_exp(rotvec: torch.Tensor) -> torch.Tensor:
    """Unit quaternion ``(..., 4)`` of a rotation vector ``(..., 3)`` (axis times angle, rad)."""
    angle = rotvec.norm(dim=-1, keepdim=True)
    half = 0.5 * angle
    # sin(angle/2)/angle -> 1/2 - angle²/48 as angle -> 0.
    safe = torch.where(angle > _SMALL, angle, torch.ones_like(angle))
    scale = torch.where(angle > _SMALL, torch.sin(half) / safe, 0.5 - angle * angle / 48.0)
    return torch.cat((torch.cos(half), scale * rotvec), dim=-1)


def quat_log(q: torch.Tensor) -> torch.Tensor:
    """Rotation vector ``(..., 3)`` (axis times angle, angle in ``[0, pi]``) of unit ``q`` ``(..., 4)``.

    The SO(3) logarithm along the shortest arc: ``q`` and ``-q`` give the same result.
    """
    q = torch.where(q[..., :1] < 0, -q, q)
    w, v = q[..., :1], q[..., 1:]
    sin_half = v.norm(dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(sin_half, w)
    safe = torch.where(sin_half > _SMALL, sin_half, torch.ones_like(sin_half))
    # angle / sin(half angle) -> 2 / w as the angle -> 0 (w -> 1).
    scale = torch.where(sin_half > _SMALL, angle / safe, 2.0 / w.clamp_min(_SMALL))
    return scale * v


def quat_slerp(q0: torch.Tensor, q1: torch.Tensor, t: torch.Tensor | float) -> torch.Tensor:
    """Spherical linear interpolation from ``q0`` (``t = 0``) to ``q1`` (``t = 1``), shortest arc.

    ``q0``, ``q1``: ``(..., 4)`` unit quaternions; ``t``: a float or a tensor broadcastable to
    ``(...)``. Returns ``q0 ⊗ exp(t · log(q0⁻¹ ⊗ q1))``, unit ``(..., 4)`` (Shoemake, 1985).
    """
    t = torch.as_tensor(t, dtype=q0.dtype, device=q0.device)
    delta = quat_log(quat_mul(quat_conjugate(q0), q1))
    return quat_mul(q0, quat_exp(t[..., None] * delta))


def quat_error_magnitude(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Angle ``(...)`` in ``[0, pi]`` of the rotation ``q1⁻¹ ⊗ q2`` between unit quaternions ``(..., 4)``."""
    return quat_log(quat_mul(quat_conjugate(q1), q2)).norm(dim=-1)


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Quaternion ``(..., 4)`` of extrinsic x-y-z Euler angles ``(...)``: ``R = Rz(yaw) Ry(pitch) Rx(roll)``.

    Roll about world x first, then pitch about world y, then yaw about world z (MuJoCo's
    ``mju_euler2Quat(.., "XYZ")``, equal to intrinsic z-y'-x'').
    """
    cr, sr = torch.cos(0.5 * roll), torch.sin(0.5 * roll)
    cp, sp = torch.cos(0.5 * pitch), torch.sin(0.5 * pitch)
    cy, sy = torch.cos(0.5 * yaw), torch.sin(0.5 * yaw)
    return torch.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        dim=-1,
    )
