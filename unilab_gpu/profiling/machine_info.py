"""What a benchmark ran on, recorded next to its numbers."""

from __future__ import annotations

import os
import platform
from importlib import metadata

import torch
import warp as wp

PACKAGES = ("unilab-gpu", "torch", "mujoco", "mujoco-warp", "warp-lang", "numpy")


def machine_info(device: str) -> dict:
    """Host, device and package versions as a JSON-ready dict."""
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "packages": {name: _version(name) for name in PACKAGES},
    }
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        info["gpu"] = props.name
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
        info["cuda_runtime"] = torch.version.cuda
        driver = wp.get_cuda_driver_version()
        info["cuda_driver"] = ".".join(map(str, driver)) if driver else None
    return info


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
