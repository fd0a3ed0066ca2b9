"""An exported policy's metadata brought to the current version, its network untouched.

A file exported before a metadata key existed lacks it (version 3: ``terrain`` and
``terrain_sha256``; versions 3 and 4: ``physics``). The runtime reads such a file with the value
the lack means, so ``unilab-sim2sim`` runs it on its MJCF's own physics options, not on those it
trained with. Where the run folder is gone, :func:`upgrade_policy_file` takes the missing keys from
the env the metadata names: it rebuilds the task with the file's training overrides (one row, on
the CPU) and writes the missing keys only if that env is the one the policy was exported from,
every key both have agreeing (the ground by its heights' sha256) and each other missing key
meaning what its lack means. The graph, its weights and every key already there stay byte for byte.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unilab_gpu.deploy.policy_file import METADATA_VERSION, OLDEST_METADATA_VERSION, OPTIONAL_KEYS, DeploymentError
from unilab_gpu.utils.files import check_output, write_atomic

REL_TOL = 1e-6
"""Relative tolerance of a number in the file against the rebuilt env's (float32 values and dt sums
written by another version of the exporter)."""

COMPARED_ELSEWHERE = ("metadata_version", "terrain")
"""Keys not compared value for value: the version (the point of the upgrade) and the terrain's config,
which gained training-only fields (curriculum settings); the ground itself is ``terrain_sha256``."""


@dataclass(frozen=True)
class Upgrade:
    """What :func:`upgrade_policy_file` did: the file written (the input, unwritten, when it was
    already current), the version before and the keys added (none when it was current)."""

    path: Path
    version: int
    added: dict[str, Any]


def upgrade_policy_file(path: str | os.PathLike, out: str | os.PathLike | None = None, force: bool = False) -> Upgrade:
    """Write the policy file at ``path`` with metadata of :data:`METADATA_VERSION` to ``out``
    (default: ``path`` itself, replaced atomically; another existing file needs ``force``).

    Raises:
      DeploymentError: not a policy file of a version this runtime reads, or the config the metadata
        names no longer builds the env it was exported from (the keys that differ are named).
      OutputPathError: ``out`` may not be written.
    """
    import onnx  # optional dependency

    source = Path(path)
    target = source if out is None else check_output(out, "--out", force=force, inputs=[source], example="policy.onnx")
    if not source.is_file():
        raise DeploymentError(f"{source}: no such policy file")
    try:
        model = onnx.load(str(source), load_external_data=False)
    except Exception as error:  # protobuf's DecodeError and onnx's own: no common base class
        raise DeploymentError(f"{source}: not a readable ONNX policy ({type(error).__name__})") from None
    raw = {prop.key: prop.value for prop in model.metadata_props}
    meta = _decoded(raw, source)
    version = meta["metadata_version"]
    if version == METADATA_VERSION:  # nothing to add: nothing written
        return Upgrade(source, version, {})
    rebuilt = _rebuilt_metadata(meta, source)
    _check_same_env(meta, rebuilt, source)
    added = {key: rebuilt[key] for key in OPTIONAL_KEYS if key not in meta}
    raw["metadata_version"] = json.dumps(METADATA_VERSION)
    raw.update({key: json.dumps(value) for key, value in added.items()})
    onnx.helper.set_model_props(model, raw)
    onnx.checker.check_model(model)
    data = model.SerializeToString()
    write_atomic(target, lambda file: file.write(data), exclusive=target != source and not force)
    return Upgrade(target, version, added)


def _decoded(raw: dict[str, str], source: Path) -> dict[str, Any]:
    """The file's metadata as JSON values, its version one this runtime reads."""
    if "metadata_version" not in raw:
        raise DeploymentError(
            f"{source}: no deployment metadata (no metadata_version); export the run with unilab-export"
        )
    try:
        meta = {key: json.loads(value) for key, value in raw.items()}
    except json.JSONDecodeError as error:
        raise DeploymentError(f"{source}: metadata value is not JSON ({error})") from None
    version = meta["metadata_version"]
    if isinstance(version, bool) or not isinstance(version, int) or version > METADATA_VERSION:
        raise DeploymentError(
            f"{source}: metadata_version {version!r} is not one this runtime reads ({OLDEST_METADATA_VERSION} to "
            f"{METADATA_VERSION}); nothing to upgrade"
        )
    if version < OLDEST_METADATA_VERSION:
        raise DeploymentError(
            f"{source}: metadata_version {version} lacks the observation terms an upgrade would need; "
            "re-export the run with unilab-export"
        )
    return meta


def _rebuilt_metadata(meta: dict[str, Any], source: Path) -> dict[str, Any]:
    """The metadata the current code exports for the env ``meta`` names (its task and overrides)."""
    from unilab_gpu.envs.make_env import make_env
    from unilab_gpu.export.metadata import deployment_metadata

    task, overrides = meta.get("task"), list(meta.get("env_overrides") or [])
    try:
        env = make_env(task, 1, "cpu", overrides, compile=False, capture=False, announce=False)
    except (ValueError, KeyError, FileNotFoundError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise DeploymentError(
            f"{source}: cannot rebuild its env (task {task!r} with its training overrides): {message}; "
            "re-export the run with unilab-export"
        ) from None
    return deployment_metadata(env, task, meta.get("algo"), overrides, meta.get("observation_group", "policy"))


def _check_same_env(meta: dict[str, Any], rebuilt: dict[str, Any], source: Path) -> None:
    """Refuse unless the rebuilt env is the exported one: every shared key alike, every other key the
    file lacks (besides ``physics``) meaning what its lack means."""
    differ = [
        key for key in meta if key in rebuilt and key not in COMPARED_ELSEWHERE and not _same(meta[key], rebuilt[key])
    ]
    differ += [
        key for key, (_, lack) in OPTIONAL_KEYS.items() if key != "physics" and key not in meta and rebuilt[key] != lack
    ]
    if differ:
        raise DeploymentError(
            f"{source}: the config its metadata names (task {meta.get('task')!r}) no longer builds the env it was "
            f"exported from ({', '.join(differ)} differ), so its physics cannot be taken from it; re-export the run "
            "with unilab-export"
        )


def _same(a: Any, b: Any) -> bool:
    """JSON values alike, numbers within :data:`REL_TOL`."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    return a == b
