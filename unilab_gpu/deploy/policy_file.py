"""An exported policy file: the ONNX network and its deployment metadata, checked on opening.

The network maps the raw observation vector ``(batch, observation_dim)`` float32 to actions
``(batch, action_dim)`` (observation normaliser inside); the metadata sits in the model's
``metadata_props``, one JSON value per key, which onnxruntime reads without the ``onnx`` package.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from .physics import CONES, PHYSICS_KEYS

METADATA_VERSION = 5
"""The ``metadata_version`` ``unilab-export`` writes and this runtime reads. History: 2 added
``action_offset_observation_columns`` (residual actions about a motion reference); 3 added per
observation term ``func``, ``params`` (defaults filled in) and ``noise``, the ``commands`` those
terms read (function and parameters), ``robot_model``, ``keyframe``, ``observed_joint_names`` and
``observed_default_joint_pos``: enough to assemble the observation without the training code; 4
added ``terrain`` (the generated ground's config, ``null`` on flat ground) and ``terrain_sha256``
(of its heights), which a version-3 file lacks and means flat ground; 5 added ``physics`` (the
options the model trained with, ``deploy.physics``), which an older file lacks and means the
MJCF's own options."""

OLDEST_METADATA_VERSION = 3
"""The oldest ``metadata_version`` this runtime still reads (what it adds since is optional)."""

OPTIONAL_KEYS = {"terrain": (4, None), "terrain_sha256": (4, None), "physics": (5, None)}
"""Keys added after :data:`OLDEST_METADATA_VERSION`: the version that added each, and the value its
lack means in an older file (no terrain, flat ground, the MJCF's own physics options). A file of
that version or later lacks it only when edited, and is refused: a deleted ``physics`` would run
the policy on the scene's options without a word."""

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


NAME_KEYS = {
    "task": "a task name such as 'go2_velocity'",
    "algo": "null or an algorithm name such as 'sac'",
    "robot_model": "null or a robot name such as 'go2' (assets/robots/go2/scene.xml) or an MJCF path",
    "keyframe": "null or a keyframe name such as 'stand'",
}
"""Keys read as names where a file has them, with what each must be."""


class DeploymentError(ValueError):
    """A policy file, model or motion the runtime cannot run; the message is one line naming what."""


def read_metadata(path: str | os.PathLike, session: Any = None) -> dict[str, Any]:
    """The checked metadata of the ONNX file at ``path`` (``session``: an open onnxruntime session
    of it, to avoid loading the file twice).

    Raises:
      DeploymentError: no metadata, a version outside ``[OLDEST_METADATA_VERSION, METADATA_VERSION]``,
        or a key missing. :data:`OPTIONAL_KEYS` a file lacks get their flat-ground values.
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
    if not _is_int(version):
        raise DeploymentError(
            f"{path}: metadata 'metadata_version' must be an integer such as {METADATA_VERSION}, got "
            f"{_shown(version)}; re-export the run with unilab-export"
        )
    if version > METADATA_VERSION:
        raise DeploymentError(
            f"{path}: metadata_version {version!r} is newer than this runtime reads ({METADATA_VERSION}); "
            "update the runtime (unilab_gpu/deploy) to the exporting version"
        )
    if version < OLDEST_METADATA_VERSION:
        raise DeploymentError(
            f"{path}: metadata_version {version} lacks what the runtime needs (version {OLDEST_METADATA_VERSION}: "
            "term functions and parameters); re-export the run with unilab-export"
        )
    missing = [key for key in REQUIRED_KEYS if key not in meta]
    missing += [key for key, (added, _) in OPTIONAL_KEYS.items() if version >= added and key not in meta]
    if missing:
        raise DeploymentError(
            f"{path}: metadata lacks {missing}, which metadata_version {version} has; "
            "re-export the run with unilab-export"
        )
    for key, (_, value) in OPTIONAL_KEYS.items():
        meta.setdefault(key, value)
    check_metadata(meta, path)
    return meta


def check_metadata(meta: dict[str, Any], source: str | os.PathLike) -> None:
    """Refuse metadata whose numbers the runtime cannot trust, before anything runs: every number
    finite, every per-action list ``action_dim`` long, ``decimation >= 1``, ``control_dt =
    decimation * physics_dt``, the observation terms and commands well formed.

    Raises:
      DeploymentError: ``<source>: metadata '<key>' must be <expected>, got <value>`` (one line).
    """
    check = _Checker(source)
    obs_dim = check.integer(meta, "observation_dim", low=1)
    width = check.integer(meta, "action_dim", low=1)
    check.number(meta, "physics_dt", positive=True)
    control_dt = check.number(meta, "control_dt", positive=True)
    decimation = check.integer(meta, "decimation", low=1)
    period = decimation * meta["physics_dt"]
    if abs(control_dt - period) > 1e-6 * period:
        check.fail(
            "control_dt", f"decimation x physics_dt = {decimation} x {meta['physics_dt']:g} = {period:g} s", control_dt
        )
    check.of_type(meta, "action_kind", str, "a string such as 'joint_position'")
    for key, expected in NAME_KEYS.items():  # read as names and paths: a number here was a traceback
        if key in meta and not ((isinstance(meta[key], str) and meta[key]) or (meta[key] is None and key != "task")):
            check.fail(key, expected, meta[key])
    overrides = meta.get("env_overrides")
    if overrides is not None and not (isinstance(overrides, list) and all(isinstance(o, str) for o in overrides)):
        check.fail("env_overrides", "null or a list of 'key=value' strings (the task's overrides)", overrides)
    for key in ("joint_names", "actuator_names"):
        check.each(meta, key, width, lambda v: isinstance(v, str), "a name")
    for key in ("action_low", "action_high", "action_scale", "action_scale_negative", "action_offset"):
        check.each(meta, key, width, _finite, "a finite number")
    for key in ("stiffness", "damping"):
        check.each(meta, key, width, lambda v: _finite(v) and v >= 0, "a finite number >= 0")
    check.each(meta, "effort_limit", width, lambda v: v is None or (_finite(v) and v > 0), "null or a number > 0")
    bound = lambda v: v is None or _finite(v)  # noqa: E731
    check.each(
        meta,
        "action_bounds",
        width,
        lambda v: isinstance(v, list) and len(v) == 2 and all(map(bound, v)) and not (None not in v and v[0] > v[1]),
        "[low, high] with low <= high (null: unbounded)",
    )
    for i, (low, high) in enumerate(zip(meta["action_low"], meta["action_high"], strict=True)):
        if low > high:
            check.fail(f"action_low[{i}]", f"<= action_high[{i}] ({high})", low)
    if meta["action_offset_observation_columns"] is not None:
        check.each(
            meta,
            "action_offset_observation_columns",
            width,
            lambda v: _is_int(v) and 0 <= v < obs_dim,
            f"an observation column in [0, {obs_dim})",
        )
    joints = check.each(meta, "observed_joint_names", None, lambda v: isinstance(v, str), "a name")
    check.each(meta, "observed_default_joint_pos", len(joints), _finite, "a finite number", "observed joint")
    terms = check.of_type(meta, "observation_terms", list, "a list of terms")
    for i, term in enumerate(terms):
        key = f"observation_terms[{i}]"
        if not isinstance(term, dict):
            check.fail(key, "a term (a mapping)", term)
        for field, kind, expected in (
            ("name", str, "a name"),
            ("func", str, "a dotted path"),
            ("params", dict, "a mapping"),
        ):
            if not isinstance(term.get(field), kind):
                check.fail(f"{key}.{field}", expected, term.get(field))
        for field, low in (("start", 0), ("stop", 1), ("dim", 1), ("history", 1)):
            if not (_is_int(term.get(field)) and term[field] >= low):
                check.fail(f"{key}.{field}", f"an integer >= {low}", term.get(field))
        if not _finite(term.get("scale")):
            check.fail(f"{key}.scale", "a finite number", term.get("scale"))
        if "clip" not in term:
            raise DeploymentError(f"{check.source}: metadata '{key}.clip' is missing (null or [low, high])")
        clip = term["clip"]
        if clip is not None and not (
            isinstance(clip, list) and len(clip) == 2 and all(map(_finite, clip)) and clip[0] < clip[1]
        ):
            check.fail(f"{key}.clip", "null or [low, high] of finite numbers with low < high", clip)
    commands = check.of_type(meta, "commands", dict, "a mapping of command name -> {func, params}")
    for name, command in commands.items():
        if not (
            isinstance(command, dict)
            and isinstance(command.get("func"), str)
            and isinstance(command.get("params"), dict)
        ):
            check.fail(f"commands.{name}", "{func: <class path>, params: {...}}", command)
    physics = meta.get("physics")
    if physics is not None:
        if not isinstance(physics, dict):
            check.fail("physics", "null (the MJCF's options) or a mapping of " + ", ".join(PHYSICS_KEYS), physics)
        for key in ("timestep", "impratio"):
            check.number(physics, key, positive=True, where="physics.")
        for key in ("iterations", "ls_iterations"):
            check.integer(physics, key, low=1, where="physics.")
        if physics.get("cone") not in CONES:
            check.fail("physics.cone", f"one of {', '.join(CONES)}", physics.get("cone"))
        if abs(physics["timestep"] - meta["physics_dt"]) > 1e-6 * meta["physics_dt"]:
            check.fail("physics.timestep", f"physics_dt ({meta['physics_dt']:g} s)", physics["timestep"])
    terrain, digest = meta.get("terrain"), meta.get("terrain_sha256")
    if terrain is not None and not isinstance(terrain, dict):
        check.fail("terrain", "null (flat ground) or the terrain config (a mapping)", terrain)
    if (terrain is None) != (digest is None):
        check.fail("terrain_sha256", "set exactly when 'terrain' is (null on flat ground)", digest)
    if digest is not None and not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        check.fail("terrain_sha256", "64 lowercase hex digits (sha256 of the terrain's float32 heights)", digest)


class _Checker:
    """Checks of metadata values; each failure is one line naming the key."""

    def __init__(self, source: str | os.PathLike) -> None:
        self.source = source

    def fail(self, key: str, expected: str, value: Any) -> None:
        raise DeploymentError(f"{self.source}: metadata '{key}' must be {expected}, got {_shown(value)}")

    def of_type(self, meta: dict[str, Any], key: str, kind: type, expected: str) -> Any:
        if not isinstance(meta[key], kind):
            self.fail(key, expected, meta[key])
        return meta[key]

    def number(self, meta: dict[str, Any], key: str, positive: bool = False, where: str = "") -> float:
        value: Any = meta.get(key)  # a metadata value of any JSON type until checked here
        if not (_finite(value) and (value > 0 or not positive)):
            self.fail(where + key, "a finite number" + (" > 0" if positive else ""), value)
        return float(value)

    def integer(self, meta: dict[str, Any], key: str, low: int, where: str = "") -> int:
        if not (_is_int(meta.get(key)) and meta[key] >= low):
            self.fail(where + key, f"an integer >= {low}", meta.get(key))
        return meta[key]

    def each(self, meta: dict[str, Any], key: str, length: int | None, ok, expected: str, per: str = "action") -> list:
        """``meta[key]``: a list of ``length`` entries (``None``: any), each ``ok``."""
        values = meta[key]
        if not isinstance(values, list):
            self.fail(key, "a list", values)
        if length is not None and len(values) != length:
            raise DeploymentError(
                f"{self.source}: metadata '{key}' has {len(values)} entries, expected {length} (one per {per})"
            )
        for i, value in enumerate(values):
            if not ok(value):
                self.fail(f"{key}[{i}]", expected, value)
        return values


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value: Any) -> str:
    """``value`` for an error line: its repr, cut short, and ``(a string)`` for strings that look like
    what was expected (``"3"`` for ``3``)."""
    text = repr(value) if not isinstance(value, str) else f"{value!r} (a string)"
    return text if len(text) <= 80 else text[:77] + "..."


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

    ``metadata`` may replace the file's (checked the same way, :func:`check_metadata`); tests use
    it to show that a wrong metadata entry breaks the agreement with the training env.

    Raises:
      DeploymentError: the metadata (:func:`read_metadata`), or the network's input or output
        width differs from the metadata's ``observation_dim`` or ``action_dim``.
    """

    reads_time_step = False
    """An export's network reads the observation alone (a foreign tracking network also reads
    ``time_step``, :class:`~.foreign.ForeignPolicy`)."""

    def __init__(self, path: str | os.PathLike, metadata: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self._session = _session(path)
        if metadata is None:
            metadata = read_metadata(path, self._session)
        else:
            check_metadata(metadata, path)
        self.metadata = metadata
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name
        for what, node, key in (
            ("reads", self._session.get_inputs()[0], "observation_dim"),
            ("writes", self._session.get_outputs()[0], "action_dim"),
        ):
            width = node.shape[-1] if node.shape else None
            if isinstance(width, int) and width != metadata[key]:
                raise DeploymentError(
                    f"{path}: the network {what} {width} columns, the metadata's {key} is {metadata[key]}"
                )

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        batch = np.ascontiguousarray(obs.reshape(-1, obs.shape[-1]))
        actions = self._session.run([self._output], {self._input: batch})[0]
        return actions.reshape(*obs.shape[:-1], actions.shape[-1])
