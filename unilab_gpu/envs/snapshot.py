"""A copy of everything an env step can change, to run steps that must leave no trace.

The CUDA capture warms the step up by running it for real (twice) and then records it once;
the first-replay check runs it once more. None of that may change what the user observes: a
captured env must continue exactly as an env that never captured (same observations, same
random numbers, same statistics). :class:`EnvSnapshot` copies every tensor reachable from the
env's managers and terms, every array of the simulator's worlds, and the torch RNG states of
the CPU and the env's device, and puts them back in place (same addresses) on ``restore``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv

_PROJECT = "unilab_gpu."


def env_tensors(env: ManagerBasedRlEnv) -> dict[str, torch.Tensor]:
    """Every tensor an env step may read or write, by a dotted path from the env.

    The simulator's arrays (``sim.data_tensors()``) plus every tensor found by walking the
    attributes of the env's project objects (managers, terms, samplers, motion tables, stats),
    their lists, tuples and dicts. Aliases of one tensor are listed once.
    """
    found = {f"sim.{name}": value for name, value in env.sim.data_tensors().items()}
    seen_objects: set[int] = {id(env.sim), id(env.cfg)}
    seen_tensors = {id(t) for t in found.values()}
    for path, value in _walk(vars(env), "", seen_objects):
        if id(value) not in seen_tensors:
            seen_tensors.add(id(value))
            found[path] = value
    return found


def _walk(value: Any, path: str, seen: set[int]) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        # A broadcast view (stride 0) only reads its base, which is listed on its own.
        if not any(stride == 0 and size > 1 for stride, size in zip(value.stride(), value.shape, strict=True)):
            yield path, value
        return
    if id(value) in seen:
        return
    if isinstance(value, dict):
        seen.add(id(value))
        for key, item in value.items():
            yield from _walk(item, f"{path}.{key}" if path else str(key), seen)
    elif isinstance(value, list | tuple):
        seen.add(id(value))
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]", seen)
    elif type(value).__module__.startswith(_PROJECT) and hasattr(value, "__dict__"):
        seen.add(id(value))
        yield from _walk(vars(value), path, seen)


class EnvSnapshot:
    """Copies of :func:`env_tensors` and the RNG states, taken now; ``restore`` writes them back."""

    def __init__(self, env: ManagerBasedRlEnv) -> None:
        self._tensors = env_tensors(env)
        # Host copies: a snapshot of 8192 G1 worlds is about 1 GB, which the GPU may not have spare.
        self._copies = {name: t.detach().to("cpu", copy=True) for name, t in self._tensors.items()}
        self._device = env.device
        self._cpu_rng = torch.get_rng_state()
        self._device_rng = torch.cuda.get_rng_state(env.device) if env.device.type == "cuda" else None

    def restore(self) -> None:
        """Put every copied value back into its original tensor, and the RNG states."""
        with torch.no_grad():
            for name, tensor in self._tensors.items():
                tensor.copy_(self._copies[name])
        torch.set_rng_state(self._cpu_rng)
        if self._device_rng is not None:
            torch.cuda.set_rng_state(self._device_rng, self._device)
