"""YAML files a user gives (a run's ``config.yaml``, a terrain file), read with the bounds OmegaConf
does not have.

``OmegaConf.load`` copies every YAML alias as it builds the config: a 1 kB file of nested anchors
(``a: &a [x, x]``, ``b: &b [*a, *a]``, ...) expands to billions of values and hangs the command.
:func:`load_bounded_yaml` reads at most a given number of bytes, composes the YAML (an alias is a
shared node there: linear time) and counts its size with every alias followed before OmegaConf
sees it; YAML tags that name Python objects (``!!python/object``) are refused by OmegaConf's safe
loader.

Hydra reads the configs it composes with that same unbounded loader, so :func:`check_config_tree`
reads every YAML of a user's config folders (``UNILAB_PATH``) within bounds before Hydra does.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf._utils import get_yaml_loader  # OmegaConf's own safe loader: its number formats, no tags
from omegaconf.errors import OmegaConfBaseException


class YamlFileError(ValueError):
    """A YAML file that was not loaded; the message is one line naming the file and why."""


def load_bounded_yaml(path: str | os.PathLike, what: str, max_bytes: int, max_values: int) -> DictConfig:
    """The mapping in the YAML file ``path``, read within ``max_bytes`` and ``max_values``.

    Args:
        what: what the file is, for the messages (``"a run's config.yaml"``, ``"a terrain file"``).
        max_values: most keys, values and list items once every alias is followed.

    Raises:
        YamlFileError: the file is too large, not UTF-8 YAML, a bomb of aliases, recursive, tagged
            with a Python object, empty or not a mapping.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as file:
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise YamlFileError(f"{path} is larger than {max_bytes >> 10} kB, but {what} holds a few kB; it was not read")
    try:
        text = data.decode("utf-8")
        root = yaml.compose(text, Loader=get_yaml_loader())
        values = expanded_values(root)
    except UnicodeDecodeError as error:
        raise YamlFileError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except yaml.YAMLError as error:
        raise YamlFileError(f"{path} is not valid YAML: {yaml_problem(error)}") from None
    except (RecursionError, _RecursiveAlias):
        raise YamlFileError(f"{path} nests itself (a recursive YAML alias, or nesting too deep to read)") from None
    if values > max_values:
        raise YamlFileError(
            f"{path} expands to {values:,} values through YAML aliases (&anchor / *alias), more than "
            f"{max_values:,}; {what} has a few hundred and no aliases, so it was not loaded"
        )
    if values == 0:
        raise YamlFileError(f"{path} is empty; {what} is a mapping of config keys")
    if not isinstance(root, yaml.MappingNode):  # OmegaConf.create fails an assert on a lone scalar
        found = "a list" if isinstance(root, yaml.SequenceNode) else f"the single value {root.value!r}"[:80]
        raise YamlFileError(f"{path} is not a mapping of config keys (found {found}); {what} is key: value lines")
    try:
        cfg = OmegaConf.create(text)
    except yaml.constructor.ConstructorError as error:
        tagged = "constructor for the tag" in str(error.problem)
        why = f"; {what} holds plain values, never tagged Python objects" if tagged else ""
        raise YamlFileError(f"{path}: {yaml_problem(error)}{why}") from None
    except (yaml.YAMLError, OmegaConfBaseException) as error:
        raise YamlFileError(f"{path} is not a readable config: {' '.join(str(error).split())[:200]}") from None
    if not isinstance(cfg, DictConfig):
        raise YamlFileError(f"{path} is not a mapping of config keys (found a {type(cfg).__name__})")
    return cfg


CONFIG_MAX_BYTES = 1 << 20
"""Largest YAML config of a user's config folder (the project's largest task config has 8 kB)."""

CONFIG_MAX_VALUES = 200_000
"""Most values of one config once its aliases are followed (the project's have a few hundred)."""

_checked: dict[Path, tuple[int, int]] = {}
"""Config files read within bounds already, with their ``(mtime_ns, size)`` then."""


def check_config_tree(folders: Iterable[Path]) -> None:
    """Read every ``*.yaml`` under ``folders`` within bounds (:func:`load_bounded_yaml`), so that
    Hydra, which follows YAML aliases without end, composes none that would hang it. Files already
    read unchanged are skipped.

    Raises:
        YamlFileError: a file too large, not YAML, a bomb of aliases or not a mapping; one line
            naming the file.
    """
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.yaml")):
            try:
                stat = path.stat()
            except OSError:
                continue  # gone, or unreadable: Hydra names it if the config needs it
            if _checked.get(path) == (stat.st_mtime_ns, stat.st_size):
                continue
            load_bounded_yaml(path, "a config of a UNILAB_PATH folder", CONFIG_MAX_BYTES, CONFIG_MAX_VALUES)
            _checked[path] = (stat.st_mtime_ns, stat.st_size)


class _RecursiveAlias(Exception):
    """A YAML node that contains itself through an alias."""


def expanded_values(root: yaml.Node | None) -> int:
    """Nodes of the tree ``root`` stands for once every alias is copied, counted without copying
    (each shared node once, iteratively: no recursion limit)."""
    if root is None:
        return 0
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # on the current path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _yaml_children(node)
        if children_done:
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            open_nodes.discard(id(node))
            continue
        if id(node) in open_nodes:
            raise _RecursiveAlias
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes[id(root)]


def _yaml_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def yaml_problem(error: yaml.YAMLError) -> str:
    """``<problem> (line L, column C)`` of a YAML error, on one line."""
    if isinstance(error, yaml.MarkedYAMLError):
        where = error.problem_mark or error.context_mark
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else ""
        return f"{' '.join(str(error.problem or error.context).split())}{at}"
    return " ".join(str(error).split())
