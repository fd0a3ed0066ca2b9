"""One gradient update of the training loop as one device function: replay sampling, the agent's
update and the sums of its metrics, captured as a CUDA graph on CUDA.

Beside the captured env step, the update is the rest of an iteration on the device. Everything it
runs is static-shape and host-sync free (:meth:`ReplayBuffer.sample
<unilab_gpu.rl.replay.ReplayBuffer.sample>`, :meth:`OffPolicyAgent.update_body
<unilab_gpu.rl.off_policy.OffPolicyAgent.update_body>`): the optimizers are capturable fused
AdamW steps reading the schedule's learning-rate tensor, their step counters live on the device,
the random numbers come from torch generators on the device, and every tensor written outlives
the call. So on CUDA, with ``algo.capture_update``, :class:`UpdateStep` records it as one CUDA
graph per actor phase (an update with the actor and temperature step, one without: the phase is
the host's update count, ``actor_update_period``) and afterwards only replays graphs.

Capture follows torch's documentation ("CUDA Graphs", whole-network capture) through the env's own
:class:`~unilab_gpu.sim.capture.CudaGraph`: the first :data:`WARM_RUNS` updates of each phase run
for real on a side stream (compiled functions, lazy loads, ``.grad`` tensors and optimizer state are
made in the first; the second shows that nothing is left to compile or allocate), each the update of
its call; the next one is recorded without running and then replayed, which is that call's update.
A warm-up run that fails (out of memory, an Inductor error) raises as such, and is not counted; a
recording that fails leaves the updates uncaptured, with a warning. Loading the agent's state
replaces its optimizers' state tensors, which a graph recorded by address: the trainer then calls
:meth:`UpdateStep.recapture`. The replay-sampling generators are registered with each graph
(``CUDAGraph.register_generator_state``), so every replay draws fresh numbers from them as eager
updates would; the agent's own draws use the device's default generator, which torch registers
itself. A replayed graph's outputs are the graph's memory: the metrics are added to the trainer's
accumulator inside the graph, before the next replay can overwrite them.

On the CPU (and on CUDA without ``capture_update``) the same sampling and update run directly,
their losses, projections and target update compiled where ``algo.compile`` is set. Autograd's
backward and the optimizer steps stay outside ``torch.compile`` there (``Optimizer.step`` is a
graph break by design in torch 2.13, ``torch/optim/optimizer.py``); on CUDA the graph holds them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence

import torch

from unilab_gpu.rl.off_policy import OffPolicyAgent
from unilab_gpu.rl.replay import ReplayBuffer
from unilab_gpu.sim.capture import CaptureUnsupportedError, CudaGraph

WARM_RUNS = 2
"""Uncaptured updates of each actor phase before that phase is captured."""


class UpdateWarmUpError(RuntimeError):
    """An update run before its capture failed (e.g. out of memory, an Inductor error)."""


class UpdateStep:
    """Draw a batch from ``replay``, update ``agent`` on it, add its metrics to ``metric_sums``.

    Args:
        agent: the agent to update.
        replay: the buffer batches are drawn from.
        batch_size: transitions per update.
        generator: replay sampling generator (on the replay's device).
        metric_sums: ``(len(metric_keys),)`` device accumulator the metrics are added to.
        metric_keys: which of the update's metrics, in ``metric_sums`` order.
        capture: capture the update as CUDA graphs (only on a CUDA device; see the module docstring).
    """

    def __init__(
        self,
        agent: OffPolicyAgent,
        replay: ReplayBuffer,
        batch_size: int,
        generator: torch.Generator,
        metric_sums: torch.Tensor,
        metric_keys: Sequence[str],
        capture: bool = False,
    ) -> None:
        if capture and agent.device.type != "cuda":
            raise ValueError(f"algo.capture_update: needs a CUDA device, the agent is on '{agent.device}'")
        self.agent, self.replay, self.batch_size, self.generator = agent, replay, batch_size, generator
        self.metric_sums, self.metric_keys = metric_sums, tuple(metric_keys)
        self.capture = capture
        """Whether updates are (to be) captured; turns false if a capture fails."""
        self.graphs: dict[bool, CudaGraph] = {}
        """Captured updates by actor phase (``True``: with the actor and temperature step)."""
        self.warm_runs = {True: 0, False: 0}
        """Uncaptured runs so far of each actor phase (up to :data:`WARM_RUNS`, then it is captured)."""
        self._side_stream: torch.cuda.Stream | None = None

    @property
    def mode(self) -> str:
        """How updates run now: ``"captured"`` (replayed CUDA graphs, once one is made), else
        ``"compiled"`` (``algo.compile``) or ``"eager"``."""
        if self.graphs:
            return "captured"
        return "compiled" if self.agent.cfg.compile else "eager"

    def __call__(self) -> None:
        """One update; no host sync (replaying a graph only launches it)."""
        if not self.capture:
            self._add(self.agent.update(self.replay.sample(self.batch_size, self.generator)))
            return
        actor_step = self.agent.actor_step_due()
        graph = self.graphs.get(actor_step)
        if graph is not None:
            graph.replay()
        elif self.warm_runs[actor_step] < WARM_RUNS:
            self._warm_up(actor_step)
        elif not self._capture(actor_step):
            return  # the recording failed: this call's update ran uncaptured, and counted itself
        else:
            self.graphs[actor_step].replay()  # the recording ran nothing: this is the call's update
        self.agent.num_updates += 1

    def recapture(self) -> None:
        """Forget the graphs and warm-up runs: the next updates warm up and are captured again
        (after the agent's state was loaded, its optimizers hold new state tensors)."""
        self.graphs.clear()
        self.warm_runs = {True: 0, False: 0}

    def _body(self, actor_step: bool) -> None:
        """What a graph records: sample, update, add the metrics."""
        self._add(self.agent.update_body(self.replay.sample(self.batch_size, self.generator), actor_step))

    def _add(self, metrics: dict[str, torch.Tensor]) -> None:
        self.metric_sums.add_(torch.stack([metrics[key] for key in self.metric_keys]))

    def _warm_up(self, actor_step: bool) -> None:
        """One real update of this phase on a side stream, ordered after and before the caller's work.

        Raises:
            UpdateWarmUpError: the update itself failed (nothing was captured; it is not counted).
        """
        caller = torch.cuda.current_stream(self.agent.device)
        if self._side_stream is None:
            self._side_stream = torch.cuda.Stream(self.agent.device)
        self._side_stream.wait_stream(caller)
        try:
            with torch.cuda.stream(self._side_stream):
                self._body(actor_step)
        except Exception as error:
            raise UpdateWarmUpError(
                f"algo.capture_update: the update's warm-up run {self.warm_runs[actor_step] + 1} of {WARM_RUNS} "
                f"failed ({type(error).__name__}: {error}); nothing was captured and the update was not counted"
            ) from error
        finally:
            caller.wait_stream(self._side_stream)
        self.warm_runs[actor_step] += 1

    def _capture(self, actor_step: bool) -> bool:
        """Record the update of this phase (:class:`CudaGraph`, no warm-up run of its own); whether it was.

        If the recording fails, this call's update runs uncaptured and so do later ones, with a
        one-line warning that says why.
        """
        generators = (self.generator, self.replay.redraw_generator)
        try:
            self.graphs[actor_step] = CudaGraph(
                functools.partial(self._body, actor_step), self.agent.device, warmup=0, generators=generators
            )
            return True
        except (CaptureUnsupportedError, RuntimeError) as error:
            self.capture = False
            self.graphs.clear()
            warnings.warn(
                f"algo.capture_update: the update could not be captured ({type(error).__name__}: {error}); "
                "updates run uncaptured",
                stacklevel=2,
            )
        self._add(self.agent.update(self.replay.sample(self.batch_size, self.generator)))
        return False
