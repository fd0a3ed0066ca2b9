"""A trained policy read from a run folder, a checkpoint or an exported ONNX file, with the
training setup it expects (``unilab-play``, ``unilab-eval``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.evaluation.rollout import Policy, agent_policy
from unilab_gpu.rl.agents import agent_from_checkpoint
from unilab_gpu.rl.checkpoint import load_checkpoint, resolve_checkpoint

ONNX_KEYS = ("task", "env_overrides", "observation_group", "observation_dim", "action_dim", "algo")
"""Metadata keys of an exported file that a rollout needs."""


@dataclass(frozen=True)
class TrainedPolicy:
    """A trained policy and the training setup it expects (:func:`load_policy`)."""

    task: str
    """The task it was trained on."""
    env_overrides: list[str]
    """The training run's task overrides."""
    observation_dims: dict[str, int]
    """The observation groups it reads -> their widths."""
    action_dim: int
    source: str
    """One line for the user: algorithm and training steps, or the exported file."""
    path: Path
    """The file read (the checkpoint, or the ONNX file)."""
    make: Callable[[torch.device], Policy]
    """Builds the policy for envs on a device."""

    def policy_for(self, env: ManagerBasedRlEnv, task: str) -> Policy:
        """The policy for ``env`` (built from ``task``).

        Raises:
            ValueError: the env's observation widths or action width differ from the policy's.
        """
        dims = {group: env.observation_dims.get(group) for group in self.observation_dims}
        if (dims, env.action_dim) != (self.observation_dims, self.action_dim):
            raise ValueError(
                f"task '{task}' has (observation dims, action dim) {(dims, env.action_dim)}, "
                f"the policy {(self.observation_dims, self.action_dim)}"
            )
        return self.make(env.device)


def load_policy(
    checkpoint_path: str | Path | None = None, onnx: str | Path | None = None, compile: bool = False
) -> TrainedPolicy:
    """The deterministic policy of a run folder or checkpoint, or of an exported ONNX file (run
    with onnxruntime on the CPU); exactly one of the two.

    Raises:
        CheckpointError: the run folder has no readable checkpoint.
        FileNotFoundError: no file at ``onnx``.
        ValueError: ``onnx`` is not a readable ONNX file or lacks :data:`ONNX_KEYS`; or neither or
            both sources were given.
    """
    if (checkpoint_path is None) == (onnx is None):
        raise ValueError("give either a run folder / checkpoint or --onnx FILE")
    if onnx is not None:
        policy, meta = read_onnx_policy(onnx)
        return TrainedPolicy(
            meta["task"],
            list(meta["env_overrides"]),
            {meta["observation_group"]: meta["observation_dim"]},
            meta["action_dim"],
            f"{meta['algo']} exported to {onnx}",
            Path(onnx),
            lambda device: policy,
        )
    checkpoint = load_checkpoint(checkpoint_path)
    cfg = checkpoint["config"]
    return TrainedPolicy(
        cfg["task"],
        list(cfg["env"]["overrides"]),
        dict(checkpoint["observation_dims"]),
        checkpoint["action_dim"],
        f"{cfg['algo']['name']} after {checkpoint['trainer']['env_steps']:,} training env steps",
        resolve_checkpoint(checkpoint_path),
        lambda device: agent_policy(agent_from_checkpoint(checkpoint, device, compile=compile)),
    )


def read_onnx_policy(path: str | Path):
    """The policy (:class:`~unilab_gpu.export.onnx_policy.OnnxPolicy`) and metadata of an exported
    file; a one-line ``ValueError`` for anything else."""
    from unilab_gpu.export.onnx_policy import OnnxPolicy

    if not Path(path).is_file():
        raise FileNotFoundError(f"--onnx: no file at {path}")
    try:
        policy = OnnxPolicy(path)
    except Exception as error:  # onnx and onnxruntime raise protobuf, runtime and value errors
        reason = " ".join(str(error).split())[:160]
        raise ValueError(f"--onnx: {path} is not a readable ONNX policy ({type(error).__name__}: {reason})") from None
    missing = [key for key in ONNX_KEYS if key not in policy.metadata]
    if missing:
        raise ValueError(f"--onnx: {path} lacks the metadata {missing} that unilab-export writes; re-export the run")
    return policy, policy.metadata
