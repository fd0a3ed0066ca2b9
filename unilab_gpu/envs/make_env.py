"""``make_env``: compose a task's Hydra config and build the env."""

from __future__ import annotations

import dataclasses
import difflib
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import mujoco
import torch
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.envs.env_cfg import EnvCfg, check_env_cfg, typed_terms
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.envs.robot_check import check_robot
from unilab_gpu.envs.robot_model import load_robot_cfg, robot_edit
from unilab_gpu.paths import (
    config_roots,
    group_choices,
    group_config_file,
    list_tasks,
    robot_config_file,
    shadowed_configs,
)
from unilab_gpu.sim.model_files import model_path
from unilab_gpu.utils.overrides import override_syntax_problem
from unilab_gpu.utils.yaml_files import check_config_tree

SCHEMA_NAME = "env_cfg_schema"
"""Task YAMLs list this first in their ``defaults`` so Hydra checks keys and types against ``EnvCfg``."""


def load_task_cfg(task: str, overrides: Sequence[str] = ()) -> EnvCfg:
    """Compose ``configs/task/<task>.yaml`` with Hydra overrides and check it against ``EnvCfg``.

    Overrides use Hydra syntax, e.g. ``"rewards.upright.weight=2.0"``, ``"events.push=null"``
    (a term set to null is disabled), ``"+rewards.extra={func: ..., weight: 1.0}"`` (adds one).

    Raises:
      ValueError: unknown task, unknown key or wrong type; the message names the key path.
    """
    return _load(task, overrides)[0]


def _load(task: str, overrides: Sequence[str]) -> tuple[EnvCfg, Path | None]:
    """``load_task_cfg``, and the file of the task's robot config (None for a task without one)."""
    if not isinstance(task, str) or task not in list_tasks():
        raise ValueError(f"unknown task {task!r}; available: {list_tasks()}")
    if (
        not isinstance(overrides, Sequence)
        or isinstance(overrides, str)
        or not all(isinstance(o, str) for o in overrides)
    ):
        raise TypeError(
            f"task '{task}': 'overrides' must be a list of 'key=value' strings, e.g. ['episode_length_s=5'], "
            f"got {overrides!r}"
        )
    # Registered when a config is loaded, not at import: storing the same node again is a no-op.
    ConfigStore.instance().store(name=SCHEMA_NAME, node=EnvCfg)
    robot_file = None
    try:
        composed, robot = _compose_checked(task, overrides)
        robot_file = robot_config_file(robot)
        env_cfg: EnvCfg = OmegaConf.to_object(composed)  # type: ignore[assignment]
    except (HydraException, OmegaConfBaseException) as error:
        cause = error.__cause__ if isinstance(error.__cause__, OmegaConfBaseException) else error
        raise ValueError(f"task '{task}': {_explain(task, overrides, cause, robot_file)}") from None
    try:
        return typed_terms(env_cfg), robot_file
    except ValueError as error:
        raise ValueError(f"task '{task}': {error}") from None


def _explain(task: str, overrides: Sequence[str], error: Exception, robot_file: Path | None) -> str:
    """One line for a config Hydra or OmegaConf refused, naming the key (and the robot config's file
    for a key of the robot config)."""
    syntax = override_syntax_problem(overrides)
    if syntax is not None:  # Hydra's lexer names neither the override nor the fix
        return syntax
    lines = str(error).split("\n")
    in_robot = re.match(r"In 'robot/(.+)': \w+ raised while composing config:", lines[0])
    if in_robot:  # a bad key or value in the robot config file itself: named as the robot tools name it
        try:
            load_robot_cfg(in_robot[1])
        except ValueError as problem:
            return str(problem)
        key = next((line.split("full_key:")[1].strip() for line in lines if "full_key:" in line), "robot")
        key = key.removeprefix("robot.")
        return f"robot config {robot_config_file(in_robot[1])}: bad key '{key}': {' '.join(lines[1].split())}"
    unknown_robot = re.search(r"Could not find 'robot/(.+)'", lines[0])
    if unknown_robot:
        folders = [root / "robot" for root in config_roots()]
        known = sorted({p.stem for folder in folders for p in folder.glob("*.yaml")})
        return f"no robot config '{unknown_robot[1]}.yaml' in {', '.join(map(str, folders))}; robots: {known}"
    full_key: str | None = getattr(error, "full_key", None)
    message = " ".join(lines[0].split())
    missing = re.match(r"Interpolation key 'robot\.(.+)' not found", message) or re.match(
        r"Missing mandatory value: robot\.(.+)", message
    )
    if missing and robot_file is not None:  # the task reads a key the robot config does not give
        return f"robot config {robot_file} gives no '{missing[1]}', which the task reads at '{full_key}'"
    if full_key and full_key.startswith("robot.") and robot_file is not None:  # e.g. a mandatory key left out
        return f"robot config {robot_file}: bad key '{full_key.removeprefix('robot.')}': {message}"
    if full_key in LEGACY_ACTION_KEYS and "not in 'ActionCfg'" in message:
        return _legacy_actions(full_key)
    where = f" at '{full_key}'" if full_key else ""
    return f"bad config{where}: {message}{_override_hint(task, overrides, full_key, message)}"


LEGACY_ACTION_KEYS = {
    f"actions.{name}"
    for name in ("kind", "actuator_names", "scale", "effort_scale", "bounds", "soft_limit_ratio", "reference_command")
}
"""Keys of the action config before actions became terms (issue 35); a run folder or a user task
written then still has them, and is told the new form rather than migrated silently."""


def _legacy_actions(key: str) -> str:
    """One line naming the action-term form of a legacy ``actions.<key>`` (a task YAML or an override)."""
    name = key.removeprefix("actions.")
    new = (
        "actions.func: unilab_gpu.envs.mdp.actions.JointPositionAction (kind joint_position) or "
        "unilab_gpu.envs.mdp.actions.ActuatorCtrlAction (kind actuator_ctrl)"
        if name == "kind"
        else f"actions.params.{name}"
    )
    return (
        f"'{key}' is the old form of the action config; actions are now a term, "
        f"actions: {{func: ..., params: {{actuator_names, scale, ...}}, clip: ...}}: write {new} "
        '(docs/architecture.md, "Actions are terms")'
    )


def _compose(task: str, overrides: Sequence[str]) -> tuple[DictConfig, str | None]:
    """The composed config and the name of its robot config (None: the task has none)."""
    # Without changing the working directory or creating an output folder. Hydra finds a primary
    # config only in the config dir, so that is the task's folder (the project's or a user's).
    check_config_tree(config_roots()[1:])  # a user's YAML, before Hydra's unbounded reader sees it
    _warn_shadowed()
    task_dirs = [root / "task" for root in config_roots()]
    primary = next((folder for folder in task_dirs if (folder / f"{task}.yaml").is_file()), task_dirs[0])
    with initialize_config_dir(config_dir=str(primary), version_base=None):
        cfg = compose(
            config_name=task,
            overrides=[*overrides, f"hydra.searchpath=[{_search_path(primary)}]"],
            return_hydra_config=True,
        )
    robot = cfg.hydra.runtime.choices.get("robot")
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, robot


_warned_shadowed: set[Path] = set()


def _warn_shadowed() -> None:
    """One warning per user config that a config of the same name hides (the project's first)."""
    for path in shadowed_configs():
        if path not in _warned_shadowed:
            _warned_shadowed.add(path)
            group, name = path.parent.name, path.stem
            warnings.warn(
                f"{path} is not used: {group_config_file(group, name)} has the same name and comes first; "
                f"rename yours (e.g. {name}_mine.yaml) to use it",
                stacklevel=3,
            )


def _compose_checked(task: str, overrides: Sequence[str]) -> tuple[DictConfig, str | None]:
    """``_compose``, refusing a ``+key`` no field of the schema defines.

    Hydra's ``+`` adds a key even into a typed section (``+episode_lenght_s=5``, ``+actions.kind``,
    ``+terrain.num_level=0``), and ``OmegaConf.to_object`` then drops it: the run would go on with
    the default. Keys added into a plain mapping (a term table, a term's ``params``, a robot's
    ``pose_weights``) are left to the checks of those (``typed_terms``, ``check_params``).
    """
    added = [o for o in overrides if o.startswith("+")]
    try:
        composed, robot = _compose(task, overrides)
    except AssertionError:  # OmegaConf's answer to a '+' below a section that is null
        composed = _compose(task, [o for o in overrides if o not in added])[0]
        problem = next(filter(None, (_added_key_problem(composed, o) for o in added)), None)
        if problem is None:
            raise
        raise ValueError(f"task '{task}': {problem}") from None
    for override in added:
        problem = _added_key_problem(composed, override)
        if problem is not None:
            raise ValueError(f"task '{task}': {problem}")
    return composed, robot


def _added_key_problem(cfg: DictConfig, override: str) -> str | None:
    """Why the ``+key=value`` ``override`` adds a key no schema field defines, or ``None``; walks
    ``key`` down ``cfg`` (the composed config) through its typed sections."""
    key = _override_key(override)
    node: object = cfg
    path: list[str] = []
    for part in key.split("."):
        where = ".".join(path)
        if node is None:
            choices = group_choices(where)
            pick = (
                f"pick one first, e.g. '{where}={choices[0]}' (choices: {', '.join(choices)})"
                if choices
                else "give the whole section first"
            )
            return f"'{override}' sets a key of '{where}', which is null in this task: {pick}"
        schema = OmegaConf.get_type(node) if isinstance(node, DictConfig) else None
        if schema is None or not dataclasses.is_dataclass(schema) or not isinstance(node, DictConfig):
            return None  # a plain mapping: its own checks name unknown keys
        fields = [f.name for f in dataclasses.fields(schema)]
        if part not in fields:
            full = f"{where}.{part}" if where else part
            if full in LEGACY_ACTION_KEYS:
                return _legacy_actions(full)
            close = difflib.get_close_matches(part, fields, n=3)
            prefix = f"{where}." if where else ""
            hint = f"did you mean {' or '.join(repr(prefix + c) for c in close)}? " if close else ""
            return (
                f"'{override}' adds '{full}', which no field of the task config defines ({hint}"
                "keys the config has are set without '+')"
            )
        node = node[part]
        path.append(part)
    return None


def _search_path(primary: Path) -> str:
    """Where Hydra looks besides the task's folder: every other ``task/`` folder (the tasks and
    bases a task inherits) and every config root (the ``robot`` group in ``<root>/robot/``), the
    project's first. Folders a ``UNILAB_PATH`` entry does not have (one with robots only, no
    tasks) are left out: Hydra warns about each search-path folder that is missing."""
    roots = config_roots()
    candidates = (*(root / "task" for root in roots), *roots)
    folders = [folder for folder in candidates if folder != primary and folder.is_dir()]
    return ",".join(f"'file://{folder}'" for folder in folders)  # quoted: a path may hold commas


def _override_hint(task: str, overrides: Sequence[str], key: str | None, message: str) -> str:
    """How to fix an override Hydra refused: the close names of a misspelled key, the ``+`` that
    adds a key the YAML does not write, or the ``+`` too many for a key it does write."""
    if key is None:
        present = re.search(r"An item is already at '([^']+)'", message)
        return f" ('{present[1]}' is in the config already: set it without the '+')" if present else ""
    unknown_in_mapping = "is not in struct" in message  # a plain mapping (term tables, params)
    if not unknown_in_mapping and not re.search(r"not in '\w+'", message):  # nor a schema field
        return ""
    override = next((o for o in overrides if _override_key(o) == key or _override_key(o).startswith(f"{key}.")), None)
    if override is None:
        return ""
    parent, _, name = key.rpartition(".")
    base = _compose(task, ())[0]
    node = OmegaConf.select(base, parent) if parent else base
    siblings = [str(k) for k in node] if isinstance(node, DictConfig) else []
    close = [f"'{parent}.{c}'" if parent else f"'{c}'" for c in difflib.get_close_matches(name, siblings, n=3)]
    hints = [f"did you mean {' or '.join(close)}?"] if close else []
    if unknown_in_mapping:  # '+' adds a key there; a schema's dataclass takes no new fields
        hints.append(f"to add a key the YAML does not write, prefix the override with '+': '+{override.lstrip('+')}'")
    return f" ({'; '.join(hints)})" if hints else ""


def _override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def make_env(
    task: str,
    num_envs: int | None = None,
    device: str = "cpu",
    overrides: Sequence[str] = (),
    *,
    seed: int = 0,
    **env_kwargs,
) -> ManagerBasedRlEnv:
    """Build the env for ``task`` (a file name in ``configs/task/``).

    Args:
      num_envs: overrides the config's ``num_envs``.
      overrides: Hydra overrides of the task config.
      seed: seeds torch's generators (``torch.manual_seed``) before the env is built. Every
        random draw of the env, at construction and in the step, comes from the default
        generator of its device (CUDA graphs and ``torch.compile`` both handle that one), so
        a seed makes the whole run reproducible; two envs in one process share that stream.
      env_kwargs: ``compile``, ``capture``, ``debug``, ``deterministic``, ``verbose``,
        ``announce`` (see ``ManagerBasedRlEnv``).
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise TypeError(f"make_env: 'seed' must be a whole number in [0, 2**64), got {seed!r}")
    cfg, robot_file = _load(task, overrides)
    if cfg.robot is not None:
        check_env_cfg(cfg, num_envs if num_envs is not None else cfg.num_envs)  # before the MJCF is edited by it
    _check_robot_model(task, cfg, robot_file)
    # Seeding is the caller's choice of a process-wide stream, not the env's: the env only draws.
    torch.manual_seed(seed)
    return ManagerBasedRlEnv(cfg, num_envs, device, name=task, **env_kwargs)


def _mujoco_message(error: Exception) -> str:
    return " ".join(str(error).removeprefix("Error: ").split())


def _check_robot_model(task: str, cfg: EnvCfg, robot_file: Path | None) -> None:
    """Compile the robot's MJCF with MuJoCo and check it and the robot config against each other
    (``envs.robot_check``), so a bad robot fails in one line before the env is built (a task
    without a robot section has nothing to check)."""
    robot = cfg.robot
    if robot is None:
        return
    where = f"robot config {robot_file}: 'model'" if robot_file is not None else "'sim.model'"
    try:
        model_file = model_path(cfg.sim.model)
    except FileNotFoundError as error:
        raise ValueError(f"task '{task}': {where}: {error}") from None
    try:
        spec = mujoco.MjSpec.from_file(str(model_file))
    except ValueError as error:  # MuJoCo's parser
        raise ValueError(f"task '{task}': {model_file}: {_mujoco_message(error)}") from None
    try:
        robot_edit(robot)(spec)  # the robot config's physics options and MJCF edits, as the env applies them
    except ValueError as error:
        raise ValueError(f"task '{task}': robot config {robot_file or 'the robot section'}: {error}") from None
    try:
        model = spec.compile()
    except ValueError as error:  # MuJoCo's compiler: e.g. a keyframe of the wrong size
        raise ValueError(f"task '{task}': {model_file}: {_mujoco_message(error)}") from None
    try:
        check_robot(robot, model, robot_file or "the robot section", model_file)
    except ValueError as error:
        raise ValueError(f"task '{task}': {error}") from None
