"""CI runs the README's commands and nothing else: a newcomer's fresh clone sees what CI sees.

``.ci/run`` marks the lines it takes from the README (``# README: install``, ``lint``, ``types``, ``test``);
the test line must be the README's character for character and nothing may be exported around
it, so whatever the tests need (one torch thread per worker) is set by the suite itself.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    """The commands of the README's ``bash`` blocks in its "Set up" section, comments stripped."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return [line.split("#", 1)[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


def ci_line(mark: str) -> str:
    """The command of ``.ci/run``'s line marked ``# README: <mark>``, comment stripped."""
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if f"# README: {mark}" in line]
    assert len(lines) == 1, f".ci/run must mark exactly one line '# README: {mark}', found {len(lines)}"
    return lines[0].split("#", 1)[0].strip()


def test_ci_runs_the_readme_test_command_exactly() -> None:
    test_lines = [c for c in readme_commands() if c.startswith("pytest")]
    assert test_lines == ["pytest -q -n 2 --dist loadfile"], test_lines
    assert ci_line("test") == test_lines[0]


def test_ci_lints_as_the_readme_says() -> None:
    lint = [c for c in readme_commands() if c.startswith("ruff")]
    assert lint == ["ruff check . && ruff format --check ."], lint
    assert ci_line("lint") == lint[0]


def test_ci_type_checks_as_the_readme_says() -> None:
    """One ``mypy`` line, which reads its packages and settings from ``pyproject.toml`` (so the
    README, CI and pre-commit users check the same thing)."""
    types = [c for c in readme_commands() if c.startswith("mypy")]
    assert types == ["mypy"], types
    assert ci_line("types") == types[0]
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    checked = pyproject["tool"]["mypy"]["files"]
    assert {f"unilab_gpu/{p}" for p in ("envs", "managers", "deploy", "rl")} <= set(checked), checked
    assert any(d.startswith("mypy==") for d in pyproject["project"]["optional-dependencies"]["dev"])


def test_ci_installs_as_the_readme_says() -> None:
    install = [c for c in readme_commands() if " install " in c]
    assert install == ['pip install -e ".[dev]"'], install
    # CI spells pip through its venv's interpreter and quietly; the requirement is the README's.
    assert re.fullmatch(r"python -m pip install --quiet (.*)", ci_line("install")).group(1) == '-e ".[dev]"'


def test_ci_exports_nothing_the_readme_does_not_say() -> None:
    """No ``export`` anywhere (the system packages' ``DEBIAN_FRONTEND=...`` prefix is apt's own)."""
    commands = [line.split("#", 1)[0].strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    assert not [c for c in commands if re.match(r"(export|declare -x|set -a)\b", c)], (
        ".ci/run exports environment variables; the README's commands must run as they are"
    )
