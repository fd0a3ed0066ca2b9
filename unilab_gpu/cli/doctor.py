"""``unilab-doctor``: a self-check to run on your own machine before training.

It answers, for this machine and install: does every task's step stay free of host syncs and
host-to-device copies, does the training loop, and on a CUDA device: how fast is physics alone,
does the whole step capture as one CUDA graph, does the replay give the eager step's numbers over
steps with resets (MJWarp's deterministic mode), does a replay never wait for the GPU, how fast is
the captured step against physics alone, where does its time go (CUDA events inside the graph),
and would MJWarp's early-exit solver be worth a split capture. What a CPU cannot check is reported
as ``skip`` with the reason. Prints a verdict table and writes JSON, rewritten after every check
(a run cut short keeps what it measured; ``SIGINT``/``SIGTERM`` mark it ``interrupted``)::

    unilab-doctor                       # the default device (cuda if available)
    unilab-doctor --device cpu --out doctor.json
    unilab-doctor --capture-task go2_velocity_rough   # the capture checks on a terrain task
    torchrun --nproc_per_node=N -m unilab_gpu.cli.doctor   # every rank on its cuda:LOCAL_RANK

Under ``torchrun`` every rank runs the checks on its own device at the same time, and one more:
data-parallel updates keep every rank's networks identical. Rank 0 writes the report: a check
fails if it fails on any rank, ``ranks`` holds every rank's checks, and the throughput check
gives each rank's env-steps/s and their sum. The checks themselves live in ``unilab_gpu.doctor``.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from unilab_gpu.cli.arguments import Bound, check_bounds, whole
from unilab_gpu.doctor.checks import KEY_TASK, check_data_parallel, fleet_checks, guarded, run_checks
from unilab_gpu.doctor.report import DoctorReport, table
from unilab_gpu.paths import list_tasks
from unilab_gpu.rl.distributed import DataParallel, launch_from_env, rank_device
from unilab_gpu.sim.device import VERBOSE_ENV, resolve_device
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_signals_interrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="unilab-doctor", description="Check this machine: host syncs, CUDA capture, replay, speed."
    )
    parser.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda or cuda:N")
    parser.add_argument("--out", default="doctor.json", help="JSON report (default: doctor.json)")
    parser.add_argument("--num-envs", type=whole, default=4096, help="envs of the CUDA checks")
    parser.add_argument("--tasks", nargs="*", default=None, help="tasks to audit (default: all)")
    parser.add_argument(
        "--capture-task",
        default=KEY_TASK,
        help=f"task of the physics, capture, replay, throughput and solver A/B checks (default: {KEY_TASK})",
    )
    parser.add_argument("--no-compile", action="store_true", help="CUDA checks without torch.compile (faster start)")
    parser.add_argument("--verbose", action="store_true", help="show Warp's log lines (module loads)")
    args = parser.parse_args(argv)
    check_bounds(parser, args, {"--num-envs": Bound(1, integer=True, meaning="envs of the CUDA checks")})
    if args.verbose:
        os.environ[VERBOSE_ENV] = "1"
    launch = launch_from_env()
    try:
        device = resolve_device(args.device) if launch is None else rank_device(args.device, launch)
    except ValueError as error:
        raise SystemExit(f"--device: {error}") from None
    tasks = args.tasks if args.tasks else list_tasks()
    unknown = sorted(set(tasks) - set(list_tasks()))
    if unknown:
        raise SystemExit(f"--tasks: unknown {unknown}; available: {list_tasks()}")
    if args.capture_task not in list_tasks():
        raise SystemExit(f"--capture-task: unknown '{args.capture_task}'; available: {list_tasks()}")
    out = Path(args.out)
    if not out.parent.exists():
        raise SystemExit(f"--out: folder {out.parent} does not exist")
    dp = DataParallel.start(launch, device) if launch is not None else None
    where = f" rank {dp.rank}/{dp.world_size}" if dp is not None else ""
    print(f"unilab-doctor:{where} {platform.node()} on {device}, torch {torch.__version__}", flush=True)
    report = DoctorReport(out if dp is None or dp.is_main else None, device)
    try:
        with stop_signals_interrupt():  # a budget's SIGTERM writes the report too
            compile = device.type == "cuda" and not args.no_compile
            checks = run_checks(
                device,
                tasks,
                args.num_envs,
                compile,
                done=report.add,
                starting=report.starting,
                capture_task=args.capture_task,
            )
    except KeyboardInterrupt as stop:
        result = report.interrupt(str(stop) or "SIGINT")
        print(table(report.checks))
        print(f"unilab-doctor: INTERRUPTED ({result['interrupted']}); what was measured is in {out}")
        return INTERRUPTED_EXIT_CODE  # stopped by SIGINT or SIGTERM; the report says in which check
    if dp is not None:
        checks.append(guarded("data-parallel replicas", lambda: check_data_parallel(dp, device)))
        checks = fleet_checks(dp, checks)
        if not dp.is_main:  # waits until rank 0 has written the report, then ends the process
            dp.finish(0 if all(c.status != "fail" for c in checks) else 1, "unilab-doctor")
    result = report.finish(checks)
    print(table(checks))
    print(f"unilab-doctor: {result['verdict'].upper()} in {result['seconds']:.0f} s; report written to {out}")
    status = 0 if result["verdict"] == "pass" else 1
    if dp is not None:
        dp.finish(status, "unilab-doctor")
    return status


if __name__ == "__main__":
    sys.exit(main())
