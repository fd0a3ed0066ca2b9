"""Unit-norm projection of linear weight rows and fixed-norm rescaling of normalisation affines."""

import numpy as np
import torch

from unilab_gpu.rl.flashsac_networks import TwinFlashCritic
from unilab_gpu.rl.weight_norm import linear_weights, project_rows_to_unit_norm_, rescale_to_fixed_norm_


def test_unit_norm_projection_after_optimizer_step():
    torch.manual_seed(2)
    critic = TwinFlashCritic(obs_dim=5, act_dim=2, hidden_dim=8, num_blocks=2, num_atoms=7)
    weights = linear_weights(critic)
    assert len(weights) == 2 * (1 + 2 * 2 + 1)  # embed, two per block, head; per member
    optimizer = torch.optim.AdamW(critic.parameters(), lr=0.1)
    loss = critic(torch.randn(16, 5), torch.randn(16, 2), batch_stats=True).square().mean()
    loss.backward()
    optimizer.step()
    assert any((torch.linalg.vector_norm(w, dim=-1) - 1).abs().max() > 1e-3 for w in weights)
    project_rows_to_unit_norm_(weights)
    for w in weights:
        np.testing.assert_allclose(torch.linalg.vector_norm(w, dim=-1).detach().numpy(), 1.0, atol=1e-5)


def test_projection_matches_numpy_and_keeps_direction():
    w = torch.tensor([[3.0, 4.0], [0.0, -2.0]])
    project_rows_to_unit_norm_([w])
    np.testing.assert_allclose(w.numpy(), [[0.6, 0.8], [0.0, -1.0]])


def test_fixed_norm_rescaling_matches_numpy():
    gamma, beta = torch.tensor([3.0, 0.5, -1.0, 2.0]), torch.tensor([1.0, 0.0, 2.0, -0.5])
    rms_gamma = torch.tensor([0.5, 0.5, 2.0])
    g, b, r = gamma.numpy().copy(), beta.numpy().copy(), rms_gamma.numpy().copy()
    rescale_to_fixed_norm_([(gamma, beta), (rms_gamma,)])
    factor = np.sqrt(4) / np.sqrt((g**2).sum() + (b**2).sum())
    np.testing.assert_allclose(gamma.numpy(), g * factor, rtol=1e-6)
    np.testing.assert_allclose(beta.numpy(), b * factor, rtol=1e-6)
    np.testing.assert_allclose(rms_gamma.numpy(), r * np.sqrt(3) / np.linalg.norm(r), rtol=1e-6)
    # The initial affine parameters (gamma = 1, beta = 0) are already at the target norm.
    ones, zeros = torch.ones(5), torch.zeros(5)
    rescale_to_fixed_norm_([(ones, zeros)])
    assert torch.equal(ones, torch.ones(5)) and torch.equal(zeros, torch.zeros(5))
