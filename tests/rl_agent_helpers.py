"""Shared fixtures for the agent tests: a synthetic batch and a one-step bandit loop."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from unilab_gpu.rl.replay import ReplayBuffer

# Inductor codegen takes minutes on 2 CPU cores. The default ("eager" backend) still checks that
# Dynamo captures every update piece as one graph (fullgraph=True); set
# UNILAB_TEST_COMPILE_BACKEND=aot_eager or =inductor to trace autograd or generate code too.
COMPILE_BACKEND = os.environ.get("UNILAB_TEST_COMPILE_BACKEND", "eager")
if COMPILE_BACKEND == "inductor":
    import torch._inductor.config

    # Inductor draws random numbers with its own generator; use eager's so results can match.
    torch._inductor.config.fallback_random = True

A_STAR = torch.tensor([0.5, -0.3])

SAC_SMALL = dict(actor_hidden_dims=(32,), critic_hidden_dims=(32,), num_atoms=21, compile=False)
FLASHSAC_SMALL = dict(
    actor_hidden_dim=16, critic_hidden_dim=16, actor_num_blocks=1, critic_num_blocks=1, num_atoms=21, compile=False
)


def small_agent(algo: str, num_envs: int = 4, compile_backend: str = "inductor", **overrides):
    """A small SAC or FlashSAC agent for policy obs 5, critic obs 7, actions 2 (FlashSAC: ``num_envs``
    rows of per-env state); ``overrides`` are config keys."""
    from unilab_gpu.rl.flashsac import FlashSacAgent, FlashSacConfig
    from unilab_gpu.rl.sac import SacAgent, SacConfig

    if algo == "sac":
        return SacAgent(SacConfig(**{**SAC_SMALL, **overrides}), 5, 7, 2, compile_backend=compile_backend)
    cfg = FlashSacConfig(**{**FLASHSAC_SMALL, **overrides})
    return FlashSacAgent(cfg, 5, 7, 2, num_envs=num_envs, compile_backend=compile_backend)


def synthetic_batch(size: int, policy_dim: int, critic_dim: int, act_dim: int, seed: int = 0) -> dict:
    gen = torch.Generator().manual_seed(seed)
    return {
        "policy_obs": torch.randn(size, policy_dim, generator=gen),
        "critic_obs": torch.randn(size, critic_dim, generator=gen),
        "action": torch.rand(size, act_dim, generator=gen) * 2 - 1,
        "reward": torch.randn(size, generator=gen),
        "next_policy_obs": torch.randn(size, policy_dim, generator=gen),
        "next_critic_obs": torch.randn(size, critic_dim, generator=gen),
        "discount": torch.where(torch.rand(size, generator=gen) < 0.2, 0.0, 0.99),
    }


def bandit_distance(agent, probe: torch.Tensor) -> float:
    """Mean distance of the deterministic action from ``A_STAR`` over ``probe`` observations."""
    return (agent.act(probe, deterministic=True) - A_STAR).norm(dim=-1).mean().item()


def train_bandit(agent, steps: int, updates_per_step: int, num_envs: int = 64, batch_size: int = 256) -> None:
    """One-step bandit: reward ``-|a - A_STAR|^2``, every step terminal; act -> replay -> update."""
    gen = torch.Generator().manual_seed(0)
    replay = ReplayBuffer(64, num_envs, 3, 3, 2, n_step=1, gamma=0.99)
    terminated = torch.ones(num_envs, dtype=torch.bool)
    for step in range(steps):
        obs = torch.randn(num_envs, 3, generator=gen)
        action = agent.act(obs)
        reward = -(action - A_STAR).square().sum(-1)
        replay.add(obs, obs, action, reward, terminated, ~terminated, obs, obs)
        agent.observe_step(reward, terminated, ~terminated)
        if step >= 2:
            for _ in range(updates_per_step):
                agent.update(replay.sample(batch_size, generator=gen))


TINY_SAC_OVERRIDES = [
    "algo.warmup_steps=1",
    "algo.batch_size=8",
    "algo.updates_per_step=1",
    "algo.buffer_capacity_per_env=16",
    "algo.actor_hidden_dims=[8]",
    "algo.critic_hidden_dims=[8]",
    "algo.num_atoms=11",
]
"""``unilab-train`` overrides that shrink a SAC preset (``sac`` or ``sac_velocity``) to its smallest,
for runs that test the tooling around training."""

TINY_FLASHSAC_OVERRIDES = [
    "algo.warmup_steps=2",
    "algo.batch_size=8",
    "algo.actor_hidden_dim=8",
    "algo.critic_hidden_dim=8",
    "algo.actor_num_blocks=1",
    "algo.critic_num_blocks=1",
    "algo.num_atoms=11",
]
"""``unilab-train`` overrides of the smallest FlashSAC, for runs that test the tooling around training."""


def tensorboard_events(run_dir: str | os.PathLike) -> Any:
    """The TensorBoard events written under ``run_dir``, loaded (an ``EventAccumulator``).

    Imported here, not at module level: ``pytest -m gpu`` collects every test module, and a
    machine without tensorboard skips the tests that read events instead of failing collection.
    """
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    events = accumulator.EventAccumulator(str(run_dir))
    events.Reload()
    return events
