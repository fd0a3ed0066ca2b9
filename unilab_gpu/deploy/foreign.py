"""Policies trained by other frameworks, run by this runtime: their conventions as data.

A foreign ONNX file carries no ``unilab-export`` metadata, only what its framework's own deploy
code needs (joint names, gains, perhaps command ranges); the rest of its contract lives in that
framework's code. A *format* (``formats/<name>.json``) writes that contract down once:

- ``detect.metadata_keys``: the metadata keys that identify a file of the format;
- ``metadata``: where the joint order, actuator names, ``kp``/``kd``, command ranges and a
  tracking file's own ``time_step_lead`` sit in the file's metadata (JSON values, by key; the
  last two may be absent);
- ``default_joint_pos``, ``effort_limit``: by joint name (mapped onto the file's joint order);
- ``control_dt``, ``physics_dt``, ``action_clip`` (the raw action is clipped to ``+-action_clip``
  and that clipped action is what the next observation's ``actions`` term shows);
- ``concatenation``: ``sorted_names`` (terms concatenated in the alphabetical order of their
  names, whatever order a preset lists them in) or ``listed``;
- per ``kinds`` entry (``velocity`` or ``tracking``): the network's ``inputs`` and ``outputs`` by
  role (a file's input names pick its kind), the project task whose failure terminations judge it
  (``judged_as_task``), the ``action_scale`` rule (``scalar``: ``value x action``;
  ``effort_limit_over_kp``: ``value x effort_limit / kp`` per joint), a velocity policy's
  ``gait_period_s``, a tracking policy's ``anchor_body``, ``tracked_bodies`` and ``time_step_lead``
  (the network is told ``time_step = frame + time_step_lead`` when it observes reference frame
  ``frame``: 0 where the framework's training shows frame ``k`` at ``time_step`` ``k``, 1 where a
  deploy loop feeds back the reference the previous call returned), and the
  observation ``terms``: name, ``dim``, ``scale``, the runtime ``reader`` (a key of
  :data:`.terms.TERMS`) and its ``params`` (e.g. the gait clock's per-foot offsets and
  ``lead_steps``: 1 where the framework advances its clock before observing).

:class:`ForeignPolicy` turns a file and its format into the metadata :class:`~.controller.Controller`
reads (``format`` names it), so the control step, the checks of the MJCF and sim-to-sim are the
project's own. A tracking format's network takes a ``time_step`` input (the reference frame the
controller observes plus the timing's ``time_step_lead``) and returns the reference it was trained
on; the training side reads that reference out (``unilab-motion from-onnx``,
:mod:`unilab_gpu.motion.policy_reference`), and ``unilab-sim2sim`` follows it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from .policy_file import METADATA_VERSION, DeploymentError, PolicyFile, _session, check_metadata
from .terms import MOTION_COMMAND, TERMS, VELOCITY_COMMAND

FORMATS = Path(__file__).with_name("formats")
"""The folder of the format files, one ``<name>.json`` each."""

OPTIONAL_ROLES = ("command_ranges", "time_step_lead")
"""The ``metadata`` roles a file may lack (``None``: no command ranges; the kind's ``time_step_lead``)."""

NATIVE = "unilab"
"""The format name of the project's own exports (``unilab-export`` metadata)."""


def format_names() -> list[str]:
    """The formats this runtime describes: :data:`NATIVE` and every ``formats/<name>.json``."""
    return [NATIVE, *sorted(path.stem for path in FORMATS.glob("*.json"))]


def read_format(name: str) -> dict[str, Any]:
    """The format ``name`` (``formats/<name>.json``).

    Raises:
      DeploymentError: no such format (the known ones listed).
    """
    path = FORMATS / f"{name}.json"
    if name == NATIVE or not path.is_file():
        raise DeploymentError(f"--format: '{name}' is not a foreign policy format; known: {format_names()}")
    return json.loads(path.read_text())


def detect_format(raw: dict[str, str]) -> str | None:
    """The format of a file whose raw metadata is ``raw`` (key -> string): :data:`NATIVE` for an
    ``unilab-export`` file, else the first format whose ``detect.metadata_keys`` are all there, else ``None``."""
    if "metadata_version" in raw:
        return NATIVE
    for name in format_names()[1:]:
        if all(key in raw for key in read_format(name)["detect"]["metadata_keys"]):
            return name
    return None


def open_policy(path: str | os.PathLike, format_name: str | None = None) -> PolicyFile | ForeignPolicy:
    """The policy file at ``path`` in ``format_name`` (``None``: detected from its metadata).

    Raises:
      DeploymentError: a file of no format this runtime describes, in one line.
    """
    if format_name is None:
        format_name = detect_format(_session(path).get_modelmeta().custom_metadata_map)
        if format_name is None:
            known = {name: read_format(name)["detect"]["metadata_keys"] for name in format_names()[1:]}
            raise DeploymentError(
                f"{path}: no format describes this policy: no unilab-export metadata (metadata_version) and not the "
                f"metadata keys of a foreign format {known}; export it with unilab-export, or add a format "
                "(docs/deploy.md, foreign formats)"
            )
    if format_name == NATIVE:
        return PolicyFile(path)
    return ForeignPolicy(path, format_name)


class ForeignPolicy:
    """A policy file of a foreign format (:mod:`.foreign`), with the metadata the controller reads.

    ``policy(obs)`` maps ``(observation_dim,)`` float32 to the action ``(action_dim,)``;
    ``policy(obs, frame)`` for a network that takes a ``time_step`` input (:attr:`reads_time_step`),
    ``obs`` showing reference frame ``frame``: the network is told ``frame + time_step_lead``.

    Raises:
      DeploymentError: the format has no kind with the file's inputs, the metadata lacks a key the
        format reads, or the terms do not fill the network's input.
    """

    def __init__(self, path: str | os.PathLike, format_name: str) -> None:
        self.path = Path(path)
        self.format = fmt = read_format(format_name)
        self._session = _session(path)
        raw = self._session.get_modelmeta().custom_metadata_map
        inputs = {node.name: node for node in self._session.get_inputs()}
        kinds = {kind: sorted(spec["inputs"].values()) for kind, spec in fmt["kinds"].items()}
        matching = [kind for kind, names in kinds.items() if names == sorted(inputs)]
        if not matching:
            raise DeploymentError(
                f"{path}: the network's inputs {sorted(inputs)} fit no kind of format '{format_name}' ({kinds})"
            )
        self.kind = matching[0]
        spec = fmt["kinds"][self.kind]
        self._inputs, self._outputs = spec["inputs"], spec["outputs"]
        self.reads_time_step = "time_step" in self._inputs
        values = _values(raw, fmt, path)
        lead = values.get("time_step_lead")
        self.time_step_lead = _lead(spec.get("time_step_lead", 0) if lead is None else lead, path)
        """Control steps the ``time_step`` the network is told leads the reference frame it observes."""
        self.metadata = _metadata(fmt, self.kind, values, path)
        check_metadata(self.metadata, path)
        width = inputs[self._inputs["observation"]].shape[-1]
        if isinstance(width, int) and width != self.metadata["observation_dim"]:
            terms = {t["name"]: t["dim"] for t in spec["terms"]}
            raise DeploymentError(
                f"{path}: the network reads {width} columns; format '{format_name}' ({self.kind}) describes "
                f"{self.metadata['observation_dim']} ({terms})"
            )

    def __call__(self, obs: np.ndarray, frame: int = 0) -> np.ndarray:
        feed = {self._inputs["observation"]: np.asarray(obs, dtype=np.float32).reshape(1, -1)}
        if self.reads_time_step:
            feed[self._inputs["time_step"]] = np.array([[frame + self.time_step_lead]], dtype=np.float32)
        return self._session.run([self._outputs["action"]], feed)[0].reshape(-1)


def _values(raw: dict[str, str], fmt: dict[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """The file's metadata values the format reads, by role (``metadata`` of the format)."""
    values: dict[str, Any] = {}
    for role, key in fmt["metadata"].items():
        if key not in raw:
            if role in OPTIONAL_ROLES:
                values[role] = None
                continue
            raise DeploymentError(f"{path}: metadata lacks '{key}' (format '{fmt['name']}' reads its {role} there)")
        try:
            values[role] = json.loads(raw[key])
        except json.JSONDecodeError:
            raise DeploymentError(f"{path}: metadata '{key}' is not JSON: {raw[key][:60]!r}") from None
    return values


def _lead(value: Any, path: str | os.PathLike) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value not in (0, 1):
        raise DeploymentError(f"{path}: time_step_lead is {value!r}, expected 0 or 1 (control steps)")
    return value


def _by_joint(fmt: dict[str, Any], key: str, joints: list[str], path: str | os.PathLike) -> list[float]:
    table = fmt[key]
    missing = [name for name in joints if name not in table]
    if missing:
        raise DeploymentError(f"{path}: format '{fmt['name']}' gives no {key} for joints {missing[:4]}")
    return [float(table[name]) for name in joints]


def _metadata(fmt: dict[str, Any], kind: str, values: dict[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """The runtime metadata (docs/export.md) of a file of format ``fmt`` and ``kind``."""
    spec = fmt["kinds"][kind]
    joints = [str(name) for name in values["joint_names"]]
    n = len(joints)
    defaults = _by_joint(fmt, "default_joint_pos", joints, path)
    effort = _by_joint(fmt, "effort_limit", joints, path)
    kp, kd = [float(v) for v in values["stiffness"]], [float(v) for v in values["damping"]]
    rule = spec["action_scale"]
    if rule["rule"] == "scalar":
        scale = [float(rule["value"])] * n
    elif rule["rule"] == "effort_limit_over_kp":
        if len(kp) != n:
            raise DeploymentError(f"{path}: metadata kp has {len(kp)} entries, expected {n} (one per joint)")
        scale = [float(rule["value"]) * e / p for e, p in zip(effort, kp, strict=True)]
    else:
        raise DeploymentError(
            f"format '{fmt['name']}': action_scale rule '{rule['rule']}' is not scalar or effort_limit_over_kp"
        )
    control_dt, physics_dt = float(fmt["control_dt"]), float(fmt["physics_dt"])
    if kind == "velocity":
        commands = {"twist": {"func": VELOCITY_COMMAND, "params": {"gait_frequency": 1.0 / spec["gait_period_s"]}}}
    else:
        params = {"anchor_body": spec["anchor_body"], "body_names": spec["tracked_bodies"], "motion_files": []}
        commands = {"motion": {"func": MOTION_COMMAND, "params": params}}
    terms = spec["terms"] if fmt["concatenation"] == "listed" else sorted(spec["terms"], key=lambda t: t["name"])
    observation_terms, column = [], 0
    for term in terms:
        func = term["reader"]
        if func not in TERMS:
            raise DeploymentError(
                f"format '{fmt['name']}': term '{term['name']}' names reader {func}, which the runtime lacks"
            )
        dim = int(term["dim"])
        observation_terms.append(
            {
                "name": term["name"],
                "func": func,
                "params": dict(term.get("params", {})),
                "dim": dim,
                "history": 1,
                "start": column,
                "stop": column + dim,
                "scale": float(term["scale"]),
                "clip": None,
            }
        )
        column += dim
    clip = float(fmt["action_clip"])
    return {
        "metadata_version": METADATA_VERSION,
        "format": fmt["name"],
        "format_kind": kind,
        "task": spec["judged_as_task"],
        "env_overrides": [],
        "algo": f"{fmt['name']} {kind}",
        "robot_model": fmt["robot_model"],
        "keyframe": fmt["keyframe"],
        "observation_dim": column,
        "observation_terms": observation_terms,
        "commands": commands,
        "command_ranges": values.get("command_ranges"),
        "observed_joint_names": joints,
        "observed_default_joint_pos": defaults,
        "action_dim": n,
        "action_kind": "joint_position",
        "joint_names": joints,
        "actuator_names": [str(name) for name in values["actuator_names"]],
        "action_low": [-clip] * n,
        "action_high": [clip] * n,
        "action_scale": scale,
        "action_scale_negative": scale,
        "action_offset": defaults,
        "action_offset_observation_columns": None,
        "action_bounds": [[None, None]] * n,
        "stiffness": kp,
        "damping": kd,
        "effort_limit": effort,
        "control_dt": control_dt,
        "physics_dt": physics_dt,
        "decimation": round(control_dt / physics_dt),
        "terrain": None,
        "terrain_sha256": None,
        "physics": None,
    }
