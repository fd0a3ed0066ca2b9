"""FlashSAC's networks: the actor (:class:`FlashActor`) and the twin categorical critic
(:class:`TwinFlashCritic`) of :mod:`unilab_gpu.rl.flashsac`; the norms they are held to after every
optimizer step are in :mod:`unilab_gpu.rl.weight_norm`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from unilab_gpu.rl.squashed_gaussian import SquashedGaussian

# FlashSAC networks: BatchNorm embedder, inverted residual blocks, RMSNorm, categorical critic.
#
# Architecture of FlashSAC (Kim, Lee et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement
# Learning for High-Dimensional Robot Control", arXiv:2604.04539, 2026), which builds on SimBa
# (Lee et al., ICLR 2025: residual MLP blocks with input normalisation) and SimbaV2 (Lee et al.,
# ICML 2025: norm-bounded features and unit-norm weights):
#
#     x -> BatchNorm -> Linear(in, h)                                   (embedder)
#       -> [ x + ReLU(BN(Linear(4h, h)(ReLU(BN(Linear(h, 4h)(x)))))) ] * num_blocks
#       -> RMSNorm -> head
#
# BatchNorm sits before each nonlinearity so that large replay batches, not per-sample scale,
# set the feature statistics. Hidden linears carry no bias (the BatchNorm that follows has one).
# After each optimizer step (``weight_norm.constrain_norms``) every trunk and critic-head linear
# weight row is projected back to unit norm (``weight_norm.unit_norm_weights``) and the affine
# parameters of every BatchNorm and RMSNorm are rescaled to their initial norm
# (``weight_norm.normalization_affines``).
# The actor's mean and log-std heads stay outside both, as in the authors' code.
#
# Initialisation follows the authors' code (github.com/leeyngdo/FlashSAC,
# ``flash_rl/agents/flashSAC/layer.py``): orthogonal linear weights (then unit rows), zero critic
# head bias, and actor heads that start near zero (see :class:`FlashActor`).
#
# Running statistics (used wherever ``batch_stats=False``: acting, the actor's next-state
# sample in the critic loss, the critic inside the actor loss) follow the batch statistics with
# ``momentum`` (paper: 0.01, a memory of about 100 updates). They must keep up with the weights:
# at a high learning rate and a few thousand updates (small tasks) a 100-update lag lets the
# acting policy and the critic the actor climbs drift far from the networks being trained, so
# small tasks raise it (``batch_norm_momentum`` of the FlashSAC config).
#
# BatchNorm mode is an explicit ``batch_stats`` argument instead of ``module.train()`` so that
# one compiled update can use batch statistics for some forwards and running statistics for
# others without recompiling. ``batch_stats=True`` also updates the running statistics.


def _orthogonal_linear(in_dim: int, out_dim: int, bias: bool = False) -> nn.Linear:
    linear = nn.Linear(in_dim, out_dim, bias=bias)
    nn.init.orthogonal_(linear.weight)
    if bias:
        nn.init.zeros_(linear.bias)
    return linear


class BatchNorm(nn.Module):
    """Per-feature batch normalisation over ``(batch, dim)`` with an explicit mode flag."""

    running_mean: torch.Tensor  # (dim,)
    running_var: torch.Tensor  # (dim,)

    def __init__(self, dim: int, momentum: float = 0.01, eps: float = 1e-5) -> None:
        super().__init__()
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))
        self.register_buffer("running_mean", torch.zeros(dim))
        self.register_buffer("running_var", torch.ones(dim))

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, batch_stats, self.momentum, self.eps
        )


class InvertedResidualBlock(nn.Module):
    """``x + ReLU(BN(W2 ReLU(BN(W1 x))))`` with ``W1: h -> expansion*h``, ``W2: expansion*h -> h``."""

    def __init__(self, hidden_dim: int, expansion: int = 4, momentum: float = 0.01) -> None:
        super().__init__()
        self.expand = _orthogonal_linear(hidden_dim, expansion * hidden_dim)
        self.norm1 = BatchNorm(expansion * hidden_dim, momentum)
        self.contract = _orthogonal_linear(expansion * hidden_dim, hidden_dim)
        self.norm2 = BatchNorm(hidden_dim, momentum)

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        y = F.relu(self.norm1(self.expand(x), batch_stats))
        y = F.relu(self.norm2(self.contract(y), batch_stats))
        return x + y


class FlashTrunk(nn.Module):
    """Embedder, ``num_blocks`` inverted residual blocks and a final RMSNorm: ``(B, in) -> (B, h)``.

    ``momentum`` is that of every BatchNorm's running statistics.
    """

    def __init__(self, in_dim: int, hidden_dim: int, num_blocks: int, momentum: float = 0.01) -> None:
        super().__init__()
        self.input_norm = BatchNorm(in_dim, momentum)
        self.embed = _orthogonal_linear(in_dim, hidden_dim)
        self.blocks = nn.ModuleList([InvertedResidualBlock(hidden_dim, momentum=momentum) for _ in range(num_blocks)])
        self.output_norm = nn.RMSNorm(hidden_dim, eps=1e-6)

    def forward(self, x: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        x = self.embed(self.input_norm(x, batch_stats))
        for block in self.blocks:
            x = block(x, batch_stats)
        return self.output_norm(x)


class FlashActor(SquashedGaussian):
    """Squashed-Gaussian policy on a FlashSAC trunk.

    The mean and log-std heads are free linears (no unit-norm rows) that start near zero, after
    the authors' fix of the head initialisation (github.com/leeyngdo/FlashSAC, commit 9100e66,
    ``NormalTanhPolicy``): mean weights ``N(0, 1e-3^2)``, log-std weights and both biases 0, and
    log-std bounded to ``[-5, 0]`` (the defaults here). Every initial pre-tanh mean is then about
    0 and every log-std the middle of its range (-2.5: std 0.08), instead of the means of SD ~1
    and log-stds spread over the whole range that unit-norm heads over RMS-normalised features
    give.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden_dim: int,
        num_blocks: int,
        log_std_min: float = -5.0,
        log_std_max: float = 0.0,
        momentum: float = 0.01,
    ) -> None:
        super().__init__(log_std_min, log_std_max)
        self.act_dim = act_dim
        self.trunk = FlashTrunk(obs_dim, hidden_dim, num_blocks, momentum)
        self.mean_head = nn.Linear(hidden_dim, act_dim)
        self.log_std_head = nn.Linear(hidden_dim, act_dim)
        nn.init.normal_(self.mean_head.weight, std=1e-3)
        for p in (self.mean_head.bias, self.log_std_head.weight, self.log_std_head.bias):
            nn.init.zeros_(p)

    def forward(self, obs: torch.Tensor, batch_stats: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``(batch, obs_dim)`` -> pre-tanh ``mean`` and ``log_std``, each ``(batch, act_dim)``."""
        h = self.trunk(obs, batch_stats)
        return self.mean_head(h), self.bounded(self.log_std_head(h))


class TwinFlashCritic(nn.Module):
    """Two categorical critics on FlashSAC trunks; logits ``(2, batch, num_atoms)``."""

    def __init__(
        self, obs_dim: int, act_dim: int, hidden_dim: int, num_blocks: int, num_atoms: int, momentum: float = 0.01
    ) -> None:
        super().__init__()
        self.trunks = nn.ModuleList([FlashTrunk(obs_dim + act_dim, hidden_dim, num_blocks, momentum) for _ in range(2)])
        self.heads = nn.ModuleList([_orthogonal_linear(hidden_dim, num_atoms, bias=True) for _ in range(2)])

    def forward(self, obs: torch.Tensor, action: torch.Tensor, batch_stats: bool) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([head(trunk(x, batch_stats)) for trunk, head in zip(self.trunks, self.heads, strict=True)])

    def joint(
        self,
        obs: torch.Tensor,
        action: torch.Tensor,
        next_obs: torch.Tensor,
        next_action: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits for ``(s, a)`` and ``(s', a')`` from one batch-statistics forward.

        Concatenating the two batches makes every BatchNorm normalise both with the same
        statistics, so current and bootstrap values live on one feature scale (the joint forward
        of CrossQ, Bhatt et al., ICLR 2024, used by FlashSAC). Returns two ``(2, batch, atoms)``.
        """
        logits = self(torch.cat([obs, next_obs]), torch.cat([action, next_action]), batch_stats=True)
        return logits.split(obs.shape[0], dim=1)
