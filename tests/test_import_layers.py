"""The packages of unilab_gpu import each other without cycles (type-checking imports aside).

Each subpackage (``sim``, ``managers``, ``envs``, ``rl``, ...) may import only packages below it;
a cycle means two packages can only be understood, tested and changed together.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "unilab_gpu"


def _runtime_imports(tree: ast.AST) -> list[str]:
    """Modules imported outside ``if TYPE_CHECKING:`` blocks (absolute ``unilab_gpu.*`` only)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                found.append(child.module)
            visit(child)

    visit(tree)
    return [name for name in found if name.startswith("unilab_gpu.")]


def _package_of(path_or_module: str) -> str | None:
    parts = path_or_module.split(".")
    return parts[1] if len(parts) > 2 else None  # unilab_gpu.<package>.<module>; top-level modules: None


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(("unilab_gpu", *path.relative_to(PACKAGE).with_suffix("").parts))
        source = _package_of(module)
        if source is None:
            continue
        for imported in _runtime_imports(ast.parse(path.read_text())):
            target = _package_of(imported)
            if target is not None and target != source:
                graph.setdefault(source, set()).add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def test_packages_import_each_other_without_cycles() -> None:
    graph = package_graph()
    assert {"managers", "sim"} <= graph["envs"] and "envs" in graph["rl"]  # the walk really read the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def test_evaluation_is_one_package_above_rl_and_below_training() -> None:
    """Every evaluation lives in ``unilab_gpu/evaluation/`` (no ``evaluation`` module in another
    package): it rolls out what ``rl`` trains on ``envs``, and training (``eval.every``) and the
    commands call it, so it never imports ``training`` or ``cli``."""
    graph = package_graph()
    assert {"envs", "rl"} <= graph["evaluation"] and not {"training", "cli"} & graph["evaluation"]
    assert "evaluation" in graph["training"] and "evaluation" in graph["cli"]
    elsewhere = [
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "evaluation" in path.stem and path.parent != PACKAGE / "evaluation"
    ]
    assert elsewhere == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": {"c"}}) is None


def _all_imports(tree: ast.AST) -> list[str]:
    """Every ``unilab_gpu.*`` module imported, type-checking imports included."""
    found = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    found += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    return [name for name in found if name.startswith("unilab_gpu.")]


def test_managers_do_not_import_envs_or_terrain() -> None:
    """Terms and managers see the env through ``managers.env_view.EnvView``, not the env class, and the
    terrain through its ``Ground`` Protocol (``terrain`` builds on ``managers``): not even a
    type-checking import of ``envs`` or ``terrain`` (which would hide the dependency the cycle check skips)."""
    above = ("unilab_gpu.envs", "unilab_gpu.terrain")
    offenders = {
        str(path.relative_to(PACKAGE)): [
            name for name in _all_imports(ast.parse(path.read_text())) if name.startswith(above)
        ]
        for path in (PACKAGE / "managers").rglob("*.py")
    }
    offenders = {path: names for path, names in offenders.items() if names}
    assert offenders == {}
    assert _all_imports(ast.parse("from unilab_gpu.envs.make_env import make_env")) == ["unilab_gpu.envs.make_env"]


def test_no_module_takes_a_name_from_the_package_face() -> None:
    """``unilab_gpu/__init__.py`` hands the public names on (lazily) from the modules that define them;
    a module of the package imports them from there, never from the face, whose names come from
    above it (``__version__`` is the face's own)."""
    offenders = {
        str(path.relative_to(PACKAGE)): names
        for path in PACKAGE.rglob("*.py")
        if (
            names := [
                alias.name
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and node.module == "unilab_gpu" and node.level == 0
                for alias in node.names
                if alias.name != "__version__"
            ]
        )
    }
    assert offenders == {}
