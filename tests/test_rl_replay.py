"""Replay ring: successor/final next observations, discounts, wrap-around, n-step, overflow.

A scripted stream labels every observation with (env, episode, time-in-episode, global step),
so each sampled transition can be checked against a NumPy reference built from the log.
"""

import numpy as np
import pytest
import torch

from unilab_gpu.rl.replay import ReplayBuffer

GAMMA = 0.9


class _Stream:
    """Vectorised toy env; obs = (env, episode, t, step), final obs = what the step reached."""

    def __init__(self, num_envs, end_prob, seed):
        self.rng = np.random.default_rng(seed)
        self.num_envs, self.end_prob = num_envs, end_prob
        self.episode = np.zeros(num_envs)
        self.t = np.zeros(num_envs)
        self.step_count = 0
        self.log = []  # per step: (reward, terminated, truncated) arrays

    def obs(self):
        e = np.arange(self.num_envs)
        return np.stack([e, self.episode, self.t, np.full(self.num_envs, self.step_count)], -1)

    def step(self):
        obs = self.obs()
        reward = self.rng.normal(size=self.num_envs)
        ended = self.rng.random(self.num_envs) < self.end_prob
        terminated = ended & (self.rng.random(self.num_envs) < 0.5)
        truncated = ended & ~terminated
        final = obs + np.array([0, 0, 1, 1])
        self.log.append((reward, terminated, truncated))
        self.t = np.where(ended, 0, self.t + 1)
        self.episode = np.where(ended, self.episode + 1, self.episode)
        self.step_count += 1
        return obs, reward, terminated, truncated, final

    def run(self, buffer, steps):
        for _ in range(steps):
            obs, reward, terminated, truncated, final = self.step()
            f = lambda x, dtype=torch.float32: torch.tensor(x, dtype=dtype)  # noqa: E731
            buffer.add(
                f(obs),
                f(obs * 2),
                f(obs[:, :2] + 0.5),
                f(reward),
                f(terminated, torch.bool),
                f(truncated, torch.bool),
                f(final),
                f(final * 2),
            )

    def reference(self, env, step, n):
        """n-step reward, discount and next obs of the transition starting at ``step``."""
        total, k = 0.0, 0
        while True:
            reward, terminated, truncated = self.log[step + k]
            total += GAMMA**k * reward[env]
            if terminated[env] or truncated[env] or k == n - 1:
                break
            k += 1
        discount = 0.0 if self.log[step + k][1][env] else GAMMA ** (k + 1)
        return total, discount, k + 1


def _make(num_envs=4, capacity=50, n_step=1, **kw):
    return ReplayBuffer(
        capacity, num_envs, policy_obs_dim=4, critic_obs_dim=4, act_dim=2, n_step=n_step, gamma=GAMMA, **kw
    )


@pytest.mark.parametrize("n_step", [1, 3])
def test_sampled_transitions_match_reference(n_step):
    # Mean episode length 5 < 8 steps: the side table needs more than the default fraction.
    stream, buffer = _Stream(num_envs=4, end_prob=0.2, seed=n_step), _make(n_step=n_step, final_obs_fraction=0.5)
    stream.run(buffer, 40)
    batch = buffer.sample(512, generator=torch.Generator().manual_seed(0))
    obs = batch["policy_obs"].numpy()
    np.testing.assert_array_equal(batch["critic_obs"].numpy(), 2 * obs)
    np.testing.assert_array_equal(batch["action"].numpy(), obs[:, :2] + 0.5)
    saw = {"ended_terminated": 0, "ended_truncated": 0, "continuing": 0}
    for i, (env, episode, t, step) in enumerate(obs.astype(int)):
        reward, discount, m = stream.reference(env, step, n_step)
        np.testing.assert_allclose(batch["reward"][i].item(), reward, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(batch["discount"][i].item(), discount, rtol=1e-6)
        # Successor obs within the episode, or the true final obs when the window hit an end:
        # both equal (env, episode, t + m, step + m). Reading the successor slot after a reset
        # would give (env, episode + 1, 0, ...) instead.
        np.testing.assert_array_equal(batch["next_policy_obs"][i].numpy(), [env, episode, t + m, step + m])
        np.testing.assert_array_equal(
            batch["next_critic_obs"][i].numpy(), 2 * np.array([env, episode, t + m, step + m])
        )
        _, terminated, truncated = stream.log[step + m - 1]
        key = "ended_terminated" if terminated[env] else "ended_truncated" if truncated[env] else "continuing"
        saw[key] += 1
    assert min(saw.values()) > 10, saw  # all three cases were exercised
    assert buffer.final_overflow.item() == 0


def test_truncated_bootstraps_terminated_does_not():
    buffer = _make(num_envs=2, n_step=1)
    obs, final = torch.zeros(2, 4), torch.ones(2, 4)
    act, reward = torch.zeros(2, 2), torch.ones(2)
    buffer.add(obs, obs, act, reward, torch.tensor([True, False]), torch.tensor([False, True]), final, final)
    buffer.add(obs + 5, obs + 5, act, reward, torch.tensor([False, False]), torch.tensor([False, False]), final, final)
    batch = buffer.sample(64, generator=torch.Generator().manual_seed(0))
    env0 = batch["discount"] == 0.0
    assert 0 < env0.sum() < 64
    np.testing.assert_allclose(batch["discount"][~env0].numpy(), GAMMA)
    np.testing.assert_array_equal(batch["next_policy_obs"].numpy(), np.ones((64, 4)))  # never obs + 5


def test_wrap_around_samples_only_complete_live_windows():
    capacity, n_step, steps = 7, 2, 30
    stream, buffer = _Stream(num_envs=3, end_prob=0.1, seed=5), _make(num_envs=3, capacity=capacity, n_step=n_step)
    stream.run(buffer, steps)
    batch = buffer.sample(4000, generator=torch.Generator().manual_seed(1))
    start_steps = batch["policy_obs"][:, 3].numpy().astype(int)
    # Live slots hold steps [steps - capacity, steps - 1]; a window start needs n more steps.
    assert set(start_steps) == set(range(steps - capacity, steps - n_step))
    for i in range(0, 4000, 97):
        env, episode, t, step = batch["policy_obs"][i].numpy().astype(int)
        reward, discount, m = stream.reference(env, step, n_step)
        np.testing.assert_allclose(batch["reward"][i].item(), reward, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(batch["next_policy_obs"][i].numpy(), [env, episode, t + m, step + m])


def test_side_table_overflow_is_counted_and_lost_rows_do_not_bootstrap():
    capacity, num_envs = 6, 4
    buffer = _make(num_envs=num_envs, capacity=capacity, final_obs_fraction=1 / 24)
    assert buffer.final_capacity == num_envs + 1
    stream = _Stream(num_envs=num_envs, end_prob=1.0, seed=2)  # every env ends every step
    stream.run(buffer, 12)
    # Host simulation of the documented rule: entries are written round-robin; evicting an entry
    # whose owning step is among the last ``capacity - 1`` steps counts as an overflow.
    owner, write, expected = [None] * buffer.final_capacity, 0, 0
    for step in range(12):
        for _ in range(num_envs):
            if owner[write] is not None and owner[write] > step - capacity:
                expected += 1
            owner[write], write = step, (write + 1) % buffer.final_capacity
    assert buffer.final_overflow.item() == expected > 0
    batch = buffer.sample(2000, generator=torch.Generator().manual_seed(3))
    correct = (batch["next_policy_obs"] - batch["policy_obs"] == torch.tensor([0.0, 0.0, 1.0, 1.0])).all(-1)
    assert (~correct).any() and correct.any()
    assert (batch["discount"][~correct] == 0).all()


def test_errors_and_bytes_per_transition():
    buffer = _make(num_envs=2, capacity=10, n_step=3)
    with pytest.raises(RuntimeError, match="n_step=3"):
        buffer.sample(4)
    with pytest.raises(ValueError, match="'reward'"):
        z = torch.zeros(2, 4)
        buffer.add(
            z,
            z,
            torch.zeros(2, 2),
            torch.zeros(3),
            torch.zeros(2, dtype=torch.bool),
            torch.zeros(2, dtype=torch.bool),
            z,
            z,
        )
    # obs 2 x 4 x 4 B + action 8 B + reward 4 B + flags 3 B (terminated, truncated, valid) + final
    # index 8 B, plus the side table (2 + ceil(0.125 * 20) = 5 rows + padding, 2 x 16 B obs + 8 B
    # owner) and slot steps.
    expected = 32 + 8 + 4 + 3 + 8 + (6 * (32 + 8) + 10 * 8) / 20
    assert buffer.bytes_per_transition == pytest.approx(expected)


def test_reduced_precision_observations_are_returned_as_float32():
    buffer = _make(num_envs=2, capacity=4, obs_dtype=torch.bfloat16)
    obs = torch.tensor([[1.0, 2.0, 3.0, 1.0 / 3.0], [4.0, 5.0, 6.0, 7.0]])
    flags = torch.zeros(2, dtype=torch.bool)
    for _ in range(2):
        buffer.add(obs, obs, torch.zeros(2, 2), torch.zeros(2), flags, flags, obs, obs)
    batch = buffer.sample(8, generator=torch.Generator().manual_seed(0))
    assert batch["policy_obs"].dtype == torch.float32 and batch["next_critic_obs"].dtype == torch.float32
    rows = batch["policy_obs"][:, 0].long() // 3  # 1 -> env 0, 4 -> env 1
    torch.testing.assert_close(batch["policy_obs"], obs[rows], rtol=4e-3, atol=0)


def test_steps_past_an_episode_end_are_never_sampled_or_joined(n_step=3):
    """Rows whose reset is deferred keep stepping past their end (``valid`` False) and then jump to
    the next episode: no sampled transition starts there or joins two episodes."""
    rng = np.random.default_rng(7)
    num_envs, steps = 6, 120
    buffer = _make(num_envs=num_envs, capacity=steps, n_step=n_step)
    episode, t = np.zeros(num_envs), np.zeros(num_envs)
    deferred = np.zeros(num_envs, dtype=int)  # steps left before a pending row is reset
    pending = np.zeros(num_envs, dtype=bool)
    invalid_steps = 0
    for _ in range(steps):
        valid = ~pending
        obs = np.stack([np.arange(num_envs), episode, t, valid.astype(float)], -1)
        ended = valid & (rng.random(num_envs) < 0.15)
        final = obs + np.array([0, 0, 1, 0])
        f = lambda x, dtype=torch.float32: torch.tensor(x, dtype=dtype)  # noqa: E731
        buffer.add(
            f(obs), f(obs), f(obs[:, :2]), f(rng.normal(size=num_envs)), f(ended, torch.bool),
            f(np.zeros(num_envs), torch.bool), f(final), f(final), f(valid, torch.bool),
        )  # fmt: skip
        invalid_steps += int((~valid).sum())
        # Ended rows reset now or after 1-2 deferred steps; pending rows count down.
        newly = ended & (rng.random(num_envs) < 0.5)
        deferred = np.where(newly, rng.integers(1, 3, num_envs), deferred)
        reset_now = (ended & ~newly) | (pending & (deferred == 1))
        deferred = np.where(pending, deferred - 1, deferred)
        pending = (pending | newly) & ~reset_now
        episode = np.where(reset_now, episode + 1, episode)
        t = np.where(reset_now, 0, t + 1)
    assert invalid_steps > 50  # the stream really has steps past episode ends
    batch = buffer.sample(4000, torch.Generator().manual_seed(0))
    assert (batch["policy_obs"][:, 3] == 1).all()  # never a start past an end
    usable = batch["discount"] > 0
    same_episode = batch["next_policy_obs"][:, 1] == batch["policy_obs"][:, 1]
    assert same_episode.all()  # next obs (n-step successor or final obs) of the same episode
    assert usable.float().mean() > 0.5
