"""No stored transition joins two episodes, even when more rows end at once than can be reset.

With ``reset_capacity=1`` and every row timing out at the same step, most rows wait several
steps for their reset: they keep simulating past their end (``StepResult.valid`` False) and then
jump to a new episode. An observation term counts each row's episodes, so every sampled
transition can be checked: its next observation (one-step or n-step successor, or the final
observation of an ended episode) must come from the episode of its observation.
"""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.rl.replay import ReplayBuffer

COUNTER = "+observations.policy.terms.episode={func: env_test_terms.EpisodeCounter}"
TASKS = {"pendulum": 0.2, "g1_tracking": 0.16}  # episode_length_s: 10 / 8 steps


@pytest.mark.parametrize("task", list(TASKS))
@pytest.mark.parametrize("n_step", [1, 3])
def test_no_sampled_transition_joins_two_episodes(task: str, n_step: int) -> None:
    overrides = [
        COUNTER,
        "reset_capacity=1",
        "randomize_initial_episode_length=false",
        f"episode_length_s={TASKS[task]}",
    ]
    env = make_env(task, num_envs=6, overrides=overrides, compile=False, seed=0, announce=False)
    dim = env.observation_dims["policy"]
    steps = 40
    # A side table for every end of these short episodes, so no final observation is lost.
    replay = ReplayBuffer(steps, env.num_envs, dim, dim, env.action_dim, n_step=n_step, final_obs_fraction=0.5)
    obs = env.reset()["policy"].clone()
    generator = torch.Generator().manual_seed(0)
    invalid = 0
    for _ in range(steps):
        action = torch.rand(env.num_envs, env.action_dim, generator=generator) * 2 - 1
        result = env.step(action)
        final = result.final_obs["policy"]
        replay.add(obs, obs, action, result.reward, result.terminated, result.truncated, final, final, result.valid)
        invalid += int((~result.valid).sum())
        obs = result.obs["policy"].clone()
    assert int(env.reset_rows.deferred_count) > 0 and invalid > 0  # deferred resets really happened
    assert int(replay.final_overflow) == 0
    batch = replay.sample(2000, torch.Generator().manual_seed(1))
    episode, next_episode = batch["policy_obs"][:, -1], batch["next_policy_obs"][:, -1]
    assert torch.equal(episode, next_episode)
