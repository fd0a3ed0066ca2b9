"""The env satisfies the term-facing ``EnvView`` with the documented shapes."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.managers.env_view import EnvView, env_view_members


def test_a_built_env_is_an_env_view_with_the_documented_shapes() -> None:
    env = make_env("pendulum", num_envs=6, compile=False, announce=False, overrides=["reset_capacity=4"])
    assert isinstance(env, EnvView)
    assert {"reward_manager", "terrain", "num_envs"} <= set(env_view_members())
    for name in env_view_members():
        assert hasattr(env, name), name
    n, k, j = env.num_envs, env.reset_capacity, env.robot.num_joints
    nq, nv = env.sim.mj_model.nq, env.sim.mj_model.nv
    assert isinstance(env.device, torch.device) and isinstance(env.step_dt, float)
    assert env.episode_length.shape == (n,) and env.episode_length.dtype == torch.int64
    assert env.robot.joint_pos.shape == (n, j) and env.robot.default_joint_pos.shape == (j,)
    assert env.robot.joint_limits.shape == (j, 2) and env.robot.default_qpos.shape == (nq,)
    staging = env.reset_staging
    assert staging.env_ids.shape == (k,) and staging.env_ids.dtype == torch.int64
    assert staging.qpos.shape == (k, nq) and staging.qvel.shape == (k, nv)
    assert staging.episode_failed.shape == (k,) and staging.episode_failed.dtype == torch.bool
    assert env.action_manager.last_action.shape == (n, env.action_dim)
    assert env.reward_manager.weights.shape == (len(env.reward_manager.terms),)


def test_an_object_missing_a_view_attribute_is_not_an_env_view() -> None:
    env = make_env("pendulum", num_envs=2, compile=False, announce=False)
    view = SimpleNamespace(**{name: getattr(env, name) for name in env_view_members()})
    assert isinstance(view, EnvView)
    del view.reset_staging
    assert not isinstance(view, EnvView)
