"""Soft actor-critic on a unilab-gpu env, in one file that reads top to bottom.

The library's agents (``unilab_gpu.rl``: distributional critics, FlashSAC's networks, data-parallel
training, checkpoints) are made for thousands of envs on a GPU. This file is the algorithm alone,
for reading: SAC (Haarnoja et al., ICML 2018) with a learned temperature (arXiv:1812.05905), twin
Q-networks and clipped double-Q (Fujimoto et al., ICML 2018), on the env API every task shares:
``ug.make_env`` builds ``num_envs`` copies of a task, and ``env.step(actions)`` returns observation
groups, rewards and episode ends as ``(num_envs, ...)`` tensors that stay on the device.

    python examples/sac_minimal.py                      # pendulum swing-up, 12k env steps on a CPU
    python examples/sac_minimal.py --device cuda --num-envs 1024 --iterations 2000

Nothing in an iteration reads a tensor back to the host except the report every ``log_every``.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass

import torch
from torch import nn

import unilab_gpu as ug


@dataclass
class Settings:
    """The budget of the library SAC's pendulum check (tests/test_rl_learning.py): 1500 iterations of
    8 envs, two updates each, on one CPU core. The library's SAC (distributional critics) solves the
    swing-up with it; this file's plain MSE critics do not yet: measured, seed 0, an episode return
    of -1156 after 1500 iterations (a random policy scores about -1181). Train longer or with more
    updates per iteration to see it learn."""

    task: str = "pendulum"
    num_envs: int = 8
    iterations: int = 1500
    warmup: int = 50  # iterations of uniform random actions before the first update
    updates_per_iteration: int = 2
    batch_size: int = 128
    buffer_size: int = 100_000  # transitions
    hidden: int = 128
    gamma: float = 0.99
    tau: float = 0.05  # Polyak rate of the target critics
    learning_rate: float = 1e-3
    alpha_init: float = 0.1
    log_every: int = 100
    seed: int = 0
    device: str = "cpu"


# -- networks --------------------------------------------------------------------------------------
def mlp(inputs: int, outputs: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, outputs)
    )


class Actor(nn.Module):
    """A Gaussian over pre-tanh actions; ``tanh`` squashes a sample into the env's ``[-1, 1]``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.net = mlp(obs_dim, 2 * act_dim, hidden)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-tanh mean and log-std ``(batch, act_dim)``, the log-std kept in ``[-5, 2]``."""
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        return mean, log_std.clamp(-5.0, 2.0)

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action ``(batch, act_dim)`` and its log-density ``(batch,)``.

        The density of ``a = tanh(u)`` is the Gaussian's over ``u`` divided by the Jacobian
        ``prod(1 - tanh(u)^2)``; ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` stays
        finite where ``tanh(u)`` rounds to 1.
        """
        mean, log_std = self(obs)
        u = mean + log_std.exp() * torch.randn_like(mean)
        gaussian = -0.5 * ((u - mean) / log_std.exp()).square() - log_std - 0.5 * math.log(2 * math.pi)
        log_jacobian = 2.0 * (math.log(2.0) - u - nn.functional.softplus(-2.0 * u))
        return torch.tanh(u), (gaussian - log_jacobian).sum(-1)


class TwinQ(nn.Module):
    """Two independent Q-networks; ``forward`` returns both estimates, ``(2, batch)``."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int) -> None:
        super().__init__()
        self.members = nn.ModuleList(mlp(obs_dim + act_dim, 1, hidden) for _ in range(2))

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([q(x).squeeze(-1) for q in self.members])


# -- replay: a ring of device tensors --------------------------------------------------------------
class Replay:
    """The latest ``capacity`` transitions ``(obs, action, reward, next_obs, done, valid)``."""

    def __init__(self, capacity: int, obs_dim: int, act_dim: int, device: torch.device) -> None:
        self.obs = torch.zeros(capacity, obs_dim, device=device)
        self.action = torch.zeros(capacity, act_dim, device=device)
        self.reward = torch.zeros(capacity, device=device)
        self.next_obs = torch.zeros(capacity, obs_dim, device=device)
        self.done = torch.zeros(capacity, device=device)  # 1: the episode ended for good (no bootstrap)
        self.valid = torch.zeros(capacity, device=device)  # 0: a row that ended and waits for its reset
        self.capacity, self.cursor, self.size = capacity, 0, 0  # host ints: reading them costs no sync

    def add(self, obs, action, reward, next_obs, done, valid) -> None:
        rows = (self.cursor + torch.arange(obs.shape[0], device=obs.device)) % self.capacity
        for store, value in zip(
            (self.obs, self.action, self.reward, self.next_obs, self.done, self.valid),
            (obs, action, reward, next_obs, done, valid),
            strict=True,
        ):
            store.index_copy_(0, rows, value.to(store.dtype))
        self.cursor = (self.cursor + obs.shape[0]) % self.capacity
        self.size = min(self.size + obs.shape[0], self.capacity)

    def sample(self, size: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Uniform over the filled slots; rows with ``valid`` 0 weigh nothing in the losses."""
        rows = torch.randint(0, self.size, (size,), device=self.obs.device, generator=generator)
        names = ("obs", "action", "reward", "next_obs", "done", "valid")
        return {name: getattr(self, name)[rows] for name in names}


# -- the update ------------------------------------------------------------------------------------
def soft_target(reward, done, next_q, next_log_prob, alpha: torch.Tensor, gamma: float) -> torch.Tensor:
    """``r + gamma (1 - done) (min_i Q'_i(s', a') - alpha log pi(a' | s'))``, ``(batch,)``."""
    return reward + gamma * (1.0 - done) * (next_q.min(dim=0).values - alpha * next_log_prob)


def masked_mean(values: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (values * weights).sum() / weights.sum().clamp_min(1.0)


class Sac:
    def __init__(self, obs_dim: int, act_dim: int, s: Settings, device: torch.device) -> None:
        self.actor = Actor(obs_dim, act_dim, s.hidden).to(device)
        self.critic = TwinQ(obs_dim, act_dim, s.hidden).to(device)
        self.target = TwinQ(obs_dim, act_dim, s.hidden).to(device)
        self.target.load_state_dict(self.critic.state_dict())
        self.log_alpha = torch.tensor(math.log(s.alpha_init), device=device, requires_grad=True)
        self.target_entropy = -float(act_dim)  # Haarnoja et al.'s heuristic
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=s.learning_rate)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=s.learning_rate)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=s.learning_rate)
        self.gamma, self.tau = s.gamma, s.tau

    def update(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """One critic, actor and temperature step and a target update; returns the three losses ``(3,)``."""
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_action, next_log_prob = self.actor.sample(b["next_obs"])
            next_q = self.target(b["next_obs"], next_action)
            target = soft_target(b["reward"], b["done"], next_q, next_log_prob, alpha, self.gamma)
        critic_loss = masked_mean((self.critic(b["obs"], b["action"]) - target).square().sum(0), b["valid"])
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()

        action, log_prob = self.actor.sample(b["obs"])
        actor_loss = masked_mean(alpha * log_prob - self.critic(b["obs"], action).min(dim=0).values, b["valid"])
        self.actor_opt.zero_grad()
        actor_loss.backward()
        self.actor_opt.step()

        # alpha grows while the policy's entropy (-log pi) is below the target, and shrinks above it.
        alpha_loss = -masked_mean(self.log_alpha * (log_prob.detach() + self.target_entropy), b["valid"])
        self.alpha_opt.zero_grad()
        alpha_loss.backward()
        self.alpha_opt.step()

        with torch.no_grad():
            torch._foreach_lerp_(list(self.target.parameters()), list(self.critic.parameters()), self.tau)
        return torch.stack([critic_loss, actor_loss, alpha_loss]).detach()


# -- the loop --------------------------------------------------------------------------------------
def train(s: Settings) -> list[dict[str, float]]:
    """Train; returns one report per ``log_every`` iterations (also printed)."""
    device = torch.device(s.device)
    env = ug.make_env(s.task, num_envs=s.num_envs, device=s.device, seed=s.seed, compile=False, announce=False)
    obs_dim, act_dim = env.observation_dims["policy"], env.action_dim
    agent = Sac(obs_dim, act_dim, s, device)
    replay = Replay(s.buffer_size, obs_dim, act_dim, device)
    generator = torch.Generator(device).manual_seed(s.seed)
    obs = env.reset()["policy"].clone()
    losses, reward_sum = torch.zeros(3, device=device), torch.zeros((), device=device)  # summed on the device
    reports, started = [], time.time()
    for iteration in range(1, s.iterations + 1):
        with torch.no_grad():
            if iteration <= s.warmup:
                action = torch.rand(s.num_envs, act_dim, device=device, generator=generator) * 2 - 1
            else:
                action = agent.actor.sample(obs)[0]
        step = env.step(action)
        # A time-out ends the episode but not the task: bootstrap from the observation before the
        # reset (final_obs); a termination does not bootstrap.
        replay.add(obs, action, step.reward, step.final_obs["policy"], step.terminated, step.valid)
        obs.copy_(step.obs["policy"])  # the env overwrites its buffers on the next step
        reward_sum += step.reward.mean()
        if iteration > s.warmup:
            for _ in range(s.updates_per_iteration):
                losses += agent.update(replay.sample(s.batch_size, generator))
        if iteration % s.log_every == 0:  # the only host reads of the loop
            stats = env.stats.summary()
            env.stats.clear()
            updates = max(1, min(s.log_every, iteration - s.warmup)) * s.updates_per_iteration
            critic_loss, actor_loss, alpha_loss = (losses / updates).tolist()
            report = {
                "iteration": iteration,
                "reward_per_step": reward_sum.item() / s.log_every,
                "episode_return": stats["episode/return"] if stats["episode/count"] > 0 else math.nan,
                "critic_loss": critic_loss,
                "actor_loss": actor_loss,
                "alpha_loss": alpha_loss,
                "alpha": agent.log_alpha.exp().item(),
            }
            reports.append(report)
            print(", ".join(f"{k} {v:.4g}" for k, v in report.items()), f"({time.time() - started:.0f} s)")
            losses.zero_()
            reward_sum.zero_()
    return reports


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for field, default in vars(Settings()).items():
        parser.add_argument(f"--{field.replace('_', '-')}", type=type(default), default=default)
    return train(Settings(**vars(parser.parse_args(argv))))


if __name__ == "__main__":
    main()
