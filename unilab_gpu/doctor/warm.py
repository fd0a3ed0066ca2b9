"""Compile the Warp modules a doctor run will load, in parallel processes, before it starts.

On a cold machine the doctor's first steps pay for every Warp module MJWarp and the project load
(about a hundred for the G1), one after another, in one process. This tool pays for them in
``--workers`` processes at once, into Warp's kernel cache on disk, which the doctor then reads::

    python -m unilab_gpu.doctor.warm --device cuda --task g1_tracking --num-envs 4096 --workers 8 \\
        --out warm.json

**How a worker finds the modules.** Many MJWarp kernels are generated from the model on first use,
so the modules a run loads are only known by running it. Each worker runs the same *walk* as the
doctor (the task's eager step at ``num_envs`` and, in deterministic mode, at the replay check's
size; the task's step with both solver loops of the A/B, forced resets included; the pendulum
of the training-loop audit) with every Warp launch replaced by a load of the launched kernel's module, for the block
size the launch would use, if the module is this worker's (a hash of its name picks one worker);
nothing runs on the device. Kernels are created and modules loaded in the same order as in the
real run, so each module is compiled with the hash the real run will ask the cache for. Warp
builds each module in a private folder and renames it into the cache, so workers never clash.
A walk that fails (a module that does not compile, a value a skipped kernel did not write) is
reported and the other walks go on; whatever was not warmed, the doctor compiles itself.

The parent rewrites ``--out`` (JSON) each time a worker ends: per worker, the modules it loaded,
how many it compiled (the rest were cached), its seconds and any walk errors.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
import traceback
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

WALKS = ("task", "task_deterministic", "solver_early_exit", "solver_fixed", "pendulum")
"""What a worker walks, in the order the doctor first runs them."""


def owner(module_name: str, workers: int) -> int:
    """The worker that compiles the module named ``module_name`` (stable across processes)."""
    return zlib.crc32(module_name.encode()) % workers


class LoadOnly:
    """Warp's launch entry points replaced by loads of the launched kernels' modules (this worker's).

    ``wp.launch`` (and ``launch_tiled``, which calls Warp's ``launch`` by its module-level name)
    resolve the device and block size as a launch would, then ``kernel.module.load(device,
    block_dim)``; ``wp.capture_while``/``capture_if`` run their bodies once (a loop on a condition
    no kernel updates would never end). Installed with :meth:`install`, undone with :meth:`remove`.
    """

    def __init__(self, worker: int, workers: int) -> None:
        self.worker, self.workers = worker, workers
        self.loaded: dict[str, bool] = {}
        """``module@block_dim`` -> whether this process compiled it (else it came from the cache)."""
        self._saved: list[tuple[Any, str, Any]] = []

    def install(self) -> None:
        import warp as wp
        from warp._src import context

        signature = inspect.signature(context.launch)

        def launch(*args, **kwargs):
            self._load(signature.bind(*args, **kwargs).arguments)

        def capture_while(condition, while_body, stream=None, **kwargs):
            if callable(while_body):
                while_body(**kwargs)

        def capture_if(condition, on_true=None, on_false=None, stream=None, **kwargs):
            for branch in (on_true, on_false):
                if callable(branch):
                    branch(**kwargs)

        for owner_module, name, value in (
            (wp, "launch", launch),
            (context, "launch", launch),
            (wp, "capture_while", capture_while),
            (wp, "capture_if", capture_if),
        ):
            self._saved.append((owner_module, name, getattr(owner_module, name)))
            setattr(owner_module, name, value)

    def remove(self) -> None:
        for owner_module, name, value in reversed(self._saved):
            setattr(owner_module, name, value)
        self._saved.clear()

    def _load(self, arguments: dict[str, Any]) -> None:
        from warp._src import context

        kernel = arguments["kernel"]
        stream = arguments.get("stream")
        device = stream.device if stream is not None else context.runtime.get_device(arguments.get("device"))
        block_dim = context._resolve_launch_block_dim(device, arguments.get("block_dim"))
        if context._normalize_launch_dim(arguments["dim"])[1] == 0:
            return  # a launch of size 0 loads nothing
        if kernel.is_generic:
            values = [*arguments.get("inputs", ()), *arguments.get("outputs", ())]
            kernel = kernel._add_normalized_overload(kernel.infer_argument_types(values))
        module = kernel.module
        if owner(module.name, self.workers) != self.worker:
            return
        key = f"{module.name}@{block_dim}"
        before = module.execs.get((device.context, block_dim))
        cached = _in_cache(module, block_dim)
        if module.load(device, block_dim) is not before:
            self.loaded[key] = self.loaded.get(key, False) or not cached


def _in_cache(module, block_dim: int) -> bool:
    """Whether Warp's kernel cache already holds ``module``'s current version (its folder)."""
    import warp as wp

    return (Path(wp.config.kernel_cache_dir) / module.get_module_identifier(block_dim)).is_dir()


def walk(name: str, device: str, task: str, num_envs: int) -> None:
    """Run one walk of :data:`WALKS` (with :class:`LoadOnly` installed, nothing reaches the device)."""
    import torch

    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.profiling.solver_ab import solver_arm_env

    if name in ("task", "task_deterministic", "pendulum"):
        deterministic = name == "task_deterministic"
        envs = 4 if name == "pendulum" else min(num_envs, 1024) if deterministic else num_envs
        env = make_env(
            "pendulum" if name == "pendulum" else task,
            envs,
            device,
            compile=False,
            capture=False,
            deterministic=deterministic,
            announce=False,
        )
        env.reset()
        actions = torch.zeros(env.num_envs, env.action_dim, device=env.device)
        for _ in range(2):
            env.step(actions)
        return
    arm = name.removeprefix("solver_")
    env = solver_arm_env(task, num_envs, device, arm)  # the A/B's own env (doctor.captured_step)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.action_dim, device=env.device))


def run_worker(
    worker: int, workers: int, device: str, task: str, num_envs: int, walks: tuple[str, ...] = WALKS
) -> dict[str, Any]:
    """Walk each of ``walks`` loading this worker's modules; what it did, as a dict."""
    start = time.perf_counter()
    load_only = LoadOnly(worker, workers)
    errors: dict[str, str] = {}
    load_only.install()
    try:
        for name in walks:
            try:
                walk(name, device, task, num_envs)
            except Exception as error:  # the other walks still warm their modules
                where = traceback.extract_tb(error.__traceback__)[-1]
                errors[name] = f"{type(error).__name__}: {error} (at {Path(where.filename).name}:{where.lineno})"
    finally:
        load_only.remove()
    return {
        "worker": worker,
        "modules": sorted(load_only.loaded),
        "compiled": sum(load_only.loaded.values()),
        "seconds": time.perf_counter() - start,
        "errors": errors,
    }


def run_parallel(
    workers: int,
    device: str,
    task: str,
    num_envs: int,
    out: Path | None,
    walks: tuple[str, ...] = WALKS,
    report: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Start ``workers`` worker processes and collect their results (``out`` rewritten as each ends)."""
    start = time.perf_counter()
    command = [sys.executable, "-m", "unilab_gpu.doctor.warm", "--device", device, "--task", task]
    command += ["--num-envs", str(num_envs), "--workers", str(workers), "--walks", *walks]
    processes = {
        k: subprocess.Popen([*command, "--worker", str(k)], stdout=subprocess.PIPE, text=True) for k in range(workers)
    }
    summary: dict[str, Any] = {"workers": workers, "device": device, "task": task, "num_envs": num_envs}
    summary.update(results=[], failed_workers=[], complete=False)

    def write() -> None:
        summary["seconds"] = time.perf_counter() - start
        summary["modules"] = sum(len(r["modules"]) for r in summary["results"])
        summary["compiled"] = sum(r["compiled"] for r in summary["results"])
        if out is not None:
            from unilab_gpu.utils.files import write_json_atomic

            write_json_atomic(out, summary)

    write()
    try:
        for k, process in processes.items():
            stdout, _ = process.communicate()
            lines = [line for line in stdout.splitlines() if line.startswith("{")]
            if process.returncode != 0 or not lines:
                summary["failed_workers"].append({"worker": k, "exit": process.returncode})
            else:
                summary["results"].append(json.loads(lines[-1]))
            write()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
    summary["complete"] = True
    write()
    errors = sorted({name for r in summary["results"] for name in r["errors"]})
    report(
        f"warm: {summary['modules']} Warp modules loaded by {workers} processes ({summary['compiled']} compiled, "
        f"the rest cached) in {summary['seconds']:.0f} s"
        + (f"; walks with errors: {', '.join(errors)}" if errors else "")
        + (f"; workers failed: {summary['failed_workers']}" if summary["failed_workers"] else "")
    )
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--task", default="g1_tracking")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--walks", nargs="+", choices=WALKS, default=list(WALKS), help="what to walk (default: all)")
    parser.add_argument("--worker", type=int, default=None, help="(internal) run worker K and print its result")
    parser.add_argument("--out", type=Path, default=None, help="JSON summary, rewritten as each worker ends")
    args = parser.parse_args(argv)
    if args.workers < 1 or args.num_envs < 1:
        raise SystemExit(f"--workers and --num-envs must be >= 1, got {args.workers} and {args.num_envs}")
    if args.worker is not None:
        result = run_worker(args.worker, args.workers, args.device, args.task, args.num_envs, tuple(args.walks))
        print(json.dumps(result), flush=True)
        return 0
    summary = run_parallel(args.workers, args.device, args.task, args.num_envs, args.out, tuple(args.walks))
    return 0 if not summary["failed_workers"] else 1


if __name__ == "__main__":
    sys.exit(main())
