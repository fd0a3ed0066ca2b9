"""Learning curve of a task for a fixed budget, against the untrained policy measured the same way.

Trains with the real trainer (``unilab-train``'s run building: same configs, presets and
overrides), records the training episodes' statistics at every logging point, and evaluates the
deterministic policy before and after training on a separate evaluation env (same task and
overrides, its own seed, ``randomize_initial_episode_length=false``, one full episode length of
steps). Writes JSON and, with ``--plot``, a PNG::

    python scripts/learning_curve.py --algo flashsac --minutes 30 \\
        --out docs/benchmarks/learning/g1_tracking_flashsac.json \\
        --plot docs/benchmarks/learning/g1_tracking_flashsac.png

    python scripts/learning_curve.py --task g1_velocity --algo sac_velocity --minutes 30 \\
        --out docs/benchmarks/learning/g1_velocity_sac.json

The JSON's top level holds ``untrained`` and ``trained`` (each with ``episode_length``, mean steps,
the task's errors from :data:`TASK_METRICS`, that error by episode age, and every
``stats.summary()`` key under ``summary``), ``curve`` (one row per logging point), the exact
command and the machine. The task's metrics follow from its command term: ``motion``
(``g1_tracking``: ``body_pos_error_m``, the mean over tracked bodies and steps) or ``twist``
(``g1_velocity``: ``lin_vel_error_mps`` and ``yaw_rate_error_radps``, means over rows and steps).
For ``g1_tracking`` the motion is ``--motion`` (default: the shared holosoma clip
``../shared/motions/g1/largebox_carry.npz``). ``--keep-run DIR`` keeps the run folder (config and
the trained checkpoint, the policy evaluated) for ``unilab-play DIR`` or a resume; without it the
run trains in a temporary folder.

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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import torch

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.evaluation.tracking import EVAL_OVERRIDES
from unilab_gpu.managers.term import Term
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.evaluation import agent_policy, evaluate
from unilab_gpu.rl.logger import RecordingLogger
from unilab_gpu.training.config import compose_train_config, resolve_auto
from unilab_gpu.training.run import build_run
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_on_signals, stop_signals_interrupt
from unilab_gpu.utils.files import (
    OutputPathError,
    check_output,
    holds_run,
    portable_paths,
    write_atomic,
    write_json_atomic,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED_CLIP = ROOT.parent / "shared" / "motions" / "g1" / "largebox_carry.npz"


class TaskMetrics(NamedTuple):
    """What the evaluation reports for a task whose env has a given command term (a named tuple,
    not a dataclass: the tests load this script without registering it as a module)."""

    errors: dict[str, str]
    """``stats.summary()`` key -> report key of the task's mean errors."""
    by_age: str
    """Report key of the error also bucketed by episode age (``<stem>_<unit>``)."""
    row_error: str
    """Key of that error in the command term's ``row_errors()`` (per row now, ``(num_envs,)``):
    the same computation as the episode statistic."""


TASK_METRICS = {
    "motion": TaskMetrics({"tracking/body_pos_error_m": "body_pos_error_m"}, "body_pos_error_m", "body_pos_error"),
    "twist": TaskMetrics(
        {"velocity/lin_vel_error_mps": "lin_vel_error_mps", "velocity/yaw_rate_error_radps": "yaw_rate_error_radps"},
        "lin_vel_error_mps",
        "lin_vel_error",
    ),
}
"""Command term name -> the metrics of the tasks that have it (``g1_tracking``, ``g1_velocity``)."""

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


def task_metrics(env) -> tuple[str, TaskMetrics] | None:
    """The env's first command term listed in :data:`TASK_METRICS`, with its metrics."""
    return next(((name, m) for name, m in TASK_METRICS.items() if name in env.command_manager.terms), None)


def age_keys(by_age: str) -> tuple[str, str]:
    """Report keys of the by-age list and of its mean over the first steps:
    ``body_pos_error_m`` -> ``body_pos_error_by_episode_step_m``, ``body_pos_error_first_steps_m``."""
    stem, unit = by_age.rsplit("_", 1)
    return f"{stem}_by_episode_step_{unit}", f"{stem}_first_steps_{unit}"


def curve_row(env_steps: int, seconds: float, scalars: dict[str, float]) -> dict[str, float]:
    """One logging point of the curve: env steps, seconds into training, the :data:`CURVE_KEYS`."""
    return {"env_steps": env_steps, "seconds": seconds, **{k: scalars[k] for k in CURVE_KEYS if k in scalars}}


ERROR_HORIZON = 100
"""Steps since an episode's start over which the tracking error is reported step by step."""


class ErrorsSinceStart:
    """Mean error of the task (:attr:`TaskMetrics.row_error` of command term ``command``; the
    tracked-body position error by default) by steps since each episode's start.

    Longer episodes have more time to drift from the reference, so a policy that survives three
    times longer can show a larger mean error while tracking better at every age; comparing the
    errors at the same episode ages separates the two (on the velocity task: a falling robot's
    velocity error grows as it topples, whatever the command).
    """

    def __init__(self, env, command: str = "motion", horizon: int = ERROR_HORIZON) -> None:
        self.env, self.horizon = env, horizon
        self.command = env.command_manager.get(command)
        self.row_error = TASK_METRICS[command].row_error
        self.sums = torch.zeros(horizon, dtype=torch.float64)
        self.counts = torch.zeros(horizon, dtype=torch.float64)

    def __call__(self, step: int) -> None:
        age, error = self.env.episode_length.cpu(), self.command.row_errors()[self.row_error].cpu()
        keep = (age >= 1) & (age <= self.horizon)  # age 0: reset within this step, a new episode
        self.sums.index_add_(0, age[keep] - 1, error[keep].double())
        self.counts.index_add_(0, age[keep] - 1, torch.ones(int(keep.sum()), dtype=torch.float64))

    def by_age(self) -> list[float | None]:
        """Mean error after 1, 2, ... ``horizon`` steps of an episode (None: no episode that old)."""
        return [float(s / c) if c > 0 else None for s, c in zip(self.sums, self.counts, strict=True)]


class ActionSaturation:
    """How often the deterministic policy's actions sit at their bound: the fraction of action
    entries with ``|a| > threshold`` over an evaluation (tanh-squashed policies can learn
    bang-bang actions, which under ``bounds: joint_limits`` put joints at their soft limits)."""

    def __init__(self, env, threshold: float = 0.99) -> None:
        self.env, self.threshold = env, threshold
        self.at_bound = torch.zeros((), dtype=torch.float64)
        self.entries = 0

    def __call__(self, step: int) -> None:
        action = self.env.action_manager.last_action
        self.at_bound += (action.abs() > self.threshold).sum().cpu().double()
        self.entries += action.numel()

    def fraction(self) -> float:
        return float(self.at_bound / max(self.entries, 1))


def mean_over_first(by_age: list[float | None], steps: int) -> float | None:
    """Mean of the per-age errors over ages 1..steps (ages no episode reached are skipped)."""
    values = [v for v in by_age[:steps] if v is not None]
    return sum(values) / len(values) if values else None


def evaluation(task: str, env_overrides: list[str], agent, num_envs: int, device: str, seed: int) -> dict:
    """The deterministic policy on a fresh env: one full episode length of steps per env."""
    env = make_env(
        task,
        num_envs,
        device,
        [*env_overrides, "randomize_initial_episode_length=false"],
        seed=seed,
        compile=False,
        capture=False,
        announce=False,
    )
    found = task_metrics(env)
    errors = None if found is None else ErrorsSinceStart(env, found[0])
    saturation = ActionSaturation(env)

    def on_step(step: int) -> None:
        saturation(step)
        if errors is not None:
            errors(step)

    stats = evaluate(env, agent_policy(agent), env.max_episode_length, on_step=on_step)
    out = {
        "episode_length": stats["episode/length"],
        "episodes": stats["episode/count"],
        "action_at_bound_fraction": saturation.fraction(),
    }
    if found is not None:
        metrics = found[1]
        out.update({report: stats[key] for key, report in metrics.errors.items()})
        out[age_keys(metrics.by_age)[0]] = errors.by_age()
    out["summary"] = stats
    return out


CLEAN_HORIZON = 50
"""Steps every row of the clean evaluation is followed for (failure terminations off)."""
CLEAN_AGES = (10, 30, 50)
"""Episode ages at which the clean evaluation reports its means."""


def clean_start_frames(clip_length: int, num_rows: int, seed: int, horizon: int = CLEAN_HORIZON) -> torch.Tensor:
    """Start frames spread uniformly over a clip, ``(num_rows,)`` int64: one seeded draw in each of
    ``num_rows`` equal strata of the frames from which ``horizon`` more steps stay inside the clip."""
    span = clip_length - 1 - horizon
    if span < 1:
        raise SystemExit(f"clean evaluation: the clip has {clip_length} frames, fewer than {horizon + 2}")
    u = torch.rand(num_rows, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return ((torch.arange(num_rows, dtype=torch.float64) + u) * span / num_rows).long()


def within_thresholds(first_failure: torch.Tensor, age: int) -> float:
    """Share of rows that have not crossed a failure threshold by ``age`` (``first_failure``:
    ``(rows,)`` the first age at which a row crossed one, 0 where none did)."""
    return float(((first_failure == 0) | (first_failure > age)).double().mean())


def clean_evaluation(
    task: str, env_overrides: list[str], agent, num_envs: int, device: str, seed: int, trained: bool
) -> dict:
    """The clean tracking evaluation of the agent's deterministic policy (``trained``) or of the
    zero action (the untrained policy: every joint target at the action's zero).

    ``num_envs`` rows start at fixed, seeded frames spread over the first clip
    (:func:`clean_start_frames`, the same for every policy given ``seed``), without observation
    noise, pushes or reset noise (:data:`EVAL_OVERRIDES`), and are followed for
    :data:`CLEAN_HORIZON` steps with the task's failure terminations off; those terms are evaluated
    on the side, and the first step at which a row crosses any of them is recorded.

    Reports, at the ages :data:`CLEAN_AGES` (means over rows, and tracked bodies or joints):
    ``anchored_body_pos_error_by_age_m`` (against the targets re-anchored to the robot's anchor,
    as the rewards score them), ``world_body_pos_error_by_age_m``, ``joint_pos_error_by_age_rad``,
    ``within_thresholds_by_age`` (share of rows not yet past a failure threshold), plus the
    anchored error at every age and ``action_std`` (the agent's mean pre-tanh standard deviation
    on the visited observations).
    """
    failures = {
        name: term
        for name, term in load_task_cfg(task, env_overrides).terminations.items()
        if term is not None and not term.time_out
    }
    overrides = [*env_overrides, *EVAL_OVERRIDES, *(f"terminations.{name}=null" for name in failures)]
    env = make_env(task, num_envs, device, overrides, seed=seed, compile=False, capture=False, announce=False)
    command = env.command_manager.get("motion")
    clip_frames = int(command.library.clip_length[0])
    frames = clean_start_frames(clip_frames, num_envs, seed)
    command.fix_starts(torch.zeros_like(frames), frames)
    obs = env.reset()
    zero = torch.zeros(num_envs, env.action_dim, device=env.device)
    policy = agent_policy(agent) if trained else (lambda obs: zero)
    monitors = [Term(name, cfg, env, f"terminations.{name}") for name, cfg in failures.items()]
    first_failure = torch.zeros(num_envs, dtype=torch.int64, device=env.device)
    anchored, world, joints, stds = [], [], [], []
    for age in range(1, CLEAN_HORIZON + 1):
        stds.append(agent.action_std(obs["policy"]).mean())
        obs = env.step(policy(obs)).obs
        if not bool((env.episode_length == age).all()):
            raise RuntimeError(f"clean evaluation: a row's episode ended at age {age} (a diverged world?)")
        errors = command.row_errors()
        anchored.append(errors["body_pos_error_anchored"].mean())
        world.append(errors["body_pos_error"].mean())
        joints.append(errors["joint_pos_error"].mean())
        crossed = torch.stack([term(env) for term in monitors]).any(dim=0)
        first_failure = torch.where(crossed & (first_failure == 0), age, first_failure)
    anchored_all = torch.stack(anchored).tolist()
    at = {str(age): age - 1 for age in CLEAN_AGES}
    world_all, joints_all = torch.stack(world).tolist(), torch.stack(joints).tolist()
    return {
        "rows": num_envs,
        "clip_frames": clip_frames,
        "start_frames": frames.tolist(),
        "failure_terms": list(failures),
        "anchored_body_pos_error_by_age_m": {k: anchored_all[i] for k, i in at.items()},
        "world_body_pos_error_by_age_m": {k: world_all[i] for k, i in at.items()},
        "joint_pos_error_by_age_rad": {k: joints_all[i] for k, i in at.items()},
        "within_thresholds_by_age": {k: within_thresholds(first_failure.cpu(), int(k)) for k in at},
        "anchored_body_pos_error_every_age_m": anchored_all,
        "action_std": float(torch.stack(stds).mean()),
    }


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
            f"total_env_steps={args.env_steps}",
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
                    scope.callback(built.lock.release)
                trainer = built.trainer
                progress("untrained evaluation")
                untrained = evaluation(
                    args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1
                )
                clean = tracking and args.clean_eval_envs > 0
                if clean:
                    untrained["clean_eval"] = clean_evaluation(
                        args.task, env_overrides, trainer.agent, args.clean_eval_envs, cfg.device, args.seed + 1, False
                    )
                report["untrained"] = untrained
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
            progress("trained evaluation")
            with stop_signals_interrupt():
                trained = evaluation(args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1)
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
    parser.add_argument("--env-steps", type=int, default=10**9, help="training env-step budget (whichever first)")
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
        plot(report, args.plot)
        return report
    for option in ("num_envs", "eval_envs", "log_every", "env_steps"):
        if getattr(args, option) < 1:
            raise fail(f"--{option.replace('_', '-')} must be >= 1, got {getattr(args, option)}")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        raise fail(f"--minutes must be a finite number > 0, got {args.minutes}")
    check_outputs(args)

    def write(report: dict) -> None:  # committed reports name no path of this machine
        write_json_atomic(args.out, portable_paths(report))

    try:
        report = run(args, write)
    except Interrupted as stop:
        print(f"learning_curve: INTERRUPTED ({stop}); the report so far is in {args.out}", file=sys.stderr)
        raise SystemExit(INTERRUPTED_EXIT_CODE) from None
    report = portable_paths(report)
    if args.plot is not None:
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
