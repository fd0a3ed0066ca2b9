"""The clean tracking evaluation: a policy followed from fixed, seeded starts spread over the clip,
without noise, pushes or failure terminations, its errors reported at fixed episode ages
(``scripts/learning_curve.py`` on a tracking task)."""

from __future__ import annotations

import torch

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.evaluation.rollout import agent_policy
from unilab_gpu.evaluation.tracking import EVAL_OVERRIDES
from unilab_gpu.managers.term import Term

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
