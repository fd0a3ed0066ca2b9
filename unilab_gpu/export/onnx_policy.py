"""ONNX files of deterministic policies: write (with deployment metadata), read, roll out.

The file has one input ``obs`` ``(batch, observation_dim)`` float32, the raw ``policy``
observation group, and one output ``actions`` ``(batch, action_dim)`` float32; the batch size
is free. Metadata (:func:`unilab_gpu.export.metadata.deployment_metadata`) is stored in the
model's ``metadata_props``, one JSON value per key, readable by any ONNX runtime.

Needs the ``export`` extra (``pip install "unilab-gpu[export]"``: onnx, onnxscript, onnxruntime).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from unilab_gpu.utils.files import POLICY_NAME, write_atomic

INPUT_NAME, OUTPUT_NAME = "obs", "actions"
POLICY_FILE = POLICY_NAME
STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
"""Node metadata key under which torch's exporter stores the Python stack (absolute paths)."""
"""Default file name, inside the run folder."""


def write_onnx(
    policy: nn.Module, observation_dim: int, metadata: dict[str, Any], path: str | os.PathLike, exclusive: bool = False
) -> Path:
    """Export ``policy`` (``(batch, observation_dim)`` -> actions, on the CPU) to ``path``
    atomically, with ``metadata`` (JSON-serialisable values) in ``metadata_props``; ``exclusive``:
    only if no file is there when it is done (:func:`~unilab_gpu.utils.files.write_atomic`)."""
    example = torch.zeros(2, observation_dim)  # batch >= 2 so the exporter keeps it symbolic
    return write_exported(
        policy,
        (example,),
        metadata,
        path,
        exclusive,
        input_names=[INPUT_NAME],
        output_names=[OUTPUT_NAME],
        dynamic_shapes=({0: torch.export.Dim("batch")},),
    )


def write_exported(
    module: nn.Module,
    example: tuple[torch.Tensor, ...],
    metadata: dict[str, Any],
    path: str | os.PathLike,
    exclusive: bool = False,
    **export_options: Any,
) -> Path:
    """``torch.onnx.export`` (dynamo) of ``module`` at ``example`` with ``export_options`` (names,
    dynamic shapes), written to ``path`` atomically with ``metadata`` as JSON values in
    ``metadata_props``, stack traces dropped, checked; ``exclusive`` as in
    :func:`~unilab_gpu.utils.files.write_atomic`."""
    import onnx  # optional dependency

    # The exporter's chatter (deprecations, "torchvision is not installed") is not the user's business.
    registry_log = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = registry_log.level
    registry_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                module, example, dynamo=True, verbose=False, external_data=False, **export_options
            )
    finally:
        registry_log.setLevel(level)
    model = program.model_proto
    drop_stack_traces(model)
    onnx.helper.set_model_props(model, {key: json.dumps(value) for key, value in metadata.items()})
    onnx.checker.check_model(model)
    return write_atomic(path, lambda file: file.write(model.SerializeToString()), exclusive=exclusive)


def drop_stack_traces(model: Any) -> None:
    """Remove the exporter's per-node Python stack traces from ``model`` (an ``onnx.ModelProto``).

    They name source files by the exporting machine's absolute paths, which a committed or shipped
    policy must not carry; the graph itself is unchanged."""
    for node in [*model.graph.node, *(n for function in model.functions for n in function.node)]:
        kept = [prop for prop in node.metadata_props if prop.key != STACK_TRACE_KEY]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of an exported file, decoded (key -> value)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    return {prop.key: json.loads(prop.value) for prop in model.metadata_props}


class OnnxPolicy:
    """An exported file as a policy: ``obs`` group dict of torch tensors -> torch actions.

    Runs on the CPU with onnxruntime; observations are copied to the host and actions back to
    their device, so this is for checking and deployment rehearsal, not for training speed.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        import onnxruntime

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"ONNX policy not found: {path}")
        self.metadata = read_metadata(path)
        self.group = self.metadata.get("observation_group", "policy")
        self._session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def __call__(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        x = obs[self.group]
        y = self.run(x.detach().cpu().numpy())
        return torch.from_numpy(y).to(x.device)

    def run(self, obs: np.ndarray) -> np.ndarray:
        """``(batch, observation_dim)`` float32 -> ``(batch, action_dim)`` float32."""
        return self._session.run([OUTPUT_NAME], {INPUT_NAME: np.ascontiguousarray(obs, dtype=np.float32)})[0]
