"""A ``ManagerBasedRlEnv`` as an RSL-RL ``VecEnv`` (rsl-rl-lib 5.x).

- Observations are a ``TensorDict`` of the env's groups (``policy``, and ``critic`` where the
  task has it), batch size ``(num_envs,)``; the runner's ``obs_groups`` picks them by name.
- ``dones`` are ``terminated | truncated`` (and steps past an end, below);
  ``extras["time_outs"]`` are the truncations, so PPO bootstraps the value of a time-out
  (RSL-RL adds ``gamma * V(s)`` to its reward).
- ``extras["log"]``: every ``episode_log_interval`` steps (the runner's ``num_steps_per_env``,
  i.e. once per rollout), the means over the episodes that ended since the last report, as 0-d
  device tensors under ``episode/...``, ``reward/<term>``, ``termination/<term>`` keys, which
  RSL-RL's logger averages and writes as they are. The env's ``stats`` are cleared then.

Nothing here reads a tensor back to the host: ``step`` adds copies and elementwise ops only.
Returned tensors are copies (RSL-RL keeps the observation of one step while taking the next).
The env resets ended rows itself; rows beyond ``reset_capacity`` reset a step or more later
(see ``ResetRowCompactor``): size ``reset_capacity`` for the rate of episode ends. Until then
such a row's steps belong to no episode (``StepResult.valid`` False, reward 0); they are
reported as ``dones`` too, so PPO's returns and GAE never run from one episode into the next.
"""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


class RslRlVecEnv(VecEnv):
    """RSL-RL view of ``env`` (reset once here; the runner never calls ``reset``).

    Args:
      env: the env.
      episode_log_interval: steps between ``extras["log"]`` reports (``None``: never, and the
        env's ``stats`` are left to the caller).
    """

    def __init__(self, env: ManagerBasedRlEnv, episode_log_interval: int | None = 24) -> None:
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.action_dim
        self.max_episode_length = env.max_episode_length
        self.device = env.device
        self.cfg = env.cfg
        self.episode_log_interval = episode_log_interval
        self._steps = 0
        self._obs = self._copy(env.reset())
        env.stats.clear()

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Steps since each row's episode started, ``(num_envs,)`` int64 (the env's own buffer)."""
        return self.env.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        """Set every row's episode age, whole numbers in ``[0, max_episode_length)`` (the runner's
        ``init_at_random_ep_len`` draws them so). Checked on the host: set once, never in a step.

        Raises:
            ValueError: another shape, a non-integer type or an age out of range (an age past the
                limit would end the episode at once, a negative one make it longer than the limit).
        """
        # The runner assigns a new tensor; the env keeps its buffer.
        value = torch.as_tensor(value)
        where = "RslRlVecEnv.episode_length_buf"
        if value.shape != self.env.episode_length.shape or value.is_floating_point() or value.dtype == torch.bool:
            raise ValueError(
                f"{where}: expected whole numbers of shape ({self.num_envs},), got {value.dtype} of shape "
                f"{tuple(value.shape)}"
            )
        low, high = int(value.min()), int(value.max())
        if low < 0 or high >= self.max_episode_length:
            raise ValueError(
                f"{where}: episode ages must be in [0, {self.max_episode_length - 1}] (max_episode_length "
                f"{self.max_episode_length}), got values from {low} to {high}"
            )
        self.env.episode_length.copy_(value)

    def get_observations(self) -> TensorDict:
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        result = self.env.step(actions)
        self._obs = self._copy(result.obs)
        extras: dict = {"time_outs": result.truncated.clone()}
        self._steps += 1
        if self.episode_log_interval is not None and self._steps % self.episode_log_interval == 0:
            extras["log"] = self.env.stats.means()  # 0-d device tensors, no host sync
            self.env.stats.clear()
        dones = result.terminated | result.truncated | ~result.valid
        return self._obs, result.reward.clone(), dones, extras

    def close(self) -> None:
        """Close the wrapped env; it cannot step afterwards."""
        self.env.close()

    def _copy(self, groups: dict[str, torch.Tensor]) -> TensorDict:
        return TensorDict({k: v.clone() for k, v in groups.items()}, batch_size=[self.num_envs], device=self.device)
