"""Each term declares what the rest of the project needs of it (``managers/term_spec.py``).

Every term a task under ``configs/task`` configures resolves (export records its defining path);
every observation term declares its mirror rule and its deploy twin (or that it has none); every
term of the exported ``policy`` group has a twin that the deploy runtime finds by that path and
that accepts the parameters export writes; every failure termination and command declares its
twin. The runtime's own tables, keyed by the env term's path because the runtime cannot import a
torch module, agree with the declarations entry for entry. And the short ``func`` spelling of the
project's terms names the same callables as the full one.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from unilab_gpu.deploy.terminations import TERMINATIONS
from unilab_gpu.deploy.terms import COMMAND_KINDS, TERMS
from unilab_gpu.envs.env_cfg import EnvCfg
from unilab_gpu.envs.make_env import load_task_cfg
from unilab_gpu.envs.mdp import observations, rewards
from unilab_gpu.export.metadata import _term_params, defining_path
from unilab_gpu.managers.term import resolve_callable
from unilab_gpu.managers.term_cfg import canonical_func
from unilab_gpu.managers.term_spec import UNDECLARED, TermSpec, spec_of, term
from unilab_gpu.utils.imports import import_dotted

TASKS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "configs" / "task").glob("*.yaml"))
EXPORTED_GROUP = "policy"
"""The observation group ``unilab-export`` writes (``export.metadata.deployment_metadata``)."""
NOT_DEPLOYED = {"pendulum": "a fixed-base toy; the runtime drives floating-base robots (deploy/model_check.py)"}
"""Tasks no exported policy of which the deploy runtime can run, and why."""
RUNTIME_OWN = "unilab_gpu.deploy.terms."
"""Readers of the runtime's own that foreign policy formats name (no env term twins them)."""


def _twin(twin, path: str, table: dict, name: str, what: str, params: dict) -> list[str]:
    """What is wrong with the twin ``twin`` of env term ``path`` (a builder ``build(ctx, name, **params)``)."""
    if table.get(path) is not twin:
        return [f"{what}: the runtime's table has {table.get(path)!r} under '{path}', the term declares {twin!r}"]
    try:
        inspect.signature(twin).bind(None, name, **params)
    except TypeError as error:
        return [f"{what}: its twin {twin.__name__} does not take the parameters export writes {params}: {error}"]
    return []


def missing_declarations(cfg: EnvCfg, deployed: bool = True) -> list[str]:
    """What a task config's terms lack for export, mirror and deploy (``deployed``: its exported
    policy runs on the deploy runtime), one line each (empty: nothing)."""
    problems: list[str] = []
    exported = EXPORTED_GROUP if deployed else None
    for group, group_cfg in cfg.observations.items():
        for name, term_cfg in group_cfg.terms.items():
            if term_cfg is None:
                continue
            where = f"observations.{group}.terms.{name}"
            target = resolve_callable(term_cfg.func, f"{where}.func")
            spec, path = spec_of(target), defining_path(target)
            if spec.mirror is UNDECLARED or spec.deploy is UNDECLARED:
                problems.append(f"{where}: {path} declares no mirror rule or twin (@term(mirror=..., deploy=...))")
            elif group == exported and spec.deploy is None:
                problems.append(f"{where}: {path} is exported but declares no deploy twin")
            elif group == exported:
                params = _term_params(term_cfg.func, term_cfg.params, where)
                problems += _twin(spec.deploy, path, TERMS, name, where, params)
    for name, term_cfg in cfg.terminations.items():
        if term_cfg is None or term_cfg.time_out:  # a time-out is no failure: sim-to-sim counts falls
            continue
        where = f"terminations.{name}"
        target = resolve_callable(term_cfg.func, f"{where}.func")
        spec, path = spec_of(target), defining_path(target)
        if spec.deploy is UNDECLARED:
            problems.append(f"{where}: {path} declares no fall-check twin (@term(deploy=...), None for none)")
        elif spec.deploy is not None:
            problems += _twin(spec.deploy, path, TERMINATIONS, name, where, dict(term_cfg.params))
    for name, term_cfg in cfg.commands.items():
        if term_cfg is None:
            continue
        target = resolve_callable(term_cfg.func, f"commands.{name}.func")
        spec, path = spec_of(target), defining_path(target)
        if spec.deploy is UNDECLARED:
            problems.append(f"commands.{name}: {path} declares no command kind (@term(deploy='velocity'), ...)")
        elif spec.deploy is not None and COMMAND_KINDS.get(path) != spec.deploy:
            problems.append(f"commands.{name}: the runtime's kind of {path} is {COMMAND_KINDS.get(path)!r}")
    for table in ("rewards", "events"):  # export and the env resolve these by path
        for name, term_cfg in getattr(cfg, table).items():
            if term_cfg is not None:
                resolve_callable(term_cfg.func, f"{table}.{name}.func")
    resolve_callable(cfg.actions.func, "actions.func")
    return problems


@pytest.mark.parametrize("task", TASKS)
def test_every_configured_term_declares_what_export_mirror_and_deploy_need(task: str) -> None:
    assert missing_declarations(load_task_cfg(task), deployed=task not in NOT_DEPLOYED) == []


def test_an_undeclared_or_unexported_term_is_named() -> None:
    cfg = load_task_cfg(
        "g1_velocity",
        [
            "+observations.policy.terms.alive={func: mdp.rewards.alive}",
            "+observations.policy.terms.height={func: mdp.observations.root_height}",
            "terminations.fell.func=mdp.terminations.time_out",
        ],
    )
    assert missing_declarations(cfg) == [
        "observations.policy.terms.alive: unilab_gpu.envs.mdp.rewards.alive declares no mirror rule or twin "
        "(@term(mirror=..., deploy=...))",
        "observations.policy.terms.height: unilab_gpu.envs.mdp.observations.root_height is exported but declares "
        "no deploy twin",
        "terminations.fell: unilab_gpu.envs.mdp.terminations.time_out declares no fall-check twin (@term(deploy=...), "
        "None for none)",
    ]


def test_the_runtime_tables_are_the_declared_twins() -> None:
    tables = {"observation": TERMS, "termination": TERMINATIONS, "command": COMMAND_KINDS}
    for kind, table in tables.items():
        for path, twin in table.items():
            if path.startswith(RUNTIME_OWN):
                continue
            declared = spec_of(import_dotted(path)).deploy
            assert declared is twin or declared == twin, f"{kind} twin of {path}: the term declares {declared!r}"
    assert len(TERMS) - sum(p.startswith(RUNTIME_OWN) for p in TERMS) == 12 and len(TERMINATIONS) == 4


def test_the_declaration_returns_the_term_itself_and_is_not_inherited() -> None:
    def my_term(env):
        return env

    assert term(mirror=None)(my_term) is my_term
    assert spec_of(my_term) == TermSpec(mirror=None, deploy=UNDECLARED)
    assert spec_of(rewards.alive) == TermSpec()  # a reward declares nothing

    class Biased(observations.BiasedJointPosRel):
        pass

    assert spec_of(observations.BiasedJointPosRel).deploy is not UNDECLARED and spec_of(Biased) == TermSpec()


def test_the_short_spelling_names_the_project_terms(monkeypatch) -> None:
    assert canonical_func("mdp.rewards.alive") == "unilab_gpu.envs.mdp.rewards.alive"
    assert canonical_func("tasks.velocity.rewards.FeetPhase") == "unilab_gpu.tasks.velocity.rewards.FeetPhase"
    assert canonical_func("unilab_gpu.envs.mdp.rewards:alive") == "unilab_gpu.envs.mdp.rewards.alive"
    assert canonical_func("env_test_terms.joint_speed_above") == "env_test_terms.joint_speed_above"
    assert resolve_callable("mdp.rewards.alive", "rewards.alive.func") is rewards.alive
    monkeypatch.setenv("UNILAB_TERM_MODULES", "env_test_terms,mdp.terms")  # a user's own package called mdp
    assert canonical_func("mdp.terms.alive") == "mdp.terms.alive"
    with pytest.raises(ValueError, match="rewards.x.func: cannot import module 'mdp.terms'"):
        resolve_callable("mdp.terms.alive", "rewards.x.func")
