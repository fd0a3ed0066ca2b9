"""``python -m unilab_gpu``: the main job -- train FlashSAC on the default task of
``configs/train.yaml`` (G1 motion tracking on the built-in synthetic clip).

Arguments are ``unilab-train`` overrides. Without a CUDA device (or with ``device=cpu``) the
run downsizes itself so it finishes in a few minutes on a laptop CPU, and says so first. A run
that finishes ends with three lines: what ran (on a CPU: a smoke run, not a trained policy),
where its folder is, and the commands to look at it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import torch

from unilab_gpu.cli.train import main as train_main
from unilab_gpu.training.run import Run

CPU_ENVS, CPU_ITERATIONS = 16, 400
CPU_OVERRIDES = [
    f"env.cpu_num_envs={CPU_ENVS}",
    f"total_env_steps={CPU_ENVS * CPU_ITERATIONS}",
    "log_every=20",
    "checkpoint_every=200",
    "algo.batch_size=256",  # G1 batch of 2048 takes ~3 s per update on one CPU core
    "algo.updates_per_step=1",
]
"""Downsizing of a CPU run; the user's own arguments come after and win."""


def closing_lines(run: Run, smoke: bool) -> list[str]:
    """What ran, where its folder is, what to try next; ``smoke``: a downsized CPU run."""
    cfg, folder = run.cfg, run.run_dir
    ran = (
        f"python -m unilab_gpu: trained {cfg.algo.name} on {cfg.task} for {run.trainer.env_steps:,} env steps "
        f"({cfg.env.num_envs} envs on {cfg.device})"
    )
    if smoke:
        ran += (
            ": a smoke run that shows every part works, not a trained policy (that takes a GPU, or about "
            "50 minutes on a CPU core: scripts/learning_curve.py)"
        )
    return [
        ran,
        f"run folder: {folder}",
        f"next: unilab-play {folder} --viewer (watch it in a browser), unilab-play {folder} --video rollout.mp4",
    ]


def run(argv: Sequence[str]) -> int:
    args = list(argv)
    on_cpu = not torch.cuda.is_available() or any(a in ("device=cpu", "+device=cpu") for a in args)
    if on_cpu and not any(a.startswith("resume=") for a in args):
        print(
            f"python -m unilab_gpu: no CUDA device, so a downsized CPU run ({CPU_ENVS} envs, "
            f"{CPU_ENVS * CPU_ITERATIONS:,} env steps, batch 256; a few minutes). On a GPU the same "
            "command trains 4096 envs for 100M env steps."
        )
        args = CPU_OVERRIDES + args
    return train_main(args, on_finish=lambda done: print("\n".join(closing_lines(done, smoke=on_cpu))))


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
