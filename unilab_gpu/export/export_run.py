"""Export a trained run's policy: from a live env and agent, or from a checkpoint."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from unilab_gpu.envs.make_env import make_env
from unilab_gpu.envs.manager_based_rl_env import ManagerBasedRlEnv
from unilab_gpu.export.holosoma import CONVENTION as HOLOSOMA
from unilab_gpu.export.holosoma import (
    HolosomaTrackingPolicy,
    embedded_reference,
    holosoma_metadata,
    write_holosoma_onnx,
)
from unilab_gpu.export.metadata import deployment_metadata
from unilab_gpu.export.onnx_policy import POLICY_FILE, write_onnx
from unilab_gpu.export.policy import deterministic_policy
from unilab_gpu.export.urdf import urdf_of
from unilab_gpu.rl.agents import agent_from_checkpoint
from unilab_gpu.rl.checkpoint import describe_entries, load_checkpoint, non_finite_entries, resolve_checkpoint
from unilab_gpu.utils.files import check_output

CONVENTIONS = ("unilab", HOLOSOMA)
"""File conventions ``unilab-export --convention`` writes: ours (docs/export.md) or holosoma's
whole-body-tracking ONNX (``export.holosoma``)."""


def export_agent(
    env: ManagerBasedRlEnv,
    agent,
    task: str,
    algo: str,
    path: str | os.PathLike,
    env_overrides: Sequence[str] = (),
    convention: str = "unilab",
    motion: str | os.PathLike | None = None,
    exclusive: bool = False,
) -> Path:
    """Write ``agent``'s deterministic policy for ``env``'s ``policy`` group to ``path``
    (``env`` was built from ``task`` with ``env_overrides``), in ``convention`` (one of
    :data:`CONVENTIONS`; ``holosoma`` embeds the run's clip, or the clip file ``motion``);
    ``exclusive``: only if no file is there when it is done (another export to the same path
    keeps its file).

    Raises:
        ValueError: the policy's parameters or buffers (normaliser statistics) hold NaN or inf,
            or the policy cannot be written in ``convention`` (the reason in one line); nothing
            is written.
    """
    policy = deterministic_policy(agent)
    bad = non_finite_entries(policy.state_dict())
    if bad:
        listing = describe_entries(bad)
        raise ValueError(f"export refused, nothing was written: the policy holds non-finite values ({listing})")
    metadata = deployment_metadata(env, task, algo, list(env_overrides))
    if convention == HOLOSOMA:
        module = HolosomaTrackingPolicy(policy, metadata, embedded_reference(env, motion), env.sim.mj_model)
        robot_urdf = urdf_of(env.sim.mj_model, Path(str(env.cfg.sim.model)).stem)
        return write_holosoma_onnx(module, holosoma_metadata(metadata, robot_urdf), path, exclusive)
    if convention != "unilab":
        raise ValueError(f"--convention must be one of {list(CONVENTIONS)}, got {convention!r}")
    return write_onnx(policy, env.observation_dims["policy"], metadata, path, exclusive)


def export_checkpoint(
    checkpoint_path: str | os.PathLike,
    out: str | os.PathLike | None = None,
    force: bool = False,
    convention: str = "unilab",
    motion: str | os.PathLike | None = None,
) -> Path:
    """Export a run folder's (or a checkpoint file's) policy; default ``<run folder>/policy.onnx``.

    The output is checked first (:func:`~unilab_gpu.utils.files.check_output`: an existing file
    needs ``force``; never the checkpoint itself or a run's config). The env is rebuilt on the CPU
    from the checkpoint's config (one world) for the metadata.
    """
    source = resolve_checkpoint(checkpoint_path)
    path = Path(out) if out is not None else source.parent / POLICY_FILE
    check_output(path, "--out", force=force, inputs=[source], example=POLICY_FILE, rewrites=POLICY_FILE)
    checkpoint = load_checkpoint(checkpoint_path)
    cfg = checkpoint["config"]
    env = make_env(cfg["task"], num_envs=1, device="cpu", overrides=cfg["env"]["overrides"], compile=False)
    agent = agent_from_checkpoint(checkpoint, "cpu")
    overrides = cfg["env"]["overrides"]
    return export_agent(env, agent, cfg["task"], cfg["algo"]["name"], path, overrides, convention, motion, not force)


def export_after_training(env: ManagerBasedRlEnv, agent, cfg, run_dir: str | os.PathLike) -> str:
    """Write ``<run_dir>/policy.onnx`` at the end of a run; returns one console line saying
    where, or why not (the run itself has succeeded and its checkpoint is saved either way)."""
    path = Path(run_dir) / POLICY_FILE
    try:
        export_agent(env, agent, cfg.task, cfg.algo.name, path, list(cfg.env.overrides))
    except ModuleNotFoundError as error:
        return f"export: skipped, {error.name} is not installed (pip install 'unilab-gpu[export]')"
    except Exception as error:  # a failed export must not turn a finished run into a failed one
        reason = " ".join(str(error).split())[:200]
        return f"export: failed ({type(error).__name__}: {reason}); retry with: unilab-export {run_dir}"
    return f"export: policy {path}"
