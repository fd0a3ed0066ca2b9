"""The "Add a reward term" recipe of docs/architecture.md, step by step."""

from __future__ import annotations

import pytest
import torch

from unilab_gpu.envs.make_env import make_env

TERM = "+rewards.too_fast={func: env_test_terms.joint_speed_above, weight: -2.0, params: {limit: 5.0}}"


def test_the_recipe_reward_is_weighted_by_step_dt_and_summed() -> None:
    env = make_env("pendulum", num_envs=3, compile=False, announce=False, overrides=[TERM])
    env.reset()
    assert env.reward_manager.term_names[-1] == "too_fast"
    env.robot.joint_vel.copy_(torch.tensor([[1.0], [-9.0], [6.0]]))  # a view of qvel: this sets the state
    env.reward_manager.compute(env, torch.zeros(3, dtype=torch.bool))
    expected = -2.0 * torch.tensor([0.0, 1.0, 1.0]) * env.step_dt
    torch.testing.assert_close(env.reward_manager.step_terms[:, -1], expected)


def test_the_recipe_reward_without_its_parameter_names_the_key() -> None:
    with pytest.raises(ValueError, match=r"rewards.too_fast.params: missing 'limit'"):
        make_env(
            "pendulum",
            num_envs=1,
            compile=False,
            announce=False,
            overrides=["+rewards.too_fast={func: env_test_terms.joint_speed_above, weight: -2.0}"],
        )
