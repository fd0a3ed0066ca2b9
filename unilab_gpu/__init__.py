"""unilab-gpu: GPU-resident, manager-based RL environments on MuJoCo Warp and PyTorch.

The top-level API::

    import unilab_gpu as ug

    ug.list_tasks()                                  # ['g1_stand', 'g1_tracking', ..., 'pendulum']
    env = ug.make_env("g1_tracking", num_envs=4096, device="cuda")

``import unilab_gpu`` itself loads nothing heavy: torch, Warp, MuJoCo and Hydra are imported on
the first use of a name that needs them (``make_env``, ``ManagerBasedRlEnv``, ``load_task_cfg``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from unilab_gpu.envs.env_step import StepResult
    from unilab_gpu.envs.make_env import load_task_cfg, make_env
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
    from unilab_gpu.paths import list_tasks

_LAZY = {
    "list_tasks": "unilab_gpu.paths",
    "make_env": "unilab_gpu.envs.make_env",
    "load_task_cfg": "unilab_gpu.envs.make_env",
    "ManagerBasedRlEnv": "unilab_gpu.envs.manager_based_rl_env",
    "StepResult": "unilab_gpu.envs.env_step",
}
"""Public name -> the module that defines it, imported on first access (PEP 562)."""

__all__ = ["ManagerBasedRlEnv", "StepResult", "__version__", "list_tasks", "load_task_cfg", "make_env"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'unilab_gpu' has no attribute '{name}'")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
