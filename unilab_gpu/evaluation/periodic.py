"""Periodic evaluation during training: ``unilab-eval``'s full-clip tracking evaluation every
``eval.every`` iterations, into TensorBoard and the training log."""

from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import DictConfig

from unilab_gpu.evaluation.rollout import agent_policy
from unilab_gpu.evaluation.tracking import (
    SETS,
    TrackingEvaluation,
    check_tracking_task,
    make_eval_env,
    motion_files,
)
from unilab_gpu.rl.trainer import Trainer

LOGGED = ("success_rate", "mpkpe_m", "r_mpkpe_m", "joint_pos_error_rad", "ee_pos_error_m")
"""Overall results of each set written to TensorBoard as ``eval/<set>/<key>``."""


class PeriodicEvaluation:
    """The ``on_evaluation`` callback of a training run (``cfg.eval``: ``every``, ``trials``).

    Its env (``2 * trials`` rows, the training task and overrides without noise, pushes or reset
    kicks) is built once, here; each call rolls the agent's deterministic policy out on it between
    two training iterations, outside the env step and the update, and reads the result once. The
    torch random state of the run's device is restored around both, so training draws the same
    random numbers with or without evaluation.

    Raises:
        NotATrackingPolicy: the task follows no motion (training reports it as a config error of
            ``eval.every``).
    """

    def __init__(self, cfg: DictConfig, device: torch.device) -> None:
        task, overrides = cfg.task, list(cfg.env.overrides)
        check_tracking_task(task, overrides, f"task '{task}'")
        self.devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=self.devices):
            env = make_eval_env(task, overrides, cfg.eval.trials, str(device), seed=cfg.seed)
        names = [Path(f).stem for f in motion_files(task, overrides)]
        self.evaluation = TrackingEvaluation(env, cfg.eval.trials, names)

    def __call__(self, trainer: Trainer) -> None:
        with torch.random.fork_rng(devices=self.devices):
            report = self.evaluation.run(agent_policy(trainer.agent))
        scalars = {f"eval/{name}/{key}": report[name]["overall"][key] for name in SETS for key in LOGGED}
        scalars["eval/seconds"] = report["seconds"]
        if trainer.logger is not None:
            trainer.logger.record(trainer.env_steps, scalars)
            start, spread = report["start"]["overall"], report["spread"]["overall"]
            trainer.logger.message(
                f"eval at {trainer.env_steps:,} env steps: success {start['success_rate']:.0%} from frame 0, "
                f"{spread['success_rate']:.0%} from spread starts; MPKPE {spread['mpkpe_m']:.3f} m, "
                f"R-MPKPE {spread['r_mpkpe_m']:.3f} m (spread starts, {self.evaluation.trials} trials each, "
                f"{report['seconds']:.0f} s)"
            )
