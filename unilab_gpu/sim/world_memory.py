"""Whether ``num_envs`` worlds of a model fit in memory, found out before MJWarp allocates them.

A million G1 worlds need about 100 GiB of physics state alone; asked for under a memory limit,
the allocation failed with a traceback from Warp or the kernel killed the process. The check is
cheap for ordinary sizes: a rough over-estimate decides whether the size is worth measuring, and
only then is one world's MJWarp data made on the CPU and its arrays counted.
"""

from __future__ import annotations

import dataclasses
import os
import resource
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import mujoco
    import torch

# Warp, MJWarp and torch are imported where they are used: the Simulator has loaded them already,
# and reading the memory limits needs none of them (a test reads them in a process of its own).

MEASURE_FRACTION = 0.25
"""Worlds are measured exactly once the rough estimate reaches this share of the free memory."""


def rough_world_bytes(mj_model: mujoco.MjModel, njmax: int, nconmax: int) -> int:
    """An over-estimate of one world's MJWarp data (constraint rows, contacts, mass matrices,
    per-body and per-geom state), from the model's sizes alone."""
    m = mj_model
    return 4 * (njmax * (2 * m.nv + 32) + nconmax * 160 + 8 * m.nv**2 + 160 * m.nbody + 48 * m.ngeom + 32 * m.nq)


def world_bytes(mj_model: mujoco.MjModel, njmax: int, nconmax: int) -> int:
    """Bytes of one world's MJWarp data, measured: ``make_data(nworld=1)`` on the CPU, its arrays summed."""
    import mujoco_warp as mjw
    import warp as wp

    with wp.ScopedDevice("cpu"):
        data = mjw.make_data(mj_model, nworld=1, nconmax=nconmax, njmax=njmax)
    return _array_bytes(data)


def _array_bytes(tree) -> int:
    import warp as wp

    total = 0
    for field in dataclasses.fields(tree):
        value = getattr(tree, field.name)
        if isinstance(value, wp.array):
            total += value.size * wp.types.type_size_in_bytes(value.dtype)
        elif dataclasses.is_dataclass(value):
            total += _array_bytes(value)
    return total


def available_bytes(device: torch.device) -> tuple[int, str] | None:
    """Memory a new allocation on ``device`` may take, and where that number comes from; ``None``
    when it cannot be told. On a GPU: the free device memory. On the CPU: the smallest of the
    memory the kernel reports available, the address-space limit (``ulimit -v``) left to this
    process and the cgroup's limit left to its processes (a container's or job's limit)."""
    if device.type == "cuda":
        import torch

        free, _ = torch.cuda.mem_get_info(device)
        return free, f"free on {device}"
    found = []
    meminfo = _read("/proc/meminfo")
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            found.append((int(line.split()[1]) * 1024, "available in this machine's memory"))
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit != resource.RLIM_INFINITY:
        used = _status_kib("VmSize") * 1024
        found.append((max(limit - used, 0), "left under this process's address-space limit (ulimit -v)"))
    cgroup_max, cgroup_now = _read("/sys/fs/cgroup/memory.max").strip(), _read("/sys/fs/cgroup/memory.current")
    if cgroup_max.isdigit() and cgroup_now.strip().isdigit():
        found.append((max(int(cgroup_max) - int(cgroup_now), 0), "left under this cgroup's memory limit"))
    return min(found) if found else None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _status_kib(key: str) -> int:
    for line in _read(f"/proc/{os.getpid()}/status").splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    return 0


def check_worlds_fit(mj_model: mujoco.MjModel, num_envs: int, device: torch.device, njmax: int, nconmax: int) -> None:
    """Refuse ``num_envs`` worlds whose physics state alone would not fit in :func:`available_bytes`.

    Raises:
        ValueError: ``num_envs N: the physics state alone needs about X GiB ...; at most about M
            envs fit``.
    """
    available = available_bytes(device)
    if available is None:
        return
    free, where = available
    if num_envs * rough_world_bytes(mj_model, njmax, nconmax) < MEASURE_FRACTION * free:
        return
    per_world = world_bytes(mj_model, njmax, nconmax)
    need = num_envs * per_world
    if need <= free:
        return
    raise ValueError(
        f"num_envs {num_envs:,}: the physics state alone needs about {need / 2**30:,.1f} GiB ({per_world / 1024:,.0f} "
        f"KiB a world: MJWarp's data at njmax {njmax}, nconmax {nconmax}), more than the {free / 2**30:,.1f} GiB "
        f"{where}; at most about {free // per_world:,} envs fit (fewer with the env's and the learner's own buffers)"
    )
