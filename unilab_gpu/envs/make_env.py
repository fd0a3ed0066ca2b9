"""``make_env``: compose a task's Hydra config and build the env."""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu import list_tasks
from unilab_gpu.envs.env_cfg import EnvCfg, typed_terms
from unilab_gpu.envs.manager_based_env import ManagerBasedRlEnv
from unilab_gpu.paths import CONFIGS_DIR

SCHEMA_NAME = "env_cfg_schema"
"""Task YAMLs list this first in their ``defaults`` so Hydra checks keys and types against ``EnvCfg``."""


available_tasks = list_tasks
"""Task names (the files of ``configs/task/``); the same function as ``unilab_gpu.list_tasks``."""


def load_task_cfg(task: str, overrides: Sequence[str] = ()) -> EnvCfg:
    """Compose ``configs/task/<task>.yaml`` with Hydra overrides and check it against ``EnvCfg``.

    Overrides use Hydra syntax, e.g. ``"rewards.upright.weight=2.0"``, ``"events.push=null"``
    (a term set to null is disabled), ``"+rewards.extra={func: ..., weight: 1.0}"`` (adds one).

    Raises:
      ValueError: unknown task, unknown key or wrong type; the message names the key path.
    """
    if task not in available_tasks():
        raise ValueError(f"unknown task '{task}'; available: {available_tasks()}")
    # Registered when a config is loaded, not at import: storing the same node again is a no-op.
    ConfigStore.instance().store(name=SCHEMA_NAME, node=EnvCfg)
    try:
        # Compose without changing the working directory or creating an output folder.
        with initialize_config_dir(config_dir=str(CONFIGS_DIR / "task"), version_base=None):
            cfg = compose(config_name=task, overrides=list(overrides))
        env_cfg: EnvCfg = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except (HydraException, OmegaConfBaseException) as error:
        cause = error.__cause__ if isinstance(error.__cause__, OmegaConfBaseException) else error
        key = getattr(cause, "full_key", None)
        message = " ".join(str(cause).split("\n")[0].split())
        where = f" at '{key}'" if key else ""
        raise ValueError(f"task '{task}': bad config{where}: {message}") from None
    try:
        return typed_terms(env_cfg)
    except ValueError as error:
        raise ValueError(f"task '{task}': {error}") from None


def make_env(
    task: str,
    num_envs: int | None = None,
    device: str = "cpu",
    overrides: Sequence[str] = (),
    **env_kwargs,
) -> ManagerBasedRlEnv:
    """Build the env for ``task`` (a file name in ``configs/task/``).

    Args:
      num_envs: overrides the config's ``num_envs``.
      overrides: Hydra overrides of the task config.
      env_kwargs: ``seed``, ``compile``, ``capture``, ``debug``, ``deterministic``, ``verbose``,
        ``announce`` (see ``ManagerBasedRlEnv``).
    """
    return ManagerBasedRlEnv(load_task_cfg(task, overrides), num_envs, device, name=task, **env_kwargs)
