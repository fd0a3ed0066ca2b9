"""``unilab-train``: train SAC or FlashSAC on a task, configured by ``configs/train.yaml``.

Usage::

    unilab-train [key=value ...]                 # Hydra overrides, e.g.
    unilab-train algo=sac env.num_envs=4096 algo.batch_size=8192
    unilab-train task=pendulum total_env_steps=100000 log_every=100
    unilab-train resume=runs/pendulum/flashsac/2026-01-01_12-00-00

The config is composed with Hydra's compose API: the working directory does not change and
Hydra writes no output folder of its own. A run folder ``<run_root>/<task>/<algo>/<timestamp>/``
receives the resolved ``config.yaml``, TensorBoard event files and ``checkpoint.pt``. Ctrl-C
finishes the current iteration, saves a checkpoint and exits with status 130; a second Ctrl-C
stops at once.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import CONFIGS_DIR
from unilab_gpu.rl.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint, save_checkpoint
from unilab_gpu.rl.factory import algo_config, make_agent
from unilab_gpu.rl.logger import TrainLogger
from unilab_gpu.rl.progress import Progress
from unilab_gpu.rl.trainer import Trainer, TrainerSettings

CONFIG_NAME = "config.yaml"
"""Resolved config of a run, inside its run folder."""

INTERRUPTED_EXIT_CODE = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report an interrupted command."""


class ConfigError(ValueError):
    """A bad train config or override; the message names the key."""


def compose_train_config(overrides: Sequence[str] = ()) -> DictConfig:
    """``configs/train.yaml`` with Hydra ``overrides`` (e.g. ``["algo=sac", "env.num_envs=8"]``).

    ``task=<name>`` is applied after composition: ``configs/task/`` is a folder of env configs
    that ``make_env`` composes on its own, and Hydra would read ``task=`` as a choice from it.
    """
    tasks = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "task"]
    rest = [o for o in overrides if o.split("=", 1)[0] != "task"]
    try:
        with initialize_config_dir(config_dir=str(CONFIGS_DIR), version_base=None):
            cfg = compose(config_name="train", overrides=rest)
    except (HydraException, OmegaConfBaseException) as error:
        raise ConfigError(f"train config: {' '.join(str(error).split())}") from None
    for task in tasks:
        cfg.task = task
    return cfg


def resolve_auto(cfg: DictConfig) -> DictConfig:
    """Fix the ``auto``/``null`` choices for this machine: ``device``, ``compile``, ``env.num_envs``."""
    cfg = cfg.copy()
    if cfg.device == "auto":
        cfg.device = "cuda" if torch.cuda.is_available() else "cpu"
    on_cuda = torch.device(cfg.device).type == "cuda"
    if cfg.compile == "auto":
        cfg.compile = on_cuda
    if cfg.compile not in (True, False):
        raise ConfigError(f"train config: 'compile' must be auto, true or false, got {cfg.compile!r}")
    if cfg.env.num_envs is None:
        cfg.env.num_envs = cfg.env.cuda_num_envs if on_cuda else cfg.env.cpu_num_envs
    return cfg


def resume_config(run_dir: str | Path, overrides: Sequence[str] = ()) -> DictConfig:
    """A run's saved ``config.yaml`` with ``key=value`` overrides merged on top (e.g. a larger
    ``total_env_steps``); choosing another config group (``algo=sac``) is not possible here."""
    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"resume: no {CONFIG_NAME} in {run_dir} (is it a run folder?)")
    cfg = OmegaConf.load(path)
    OmegaConf.set_struct(cfg, True)  # an override of an unknown key is an error, not a new key
    extra = [o for o in overrides if not o.startswith("resume=")]
    try:
        cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(extra))
    except OmegaConfBaseException as error:
        raise ConfigError(f"resume overrides {extra}: {' '.join(str(error).split())}") from None
    cfg.resume = str(run_dir)
    cfg.run_dir = str(run_dir)
    return cfg  # type: ignore[return-value]


def new_run_dir(cfg: DictConfig) -> Path:
    """``cfg.run_dir`` or ``<run_root>/<task>/<algo>/<timestamp>`` (suffixed if it exists)."""
    if cfg.run_dir is not None:
        path = Path(cfg.run_dir)
    else:
        path = Path(cfg.run_root) / cfg.task / cfg.algo.name / time.strftime("%Y-%m-%d_%H-%M-%S")
        base, suffix = path, 1
        while path.exists():
            path, suffix = Path(f"{base}_{suffix}"), suffix + 1
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Run:
    """A training run: its folder, config and trainer."""

    run_dir: Path
    cfg: DictConfig
    trainer: Trainer

    def save(self, trainer: Trainer | None = None) -> Path:
        """Write ``checkpoint.pt`` atomically (also the ``on_checkpoint`` callback)."""
        payload = {
            "trainer": self.trainer.state_dict(),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "num_envs": self.trainer.env.num_envs,
            "observation_dims": dict(self.trainer.env.observation_dims),
            "action_dim": self.trainer.env.action_dim,
        }
        return save_checkpoint(self.run_dir / CHECKPOINT_NAME, payload)


def build_run(cfg: DictConfig, stream=None) -> Run:
    """Env, agent, trainer and run folder for a resolved config (``resume`` restores state)."""
    checkpoint = load_checkpoint(cfg.resume) if cfg.resume is not None else None
    start_iteration = checkpoint["trainer"]["iteration"] if checkpoint else 0
    run_dir = Path(cfg.resume) if cfg.resume is not None else new_run_dir(cfg)
    OmegaConf.save(cfg, run_dir / CONFIG_NAME)

    # A resumed run reseeds with an offset so it does not replay the first run's randomness.
    seed = cfg.seed + start_iteration
    env = make_env(
        cfg.task,
        num_envs=cfg.env.num_envs,
        device=cfg.device,
        overrides=list(cfg.env.overrides),
        seed=seed,
        compile=cfg.compile,
        capture=cfg.env.capture,
    )
    algo_values = OmegaConf.to_container(cfg.algo, resolve=True)
    agent_cfg = algo_config(algo_values, compile=cfg.compile)  # type: ignore[arg-type]
    agent = make_agent(agent_cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(
        iterations=max(1, math.ceil(cfg.total_env_steps / env.num_envs)),
        batch_size=agent_cfg.batch_size,
        updates_per_step=agent_cfg.updates_per_step,
        warmup_steps=agent_cfg.warmup_steps,
        buffer_capacity_per_env=agent_cfg.buffer_capacity_per_env,
        final_obs_fraction=agent_cfg.final_obs_fraction,
        log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every,
        seed=seed,
    )
    progress = Progress(settings.iterations, start_iteration, mode=cfg.progress, stream=stream)
    trainer = Trainer(env, agent, settings, TrainLogger(run_dir, progress))
    if checkpoint is not None:
        if checkpoint["num_envs"] != env.num_envs:
            raise ConfigError(f"resume: checkpoint has num_envs={checkpoint['num_envs']}, config {env.num_envs}")
        trainer.load_state_dict(checkpoint["trainer"])
    run = Run(run_dir, cfg, trainer)
    trainer.on_checkpoint = run.save
    return run


@contextmanager
def stop_on_sigint() -> Iterator[list[bool]]:
    """While active, the first SIGINT sets ``flag[0]`` (the loop stops after its iteration);
    a second one raises ``KeyboardInterrupt`` as usual."""
    flag = [False]
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    installed = True
    try:
        signal.signal(signal.SIGINT, handler)
    except ValueError:  # not the main thread: keep the default behaviour
        installed = False
    try:
        yield flag
    finally:
        if installed:
            signal.signal(signal.SIGINT, previous)


def train(cfg: DictConfig, stream=None) -> int:
    """Run a resolved config; returns the process exit status."""
    out = stream if stream is not None else sys.stdout
    run = build_run(cfg, stream=out)
    trainer, logger = run.trainer, run.trainer.logger
    env = trainer.env
    logger.message(
        f"unilab-train: {cfg.task} x {env.num_envs} envs on {env.device}, {cfg.algo.name}, "
        f"{trainer.settings.iterations} iterations ({trainer.settings.iterations * env.num_envs:,} env steps), "
        f"compile={cfg.compile}; run folder {run.run_dir}"
    )
    if trainer.iteration:
        logger.message(f"resumed at iteration {trainer.iteration} ({trainer.env_steps:,} env steps)")
    try:
        with stop_on_sigint() as stop:
            finished = trainer.train(should_stop=lambda: stop[0])
    except KeyboardInterrupt:  # second Ctrl-C: the state may be mid-update, so do not save it
        logger.close()
        print(f"\nstopped; last checkpoint in {run.run_dir}", file=out)
        return INTERRUPTED_EXIT_CODE
    path = run.save()
    logger.close()
    if not finished:
        print(
            f"interrupted at iteration {trainer.iteration}; checkpoint saved to {path}\n"
            f"continue with: unilab-train resume={run.run_dir}",
            file=out,
        )
        return INTERRUPTED_EXIT_CODE
    print(f"done: {trainer.env_steps:,} env steps; checkpoint {path}", file=out)
    return 0


USAGE = __doc__.split("The config")[0].strip()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``unilab-train``; ``argv`` are Hydra overrides (default ``sys.argv[1:]``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        print(f"\nDefaults ({CONFIGS_DIR / 'train.yaml'}):\n")
        print(OmegaConf.to_yaml(compose_train_config()))
        return 0
    try:
        resume = next((a.split("=", 1)[1] for a in args if a.startswith("resume=")), None)
        cfg = resume_config(resume, args) if resume not in (None, "null") else compose_train_config(args)
        return train(resolve_auto(cfg))
    except (ConfigError, CheckpointError, ValueError) as error:
        print(f"unilab-train: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nunilab-train: interrupted before training started", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE


if __name__ == "__main__":
    sys.exit(main())
