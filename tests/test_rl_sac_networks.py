"""FastSAC networks: MLP forward against NumPy, actor bounds, twin critic shapes."""

import numpy as np
import torch

from unilab_gpu.rl.sac import SquashedGaussianActor, TwinCategoricalCritic, layer_norm_mlp


def test_actor_and_critic_shapes_and_layers():
    torch.manual_seed(0)
    actor = SquashedGaussianActor(obs_dim=5, act_dim=2, hidden_dims=[16, 8], log_std_min=-5.0, log_std_max=2.0)
    obs = torch.randn(7, 5)
    action, log_prob = actor.sample(obs)
    assert action.shape == (7, 2) and log_prob.shape == (7,)
    assert action.abs().max() < 1.0
    _, log_std = actor(obs)
    assert log_std.min() >= -5.0 and log_std.max() <= 2.0
    critic = TwinCategoricalCritic(obs_dim=6, act_dim=2, hidden_dims=[16], num_atoms=11)
    logits = critic(torch.randn(7, 6), action)
    assert logits.shape == (2, 7, 11)
    assert not torch.allclose(logits[0], logits[1])  # independently initialised members
    kinds = [type(m).__name__ for m in layer_norm_mlp(3, [4, 4], 1)]
    assert kinds == ["Linear", "LayerNorm", "SiLU", "Linear", "LayerNorm", "SiLU", "Linear"]


def test_layer_norm_mlp_matches_numpy():
    torch.manual_seed(1)
    net = layer_norm_mlp(3, [5], 2).double()
    with torch.no_grad():
        net[1].weight.uniform_(0.5, 1.5)
        net[1].bias.uniform_(-0.5, 0.5)
    x = torch.randn(4, 3, dtype=torch.float64)
    w = [p.detach().numpy() for p in net.parameters()]  # W1, b1, gamma, beta, W2, b2
    h = x.numpy() @ w[0].T + w[1]
    h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * w[2] + w[3]
    h = h / (1 + np.exp(-h))  # SiLU
    np.testing.assert_allclose(net(x).detach().numpy(), h @ w[4].T + w[5], rtol=1e-10)
