"""Fault injection (issue 11): a tiny pendulum run killed with SIGKILL at random points, including
in the middle of checkpoint writes, always leaves a loadable checkpoint and a resumable run folder.

Each trainer is a child of one ``forkserver`` (torch, Warp and Hydra imported there once, so a
start costs about a second instead of an interpreter start-up, and no child inherits the test
process's threads). Kills come three ways: from this process at a random time (startup,
training, saving alike), from the trainer itself after a random part of a checkpoint's bytes
were written, and from the trainer itself between the finished write and the rename that
publishes it.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import random
import signal
import sys
import time

import pytest
import torch
from omegaconf import OmegaConf
from test_cli_train import TINY

from unilab_gpu.cli.train import main
from unilab_gpu.rl.checkpoint import load_checkpoint

KILLS = 24
CHILD_TIMEOUT_S = 120.0
CAN_FORKSERVER = "forkserver" in multiprocessing.get_all_start_methods()


def _trainer(argv: list[str], mode: str, seed: int) -> None:
    """Child process: ``main(argv)``, killing itself with SIGKILL where ``mode`` says."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    rng = random.Random(seed)
    nth = rng.randint(1, 4)  # which write of this process dies
    calls = [0]
    if mode == "mid_write":
        real_save = torch.save

        def partial_save(obj, file, *args, **kwargs):
            calls[0] += 1
            if calls[0] == nth:
                buffer = io.BytesIO()
                real_save(obj, buffer)
                data = buffer.getvalue()
                file.write(data[: rng.randrange(len(data))])
                file.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return real_save(obj, file, *args, **kwargs)

        torch.save = partial_save
    elif mode == "before_rename":
        real_replace = os.replace

        def replace_then_die(src, dst):
            calls[0] += 1
            if calls[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
            return real_replace(src, dst)

        os.replace = replace_then_die
    from unilab_gpu.cli.train import main as train_main

    sys.exit(train_main(argv))


@pytest.mark.slow
@pytest.mark.skipif(not CAN_FORKSERVER, reason="needs the forkserver start method")
def test_sigkill_at_random_points_always_leaves_a_loadable_checkpoint_and_resumable_run(tmp_path):
    run_dir = tmp_path / "run"
    new_run = [*TINY, "total_env_steps=100000000", "checkpoint_every=1", "log_every=5", f"run_dir={run_dir}"]
    rng = random.Random(11)
    modes = ["timer", "mid_write", "before_rename"]
    iterations, killed_in_save = [], 0
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["unilab_gpu.cli.train"])
    for attempt in range(KILLS):
        mode = modes[attempt % len(modes)]
        started = run_dir.exists()
        argv = [f"resume={run_dir}"] if started else new_run
        child = context.Process(target=_trainer, args=(argv, mode, attempt))
        child.start()
        if mode == "timer":
            time.sleep(rng.uniform(0.05, 2.0))
            child.kill()
        child.join(CHILD_TIMEOUT_S)
        if child.exitcode is None:
            child.kill()
            pytest.fail(f"kill {attempt} ({mode}): the trainer neither died nor finished in {CHILD_TIMEOUT_S:.0f} s")
        # Every trainer dies by SIGKILL: none fails on the folder the previous one left.
        assert child.exitcode == -signal.SIGKILL, (attempt, mode, child.exitcode)
        killed_in_save += mode != "timer"
        if not run_dir.exists():
            assert not started  # killed before the new folder was published: nothing half-made
            continue
        checkpoint = load_checkpoint(run_dir)
        assert OmegaConf.load(run_dir / "config.yaml").env.num_envs == checkpoint["num_envs"] == 4
        iterations.append(checkpoint["trainer"]["iteration"])
    assert killed_in_save >= KILLS * 2 // 3
    assert iterations and iterations == sorted(iterations)  # no kill ever lost saved progress
    assert iterations[-1] > 0
    # The folder the last kill left is resumable: finish two more iterations.
    total = (iterations[-1] + 2) * 4
    assert main([f"resume={run_dir}", f"total_env_steps={total}", "checkpoint_every=0"]) == 0
    assert load_checkpoint(run_dir)["trainer"]["iteration"] == iterations[-1] + 2
    assert not list(run_dir.glob(".*.tmp"))  # the resume cleared the killed writes' leftovers
