"""Training throughput of data-parallel ranks against one rank (``unilab_gpu.rl.distributed``).

Each rank runs the whole off-policy iteration (act, env step, replay add, updates with their
collectives) on its own env; the report gives every rank's env-steps/s and their total for each
world size. On a CPU the ranks share the cores, so the total grows sub-linearly at best; on a
multi-GPU machine run it under torchrun (one rank per GPU)::

    python scripts/bench_distributed.py --ranks 1 2 --out docs/benchmarks/distributed_cpu.json
    torchrun --nproc_per_node=4 scripts/bench_distributed.py --worker --device cuda --out dist_gpu.json

Without ``--worker`` the script starts ``--ranks`` sizes one after the other on this host (gloo on
the CPU) and collects their rows into one JSON report with the machine's description.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from unilab_gpu.cli.arguments import Bound, check_bounds, whole
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.agents import TINY_CONFIGS, algo_config, make_agent
from unilab_gpu.rl.distributed import DataParallel, launch_from_env, rank_device
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import TrainerSettings
from unilab_gpu.utils.files import OutputPathError, check_output, portable_paths, write_json_atomic

ALGO = {"batch_size": 256, "updates_per_step": 1, "warmup_steps": 5, "buffer_capacity_per_env": 128}
"""Tiny networks (``TINY_CONFIGS``) with a batch that makes the update a real share of the step."""


def worker(args: argparse.Namespace) -> None:
    """One rank: warm up, time ``--iterations`` training iterations, rank 0 writes the row."""
    launch = launch_from_env()
    device = torch.device(args.device) if launch is None else rank_device(args.device, launch)
    dp = DataParallel.start(launch, device) if launch is not None else None
    rank, world = (launch.rank, launch.world_size) if launch is not None else (0, 1)
    try:
        torch.manual_seed(rank)
        env = make_env(args.task, num_envs=args.num_envs, device=device, compile=False, seed=rank, announce=False)
        cfg = algo_config({**TINY_CONFIGS[args.algo], **ALGO}, compile=False)
        agent = make_agent(cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
        trainer = OffPolicyTrainer(
            env, agent, TrainerSettings(iterations=args.warmup, log_every=10**9), data_parallel=dp
        )
        trainer.train()  # warm-up: random actions, the first updates, first-call overheads
        if dp is not None:
            dp.agree(False, "barrier")
        trainer.settings.iterations = args.warmup + args.iterations
        start = time.perf_counter()
        trainer.train()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        rate = args.iterations * env.num_envs / (time.perf_counter() - start)
        rates = dp.all_gather(torch.tensor([rate], device=device))[:, 0].tolist() if dp is not None else [rate]
    finally:
        if dp is not None:
            dp.close()
    if rank == 0:
        row = {
            "world_size": world,
            "task": args.task,
            "algo": args.algo,
            "num_envs_per_rank": args.num_envs,
            "batch_size_per_rank": ALGO["batch_size"],
            "iterations": args.iterations,
            "device": str(device),
            "per_rank_env_steps_per_s": rates,
            "total_env_steps_per_s": sum(rates),
        }
        write_json_atomic(args.out, {"command": shlex.join(sys.argv), "machine": machine_info(str(device)), **row})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher(args: argparse.Namespace) -> None:
    """Run each world size of ``--ranks`` on this host, collect the rows, write the report."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.ranks:
            out = Path(tmp) / f"world{world}.json"
            port = free_port()
            cmd = [sys.executable, __file__, "--worker", "--out", str(out)]
            cmd += ["--task", args.task, "--algo", args.algo, "--device", args.device]
            cmd += ["--num-envs", str(args.num_envs), "--iterations", str(args.iterations)]
            cmd += ["--warmup", str(args.warmup)]
            procs = []
            for rank in range(world):
                env = {**os.environ, "OMP_NUM_THREADS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
                if world > 1:
                    env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
                procs.append(subprocess.Popen(cmd, env=env))
            codes = [p.wait() for p in procs]
            if any(codes):
                raise SystemExit(f"bench_distributed: {world} rank(s) exited with {codes}")
            row = json.loads(out.read_text())
            print(
                f"{args.task} {args.algo} x {args.num_envs} envs, {world} rank(s): "
                f"{row['total_env_steps_per_s']:,.0f} env-steps/s in total "
                f"({', '.join(f'{r:,.0f}' for r in row['per_rank_env_steps_per_s'])} per rank)",
                flush=True,
            )
            rows.append(row)
    machine = rows[0]["machine"]
    report = {
        "benchmark": "distributed_training",
        "command": "python scripts/bench_distributed.py " + shlex.join(sys.argv[1:]),
        "note": "OMP_NUM_THREADS=1 per rank; gloo on the CPU; every rank runs act, env step, replay add and one "
        "update per iteration (tiny networks, batch 256 per rank) with the update's collectives",
        "machine": machine,
        "results": [{k: v for k, v in row.items() if k not in ("machine", "command")} for row in rows],
    }
    base = rows[0]["total_env_steps_per_s"]
    for row in report["results"]:
        row["speedup_over_first"] = row["total_env_steps_per_s"] / base
    previous = json.loads(args.out.read_text()) if args.append and args.out.is_file() else None
    if previous is not None:
        report["results"] = previous["results"] + report["results"]
        report["command"] = previous["command"] + " ; " + report["command"]
    write_json_atomic(args.out, portable_paths(report))
    print(f"wrote {args.out}")


BOUNDS = {
    "--ranks": Bound(1, integer=True, meaning="processes of one world size"),
    "--num-envs": Bound(1, integer=True, meaning="envs per rank"),
    "--iterations": Bound(1, integer=True, meaning="timed iterations per rank"),
    "--warmup": Bound(0, integer=True, meaning="untimed iterations"),
}


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="bench_distributed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", action="store_true", help="be one rank (torchrun's environment)")
    parser.add_argument("--ranks", type=whole, nargs="+", default=[1, 2], help="world sizes to run (launcher)")
    parser.add_argument("--task", default="pendulum")
    parser.add_argument("--algo", default="sac", choices=sorted(TINY_CONFIGS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=whole, default=16, help="envs per rank")
    parser.add_argument("--iterations", type=whole, default=200, help="timed iterations per rank")
    parser.add_argument("--warmup", type=whole, default=20, help="untimed iterations first")
    parser.add_argument("--append", action="store_true", help="add the rows to an existing --out report")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true", help="replace an existing --out report")
    args = parser.parse_args()
    check_bounds(parser, args, BOUNDS)
    if not args.worker:  # found out now, not after every world size has run (--append extends the file)
        try:
            check_output(args.out, "--out", force=args.force or args.append, example="distributed.json")
        except OutputPathError as error:
            raise SystemExit(f"bench_distributed: error: {error}") from None
    worker(args) if args.worker else launcher(args)


if __name__ == "__main__":
    main()
