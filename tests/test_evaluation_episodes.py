"""evaluation/episodes.py: errors bucketed by episode age against a hand count, the task table."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from unilab_gpu.evaluation.episodes import ErrorsSinceStart, age_keys, mean_over_first, task_metrics


def test_errors_are_averaged_by_steps_since_the_episodes_start() -> None:
    # 3 rows: the motion command's per-row body-position errors of each step.
    command = SimpleNamespace(row_errors=lambda: {"body_pos_error": command.error})
    env = SimpleNamespace(command_manager=SimpleNamespace(get=lambda name: command))
    errors = ErrorsSinceStart(env, horizon=3)
    for ages, xs in (([1, 1, 0], [0.1, 0.2, 9.0]), ([2, 2, 1], [0.3, 0.5, 0.4]), ([3, 9, 2], [0.6, 9.0, 0.2])):
        env.episode_length, command.error = torch.tensor(ages), torch.tensor(xs)
        errors(0)
    # age 0 (reset within the step) and ages past the horizon are left out
    by_age = errors.by_age()
    expected = [(0.1 + 0.2 + 0.4) / 3, (0.3 + 0.5 + 0.2) / 3, 0.6]
    assert all(abs(a - b) < 1e-6 for a, b in zip(by_age, expected, strict=True)), by_age
    assert abs(mean_over_first([0.2, None, 0.4, 1.0], 3) - 0.3) < 1e-12
    assert mean_over_first([None, None], 2) is None


def test_velocity_task_reports_its_velocity_errors_by_episode_age() -> None:
    # The velocity command's per-row planar error; 2 rows at ages 1 and 2, then 2 and 0 (reset).
    command = SimpleNamespace(row_errors=lambda: {"lin_vel_error": command.error})
    env = SimpleNamespace(command_manager=SimpleNamespace(get=lambda name: command, terms={"twist": command}))
    name, metrics = task_metrics(env)
    assert name == "twist" and set(metrics.errors) == {"velocity/lin_vel_error_mps", "velocity/yaw_rate_error_radps"}
    assert age_keys(metrics.by_age) == ("lin_vel_error_by_episode_step_mps", "lin_vel_error_first_steps_mps")
    assert age_keys("body_pos_error_m") == ("body_pos_error_by_episode_step_m", "body_pos_error_first_steps_m")
    errors = ErrorsSinceStart(env, name, horizon=2)
    for ages, values in (([1, 2], [0.5, 0.25]), ([2, 0], [0.75, 9.0])):
        env.episode_length, command.error = torch.tensor(ages), torch.tensor(values)
        errors(0)
    assert errors.by_age() == [0.5, (0.25 + 0.75) / 2]
    assert task_metrics(SimpleNamespace(command_manager=SimpleNamespace(terms={}))) is None
