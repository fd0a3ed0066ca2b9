"""Left-right symmetry augmentation of off-policy batches (SAC, FlashSAC).

A robot symmetric about its sagittal plane, in a task whose rewards and terminations are too,
earns the same reward and the same episode end from the mirror image of a transition
``(s, a, r, s', d) -> (M s, M a, r, M s', d)`` as from the transition itself, so the mirror image
is a valid transition the policy never had to collect (Mittal et al., "Symmetry Considerations
for Learning Task Symmetric Robot Policies", ICRA 2024, augment the data of PPO this way).
``algo.mirror_fraction`` of every replay batch is replaced by mirror images: the last
``round(fraction * B)`` rows, which a uniform batch makes a uniform share, so the batch keeps its
size, its cost and its static shape. The maps come from :mod:`unilab_gpu.envs.mirror_map`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab_gpu.envs.mirror_map import MirrorMap, RobotSymmetry, action_mirror, observation_mirror

if TYPE_CHECKING:
    from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv


class MirrorAugmentation:
    """Replaces the last ``round(fraction * B)`` rows of a batch by their mirror images.

    Args:
        policy, critic: mirror maps of the two observation groups the batch holds.
        action: mirror map of the action.
        fraction: share of each batch mirrored, in ``(0, 1]``.
    """

    def __init__(self, policy: MirrorMap, critic: MirrorMap, action: MirrorMap, fraction: float) -> None:
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"algo config: 'algo.mirror_fraction' must be in (0, 1] to mirror, got {fraction!r}")
        self.fraction = fraction
        self.maps = {
            "policy_obs": policy,
            "next_policy_obs": policy,
            "critic_obs": critic,
            "next_critic_obs": critic,
            "action": action,
        }

    @classmethod
    def for_env(cls, env: ManagerBasedRlEnv, critic_group: str, fraction: float) -> MirrorAugmentation:
        """Build the maps of ``env``'s ``policy`` group, ``critic_group`` and action (cold path).

        Raises:
            ValueError: the robot is not mirror-symmetric, or a term has no mirror rule (named).
            MotionFormatError: the robot has no mirror pairs (see ``mirror_name_pairs``).
        """
        symmetry = RobotSymmetry(env)
        return cls(
            observation_mirror(symmetry, "policy"),
            observation_mirror(symmetry, critic_group),
            action_mirror(symmetry),
            fraction,
        )

    def __call__(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A new batch (same keys and shapes): rows ``[B - k, B)`` of the observations and the action
        mirrored, ``k = round(fraction * B)``; rewards and discounts are kept."""
        size = batch["reward"].shape[0]
        keep = size - round(self.fraction * size)
        out = dict(batch)
        for key, mirror in self.maps.items():
            value = batch[key]
            out[key] = torch.cat([value[:keep], mirror(value[keep:])])
        return out
