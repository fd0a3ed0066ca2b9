"""Test-only terms, referenced from tests by dotted path (``env_test_terms.<name>``)."""

from __future__ import annotations

import time

import torch


class ForcedEnd:
    """Termination that fires for the rows the test marks in ``mask``."""

    def __init__(self, env) -> None:
        self.mask = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        return self.mask.clone()


def burn_time(env, milliseconds: float = 5.0) -> torch.Tensor:
    """An observation term that burns wall time (for profiler attribution tests)."""
    end = time.perf_counter() + milliseconds / 1e3
    while time.perf_counter() < end:
        pass
    return torch.zeros(env.num_envs, device=env.device)


def constant_from_python(env) -> torch.Tensor:
    """A reward that builds its constant from a Python list on every step (a host-to-device copy)."""
    weights = torch.tensor([1.0, -1.0])
    return env.sim.state.qvel[:, :1].sum(dim=1) * weights[0]


def reads_back(env) -> torch.Tensor:
    """A reward that reads a device value into Python on every step (a host sync)."""
    scale = float(env.sim.state.qpos.abs().max()) + 1.0
    return env.sim.state.qpos[:, 0] / scale


class EpisodeCounter:
    """Observation: the number of episodes the row has started, ``(num_envs, 1)``; a replay test
    reads it to tell which episode an observation came from."""

    def __init__(self, env) -> None:
        self._storage = torch.zeros(env.num_envs + 1, device=env.device)  # + the row padded ids write to
        self.count = self._storage[: env.num_envs]

    def __call__(self, env) -> torch.Tensor:
        return self.count[:, None].clone()

    def reset(self, env_ids: torch.Tensor) -> None:
        self._storage.index_add_(0, env_ids, torch.ones(env_ids.shape[0], device=self._storage.device))


class StagingProbe:
    """Command term: remembers the staged qpos it receives at reset, then stages ``qpos[:, 0] = 1``."""

    def __init__(self, env) -> None:
        self.seen = None

    def update(self, env) -> None:
        """Advances nothing: the probe only watches resets."""

    def reset(self, staging) -> None:
        self.seen = staging.qpos.clone()
        staging.qpos[:, 0] = 1.0


def record_staged(env, env_ids: torch.Tensor) -> None:
    """Reset event: remembers the staged qpos it edits, then adds 0.5 to its first column."""
    env.seen_by_event = env.reset_staging.qpos.clone()
    env.reset_staging.qpos[:, 0] += 0.5


def joint_speed_above(env, limit: float) -> torch.Tensor:
    """The "Add a reward term" recipe of docs/architecture.md: 1.0 where any joint of the robot
    moves faster than ``limit`` rad/s, else 0.0, ``(num_envs,)``."""
    return (env.robot.joint_vel.abs() > limit).any(dim=1).float()


class FailAtFrame:
    """Termination: fires for every ``every``-th row (row ids 0, every, 2 every, ...) on the step
    that scores frame ``frame`` of its motion command's clip (a policy failing at a known frame)."""

    def __init__(self, env, frame: int, every: int = 2, command_name: str = "motion") -> None:
        self.command = env.command_manager.get(command_name)
        self.frame = frame
        self.rows = torch.arange(env.num_envs, device=env.device) % every == 0

    def __call__(self, env) -> torch.Tensor:
        return self.rows & (self.command.frame == self.frame)


def never_moves(env) -> torch.Tensor:
    """An observation term that reads 0 every step, as a gyro welded to the world body does."""
    return env.sim.state.qvel[:, :1] * 0.0
