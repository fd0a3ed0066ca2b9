"""Resampling (lerp / slerp) and finite-difference velocities against analytic and MuJoCo references."""

import mujoco
import numpy as np
import pytest
import torch

from unilab_gpu.motion.assemble import resample_clip
from unilab_gpu.motion.kinematics import RobotKinematics
from unilab_gpu.motion.resample import ResampleGrid
from unilab_gpu.motion.synthetic import synthesize_clip
from unilab_gpu.motion.validation import MotionFormatError
from unilab_gpu.motion.velocities import angular_velocity, linear_velocity
from unilab_gpu.utils.rotations import quat_error_magnitude


@pytest.fixture(scope="module")
def kin():
    return RobotKinematics.from_robot("g1")


def _integrate(q0: np.ndarray, omega_local: np.ndarray, t: float) -> np.ndarray:
    """MuJoCo's orientation after rotating ``q0`` at constant body-frame rate ``omega_local`` for ``t``."""
    q = q0.copy()
    mujoco.mju_quatIntegrate(q, omega_local, t)
    return q


def test_grid_spans_the_input_duration():
    grid = ResampleGrid.between(91, 30.0, 50.0)  # 3 s
    assert len(grid.lo) == 151
    np.testing.assert_allclose(grid.lo + grid.alpha, np.arange(151) * 0.6, atol=1e-12)
    assert grid.lo.max() == 89 and grid.alpha[-1] == pytest.approx(1.0)
    # 50 -> 30: 3 s = 151 frames -> 91 frames, the last on the input's last frame.
    down = ResampleGrid.between(151, 50.0, 30.0)
    assert len(down.lo) == 91 and down.lo[-1] + down.alpha[-1] == pytest.approx(150)
    # Not a whole number of output periods: the output stops before the end.
    assert len(ResampleGrid.between(10, 50.0, 30.0).lo) == 6  # 0.18 s -> frames at 0 .. 0.1667 s


def test_lerp_is_exact_on_linear_signals():
    x = np.stack([np.linspace(0, 2, 31), np.linspace(5, -1, 31)], axis=1)  # 1 s at 30 fps
    grid = ResampleGrid.between(31, 30.0, 50.0)
    t = np.arange(len(grid.lo)) / 50.0
    np.testing.assert_allclose(grid.lerp(x), np.stack([2 * t, 5 - 6 * t], axis=1), atol=1e-12)


def test_slerp_matches_mujoco_intermediate_rotations():
    # A constant-rate rotation is exactly a geodesic: slerp between its frames must land on it.
    rng = np.random.default_rng(3)
    q0 = rng.normal(size=4)
    q0 /= np.linalg.norm(q0)
    omega = np.array([1.3, -0.7, 2.1])
    quats = np.stack([_integrate(q0, omega, k / 30.0) for k in range(61)])
    quats[1::3] *= -1.0  # sign flips must not matter (shortest arc)
    grid = ResampleGrid.between(61, 30.0, 50.0)
    expected = np.stack([_integrate(q0, omega, k / 50.0) for k in range(len(grid.lo))])
    got = grid.slerp(quats)
    angle = quat_error_magnitude(torch.from_numpy(got), torch.from_numpy(expected))
    assert angle.max() < 1e-10


def test_finite_differences_against_analytic_derivatives():
    fps = 50.0
    t = np.arange(101) / fps
    x = np.stack([np.sin(2 * t), t**2], axis=1)
    v = linear_velocity(x, fps)
    exact = np.stack([2 * np.cos(2 * t), 2 * t], axis=1)
    assert np.abs(v - exact)[1:-1].max() < 4 * (1 / fps) ** 2 * 8 / 6  # central: h²/6 |x'''|
    assert np.abs(v - exact).max() < 0.03  # one-sided ends: h/2 |x''|
    # World angular velocity of q(t) = exp(ω t) q0 (constant world rate): central differences are exact.
    rng = np.random.default_rng(0)
    q0 = rng.normal(size=4)
    q0 /= np.linalg.norm(q0)
    omega_world = np.array([0.4, -2.0, 1.1])
    quats = []
    for tk in t:
        dq = np.zeros(4)
        mujoco.mju_axisAngle2Quat(dq, omega_world / np.linalg.norm(omega_world), np.linalg.norm(omega_world) * tk)
        q = np.zeros(4)
        mujoco.mju_mulQuat(q, dq, q0)
        quats.append(q * (-1) ** len(quats))  # alternate signs
    w = angular_velocity(np.stack(quats)[:, None], fps)[:, 0]
    np.testing.assert_allclose(w, np.tile(omega_world, (len(t), 1)), atol=1e-10)
    with pytest.raises(MotionFormatError, match="'x' needs at least 2 frames"):
        linear_velocity(x[:1], fps, "x")


def test_resampling_50_30_50_preserves_a_smooth_trajectory(kin):
    clip = synthesize_clip(seconds=3.0, seed=6, kinematics=kin)
    down = resample_clip(clip, 30.0, kin)
    assert (down.fps, down.num_frames) == (30.0, 91)
    back = resample_clip(down, 50.0, kin)
    assert (back.fps, back.num_frames) == (50.0, clip.num_frames)
    # Two lerps at h = 1/30 s: |err| <= 2 · h²/8 · max|x''| (< 10 for these clips).
    assert np.abs(back.joint_pos - clip.joint_pos).max() < 3e-3
    assert np.abs(back.body_pos_w - clip.body_pos_w).max() < 5e-3
    angle = quat_error_magnitude(torch.from_numpy(back.body_quat_w), torch.from_numpy(clip.body_quat_w))
    assert angle.max() < 5e-3
    # Velocities are derived again from the resampled poses and still track the originals.
    assert np.abs(back.joint_vel - clip.joint_vel)[2:-2].max() < 0.05
    assert np.abs(back.body_lin_vel_w - clip.body_lin_vel_w)[2:-2].max() < 0.05
    # And every down-sampled frame that falls on an original frame (every 3rd = 5 original) is exact.
    np.testing.assert_allclose(down.joint_pos[::3], clip.joint_pos[::5], atol=1e-12)


def test_same_rate_is_a_no_op(kin):
    clip = synthesize_clip(seconds=0.5, seed=6, kinematics=kin)
    same = resample_clip(clip, 50.0, kin)
    for name, value in clip.arrays().items():
        np.testing.assert_allclose(getattr(same, name), value, rtol=0, atol=1e-15)  # quats renormalized
