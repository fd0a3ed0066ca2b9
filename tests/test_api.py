"""Top-level API: ``import unilab_gpu as ug``; ``ug.list_tasks()``, ``ug.make_env(...)``; lazy imports."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import unilab_gpu as ug
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.paths import CONFIGS_DIR


@pytest.mark.slow  # a fresh interpreter importing torch, Warp and Hydra: several seconds
def test_import_loads_nothing_heavy_until_a_name_needs_it() -> None:
    code = (
        "import sys, unilab_gpu as ug\n"
        "heavy = ('torch', 'warp', 'mujoco', 'hydra', 'mujoco_warp')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "print(len(ug.list_tasks()) > 0, sorted(m for m in heavy if m in sys.modules))\n"
        "ug.make_env\n"
        "print(all(m in sys.modules for m in ('torch', 'hydra')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:3] == ["[]", "True []", "True"]


def test_list_tasks_is_the_task_folder() -> None:
    expected = sorted(name[: -len(".yaml")] for name in os.listdir(CONFIGS_DIR / "task") if name.endswith(".yaml"))
    assert ug.list_tasks() == expected and "pendulum" in expected


def test_make_env_builds_the_named_task() -> None:
    env = ug.make_env("pendulum", num_envs=3, device="cpu", compile=False, overrides=["decimation=2"])
    assert isinstance(env, ManagerBasedRlEnv) and ug.ManagerBasedRlEnv is ManagerBasedRlEnv
    assert env.num_envs == 3 and env.cfg.decimation == 2 and env.step_dt == pytest.approx(2 * 0.01)
    obs = env.reset()
    assert obs["policy"].shape == (3, 3)
    result = env.step(torch.zeros(3, 1))
    assert isinstance(result, ug.StepResult)


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'make_envs'"):
        ug.make_envs  # noqa: B018
    assert {"make_env", "list_tasks", "ManagerBasedRlEnv"} <= set(dir(ug))
