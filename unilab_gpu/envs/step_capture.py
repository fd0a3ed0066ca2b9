"""Compile and capture of the env step: the regions ``torch.compile`` builds and the one CUDA graph.

``StepCapture`` is the compile-and-capture phase of ``ManagerBasedRlEnv`` (a mixin: it wraps the
phase functions of ``envs.step_phases.StepPhases`` and captures ``run_step_body``). Everything
here runs on the cold path: at construction and at the first ``reset``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch

from unilab_gpu.envs.snapshot import EnvSnapshot
from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph, capture_unsupported_reason
from unilab_gpu.utils.compiling import maybe_compile


class CaptureReplayError(RuntimeError):
    """The captured step's first replay did not reproduce the eager step."""


class StepCapture:
    """Builds the step's compiled regions and captures the step as one CUDA graph."""

    def _prepare_compile_and_capture(self, compile: bool, capture: bool | str) -> None:
        """Wrap the step's phase functions in compiled regions and decide whether ``reset``
        captures the step (the device must be CUDA and able to capture); see ``__init__``."""
        self.compiled = compile
        """Whether the manager phases run through ``torch.compile``."""

        # The region options and boundaries below work around torch.compile: docs/architecture.md,
        # "Compiler workarounds" (each, and the version it was seen on).
        options = {"fallback_random": True, "reorder_for_locality": False}
        if self.device.type == "cpu":
            # Not a workaround, a cost: Python's wrapper around a region's kernels (a size check,
            # an allocation and a release per buffer) costs more than the kernels at a few hundred
            # rows; in C++ it is cheap. On CUDA the step is replayed as a graph, without wrappers.
            options["cpp_wrapper"] = True

        def wrap(fn: Callable) -> Callable:
            return maybe_compile(fn, compile, options=options)

        # Every region call costs a Python-level entry (guards, loading its inputs, the wrapper)
        # that dwarfs its kernels at a few hundred rows and runs on cold caches after physics:
        # the step has as few regions as the workarounds allow.
        self._advance_apart = self.command_manager.advances
        """Whether a command's ``advance`` runs in a region of its own after evaluate (with the
        final observations); without one, evaluate ends with the final observations."""
        self._apply_actions = wrap(self._apply_actions_eager)
        self._evaluate = wrap(self._evaluate_eager)
        self._advance_and_observe_final = wrap(self._advance_and_observe_final_eager)
        self._stage_resets = wrap(self._stage_resets_eager)
        self._finish_resets_and_observe = wrap(self._finish_resets_and_observe_eager)
        self._observe = wrap(self._observe_eager)
        self._graph: CudaGraph | None = None
        self.capture_mode = capture
        """``"auto"``, ``True`` or ``False``, as given."""
        self.capture_skipped: str | None = None
        """Why the step runs eagerly on this CUDA device (``None`` when it is captured or on CPU)."""
        self._capture = capture is not False and self.device.type == "cuda"
        if self._capture and (reason := capture_unsupported_reason(self.device)) is not None:
            self._skip_capture(reason, stacklevel=4)  # the warning points at the env's builder

    def _capture_step(self) -> None:
        """Capture the step, check one replay against the eager step, leave no trace.

        Warm-up, capture and check all run from a snapshot of the env's state (every tensor and
        the RNG states) that is restored afterwards, so a captured env continues exactly as one
        that never captured. On failure: raise with ``capture=True``, else warn and stay eager.
        """
        snapshot = EnvSnapshot(self)
        try:
            self._action_in.zero_()
            graph = self._make_graph(self.run_step_body)
            mismatch = self._first_replay_mismatch(graph, snapshot)
            if mismatch is not None:
                raise CaptureReplayError(f"the first replay differs from the eager step: {mismatch}")
            self._graph = graph
        except Exception as error:
            if self.capture_mode is True:
                raise
            self._skip_capture(f"capture failed ({type(error).__name__}: {error})")
        finally:
            snapshot.restore()

    def _make_graph(self, fn: Callable[[], None]) -> CudaGraph:
        return CudaGraph(fn, self.device, warmup=2)

    def _first_replay_mismatch(self, graph: CudaGraph, snapshot: EnvSnapshot) -> str | None:
        """Run one eager step and one replay from the snapshot; describe how they differ, if so.

        A graph that recorded the wrong stream or stale addresses replays nothing or garbage;
        one eager step and one replay from the same state agree to float precision otherwise
        (MJWarp's contact atomics may reorder sums: hence a tolerance, not equality).
        """
        outputs = {"qpos": self.sim.state.qpos, "qvel": self.sim.state.qvel, "reward": self.reward_manager.reward}
        outputs.update({f"obs.{k}": v for k, v in self.observation_manager.obs.items()})
        snapshot.restore()
        self.run_step_body()
        eager = {name: t.clone() for name, t in outputs.items()}
        snapshot.restore()
        graph.replay()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # surfaces a replay error here, on the cold path
        for name, expected in eager.items():
            got = outputs[name]
            if not torch.allclose(got, expected, rtol=1e-3, atol=1e-3, equal_nan=True):
                worst = (got - expected).abs().nan_to_num(float("inf")).max()
                return f"{name} differs by up to {float(worst):.3g}"
        return None

    def _skip_capture(self, reason: str, stacklevel: int = 3) -> None:
        if self.capture_mode is True:
            raise CaptureUnsupportedError(reason)
        self._capture = False
        self.capture_skipped = reason
        warnings.warn(f"unilab-gpu: the env step runs eagerly on {self.device}: {reason}", stacklevel=stacklevel)
