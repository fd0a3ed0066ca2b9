"""Learning curve of a task for a fixed budget, against the untrained policy measured the same way.

Trains with the real trainer (``unilab-train``'s run building: same configs, presets and
overrides), records the training episodes' statistics at every logging point, and evaluates the
deterministic policy before and after training on a separate evaluation env (same task and
overrides, its own seed, ``randomize_initial_episode_length=false``, one full episode length of
steps: :mod:`unilab_gpu.evaluation.episodes`; on a tracking task also the clean evaluation of
:mod:`unilab_gpu.evaluation.clean`). Writes JSON and, with ``--plot``, a PNG::

    python scripts/learning_curve.py --algo flashsac --minutes 30 \\
        --out docs/benchmarks/learning/g1_tracking_flashsac.json \\
        --plot docs/benchmarks/learning/g1_tracking_flashsac.png

    python scripts/learning_curve.py --task g1_velocity --algo sac_velocity --minutes 30 \\
        --out docs/benchmarks/learning/g1_velocity_sac.json

The JSON's top level holds ``untrained`` and ``trained`` (each with ``episode_length``, mean steps,
the task's errors from :data:`~unilab_gpu.evaluation.episodes.TASK_METRICS`, that error by episode age, and every
``stats.summary()`` key under ``summary``), ``curve`` (one row per logging point), the exact
command and the machine. The task's metrics follow from its command term: ``motion``
(``g1_tracking``: ``body_pos_error_m``, the mean over tracked bodies and steps) or ``twist``
(``g1_velocity``: ``lin_vel_error_mps`` and ``yaw_rate_error_radps``, means over rows and steps).
For ``g1_tracking`` the motion is ``--motion`` (default: the shared holosoma clip
``../shared/motions/g1/largebox_carry.npz``). ``--keep-run DIR`` keeps the run folder (config, the
trained checkpoint, the policy evaluated, and its ``policy.onnx`` after a finished run) for
``unilab-play DIR``, ``unilab-sim2sim`` or a resume; without it the run trains in a temporary folder.
Training prints one line per logging point, in minutes of the ``--minutes`` budget.

``--out`` is written as the run goes, with ``complete: false`` and the ``stage`` it is in: after the
untrained evaluation, at every logging point (``curve`` so far) and after training. A SIGINT or
SIGTERM ends the run (during training: after the iteration it came in, the kept run saved) with
the report so far, ``interrupted`` saying when, and exit status 130, so a run cut by a time limit
keeps its curve.

``--out`` and ``--plot`` are checked before any work, as the commands check theirs: an existing
file needs ``--force``, and neither may be a folder, a link, a FIFO or device, a run folder's own
file, the other output, or inside ``--keep-run``. Both are written atomically; the report names
files relative to the repository. ``--replot`` redraws ``--plot`` from an existing ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

import torch

from unilab_gpu.evaluation.clean import CLEAN_AGES, clean_evaluation
from unilab_gpu.evaluation.episodes import TASK_METRICS, age_keys, episode_evaluation, mean_over_first
from unilab_gpu.export.export_run import export_after_training
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.logger import Progress, RecordingLogger
from unilab_gpu.training.config import compose_train_config, resolve_auto
from unilab_gpu.training.run import build_run
from unilab_gpu.training.run_folder import RunLock
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_on_signals, stop_signals_interrupt
from unilab_gpu.utils.files import (
    LOCK_NAME,
    OutputPathError,
    check_output,
    holds_run,
    portable_paths,
    write_atomic,
    write_error,
    write_json_atomic,
)

ROOT = Path(__file__).resolve().parents[1]
NO_ENV_STEP_BUDGET = 10**9
"""``total_env_steps`` of a run without ``--env-steps``: more than the time budget reaches."""
SHARED_CLIP = ROOT.parent / "shared" / "motions" / "g1" / "largebox_carry.npz"


CURVE_KEYS = (
    "episode/length",
    "episode/return",
    *(key for metrics in TASK_METRICS.values() for key in metrics.errors),
    "train/reward_mean",
    "terrain/mean_level",
    "terrain/level_fraction",
    "motion/termination_scale",
)
"""Scalars of each logging point kept in the curve (when the task has them; the mean terrain
level and its fraction of what the curriculum can sustain on a task with a terrain curriculum;
the termination curriculum's scale on a tracking task with one)."""


def curve_row(env_steps: int, seconds: float, scalars: dict[str, float]) -> dict[str, float]:
    """One logging point of the curve: env steps, seconds into training, the :data:`CURVE_KEYS`."""
    return {"env_steps": env_steps, "seconds": seconds, **{k: scalars[k] for k in CURVE_KEYS if k in scalars}}


class BudgetProgress(Progress):
    """The training's progress lines in the script's budget: ``minutes 3.2/30 | env-steps 12,345 | ...``
    (the trainer's own count, ``it 100/62,500,000``, is of an env-step budget a time-budgeted run
    never reaches). ``env_steps``: the env-step budget, ``None`` when the time budget alone counts."""

    def __init__(self, minutes: float, env_steps: int | None, stream: TextIO) -> None:
        super().__init__(0, mode="lines", stream=stream)
        self.minutes, self.env_steps, self.started = minutes, env_steps, time.perf_counter()

    def update(self, iteration: int, env_steps: int, scalars: dict[str, float]) -> None:
        spent = (time.perf_counter() - self.started) / 60
        budget = "" if self.env_steps is None else f"/{self.env_steps:,}"
        line = f"minutes {spent:.1f}/{self.minutes:g} | env-steps {env_steps:,}{budget} | {self.describe(scalars)}"
        self.stream.write(line + "\n")
        self.stream.flush()
        self.last = iteration


def release_run_lock(lock: RunLock, run_dir: Path) -> None:
    """Drop the run's lock and its file, so a kept run folder holds no empty ``trainer.lock`` (a
    resume makes a new one). Removed while still held: ``RunLock`` never waits for a lock, so no
    other process can come to hold the removed file."""
    (run_dir / LOCK_NAME).unlink(missing_ok=True)
    lock.release()


class Interrupted(Exception):
    """A SIGINT or SIGTERM ended the run early; the report so far is on disk (``interrupted``)."""


def run(args: argparse.Namespace, write: Callable[[dict], None] = lambda report: None) -> dict:
    """Train and evaluate; ``write(report)`` gets the report so far (``complete: false``, the
    ``stage`` it is in) after the untrained evaluation, at every logging point and after training.

    Raises:
      Interrupted: a SIGINT or SIGTERM arrived (during training: after the iteration it came
        in, with the kept run saved); ``write`` got the report so far with ``interrupted`` set.
    """
    env_overrides = list(args.env_override)
    tracking = args.task.startswith("g1_tracking")
    if tracking and args.motion != "none":
        motion = Path(args.motion).resolve()
        if not motion.is_file():
            raise SystemExit(f"--motion: {motion} not found (pass --motion none for the built-in synthetic clip)")
        env_overrides.append(f"commands.motion.params.motion_files=[{motion}]")
    report: dict = {}
    with contextlib.ExitStack() as scope:
        run_dir = args.keep_run or Path(scope.enter_context(tempfile.TemporaryDirectory())) / "run"
        overrides = [
            f"task={args.task}",
            f"algo={args.algo}",
            f"device={args.device}",
            f"seed={args.seed}",
            f"env.num_envs={args.num_envs}",
            f"log_every={args.log_every}",
            "checkpoint_every=0",
            "export_onnx=false",
            f"total_env_steps={args.env_steps or NO_ENV_STEP_BUDGET}",
            "progress=lines",
            f"run_dir={run_dir}",
            f"env.overrides=[{','.join(json.dumps(o) for o in env_overrides)}]",
            *args.overrides,
        ]
        cfg = resolve_auto(compose_train_config(overrides))
        started = time.perf_counter()
        report.update(
            benchmark="learning_curve",
            command="python scripts/learning_curve.py " + shlex.join(args.argv),
            task=args.task,
            algo=args.algo,
            env_overrides=env_overrides,
            num_envs=args.num_envs,
            env_steps=0,
            updates=None,
            train_seconds=None,
            total_seconds=None,
            untrained=None,
            trained=None,
            curve=[],
            machine=machine_info(cfg.device),
            stage="build",
            complete=False,
            interrupted=None,
        )
        trainer = recorder = None
        train_start = started

        def progress(stage: str) -> None:
            report["stage"], report["total_seconds"] = stage, time.perf_counter() - started
            if trainer is not None:
                report["env_steps"], report["updates"] = trainer.env_steps, trainer.agent.num_updates
            if recorder is not None:
                report["curve"] = [curve_row(n, at - train_start, scalars) for n, at, scalars in recorder.points]
            write(report)

        try:
            with stop_signals_interrupt():
                built = build_run(cfg)
                if built.lock is not None:
                    scope.callback(release_run_lock, built.lock, built.run_dir)
                trainer = built.trainer
                progress("untrained evaluation")
                untrained = episode_evaluation(
                    args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1
                )
                clean = tracking and args.clean_eval_envs > 0
                if clean:
                    untrained["clean_eval"] = clean_evaluation(
                        args.task, env_overrides, trainer.agent, args.clean_eval_envs, cfg.device, args.seed + 1, False
                    )
                report["untrained"] = untrained
                stream = trainer.logger.progress.stream
                trainer.logger.progress = BudgetProgress(args.minutes, args.env_steps, stream)
                recorder = RecordingLogger(trainer.logger)
                trainer.logger = recorder  # type: ignore[assignment]
                train_start = time.perf_counter()
                progress("training")
            stopped = train(trainer, recorder, 60.0 * args.minutes, lambda: progress("training"))
            report["train_seconds"] = time.perf_counter() - train_start
            recorder.close()
            if args.keep_run is not None:
                # Saved before the evaluation, which builds a fresh env from configs/ as they are now:
                # a failure there (a config edited during a long run) must not lose the trained policy.
                built.save()  # the trained policy, for unilab-play or a resume
            if stopped is not None:
                raise KeyboardInterrupt(stopped)
            if args.keep_run is not None:  # policy.onnx, as unilab-train leaves it after a finished run
                print(export_after_training(trainer.env, trainer.agent, cfg, built.run_dir))
            progress("trained evaluation")
            with stop_signals_interrupt():
                trained = episode_evaluation(
                    args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1
                )
                if clean:
                    trained["clean_eval"] = clean_evaluation(
                        args.task, env_overrides, trainer.agent, args.clean_eval_envs, cfg.device, args.seed + 1, True
                    )
        except KeyboardInterrupt as stop:
            report["interrupted"] = f"{stop.args[0] if stop.args else 'SIGINT or SIGTERM'} during {report['stage']}"
            progress(report["stage"])
            raise Interrupted(report["interrupted"]) from None
    for metrics in TASK_METRICS.values():
        by_age, first = age_keys(metrics.by_age)
        if by_age in untrained:
            # Both policies' errors over the same episode ages: the untrained policy's mean length.
            ages = max(1, round(untrained["episode_length"]))
            for result in (untrained, trained):
                result[first] = mean_over_first(result[by_age], ages)
                result["first_steps"] = ages
    report.update(trained=trained, stage="done", complete=True, num_envs=trainer.env.num_envs)
    progress("done")
    return report


def train(trainer, recorder: RecordingLogger, seconds: float, logged: Callable[[], None]) -> str | None:
    """Train for ``seconds`` (or the trainer's env-step budget), calling ``logged()`` after every
    new logging point; the first SIGINT or SIGTERM stops it after its iteration. Returns the name
    of the signal that stopped it, or ``None``."""
    deadline = time.perf_counter() + seconds
    points = [0]

    def should_stop() -> bool:
        if len(recorder.points) > points[0]:
            points[0] = len(recorder.points)
            logged()
        return stop[0] or time.perf_counter() > deadline

    with stop_on_signals() as stop:
        trainer.train(should_stop)
        return "a stop signal" if stop[0] else None


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    baseline = {"episode/length": "episode_length"}
    for metrics in TASK_METRICS.values():
        baseline.update(metrics.errors)
    keys = [
        k for k in (*baseline, "train/reward_mean", "terrain/mean_level") if any(k in row for row in report["curve"])
    ]
    by_age = next((m.by_age for m in TASK_METRICS.values() if age_keys(m.by_age)[0] in report["trained"]), None)
    clean = "clean_eval" in report["trained"]
    panels = len(keys) + (by_age is not None) + clean
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4), squeeze=False)
    if clean:
        ax = axes[0][-1]
        for name, style in (("untrained", "--"), ("trained", "-")):
            result = report[name]["clean_eval"]
            errors = result["anchored_body_pos_error_every_age_m"]
            within = result["within_thresholds_by_age"][str(CLEAN_AGES[1])]
            label = f"{name} ({within:.0%} within thresholds at {CLEAN_AGES[1]})"
            ax.plot(range(1, len(errors) + 1), errors, style, label=label)
        ax.set_xlabel("steps since the start (clean evaluation)")
        ax.set_title("anchored body position error (m)")
        ax.legend(fontsize=7)
    if by_age is not None:
        ax = axes[0][len(keys)]
        for name, style in (("untrained", "--"), ("trained", "-")):
            errors = report[name][age_keys(by_age)[0]]
            ages = [i + 1 for i, e in enumerate(errors) if e is not None]
            ax.plot(ages, [e for e in errors if e is not None], style, label=f"{name} (eval)")
        ax.set_xlabel("steps since the episode's start")
        ax.set_title(f"{by_age} by episode age (training task)")
        ax.legend(fontsize=7)
    for ax, key in zip(axes[0][: len(keys)], keys, strict=True):
        rows = [row for row in report["curve"] if key in row]
        ax.plot([r["env_steps"] for r in rows], [r[key] for r in rows], label="training episodes")
        if key in baseline and baseline[key] in report["untrained"]:
            ax.axhline(report["untrained"][baseline[key]], color="gray", ls="--", label="untrained (eval)")
            if report["trained"].get(baseline[key]) is not None:  # null: not measured (the report's notes say why)
                ax.axhline(report["trained"][baseline[key]], color="green", ls=":", label="trained (eval)")
        ax.set_xlabel("env steps")
        ax.set_title(key)
        ax.legend(fontsize=7)
    minutes = report["train_seconds"] / 60
    fig.suptitle(f"{report['task']} / {report['algo']}: {report['env_steps']:,} env steps in {minutes:.0f} min")
    fig.tight_layout()
    write_atomic(path, lambda file: fig.savefig(file, format="png", dpi=110))
    plt.close(fig)


def fail(message: str) -> SystemExit:
    """The one line the script ends with on bad input (status 2)."""
    print(f"learning_curve: error: {message}", file=sys.stderr)
    return SystemExit(2)


@contextlib.contextmanager
def writing(option: str) -> Iterator[None]:
    """A failed write of ``option``'s file (a full disk, a folder gone read-only) as :func:`fail`'s
    one line; a kept run folder (``--keep-run``) keeps its checkpoint whatever happens here."""
    try:
        yield
    except (OSError, OutputPathError) as error:
        raise fail(f"{option}: {write_error(error)}") from None


def check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, outputs the script must not write (see the module docstring)."""
    outputs = [("--out", args.out, "report.json")] + ([("--plot", args.plot, "curve.png")] if args.plot else [])
    inputs = [args.out] if args.replot else []
    for option, path, example in outputs[1:] if args.replot else outputs:
        try:
            check_output(path, option, force=args.force, inputs=inputs, example=example)
        except OutputPathError as error:
            raise fail(str(error)) from None
        if args.keep_run is not None and path.resolve().is_relative_to(args.keep_run.resolve()):
            raise fail(f"{option}: {path} is inside --keep-run {args.keep_run}; a run folder holds the run's own files")
    if args.plot is not None and args.plot.resolve() == args.out.resolve():
        raise fail(f"--plot: {args.plot} is also --out; give the plot its own file")
    keep = args.keep_run
    if keep is not None and keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
        what = "a run folder" if holds_run(keep) else "a folder that is not empty" if keep.is_dir() else "a file"
        raise fail(f"--keep-run: {keep} is {what}; give a new or empty folder (a run folder is never reused)")


def read_report(path: Path) -> dict:
    """The JSON report at ``path`` (for ``--replot``), or one line saying why not."""
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise fail(f"--out: {path} not found; --replot redraws an existing report") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise fail(f"--out: {path} is not a readable JSON report ({error})") from None
    keys = ("curve", "untrained", "trained", "task", "algo", "env_steps", "train_seconds")
    missing = [key for key in keys if not isinstance(report, dict) or key not in report]
    if missing:
        raise fail(f"--out: {path} is not a learning-curve report (no {', '.join(missing)})")
    if report.get("complete") is False:  # reports written before partial ones existed have no key
        raise fail(
            f"--out: {path} is a partial report (stopped during {report.get('stage')}: {report.get('interrupted')}); "
            "its 'curve' holds the logging points so far, but --replot needs a finished run"
        )
    return report


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="g1_tracking")
    parser.add_argument(
        "--algo", default="flashsac", choices=["sac", "flashsac", "sac_velocity", "flashsac_velocity"], help="preset"
    )
    parser.add_argument("--motion", default=str(SHARED_CLIP), help="motion file of g1_tracking, or 'none'")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--eval-envs", type=int, default=16)
    parser.add_argument(
        "--clean-eval-envs", type=int, default=64, help="rows of the clean tracking evaluation (0: none)"
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget")
    parser.add_argument(
        "--env-steps", type=int, default=None, help="training env-step budget (whichever first; default: none)"
    )
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-override", action="append", default=[], help="a task override (repeatable)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON report")
    parser.add_argument("--plot", type=Path, default=None, help="also draw the report to this PNG")
    parser.add_argument("--force", action="store_true", help="replace existing --out / --plot files")
    parser.add_argument(
        "--keep-run",
        type=Path,
        default=None,
        help="keep the run folder here (config and the trained checkpoint: unilab-play, resume); a new path",
    )
    parser.add_argument("overrides", nargs="*", help="extra unilab-train overrides (after --)")
    parser.add_argument("--replot", action="store_true", help="only redraw --plot from the existing --out report")
    args = parser.parse_args(argv)
    args.argv = argv
    if args.replot:
        if args.plot is None:
            raise fail("--replot needs --plot")
        check_outputs(args)
        report = read_report(args.out)
        with writing("--plot"):
            plot(report, args.plot)
        return report
    for option in ("num_envs", "eval_envs", "log_every", "env_steps"):
        if getattr(args, option) is not None and getattr(args, option) < 1:
            raise fail(f"--{option.replace('_', '-')} must be >= 1, got {getattr(args, option)}")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        raise fail(f"--minutes must be a finite number > 0, got {args.minutes}")
    check_outputs(args)

    def write(report: dict) -> None:  # committed reports name no path of this machine
        with writing("--out"):
            write_json_atomic(args.out, portable_paths(report))

    try:
        report = run(args, write)
    except Interrupted as stop:
        print(f"learning_curve: INTERRUPTED ({stop}); the report so far is in {args.out}", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT_CODE) from None
    report = portable_paths(report)
    if args.plot is not None:
        with writing("--plot"):
            plot(report, args.plot)
    u, t = report["untrained"], report["trained"]
    parts = [f"episode length {u['episode_length']:.1f} -> {t['episode_length']:.1f} steps"]
    for metrics in TASK_METRICS.values():
        first = age_keys(metrics.by_age)[1]
        for key in (*metrics.errors.values(), first):
            if key in t:
                at = f" (first {t['first_steps']} steps)" if key == first else ""
                parts.append(f"{key}{at} {u[key]:.3f} -> {t[key]:.3f}")
    print(f"learning_curve: {args.task}/{args.algo}, {report['env_steps']:,} env steps: {', '.join(parts)}; {args.out}")
    return report


if __name__ == "__main__":
    torch.set_num_threads(max(1, torch.get_num_threads()))
    main()
