"""The reset staging order: default pose, then the command terms, then the reset events."""

from __future__ import annotations

import torch

from unilab_gpu.envs.make_env import make_env


def test_commands_then_events_edit_the_staged_default_pose_in_order() -> None:
    env = make_env(
        "pendulum",
        num_envs=5,
        compile=False,
        announce=False,
        overrides=[
            "reset_capacity=3",
            "events.random_start=null",
            "+commands.probe={func: env_test_terms.StagingProbe}",
            "+events.after={func: env_test_terms.record_staged, mode: reset}",
        ],
    )
    staging = env.reset_staging
    addresses = {name: getattr(staging, name).data_ptr() for name in ("env_ids", "qpos", "qvel", "episode_failed")}
    env.reset()
    probe = env.command_manager.get("probe")
    default = env.robot.default_qpos.expand(3, -1)
    torch.testing.assert_close(probe.seen, default)  # the command saw the default pose
    torch.testing.assert_close(env.seen_by_event[:, 0], torch.ones(3))  # the event saw the command's pose
    torch.testing.assert_close(env.sim.state.qpos[:, 0], torch.full((5,), 1.5))  # both reached the worlds
    assert {name: getattr(staging, name).data_ptr() for name in addresses} == addresses


def test_episode_failed_is_staged_for_the_rows_being_reset() -> None:
    env = make_env(
        "pendulum",
        num_envs=4,
        compile=False,
        announce=False,
        overrides=["+terminations.forced={func: env_test_terms.ForcedEnd}"],
    )
    env.reset()
    forced = env.termination_manager.terms[-1].instance
    forced.mask[:] = torch.tensor([False, True, False, True])
    env.step(torch.zeros(4, 1))  # rows 1 and 3 fail and are reset within the step
    staging = env.reset_staging
    assert staging.env_ids.tolist()[:2] == [1, 3]
    assert staging.episode_failed.tolist()[:2] == [True, True]
    assert not staging.episode_failed[2:].any()  # padded slots
