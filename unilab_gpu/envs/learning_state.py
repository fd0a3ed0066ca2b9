"""What an env learns over a run and a resume restores: stateful terms and terrain levels.

Every class term with ``state_dict()`` contributes under its path (e.g. the adaptive motion
sampler's failure rates under ``commands.motion``), and the terrain curriculum its rows' levels
under ``terrain``; episodes themselves restart on resume.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.managers.term import Term

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

TERRAIN_STATE = "terrain"
"""The key of the terrain curriculum's levels in :func:`learning_state`."""


def learning_state(env: ManagerBasedRlEnv) -> dict[str, dict[str, torch.Tensor]]:
    """The env's learned state, by term path (``ManagerBasedRlEnv.learning_state``)."""
    state = {path: term.instance.state_dict() for path, term in _stateful_terms(env)}
    if env.terrain is not None and env.terrain.curriculum is not None:
        state[TERRAIN_STATE] = {"level": env.terrain.level.detach().clone()}
    return state


def load_learning_state(env: ManagerBasedRlEnv, state: dict[str, dict[str, torch.Tensor]]) -> None:
    """Restore :func:`learning_state` in place; a path ``env`` does not have is an error."""
    terms = dict(_stateful_terms(env))
    known = set(terms) | ({TERRAIN_STATE} if env.terrain is not None and env.terrain.curriculum else set())
    unknown = sorted(set(state) - known)
    if unknown:
        raise ValueError(f"learning state for terms {unknown}, which this env does not have: {sorted(known)}")
    for path, values in state.items():
        if path == TERRAIN_STATE:
            _load_terrain_levels(env, values["level"])
        else:
            terms[path].instance.load_state_dict(values)


def _load_terrain_levels(env: ManagerBasedRlEnv, level: torch.Tensor) -> None:
    if tuple(level.shape) != (env.num_envs,):
        raise ValueError(
            f"terrain curriculum state has {tuple(level.shape)} rows, this env {env.num_envs}: "
            "resume with the run's num_envs"
        )
    assert env.terrain is not None  # load_learning_state accepts terrain levels only with a terrain
    env.terrain.set_levels(level.to(env.device))


def _stateful_terms(env: ManagerBasedRlEnv) -> list[tuple[str, Term]]:
    managers: list[tuple[str, list[Term]]] = [
        ("commands", list(env.command_manager.terms.values())),
        ("rewards", env.reward_manager.terms),
        ("terminations", env.termination_manager.terms),
        ("events", [t for terms in env.event_manager.by_mode.values() for t in terms]),
    ]
    managers += [(f"observations.{g}", group.terms) for g, group in env.observation_manager.groups.items()]
    return [
        (f"{prefix}.{term.name}", term)
        for prefix, terms in managers
        for term in terms
        if callable(getattr(term.instance, "state_dict", None))
    ]
