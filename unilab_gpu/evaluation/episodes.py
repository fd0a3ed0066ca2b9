"""A fixed policy's episodes, scored as the learning curves report them: episode length, the task's
mean errors (from its command term, :data:`TASK_METRICS`), those errors by episode age, and how
often the actions sit at their bound (``scripts/learning_curve.py``'s untrained and trained rows)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.evaluation.rollout import agent_policy, evaluate


class TaskMetrics(NamedTuple):
    """What the evaluation reports for a task whose env has a given command term."""

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


def task_metrics(env) -> tuple[str, TaskMetrics] | None:
    """The env's first command term listed in :data:`TASK_METRICS`, with its metrics."""
    return next(((name, m) for name, m in TASK_METRICS.items() if name in env.command_manager.terms), None)


def age_keys(by_age: str) -> tuple[str, str]:
    """Report keys of the by-age list and of its mean over the first steps:
    ``body_pos_error_m`` -> ``body_pos_error_by_episode_step_m``, ``body_pos_error_first_steps_m``."""
    stem, unit = by_age.rsplit("_", 1)
    return f"{stem}_by_episode_step_{unit}", f"{stem}_first_steps_{unit}"


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


def episode_evaluation(task: str, env_overrides: list[str], agent, num_envs: int, device: str, seed: int) -> dict:
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
