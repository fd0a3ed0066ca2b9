"""PPO through RSL-RL: ``unilab-train algo=ppo`` runs ``rsl_rl``'s ``OnPolicyRunner``.

The env is wrapped by :class:`~unilab_gpu.adapters.rsl_rl_env.RslRlVecEnv`; RSL-RL's runner
collects ``num_steps_per_env`` steps per env and runs its PPO update (Schulman et al. 2017,
with RSL-RL's adaptive-KL learning rate, Rudin et al., CoRL 2021). One *iteration* here is one
runner iteration (a rollout plus an update), so a run of ``total_env_steps`` has
``ceil(total_env_steps / (num_envs * num_steps_per_env))`` iterations.

Run folders, checkpoints (atomic ``checkpoint.pt``), resume, TensorBoard tags, the console
report and Ctrl-C work as for SAC/FlashSAC: :class:`PpoTrainer` is a
:class:`~unilab_gpu.rl.trainer.Trainer`, the protocol that ``unilab-train`` drives, and RSL-RL's
own logger and model files stay off (the runner gets no log folder). The PPO algorithm class is
:class:`LoggedPPO`, RSL-RL's ``PPO`` that keeps the losses of its last update for logging.

Needs the ``rsl`` extra (``pip install "unilab-gpu[rsl]"``: rsl-rl-lib).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from rsl_rl.algorithms import PPO
from rsl_rl.runners import OnPolicyRunner
from tensordict import TensorDict
from torch import nn

from unilab_gpu.adapters.rsl_rl_env import RslRlVecEnv
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.rl.checkpoint import NonFiniteStateError, describe_entries, non_finite_entries
from unilab_gpu.rl.config import check_field, config_from_dict
from unilab_gpu.rl.logger import TrainLogger
from unilab_gpu.rl.trainer import TrainerSettings, due


@dataclass
class PpoConfig:
    """Keys of ``configs/algo/ppo*.yaml``; defaults are the G1 tracking preset (``ppo.yaml``)."""

    name: str = "ppo"
    num_steps_per_env: int = 24
    actor_hidden_dims: tuple[int, ...] = (512, 256, 128)
    critic_hidden_dims: tuple[int, ...] = (512, 256, 128)
    activation: str = "elu"
    obs_normalization: bool = True
    init_noise_std: float = 1.0
    noise_std_type: str = "scalar"
    value_loss_coef: float = 1.0
    use_clipped_value_loss: bool = True
    clip_param: float = 0.2
    entropy_coef: float = 0.005
    num_learning_epochs: int = 5
    num_mini_batches: int = 4
    learning_rate: float = 1.0e-3
    schedule: str = "adaptive"
    gamma: float = 0.99
    lam: float = 0.95
    desired_kl: float = 0.01
    max_grad_norm: float = 1.0

    def __post_init__(self) -> None:
        self.actor_hidden_dims = tuple(self.actor_hidden_dims)
        self.critic_hidden_dims = tuple(self.critic_hidden_dims)
        for key, ok, expected in (
            ("num_steps_per_env", self.num_steps_per_env >= 1, ">= 1"),
            ("num_learning_epochs", self.num_learning_epochs >= 1, ">= 1"),
            ("num_mini_batches", self.num_mini_batches >= 1, ">= 1"),
            ("noise_std_type", self.noise_std_type in ("scalar", "log"), "scalar or log"),
            ("schedule", self.schedule in ("adaptive", "fixed"), "adaptive or fixed"),
            ("init_noise_std", self.init_noise_std > 0, "> 0"),
            ("learning_rate", self.learning_rate > 0, "> 0"),
        ):
            check_field(ok, key, expected, getattr(self, key))


class LoggedPPO(PPO):
    """RSL-RL's PPO; ``last_losses`` holds the mean losses of the latest update."""

    last_losses: dict[str, float] = {}

    def update(self) -> dict[str, float]:
        self.last_losses = super().update()
        return self.last_losses


def runner_config(cfg: PpoConfig, groups: Mapping[str, int]) -> dict[str, Any]:
    """RSL-RL's ``train_cfg`` for ``cfg``; the critic reads ``critic`` where the task has it."""
    model = {"class_name": "MLPModel", "activation": cfg.activation, "obs_normalization": cfg.obs_normalization}
    return {
        "num_steps_per_env": cfg.num_steps_per_env,
        "save_interval": 1 << 62,  # the runner saves nothing: checkpoints are ours
        "check_for_nan": False,  # its check reads each step back to the host; the env zeroes non-finite worlds
        "obs_groups": {"actor": ["policy"], "critic": ["critic" if "critic" in groups else "policy"]},
        "actor": {
            **model,
            "hidden_dims": list(cfg.actor_hidden_dims),
            "distribution_cfg": {
                "class_name": "GaussianDistribution",
                "init_std": cfg.init_noise_std,
                "std_type": cfg.noise_std_type,
            },
        },
        "critic": {**model, "hidden_dims": list(cfg.critic_hidden_dims)},
        "algorithm": {
            "class_name": f"{__name__}:LoggedPPO",
            **{
                key: getattr(cfg, key)
                for key in (
                    "value_loss_coef",
                    "use_clipped_value_loss",
                    "clip_param",
                    "entropy_coef",
                    "num_learning_epochs",
                    "num_mini_batches",
                    "learning_rate",
                    "schedule",
                    "gamma",
                    "lam",
                    "desired_kl",
                    "max_grad_norm",
                )
            },
        },
    }


class PpoAgent:
    """The trained actor-critic: ``act`` (for rollouts), ``state_dict``, ``deterministic_policy`` (export)."""

    def __init__(self, alg: LoggedPPO) -> None:
        self.alg = alg

    def deterministic_policy(self) -> nn.Module:
        """RSL-RL's normaliser, MLP and deterministic output on a tensor, as a new module."""
        return self.alg.get_policy().as_jit()

    @torch.no_grad()
    def act(self, policy_obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions ``(batch, action_dim)`` for ``policy_obs`` ``(batch, dim)``: the Gaussian's
        mean, or a sample. RSL-RL's actions are unbounded; the env clips them."""
        obs = TensorDict({"policy": policy_obs}, batch_size=[policy_obs.shape[0]])
        return self.alg.get_policy()(obs, stochastic_output=not deterministic)

    def state_dict(self) -> dict[str, Any]:
        saved = self.alg.save()
        return {
            "modules": {"actor": saved["actor_state_dict"], "critic": saved["critic_state_dict"]},
            "optimizer": saved["optimizer_state_dict"],
            "learning_rate": float(self.alg.learning_rate),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = {
            "actor_state_dict": state["modules"]["actor"],
            "critic_state_dict": state["modules"]["critic"],
            "optimizer_state_dict": state["optimizer"],
        }
        self.alg.load(saved, None, strict=True)
        self.alg.learning_rate = float(state["learning_rate"])


class PpoTrainer:
    """Runs RSL-RL's ``OnPolicyRunner`` one iteration at a time (to check ``should_stop``, log
    and checkpoint between iterations); a :class:`~unilab_gpu.rl.trainer.Trainer`.

    Action sampling and minibatch shuffling draw from torch's default generator, which building
    the env seeds (``make_env(seed=...)``).
    """

    def __init__(
        self,
        env: ManagerBasedRlEnv,
        cfg: PpoConfig,
        settings: TrainerSettings,
        logger: TrainLogger | None = None,
        on_checkpoint: Callable[[PpoTrainer], None] | None = None,
    ) -> None:
        self.env, self.cfg, self.settings = env, cfg, settings
        self.logger = logger
        self.on_checkpoint = on_checkpoint
        self.on_evaluation: Callable[[PpoTrainer], None] | None = None
        """Called with the trainer every ``settings.eval_every`` iterations (periodic evaluation)."""
        self.after_iteration: Callable[[], None] | None = None
        """Called on the host after every iteration (the live viewer's throttled state copy)."""
        self.vec_env = RslRlVecEnv(env, episode_log_interval=None)  # episode stats: ours, at log points
        with contextlib.redirect_stdout(io.StringIO()):  # RSL-RL prints both network layouts
            self.runner = OnPolicyRunner(
                self.vec_env, runner_config(cfg, env.observation_dims), log_dir=None, device=str(env.device)
            )
        self.agent = PpoAgent(self.runner.alg)
        self.iteration = 0
        self.last_scalars: dict[str, float] = {}

    @classmethod
    def from_config(cls, env: ManagerBasedRlEnv, values: Mapping[str, Any], total_env_steps: int, **settings):
        """From an ``algo`` mapping (``configs/algo/ppo.yaml``) and the run's env-step budget."""
        cfg = config_from_dict(PpoConfig, values)
        per_iteration = env.num_envs * cfg.num_steps_per_env
        return cls(env, cfg, TrainerSettings(max(1, -(-total_env_steps // per_iteration)), **settings))

    @property
    def steps_per_env(self) -> int:
        """Env steps per env in one iteration (the rollout length)."""
        return self.cfg.num_steps_per_env

    @property
    def env_steps(self) -> int:
        return self.iteration * self.env.num_envs * self.steps_per_env

    def state_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "env_steps": self.env_steps, "agent": self.agent.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.agent.load_state_dict(state["agent"])
        self.iteration = int(state["iteration"])

    def train(self, should_stop: Callable[[], bool] | None = None) -> bool:
        """Run until ``settings.iterations`` are done or ``should_stop()``; returns whether complete."""
        self.env.stats.clear()
        window = (self.iteration, time.perf_counter())
        while self.iteration < self.settings.iterations:
            if should_stop is not None and should_stop():
                return False
            self.runner.learn(num_learning_iterations=1)
            self.iteration += 1
            if self.after_iteration is not None:  # after RSL-RL's rollout and update, not per step
                self.after_iteration()
            if self.iteration % self.settings.log_every == 0 or self.iteration == self.settings.iterations:
                self._log(window)
                window = (self.iteration, time.perf_counter())
            if self.on_evaluation is not None and due(self.iteration, self.settings.eval_every):
                self.on_evaluation(self)
            if self.on_checkpoint is not None and due(self.iteration, self.settings.checkpoint_every):
                self.on_checkpoint(self)
        return True

    def _log(self, window: tuple[int, float]) -> None:
        """Losses of the last update and the episodes since the last log point (host syncs here only)."""
        start, started = window
        elapsed = max(time.perf_counter() - started, 1e-9)
        steps = (self.iteration - start) * self.env.num_envs * self.cfg.num_steps_per_env
        alg = self.runner.alg
        scalars = {
            "train/iteration": float(self.iteration),
            "train/learning_rate": float(alg.learning_rate),
            "policy/action_std": float(alg.get_policy().output_std.detach().mean()),
            "perf/env_steps_per_s": steps / elapsed,
            "perf/iteration_ms": 1e3 * elapsed / max(self.iteration - start, 1),
        }
        scalars.update({f"loss/{key}": float(value) for key, value in alg.last_losses.items()})
        bad = [key for key, value in scalars.items() if key.startswith("loss/") and not math.isfinite(value)]
        entries = non_finite_entries(self.agent.state_dict())
        if bad or entries:  # stop before a checkpoint or an export could carry them
            what = bad + ([f"agent state ({describe_entries(entries)})"] if entries else [])
            raise NonFiniteStateError(f"non-finite {', '.join(what)} by iteration {self.iteration}")
        stats = self.env.stats.summary()
        self.env.stats.clear()
        scalars.update(self.env.stats.logged(stats))
        if self.logger is not None:
            self.logger.log(self.iteration, self.env_steps, scalars)
        self.last_scalars = scalars


def agent_from_checkpoint(checkpoint: Mapping[str, Any], device: torch.device | str) -> PpoAgent:
    """The actor-critic of a PPO checkpoint, without an env (for play and export)."""
    cfg = config_from_dict(PpoConfig, checkpoint["config"]["algo"])
    dims = checkpoint["observation_dims"]
    num_envs, action_dim = checkpoint["num_envs"], checkpoint["action_dim"]
    obs = TensorDict({k: torch.zeros(num_envs, d, device=device) for k, d in dims.items()}, batch_size=[num_envs])
    shape = _EnvShape(num_envs, action_dim)
    with contextlib.redirect_stdout(io.StringIO()):
        alg = PPO.construct_algorithm(obs, shape, runner_config(cfg, dims) | {"multi_gpu": None}, str(device))
    agent = PpoAgent(alg)
    agent.load_state_dict(checkpoint["trainer"]["agent"])
    alg.eval_mode()
    return agent


@dataclasses.dataclass
class _EnvShape:
    """What ``PPO.construct_algorithm`` reads of an env."""

    num_envs: int
    num_actions: int
