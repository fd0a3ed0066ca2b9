"""A ``ManagerBasedRlEnv`` as a gymnasium 1.x ``VectorEnv``.

Observations, rewards and flags are **torch tensors on the env's device** (gymnasium's own
wrappers that call NumPy on them do not apply), actions are taken as torch tensors (NumPy
arrays are converted). The env resets rows whose episode ended inside ``step``, so the
autoreset mode is ``SAME_STEP``: the returned observation of such a row is already the first
one of its next episode, and ``info["final_obs"]`` holds the last observation of the ended
episode for the rows where ``info["_final_obs"]`` is true (a full ``(num_envs, ...)`` batch,
not gymnasium's object array of per-env entries, so that nothing leaves the device).

Returned tensors are copies: they stay valid after the next ``step``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


class GymVectorEnv(gym.vector.VectorEnv):
    """gymnasium ``VectorEnv`` view of ``env``.

    Args:
      env: the env; it must reset every ended row in the step it ends (``reset_capacity``
        equal to ``num_envs``), which same-step autoreset requires. :meth:`make` builds one so.
      group: observation group returned as a ``Box`` (``"policy"``), or ``None`` for a ``Dict``
        of every group.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, env: ManagerBasedRlEnv, group: str | None = "policy") -> None:
        if env.reset_capacity < env.num_envs:
            raise ValueError(
                f"GymVectorEnv: reset_capacity must equal num_envs ({env.num_envs}) for same-step autoreset, "
                f"got {env.reset_capacity}; build the env with overrides=['reset_capacity={env.num_envs}']"
            )
        if not env.cfg.final_obs:
            raise ValueError("GymVectorEnv: the task must compute final observations (final_obs: true)")
        dims = env.observation_dims
        if group is not None and group not in dims:
            raise ValueError(f"GymVectorEnv: group must be one of {sorted(dims)} or None, got {group!r}")
        self.env = env
        self.group = group
        self.num_envs = env.num_envs
        self.device = env.device
        # The env clamps actions to these bounds, so the space is exactly what it acts on.
        low = env.action_manager.action_low.cpu().numpy()
        high = env.action_manager.action_high.cpu().numpy()
        self.single_action_space = gym.spaces.Box(low, high, (env.action_dim,), np.float32)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)

        def box(dim: int) -> gym.spaces.Box:
            return gym.spaces.Box(-np.inf, np.inf, (dim,), np.float32)

        if group is None:
            self.single_observation_space = gym.spaces.Dict({name: box(dim) for name, dim in dims.items()})
        else:
            self.single_observation_space = box(dims[group])
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)

    @classmethod
    def make(
        cls,
        task: str,
        num_envs: int,
        device: str = "cpu",
        overrides: tuple[str, ...] = (),
        group: str | None = "policy",
        **env_kwargs,
    ) -> GymVectorEnv:
        """Build ``task`` with every ended row reset in its own step, wrapped."""
        from unilab_gpu.envs.make_env import make_env

        overrides = (*overrides, f"reset_capacity={num_envs}")
        return cls(make_env(task, num_envs=num_envs, device=device, overrides=overrides, **env_kwargs), group)

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every env. ``seed`` (an int; a list must hold one value) reseeds torch's
        generators on the env's device, so the same seed gives the same episodes."""
        if options:
            raise ValueError(f"GymVectorEnv.reset: options are not supported, got {sorted(options)}")
        if isinstance(seed, list):
            if len(set(seed)) != 1:
                raise ValueError("GymVectorEnv.reset: the envs share one generator; give one seed")
            seed = seed[0]
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
                raise TypeError(
                    f"GymVectorEnv.reset: 'seed' must be a whole number in [0, 2**64) or None, got {seed!r}"
                )
            torch.manual_seed(seed)
        return self._obs(self.env.reset()), {}

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped env (gymnasium's :meth:`close` calls this once)."""
        self.env.close()

    def step(self, actions):
        """``actions`` ``(num_envs, action_dim)``; returns ``(obs, reward, terminated, truncated,
        info)`` as torch tensors on the device (``info`` has ``final_obs`` and ``_final_obs``)."""
        result = self.env.step(self._action_tensor(actions))
        ended = result.terminated | result.truncated
        info = {"final_obs": self._obs(result.final_obs), "_final_obs": ended}
        return self._obs(result.obs), result.reward.clone(), result.terminated.clone(), result.truncated.clone(), info

    def _action_tensor(self, actions) -> torch.Tensor:
        """``actions`` as float32 on the device; real numbers only (floats or integers).

        Raises:
            TypeError: strings, objects, booleans, complex numbers, ragged lists or a ``meta`` tensor
                (``torch.as_tensor`` refuses some with a traceback about NumPy types and silently
                drops the imaginary part of others).
        """
        if isinstance(actions, torch.Tensor):
            kind = str(actions.dtype).removeprefix("torch.")
            numeric = not (actions.dtype.is_complex or actions.dtype == torch.bool)
            if actions.is_meta:  # shapes without values: copying one to the device would fail deep in torch
                kind, numeric = "a tensor on the 'meta' device (no values)", False
        else:
            try:
                actions = np.asarray(actions)
                kind, numeric = str(actions.dtype), actions.dtype.kind in "fiu"
            except ValueError:  # ragged nested lists
                kind, numeric = "rows of different lengths", False
        if not numeric:
            raise TypeError(
                f"GymVectorEnv.step: actions must be real numbers of shape ({self.num_envs}, {self.env.action_dim}), "
                f"got {kind}"
            )
        return torch.as_tensor(actions, dtype=torch.float32, device=self.device)

    def _obs(self, groups: dict[str, torch.Tensor]):
        if self.group is None:
            return {name: value.clone() for name, value in groups.items()}
        return groups[self.group].clone()
