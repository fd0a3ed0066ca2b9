"""Polyak averaging, gradient clipping and AdamW with a shared tensor learning rate."""

import numpy as np
import torch

from unilab_gpu.rl.optimization import clip_gradients_, make_adamw, polyak_update_


def test_polyak_update_matches_formula():
    target = [torch.tensor([1.0, 2.0]), torch.tensor([[0.0]])]
    online = [torch.tensor([3.0, -2.0]), torch.tensor([[1.0]])]
    polyak_update_(target, online, tau=0.25)
    np.testing.assert_allclose(target[0].numpy(), [1.5, 1.0])
    np.testing.assert_allclose(target[1].numpy(), [[0.25]])


def test_clip_scales_global_norm_and_zero_disables():
    params = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))]
    params[0].grad, params[1].grad = torch.tensor([3.0, 0.0]), torch.tensor([4.0])
    clip_gradients_(params, max_norm=0.0)
    assert params[1].grad.item() == 4.0
    clip_gradients_(params, max_norm=1.0)
    np.testing.assert_allclose([params[0].grad[0].item(), params[1].grad.item()], [0.6, 0.8], rtol=1e-5)


def test_adamw_reads_lr_tensor_in_place():
    param = torch.nn.Parameter(torch.ones(1))
    lr = torch.tensor(0.1)
    optimizer = make_adamw([param], lr, betas=(0.9, 0.999), weight_decay=0.0)
    param.grad = torch.ones(1)
    optimizer.step()
    # First Adam step moves by lr * m_hat / (sqrt(v_hat) + eps) = lr for a constant gradient.
    np.testing.assert_allclose(param.item(), 0.9, rtol=1e-6)
    lr.fill_(0.0)
    optimizer.step()
    np.testing.assert_allclose(param.item(), 0.9, rtol=1e-6)
