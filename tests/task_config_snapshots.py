"""The task config snapshots (``tests/data/task_configs/<task>.yaml``) and the command that rewrites them.

``tests/test_task_configs.py`` asserts that each task still resolves to its snapshot, so a change
to a task config, a robot config or a term's defaults that changes what a task resolves to fails
there. When the change is meant, rewrite the snapshots it touches and say why in that test's
docstring, in the same commit::

    python tests/task_config_snapshots.py --update               # every snapshot
    python tests/task_config_snapshots.py --update g1_velocity   # one (or a new task's first)

A snapshot holds the resolved config without the sections checked elsewhere (:data:`UNCHECKED`),
in the order the env reads it (the order of terms is the order of the observation layout); an
existing snapshot keeps its header comment.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

import yaml

from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.utils.files import write_atomic

SNAPSHOTS = Path(__file__).parent / "data" / "task_configs"
UPDATE_COMMAND = "python tests/task_config_snapshots.py --update"
UNCHECKED = ("robot", "terrain", "control_dt")
"""Sections a snapshot leaves out: the robot config (its own file, ``configs/robot/``), and the
terrain and control period, which ``tests/test_task_configs.py`` asserts by value."""


def resolved(task: str) -> dict[str, Any]:
    """Task ``task``'s resolved config as plain data, with every section (:data:`UNCHECKED` too)."""
    return dataclasses.asdict(load_task_cfg(task))


def snapshot_of(config: dict[str, Any]) -> dict[str, Any]:
    """What a snapshot holds of a :func:`resolved` config."""
    return {key: value for key, value in config.items() if key not in UNCHECKED}


def render(task: str, config: dict[str, Any], header: str | None = None) -> str:
    """The snapshot file of ``config`` (a :func:`snapshot_of`), under ``header`` (comment lines)."""
    if header is None:
        header = (
            f"# Resolved config of task '{task}' ({UPDATE_COMMAND}).\n"
            "# tests/test_task_configs.py asserts that the current configs resolve to exactly this.\n"
        )
    return header + yaml.safe_dump(config, sort_keys=False)


def _header(path: Path) -> str | None:
    if not path.is_file():
        return None
    lines = path.read_text().splitlines(keepends=True)
    return "".join(line for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("#"))])


def update(tasks: list[str]) -> list[str]:
    """Rewrite the snapshots of ``tasks`` (all existing ones when empty); returns those that changed."""
    changed = []
    for task in tasks or sorted(p.stem for p in SNAPSHOTS.glob("*.yaml")):
        path = SNAPSHOTS / f"{task}.yaml"
        text = render(task, snapshot_of(resolved(task)), _header(path))
        if not path.is_file() or path.read_text() != text:
            write_atomic(path, lambda file, text=text: file.write(text.encode()))
            changed.append(task)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--update", action="store_true", required=True, help="rewrite the snapshots")
    parser.add_argument("tasks", nargs="*", help="tasks to snapshot (default: every existing snapshot)")
    args = parser.parse_args(argv)
    changed = update(args.tasks)
    print(f"rewrote {', '.join(changed)}; say why in tests/test_task_configs.py" if changed else "no snapshot changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
