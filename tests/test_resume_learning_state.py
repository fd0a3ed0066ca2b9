"""A resumed tracking run keeps what the env learned: the adaptive sampler's failure rates."""

from __future__ import annotations

import pytest
import torch
from test_rl_trainer import TINY

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.checkpoint import load_checkpoint, save_checkpoint
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings

# Anchor-height threshold of 1 mm: nearly every episode fails, so the sampler learns fast.
OVERRIDES = ["terminations.anchor_height.params.threshold=0.001", "episode_length_s=0.2", "events.push=null"]


def _trainer(seed: int, iterations: int = 6) -> OffPolicyTrainer:
    env = make_env("g1_tracking", num_envs=4, overrides=OVERRIDES, compile=False, seed=seed, announce=False)
    cfg = algo_config(
        {**TINY["sac"], "warmup_steps": 2, "updates_per_step": 1, "buffer_capacity_per_env": 16}, compile=False
    )
    agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(iterations=iterations, seed=seed)
    return OffPolicyTrainer(env, agent, settings)


def _sampler(trainer: OffPolicyTrainer):
    return trainer.env.command_manager.get("motion").sampler


def test_resume_restores_the_samplers_failure_rates(tmp_path) -> None:
    first = _trainer(0)
    first.train()
    learned = _sampler(first).failure_ema.clone()
    assert learned.sum() > 0  # failures were recorded: the check below can fail
    save_checkpoint(tmp_path / "checkpoint.pt", {"trainer": first.state_dict()})

    resumed = _trainer(1)
    uniform = _sampler(resumed).probabilities.clone()
    resumed.load_state_dict(load_checkpoint(tmp_path)["trainer"])
    sampler = _sampler(resumed)
    assert torch.equal(sampler.failure_ema, learned)
    assert torch.equal(sampler.probabilities, _sampler(first).probabilities)
    assert not torch.equal(sampler.probabilities, uniform)


def test_learning_state_of_another_env_is_refused() -> None:
    trainer = _trainer(0, iterations=1)
    state = trainer.env.learning_state()
    assert set(state) == {"commands.motion"}
    assert set(state["commands.motion"]) == {"sampler.failure_ema", "sampler.clip_bins"}
    with pytest.raises(ValueError, match=r"terms \['commands.velocity'\], which this env does not have"):
        trainer.env.load_learning_state({"commands.velocity": {}})
    bins = state["commands.motion"]["sampler.failure_ema"].shape[0]
    with pytest.raises(ValueError, match=f"has \\({bins + 1},\\) bins, this motion library {bins}"):
        trainer.env.load_learning_state({"commands.motion": {"sampler.failure_ema": torch.zeros(bins + 1)}})
