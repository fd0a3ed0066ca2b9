"""Compiled == eager on this device: each task's env step with ``torch.compile``'d terms against
the same step with eager terms, over steps that include resets::

    python -m unilab_gpu.doctor.compiled_eager --device cuda --tasks g1_tracking go2_velocity_rough \\
        --num-envs 1024 --steps 30 --out compiled_eager.json

The CPU tests compare the two on the CPU (``tests/test_env_step.py``); Inductor writes other code
for CUDA (Triton kernels), so ``scripts/gpu_check.sh`` runs this before its compiled training run,
on a flat task and a terrain task (the height scan, the curriculum and the spawn on sub-terrain
origins are terms too). Both envs run in MJWarp's deterministic mode with the default capture
(on CUDA: the whole step as one graph), from the same seed, with the same random actions, so
physics adds no difference of its own; an output passes within :data:`ATOL` ``+`` :data:`RTOL`
``x |eager|`` (the CPU tests' tolerance: the compiled terms round differently, and the physics
carries that rounding on). A comparison in which no episode ended fails: it would not test the
reset path.

``--out`` (JSON) is rewritten after every task: ``tasks``, ``checks`` (the doctor's check records: status,
detail, the largest difference of each output, steps with resets, whether each env captured),
``complete``, and ``interrupted`` when ``SIGINT``/``SIGTERM`` cut it (exit status 130). Exit
status 1 when a comparison fails.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import torch

from unilab_gpu.doctor.captured_step import compare_rollouts, rollout
from unilab_gpu.doctor.checks import guarded
from unilab_gpu.doctor.report import Check
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import list_tasks
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_signals_interrupt
from unilab_gpu.utils.files import write_json_atomic

ATOL = RTOL = 1e-4
"""Tolerance of compiled against eager outputs (``tests/test_env_step.py``'s)."""

EPISODE_OVERRIDES = ("episode_length_s=0.5",)
"""Episodes of 25 steps at 50 Hz: every row ends one inside the comparison."""


def check_compiled_equals_eager(task: str, num_envs: int, device: str | torch.device, steps: int = 30) -> Check:
    """``steps`` steps of ``task`` with compiled and with eager terms, same seed and actions."""
    device = resolve_device(device)
    generator = torch.Generator(device).manual_seed(0)
    actions = None
    runs, captured = [], []
    for compile in (False, True):
        env = make_env(
            task,
            num_envs,
            device,
            overrides=list(EPISODE_OVERRIDES),
            seed=5,
            compile=compile,
            deterministic=True,
            announce=False,
        )
        env.reset()
        if actions is None:  # its own generator: drawing it moves none of the env's random numbers
            actions = torch.rand(steps, num_envs, env.action_dim, device=device, generator=generator) * 2 - 1
        runs.append(rollout(env, actions))
        captured.append(env.captured)
        env.close()
        del env
    check = compare_rollouts(*runs, name=f"compiled equals eager: {task}", tolerance=ATOL, rtol=RTOL)
    check.data.update(task=task, num_envs=num_envs, captured={"eager": captured[0], "compiled": captured[1]})
    return check


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    parser.add_argument("--tasks", nargs="+", default=["g1_tracking", "go2_velocity_rough"])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", type=Path, required=True, help="JSON report, rewritten after every task")
    args = parser.parse_args(argv)
    unknown = [task for task in args.tasks if task not in list_tasks()]
    if unknown:
        raise SystemExit(f"--tasks: unknown {unknown}; available: {list_tasks()}")
    if args.num_envs < 1 or args.steps < 1:
        raise SystemExit(f"--num-envs and --steps must be >= 1, got {args.num_envs} and {args.steps}")
    device = resolve_device(args.device)
    report = {"tool": "compiled_eager", "device": str(device), "tasks": args.tasks, "num_envs": args.num_envs}
    report["steps"] = args.steps
    report.update(checks=[], complete=False, interrupted=None)
    write_json_atomic(args.out, report)
    try:
        with stop_signals_interrupt():  # a budget's SIGTERM writes the report as Ctrl-C does
            for task in args.tasks:
                name = f"compiled equals eager: {task}"
                print(f"compiled_eager: {task} x {args.num_envs}, {args.steps} steps ...", flush=True)
                check = guarded(
                    name, lambda task=task: check_compiled_equals_eager(task, args.num_envs, device, args.steps)
                )
                report["checks"].append(asdict(check))
                write_json_atomic(args.out, report)
                print(f"compiled_eager: {check.status}: {check.detail}", flush=True)
    except KeyboardInterrupt as stop:
        report["interrupted"] = f"{stop.args[0] if stop.args else 'SIGINT'} during {args.tasks[len(report['checks'])]}"
        write_json_atomic(args.out, report)
        print(f"compiled_eager: INTERRUPTED ({report['interrupted']}); {args.out}", flush=True)
        return INTERRUPTED_EXIT_CODE
    report["complete"] = True
    write_json_atomic(args.out, report)
    return 0 if all(c["status"] == "pass" for c in report["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
