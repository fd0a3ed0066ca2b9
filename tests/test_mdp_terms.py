"""Generic terms against MuJoCo's quaternion math."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from unilab_gpu.envs.mdp.observations import gravity_in_frame


def test_gravity_in_frame_matches_mujoco_inverse_rotation() -> None:
    rng = np.random.default_rng(0)
    quats = rng.normal(size=(16, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    got = gravity_in_frame(torch.from_numpy(quats)).numpy()
    for q, g in zip(quats, got, strict=True):
        inverse = np.zeros(4)
        mujoco.mju_negQuat(inverse, q)
        expected = np.zeros(3)
        mujoco.mju_rotVecQuat(expected, np.array([0.0, 0.0, -1.0]), inverse)
        np.testing.assert_allclose(g, expected, atol=1e-12)
