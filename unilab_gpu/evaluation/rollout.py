"""Roll out a fixed policy and summarise the episodes it finished (play, learning curves, tests)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

Policy = Callable[[dict[str, torch.Tensor]], torch.Tensor]
"""Observation groups ``{group: (num_envs, dim)}`` -> actions ``(num_envs, action_dim)``."""


@torch.no_grad()
def evaluate(
    env: ManagerBasedRlEnv,
    policy: Policy,
    steps: int,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, float]:
    """Reset ``env``, run ``policy`` for ``steps`` env steps, return ``env.stats.summary()``
    over the episodes that ended (``episode/count`` says how many).

    Build the env with ``randomize_initial_episode_length=false`` and use ``steps`` equal to
    ``env.max_episode_length`` to score exactly one full episode per env. ``on_step(step)`` is
    called after every step (e.g. to read task diagnostics or render a frame).
    """
    obs = env.reset()
    env.stats.clear()
    for step in range(steps):
        env.step(policy(obs))
        if on_step is not None:
            on_step(step)
    summary = env.stats.summary()
    env.stats.clear()
    return summary


def agent_policy(agent) -> Policy:
    """The deterministic policy of an agent (``agent.act(obs["policy"], deterministic=True)``)."""
    return lambda obs: agent.act(obs["policy"], deterministic=True)


def uniform_random_policy(env: ManagerBasedRlEnv, generator: torch.Generator | None = None) -> Policy:
    """Uniform random actions in ``[-1, 1]``, the trainer's warm-up policy."""
    action = torch.zeros(env.num_envs, env.action_dim, device=env.device)
    return lambda obs: action.uniform_(-1.0, 1.0, generator=generator)
