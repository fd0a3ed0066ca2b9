"""Host copies of a few worlds' state for the live viewer, taken without stalling the env.

The training loop (or a rollout) calls :meth:`StateFeed.maybe_copy` after each iteration, outside
the env step. At most ``rate_hz`` times a second it enqueues copies of K consecutive worlds' rows
(``qpos``, episode step, reward, tracking or velocity errors, the reference pose or the command)
into host buffers and returns at once:

- on CUDA the buffers are pinned and the copies ``non_blocking``, enqueued on the current stream
  after the step that wrote the state, and a CUDA event is recorded behind them; the viewer's
  thread waits on that event alone (:meth:`StateFeed.read`), never the training thread;
- on CPU the copies are plain copies (they are the data).

The viewer thread holds the feed's lock while it waits and reads; a copy that finds the lock
taken is skipped rather than waited for, so the caller never blocks on the viewer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

Source = Callable[[slice], torch.Tensor]
"""Rows ``first:first + K`` of the env -> a ``(K, ...)`` tensor on the env's device."""


@dataclass(frozen=True)
class WorldSnapshot:
    """One host copy of worlds ``first .. first + K - 1`` (arrays of K rows, world order)."""

    first: int
    """Index of the first world copied."""
    qpos: np.ndarray
    """``(K, nq)`` generalized positions."""
    episode_step: np.ndarray
    """``(K,)`` steps since each world's episode started."""
    reward: np.ndarray
    """``(K,)`` reward of the last step."""
    episode_return: np.ndarray
    """``(K,)`` reward summed over the episode so far."""
    errors: dict[str, np.ndarray]
    """Error name -> ``(K,)``: the task command's ``row_errors()`` (tracking or velocity errors)."""
    reference_qpos: np.ndarray | None
    """``(K, nq)`` reference pose (tracking tasks: the ghost), else ``None``."""
    command: np.ndarray | None
    """``(K, 3)`` velocity command ``[v_x, v_y, omega_z]`` in the heading frame, else ``None``."""
    base_velocity: np.ndarray | None
    """``(K, 3)`` root linear velocity in the world frame, with ``command``."""


def _command_terms(env: ManagerBasedRlEnv) -> list:
    return [term.instance for term in env.command_manager.terms.values()]


def world_sources(env: ManagerBasedRlEnv) -> tuple[dict[str, Source], list[str]]:
    """What the viewer copies (name -> row reader) and the names of the error columns.

    The reference pose comes from a command with ``reference_qpos_rows`` (the motion command),
    the arrow from one with a ``(num_envs, 3)`` ``command`` (the velocity command), the errors
    from the first command with ``row_errors()``.
    """
    state, rewards = env.sim.state, env.reward_manager
    sources: dict[str, Source] = {
        "qpos": lambda rows: state.qpos[rows],
        "episode_step": lambda rows: env.episode_length[rows],
        "reward": lambda rows: rewards.reward[rows],
        "episode_return": lambda rows: rewards.episode_sums[rows].sum(dim=1),
    }
    error_names: list[str] = []
    for term in _command_terms(env):
        if "reference_qpos" not in sources and callable(getattr(term, "reference_qpos_rows", None)):
            sources["reference_qpos"] = term.reference_qpos_rows
        command = getattr(term, "command", None)
        if "command" not in sources and isinstance(command, torch.Tensor) and command.shape == (env.num_envs, 3):
            sources["command"] = lambda rows, command=command: command[rows]
            sources["base_velocity"] = lambda rows: state.qvel[rows, :3]
        if not error_names and callable(getattr(term, "row_errors", None)):
            error_names = list(term.row_errors())
            sources["errors"] = lambda rows, term=term, names=tuple(error_names): torch.stack(
                [term.row_errors()[name][rows] for name in names], dim=1
            )
    return sources, error_names


class StateFeed:
    """Throttled, non-blocking host copies of ``worlds`` consecutive worlds of ``env``.

    Args:
      env: the running env.
      worlds: K, how many worlds are copied (``1 <= K <= env.num_envs``).
      rate_hz: at most this many copies per second (``maybe_copy``).
      clock: seconds, monotonic (a parameter for tests).
      field: how the user named the worlds setting, for the error message (``"--"``: ``--worlds``,
        ``"viewer_"``: ``viewer_worlds``).
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        worlds: int,
        rate_hz: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        field: str = "",
    ) -> None:
        if not 1 <= worlds <= env.num_envs:
            raise ValueError(f"viewer: {field}worlds must be in [1, {env.num_envs}] (the env's worlds), got {worlds}")
        if not rate_hz > 0:
            raise ValueError(f"viewer: rate_hz must be > 0, got {rate_hz}")
        self.num_envs, self.worlds = env.num_envs, worlds
        self.period = 1.0 / rate_hz
        self._clock = clock
        self._sources, self.error_names = world_sources(env)
        self._device = env.device
        on_cuda = env.device.type == "cuda"
        rows = slice(0, worlds)
        shapes = {name: read(rows) for name, read in self._sources.items()}
        self._host = {name: torch.empty(t.shape, dtype=t.dtype, pin_memory=on_cuda) for name, t in shapes.items()}
        self._event = torch.cuda.Event() if on_cuda else None
        self._lock = threading.Lock()
        self._last_copy = -float("inf")
        self._copied_first = 0
        self.first = 0
        """First world of the next copy (the viewer's "which worlds"); see :meth:`show_from`."""
        self.copies = 0
        """Copies enqueued so far."""
        self.skipped = 0
        """Copies skipped because the viewer was reading."""

    @property
    def has_reference(self) -> bool:
        """Whether snapshots carry ``reference_qpos`` (a tracking task's ghost)."""
        return "reference_qpos" in self._sources

    @property
    def has_command(self) -> bool:
        """Whether snapshots carry a velocity ``command`` (a velocity task's arrow)."""
        return "command" in self._sources

    def show_from(self, first: int) -> None:
        """Copy worlds ``first .. first + K - 1`` from the next copy on."""
        last = self.num_envs - self.worlds
        if not 0 <= first <= last:
            raise ValueError(f"viewer: the first world must be in [0, {last}] to show {self.worlds}, got {first}")
        self.first = first

    def maybe_copy(self, force: bool = False) -> bool:
        """Enqueue a copy if ``1 / rate_hz`` has passed since the last one (or ``force``) and the
        viewer is not reading; returns whether one was enqueued. Never waits."""
        now = self._clock()
        if not force and now - self._last_copy < self.period:
            return False
        if not self._lock.acquire(blocking=False):
            self.skipped += 1
            return False
        try:
            rows = slice(self.first, self.first + self.worlds)
            for name, read in self._sources.items():
                self._host[name].copy_(read(rows), non_blocking=True)
            if self._event is not None:
                self._event.record(torch.cuda.current_stream(self._device))
            self._copied_first = self.first
            self._last_copy = now
            self.copies += 1
        finally:
            self._lock.release()
        return True

    def read(self) -> WorldSnapshot | None:
        """The latest copy as NumPy arrays (viewer thread; waits for that copy's event on CUDA),
        or ``None`` before the first copy."""
        with self._lock:
            if self.copies == 0:
                return None
            if self._event is not None:
                self._event.synchronize()
            host = {name: buffer.numpy().copy() for name, buffer in self._host.items()}
            first = self._copied_first
        errors = host.get("errors")
        return WorldSnapshot(
            first=first,
            qpos=host["qpos"],
            episode_step=host["episode_step"],
            reward=host["reward"],
            episode_return=host["episode_return"],
            errors={name: errors[:, i] for i, name in enumerate(self.error_names)} if errors is not None else {},
            reference_qpos=host.get("reference_qpos"),
            command=host.get("command"),
            base_velocity=host.get("base_velocity"),
        )
