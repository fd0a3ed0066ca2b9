"""Types and ranges of the top-level keys of ``configs/train.yaml``, checked before a run starts.

Hydra reads ``seed=abc`` as the string ``"abc"`` and ``total_env_steps=-5`` as a valid int; both
would otherwise surface as a traceback (or a silent no-op run) long after the run folder was
made. Each error names the key path and the value.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

PROGRESS_MODES = ("auto", "bar", "lines")

_COUNTS = {
    # key path: smallest allowed value
    "seed": None,
    "total_env_steps": 1,
    "log_every": 1,
    "checkpoint_every": 0,
    "env.cuda_num_envs": 1,
    "env.cpu_num_envs": 1,
}


def check_train_config(cfg: DictConfig) -> None:
    """Raise ``ValueError`` naming the first bad key (``train config: 'seed' must be ...``)."""
    for key, low in _COUNTS.items():
        _count(key, _get(cfg, key), low)
    if _get(cfg, "env.num_envs") is not None:
        _count("env.num_envs", _get(cfg, "env.num_envs"), 1)
    if cfg.progress not in PROGRESS_MODES:
        _fail("progress", f"one of {', '.join(PROGRESS_MODES)}", cfg.progress)
    if cfg.env.capture not in (True, False, "auto"):
        _fail("env.capture", "auto, true or false", cfg.env.capture)
    if not isinstance(cfg.get("export_onnx", True), bool):
        _fail("export_onnx", "true or false", cfg.export_onnx)
    if not isinstance(cfg.get("viewer", False), bool):
        _fail("viewer", "true or false", cfg.viewer)
    if cfg.get("viewer", False):
        port = cfg.get("viewer_port", 8080)
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            _fail("viewer_port", "a port in [0, 65535] (0: a free one)", port)
        _count("viewer_worlds", cfg.get("viewer_worlds", 4), 1)
    for key in ("task", "run_root"):
        if not isinstance(_get(cfg, key), str) or not _get(cfg, key):
            _fail(key, "a non-empty string", _get(cfg, key))
    for key in ("run_dir", "resume"):
        value = _get(cfg, key)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            _fail(key, "a path or null", value)
    overrides = cfg.env.overrides
    if not OmegaConf.is_list(overrides) or not all(isinstance(o, str) for o in overrides):
        _fail("env.overrides", "a list of Hydra overrides in brackets, e.g. \"env.overrides=['a=1']\"", overrides)


def _get(cfg: DictConfig, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    return node


def _count(key: str, value: Any, low: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(key, "a whole number", value)
    if low is not None and value < low:
        _fail(key, f">= {low}", value)


def _fail(key: str, expected: str, value: Any) -> None:
    raise ValueError(f"train config: '{key}' must be {expected}, got {value!r}")
