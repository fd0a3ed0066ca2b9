"""Device replay ring for vectorised envs, each observation stored once, with n-step returns.

Layout: ``capacity`` time slots x ``num_envs`` rows. Slot ``k`` of env ``e`` holds the
observation the policy acted on at step ``k``, the action, the reward and the episode-end flags
of that step. The next observation of a transition is the observation of slot ``k + 1``, except
for rows whose episode ended at step ``k``: there the env has already reset, so slot ``k + 1``
holds the first observation of the next episode and the true final observation comes from a
side table instead. Storing each observation once halves memory against ``(obs, next_obs)``
pairs.

Side table of final observations
--------------------------------
Rows that end at a step are compacted into a ring of ``final_capacity`` entries with static
shape ops: positions are ``write_ptr + cumsum(ended) - 1`` (mod capacity), non-ended rows write
to one padding row past the end, and ``final_index[slot, env]`` remembers each row's entry. An
entry is needed while the slot that owns it is still in the ring, i.e. for the last
``capacity`` steps, so the table must hold every episode end of ``capacity`` steps:

    final_capacity = num_envs + ceil(final_obs_fraction * capacity * num_envs)

which is enough whenever the mean episode length over any ``capacity`` steps is at least
``1 / final_obs_fraction`` steps (8 steps by default), plus one step in which every env ends at
once. If episodes are shorter, the oldest live entries are overwritten: ``final_overflow``
counts them, and a sampled transition whose final observation was lost gets discount 0 (it is
treated as terminal) rather than a wrong bootstrap.

Transitions that belong to no episode
-------------------------------------
A row whose episode ended while more rows ended than the env could reset at once keeps
simulating past its end until a later step resets it (``StepResult.valid`` is False for those
steps). Such a step is stored, to keep the ring's static layout, but flagged in ``valid`` and never
starts a window. A window that starts at a valid step can never reach an invalid one: invalid
steps only follow an episode end, where every window stops. So no sampled transition, one-step or
n-step, joins two episodes.

Sampling
--------
Transitions are drawn uniformly over envs and over the complete window starts: the newest ``n``
slots never start a window because their ``n``-th successor observation is not written yet.
A draw that lands on an invalid step is replaced by the first valid one among ``REDRAWS``
further draws from the buffer's own generator, and if those are invalid too (probability
``p ** (1 + REDRAWS)`` for a fraction ``p`` of invalid steps), by an exact uniform draw over the
valid window starts (a cumulative count over the ``(capacity, num_envs)`` validity table, then
``searchsorted``). The first valid of independent uniform draws is uniform over the valid starts,
and so is the exact draw, so the batch is uniform over valid transitions; where every step is
valid, the caller's generator gives exactly the batches it gave before invalid steps existed.
Returns are n-step (:func:`nstep_return`, at the end of this module). Everything stays on the device:
the write pointer and step count are device tensors, so ``add`` and ``sample`` do no host sync
and can be captured in a CUDA graph (a custom ``generator`` must then be registered with the
graph). The only host-side state is a Python count of ``add`` calls used to refuse sampling
before ``n_step + 1`` steps exist.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

REDRAWS = 3
"""Further draws per batch element when a draw lands on a step that belongs to no episode."""


class ReplayBuffer:
    """Replay ring of ``capacity`` steps for ``num_envs`` envs.

    Args:
        capacity: steps kept per env.
        num_envs: parallel envs written at every :meth:`add`.
        policy_obs_dim, critic_obs_dim, act_dim: feature sizes.
        n_step: length of the return window (1 = one-step TD).
        gamma: discount used for n-step returns.
        final_obs_fraction: side-table size as a fraction of ``capacity * num_envs`` (see above).
        obs_dtype: storage dtype of observations (e.g. ``torch.bfloat16`` halves memory);
            samples are returned as float32.
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        policy_obs_dim: int,
        critic_obs_dim: int,
        act_dim: int,
        n_step: int = 1,
        gamma: float = 0.99,
        final_obs_fraction: float = 0.125,
        obs_dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> None:
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if capacity < n_step + 1:
            raise ValueError(f"capacity must be >= n_step + 1 = {n_step + 1}, got {capacity}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if not 0.0 < final_obs_fraction <= 1.0:
            raise ValueError(f"final_obs_fraction must be in (0, 1], got {final_obs_fraction}")
        self.capacity = capacity
        self.num_envs = num_envs
        self.n_step = n_step
        self.gamma = gamma
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.final_capacity = num_envs + math.ceil(final_obs_fraction * capacity * num_envs)

        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=self.device)

        self.policy_obs = zeros(capacity, num_envs, policy_obs_dim, dtype=obs_dtype)
        self.critic_obs = zeros(capacity, num_envs, critic_obs_dim, dtype=obs_dtype)
        self.action = zeros(capacity, num_envs, act_dim)
        self.reward = zeros(capacity, num_envs)
        self.terminated = zeros(capacity, num_envs, dtype=torch.bool)
        self.truncated = zeros(capacity, num_envs, dtype=torch.bool)
        self.valid = torch.ones(capacity, num_envs, dtype=torch.bool, device=self.device)
        """Whether the step's transition belongs to one episode (see the module docstring)."""
        self.final_index = zeros(capacity, num_envs, dtype=torch.int64)
        self.slot_step = torch.full((capacity,), -1, dtype=torch.int64, device=self.device)
        # Side table; row ``final_capacity`` is the padding row that non-ended rows write to.
        self.final_policy_obs = zeros(self.final_capacity + 1, policy_obs_dim, dtype=obs_dtype)
        self.final_critic_obs = zeros(self.final_capacity + 1, critic_obs_dim, dtype=obs_dtype)
        # Owning step of each entry; the sentinel of never-written entries compares as long dead.
        self._no_owner = -(2**62)
        self.final_owner = torch.full((self.final_capacity + 1,), self._no_owner, dtype=torch.int64, device=self.device)

        self.num_steps = zeros(dtype=torch.int64)
        """Device count of :meth:`add` calls."""
        self.final_write = zeros(dtype=torch.int64)
        self.final_overflow = zeros(dtype=torch.int64)
        """Device count of final observations overwritten while still referenced."""
        self._num_adds = 0  # host-side mirror, only for the "enough data to sample" check
        self._window = torch.arange(n_step, device=self.device)
        self._redraw = torch.Generator(self.device).manual_seed(0)

    @property
    def redraw_generator(self) -> torch.Generator:
        """The buffer's own generator (redraws of invalid steps): a CUDA graph of :meth:`sample`
        registers it beside the caller's."""
        return self._redraw

    @property
    def bytes_per_transition(self) -> float:
        """Allocated bytes divided by ``capacity * num_envs`` (side table included)."""
        tensors = [
            self.policy_obs,
            self.critic_obs,
            self.action,
            self.reward,
            self.terminated,
            self.truncated,
            self.valid,
            self.final_index,
            self.slot_step,
            self.final_policy_obs,
            self.final_critic_obs,
            self.final_owner,
        ]
        total = sum(t.numel() * t.element_size() for t in tensors)
        return total / (self.capacity * self.num_envs)

    def __len__(self) -> int:
        """Transitions written and still held (counted on the host, no sync)."""
        return min(self._num_adds, self.capacity) * self.num_envs

    def _check(self, name: str, value: torch.Tensor, shape: tuple[int, ...]) -> None:
        if tuple(value.shape) != shape:
            raise ValueError(f"replay add: '{name}' must have shape {shape}, got {tuple(value.shape)}")

    @torch.no_grad()
    def add(
        self,
        policy_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        action: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        final_policy_obs: torch.Tensor,
        final_critic_obs: torch.Tensor,
        valid: torch.Tensor | None = None,
    ) -> None:
        """Write one env step for all envs.

        Args:
            policy_obs, critic_obs: observations the action was taken from, ``(num_envs, dim)``.
            action: ``(num_envs, act_dim)``.
            reward: ``(num_envs,)`` raw reward of the step.
            terminated, truncated: ``(num_envs,)`` bool episode ends of the step.
            final_policy_obs, final_critic_obs: ``(num_envs, dim)`` observations reached by the
                step before any reset; only rows with an episode end are read.
            valid: ``(num_envs,)`` bool, the env's ``StepResult.valid`` (default: all rows).
        """
        e = self.num_envs
        self._check("policy_obs", policy_obs, (e, self.policy_obs.shape[-1]))
        self._check("critic_obs", critic_obs, (e, self.critic_obs.shape[-1]))
        self._check("action", action, (e, self.action.shape[-1]))
        self._check("reward", reward, (e,))
        self._check("terminated", terminated, (e,))
        self._check("truncated", truncated, (e,))
        self._check("final_policy_obs", final_policy_obs, (e, self.policy_obs.shape[-1]))
        self._check("final_critic_obs", final_critic_obs, (e, self.critic_obs.shape[-1]))

        step = self.num_steps
        slot = (step % self.capacity).view(1)
        self.policy_obs.index_copy_(0, slot, policy_obs.unsqueeze(0).to(self.policy_obs.dtype))
        self.critic_obs.index_copy_(0, slot, critic_obs.unsqueeze(0).to(self.critic_obs.dtype))
        self.action.index_copy_(0, slot, action.unsqueeze(0))
        self.reward.index_copy_(0, slot, reward.unsqueeze(0).to(self.reward.dtype))
        self.terminated.index_copy_(0, slot, terminated.unsqueeze(0).bool())
        self.truncated.index_copy_(0, slot, truncated.unsqueeze(0).bool())
        if valid is None:
            self.valid.index_fill_(0, slot, True)
        else:
            self._check("valid", valid, (e,))
            self.valid.index_copy_(0, slot, valid.unsqueeze(0).bool())
        self.slot_step.index_copy_(0, slot, step.view(1))

        ended = terminated.bool() | truncated.bool()
        rank = torch.cumsum(ended.long(), dim=0) - 1
        padding = torch.full_like(rank, self.final_capacity)
        position = torch.where(ended, (self.final_write + rank) % self.final_capacity, padding)
        # An entry is still referenced while its owning step is among the last ``capacity - 1``
        # steps (the slot written now drops step ``step - capacity``).
        still_live = ended & (self.final_owner[position] > step - self.capacity)
        self.final_overflow.add_(still_live.sum())
        self.final_policy_obs.index_copy_(0, position, final_policy_obs.to(self.final_policy_obs.dtype))
        self.final_critic_obs.index_copy_(0, position, final_critic_obs.to(self.final_critic_obs.dtype))
        self.final_owner.index_copy_(0, position, torch.where(ended, step, self._no_owner))
        self.final_index.index_copy_(0, slot, position.unsqueeze(0))
        self.final_write.copy_((self.final_write + ended.sum()) % self.final_capacity)
        self.num_steps.add_(1)
        self._num_adds += 1

    @torch.no_grad()
    def sample(self, batch_size: int, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """Uniform batch of n-step transitions, every tensor with leading dim ``batch_size``.

        Keys: ``policy_obs``, ``critic_obs`` ``(B, dim)``; ``action`` ``(B, act_dim)``;
        ``reward`` ``(B,)`` (raw n-step discounted sum); ``next_policy_obs``, ``next_critic_obs``
        ``(B, dim)`` (successor of the last summed step); ``discount`` ``(B,)`` =
        ``gamma^m * (1 - terminated)``, the bootstrap factor. ``generator``, if given, must live
        on the buffer's device.
        """
        if self._num_adds <= self.n_step:
            raise RuntimeError(f"replay sample: need more than n_step={self.n_step} add() calls, got {self._num_adds}")
        steps_held = torch.clamp(self.num_steps, max=self.capacity)
        oldest = self.num_steps - steps_held
        num_starts = steps_held - self.n_step
        u = torch.rand(batch_size, device=self.device, generator=generator)
        env = torch.randint(0, self.num_envs, (batch_size,), device=self.device, generator=generator)
        redrawn = torch.rand(REDRAWS, batch_size, device=self.device, generator=self._redraw)
        env_tries = torch.randint(0, self.num_envs, (REDRAWS, batch_size), device=self.device, generator=self._redraw)
        starts = oldest + torch.minimum((torch.cat([u[None], redrawn]) * num_starts).long(), num_starts - 1)
        envs = torch.cat([env[None], env_tries])  # (1 + REDRAWS, B): the caller's draw first
        usable = self.valid[starts % self.capacity, envs]
        pick = usable.to(torch.int32).argmax(dim=0, keepdim=True)  # first valid try (0 if none)
        start, env = starts.gather(0, pick).squeeze(0), envs.gather(0, pick).squeeze(0)
        exact_start, exact_env = self._exact_valid_starts(batch_size, oldest)
        none_valid = ~usable.any(dim=0)
        start, env = torch.where(none_valid, exact_start, start), torch.where(none_valid, exact_env, env)

        window_slots = (start.unsqueeze(0) + self._window.unsqueeze(1)) % self.capacity  # (n, B)
        ret = nstep_return(
            self.reward[window_slots, env],
            self.terminated[window_slots, env],
            self.truncated[window_slots, env],
            self.gamma,
        )
        first = start % self.capacity
        stop = (start + ret.last) % self.capacity
        successor = (start + ret.last + 1) % self.capacity
        entry = self.final_index[stop, env]
        lost = ret.ended & (self.final_owner[entry] != self.slot_step[stop])
        ended = ret.ended.unsqueeze(-1)
        next_policy = torch.where(ended, self.final_policy_obs[entry], self.policy_obs[successor, env])
        next_critic = torch.where(ended, self.final_critic_obs[entry], self.critic_obs[successor, env])
        return {
            "policy_obs": self.policy_obs[first, env].float(),
            "critic_obs": self.critic_obs[first, env].float(),
            "action": self.action[first, env],
            "reward": ret.reward,
            "next_policy_obs": next_policy.float(),
            "next_critic_obs": next_critic.float(),
            "discount": torch.where(lost, 0.0, ret.discount),
        }

    def _exact_valid_starts(self, batch_size: int, oldest: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(start step, env)`` drawn uniformly over the valid complete window starts, ``(B,)`` each."""
        window_start = (self.slot_step >= oldest) & (self.slot_step < self.num_steps - self.n_step)
        counts = (self.valid & window_start[:, None]).flatten().cumsum(0)
        u = torch.rand(batch_size, device=self.device, generator=self._redraw)
        target = (u * counts[-1]).long()
        flat = torch.searchsorted(counts, target, right=True).clamp(max=counts.shape[0] - 1)
        return self.slot_step[flat // self.num_envs], flat % self.num_envs


# ================================================================================================
# n-step returns over a window of consecutive steps with episode ends.
#
# For a window of ``n`` steps starting at ``t`` the return sums rewards up to and including the
# first step whose transition ended the episode (terminated or truncated), and none after it:
#
#     m      = number of rewards summed (1..n): index of the first ended step + 1, else n
#     G      = sum_{k < m} gamma^k r_{t+k}
#     disc   = gamma^m * (1 - terminated_{t+m-1})
#     target = G + disc * V(s')   with s' the observation after step t+m-1
#
# A truncated episode (time limit) still bootstraps from its true final observation, a terminated
# one does not (Sutton and Barto, "Reinforcement Learning: An Introduction", 2nd ed., ch. 7;
# Pardo et al., "Time Limits in Reinforcement Learning", ICML 2018, for the truncation rule).
# The computation is masks and cumulative products only, so shapes never depend on the data.


class NStepReturn(NamedTuple):
    """Output of :func:`nstep_return`; every field has shape ``(batch,)``."""

    reward: torch.Tensor
    """Discounted reward sum ``G`` (float)."""
    discount: torch.Tensor
    """Bootstrap factor ``gamma^m * (1 - terminated)`` (float)."""
    last: torch.Tensor
    """Window index ``m - 1`` of the last step summed (int64); its successor obs is ``s'``."""
    ended: torch.Tensor
    """Whether the window stops at an episode end (bool); ``s'`` is then that step's final obs."""


def nstep_return(reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor, gamma: float) -> NStepReturn:
    """n-step return of each column of a ``(n, batch)`` window (time first).

    Args:
        reward: ``(n, batch)`` float rewards of steps ``t .. t+n-1``.
        terminated: ``(n, batch)`` bool, the step's transition reached a terminal state.
        truncated: ``(n, batch)`` bool, the step's transition hit a time limit.
        gamma: per-step discount.
    """
    if reward.dim() != 2 or terminated.shape != reward.shape or truncated.shape != reward.shape:
        raise ValueError(
            "reward, terminated and truncated must all have shape (n, batch); got "
            f"{tuple(reward.shape)}, {tuple(terminated.shape)}, {tuple(truncated.shape)}"
        )
    n = reward.shape[0]
    ended = (terminated | truncated).to(reward.dtype)
    # alive[k] = 1 while no step before k ended the episode: it gates which rewards are summed.
    not_ended_before = torch.cumprod(1.0 - ended, dim=0)
    alive = torch.cat([torch.ones_like(ended[:1]), not_ended_before[:-1]], dim=0)
    powers = gamma ** torch.arange(n, device=reward.device, dtype=reward.dtype)
    total = (alive * powers.unsqueeze(-1) * reward).sum(dim=0)
    count = alive.sum(dim=0)
    last = (count - 1).long()
    terminated_last = terminated.gather(0, last.unsqueeze(0)).squeeze(0)
    ended_last = ended.gather(0, last.unsqueeze(0)).squeeze(0) > 0
    discount = torch.pow(gamma, count) * (~terminated_last).to(reward.dtype)
    return NStepReturn(reward=total, discount=discount, last=last, ended=ended_last)
