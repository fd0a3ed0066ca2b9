"""Short FlashSAC training run on the G1 task; writes throughput and the reward trend as JSON.

Runs the real trainer (compiled agent, captured env step on CUDA; the update captured too with
``algo.capture_update=true``) for ``--seconds`` of training after the first logging window, which
holds the one-off ``torch.compile`` and CUDA-graph capture and is reported separately. Output keys:

- ``env_steps_per_s``: median over the *steady* logging windows (training throughput: act + env
  step + replay + updates): those after the first whose start already had what its end had, the
  env step captured, updates begun and every update graph made (:func:`capture_state`), so that no
  compile or capture falls in them; ``steady_windows`` counts them;
- ``cut``: the run stopped (``--max-seconds``, ``SIGINT``) before its first steady window. A cut
  is not a failure: the script exits with :data:`CUT_EXIT` (gpu_check.sh: ``exit=cut_short``) and
  ``env_steps_per_s`` is null (one window's rate would be the compile's);
- ``update_ms``: median time of one gradient update (the update phase of the timed iteration
  of each window divided by ``updates_per_step``), and ``phase_ms`` medians of every phase;
- ``train_s``: seconds from the first logging point to the stop;
- ``compile`` (the env's terms and the agent's updates through ``torch.compile``) and
  ``update_mode`` (``captured`` only once the update's CUDA graphs were made, else ``compiled`` or
  ``eager``: :attr:`UpdateStep.mode <unilab_gpu.rl.update_step.UpdateStep.mode>`; gpu_check.json's
  ``train_update_mode``);
- ``reward_trend``: ``[env_steps, mean per-step reward]`` at every logging point, and
  ``episode_return_trend`` likewise where episodes ended;
- ``failures``: why the check fails, empty when it passes: no update ran in a run that reached a
  steady window, a logged loss is not finite, or no env step was taken. The script then exits with
  status 1.

``--out`` is checked before the run (an existing file needs ``--force``) and written atomically,
after every logging point too (``complete: false`` until the end), so a run cut short keeps what it
measured; ``SIGINT`` ends the run early with ``interrupted: true`` and exit status 130.

Usage:
  python scripts/gpu_train_check.py --device cuda --seconds 120 --out $OUT/train_check.json
  python scripts/gpu_train_check.py --device cpu --seconds 5 --num-envs 2 --out /tmp/t.json \\
      -- algo.batch_size=16 algo.actor_hidden_dim=8 algo.critic_hidden_dim=8
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

from unilab_gpu.paths import list_tasks
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.logger import RecordingLogger
from unilab_gpu.rl.off_policy_trainer import PHASES
from unilab_gpu.training.config import compose_train_config, resolve_auto
from unilab_gpu.training.run import build_run
from unilab_gpu.utils.files import OutputPathError, check_output, write_json_atomic


def run_check(args: argparse.Namespace) -> dict:
    task = args.task or ("g1_tracking" if "g1_tracking" in list_tasks() else "g1_stand")
    overrides = [
        f"task={task}",
        "algo=flashsac",
        f"device={args.device}",
        f"env.num_envs={args.num_envs}",
        f"log_every={args.log_every}",
        "checkpoint_every=0",
        "eval.every=0",  # the training throughput alone (the evaluation has its own block)
        "total_env_steps=1000000000000",  # stopped by time, not by steps
        "progress=lines",
        f"run_dir={args.run_dir}",
        *args.overrides,
    ]
    cfg = resolve_auto(compose_train_config(overrides))
    started = time.perf_counter()
    run = build_run(cfg)
    trainer = run.trainer
    recorder = RecordingLogger(trainer.logger)
    trainer.logger = recorder  # type: ignore[assignment]
    built = time.perf_counter()

    states: list[tuple] = []  # capture_state at each logging point

    def should_stop() -> bool:
        if len(recorder.points) > len(states):  # a new logging point: the report so far, on disk
            states.extend([capture_state(trainer)] * (len(recorder.points) - len(states)))
            write_json_atomic(
                args.out, make_report(cfg, task, trainer, recorder.points, states, started, built, complete=False)
            )
        if time.perf_counter() - started > args.max_seconds:
            return True
        # Training time counts from the first logging point (compile and capture happen before).
        return bool(recorder.points) and time.perf_counter() - recorder.points[0][1] > args.seconds

    interrupted = False
    try:
        trainer.train(should_stop)
    except KeyboardInterrupt:  # a budget's cut: what was measured is still reported
        interrupted = True
    recorder.close()
    states.extend([capture_state(trainer)] * (len(recorder.points) - len(states)))
    return {
        **make_report(cfg, task, trainer, recorder.points, states, started, built, complete=True),
        "interrupted": interrupted,
    }


CUT_EXIT = 75
"""Exit status of a run stopped before its first steady window (cut short for want of time, not failed)."""


def capture_state(trainer) -> tuple[bool, bool, int]:
    """What has been compiled or captured so far: the env step captured, updates begun (the
    policy's and the update's first calls compile), the update graphs made. A logging window over
    which this did not change held no compile and no capture."""
    return (
        bool(getattr(trainer.env, "captured", False)),
        trainer.agent.num_updates > 0,
        len(trainer.update_step.graphs),
    )


def steady_windows(points: list, states: list[tuple]) -> list[dict]:
    """The scalars of the logging windows after the first whose capture state did not change."""
    return [points[k][2] for k in range(1, len(points)) if states[k] == states[k - 1]]


def make_report(
    cfg, task: str, trainer, points: list, states: list[tuple], started: float, built: float, complete: bool
) -> dict:
    """The check's report from the logging points so far (``states``: :func:`capture_state` at each)."""
    stopped = time.perf_counter()
    steady = steady_windows(points, states)
    updates = trainer.algo.updates_per_step
    return {
        "check": "gpu_train_check",
        "task": task,
        "algo": cfg.algo.name,
        "device": str(trainer.env.device),
        "num_envs": trainer.env.num_envs,
        "compile": bool(cfg.compile),
        "update_mode": trainer.update_step.mode,
        "batch_size": trainer.algo.batch_size,
        "updates_per_step": updates,
        "iterations": trainer.iteration,
        "env_steps": trainer.env_steps,
        "build_s": built - started,
        "first_window_s": points[0][1] - built if points else None,
        "train_s": stopped - points[0][1] if points else 0.0,
        "steady_windows": len(steady),
        "cut": not steady,
        "env_steps_per_s": statistics.median(s["perf/env_steps_per_s"] for s in steady) if steady else None,
        "update_ms": statistics.median(s["perf/update_ms"] / updates for s in steady if "loss/critic" in s)
        if any("loss/critic" in s for s in steady)
        else None,
        "phase_ms": {p: statistics.median(s[f"perf/{p}_ms"] for s in steady) for p in PHASES} if steady else {},
        "reward_trend": [[step, s["train/reward_mean"]] for step, _, s in points],
        "episode_return_trend": [[step, s["episode/return"]] for step, _, s in points if "episode/return" in s],
        "machine": machine_info(str(trainer.env.device)),
        "failures": failures(points, trainer.agent.num_updates, trainer.env_steps, cut=not steady),
        "complete": complete,
    }


def failures(points: list, num_updates: int, env_steps: int, cut: bool = False) -> list[str]:
    """Why a run that raised nothing still does not show that training works on this device. A
    ``cut`` run (stopped before a steady window) is not blamed for updates it had no time for."""
    found = []
    if env_steps == 0 and not cut:
        found.append("no env step was taken")
    if not cut and (num_updates == 0 or not any("loss/critic" in s for _, _, s in points)):
        found.append(f"no update ran ({num_updates} updates, {len(points)} logging points): raise --seconds")
    for step, _, scalars in points:
        bad = [k for k in ("loss/critic", "loss/actor") if k in scalars and not math.isfinite(scalars[k])]
        if bad:
            found.append(f"non-finite {', '.join(bad)} at env step {step:,}")
            break
    return found


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--task", default=None, help="default: g1_tracking if present, else g1_stand")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=120.0, help="training time after the first window")
    parser.add_argument("--max-seconds", type=float, default=300.0, help="hard limit, build and compile included")
    parser.add_argument("--log-every", type=int, default=10, help="iterations per logging window")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("overrides", nargs="*", help="extra unilab-train overrides (after --)")
    args = parser.parse_args(argv)
    try:  # found out now, not after the run
        check_output(args.out, "--out", force=args.force, example="train_check.json")
    except OutputPathError as error:
        raise SystemExit(f"gpu_train_check: error: {error}") from None
    with tempfile.TemporaryDirectory() as run_dir:
        args.run_dir = run_dir
        report = run_check(args)
    write_json_atomic(args.out, report)
    if report["interrupted"]:
        print(
            f"gpu_train_check: INTERRUPTED after {report['env_steps']:,} env steps; what was measured is in {args.out}"
        )
        raise SystemExit(130)
    trend = report["reward_trend"] or [[0, float("nan")]]
    print(
        f"gpu_train_check: {report['env_steps_per_s'] or 0:,.0f} env-steps/s, "
        f"update {report['update_ms'] or 0:.2f} ms, reward {trend[0][1]:.4g} -> {trend[-1][1]:.4g} "
        f"over {report['env_steps']:,} env steps; {args.out}"
    )
    if report["failures"]:
        raise SystemExit("gpu_train_check: FAILED: " + "; ".join(report["failures"]))
    if report["cut"]:
        print(
            f"gpu_train_check: CUT after {report['env_steps']:,} env steps, before a steady logging window (compile "
            f"and capture took the time); no throughput measured; {args.out}"
        )
        raise SystemExit(CUT_EXIT)
    return report


if __name__ == "__main__":
    main()
