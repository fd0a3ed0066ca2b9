from __future__ import annotations

import pytest
import torch
import warp as wp

from unilab_gpu.sim.warp_context import torch_stream_scope, warp_device


def test_cpu_maps_to_warp_cpu_and_scope_sets_the_device() -> None:
    device = warp_device("cpu")
    assert device.is_cpu
    with torch_stream_scope(device):
        assert wp.get_device().is_cpu


def test_bad_devices_are_named() -> None:
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda"):
        warp_device("mps")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="device 'cuda:0' requested but torch sees no CUDA device"):
            warp_device("cuda:0")
