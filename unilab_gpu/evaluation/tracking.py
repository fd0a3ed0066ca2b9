"""Full-clip evaluation of a motion-tracking policy (``unilab-eval``, periodic evaluation in training).

Two sets of ``trials`` trials each run side by side in one env of ``2 * trials`` rows: ``start``
trials begin at frame 0 of a clip, ``spread`` trials at frames spread evenly over it (trial ``k``
of the ``n`` a clip gets starts at frame ``floor(k (L - 1) / n)``, ``L`` the clip's frames); clips
take trials in turn. The env is the policy's training task without observation noise, pushes or
reset noise and kicks (:data:`EVAL_OVERRIDES`), and every episode lasts until its clip's end
(:data:`FULL_CLIP_OVERRIDES`). The task's failure terminations decide a trial: it **succeeds**
when its first episode reaches the clip's last frame without one. The errors
(:func:`~unilab_gpu.evaluation.metrics.tracking_errors`) are means over every step a trial took
before its episode ended (the step that ended it is left out: the env has already reset that row)
and over trials, weighted by steps; ``joint_vel_rms_error_radps`` is the square root of the mean
squared error. A row goes on after its first episode, unscored, until the longest trial ends.

The rollout stays on the device: the per-row sums grow without a host read, and the report reads
them once at the end (an ONNX policy reads each observation on the host, by its nature).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from unilab_gpu.envs.make_env import load_task_cfg, make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.envs.mdp.actions import TORQUE_LIMIT_SHARE
from unilab_gpu.evaluation.metrics import METRICS, TrackedState, tracking_errors
from unilab_gpu.evaluation.policies import TrainedPolicy
from unilab_gpu.evaluation.rollout import Policy
from unilab_gpu.utils.progress import progress_bar

EVAL_OVERRIDES = (
    "+observations.policy.enable_noise=false",
    "events.push=null",
    "commands.motion.params.pose_range=null",
    "commands.motion.params.velocity_range=null",
    "commands.motion.params.joint_position_range=null",
    "randomize_initial_episode_length=false",
    "commands.motion.params.termination_curriculum=null",
)
"""Task overrides of a clean evaluation: no observation noise, no pushes, no reset noise or kicks,
the failure thresholds as written (no termination curriculum) (startup randomization, e.g. foot
friction, stays: it makes trials from one frame differ)."""

FULL_CLIP_OVERRIDES = (
    "commands.motion.params.at_clip_end=time_out",
    "terminations.time_out=null",
)
"""Every episode lasts to its clip's end, however long the clip (no episode time-out)."""

SETS = ("start", "spread")
"""The two trial sets: from frame 0 of each clip, from frames spread evenly over each clip."""

COMMAND = "motion"
"""The command term of tracking tasks."""


class NotATrackingPolicy(ValueError):
    """The policy's task has no motion command."""


def follows_motion(task: str, overrides: Sequence[str]) -> bool:
    """Whether the task config (with ``overrides``) has a motion command."""
    return load_task_cfg(task, list(overrides)).commands.get(COMMAND) is not None


def check_tracking_task(task: str, overrides: Sequence[str], what: str) -> None:
    """Refuse a policy whose task tracks no motion (``what`` names it for the message).

    Raises:
        NotATrackingPolicy: the task config (with ``overrides``) has no motion command.
    """
    if not follows_motion(task, overrides):
        raise NotATrackingPolicy(
            f"{what} is a '{task}' policy, which follows no motion (no '{COMMAND}' command); "
            "unilab-eval evaluates motion-tracking policies"
        )


def motion_files(task: str, overrides: Sequence[str]) -> list[str]:
    """The motion files the task config (with ``overrides``) names; empty for the synthetic clip."""
    params = load_task_cfg(task, list(overrides)).commands[COMMAND].params
    return [str(f) for f in params.get("motion_files") or []]


def start_frames(clip_lengths: Sequence[int], trials: int, spread: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Clip ``(trials,)`` and start frame ``(trials,)`` (int64) of each trial: clips in turn, every
    trial at frame 0, or (``spread``) clip ``c``'s ``n_c`` trials at ``floor(k (L_c - 1) / n_c)``,
    ``k = 0 .. n_c - 1``, so that each trial has at least one step before its clip's end."""
    if trials < len(clip_lengths):
        raise ValueError(f"{trials} trials cannot cover {len(clip_lengths)} clips; give at least one trial per clip")
    index = torch.arange(trials)
    clip = index % len(clip_lengths)
    if not spread:
        return clip, torch.zeros(trials, dtype=torch.int64)
    per_clip = torch.bincount(clip, minlength=len(clip_lengths))[clip]
    last = torch.as_tensor(clip_lengths, dtype=torch.int64)[clip] - 1
    return clip, (index // len(clip_lengths)) * last // per_clip


class TrackingEvaluation:
    """The trials of both :data:`SETS` on ``env`` (a tracking env of ``2 * trials`` rows built
    with :data:`EVAL_OVERRIDES` and :data:`FULL_CLIP_OVERRIDES`, :func:`make_eval_env`).

    :meth:`run` rolls a policy out and returns the report; it can run again (periodic
    evaluation during training): every run restarts every row at its trial's start.
    """

    def __init__(self, env: ManagerBasedRlEnv, trials: int, clip_names: Sequence[str] | None = None) -> None:
        if env.num_envs != 2 * trials:
            raise ValueError(f"the evaluation env needs 2 x {trials} rows, it has {env.num_envs}")
        self.env, self.trials = env, trials
        self.command = command = env.command_manager.get(COMMAND)
        library = command.library
        self.clip_lengths = library.clip_length.tolist()
        names = list(clip_names or [])
        self.clip_names = names if len(names) == library.num_clips else [f"clip{i}" for i in range(library.num_clips)]
        starts = [start_frames(self.clip_lengths, trials, spread) for spread in (False, True)]
        self.clip = torch.cat([clip for clip, _ in starts])
        self.frame = torch.cat([frame for _, frame in starts])
        command.fix_starts(self.clip, self.frame)
        # A trial from frame f ends on the step that scores the clip's last frame, step L - f.
        self.steps = int((torch.as_tensor(self.clip_lengths)[self.clip] - self.frame).max())
        tracked = list(command.body_names)
        end_effectors = env.cfg.robot.tracking.end_effectors
        missing = [name for name in end_effectors if name not in tracked]
        if missing:
            raise ValueError(f"end effectors {missing} are not tracked bodies of the '{COMMAND}' command")
        self.end_effectors = torch.tensor([tracked.index(name) for name in end_effectors], device=env.device)
        self.failure_terms = [
            name for name, term in env.cfg.terminations.items() if term is not None and not term.time_out
        ]
        n, device = env.num_envs, env.device
        self._sums = torch.zeros(len(METRICS), n, dtype=torch.float64, device=device)
        self._scored = torch.zeros(n, dtype=torch.int64, device=device)
        self._running = torch.ones(n, dtype=torch.bool, device=device)
        self._success = torch.zeros(n, dtype=torch.bool, device=device)

    @torch.no_grad()
    def run(self, policy: Policy, progress: bool = False) -> dict[str, Any]:
        """Roll ``policy`` out until every trial has ended; the report (:meth:`report`).
        ``progress``: a bar on a terminal (``tqdm``, when installed)."""
        started = time.perf_counter()
        for accumulator in (self._sums, self._scored, self._success):
            accumulator.zero_()
        self._running.fill_(True)
        obs = self.env.reset()
        self.env.stats.clear()  # the torque demand of this run's steps alone
        steps = range(self.steps)
        for _ in progress_bar(steps, "unilab-eval", "step", leave=False, tty_only=True) if progress else steps:
            obs = self.step(policy, obs)
        return self.report(time.perf_counter() - started)

    def step(self, policy: Policy, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """One env step: score the running trials that did not end in it; no host read."""
        command = self.command
        reference = command.library.gather(command.clip, command.frame)  # the frame this step scores
        result = self.env.step(policy(obs))
        ended = result.terminated | result.truncated
        scored = self._running & ~ended
        robot = self.env.robot
        errors = tracking_errors(
            TrackedState(command.robot_body_pos_w, command.robot_body_quat_w, robot.joint_pos, robot.joint_vel),
            TrackedState(reference.body_pos_w, reference.body_quat_w, reference.joint_pos, reference.joint_vel),
            command.anchor_index,
            self.end_effectors,
        )
        self._sums.add_(torch.stack([errors[key] for key in METRICS]) * scored)
        self._scored.add_(scored)
        self._success.logical_or_(self._running & result.truncated & ~result.terminated)
        self._running.logical_and_(~ended)
        return result.obs

    def report(self, seconds: float = 0.0) -> dict[str, Any]:
        """Both sets' results (one host read): per set ``overall``, per clip, and per trial."""
        sums, scored = self._sums.cpu(), self._scored.cpu()
        success, running = self._success.cpu(), self._running.cpu()
        if bool(running.any()):  # the last trial ends on the last step: an env that did not end it is broken
            raise RuntimeError(f"{int(running.sum())} trials had not ended after {self.steps} steps")
        out: dict[str, Any] = {
            "trials_per_set": self.trials,
            "clips": dict(zip(self.clip_names, self.clip_lengths, strict=True)),
            "steps": self.steps,
            "failure_terms": self.failure_terms,
            "seconds": seconds,
            # Over every row-step of the run (a row whose trial ended runs on until the last one does).
            "torque_limit_share": self.env.stats.summary().get(TORQUE_LIMIT_SHARE),
        }
        for s, name in enumerate(SETS):
            rows = slice(s * self.trials, (s + 1) * self.trials)
            clip = self.clip[rows]
            result = {"overall": _summary(sums[:, rows], scored[rows], success[rows])}
            result["clips"] = {
                clip_name: _summary(sums[:, rows][:, clip == c], scored[rows][clip == c], success[rows][clip == c])
                for c, clip_name in enumerate(self.clip_names)
            }
            result["trials"] = {
                "clip": clip.tolist(),
                "start_frame": self.frame[rows].tolist(),
                "success": success[rows].tolist(),
                "scored_steps": scored[rows].tolist(),
            }
            out[name] = result
        return out


def _summary(sums: torch.Tensor, scored: torch.Tensor, success: torch.Tensor) -> dict[str, float]:
    """Success rate and step-weighted mean errors of some trials (``sums (len(METRICS), trials)``)."""
    steps = int(scored.sum())
    means = (sums.sum(dim=1) / max(steps, 1)).tolist()
    out: dict[str, float] = {"trials": int(success.numel()), "success_rate": float(success.double().mean())}
    for (key, report), value in zip(METRICS.items(), means, strict=True):
        out[report] = math.sqrt(value) if key == "joint_vel_sq_error" else value
    out["scored_steps"] = steps
    return out


def make_eval_env(
    task: str,
    overrides: Sequence[str],
    trials: int,
    device: str,
    seed: int = 0,
    verbose: bool = False,
) -> ManagerBasedRlEnv:
    """The evaluation env of a tracking task: ``2 * trials`` rows, the training ``overrides`` then
    :data:`EVAL_OVERRIDES` and :data:`FULL_CLIP_OVERRIDES`; eager (built once, stepped a few
    hundred times: compiling and capturing would cost more than they save)."""
    return make_env(
        task,
        2 * trials,
        device,
        [*overrides, *EVAL_OVERRIDES, *FULL_CLIP_OVERRIDES],
        seed=seed,
        compile=False,
        capture=False,
        announce=verbose,
    )


def evaluate_tracking(
    policy_of,
    task: str,
    overrides: Sequence[str],
    trials: int,
    device: str,
    seed: int = 0,
    progress: bool = False,
    verbose: bool = False,
) -> dict[str, Any]:
    """Build the evaluation env of ``task`` and run ``policy_of(env)`` (a :data:`Policy`) on it.

    Raises:
        NotATrackingPolicy: the task has no motion command.
    """
    check_tracking_task(task, overrides, f"task '{task}'")
    env = make_eval_env(task, overrides, trials, device, seed, verbose)
    names = [Path(f).stem for f in motion_files(task, overrides)] or ["synthetic"]
    return TrackingEvaluation(env, trials, names).run(policy_of(env), progress)


def evaluate_policy(
    trained: TrainedPolicy,
    trials: int,
    device: str,
    motion: Sequence[str] = (),
    seed: int = 0,
    progress: bool = False,
    verbose: bool = False,
) -> dict[str, Any]:
    """:func:`evaluate_tracking` of a trained policy (run folder, checkpoint or ONNX file) on its
    training task and overrides, following the clips ``motion`` (files) or else the ones its
    training named, looked for where ``unilab-sim2sim`` looks (beside the policy file too).

    Raises:
        NotATrackingPolicy: the policy's task follows no motion.
        FileNotFoundError, ValueError: a motion file is missing or unreadable.
    """
    from unilab_gpu.export.sim2sim.scenario import find_motion  # the deployment side's search, for ONNX files

    check_tracking_task(trained.task, trained.env_overrides, str(trained.path))
    if motion:
        missing = [f for f in motion if not Path(f).expanduser().is_file()]
        if missing:
            raise FileNotFoundError(f"--motion: no file at {', '.join(missing)}")
        files = [Path(f).expanduser().resolve() for f in motion]
    else:
        files = [find_motion(f, trained.path).resolve() for f in motion_files(trained.task, trained.env_overrides)]
    overrides = list(trained.env_overrides)
    if files:
        overrides.append(f"commands.motion.params.motion_files=[{','.join(str(f) for f in files)}]")
    report = evaluate_tracking(
        lambda env: trained.policy_for(env, trained.task),
        trained.task,
        overrides,
        trials,
        device,
        seed,
        progress,
        verbose,
    )
    header = {
        "benchmark": "tracking_evaluation",
        "policy": trained.source,
        "task": trained.task,
        "env_overrides": overrides,
        "evaluation_overrides": [*EVAL_OVERRIDES, *FULL_CLIP_OVERRIDES],
        "device": device,
        "seed": seed,
    }
    return {**header, **report}
