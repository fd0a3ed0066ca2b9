"""A training run: its folder, config and trainer, built from a resolved config.

Nothing is written before the config is valid. A run folder ``<run_root>/<task>/<algo>/<timestamp>/``
receives the resolved ``config.yaml``, TensorBoard event files and ``checkpoint.pt`` (and, for a task
on a generated terrain, ``scene.xml``: the MuJoCo scene trained on, :func:`write_scene`); it is created
only once env and agent are built and never reused by another run, and a resume is checked against
its checkpoint before anything is written (:mod:`unilab_gpu.training.run_folder`,
:mod:`unilab_gpu.training.resume_check`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from unilab_gpu import __version__
from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.evaluation.periodic import PeriodicEvaluation
from unilab_gpu.evaluation.tracking import NotATrackingPolicy
from unilab_gpu.rl.agents import algo_config, make_agent
from unilab_gpu.rl.checkpoint import (
    CheckpointError,
    NonFiniteStateError,
    describe_entries,
    load_checkpoint,
    non_finite_entries,
    save_checkpoint,
)
from unilab_gpu.rl.distributed import DataParallel
from unilab_gpu.rl.logger import Progress, TrainLogger, WandbRun
from unilab_gpu.rl.off_policy_config import run_updates
from unilab_gpu.rl.off_policy_trainer import OffPolicyTrainer
from unilab_gpu.rl.trainer import Trainer, TrainerSettings
from unilab_gpu.sim.model_files import scene_xml
from unilab_gpu.training.config import ConfigError
from unilab_gpu.training.resume_check import (
    built_mismatches,
    raise_on_mismatches,
    raise_on_task_changes,
    recorded_mismatches,
    task_setting_changes,
)
from unilab_gpu.training.run_folder import RunFolderError, RunLock, create_run_folder, open_run_folder, resume_command
from unilab_gpu.training.signals import stop_signals_deferred
from unilab_gpu.utils.files import CHECKPOINT_NAME, CONFIG_NAME, SCENE_NAME, unwritable, write_atomic


class NothingToDo(Exception):
    """A resume whose ``total_env_steps`` the run has already done; nothing was written."""


class SaveError(RuntimeError):
    """A checkpoint could not be written (full disk, read-only folder); the previous one is intact."""


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
    changed: list[str] = field(default_factory=list)
    """Task settings a resume (``--allow-changed``) changed, one ``key: checkpoint X, now Y`` each."""

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


def start_wandb(cfg: DictConfig, run_dir: Path) -> WandbRun | None:
    """The run's W&B run with ``logger=wandb`` (the resolved config as its config, named after the
    run folder), else ``None``; a W&B run that cannot start is one line naming the setting."""
    if cfg.get("logger", "tensorboard") != "wandb":
        return None
    settings = cfg.get("wandb") or {}
    try:
        return WandbRun(
            run_dir,
            OmegaConf.to_container(cfg, resolve=True),  # type: ignore[arg-type]
            project=settings.get("project", "unilab-gpu"),
            entity=settings.get("entity"),
            name=f"{cfg.task}/{cfg.algo.name}/{run_dir.name}",
        )
    except Exception as error:  # wandb's errors (no login, no network) have no common base class
        reason = " ".join(str(error).split()) or type(error).__name__
        raise RunFolderError(
            f"logger=wandb: W&B could not start a run ({reason}); log in (wandb login), set WANDB_MODE=offline "
            f"to log locally, or train with logger=tensorboard; resume with: {resume_command(run_dir)}"
        ) from None


def write_config(cfg: DictConfig, run_dir: Path, name: str = CONFIG_NAME) -> None:
    """Write the resolved ``config.yaml`` (or ``name``) of a run atomically."""
    write_atomic(run_dir / name, lambda file: file.write(OmegaConf.to_yaml(cfg).encode()))


def write_scene(env: ManagerBasedRlEnv, run_dir: Path) -> Path | None:
    """Write the run's ``scene.xml`` atomically when its task has a generated terrain: the robot's
    MJCF with the floor replaced by the terrain and the robot config's physics options and edits,
    as the env built it (``ManagerBasedRlEnv.model_edit``), in one file that MuJoCo's viewer opens
    from the run folder (``python -m mujoco.viewer --mjcf=scene.xml``); returns its path, or
    ``None`` on flat ground (the robot's own scene)."""
    if env.terrain_grid is None:
        return None
    text = scene_xml(env.cfg.sim.model, env.model_edit).encode()
    return write_atomic(run_dir / SCENE_NAME, lambda file: file.write(text))


def build_run(
    cfg: DictConfig, stream=None, data_parallel: DataParallel | None = None, allow_changed: bool = False
) -> Run:
    """Env, agent, trainer and run folder for a resolved config (``resume`` restores state).

    Nothing is written before the config is valid: a new run folder appears (atomically, with
    its config and an iteration-0 checkpoint) once env and agent are built; a resume locks its
    folder, checks the config against the checkpoint and only then rewrites ``config.yaml``.
    A resume whose task settings differ from the checkpoint's is refused unless ``allow_changed``;
    then the checkpoint's config is kept as ``config.until_<env steps>.yaml`` beside the new one.
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
        run = _build(cfg, checkpoint, lock, stream, data_parallel, allow_changed)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    for note in notes:
        run.trainer.logger.message(f"{run.run_dir}: {note}")
    if run.changed and run.run_dir is not None:
        earlier = earlier_config_name(int(checkpoint["trainer"]["env_steps"]))  # type: ignore[index]
        keys = ", ".join(change.split(":")[0] for change in run.changed)
        run.trainer.logger.message(
            f"resumed with {len(run.changed)} changed task setting(s) ({keys}); "
            f"the config of the steps before is kept in {run.run_dir / earlier}"
        )
    return run


def earlier_config_name(env_steps: int) -> str:
    """File name of the config a run trained with up to ``env_steps``, kept when a resume changed it."""
    return f"config.until_{env_steps}.yaml"


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


def make_trainer(
    env: ManagerBasedRlEnv, cfg: DictConfig, seed: int, data_parallel: DataParallel | None = None
) -> Trainer:
    """The trainer of ``cfg.algo``: SAC/FlashSAC's :class:`~unilab_gpu.rl.off_policy_trainer.OffPolicyTrainer`,
    or RSL-RL's PPO runner (``algo=ppo``, :class:`~unilab_gpu.rl.ppo.PpoTrainer`). In a
    data-parallel run the ``total_env_steps`` are shared by all ranks."""
    algo_values = algo_mapping(cfg)
    world = data_parallel.world_size if data_parallel is not None else 1
    evaluation = cfg.get("eval")  # absent from the configs of runs made before it existed
    settings = dict(
        log_every=cfg.log_every,
        checkpoint_every=cfg.checkpoint_every,
        eval_every=evaluation.every if evaluation is not None else 0,
    )
    if cfg.algo.name == "ppo":
        if world > 1:
            raise ConfigError("algo=ppo: data-parallel launches (torchrun) train SAC and FlashSAC only")
        try:
            from unilab_gpu.rl.ppo import PpoTrainer
        except ModuleNotFoundError as error:
            raise ConfigError(f"algo=ppo needs {error.name}: pip install 'unilab-gpu[rsl]'") from None
        return PpoTrainer.from_config(env, algo_values, cfg.total_env_steps, **settings)
    agent_cfg = algo_config(algo_values, compile=cfg.compile)
    iterations = max(1, math.ceil(cfg.total_env_steps / (env.num_envs * world)))
    if agent_cfg.learning_rate_decay_steps == 0:
        # The preset's "decay over the whole run": this run's update count, written into the run's
        # config (and so its checkpoint) so that play, export and a resume build the same schedule.
        agent_cfg = dataclasses.replace(agent_cfg, learning_rate_decay_steps=run_updates(agent_cfg, iterations))
        cfg.algo.learning_rate_decay_steps = agent_cfg.learning_rate_decay_steps
    agent = make_agent(agent_cfg, env.observation_dims, env.action_dim, env.num_envs, env.device)
    run_settings = TrainerSettings(iterations=iterations, seed=seed, **settings)
    return OffPolicyTrainer(env, agent, run_settings, data_parallel=data_parallel)


def algo_mapping(cfg: DictConfig) -> dict[str, Any]:
    """``cfg.algo`` as a plain dictionary (what the typed algo configs are built from)."""
    values = OmegaConf.to_container(cfg.algo, resolve=True)
    assert isinstance(values, dict)
    return {str(key): value for key, value in values.items()}


def _build(
    cfg: DictConfig,
    checkpoint: dict | None,
    lock: RunLock | None,
    stream,
    data_parallel: DataParallel | None,
    allow_changed: bool,
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
    if main and settings.eval_every:  # before the run folder: a task without motion is a config error
        try:
            trainer.on_evaluation = PeriodicEvaluation(cfg, torch.device(env.device))
        except NotATrackingPolicy as error:
            raise ConfigError(f"train config: 'eval.every' {cfg.eval.every}: {error}") from None
    changes: list[str] = []
    if checkpoint is not None:
        # Listed with the algo keys that changed, which explain a network-shape mismatch.
        lines = recorded_mismatches(checkpoint, OmegaConf.to_container(cfg, resolve=True), env.num_envs)
        lines += built_mismatches(checkpoint, env.observation_dims, env.action_dim, agent.state_dict())
        raise_on_mismatches(cfg.resume, lines)
        saved_overrides = (checkpoint.get("config") or {}).get("env", {}).get("overrides", [])
        changes = task_setting_changes(cfg.task, saved_overrides, list(cfg.env.overrides))
        raise_on_task_changes(cfg.resume, changes, allow_changed)
        check_resumable(cfg, checkpoint)
        trainer.load_state_dict(checkpoint["trainer"])
        run_dir: Path | None = Path(cfg.resume)
        if main:
            if changes:  # the record of how the earlier steps were trained stays in the run folder
                earlier = OmegaConf.create(checkpoint.get("config") or {})
                write_config(earlier, run_dir, earlier_config_name(int(checkpoint["trainer"]["env_steps"])))
            write_config(cfg, run_dir)  # type: ignore[arg-type]
            write_scene(env, run_dir)  # type: ignore[arg-type]
    elif not main:
        run_dir = None  # rank 0 names and writes the folder
    else:
        target, numbered = new_run_dir(cfg)

        def fill(folder: Path) -> None:
            write_config(cfg, folder)
            write_scene(env, folder)
            save_checkpoint(folder / CHECKPOINT_NAME, Run(folder, cfg, trainer, None).payload())  # type: ignore[arg-type]

        try:
            run_dir, lock = create_run_folder(target, fill, numbered=numbered)
        except OSError as error:  # e.g. a full disk at the first checkpoint: the staging folder is gone again
            raise RunFolderError(
                f"cannot create the run folder {target}: {error.strerror or error} (writing {error.filename}); "
                "nothing was kept, free space or choose another run_root and start again"
            ) from None
    if not main:  # silent, and never writes: rank 0 logs the fleet's totals and checkpoints
        trainer.logger = TrainLogger(None, None)
        return Run(run_dir, cfg, trainer, None)
    try:
        progress = Progress(settings.iterations, trainer.iteration, mode=cfg.progress, stream=stream)
        trainer.logger = TrainLogger(run_dir, progress, start_wandb(cfg, run_dir))  # type: ignore[arg-type]
    except BaseException:
        lock.release()  # type: ignore[union-attr]
        raise
    run = Run(run_dir, cfg, trainer, lock, saved_iteration=trainer.iteration, changed=changes)
    trainer.on_checkpoint = run.save
    return run
