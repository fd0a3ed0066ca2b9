"""The settings SAC and FlashSAC share (:class:`OffPolicyConfig`, keys of ``configs/algo/*.yaml``)
and the update counts the training loop derives from them."""

from __future__ import annotations

from dataclasses import dataclass

from unilab_gpu.rl.config import check_field, preset_values

_SAC = preset_values("sac")


@dataclass
class OffPolicyConfig:
    """Settings shared by SAC and FlashSAC (replay, schedule, optimisation, temperature).

    ``batch_size``, ``buffer_capacity_per_env``, ``final_obs_fraction``, ``warmup_steps`` and
    ``updates_per_step`` are read by the training loop; the agents read the rest. Defaults are the
    values of ``configs/algo/sac.yaml`` (holosoma's FastSAC G1 tracking preset at 4096 envs, each
    value's source beside it), read from there; :class:`~unilab_gpu.rl.flashsac.FlashSacConfig`
    takes its own from ``flashsac.yaml``.
    """

    batch_size: int = _SAC["batch_size"]
    buffer_capacity_per_env: int = _SAC["buffer_capacity_per_env"]
    final_obs_fraction: float = _SAC["final_obs_fraction"]
    warmup_steps: int = _SAC["warmup_steps"]
    updates_per_step: int = _SAC["updates_per_step"]
    gamma: float = _SAC["gamma"]
    n_step: int = _SAC["n_step"]
    tau: float = _SAC["tau"]
    learning_rate: float = _SAC["learning_rate"]
    learning_rate_end: float = _SAC["learning_rate_end"]
    learning_rate_decay_steps: int = 100_000
    """Updates over which the cosine schedule decays; ``0`` in a preset: the whole run
    (``unilab-train`` sets it from ``total_env_steps``, see :func:`run_updates`). Agents built
    directly, without a run length, decay over this many."""
    adam_betas: tuple[float, float] = tuple(_SAC["adam_betas"])
    weight_decay: float = _SAC["weight_decay"]
    max_grad_norm: float = _SAC["max_grad_norm"]
    actor_update_period: int = _SAC["actor_update_period"]
    num_atoms: int = _SAC["num_atoms"]
    v_min: float = _SAC["v_min"]
    v_max: float = _SAC["v_max"]
    value_range: str = _SAC["value_range"]
    """Support of the distributional critics: ``"fixed"``, ``[v_min, v_max]``; ``"reward_scale"``,
    sized from the task's rewards at the first update (:func:`value_bound`), which replaces
    ``v_min`` and ``v_max``."""
    value_range_margin: float = _SAC["value_range_margin"]
    """With ``value_range: reward_scale``: the support's half-width over the bound of the first batch."""
    mirror_fraction: float = _SAC["mirror_fraction"]
    """Share of every batch replaced by its left-right mirror image (:mod:`unilab_gpu.rl.symmetry`);
    0 disables. Needs a mirror-symmetric robot and a mirror rule for every observation term."""
    log_std_min: float = _SAC["log_std_min"]
    log_std_max: float = _SAC["log_std_max"]
    alpha_init: float = _SAC["alpha_init"]
    target_entropy_ratio: float = _SAC["target_entropy_ratio"]
    compile: bool = _SAC["compile"]
    capture_update: bool = _SAC["capture_update"]
    """On CUDA, capture each update (replay sampling, losses, backward, optimizer, target and
    temperature steps) as a CUDA graph and replay it (:mod:`unilab_gpu.rl.update_step`); on the
    CPU the same update runs directly (compiled where ``compile`` is set)."""

    def __post_init__(self) -> None:
        betas = tuple(self.adam_betas)  # YAML gives a list
        check_field(len(betas) == 2, "adam_betas", "two numbers [beta1, beta2]", self.adam_betas)
        self.adam_betas = (betas[0], betas[1])
        check_field(self.batch_size >= 1, "batch_size", ">= 1", self.batch_size)
        check_field(self.n_step >= 1, "n_step", ">= 1", self.n_step)
        check_field(
            self.buffer_capacity_per_env > self.n_step,
            "buffer_capacity_per_env",
            f"> n_step ({self.n_step})",
            self.buffer_capacity_per_env,
        )
        check_field(0.0 <= self.gamma <= 1.0, "gamma", "in [0, 1]", self.gamma)
        check_field(0.0 < self.tau <= 1.0, "tau", "in (0, 1]", self.tau)
        check_field(self.num_atoms >= 2, "num_atoms", ">= 2", self.num_atoms)
        check_field(self.v_max > self.v_min, "v_max", f"> v_min ({self.v_min})", self.v_max)
        ranges = ("fixed", "reward_scale")
        check_field(self.value_range in ranges, "value_range", "'fixed' or 'reward_scale'", self.value_range)
        check_field(self.value_range_margin >= 1.0, "value_range_margin", ">= 1", self.value_range_margin)
        bounded = self.value_range == "fixed" or self.gamma < 1.0
        check_field(bounded, "gamma", "< 1 with value_range 'reward_scale' (a finite horizon)", self.gamma)
        check_field(0.0 <= self.mirror_fraction <= 1.0, "mirror_fraction", "in [0, 1]", self.mirror_fraction)
        low = self.log_std_min
        check_field(self.log_std_max > low, "log_std_max", f"> log_std_min ({low})", self.log_std_max)
        check_field(self.actor_update_period >= 1, "actor_update_period", ">= 1", self.actor_update_period)
        check_field(self.updates_per_step >= 1, "updates_per_step", ">= 1", self.updates_per_step)
        check_field(self.alpha_init > 0, "alpha_init", "> 0", self.alpha_init)
        check_field(self.max_grad_norm >= 0, "max_grad_norm", ">= 0 (0 disables clipping)", self.max_grad_norm)
        check_field(len(self.adam_betas) == 2, "adam_betas", "two numbers", self.adam_betas)


def steps_before_updates(warmup_steps: int, n_step: int) -> int:
    """Env steps in replay before the trainer's first update: the warm-up, and at least one full
    n-step window with its successor observation."""
    return max(warmup_steps, n_step + 1)


def run_updates(cfg: OffPolicyConfig, iterations: int) -> int:
    """Gradient updates of a run of ``iterations`` (from :func:`steps_before_updates` on), at least 1."""
    first = steps_before_updates(cfg.warmup_steps, cfg.n_step)
    return max(1, (iterations - first + 1) * cfg.updates_per_step)
