"""The config of a training run: ``configs/train.yaml`` composed with Hydra overrides, or a run's
saved ``config.yaml`` for a resume; the ``auto`` choices resolved for this machine; the top-level
keys checked before a run starts.

Hydra reads ``seed=abc`` as the string ``"abc"`` and ``total_env_steps=-5`` as a valid int; both
would otherwise surface as a traceback (or a silent no-op run) long after the run folder was
made. Each error names the key path and the value.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.evaluation.tracking import follows_motion
from unilab_gpu.paths import CONFIGS_DIR
from unilab_gpu.rl.agents import ALGORITHMS
from unilab_gpu.rl.distributed import Launch, rank_device
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.training.run_folder import load_run_config
from unilab_gpu.utils.files import CONFIG_NAME
from unilab_gpu.utils.overrides import override_syntax_problem


class ConfigError(ValueError):
    """A bad train config or override; the message names the key."""


def compose_train_config(overrides: Sequence[str] = ()) -> DictConfig:
    """``configs/train.yaml`` with Hydra ``overrides`` (e.g. ``["algo=sac", "env.num_envs=8"]``).

    ``task=<name>`` is applied after composition: ``configs/task/`` is a folder of env configs
    that ``make_env`` composes on its own, and Hydra would read ``task=`` as a choice from it.
    """
    tasks = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "task"]
    rest = [o for o in overrides if o.split("=", 1)[0] != "task"]
    try:
        cfg = _compose(rest)
    except (HydraException, OmegaConfBaseException) as error:
        words = override_syntax_problem(rest) or _unknown_key_problem(rest) or " ".join(str(error).split())
        raise ConfigError(f"train config: {words}") from None
    problem = _unknown_key_problem(rest)
    if problem is not None:
        raise ConfigError(f"train config: {problem}")
    for task in tasks:
        cfg.task = task
    return _with_preset_task_overrides(cfg)


def algo_preset(name: str) -> dict[str, Any]:
    """The preset ``configs/algo/<name>.yaml`` as the train config resolves it (its Hydra defaults
    list merged: ``base/off_policy``, then ``sac`` or ``flashsac``, then its own keys), with its
    ``task_overrides``; a plain dict for ``rl.agents.algo_config``."""
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base=None):
        algo = compose(config_name="train", overrides=[f"algo={name}"]).algo
    values = OmegaConf.to_container(algo, resolve=True)
    assert isinstance(values, dict)
    return {str(key): value for key, value in values.items()}


def _compose(overrides: Sequence[str]) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base=None):
        return compose(config_name="train", overrides=list(overrides))


def _unknown_key_problem(overrides: Sequence[str]) -> str | None:
    """The first override naming a key no train config defines, in one line with the close names
    and where task settings go; ``None`` if there is none.

    Hydra's own answer to an unknown key is to add it with ``+``, and a key added so is kept in
    ``config.yaml`` but read by nothing (``+commands.motion.params.motion_files=[...]`` trained on
    the default clip). A key of the algorithm's config (``algo.*``, ``+algo.*``) is checked against
    the fields of its config class (:func:`_algo_keys`), which its YAML may leave out: a field is
    left to Hydra (whose ``+`` hint is then right), any other key is refused with the close names.
    """
    choices = [o for o in overrides if o.partition("=")[0] == "algo"]  # the train config's one group
    try:
        base = _compose(choices)
    except (HydraException, OmegaConfBaseException):  # a bad choice: Hydra's words name it
        return None
    for override in overrides:
        key = override.partition("=")[0].lstrip("+~")
        if key.startswith("algo.") and key.split(".")[1] not in _algo_keys(base.algo):
            part, keys = key.split(".")[1], _algo_keys(base.algo)
            close = difflib.get_close_matches(part, sorted(keys), n=3)
            hint = f"did you mean {' or '.join(repr(f'algo.{c}') for c in close)}? " if close else ""
            return (
                f"'{override}' names 'algo.{part}', which the {base.algo.get('name')} algorithm has no key for "
                f"({hint}its keys: {', '.join(sorted(keys))})"
            )
        if key == "algo" or key.startswith(("algo.", "hydra.")):
            continue
        node: Any = base
        parts = key.split(".")
        depth = 0  # parts[:depth] are keys of the config
        while depth < len(parts) and isinstance(node, DictConfig) and parts[depth] in node:
            node = node[parts[depth]]
            depth += 1
        if depth == len(parts) or not isinstance(node, DictConfig):
            continue  # a key of the config, or below a value (a list, a null): Hydra names that itself
        part, prefix = parts[depth], ".".join(parts[:depth])
        close = difflib.get_close_matches(part, [str(k) for k in node], n=3)
        hint = f"did you mean {' or '.join(repr(f'{prefix}.{c}' if prefix else c) for c in close)}? " if close else ""
        return (
            f"'{override}' names '{'.'.join(parts[: depth + 1])}', which no key of the train config defines "
            f"({hint}task settings go in env.overrides: \"env.overrides=['{override.lstrip('+~')}']\")"
        )
    return None


def _algo_keys(algo: DictConfig) -> set[str]:
    """The keys an algo config may set: the fields of its config class (those its YAML leaves out
    too), its YAML's keys and a preset's ``task_overrides``."""
    name = algo.get("name")
    if name == "ppo":
        try:
            from unilab_gpu.rl.ppo import PpoConfig  # needs the rsl extra; without it the YAML's keys
        except ImportError:
            fields: set[str] = set()
        else:
            fields = {field.name for field in dataclasses.fields(PpoConfig)}
    else:
        fields = {field.name for field in dataclasses.fields(ALGORITHMS[name])} if name in ALGORITHMS else set()
    return fields | {str(key) for key in algo} | {"task_overrides"}


def _with_preset_task_overrides(cfg: DictConfig) -> DictConfig:
    """Move an algo preset's ``task_overrides.<task>`` to the front of ``env.overrides``.

    A preset may need task settings (PPO's unbounded Gaussian actions need BeyondMimic's action
    scale on tracking, not the joint-limit bounds made for tanh policies). They become ordinary
    ``env.overrides`` of the run, so ``config.yaml``, resume, play and export all see them, and the
    user's own overrides, which come after, still win. The key leaves the algo config.
    """
    with open_dict(cfg):
        presets = cfg.algo.pop("task_overrides", None) or {}
    preset = list(presets.get(cfg.task, []))
    if preset:
        cfg.env.overrides = preset + list(cfg.env.overrides)
    return cfg


def resolve_auto(cfg: DictConfig, launch: Launch | None = None) -> DictConfig:
    """Fix the ``auto``/``null`` choices for this machine: ``device``, ``compile``, ``env.num_envs``
    (in a torchrun ``launch``, a CUDA device is this rank's ``cuda:LOCAL_RANK``)."""
    cfg = cfg.copy()
    check_train_config(cfg)
    cfg.device = str(resolve_device(cfg.device) if launch is None else rank_device(str(cfg.device), launch))
    on_cuda = torch.device(cfg.device).type == "cuda"
    if cfg.compile == "auto":
        cfg.compile = on_cuda
    if cfg.compile not in (True, False):
        raise ConfigError(f"train config: 'compile' must be auto, true or false, got {cfg.compile!r}")
    if cfg.env.num_envs is None:
        cfg.env.num_envs = cfg.env.cuda_num_envs if on_cuda else cfg.env.cpu_num_envs
    if cfg.get("eval") is not None and cfg.eval.every == "auto":
        cfg.eval.every = AUTO_EVAL_EVERY if on_cuda and follows_motion(cfg.task, list(cfg.env.overrides)) else 0
    return cfg


AUTO_EVAL_EVERY = 1000
"""``eval.every: auto`` on CUDA for tracking tasks: about 25 evaluations in a default run (100M env
steps at 4096 envs), each a few seconds. On a CPU, where a run has a few thousand iterations and an
evaluation costs minutes, it stays off."""


def resume_config(run_dir: str | Path, overrides: Sequence[str] = ()) -> DictConfig:
    """A run's saved ``config.yaml`` with ``key=value`` overrides merged on top (e.g. a larger
    ``total_env_steps``); choosing another config group (``algo=sac``) is refused: a run keeps
    its algorithm."""
    if not str(run_dir).strip():
        raise ConfigError("train config: 'resume' must be the path of a run folder or null, got ''")
    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"resume: no {CONFIG_NAME} in {run_dir} (is it a run folder?)")
    cfg = load_run_config(path)  # bounded: a hostile file fails in one line, never hangs
    OmegaConf.set_struct(cfg, True)  # an override of an unknown key is an error, not a new key
    extra = [o for o in overrides if not o.startswith("resume=")]
    for override in extra:
        group = override.split("=", 1)[0].lstrip("+~")
        if (CONFIGS_DIR / group).is_dir() and group != "task":
            raise ConfigError(
                f"resume: '{override}' chooses another {group} config, but a resumed run keeps its own "
                f"({group} {cfg.get(group, {}).get('name')!r}); start a new run without resume= to use it"
            )
    try:
        merged = OmegaConf.merge(cfg, OmegaConf.from_dotlist(extra))
    except OmegaConfBaseException as error:
        raise ConfigError(f"resume overrides {extra}: {' '.join(str(error).split())}") from None
    if merged.get("seed") != cfg.get("seed"):  # config.yaml and the checkpoint record the run's seed
        raise ConfigError(
            f"resume: 'seed={merged.get('seed')}' would replace the run's recorded seed {cfg.get('seed')}; a resumed "
            "run keeps its seed (and reseeds with seed + the iteration reached); start a new run for another seed"
        )
    cfg = merged
    cfg.resume = str(run_dir)
    cfg.run_dir = str(run_dir)
    return cfg  # type: ignore[return-value]


PROGRESS_MODES = ("auto", "bar", "lines")

LOGGERS = ("tensorboard", "wandb")
"""``logger``: TensorBoard alone, or TensorBoard and a Weights & Biases run."""

_COUNTS = {
    # key path: smallest allowed value
    "seed": None,
    "total_env_steps": 1,
    "log_every": 1,
    "checkpoint_every": 0,
    "env.cuda_num_envs": 1,
    "env.cpu_num_envs": 1,
}


def check_train_config(cfg: DictConfig) -> None:
    """Raise ``ValueError`` naming the first bad key (``train config: 'seed' must be ...``)."""
    for key, low in _COUNTS.items():
        _count(key, _get(cfg, key), low)
    if _get(cfg, "env.num_envs") is not None:
        _count("env.num_envs", _get(cfg, "env.num_envs"), 1)
    if cfg.progress not in PROGRESS_MODES:
        _fail("progress", f"one of {', '.join(PROGRESS_MODES)}", cfg.progress)
    if cfg.get("logger", "tensorboard") not in LOGGERS:
        _fail("logger", f"one of {', '.join(LOGGERS)}", cfg.logger)
    if cfg.get("logger") == "wandb":
        if importlib.util.find_spec("wandb") is None:  # found out now, not after the env is built
            raise ValueError("train config: 'logger' wandb needs the wandb package: pip install 'unilab-gpu[wandb]'")
        project, entity = OmegaConf.select(cfg, "wandb.project"), OmegaConf.select(cfg, "wandb.entity")
        if not isinstance(project, str) or not project.strip():
            _fail("wandb.project", "a non-empty string", project)
        if entity is not None and (not isinstance(entity, str) or not entity.strip()):
            _fail("wandb.entity", "a non-empty string or null", entity)
    if cfg.env.capture not in (True, False, "auto"):
        _fail("env.capture", "auto, true or false", cfg.env.capture)
    if cfg.get("eval") is not None:
        if cfg.eval.every != "auto":
            _count("eval.every", cfg.eval.every, 0)
        _count("eval.trials", cfg.eval.trials, 1)
    if not isinstance(cfg.get("export_onnx", True), bool):
        _fail("export_onnx", "true or false", cfg.export_onnx)
    if not isinstance(cfg.get("viewer", False), bool):
        _fail("viewer", "true or false", cfg.viewer)
    if cfg.get("viewer", False):
        port = cfg.get("viewer_port", 8080)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            _fail("viewer_port", "a port in [0, 65535] (0: a free one)", port)
        _count("viewer_worlds", cfg.get("viewer_worlds", 4), 1)
    for key in ("task", "run_root"):
        if not isinstance(_get(cfg, key), str) or not _get(cfg, key):
            _fail(key, "a non-empty string", _get(cfg, key))
    for key in ("run_dir", "resume"):
        value = _get(cfg, key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            _fail(key, "a path or null", value)
    overrides = cfg.env.overrides
    if not OmegaConf.is_list(overrides) or not all(isinstance(o, str) for o in overrides):
        _fail("env.overrides", "a list of Hydra overrides in brackets, e.g. \"env.overrides=['a=1']\"", overrides)


def _get(cfg: DictConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node


def _count(key: str, value: Any, low: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(key, "a whole number", value)
    if low is not None and value < low:
        _fail(key, f">= {low}", value)


def _fail(key: str, expected: str, value: Any) -> None:
    raise ValueError(f"train config: '{key}' must be {expected}, got {value!r}")
