"""gymnasium adapter: spaces, dtypes, same-step autoreset around an episode end, seeded reset."""

from __future__ import annotations

import numpy as np
import pytest
import torch

gym = pytest.importorskip("gymnasium")

from gymnasium.vector import AutoresetMode  # noqa: E402

from unilab_gpu.adapters.gymnasium_env import GymVectorEnv  # noqa: E402
from unilab_gpu.envs.make_env import make_env  # noqa: E402
from unilab_gpu.utils.sync_audit import no_host_sync  # noqa: E402

N, LENGTH = 4, 4  # pendulum: 0.2 s episodes of 0.05 s steps
SHORT = [f"episode_length_s={0.05 * LENGTH}", "randomize_initial_episode_length=false"]


def actions(t: int) -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, N)[:, None] * np.cos(0.7 * t)


def contains(space, value: torch.Tensor) -> bool:
    return space.contains(value.numpy())


def test_spaces_and_same_step_autoreset_around_an_episode_end() -> None:
    envs = GymVectorEnv.make("pendulum", N, "cpu", tuple(SHORT), compile=False)
    # Reference: the same dynamics and actions with no episode end (final obs = its observation).
    ref = make_env("pendulum", N, "cpu", ["randomize_initial_episode_length=false"], compile=False)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert envs.single_observation_space == gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    assert envs.observation_space.shape == (N, 3) and envs.action_space.shape == (N, 1)
    assert envs.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    obs, info = envs.reset(seed=5)
    torch.manual_seed(5)
    ref_obs = ref.reset()["policy"].clone()
    torch.testing.assert_close(obs, ref_obs)
    assert info == {} and obs.dtype == torch.float32 and contains(envs.observation_space, obs)
    for t in range(LENGTH + 2):
        obs, reward, terminated, truncated, info = envs.step(actions(t))
        ref_result = ref.step(actions(t))
        assert obs.shape == (N, 3) and reward.shape == (N,) and reward.dtype == torch.float32
        assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
        assert contains(envs.observation_space, obs) and contains(envs.observation_space, info["final_obs"])
        torch.testing.assert_close(reward, ref_result.reward)  # same transition as the long episode
        ended = t == LENGTH - 1
        assert not terminated.any() and bool(truncated.all()) is ended  # time-out only
        assert torch.equal(info["_final_obs"], truncated)
        if ended:
            # final_obs is the observation the ended episode would have seen next ...
            torch.testing.assert_close(info["final_obs"], ref_result.obs["policy"])
            # ... and obs is already the next episode's first one, read from the reset state.
            q = envs.env.robot.joint_pos
            torch.testing.assert_close(obs, torch.cat([q.cos(), q.sin(), 0.125 * envs.env.robot.joint_vel], 1))
            assert (obs - ref_result.obs["policy"]).abs().max() > 1e-2
            break
        torch.testing.assert_close(obs, ref_result.obs["policy"])
    # The step after: a normal transition of the new episode, no final observation.
    obs2, _, _, truncated, info = envs.step(actions(0))
    assert not truncated.any() and not info["_final_obs"].any()
    assert not torch.equal(obs2, obs)
    envs.close()


def test_seeded_reset_is_reproducible_and_returns_copies() -> None:
    envs = GymVectorEnv.make("pendulum", N, "cpu", compile=False)
    first, _ = envs.reset(seed=1)
    again, _ = envs.reset(seed=1)
    other, _ = envs.reset(seed=2)
    torch.testing.assert_close(first, again)
    assert not torch.allclose(first, other)
    kept = envs.step(actions(0))[0]
    before = kept.clone()
    envs.step(actions(1))
    torch.testing.assert_close(kept, before)  # not the env's persistent buffer
    step_actions = actions(2)
    with no_host_sync():  # the adapter adds copies and elementwise ops only
        for _ in range(3):
            envs.step(step_actions)


def test_dict_observations_and_bad_setup() -> None:
    env = make_env("pendulum", N, "cpu", compile=False, overrides=[f"reset_capacity={N}"])
    envs = GymVectorEnv(env, group=None)
    obs, _ = envs.reset(seed=0)
    assert isinstance(envs.single_observation_space, gym.spaces.Dict) and set(obs) == {"policy"}
    assert envs.observation_space.contains({k: v.numpy() for k, v in obs.items()})
    with pytest.raises(ValueError, match="reset_capacity must equal num_envs"):
        GymVectorEnv(make_env("pendulum", 16, "cpu", compile=False, overrides=["reset_capacity=2"]))
    no_final = make_env("pendulum", N, "cpu", compile=False, overrides=[f"reset_capacity={N}", "final_obs=false"])
    with pytest.raises(ValueError, match="final_obs: true"):
        GymVectorEnv(no_final)
    with pytest.raises(ValueError, match="group must be one of"):
        GymVectorEnv(env, group="critic")


@pytest.mark.parametrize(
    ("bad", "kind"),
    [
        (np.full((N, 1), "0.5"), "<U3"),
        (np.array([[0.1], [None], [0.2], [0.3]], dtype=object), "object"),
        (np.full((N, 1), 0.5, dtype=object), "object"),  # numbers, but in an object array
        (np.full((N, 1), 0.5 + 1j), "complex128"),  # torch would drop the imaginary part
        (torch.ones(N, 1, dtype=torch.bool), "bool"),
        ([[0.1], [0.2, 0.3], [0.4], [0.5]], "rows of different lengths"),
        (torch.zeros(N, 1, device="meta"), "a tensor on the 'meta' device (no values)"),
    ],
)
def test_actions_that_are_not_real_numbers_are_one_line(bad, kind) -> None:
    envs = GymVectorEnv.make("pendulum", N, "cpu", compile=False)
    envs.reset(seed=0)
    before = envs.env.episode_length.clone()
    with pytest.raises(TypeError) as refused:
        envs.step(bad)
    assert str(refused.value) == f"GymVectorEnv.step: actions must be real numbers of shape ({N}, 1), got {kind}"
    assert torch.equal(envs.env.episode_length, before)  # no step was taken
    obs, *_ = envs.step(np.zeros((N, 1), dtype=np.int64))  # integers are numbers
    assert obs.shape == (N, envs.env.observation_dims["policy"])
