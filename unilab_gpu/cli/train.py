"""``unilab-train``: train SAC, FlashSAC or PPO (RSL-RL) on a task, configured by ``configs/train.yaml``.

Usage::

    unilab-train [key=value ...]                 # Hydra overrides, e.g.
    unilab-train algo=sac env.num_envs=4096 algo.batch_size=8192
    unilab-train task=pendulum total_env_steps=100000 log_every=100
    unilab-train resume=runs/pendulum/flashsac/2026-01-01_12-00-00
    unilab-train resume=RUN "env.overrides=[...]" --allow-changed   # train on with changed task settings

The config is composed with Hydra's compose API: the working directory does not change and
Hydra writes no output folder of its own (:mod:`unilab_gpu.training.config`). A run folder
``<run_root>/<task>/<algo>/<timestamp>/`` receives the resolved ``config.yaml``, TensorBoard event
files and ``checkpoint.pt``; it is created only once the config is valid and never reused by
another run, and a resume is checked against its checkpoint before anything is written
(:mod:`unilab_gpu.training.run`): a resume whose task or physics settings differ from the
checkpoint's is refused, naming the keys, unless ``--allow-changed`` is given; the run folder then
keeps the earlier config as ``config.until_<env steps>.yaml``. Ctrl-C finishes the current
iteration, saves a checkpoint and exits with status 130; a second Ctrl-C stops at once.

This module is the command: its arguments, messages and exit statuses. What a run is and does
lives in :mod:`unilab_gpu.training`.

Under ``torchrun --nproc_per_node=N -m unilab_gpu.cli.train ...`` every process trains one replica
on its own device (``unilab_gpu.rl.distributed``): ``total_env_steps`` counts the fleet's env steps,
``algo.batch_size`` is per rank, rank 0 alone writes the run folder, logs and checkpoints, and a
failure of any rank stops every rank with status 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

import torch
from omegaconf import DictConfig, OmegaConf

from unilab_gpu.paths import CONFIGS_DIR
from unilab_gpu.rl.checkpoint import CheckpointError, NonFiniteStateError
from unilab_gpu.rl.distributed import PEER_FAILURE_EXIT_CODE, DataParallel, FleetError, launch_from_env
from unilab_gpu.rl.trainer import Trainer
from unilab_gpu.training.config import ConfigError, compose_train_config, resolve_auto, resume_config
from unilab_gpu.training.run import NothingToDo, Run, SaveError, build_run
from unilab_gpu.training.run_folder import RunFolderError, resume_command
from unilab_gpu.training.signals import INTERRUPTED_EXIT_CODE, stop_on_signals
from unilab_gpu.viewer.checks import check_port_free, check_viewer_extra


def check_viewer(cfg: DictConfig) -> None:
    """``viewer=true``: the extra is installed, ``viewer_port`` is free and ``viewer_worlds`` fits
    the env; checked before the run folder is made (one line naming the key)."""
    check_viewer_extra("viewer=true")
    check_port_free(cfg.viewer_port, "viewer_port")
    if cfg.viewer_worlds > cfg.env.num_envs:
        raise ConfigError(
            f"train config: 'viewer_worlds' {cfg.viewer_worlds} is larger than the env's {cfg.env.num_envs} worlds "
            "(env.num_envs)"
        )


def start_training_viewer(cfg: DictConfig, trainer: Trainer):
    """A train-mode ``LiveViewer`` fed after every iteration (at most 10 host copies a second)."""
    from unilab_gpu.viewer.live import LiveViewer

    live = LiveViewer(trainer.env, cfg.viewer_worlds, cfg.viewer_port, mode="train", field="viewer_")
    trainer.after_iteration = live.feed.maybe_copy
    trainer.logger.message(f"viewer: {live.url}  ({cfg.viewer_worlds} of {trainer.env.num_envs} worlds)")
    return live


def train(
    cfg: DictConfig,
    stream=None,
    data_parallel: DataParallel | None = None,
    on_finish: Callable[[Run], None] | None = None,
    allow_changed: bool = False,
) -> int:
    """Run a resolved config; returns the process exit status (this rank's, data-parallel).

    ``on_finish(run)`` is called on rank 0 after a run that trained to its end was saved and
    exported (the main job's closing lines). ``allow_changed``: a resume may change task settings.
    """
    out = stream if stream is not None else sys.stdout
    main = data_parallel is None or data_parallel.is_main
    viewer = main and cfg.get("viewer", False)  # rank 0 alone serves it
    if viewer:
        check_viewer(cfg)
    run = build_run(cfg, stream=out, data_parallel=data_parallel, allow_changed=allow_changed)
    trainer, logger = run.trainer, run.trainer.logger
    env = trainer.env
    world = data_parallel.world_size if data_parallel is not None else 1
    # One env step per env per iteration off-policy; a PPO iteration is a rollout of several.
    total_steps = trainer.settings.iterations * env.num_envs * world * trainer.steps_per_env
    ranks = f" on each of {world} ranks ({env.device.type})" if world > 1 else f" on {env.device}"
    logger.message(
        f"unilab-train: {cfg.task} x {env.num_envs} envs{ranks}, {cfg.algo.name}, "
        f"{trainer.settings.iterations} iterations ({total_steps:,} env steps), "
        f"compile={cfg.compile}; run folder {run.run_dir}"
    )
    if trainer.iteration:
        logger.message(f"resumed at iteration {trainer.iteration} ({trainer.env_steps:,} env steps)")
    live = None
    try:
        live = start_training_viewer(cfg, trainer) if viewer else None
        with stop_on_signals() as stop:
            finished = trainer.train(should_stop=lambda: stop[0])
            if data_parallel is not None:  # every rank left the loop after the same iteration
                data_parallel.collectives_done = True
            path = run.save() if main else None
    except KeyboardInterrupt:  # second Ctrl-C: the state may be mid-update, so do not save it
        if main:
            print(
                f"\nstopped; last checkpoint in {run.run_dir}\ncontinue with: {resume_command(run.run_dir)}", file=out
            )
        return INTERRUPTED_EXIT_CODE
    except (NonFiniteStateError, SaveError) as error:  # nothing (more) was saved: the last checkpoint stays
        print(f"unilab-train: error: {error}; training stopped, {run.last_good()}", file=sys.stderr)
        if isinstance(error, SaveError):
            print(f"continue with: {resume_command(run.run_dir)} once the folder can be written", file=sys.stderr)
        return 1
    except FleetError as error:  # a rank failed: this one stops without saving, the last checkpoint stays
        print(f"unilab-train: {error}", file=sys.stderr)
        if data_parallel is not None:  # a non-finite stop is agreed: every rank raises it after the same collective
            data_parallel.collectives_done = not data_parallel.peer_failed
        if main:
            print(f"last checkpoint in {run.run_dir}\ncontinue with: {resume_command(run.run_dir)}", file=out)
        return PEER_FAILURE_EXIT_CODE
    finally:
        if live is not None:
            live.close()
        logger.close()
        if run.lock is not None:
            run.lock.release()
    if not main:
        return 0 if finished else INTERRUPTED_EXIT_CODE
    if not finished:
        print(
            f"interrupted at iteration {trainer.iteration}; checkpoint saved to {path}\n"
            f"continue with: {resume_command(run.run_dir)}",
            file=out,
        )
        return INTERRUPTED_EXIT_CODE
    print(f"done: {trainer.env_steps:,} env steps; checkpoint {path}", file=out)
    if cfg.get("export_onnx", True):
        from unilab_gpu.export.export_run import export_after_training

        print(export_after_training(env, trainer.agent, cfg, run.run_dir), file=out)
    if on_finish is not None:
        on_finish(run)
    return 0


USAGE = __doc__.split("The config")[0].strip()

ALLOW_CHANGED = "--allow-changed"
"""The flag (not a Hydra override) that lets a resume change the run's task settings."""


def main(argv: Sequence[str] | None = None, on_finish: Callable[[Run], None] | None = None) -> int:
    """Entry point of ``unilab-train``; ``argv`` are Hydra overrides (default ``sys.argv[1:]``);
    ``on_finish`` as in :func:`train`."""
    args = list(sys.argv[1:] if argv is None else argv)
    allow_changed = ALLOW_CHANGED in args
    args = [a for a in args if a != ALLOW_CHANGED]
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        print(f"\nDefaults ({CONFIGS_DIR / 'train.yaml'}):\n")
        print(OmegaConf.to_yaml(compose_train_config()))
        return 0
    launch = launch_from_env()
    where = f"rank {launch.rank}: " if launch is not None else ""
    data_parallel = None
    try:
        resume = next((a.split("=", 1)[1] for a in args if a.startswith("resume=")), None)
        cfg = resume_config(resume, args) if resume not in (None, "null") else compose_train_config(args)
        cfg = resolve_auto(cfg, launch)
        if launch is not None:
            data_parallel = DataParallel.start(launch, torch.device(cfg.device))
        if allow_changed and cfg.resume is None:
            raise ConfigError(f"{ALLOW_CHANGED} applies to a resume (resume=RUN); this run starts new")
        status = train(cfg, data_parallel=data_parallel, on_finish=on_finish, allow_changed=allow_changed)
        if data_parallel is not None and data_parallel.collectives_done:
            data_parallel.finish(status, "unilab-train")  # waits for every rank, then ends the process
        return status
    except NothingToDo as done:
        print(f"unilab-train: {where}{done}")
        return 0
    except (ConfigError, CheckpointError, RunFolderError, ValueError, KeyError, FileNotFoundError) as error:
        # A name the env does not know (a KeyError: an actuator, a command) is bad input like any other.
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"unilab-train: {where}error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\nunilab-train: {where}interrupted before training started", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except Exception as error:
        if launch is not None:  # the traceback follows; the other ranks stop at their next collective
            print(f"unilab-train: {where}{type(error).__name__}: {error}; every rank stops", file=sys.stderr)
        raise
    finally:
        if data_parallel is not None:
            data_parallel.close()


if __name__ == "__main__":
    sys.exit(main())
