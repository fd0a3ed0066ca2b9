"""FlashSAC trunk against a NumPy forward; joint BatchNorm; running statistics."""

import numpy as np
import torch

from unilab_gpu.rl.flashsac_networks import FlashActor, TwinFlashCritic


def _np(t):
    return t.detach().double().numpy()


def _bn(x, bn):
    mean, var = x.mean(0), x.var(0)
    return (x - mean) / np.sqrt(var + bn.eps) * _np(bn.weight) + _np(bn.bias)


def _reference_member(critic, member, x):
    trunk, head = critic.trunks[member], critic.heads[member]
    h = _bn(x, trunk.input_norm) @ _np(trunk.embed.weight).T
    for block in trunk.blocks:
        y = np.maximum(_bn(h @ _np(block.expand.weight).T, block.norm1), 0)
        y = np.maximum(_bn(y @ _np(block.contract.weight).T, block.norm2), 0)
        h = h + y
    h = h / np.sqrt((h**2).mean(-1, keepdims=True) + 1e-6) * _np(trunk.output_norm.weight)
    return h @ _np(head.weight).T + _np(head.bias)


def _perturb(module):
    # Move BatchNorm/RMSNorm affine parameters off their identity init so the reference sees them.
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name:
                p.add_(0.1 * torch.randn_like(p))


def test_joint_forward_matches_numpy_with_shared_batch_statistics():
    torch.manual_seed(0)
    critic = TwinFlashCritic(obs_dim=5, act_dim=2, hidden_dim=8, num_blocks=2, num_atoms=7).double()
    _perturb(critic)
    obs, act = torch.randn(6, 5, dtype=torch.float64), torch.randn(6, 2, dtype=torch.float64)
    next_obs, next_act = torch.randn(6, 5, dtype=torch.float64) + 1.0, torch.randn(6, 2, dtype=torch.float64)
    current, bootstrap = critic.joint(obs, act, next_obs, next_act)
    assert current.shape == (2, 6, 7) and bootstrap.shape == (2, 6, 7)
    joint_input = np.concatenate([np.c_[_np(obs), _np(act)], np.c_[_np(next_obs), _np(next_act)]])
    for member in range(2):
        expected = _reference_member(critic, member, joint_input)
        np.testing.assert_allclose(current[member].detach().numpy(), expected[:6], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(bootstrap[member].detach().numpy(), expected[6:], rtol=1e-9, atol=1e-9)
    # Separate forwards use different statistics and therefore give different values.
    separate = critic(obs, act, batch_stats=True)
    assert not torch.allclose(separate, current)


def test_running_statistics_are_used_without_batch_stats():
    torch.manual_seed(1)
    actor = FlashActor(obs_dim=4, act_dim=2, hidden_dim=8, num_blocks=1)
    obs = torch.randn(32, 4) * 3 + 2
    before = actor.trunk.input_norm.running_mean.clone()
    actor(obs, batch_stats=True)
    np.testing.assert_allclose(
        actor.trunk.input_norm.running_mean.numpy(), 0.99 * before.numpy() + 0.01 * obs.mean(0).numpy(), rtol=1e-5
    )
    # Running-statistics mode gives each sample a result independent of the rest of the batch.
    single = actor(obs[:1], batch_stats=False)[0]
    batched = actor(obs, batch_stats=False)[0][:1]
    torch.testing.assert_close(single, batched)


def test_momentum_reaches_every_batch_norm():
    torch.manual_seed(2)
    critic = TwinFlashCritic(obs_dim=3, act_dim=1, hidden_dim=4, num_blocks=1, num_atoms=5, momentum=0.1)
    obs, act = torch.randn(16, 3) + 1.0, torch.randn(16, 1)
    critic(obs, act, batch_stats=True)
    x = torch.cat([obs, act], dim=-1)
    for trunk in critic.trunks:
        # Input statistics are those of x itself: mean moves 10% of the way from 0.
        torch.testing.assert_close(trunk.input_norm.running_mean, 0.1 * x.mean(0))
        norms = [m for m in trunk.modules() if type(m).__name__ == "BatchNorm"]
        assert len(norms) == 3 and all(m.momentum == 0.1 for m in norms)
