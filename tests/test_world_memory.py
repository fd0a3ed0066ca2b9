"""Millions of envs under a memory limit (issue 36): refused in one line that says how many fit,
before MJWarp allocates anything, instead of a traceback from the allocator."""

from __future__ import annotations

import re
import subprocess
import sys

import mujoco
import mujoco_warp as mjw
import pytest
import torch
import warp as wp

from unilab_gpu.paths import robot_asset
from unilab_gpu.sim import world_memory
from unilab_gpu.sim.world_memory import check_worlds_fit, rough_world_bytes, world_bytes


@pytest.fixture(scope="module")
def g1() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(robot_asset("g1")))


def _bytes_of(data) -> int:
    """Every array of an MJWarp ``Data``, counted the other way: by the bytes Warp holds for it."""
    total, stack = 0, [data]
    while stack:
        node = stack.pop()
        for value in vars(node).values():
            if isinstance(value, wp.array):
                total += value.capacity
            elif hasattr(value, "__dataclass_fields__"):
                stack.append(value)
    return total


def test_one_world_is_measured_and_the_rough_estimate_is_above_it(g1):
    per_world = world_bytes(g1, 300, 48)
    with wp.ScopedDevice("cpu"):
        one, three = (mjw.make_data(g1, nworld=n, nconmax=48, njmax=300) for n in (1, 3))
    assert per_world == _bytes_of(one)
    assert abs((_bytes_of(three) - _bytes_of(one)) / 2 - per_world) <= 64  # all of it grows with the worlds
    assert rough_world_bytes(g1, 300, 48) > per_world  # so the rough gate never skips a size that matters


def test_too_many_worlds_are_refused_with_how_many_fit(g1, monkeypatch):
    free = 3 * 2**30
    monkeypatch.setattr(world_memory, "available_bytes", lambda device: (free, "left under a test limit"))
    per_world = world_bytes(g1, 300, 48)
    with pytest.raises(ValueError) as refused:
        check_worlds_fit(g1, 2_000_000, torch.device("cpu"), 300, 48)
    message = str(refused.value)
    need = 2_000_000 * per_world / 2**30
    assert message.startswith(f"num_envs 2,000,000: the physics state alone needs about {need:,.1f} GiB (")
    assert f"more than the 3.0 GiB left under a test limit; at most about {free // per_world:,} envs fit" in message
    check_worlds_fit(g1, free // per_world, torch.device("cpu"), 300, 48)  # exactly that many pass
    with pytest.raises(ValueError, match="at most about"):
        check_worlds_fit(g1, free // per_world + 1, torch.device("cpu"), 300, 48)


def test_ordinary_sizes_are_not_measured(g1, monkeypatch):
    monkeypatch.setattr(world_memory, "world_bytes", lambda *a: pytest.fail("measured an ordinary size"))
    check_worlds_fit(g1, 4096, torch.device("cpu"), 300, 48)


def test_available_memory_reads_the_address_space_limit():
    """``ulimit -v``: what is left of it to this process (a child sets it; this one keeps its own)."""
    code = (
        "import os, resource, types; from unilab_gpu.sim.world_memory import available_bytes;"
        "hard = resource.getrlimit(resource.RLIMIT_AS)[1];"
        "used = int(next(l for l in open('/proc/self/status') if l.startswith('VmSize')).split()[1]) * 1024;"
        "resource.setrlimit(resource.RLIMIT_AS, (used + 2**30, hard));"
        "free, where = available_bytes(types.SimpleNamespace(type='cpu'));"
        "print(used + 2**30 - free, where, flush=True);"
        "os._exit(0)"  # a normal exit can hang under the limit (library threads' teardown)
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    out = run.stdout.split()
    grown = int(out[0])  # the limit, less what is left: what the process holds now
    assert " ".join(out[1:]) == "left under this process's address-space limit (ulimit -v)"
    assert 0 < grown < 4 * 2**30


def test_unilab_train_with_millions_of_envs_is_one_line_before_allocating(tmp_path, monkeypatch, capsys):
    from unilab_gpu.cli.train import main

    monkeypatch.setattr(world_memory, "available_bytes", lambda device: (2**30, "left under a test limit"))
    monkeypatch.setattr(mjw, "put_model", lambda *a, **k: pytest.fail("allocated before checking"))
    argv = ["task=g1_stand", "env.num_envs=3000000", "algo=sac", "total_env_steps=8", f"run_root={tmp_path}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.match(r"unilab-train: error: .*num_envs 3,000,000: the physics state alone needs about ", err), err
    assert err.count("\n") == 1 and "envs fit" in err and list(tmp_path.iterdir()) == []
