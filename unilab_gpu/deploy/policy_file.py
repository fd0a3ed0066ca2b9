"""An exported policy file: the ONNX network and its deployment metadata, checked on opening.

The network maps the raw observation vector ``(batch, observation_dim)`` float32 to actions
``(batch, action_dim)`` (observation normaliser inside); the metadata sits in the model's
``metadata_props``, one JSON value per key, which onnxruntime reads without the ``onnx`` package.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

METADATA_VERSION = 3
"""The ``metadata_version`` ``unilab-export`` writes and this runtime reads. History: 2 added
``action_offset_observation_columns`` (residual actions about a motion reference); 3 added per
observation term ``func``, ``params`` (defaults filled in) and ``noise``, the ``commands`` those
terms read (function and parameters), ``robot_model``, ``keyframe``, ``observed_joint_names`` and
``observed_default_joint_pos``: enough to assemble the observation without the training code."""

REQUIRED_KEYS = (
    "observation_dim",
    "observation_terms",
    "commands",
    "observed_joint_names",
    "observed_default_joint_pos",
    "action_dim",
    "action_kind",
    "joint_names",
    "actuator_names",
    "action_low",
    "action_high",
    "action_scale",
    "action_scale_negative",
    "action_offset",
    "action_offset_observation_columns",
    "action_bounds",
    "stiffness",
    "damping",
    "effort_limit",
    "control_dt",
    "physics_dt",
    "decimation",
)
"""Keys the runtime reads; a file lacking one is refused before anything runs."""


class DeploymentError(ValueError):
    """A policy file, model or motion the runtime cannot run; the message is one line naming what."""


def read_metadata(path: str | os.PathLike, session: Any = None) -> dict[str, Any]:
    """The checked metadata of the ONNX file at ``path`` (``session``: an open onnxruntime session
    of it, to avoid loading the file twice).

    Raises:
      DeploymentError: no metadata, a version other than :data:`METADATA_VERSION`, or a key missing.
    """
    if session is None:
        session = _session(path)
    raw = session.get_modelmeta().custom_metadata_map
    if "metadata_version" not in raw:
        raise DeploymentError(
            f"{path}: no deployment metadata (no metadata_version in the ONNX file); export the run with unilab-export"
        )
    try:
        meta = {key: json.loads(value) for key, value in raw.items()}
    except json.JSONDecodeError as error:
        raise DeploymentError(f"{path}: metadata value is not JSON ({error})") from None
    version = meta["metadata_version"]
    if not isinstance(version, int) or version > METADATA_VERSION:
        raise DeploymentError(
            f"{path}: metadata_version {version!r} is newer than this runtime reads ({METADATA_VERSION}); "
            "update the runtime (unilab_gpu/deploy) to the exporting version"
        )
    if version < METADATA_VERSION:
        raise DeploymentError(
            f"{path}: metadata_version {version} lacks what the runtime needs (version {METADATA_VERSION}: term "
            "functions and parameters); re-export the run with unilab-export"
        )
    missing = [key for key in REQUIRED_KEYS if key not in meta]
    if missing:
        raise DeploymentError(f"{path}: metadata lacks {missing}; re-export the run with unilab-export")
    return meta


def _session(path: str | os.PathLike):
    import onnxruntime  # imported here: reading a version constant must not need it

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"policy file not found: {path}")
    try:
        return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own exception types for unreadable files
        reason = " ".join(str(error).split())[:160]
        raise DeploymentError(f"{path}: not a readable ONNX file ({type(error).__name__}: {reason})") from None


class PolicyFile:
    """An exported policy: ``policy(obs)`` maps ``(observation_dim,)`` or ``(batch,
    observation_dim)`` observations to float32 actions of the same batch shape.

    ``metadata`` may replace the file's (checked the same way by the caller); tests use it to
    show that a wrong metadata entry breaks the agreement with the training env.
    """

    def __init__(self, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._session = _session(path)
        self.metadata = read_metadata(path, self._session) if metadata is None else metadata
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        width = self._session.get_inputs()[0].shape[-1]
        if isinstance(width, int) and width != self.metadata["observation_dim"]:
            raise DeploymentError(
                f"{path}: the network reads {width} observation columns, the metadata's observation_dim is "
                f"{self.metadata['observation_dim']}"
            )

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        batch = np.ascontiguousarray(obs.reshape(-1, obs.shape[-1]))
        actions = self._session.run([self._output], {self._input: batch})[0]
        return actions.reshape(*obs.shape[:-1], actions.shape[-1])
