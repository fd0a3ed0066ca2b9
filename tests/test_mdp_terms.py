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


def _friction_env(num_envs: int = 5, num_geoms: int = 4):
    from types import SimpleNamespace

    friction = torch.arange(num_envs * num_geoms * 3, dtype=torch.float32).view(num_envs, num_geoms, 3)
    sim = SimpleNamespace(model_fields={"geom_friction": friction})
    return SimpleNamespace(sim=sim, num_envs=num_envs, device=torch.device("cpu")), friction


def test_friction_randomization_with_padded_ids_touches_only_the_listed_rows() -> None:
    from unilab_gpu.envs.mdp.events import randomize_geom_friction

    geoms = torch.tensor([1, 3])
    # The last row is not reset: the padding (id 5, clamped onto row 4) must leave it alone.
    env, friction = _friction_env()
    before = friction.clone()
    torch.manual_seed(0)
    randomize_geom_friction(env, torch.tensor([2, 0, 5, 5]), geoms, [0.4, 0.6])
    changed = (friction != before).any(dim=2).any(dim=1)
    assert changed.tolist() == [True, False, True, False, False]
    assert ((friction[[0, 2]][:, [1, 3], 0] >= 0.4) & (friction[[0, 2]][:, [1, 3], 0] <= 0.6)).all()
    torch.testing.assert_close(friction[:, [0, 2]], before[:, [0, 2]])  # other geoms untouched
    torch.testing.assert_close(friction[..., 1:], before[..., 1:])  # torsional/rolling untouched
    # The last row is reset and padding follows: the row gets exactly its own draw.
    env, friction = _friction_env()
    torch.manual_seed(1)
    draws = 0.4 + 0.2 * torch.rand(4, 2)
    torch.manual_seed(1)
    randomize_geom_friction(env, torch.tensor([4, 1, 5, 5]), geoms, [0.4, 0.6])
    torch.testing.assert_close(friction[4, [1, 3], 0], draws[0], rtol=0, atol=0)
    torch.testing.assert_close(friction[1, [1, 3], 0], draws[1], rtol=0, atol=0)
