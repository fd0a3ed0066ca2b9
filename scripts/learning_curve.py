"""Learning curve of a task for a fixed budget, against the untrained policy measured the same way.

Trains with the real trainer (``unilab-train``'s run building: same configs, presets and
overrides), records the training episodes' statistics at every logging point, and evaluates the
deterministic policy before and after training on a separate evaluation env (same task and
overrides, its own seed, ``randomize_initial_episode_length=false``, one full episode length of
steps). Writes JSON and, with ``--plot``, a PNG::

    python scripts/learning_curve.py --algo flashsac --minutes 30 \\
        --out docs/benchmarks/learning/g1_tracking_flashsac.json \\
        --plot docs/benchmarks/learning/g1_tracking_flashsac.png

The JSON's top level holds ``untrained`` and ``trained`` (each with ``episode_length``, mean steps,
and for tracking tasks ``body_pos_error_m``, the mean over tracked bodies and steps, plus every
other ``stats.summary()`` key), ``curve`` (one row per logging point), the exact command and
the machine. For ``g1_tracking`` the motion is ``--motion`` (default: the shared holosoma clip
``../shared/motions/g1/largebox_carry.npz``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import torch

from unilab_gpu.cli.train import build_run, compose_train_config, resolve_auto
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.profiling.machine_info import machine_info
from unilab_gpu.rl.evaluate import agent_policy, evaluate
from unilab_gpu.rl.logger import RecordingLogger

ROOT = Path(__file__).resolve().parents[1]
SHARED_CLIP = ROOT.parent / "shared" / "motions" / "g1" / "largebox_carry.npz"
CURVE_KEYS = ("episode/length", "episode/return", "tracking/body_pos_error_m", "train/reward_mean")
"""Scalars of each logging point kept in the curve (when the task has them)."""


def curve_row(env_steps: int, seconds: float, scalars: dict[str, float]) -> dict[str, float]:
    """One logging point of the curve: env steps, seconds into training, the :data:`CURVE_KEYS`."""
    return {"env_steps": env_steps, "seconds": seconds, **{k: scalars[k] for k in CURVE_KEYS if k in scalars}}


ERROR_HORIZON = 100
"""Steps since an episode's start over which the tracking error is reported step by step."""


class ErrorsSinceStart:
    """Mean tracked-body position error (m, world frame) by steps since each episode's start.

    Longer episodes have more time to drift from the reference, so a policy that survives three
    times longer can show a larger mean error while tracking better at every age; comparing the
    errors at the same episode ages separates the two.
    """

    def __init__(self, env, horizon: int = ERROR_HORIZON) -> None:
        self.env, self.horizon = env, horizon
        self.command = env.command_manager.get("motion")
        self.sums = torch.zeros(horizon, dtype=torch.float64)
        self.counts = torch.zeros(horizon, dtype=torch.float64)

    def __call__(self, step: int) -> None:
        cmd, age = self.command, self.env.episode_length.cpu()
        error = torch.linalg.vector_norm(cmd.body_pos_w - cmd.robot_body_pos_w, dim=-1).mean(dim=-1).cpu()
        keep = (age >= 1) & (age <= self.horizon)  # age 0: reset within this step, a new episode
        self.sums.index_add_(0, age[keep] - 1, error[keep].double())
        self.counts.index_add_(0, age[keep] - 1, torch.ones(int(keep.sum()), dtype=torch.float64))

    def by_age(self) -> list[float | None]:
        """Mean error after 1, 2, ... ``horizon`` steps of an episode (None: no episode that old)."""
        return [float(s / c) if c > 0 else None for s, c in zip(self.sums, self.counts, strict=True)]


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
    errors = ErrorsSinceStart(env) if "motion" in env.command_manager.terms else None
    stats = evaluate(env, agent_policy(agent), env.max_episode_length, on_step=errors)
    out = {"episode_length": stats["episode/length"], "episodes": stats["episode/count"]}
    if "tracking/body_pos_error_m" in stats:
        out["body_pos_error_m"] = stats["tracking/body_pos_error_m"]
    if errors is not None:
        out["body_pos_error_by_episode_step_m"] = errors.by_age()
    out["summary"] = stats
    return out


def run(args: argparse.Namespace) -> dict:
    env_overrides = list(args.env_override)
    if args.task.startswith("g1_tracking") and args.motion != "none":
        motion = Path(args.motion).resolve()
        if not motion.is_file():
            raise SystemExit(f"--motion: {motion} not found (pass --motion none for the built-in synthetic clip)")
        env_overrides.append(f"commands.motion.params.motion_files=[{motion}]")
    with tempfile.TemporaryDirectory() as run_dir:
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
            f"run_dir={run_dir}/run",
            f"env.overrides=[{','.join(json.dumps(o) for o in env_overrides)}]",
            *args.overrides,
        ]
        cfg = resolve_auto(compose_train_config(overrides))
        started = time.perf_counter()
        built = build_run(cfg)
        trainer = built.trainer
        untrained = evaluation(args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1)
        recorder = RecordingLogger(trainer.logger)
        trainer.logger = recorder  # type: ignore[assignment]
        train_start = time.perf_counter()
        deadline = time.perf_counter() + 60.0 * args.minutes
        trainer.train(lambda: time.perf_counter() > deadline)
        train_seconds = time.perf_counter() - train_start
        recorder.close()
        trained = evaluation(args.task, env_overrides, trainer.agent, args.eval_envs, cfg.device, args.seed + 1)
    if "body_pos_error_by_episode_step_m" in untrained:
        # Both policies' errors over the same episode ages: the untrained policy's mean length.
        ages = max(1, round(untrained["episode_length"]))
        for result in (untrained, trained):
            result["body_pos_error_first_steps_m"] = mean_over_first(result["body_pos_error_by_episode_step_m"], ages)
            result["first_steps"] = ages
    return {
        "benchmark": "learning_curve",
        "command": "python scripts/learning_curve.py " + shlex.join(args.argv),
        "task": args.task,
        "algo": args.algo,
        # Recorded relative to the repository, so the report names no path of this machine.
        "env_overrides": [o.replace(str(ROOT.parent), "..") for o in env_overrides],
        "num_envs": trainer.env.num_envs,
        "env_steps": trainer.env_steps,
        "updates": trainer.agent.num_updates if hasattr(trainer, "agent") else None,
        "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - started,
        "untrained": untrained,
        "trained": trained,
        "curve": [curve_row(env_steps, at - train_start, scalars) for env_steps, at, scalars in recorder.points],
        "machine": machine_info(cfg.device),
    }


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in ("episode/length", "tracking/body_pos_error_m", "train/reward_mean") if report["curve"]]
    keys = [k for k in keys if any(k in row for row in report["curve"])]
    by_age = "body_pos_error_by_episode_step_m"
    panels = len(keys) + (by_age in report["trained"])
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.4), squeeze=False)
    if by_age in report["trained"]:
        ax = axes[0][-1]
        for name, style in (("untrained", "--"), ("trained", "-")):
            errors = report[name][by_age]
            ages = [i + 1 for i, e in enumerate(errors) if e is not None]
            ax.plot(ages, [e for e in errors if e is not None], style, label=f"{name} (eval)")
        ax.set_xlabel("steps since the episode's start")
        ax.set_title("body position error (m) by episode age")
        ax.legend(fontsize=7)
    baseline = {"episode/length": "episode_length", "tracking/body_pos_error_m": "body_pos_error_m"}
    for ax, key in zip(axes[0][: len(keys)], keys, strict=True):
        rows = [row for row in report["curve"] if key in row]
        ax.plot([r["env_steps"] for r in rows], [r[key] for r in rows], label="training episodes")
        if key in baseline and baseline[key] in report["untrained"]:
            ax.axhline(report["untrained"][baseline[key]], color="gray", ls="--", label="untrained (eval)")
            ax.axhline(report["trained"][baseline[key]], color="green", ls=":", label="trained (eval)")
        ax.set_xlabel("env steps")
        ax.set_title(key)
        ax.legend(fontsize=7)
    minutes = report["train_seconds"] / 60
    fig.suptitle(f"{report['task']} / {report['algo']}: {report['env_steps']:,} env steps in {minutes:.0f} min")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="g1_tracking")
    parser.add_argument("--algo", default="flashsac", choices=["sac", "flashsac"])
    parser.add_argument("--motion", default=str(SHARED_CLIP), help="motion file of g1_tracking, or 'none'")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--eval-envs", type=int, default=16)
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget")
    parser.add_argument("--env-steps", type=int, default=10**9, help="training env-step budget (whichever first)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--env-override", action="append", default=[], help="a task override (repeatable)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("overrides", nargs="*", help="extra unilab-train overrides (after --)")
    args = parser.parse_args(argv)
    args.argv = argv
    for option in ("num_envs", "eval_envs", "log_every", "env_steps"):
        if getattr(args, option) < 1:
            raise SystemExit(f"--{option.replace('_', '-')} must be >= 1")
    report = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, default=str) + "\n")
    if args.plot is not None:
        plot(report, args.plot)
    u, t = report["untrained"], report["trained"]
    print(
        f"learning_curve: {args.task}/{args.algo}, {report['env_steps']:,} env steps: episode length "
        f"{u['episode_length']:.1f} -> {t['episode_length']:.1f} steps"
        + (
            f", body position error {u['body_pos_error_m']:.3f} -> {t['body_pos_error_m']:.3f} m"
            if "body_pos_error_m" in t
            else ""
        )
        + (
            f" (first {t['first_steps']} steps of episodes: {u['body_pos_error_first_steps_m']:.3f} -> "
            f"{t['body_pos_error_first_steps_m']:.3f} m)"
            if "first_steps" in t
            else ""
        )
        + f"; {args.out}"
    )
    return report


if __name__ == "__main__":
    torch.set_num_threads(max(1, torch.get_num_threads()))
    main()
