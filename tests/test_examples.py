"""``examples/sac_minimal.py``: its squashed-Gaussian density and soft target against independent
references, and a few iterations on the pendulum through its command line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from script_helpers import load_script

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def sac_minimal():
    return load_script("sac_minimal", EXAMPLES)


def test_log_density_of_a_squashed_sample_matches_torch_distributions(sac_minimal):
    torch.manual_seed(0)
    actor = sac_minimal.Actor(obs_dim=3, act_dim=2, hidden=16)
    obs = torch.randn(64, 3)
    torch.manual_seed(1)
    action, log_prob = actor.sample(obs)
    mean, log_std = actor(obs)
    torch.manual_seed(1)  # the same draw, through torch.distributions' Normal and TanhTransform
    pre_tanh = (mean + log_std.exp() * torch.randn_like(mean)).double()
    normal = torch.distributions.Normal(mean.double(), log_std.double().exp())
    jacobian = torch.distributions.TanhTransform().log_abs_det_jacobian(pre_tanh, torch.tanh(pre_tanh))
    expected = (normal.log_prob(pre_tanh) - jacobian).sum(-1)
    torch.testing.assert_close(action, torch.tanh(pre_tanh).float())
    torch.testing.assert_close(log_prob.double(), expected, rtol=1e-5, atol=1e-5)
    assert action.abs().max() < 1.0


def test_soft_target_is_the_clipped_double_q_bellman_backup(sac_minimal):
    reward = torch.tensor([1.0, -2.0, 0.5])
    done = torch.tensor([0.0, 1.0, 0.0])
    next_q = torch.tensor([[3.0, 10.0, -1.0], [4.0, 7.0, -2.0]])  # (2 members, batch)
    next_log_prob = torch.tensor([-1.0, 0.0, 2.0])
    target = sac_minimal.soft_target(reward, done, next_q, next_log_prob, torch.tensor(0.5), gamma=0.9)
    # by hand: r + 0.9 (1 - done) (min Q' - 0.5 log pi)
    expected = [1.0 + 0.9 * (3.0 + 0.5), -2.0, 0.5 + 0.9 * (-2.0 - 1.0)]
    torch.testing.assert_close(target, torch.tensor(expected))


def test_replay_keeps_the_latest_transitions_in_a_ring(sac_minimal):
    replay = sac_minimal.Replay(capacity=5, obs_dim=1, act_dim=1, device=torch.device("cpu"))
    for step in range(3):  # 2 envs a step: 6 transitions into 5 slots, the first one overwritten
        if step == 1:  # sampling draws only the slots written so far
            early = replay.sample(100, torch.Generator().manual_seed(0))["obs"][:, 0]
            assert set(early.tolist()) == {0.0, 1.0}
        rows = torch.tensor([[10.0 * step], [10.0 * step + 1]])
        ones = torch.ones(2)
        replay.add(rows, rows, rows[:, 0], rows + 0.5, ones * 0, ones)
    assert replay.obs[:, 0].tolist() == [21.0, 1.0, 10.0, 11.0, 20.0]
    assert replay.next_obs[:, 0].tolist() == [21.5, 1.5, 10.5, 11.5, 20.5]
    batch = replay.sample(100, torch.Generator().manual_seed(0))
    assert set(batch["obs"][:, 0].tolist()) <= {21.0, 1.0, 10.0, 11.0, 20.0}
    torch.testing.assert_close(batch["reward"], batch["obs"][:, 0])


def test_a_few_iterations_on_the_pendulum(sac_minimal, capsys):
    argv = ["--iterations", "60", "--warmup", "20", "--log-every", "20", "--num-envs", "4"]
    reports = sac_minimal.main([*argv, "--batch-size", "32", "--hidden", "16", "--buffer-size", "400"])
    assert [r["iteration"] for r in reports] == [20, 40, 60]
    assert reports[0]["critic_loss"] == 0.0  # warm-up: random actions, no update yet
    for report in reports[1:]:
        assert report["critic_loss"] > 0.0 and math.isfinite(report["actor_loss"])
    # Pendulum costs are -(theta^2 + 0.1 thetadot^2 + 0.001 u^2) per step: negative, and at most
    # pi^2 + 0.1 * 8^2 + 0.001 * 2^2 = 16.3 in Gymnasium's velocity range.
    assert all(-16.3 < r["reward_per_step"] < 0.0 for r in reports)
    assert reports[-1]["alpha"] != pytest.approx(0.1)  # the temperature learned
    assert len(capsys.readouterr().out.splitlines()) == 3
