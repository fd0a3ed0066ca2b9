"""Quaternion math against MuJoCo C (mju_*) and NumPy hand computations on random batches."""

import math

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.utils import rotations as R

N = 64
RNG = np.random.default_rng(0)


def _random_quats(n: int, rng: np.random.Generator = RNG) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def _mj_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros(4)
    mujoco.mju_mulQuat(out, a, b)
    return out


def _mj_sub(qa: np.ndarray, qb: np.ndarray) -> np.ndarray:
    """MuJoCo's rotation vector r with qb * quat(r) = qa."""
    out = np.zeros(3)
    mujoco.mju_subQuat(out, qa, qb)
    return out


def test_mul_matches_mujoco():
    a, b = _random_quats(N), _random_quats(N)
    expected = np.stack([_mj_mul(x, y) for x, y in zip(a, b, strict=True)])
    np.testing.assert_allclose(R.quat_mul(_t(a), _t(b)).numpy(), expected, atol=1e-12)


def test_apply_and_inverse_match_mujoco():
    q, v = _random_quats(N), RNG.normal(size=(N, 3))
    expected = np.zeros((N, 3))
    for i in range(N):
        mujoco.mju_rotVecQuat(expected[i], v[i], q[i])
    np.testing.assert_allclose(R.quat_apply(_t(q), _t(v)).numpy(), expected, atol=1e-12)
    np.testing.assert_allclose(R.quat_apply_inverse(_t(q), _t(expected)).numpy(), v, atol=1e-12)


def test_apply_broadcasts_over_leading_dims():
    q = _random_quats(6).reshape(2, 3, 4)
    v = RNG.normal(size=(2, 3, 5, 3))
    out = R.quat_apply(_t(q)[:, :, None, :], _t(v))
    ref = np.einsum("abij,abkj->abki", R.quat_to_rotmat(_t(q)).numpy(), v)
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-12)


def test_rotmat_matches_mujoco_and_inverts():
    q = _random_quats(N)
    expected = np.zeros((N, 9))
    for i in range(N):
        mujoco.mju_quat2Mat(expected[i], q[i])
    mats = R.quat_to_rotmat(_t(q))
    np.testing.assert_allclose(mats.reshape(N, 9).numpy(), expected, atol=1e-12)
    back = R.quat_from_rotmat(mats).numpy()
    sign = np.where(q[:, :1] < 0, -1.0, 1.0)
    np.testing.assert_allclose(back, sign * q, atol=1e-12)
    assert (back[:, 0] >= 0).all()


@pytest.mark.parametrize("axis", range(3))
def test_from_rotmat_half_turns(axis):
    # Half turns have w = 0, where a trace-only formula breaks down.
    q = np.zeros(4)
    q[1 + axis] = 1.0
    m = R.quat_to_rotmat(_t(q))
    back = R.quat_from_rotmat(m).numpy()
    assert abs(abs(back @ q) - 1.0) < 1e-12


def test_conjugate_is_inverse():
    q = _t(_random_quats(N))
    ident = R.quat_mul(q, R.quat_conjugate(q)).numpy()
    np.testing.assert_allclose(ident, np.tile([1.0, 0, 0, 0], (N, 1)), atol=1e-12)


def test_normalize():
    q = RNG.normal(size=(N, 4)) * 3.0
    np.testing.assert_allclose(R.quat_normalize(_t(q)).numpy(), q / np.linalg.norm(q, axis=1, keepdims=True))
    assert torch.isfinite(R.quat_normalize(torch.zeros(4))).all()


def test_log_matches_mujoco_quat2vel_shortest_arc():
    q = _random_quats(N)
    expected = np.zeros((N, 3))
    for i in range(N):
        mujoco.mju_quat2Vel(expected[i], q[i], 1.0)  # wraps to the shortest arc itself
    got = R.quat_log(_t(q)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-10)
    np.testing.assert_allclose(R.quat_log(_t(-q)).numpy(), got, atol=1e-12)
    assert (np.linalg.norm(got, axis=1) <= math.pi + 1e-12).all()


def test_log_exp_round_trip_and_small_angles():
    rotvec = RNG.normal(size=(N, 3))
    rotvec *= (RNG.uniform(0, 3.1, size=(N, 1))) / np.linalg.norm(rotvec, axis=1, keepdims=True)
    np.testing.assert_allclose(R.quat_log(R.quat_exp(_t(rotvec))).numpy(), rotvec, atol=1e-10)
    tiny = np.array([[1e-10, -2e-10, 3e-10], [0.0, 0.0, 0.0], [1e-5, 0, 0]])
    q = R.quat_exp(_t(tiny))
    np.testing.assert_allclose(q.norm(dim=-1).numpy(), 1.0, atol=1e-15)
    np.testing.assert_allclose(R.quat_log(q).numpy(), tiny, atol=1e-18, rtol=1e-9)


def test_sub_matches_mujoco_subquat():
    qa, qb = _random_quats(N), _random_quats(N)
    expected = np.stack([_mj_sub(a, b) for a, b in zip(qa, qb, strict=True)])
    got = R.quat_log(R.quat_mul(R.quat_conjugate(_t(qb)), _t(qa))).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_error_magnitude():
    q1, q2 = _random_quats(N), _random_quats(N)
    dots = np.abs(np.sum(q1 * q2, axis=1)).clip(max=1.0)
    np.testing.assert_allclose(R.quat_error_magnitude(_t(q1), _t(q2)).numpy(), 2 * np.arccos(dots), atol=1e-7)
    np.testing.assert_allclose(R.quat_error_magnitude(_t(q1), _t(-q1)).numpy(), 0.0, atol=1e-7)


def test_angle_axis():
    angle = RNG.uniform(-3, 3, size=N)
    axis = RNG.normal(size=(N, 3))
    unit = axis / np.linalg.norm(axis, axis=1, keepdims=True)
    expected = np.zeros((N, 4))
    for i in range(N):
        mujoco.mju_axisAngle2Quat(expected[i], unit[i], angle[i])
    np.testing.assert_allclose(R.quat_from_angle_axis(_t(angle), _t(axis)).numpy(), expected, atol=1e-12)


def test_slerp_matches_mujoco_integration():
    # mju_quatIntegrate(q0, log(q0⁻¹ q1), t) rotates q0 by t times the relative rotation vector.
    q0, q1 = _random_quats(N), _random_quats(N)
    t = RNG.uniform(0, 1, size=N)
    expected = np.zeros((N, 4))
    for i in range(N):
        vel = _mj_sub(q1[i], q0[i])
        expected[i] = q0[i]
        mujoco.mju_quatIntegrate(expected[i], vel, t[i])
    got = R.quat_slerp(_t(q0), _t(q1), _t(t)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-10)


def test_slerp_endpoints_and_classic_formula():
    q0, q1 = _random_quats(N), _random_quats(N)
    q1 = np.where(np.sum(q0 * q1, axis=1, keepdims=True) < 0, -q1, q1)
    np.testing.assert_allclose(R.quat_slerp(_t(q0), _t(q1), 0.0).numpy(), q0, atol=1e-12)
    np.testing.assert_allclose(R.quat_slerp(_t(q0), _t(q1), 1.0).numpy(), q1, atol=1e-10)
    # Shoemake's formula sin((1-t)θ)/sin θ q0 + sin(tθ)/sin θ q1.
    theta = np.arccos(np.sum(q0 * q1, axis=1))[:, None]
    t = 0.3
    ref = (np.sin((1 - t) * theta) * q0 + np.sin(t * theta) * q1) / np.sin(theta)
    np.testing.assert_allclose(R.quat_slerp(_t(q0), _t(q1), t).numpy(), ref, atol=1e-10)
    # Identical endpoints stay put (0/0 in the classic formula).
    np.testing.assert_allclose(R.quat_slerp(_t(q0), _t(q0), 0.5).numpy(), q0, atol=1e-12)


def test_yaw_quat():
    yaw = RNG.uniform(-3, 3, size=N)
    pitch = RNG.uniform(-1.2, 1.2, size=N)
    roll = RNG.uniform(-1.2, 1.2, size=N)
    q = R.quat_from_euler_xyz(_t(roll), _t(pitch), _t(yaw))
    yq = R.yaw_quat(q).numpy()
    expected = np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], axis=1)
    np.testing.assert_allclose(yq, expected, atol=1e-10)
    # Heading of the rotated x axis on the ground plane equals the yaw.
    x_axis = R.quat_apply(q, torch.tensor([1.0, 0, 0], dtype=torch.float64).expand(N, 3)).numpy()
    np.testing.assert_allclose(np.arctan2(x_axis[:, 1], x_axis[:, 0]), yaw, atol=1e-10)


def test_euler_xyz_matches_mujoco_and_matrices():
    e = RNG.uniform(-3, 3, size=(N, 3))
    expected = np.zeros((N, 4))
    for i in range(N):
        mujoco.mju_euler2Quat(expected[i], e[i], "XYZ")
    got = R.quat_from_euler_xyz(_t(e[:, 0]), _t(e[:, 1]), _t(e[:, 2]))
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)
    r, p, y = e[0]
    rx = np.array([[1, 0, 0], [0, np.cos(r), -np.sin(r)], [0, np.sin(r), np.cos(r)]])
    ry = np.array([[np.cos(p), 0, np.sin(p)], [0, 1, 0], [-np.sin(p), 0, np.cos(p)]])
    rz = np.array([[np.cos(y), -np.sin(y), 0], [np.sin(y), np.cos(y), 0], [0, 0, 1]])
    np.testing.assert_allclose(R.quat_to_rotmat(got[0]).numpy(), rz @ ry @ rx, atol=1e-12)


def test_compiles_fullgraph_and_matches_eager():
    q0 = _t(_random_quats(8)).float()
    q1 = _t(_random_quats(8)).float()
    v = _t(RNG.normal(size=(8, 3))).float()

    def chain(a, b, x):
        rel = R.quat_mul(R.quat_conjugate(a), b)
        return (
            R.quat_apply(R.quat_slerp(a, b, 0.25), x),
            R.quat_log(rel),
            R.quat_error_magnitude(a, b),
            R.quat_from_rotmat(R.quat_to_rotmat(R.yaw_quat(b))),
        )

    compiled = torch.compile(chain, fullgraph=True, dynamic=False, backend="eager")
    for got, ref in zip(compiled(q0, q1, v), chain(q0, q1, v), strict=True):
        torch.testing.assert_close(got, ref)
