"""``unilab-train``: train SAC, FlashSAC or PPO (RSL-RL) on a task, configured by ``configs/train.yaml``.

Usage::

    unilab-train [key=value ...]                 # Hydra overrides, e.g.
    unilab-train algo=sac env.num_envs=4096 algo.batch_size=8192
    unilab-train task=pendulum total_env_steps=100000 log_every=100
    unilab-train resume=runs/pendulum/flashsac/2026-01-01_12-00-00

The config is composed with Hydra's compose API: the working directory does not change and
Hydra writes no output folder of its own. A run folder ``<run_root>/<task>/<algo>/<timestamp>/``
receives the resolved ``config.yaml``, TensorBoard event files and ``checkpoint.pt``; it is created
only once the config is valid and never reused by another run (``unilab_gpu.rl.checkpoint``), and
a resume is checked against its checkpoint before anything is written
(``unilab_gpu.rl.checkpoint``). Ctrl-C finishes the current iteration, saves a checkpoint and
exits with status 130; a second Ctrl-C stops at once.

Under ``torchrun --nproc_per_node=N -m unilab_gpu.cli.train ...`` every process trains one replica
on its own device (``unilab_gpu.rl.distributed``): ``total_env_steps`` counts the fleet's env steps,
``algo.batch_size`` is per rank, rank 0 alone writes the run folder, logs and checkpoints, and a
failure of any rank stops every rank with status 1.
"""

from __future__ import annotations

import dataclasses
import math
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from unilab_gpu import __version__
from unilab_gpu.cli.train_checks import check_train_config
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.paths import CONFIGS_DIR
from unilab_gpu.rl.checkpoint import (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    CheckpointError,
    NonFiniteStateError,
    RunFolderError,
    RunLock,
    built_mismatches,
    create_run_folder,
    describe_entries,
    load_checkpoint,
    non_finite_entries,
    open_run_folder,
    raise_on_mismatches,
    recorded_mismatches,
    resume_command,
    save_checkpoint,
    write_atomic,
)
from unilab_gpu.rl.distributed import (
    PEER_FAILURE_EXIT_CODE,
    DataParallel,
    FleetError,
    Launch,
    launch_from_env,
    rank_device,
)
from unilab_gpu.rl.logger import Progress, TrainLogger
from unilab_gpu.rl.off_policy import run_updates
from unilab_gpu.rl.trainer import Trainer, TrainerSettings, algo_config, make_agent
from unilab_gpu.sim.device import resolve_device
from unilab_gpu.utils.files import unwritable
from unilab_gpu.viewer.checks import check_port_free, check_viewer_extra

INTERRUPTED_EXIT_CODE = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report an interrupted command."""


class ConfigError(ValueError):
    """A bad train config or override; the message names the key."""


class NothingToDo(Exception):
    """A resume whose ``total_env_steps`` the run has already done; nothing was written."""


class SaveError(RuntimeError):
    """A checkpoint could not be written (full disk, read-only folder); the previous one is intact."""


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
    return _with_preset_task_overrides(cfg)


def _with_preset_task_overrides(cfg: DictConfig) -> DictConfig:
    """Move an algo preset's ``task_overrides.<task>`` to the front of ``env.overrides``.

    A preset may need task settings (PPO's unbounded Gaussian actions need BeyondMimic's action
    scale on tracking, not the joint-limit bounds made for tanh policies). They become ordinary
    ``env.overrides`` of the run, so ``config.yaml``, resume, play and export all see them, and the
    user's own overrides, which come after, still win. The key leaves the algo config.
    """
    with open_dict(cfg):
        presets = cfg.algo.pop("task_overrides", None) or {}
    preset = list(presets.get(cfg.task, []))
    if preset:
        cfg.env.overrides = preset + list(cfg.env.overrides)
    return cfg


def resolve_auto(cfg: DictConfig, launch: Launch | None = None) -> DictConfig:
    """Fix the ``auto``/``null`` choices for this machine: ``device``, ``compile``, ``env.num_envs``
    (in a torchrun ``launch``, a CUDA device is this rank's ``cuda:LOCAL_RANK``)."""
    cfg = cfg.copy()
    check_train_config(cfg)
    cfg.device = str(resolve_device(cfg.device) if launch is None else rank_device(str(cfg.device), launch))
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
    ``total_env_steps``); choosing another config group (``algo=sac``) is refused: a run keeps
    its algorithm."""
    if not str(run_dir).strip():
        raise ConfigError("train config: 'resume' must be the path of a run folder or null, got ''")
    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"resume: no {CONFIG_NAME} in {run_dir} (is it a run folder?)")
    cfg = OmegaConf.load(path)
    OmegaConf.set_struct(cfg, True)  # an override of an unknown key is an error, not a new key
    extra = [o for o in overrides if not o.startswith("resume=")]
    for override in extra:
        group = override.split("=", 1)[0].lstrip("+~")
        if (CONFIGS_DIR / group).is_dir() and group != "task":
            raise ConfigError(
                f"resume: '{override}' chooses another {group} config, but a resumed run keeps its own "
                f"({group} {cfg.get(group, {}).get('name')!r}); start a new run without resume= to use it"
            )
    try:
        cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(extra))
    except OmegaConfBaseException as error:
        raise ConfigError(f"resume overrides {extra}: {' '.join(str(error).split())}") from None
    cfg.resume = str(run_dir)
    cfg.run_dir = str(run_dir)
    return cfg  # type: ignore[return-value]


def new_run_dir(cfg: DictConfig) -> tuple[Path, bool]:
    """``cfg.run_dir``, or ``<run_root>/<task>/<algo>/<timestamp>``; and whether the name is a
    generated one (numbered ``_1``, ``_2``, ... when taken) rather than the user's."""
    if cfg.run_dir is not None:
        return Path(cfg.run_dir), False
    return Path(cfg.run_root) / cfg.task / cfg.algo.name / time.strftime("%Y-%m-%d_%H-%M-%S"), True


@dataclass
class Run:
    """A training run: its folder, config, trainer and the lock it holds on the folder (rank 0's
    alone in a data-parallel run: the other ranks hold no lock, and know no folder of a new run)."""

    run_dir: Path | None
    cfg: DictConfig
    trainer: Trainer
    lock: RunLock | None
    saved_iteration: int = 0
    """Iteration of the latest checkpoint on disk."""

    def payload(self) -> dict:
        """The checkpoint dictionary: trainer state plus what a resume is checked against."""
        return {
            "trainer": self.trainer.state_dict(),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "num_envs": self.trainer.env.num_envs,
            "observation_dims": dict(self.trainer.env.observation_dims),
            "action_dim": self.trainer.env.action_dim,
            "package_version": __version__,
        }

    def save(self, trainer: Trainer | None = None) -> Path:
        """Write ``checkpoint.pt`` atomically (also the ``on_checkpoint`` callback); a Ctrl-C
        during the write is held back until it is done.

        Raises:
            NonFiniteStateError: the agent's state holds NaN or inf; nothing is written.
            SaveError: the file could not be written; the previous checkpoint is intact.
        """
        payload = self.payload()
        bad = non_finite_entries(payload["trainer"]["agent"])
        if bad:
            raise NonFiniteStateError(
                f"non-finite agent state ({describe_entries(bad)}) at iteration {self.trainer.iteration}, not saved"
            )
        try:
            with stop_signals_deferred():
                path = save_checkpoint(self.run_dir / CHECKPOINT_NAME, payload)
        except OSError as error:
            raise SaveError(f"cannot save a checkpoint in {self.run_dir}: {error.strerror or error}") from None
        self.saved_iteration = self.trainer.iteration
        return path

    def last_good(self) -> str:
        """Where the latest checkpoint on disk is, for the line that ends a failed run."""
        return f"last good checkpoint kept at {self.run_dir / CHECKPOINT_NAME} (iteration {self.saved_iteration})"


def write_config(cfg: DictConfig, run_dir: Path) -> None:
    """Write the resolved ``config.yaml`` of a run atomically."""
    write_atomic(run_dir / CONFIG_NAME, lambda file: file.write(OmegaConf.to_yaml(cfg).encode()))


def build_run(cfg: DictConfig, stream=None, data_parallel: DataParallel | None = None) -> Run:
    """Env, agent, trainer and run folder for a resolved config (``resume`` restores state).

    Nothing is written before the config is valid: a new run folder appears (atomically, with
    its config and an iteration-0 checkpoint) once env and agent are built; a resume locks its
    folder, checks the config against the checkpoint and only then rewrites ``config.yaml``.
    In a data-parallel run only rank 0 locks or writes anything; the others read the checkpoint.
    """
    lock, notes, checkpoint = None, [], None
    main = data_parallel is None or data_parallel.is_main
    if main:  # found out now, not after the env is built
        folder = Path(cfg.resume) if cfg.resume is not None else new_run_dir(cfg)[0]
        if (problem := unwritable(folder / CHECKPOINT_NAME)) is not None:
            key = "resume" if cfg.resume is not None else "run_dir" if cfg.run_dir is not None else "run_root"
            raise RunFolderError(f"{key}: cannot write the run folder {folder}: {problem}")
    if cfg.resume is not None and main:
        lock, notes = open_run_folder(Path(cfg.resume))
    try:
        if cfg.resume is not None:
            checkpoint = load_checkpoint(cfg.resume)
            plain = OmegaConf.to_container(cfg, resolve=True)
            raise_on_mismatches(cfg.resume, recorded_mismatches(checkpoint, plain, cfg.env.num_envs))
        run = _build(cfg, checkpoint, lock, stream, data_parallel)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    for note in notes:
        run.trainer.logger.message(f"{run.run_dir}: {note}")
    return run


def check_resumable(cfg: DictConfig, checkpoint: dict) -> None:
    """Refuse a resume that has nothing to do, or whose checkpoint holds NaN or inf agent state.

    Raises:
        NothingToDo: the run has done ``total_env_steps`` already.
        CheckpointError: non-finite agent state (a run that diverged: it cannot continue).
    """
    done = int(checkpoint["trainer"]["env_steps"])
    if done >= cfg.total_env_steps:
        raise NothingToDo(
            f"nothing to do: {cfg.resume} has done {done:,} env steps, total_env_steps is {cfg.total_env_steps:,}; "
            f"raise it to train on, e.g. {resume_command(cfg.resume)} total_env_steps={2 * done}"
        )
    bad = non_finite_entries(checkpoint["trainer"]["agent"])
    if bad:
        raise CheckpointError(
            f"resume of {cfg.resume} refused, nothing was written: its checkpoint holds non-finite agent state "
            f"({describe_entries(bad)}); start a new run"
        )


def make_trainer(env, cfg: DictConfig, seed: int, data_parallel: DataParallel | None = None) -> Trainer:
    """The trainer of ``cfg.algo``: SAC/FlashSAC's off-policy loop, or RSL-RL's PPO runner
    (``algo=ppo``, :class:`~unilab_gpu.rl.ppo.PpoTrainer`, same interface). In a data-parallel
    run the ``total_env_steps`` are shared by all ranks."""
    algo_values = OmegaConf.to_container(cfg.algo, resolve=True)
    world = data_parallel.world_size if data_parallel is not None else 1
    if cfg.algo.name == "ppo":
        if world > 1:
            raise ConfigError("algo=ppo: data-parallel launches (torchrun) train SAC and FlashSAC only")
        try:
            from unilab_gpu.rl.ppo import PpoTrainer
        except ModuleNotFoundError as error:
            raise ConfigError(f"algo=ppo needs {error.name}: pip install 'unilab-gpu[rsl]'") from None
        return PpoTrainer.from_config(  # type: ignore[return-value]
            env,
            algo_values,  # type: ignore[arg-type]
            cfg.total_env_steps,
            log_every=cfg.log_every,
            checkpoint_every=cfg.checkpoint_every,
        )
    agent_cfg = algo_config(algo_values, compile=cfg.compile)  # type: ignore[arg-type]
    iterations = max(1, math.ceil(cfg.total_env_steps / (env.num_envs * world)))
    if agent_cfg.learning_rate_decay_steps == 0:
        # The preset's "decay over the whole run": this run's update count, written into the run's
        # config (and so its checkpoint) so that play, export and a resume build the same schedule.
        agent_cfg = dataclasses.replace(agent_cfg, learning_rate_decay_steps=run_updates(agent_cfg, iterations))
        cfg.algo.learning_rate_decay_steps = agent_cfg.learning_rate_decay_steps
    agent = make_agent(agent_cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    settings = TrainerSettings(
        iterations=iterations,
        log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every,
        seed=seed,
    )
    return Trainer(env, agent, settings, data_parallel=data_parallel)


def _build(
    cfg: DictConfig, checkpoint: dict | None, lock: RunLock | None, stream, data_parallel: DataParallel | None
) -> Run:
    start_iteration = checkpoint["trainer"]["iteration"] if checkpoint else 0
    # A resumed run reseeds with an offset so it does not replay the first run's randomness;
    # every rank of a data-parallel run has its own seed (env, exploration, replay sampling).
    rank = data_parallel.rank if data_parallel is not None else 0
    main = rank == 0
    seed = cfg.seed + start_iteration + rank
    env = make_env(
        cfg.task,
        num_envs=cfg.env.num_envs,
        device=cfg.device,
        overrides=list(cfg.env.overrides),
        seed=seed,
        compile=cfg.compile,
        capture=cfg.env.capture,
        announce=main,
    )
    trainer = make_trainer(env, cfg, seed, data_parallel)
    agent, settings = trainer.agent, trainer.settings
    if checkpoint is not None:
        # Listed with the algo keys that changed, which explain a network-shape mismatch.
        lines = recorded_mismatches(checkpoint, OmegaConf.to_container(cfg, resolve=True), env.num_envs)
        lines += built_mismatches(checkpoint, env.observation_dims, env.action_dim, agent.state_dict())
        raise_on_mismatches(cfg.resume, lines)
        check_resumable(cfg, checkpoint)
        trainer.load_state_dict(checkpoint["trainer"])
        run_dir: Path | None = Path(cfg.resume)
        if main:
            write_config(cfg, run_dir)  # type: ignore[arg-type]
    elif not main:
        run_dir = None  # rank 0 names and writes the folder
    else:
        target, numbered = new_run_dir(cfg)

        def fill(folder: Path) -> None:
            write_config(cfg, folder)
            save_checkpoint(folder / CHECKPOINT_NAME, Run(folder, cfg, trainer, None).payload())  # type: ignore[arg-type]

        run_dir, lock = create_run_folder(target, fill, numbered=numbered)
    if not main:  # silent, and never writes: rank 0 logs the fleet's totals and checkpoints
        trainer.logger = TrainLogger(None, None)
        return Run(run_dir, cfg, trainer, None)
    try:
        progress = Progress(settings.iterations, trainer.iteration, mode=cfg.progress, stream=stream)
        trainer.logger = TrainLogger(run_dir, progress)
    except BaseException:
        lock.release()  # type: ignore[union-attr]
        raise
    run = Run(run_dir, cfg, trainer, lock, saved_iteration=trainer.iteration)
    trainer.on_checkpoint = run.save
    return run


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, the SIGTERM with which torchrun, a job scheduler or ``kill`` ask a run to end, and the
SIGHUP of a closed terminal or SSH session: each saves a checkpoint, then exits."""


@contextmanager
def stop_on_signals() -> Iterator[list[bool]]:
    """While active, the first SIGINT, SIGTERM or SIGHUP sets ``flag[0]`` (the loop stops after its
    iteration, at the next point where every rank agrees, and saves); a second one raises
    ``KeyboardInterrupt``."""
    flag = [False]
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}

    def handler(signum, frame) -> None:
        if flag[0]:
            raise KeyboardInterrupt
        flag[0] = True

    installed = True
    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, handler)
    except ValueError:  # not the main thread: keep the default behaviour
        installed = False
    try:
        yield flag
    finally:
        if installed:
            for signum, old in previous.items():
                signal.signal(signum, old)


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """A SIGINT, SIGTERM or SIGHUP that arrives inside the block goes to the handler in place before it
    only once the block is done (so a checkpoint write is never cut short)."""
    received: list[int] = []
    try:
        previous = {signum: signal.signal(signum, lambda s, frame: received.append(s)) for signum in STOP_SIGNALS}
    except ValueError:  # not the main thread: signals go to the main thread anyway
        yield
        return
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
    for signum in received:
        if callable(previous[signum]):
            previous[signum](signum, None)
        elif previous[signum] == signal.SIG_DFL:  # e.g. SIGTERM outside a run: end the process now
            signal.raise_signal(signum)


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
) -> int:
    """Run a resolved config; returns the process exit status (this rank's, data-parallel).

    ``on_finish(run)`` is called on rank 0 after a run that trained to its end was saved and
    exported (the main job's closing lines).
    """
    out = stream if stream is not None else sys.stdout
    main = data_parallel is None or data_parallel.is_main
    viewer = main and cfg.get("viewer", False)  # rank 0 alone serves it
    if viewer:
        check_viewer(cfg)
    run = build_run(cfg, stream=out, data_parallel=data_parallel)
    trainer, logger = run.trainer, run.trainer.logger
    env = trainer.env
    world = data_parallel.world_size if data_parallel is not None else 1
    # One env step per env per iteration off-policy; a PPO iteration is a rollout of several.
    total_steps = trainer.settings.iterations * env.num_envs * world * getattr(trainer, "steps_per_env", 1)
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


def main(argv: Sequence[str] | None = None, on_finish: Callable[[Run], None] | None = None) -> int:
    """Entry point of ``unilab-train``; ``argv`` are Hydra overrides (default ``sys.argv[1:]``);
    ``on_finish`` as in :func:`train`."""
    args = list(sys.argv[1:] if argv is None else argv)
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
        status = train(cfg, data_parallel=data_parallel, on_finish=on_finish)
        if data_parallel is not None and data_parallel.collectives_done:
            data_parallel.finish(status, "unilab-train")  # waits for every rank, then ends the process
        return status
    except NothingToDo as done:
        print(f"unilab-train: {where}{done}")
        return 0
    except (ConfigError, CheckpointError, RunFolderError, ValueError) as error:
        print(f"unilab-train: {where}error: {error}", file=sys.stderr)
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
