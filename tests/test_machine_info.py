from __future__ import annotations

import json
from importlib import metadata

import torch

from unilab_gpu.profiling.machine_info import machine_info


def test_machine_info_records_versions_and_is_json() -> None:
    info = json.loads(json.dumps(machine_info("cpu")))
    assert info["device"] == "cpu"
    assert info["packages"]["torch"] == metadata.version("torch")
    assert info["packages"]["mujoco-warp"] == metadata.version("mujoco-warp")
    assert info["torch_threads"] == torch.get_num_threads()
    assert "gpu" not in info
