"""SAC's learned entropy temperature (:class:`Temperature`)."""

from __future__ import annotations

import math

import torch
from torch import nn

# Learned SAC temperature ``alpha`` with a target entropy.
#
# Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (arXiv:1812.05905, 2018),
# section 5: alpha is tuned by minimising ``E[alpha * (H(pi) - H_target)]`` -- it grows when the
# policy's entropy falls below the target and shrinks above it. ``log_alpha`` is the parameter,
# which keeps alpha positive and makes the step size independent of alpha's magnitude. The
# target is ``-ratio * act_dim`` (``ratio = 1`` is the paper's heuristic).


class Temperature(nn.Module):
    """Entropy coefficient ``alpha = exp(log_alpha)``."""

    def __init__(self, init: float, target_entropy: float) -> None:
        super().__init__()
        if init <= 0:
            raise ValueError(f"initial temperature must be positive, got {init}")
        self.target_entropy = target_entropy
        self.log_alpha = nn.Parameter(torch.tensor(math.log(init)))

    def alpha(self) -> torch.Tensor:
        """Current ``alpha``, 0-d, detached (it is a constant for actor and critic losses)."""
        return self.log_alpha.detach().exp()

    def loss(self, entropy: torch.Tensor) -> torch.Tensor:
        """Temperature loss for the batch policy entropy estimate ``entropy`` (0-d, no grad)."""
        return self.log_alpha * (entropy.detach() - self.target_entropy)
